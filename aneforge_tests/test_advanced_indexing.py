"""Indexing with integer tensors/lists and bool masks, and index_select: torch's results and
gradients, built from one-hot selects (the ANE has no dynamic gather)."""
import numpy as np
import pytest
import torch

import aneforge as af

X = np.arange(24, dtype=np.float16).reshape(2, 3, 4) / 8 - 1

CASES = {
    "list_first": lambda z, L: z[L([1, 0])],
    "list_middle": lambda z, L: z[:, L([2, 0, 2])],
    "int_then_list": lambda z, L: z[0, L([1, -1])],
    "ellipsis_list": lambda z, L: z[..., L([3, 1])],
    "new_axis": lambda z, L: z[None, :, L([0])],
    "int_list_adjacent": lambda z, L: z[:, 1, L([0, 3])],
    "int_list_apart": lambda z, L: z[0, :, L([1, 2])],
    "index_2d": lambda z, L: z[:, L([[0, 1], [2, 2]])],
    "mask_full": lambda z, L: z[z > 0.1],
    "mask_leading": lambda z, L: z[L([True, False])],
    "mask_2d_then_slice": lambda z, L: z[L([[True, False, True], [False, True, True]]), 1:3],
    "index_select": lambda z, L: z.index_select(2, L([3, 0, 0])),
    "narrow_last": lambda z, L: z.narrow(2, 1, 2),
    "narrow_negative_start": lambda z, L: z.narrow(1, -2, 2),
    "narrow_whole_axis": lambda z, L: z.narrow(0, 0, 2),
    "two_lists_broadcast": lambda z, L: z[L([[0], [1]]), L([2, 0, 1])],
    "two_lists_adjacent": lambda z, L: z[:, L([2, 0]), L([1, -1])],
    "two_lists_apart": lambda z, L: z[L([1, 0]), :, L([3, 3])],
    "int_between_lists": lambda z, L: z[L([[1], [0]]), 2, L([3, 0, 1])],
    "three_lists": lambda z, L: z[L([1]), L([0, 2]), L([[3], [1]])],
    "computed_pair": lambda z, L: z[L([1, 0]) * 1, L([2, -1]) - 0],
}


def _lists(lib):
    return lambda v: (torch.tensor(v) if lib is torch else af.tensor(v))


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient_match_torch(name):
    fn = CASES[name]
    t = torch.tensor(X.astype(np.float32), requires_grad=True)
    a = af.tensor(X, requires_grad=True)
    want, got = fn(t, _lists(torch)), fn(a, _lists(af))
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.detach().numpy().astype(np.float16))
    weights = np.random.default_rng(0).standard_normal(want.shape).astype(np.float16)
    (want * torch.tensor(weights.astype(np.float32))).sum().backward()
    (got * af.tensor(weights)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), atol=2e-3, rtol=2e-3)


def test_plain_lists_and_numpy_arrays_index_too():
    a = af.tensor(X)
    np.testing.assert_array_equal(a[[1, 0]].numpy(), X[[1, 0]])
    np.testing.assert_array_equal(a[:, np.array([2, 1])].numpy(), X[:, [2, 1]])
    np.testing.assert_array_equal(a[X > 0].numpy(), X[X > 0])


def test_a_computed_index_runs_in_the_program():
    a = af.tensor(X)
    idx = (af.tensor([3, 1]) - 1)                 # computed: not read on the host
    np.testing.assert_array_equal(a[:, :, idx].numpy(), X[:, :, [2, 0]])
    neg = af.tensor([1, 2]) - 3                   # -2, -1 wrap as in torch
    np.testing.assert_array_equal(a[0, neg].numpy(), X[0, [-2, -1]])


