"""Rank > 5 tensors between reshapes (tensor/highrank.py), forward and gradients against torch:
the patterns real model code writes (Swin's window partition and reverse, a hand-written pixel
shuffle, a ViT patchify), broadcasts, arithmetic, reductions, and the refusals."""
import numpy as np
import pytest
import torch

import aneforge as af

RNG = np.random.default_rng(0)


def _window_partition(x, w=2):
    """Swin Transformer's window_partition (microsoft/Swin-Transformer, MIT)."""
    B, H, W, C = x.shape
    x = x.view(B, H // w, w, W // w, w, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, w, w, C)


def _window_reverse(windows, H, W, w=2):
    B = int(windows.shape[0] / (H * W / w / w))
    x = windows.view(B, H // w, W // w, w, w, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


def _pixel_shuffle(x, r=2):
    B, C, H, W = x.shape
    x = x.view(B, C // (r * r), r, r, H, W).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(B, C // (r * r), H * r, W * r)


def _patchify(x, p=2):
    """A ViT/MAE-style patchify: N, C, H, W -> N, L, p*p*C."""
    n, c, h, w = x.shape
    x = x.reshape(n, c, h // p, p, w // p, p).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(n, (h // p) * (w // p), p * p * c)


def _mae_patchify(m, imgs, p=2):
    """MAE's patchify (facebookresearch/mae models_mae.py, CC BY-NC 4.0; the pattern, rewritten)."""
    h, w = imgs.shape[2] // p, imgs.shape[3] // p
    x = imgs.reshape(shape=(imgs.shape[0], 3, h, p, w, p))
    x = m.einsum("nchpwq->nhwpqc", x)
    return x.reshape(shape=(imgs.shape[0], h * w, p ** 2 * 3))


CASES = {
    "mae_patchify_einsum": ((2, 3, 8, 6), _mae_patchify),
    "window_partition": ((2, 8, 8, 3), lambda m, x: _window_partition(x)),
    "window_round_trip": ((2, 8, 8, 3), lambda m, x: _window_reverse(_window_partition(x) * 2, 8, 8)),
    "pixel_shuffle": ((2, 12, 4, 5), lambda m, x: _pixel_shuffle(x)),
    "patchify": ((2, 3, 8, 6), lambda m, x: _patchify(x)),
    "expand_rank6": ((4, 3, 1, 6), lambda m, x: x.expand((6, 1, 4, 3, 2, 6)) * 1.5),
    "unflatten_sum": ((4, 3, 6, 6), lambda m, x: x.unflatten(-1, (3, 2, 1)).sum(dim=(1, 4))),
    "mean_keepdim": ((4, 3, 6, 6), lambda m, x: x.view(2, 2, 3, 3, 2, 6).mean(dim=3, keepdim=True)),
    "elementwise": ((4, 3, 6, 6), lambda m, x: 1 - (x.view(2, 2, 3, 3, 2, 6) * 0.5).exp()),
    "two_operands": ((4, 3, 6, 6), lambda m, x: x.view(2, 2, 3, 3, 2, 6) * (x.view(2, 2, 3, 3, 2, 6) + 1)),
    "six_groups": ((2, 3, 4, 5, 2, 3), lambda m, x: x.permute(5, 4, 3, 2, 1, 0).reshape(30, 24)),
    "index_basic": ((2, 5, 6, 5, 3, 4), lambda m, x: x[1, :, 2:5, None, ..., 1]),
    "index_advanced": ((2, 5, 6, 5, 3, 4), lambda m, x: x[m.tensor([1, 0]), :, m.tensor([[2], [0]])]),
    "index_lists": ((2, 5, 6, 5, 3, 4), lambda m, x: x[:, [0, 2, 2], 1:3]),
    "rank7_transpose": ((4, 3, 6, 6), lambda m, x: x.view(2, 2, 3, 3, 2, 3, 2).transpose(1, 5).reshape(12, 36)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch_forward_and_gradient(name):
    shape, fn = CASES[name]
    data = RNG.standard_normal(shape).astype(np.float16).astype(np.float32)
    a = af.tensor(data, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    ya, yt = fn(af, a), fn(torch, t)
    assert tuple(ya.shape) == tuple(yt.shape)
    np.testing.assert_allclose(np.asarray(ya), yt.detach().numpy(), rtol=4e-3, atol=4e-3)
    weights = RNG.standard_normal(tuple(yt.shape)).astype(np.float16).astype(np.float32)
    (ya * af.tensor(weights)).sum().backward()
    (yt * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-2, atol=1e-2)


def test_rank_six_answers_like_a_tensor():
    x = af.zeros(4, 3, 6, 6).view(2, 2, 3, 3, 2, 6)
    assert x.shape == x.size() == (2, 2, 3, 3, 2, 6) and x.dim() == x.ndim == 6
    assert x.size(-1) == 6 and x.numel() == 432 and len(x) == 2 and x.dtype == af.float16
    assert np.asarray(x).shape == (2, 2, 3, 3, 2, 6)


def test_an_empty_broadcast_keeps_a_zero_gradient():
    x = af.ones(4, 3, 1, 6, requires_grad=True)
    for sizes in [(4, 3, 0, 6), (0, 1, 4, 3, 2, 6)]:
        y = x.expand(sizes)
        assert y.shape == sizes
        (g,) = af.grad(y.sum(), [x])
        assert g.shape == (4, 3, 1, 6) and not g.numpy().any()


@pytest.mark.parametrize("call, what", [
    (lambda x: x.softmax(-1), "softmax()"),
    (lambda x: x + af.ones(6), "broadcasting with shape (6,)"),
])
def test_what_it_cannot_do_says_reshape_first(call, what):
    x = af.zeros(4, 3, 6, 6).view(2, 2, 3, 3, 2, 6)
    with pytest.raises(af.AneforgeError, match="reshape it to 5 dims or fewer first") as err:
        call(x)
    assert str(err.value).startswith(what)
