"""Pooling and convolution gradients where torch makes a choice: a window with several equal
maximums sends its gradient to the first one (row-major), as torch's max_pool2d does."""
import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn.functional as F

TIES = np.array([[1, 1, 2, 0, 5], [0, 1, 2, 2, 5], [3, 3, 0, 0, 5], [3, 3, 0, 0, 5]], np.float32)


def relu_ties(seed=0):
    """ReLU outputs of a mostly negative field: many zeros tie inside a window."""
    x = np.random.default_rng(seed).standard_normal((2, 3, 6, 6)) - 1.0
    return np.maximum(x, 0).astype(np.float16).astype(np.float32)


CASES = {   # name: (input, max_pool2d arguments)
    "2x2": (TIES[None, None, :, :4], dict(kernel_size=2)),
    "3x3_stride1_pad1": (TIES[None, None], dict(kernel_size=3, stride=1, padding=1)),
    "ceil_mode": (TIES[None, None], dict(kernel_size=2, ceil_mode=True)),
    "dilation": (TIES[None, None], dict(kernel_size=2, stride=1, dilation=2)),
    "unbatched": (TIES[None, :, :4], dict(kernel_size=2)),
    "relu_zeros": (relu_ties(), dict(kernel_size=2)),
    "relu_zeros_3x3": (relu_ties(1), dict(kernel_size=3, stride=2, padding=1)),
}


@pytest.mark.parametrize("name", CASES)
def test_max_pool2d_ties_match_torch(name):
    x, kw = CASES[name]
    c = np.random.default_rng(2).standard_normal(
        torch.nn.functional.max_pool2d(torch.tensor(x), **kw).shape).astype(np.float16)
    xa, xt = af.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yt = F.max_pool2d(xa, **kw), torch.nn.functional.max_pool2d(xt, **kw)
    np.testing.assert_array_equal(ya.numpy(), yt.detach().numpy())
    (ya * af.tensor(c)).sum().backward()
    (yt * torch.tensor(c.astype(np.float32))).sum().backward()
    # same positions; overlapping windows add their gradients in fp16 (torch: fp32)
    want = xt.grad.numpy()
    np.testing.assert_allclose(xa.grad.numpy(), want, rtol=2 ** -10,
                               atol=2 ** -10 * np.abs(want).max())


def test_max_pool1d_ties_match_torch():
    x = np.array([[[2.0, 2.0, 1.0, 3.0, 3.0, 3.0]]], np.float32)
    xa, xt = af.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    F.max_pool1d(xa, 3, stride=1).sum().backward()
    torch.nn.functional.max_pool1d(xt, 3, stride=1).sum().backward()
    np.testing.assert_array_equal(xa.grad.numpy(), xt.grad.numpy())


def test_cnn_block_matches_torch():
    """conv -> relu -> max_pool, the digits CNN's block, forward and every gradient."""
    rng = np.random.default_rng(0)
    x = rng.random((4, 2, 8, 8)).astype(np.float16).astype(np.float32)
    w = (rng.standard_normal((3, 2, 3, 3)) * 0.3).astype(np.float16).astype(np.float32)
    b = (rng.standard_normal(3) * 0.1).astype(np.float16).astype(np.float32)
    a = [af.tensor(v, requires_grad=True) for v in (x, w, b)]
    t = [torch.tensor(v, requires_grad=True) for v in (x, w, b)]
    ya = F.max_pool2d(F.relu(F.conv2d(a[0], a[1], a[2], padding=1)), 2)
    yt = torch.nn.functional.max_pool2d(torch.relu(torch.nn.functional.conv2d(
        t[0], t[1], t[2], padding=1)), 2)
    # atol at the terms' scale (~1): the M1 accumulator's in-tile adder truncates to 12 bits of
    # the partial sums, so a small output of cancelling terms errs by ~2**-11 of the terms
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=2 ** -9, atol=2 ** -10)
    c = rng.standard_normal(tuple(yt.shape)).astype(np.float16)
    (ya * af.tensor(c)).sum().backward()
    (yt * torch.tensor(c.astype(np.float32))).sum().backward()
    for name, ga, gt in zip(("input", "weight", "bias"), a, t):
        scale = np.abs(gt.grad.numpy()).max()
        np.testing.assert_allclose(ga.grad.numpy(), gt.grad.numpy(), rtol=2 ** -7,
                                   atol=2 ** -8 * scale, err_msg=name)
