"""`x[index] = value` as torch's, on SSA programs: the handle takes the new value
(aneforge/tensor/assign.py). Each case runs in both libraries; gradients too."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aneforge as af

CASES = {
    "slice, scalar": lambda L, x: x.__setitem__((slice(1, 3), slice(None)), -1.0),
    "a row": lambda L, x: x.__setitem__(2, L.tensor([9.0] * 6)),
    "mask, scalar": lambda L, x: x.__setitem__(x > 20, 0.5),
    "mask, values": lambda L, x: x.__setitem__(x > 20, L.tensor([1.0, 2.0, 3.0])),
    "two index tensors": lambda L, x: x.__setitem__((L.tensor([0, 3]), L.tensor([1, 5])),
                                                    L.tensor([7.0, 8.0])),
    "strided slice": lambda L, x: x.__setitem__((slice(None), slice(0, 6, 2)),
                                                L.tensor([1.0, 2.0, 3.0])),
    "negative": lambda L, x: x.__setitem__((-1, slice(-2, None)), 4.0),
    "ellipsis": lambda L, x: x.__setitem__((Ellipsis, 0), 11.0),
    "a list index": lambda L, x: x.__setitem__([0, 2], 3.0),
    "empty slice": lambda L, x: x.__setitem__(slice(5, 9), 3.0),
    "new axis": lambda L, x: x.__setitem__((None, 1), 6.0),
    "leading 1 axes, computed value": lambda L, x: x.__setitem__(2, L.ones(1, 6) * 9.0),
    "leading 1 axes, host value": lambda L, x: x.__setitem__(slice(0, 2),
                                                             L.tensor(np.full((1, 1, 6), 3.0))),
}


def _start(lib, pending: bool):
    x = lib.tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
    return x * 1.0 if pending else x


@pytest.mark.parametrize("pending", [False, True], ids=["host data", "computed"])
@pytest.mark.parametrize("name", list(CASES))
def test_assignment_gives_torchs_values(name, pending):
    t, a = _start(torch, pending), _start(af, pending)
    CASES[name](torch, t)
    CASES[name](af, a)
    np.testing.assert_array_equal(a.numpy().astype(np.float32), t.numpy())


@pytest.mark.parametrize("pending", [False, True], ids=["host data", "computed"])
def test_numbers_into_integers_as_torch(pending):
    """Floats written into an integer tensor go toward zero, as torch casts them."""
    out = []
    for lib in (torch, af):
        y = lib.tensor([1, 2, 3, 4, 5])
        y = y + 0 if pending else y
        y[1:3] = 2.7
        y[3] = -2.7
        y[lib.tensor([0])] = lib.tensor([7])
        out.append(y.tolist())
    assert out[0] == out[1] == [7, 2, 2, -2, 5]


def test_host_data_is_assigned_without_a_program():
    """A data loader's `y[len(ix) + 1:] = -1` on host data runs no program (one per word
    length would compile otherwise)."""
    before = af.cache_info().misses
    y = af.zeros(16, dtype=af.int32)
    y[:5] = af.tensor([3, 1, 4, 1, 5])
    y[6:] = -1
    assert af.cache_info().misses == before
    assert y.tolist() == [3, 1, 4, 1, 5, 0] + [-1] * 10


def test_gradients_reach_the_kept_elements_and_the_value():
    grads = []
    for lib in (torch, af):
        x = lib.ones(3, 4, requires_grad=True)
        w = lib.tensor([2.0, 3.0], requires_grad=True)
        y = x * 1.0
        y[1, 1:3] = w * w
        y[y > 5] = 0.0                                      # a mask of the new values
        (y * y * 2.0).sum().backward()
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for (gx, gw), (tx, tw) in zip(grads[1:], grads[:1]):
        np.testing.assert_array_equal(gx, tx)
        np.testing.assert_array_equal(gw, tw)


def test_errors_are_torchs():
    x = af.zeros(2, 3)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[0] = af.ones(4)
    with pytest.raises(IndexError):
        x[5] = 1.0
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        x[af.tensor([0.5])] = 1.0
    w = af.ones(3, requires_grad=True)
    with pytest.raises(af.AneforgeError, match="leaf"):
        w[0] = 2.0


def _largest_value(tensors) -> int:
    """The most elements any op of the program computing `tensors` makes."""
    from aneforge.exported import program_of
    ops = program_of(list(tensors)).main.block.operations
    return max(int(np.prod(o.outputs[0].type.shape)) for o in ops)


@pytest.mark.parametrize("n", [12000, 45000])
def test_a_long_mask_assignment_is_linear_not_quadratic(n):
    """`x[mask] = values` over n elements with gradients: the placing index rises, so it is
    picked in bands. One one-hot over every element and value was ~4 GB and 10 s at 45,000."""
    rng = np.random.default_rng(n)
    xn = rng.standard_normal(n).astype(np.float16).astype(np.float32)
    mask = xn > 0.3
    vals = rng.uniform(-2.0, -0.5, int(mask.sum())).astype(np.float16).astype(np.float32)
    weight = rng.uniform(0.5, 1.0, n).astype(np.float16).astype(np.float32)
    outs = []
    for lib in (torch, af):
        x, v = lib.tensor(xn, requires_grad=True), lib.tensor(vals, requires_grad=True)
        y = x * 1.0
        y[lib.tensor(mask)] = v * 2.0
        loss = (y * lib.tensor(weight)).sum()           # gradients of normal magnitudes
        gx, gv = (af.autograd.grad if lib is af else torch.autograd.grad)(loss, [x, v])
        if lib is af:
            assert _largest_value([y, gx, gv]) < 60 * n        # quadratic: ~0.4 n**2
        outs.append([t.detach().numpy() if lib is torch else t.numpy() for t in (y, gx, gv)])
    (ty, tgx, tgv), (ay, agx, agv) = outs
    np.testing.assert_array_equal(ay, ty.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(agx, tgx)
    np.testing.assert_array_equal(agv, tgv)
