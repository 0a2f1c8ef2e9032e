"""Dimension arguments are checked as torch checks them: same accept/reject, torch's messages."""
import pytest
import torch

import aneforge as af

CALLS = {
    "sum": lambda t, d: t.sum(dim=d), "var": lambda t, d: t.var(dim=d),
    "squeeze": lambda t, d: t.squeeze(d), "unsqueeze": lambda t, d: t.unsqueeze(d),
    "transpose": lambda t, d: t.transpose(0, d), "size": lambda t, d: t.size(d),
    "split": lambda t, d: t.split(1, d), "chunk": lambda t, d: t.chunk(2, d),
    "flatten": lambda t, d: t.flatten(d), "movedim": lambda t, d: t.movedim(d, 0),
    "permute": lambda t, d: t.permute(d, 0), "amax": lambda t, d: t.amax(dim=d),
}


@pytest.mark.parametrize("name", list(CALLS))
@pytest.mark.parametrize("d", [-4, -3, -2, -1, 0, 1, 2, 3, 1.5])
def test_dims_are_accepted_and_rejected_as_in_torch(name, d):
    fn = CALLS[name]
    try:
        fn(torch.ones(2, 3), d)
        torch_error = None
    except (IndexError, TypeError, RuntimeError) as e:
        torch_error = e
    if torch_error is None:
        fn(af.ones(2, 3), d)
        return
    expected = {TypeError: TypeError, IndexError: IndexError}.get(type(torch_error),
                                                                  (IndexError, af.AneforgeError))
    with pytest.raises(expected):
        fn(af.ones(2, 3), d)


def test_the_message_is_torchs():
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of "
                                         r"\[-2, 1\], but got 3\)"):
        af.ones(2, 3).sum(3)


@pytest.mark.parametrize("call, error", [
    (lambda: af.ones(4).split(0), "split_size be positive"),
    (lambda: af.ones(4).chunk(0), "greater than 0"),
    (lambda: af.randn(2, 3.5), "found element of type float at pos 1"),
])
def test_bad_sizes_raise(call, error):
    with pytest.raises((ValueError, TypeError), match=error):
        call()


@pytest.mark.parametrize("target", [[0, 4], [-1, 0]])
def test_class_targets_out_of_range_raise_as_in_torch(target):
    import aneforge.nn.functional as F
    with pytest.raises(IndexError, match="out of bounds"):
        torch.nn.functional.cross_entropy(torch.zeros(2, 4), torch.tensor(target))
    with pytest.raises(IndexError, match=f"Target {target[1] if target[1] == 4 else -1} is out of bounds"):
        F.cross_entropy(af.zeros(2, 4), af.tensor(target))
    with pytest.raises(IndexError, match="out of bounds"):
        F.nll_loss(af.zeros(2, 4), af.tensor(target))
    F.cross_entropy(af.zeros(2, 4), af.tensor([0, -100]))      # ignore_index is fine


def test_int64_data_that_int32_would_wrap_is_refused():
    import numpy as np
    with pytest.raises(OverflowError, match="does not fit int32"):
        af.tensor(np.array([2 ** 40]))
    assert af.tensor(np.array([2 ** 31 - 1])).tolist() == [2 ** 31 - 1]
