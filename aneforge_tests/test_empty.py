"""Empty tensors (a size-0 axis) are host values with torch's results (aneforge/core/empty.py).

The ANE has no empty tensors; torch code makes them (a slice past the end, a reduction over a
size-0 axis, `cat` with an empty piece). Each case runs in both libraries and must give the
same shape and values; no program is compiled for them.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import aneforge as af

CASES = {
    "tensor([])": lambda L: L.tensor([]),
    "zeros(0, 3)": lambda L: L.zeros(0, 3),
    "empty(0)": lambda L: L.empty(0),
    "eye(0)": lambda L: L.eye(0),
    "linspace steps=0": lambda L: L.linspace(0, 1, 0),
    "x[1:1]": lambda L: L.arange(10)[1:1],
    "x[5:10] past the end": lambda L: L.ones(3)[5:10],
    "x[-2:-5]": lambda L: L.ones(3)[-2:-5],
    "x[:, 2:2, 1]": lambda L: L.ones(4, 3, 2)[:, 2:2, 1],
    "mask selecting nothing": lambda L: (lambda x: x[x > 5])(L.ones(2, 3)),
    "nonzero of zeros": lambda L: (L.ones(2, 3) * 0).nonzero(),
    "computed mask selecting nothing": lambda L: (lambda x: x[x * 2 > 100])(L.ones(2, 3)),
    "masked_select of nothing": lambda L: L.ones(2, 3).masked_select(L.zeros(2, 3) > 1),
    "narrow length 0": lambda L: L.ones(4, 3).narrow(0, 1, 0),
    "expand to 0": lambda L: L.ones(4, 1, 3).expand(4, 0, 3),
    "sum over size 0": lambda L: L.ones(4, 0).sum(1),
    "sum of all": lambda L: L.ones(4, 0).sum(),
    "mean over size 0 (NaN)": lambda L: L.ones(4, 0).mean(1),
    "var over size 0 (NaN)": lambda L: L.ones(4, 0).var(1),
    "std keepdim": lambda L: L.ones(2, 0, 3).std(1, keepdim=True),
    "sum keeping the empty axis": lambda L: L.ones(2, 0, 3).sum(2),
    "any over size 0": lambda L: L.ones(4, 0).any(1),
    "all over size 0": lambda L: L.ones(4, 0).all(1),
    "elementwise": lambda L: (L.ones(4, 0) + 1).exp(),
    "broadcast with empty": lambda L: L.ones(4, 1, 1) * L.ones(0, 3),
    "cat with an empty piece": lambda L: L.cat([L.ones(2, 0), L.ones(2, 3) * 2], 1),
    "cat with a 1-D empty piece": lambda L: L.cat([L.ones(2, 3), L.tensor([])], 0),
    "matmul with K = 0": lambda L: L.ones(2, 0) @ L.ones(0, 3),
    "reshape": lambda L: L.ones(4, 0).reshape(0, 4),
    "transpose": lambda L: L.ones(4, 0, 2).transpose(0, 2),
    "cumsum": lambda L: L.ones(2, 0).cumsum(1),
    "tril": lambda L: L.ones(5, 0, 3).tril(),
    "pad grows it": lambda L: L.nn.functional.pad(L.ones(0, 3), (0, 0, 1, 1), value=2.0),
    "int tensor": lambda L: L.zeros(0, 2, dtype=L.int32) + 1,
    "stack of empties": lambda L: L.stack([L.ones(0, 2), L.ones(0, 2)]),
}


def _values(x) -> np.ndarray:
    return np.asarray(x.detach().numpy() if isinstance(x, torch.Tensor) else x.numpy(),
                      dtype=np.float64)


@pytest.mark.parametrize("name", list(CASES))
def test_empty_tensors_give_torchs_shapes_and_values(name):
    want = CASES[name](torch)
    before = af.cache_info().misses
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)      # torch's var with too few values
        got = CASES[name](af)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(_values(got), _values(want))
    if name not in ("cat with an empty piece", "mask selecting nothing", "nonzero of zeros",
                    "computed mask selecting nothing", "masked_select of nothing"):  # computed
        assert af.cache_info().misses == before          # nothing compiled for a host value


def test_a_max_over_an_empty_axis_is_refused_as_in_torch():
    with pytest.raises(IndexError):
        torch.ones(4, 0).amax(1)
    with pytest.raises(IndexError, match="non-zero size"):
        af.ones(4, 0).amax(1)


def test_gradients_flow_past_an_empty_piece():
    x = af.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    e = af.zeros(2, 0, requires_grad=True)
    (af.cat([e, x], 1) * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 2), 3.0))


def test_mixing_an_empty_operand_with_a_pending_value_says_what_to_do():
    """torch-level code drops empty pieces (cat); a raw op given one and a value not computed
    yet, with a result that is not empty, is refused with the way out."""
    from aneforge.tensor import record_op
    pending = af.ones(2, 3) * 2.0
    with pytest.raises(af.LimitError, match="empty operand, or one with an axis past 65536, meets a value still being computed"):
        record_op("concat", {"values": (af.ones(2, 0), pending)}, {"axis": 1})
    pending.numpy()                                       # realized: now it has values
    out = record_op("concat", {"values": (af.ones(2, 0), pending)}, {"axis": 1})
    np.testing.assert_array_equal(out.numpy(), np.full((2, 3), 2.0))


def test_programs_still_refuse_empty_inputs():
    """MIL programs hold no empty tensor: a parsed program with one is a LimitError."""
    with pytest.raises(af.AneforgeError, match="size 0"):
        af.load_mil("program(1.3)\n{\n  func main<ios18>(tensor<fp16, [0, 4]> x) {\n"
                    "  } -> (x);\n}\n")


def test_empty_inputs_get_empty_gradients_as_in_torch():
    xs = [af.ones(45, 0, 9, requires_grad=True) for _ in range(3)]
    assert [g.shape for g in af.grad(af.cat(xs, 1).sum(), xs)] == [(45, 0, 9)] * 3
    a, e = af.ones(4, 3, requires_grad=True), af.ones(4, 0, requires_grad=True)
    ga, ge = af.grad((af.cat([a, e], 1) * 2).sum(), [a, e])
    assert ga.tolist() == [[2.0] * 3] * 4 and ge.shape == (4, 0)