@pytest.mark.parametrize("call, error, match", [
    (lambda a: a[[5]], IndexError, "index 5 is out of bounds for dimension 0 with size 2"),
    (lambda a: a[:, af.tensor([0, -4])], IndexError, "index -4 is out of bounds"),
    (lambda a: a[af.tensor([0.5])], IndexError, "must be long, int, byte or bool"),
    (lambda a: a[[0], [5]], IndexError, "index 5 is out of bounds for dimension 1 with size 3"),
    (lambda a: a[[0, 1], [0, 1, 2]], IndexError, "could not be broadcast together"),
    (lambda a: a[[True, False], [1]], af.AneforgeError, "mask must be the only"),
    (lambda a: a[af.tensor([True, False, True])], IndexError, "shape of the mask"),
    (lambda a: a.index_select(0, af.tensor([2])), IndexError, "out of range"),
    (lambda a: a.index_select(0, af.tensor([[0]])), IndexError, "supposed to be a vector"),
    (lambda a: a.index_select(3, af.tensor([0])), IndexError, "Dimension out of range"),
    (lambda a: a.narrow(1, 2, 2), RuntimeError, "exceeds dimension size"),
    (lambda a: a.narrow(1, 4, 1), IndexError, "start out of range"),
])
def test_bad_indices_raise_as_in_torch(call, error, match):
    with pytest.raises(error, match=match):
        call(af.tensor(X))


def test_a_range_indexes_as_a_list():
    """nn_tutorial's `input[range(n), target]` (the negative log-likelihood by hand)."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    target = [2, 0, 1, 1]
    want = torch.tensor(x)[range(4), torch.tensor(target)]
    got = af.tensor(x)[range(4), af.tensor(target)]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    y = af.tensor(x)
    y[range(2), 0] = -1.0
    assert y[:, 0].tolist() == [-1.0, -1.0, 6.0, 9.0]


def _largest_value(tensors) -> int:
    from aneforge.exported import program_of
    ops = program_of(list(tensors)).main.block.operations
    return max(int(np.prod(o.outputs[0].type.shape)) for o in ops)


@pytest.mark.parametrize("rising", [True, False], ids=["rising (banded)", "shuffled"])
def test_a_long_host_index_matches_torch_and_bands_when_it_rises(rising):
    """index_select / x[mask] by a long host index: a rising one (every bool mask) is picked
    in bands of consecutive entries, whose one-hots cover only their span of the axis; any
    other order is one one-hot. Values and gradients are torch's either way."""
    rng = np.random.default_rng(3)
    xn = rng.uniform(0.5, 2.0, (4000, 3)).astype(np.float16).astype(np.float32)
    wn = rng.uniform(0.5, 1.0, (1, 3)).astype(np.float16).astype(np.float32)
    idx = np.flatnonzero(rng.random(4000) > 0.4).astype(np.int64)
    idx = idx if rising else rng.permutation(idx)
    outs = []
    for lib in (torch, af):
        x = lib.tensor(xn, requires_grad=True)
        y = x.index_select(0, lib.tensor(idx))
        (g,) = (af.autograd.grad if lib is af else torch.autograd.grad)(
            (y * lib.tensor(wn)).sum(), [x])
        if lib is af:
            cells = _largest_value([y, g])
            assert (cells < 60 * xn.size) if rising else (cells >= idx.size * 4000)
        outs.append([t.detach().numpy() if lib is torch else t.numpy() for t in (y, g)])
    (ty, tg), (ay, ag) = outs
    np.testing.assert_array_equal(ay, ty.astype(np.float16).astype(np.float32))
    np.testing.assert_allclose(ag, tg, rtol=2e-3)


def test_a_long_mask_selects_in_bands():
    x = af.tensor(np.arange(30000, dtype=np.float32) % 1000)
    picked = x[x > 500.0]
    assert _largest_value([picked]) < 60 * 30000
    values = np.arange(30000) % 1000
    np.testing.assert_array_equal(picked.numpy(), values[values > 500])


def test_a_repeat_gradient_is_one_sum_not_an_add_per_repeat():
    """expand's (tile's) gradient sums the repeats in one reduction by the wide route: 2000
    repeats are not 1999 recorded fp16 adds, and the sum is torch's."""
    from aneforge.exported import program_of
    rng = np.random.default_rng(4)
    xn, wn = rng.standard_normal((1, 5)).astype(np.float32), rng.standard_normal((2000, 5))
    grads = []
    for lib in (torch, af):
        x = lib.tensor(xn, requires_grad=True)
        (g,) = (af.autograd.grad if lib is af else torch.autograd.grad)(
            (x.expand(2000, 5) * lib.tensor(wn.astype(np.float32))).sum(), [x])
        if lib is af:
            adds = sum(o.type == "add" for o in program_of([g]).main.block.operations)
            assert adds < 10
        grads.append(g.detach().numpy() if lib is torch else g.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=2e-3)
