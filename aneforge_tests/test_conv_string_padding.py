"""padding='same' / 'valid' in conv1d / conv2d and nn.Conv1d / nn.Conv2d, against torch."""
import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F


@pytest.mark.parametrize("kernel, dilation", [((3, 3), 1), ((2, 4), 1), ((3, 2), (2, 3)),
                                              ((1, 1), 1)])
@pytest.mark.parametrize("padding", ["same", "valid"])
def test_conv2d_string_padding_matches_torch(kernel, dilation, padding):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float16).astype(np.float32)
    w = (rng.standard_normal((4, 3, *kernel)) * 0.3).astype(np.float16).astype(np.float32)
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    ax, aw = (af.tensor(a, requires_grad=True) for a in (x, w))
    ref = torch.nn.functional.conv2d(tx, tw, padding=padding, dilation=dilation)
    out = F.conv2d(ax, aw, padding=padding, dilation=dilation)
    assert out.shape == tuple(ref.shape)
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref.detach().numpy(),
                               rtol=2e-2, atol=2e-2)
    ref.square().sum().backward()
    out.square().sum().backward()
    for a, t in ((ax, tx), (aw, tw)):
        np.testing.assert_allclose(a.grad.numpy().astype(np.float32), t.grad.numpy(),
                                   rtol=3e-2, atol=0.15)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_conv1d_and_modules_take_string_padding(k):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 10)).astype(np.float16).astype(np.float32)
    m = nn.Conv1d(3, 5, k, padding="same")
    tm = torch.nn.Conv1d(3, 5, k, padding="same")
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(m.weight.numpy().astype(np.float32)))
        tm.bias.copy_(torch.tensor(m.bias.numpy().astype(np.float32)))
    out, ref = m(af.tensor(x)), tm(torch.tensor(x))
    assert out.shape == tuple(ref.shape) == (2, 5, 10)
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref.detach().numpy(),
                               rtol=2e-2, atol=2e-2)
    assert nn.Conv2d(3, 5, k, padding="valid")(af.tensor(x[:, :, None].repeat(k, 2))).shape \
        == (2, 5, 1, 11 - k)


def test_bad_string_padding_says_what_to_do():
    x, w = af.ones(1, 1, 5, 5), af.ones(1, 1, 3, 3)
    with pytest.raises(ValueError, match="strided"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(ValueError, match="'valid', 'same'"):
        F.conv2d(x, w, padding="full")
