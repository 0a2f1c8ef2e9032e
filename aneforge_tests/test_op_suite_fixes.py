"""Cases from the torch-derived op suite (tinygrad's test_ops, run against torch) that aneforge
got wrong or refused: pad's per-mode reach, one_hot without num_classes, ... Each compares the
forward values and the gradients with torch."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import aneforge as af
import aneforge.nn.functional as F


def _data(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float16)


def _match(fn, *arrays, grad=True):
    """fn on torch tensors and on aneforge tensors (fn takes the module as its first
    argument): the same values, and the same gradient of a weighted sum."""
    ts = [torch.tensor(a.astype(np.float32), requires_grad=grad) for a in arrays]
    as_ = [af.tensor(a, requires_grad=grad) for a in arrays]
    want, got = fn(torch, *ts), fn(af, *as_)
    assert tuple(got.shape) == tuple(want.shape)
    _close(got, want.detach(), 2e-3)
    if not grad:
        return
    w = np.random.default_rng(1).standard_normal(tuple(want.shape)).astype(np.float16)
    (want * torch.tensor(w.astype(np.float32))).sum().backward()
    (got * af.tensor(w)).sum().backward()
    for t, a in zip(ts, as_):
        _close(a.grad, t.grad, 2e-2)


def _close(got, want, tol):
    """Within fp16 tolerance of the values' magnitude (a sum of many fp16 terms)."""
    want = want.numpy()
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got.numpy().astype(np.float32), want, atol=tol * scale, rtol=tol)


def _pad(lib, x, pad, mode):
    return (TF if lib is torch else F).pad(x, pad, mode=mode)


PADS = [  # (shape, pad, mode): torch's reach per mode, and negative amounts with each mode
    ((1, 1, 5, 5), (3, 11, 0, 30), "replicate"),       # replicate: any amount
    ((1, 1, 2, 2), (2, 3, 0, 1), "replicate"),
    ((1, 1, 5, 5), (4, 4, 0, 4), "reflect"),           # reflect: less than the axis
    ((1, 1, 5, 5), (3, -3, 0, -3), "reflect"),         # padded first, then cropped
    ((3, 3, 3, 3), (-1, 2, 2, -1), "reflect"),
    ((1, 1, 5, 5), (3, -5, 1, -5), "replicate"),
    ((1, 1, 5, 5), (5, 5, 0, 2), "circular"),          # circular: wraps once at most
    ((1, 1, 5, 5), (3, -2, 0, 0), "circular"),         # wraps what is left after cropping
    ((3, 3), (-1, 2, -3, 4), "constant"),              # crops a whole axis, then pads it
]


@pytest.mark.parametrize("shape,pad,mode", PADS)
def test_pad_modes_reach_as_torch(shape, pad, mode):
    _match(lambda lib, x: _pad(lib, x, pad, mode), _data(*shape))


@pytest.mark.parametrize("pad,mode,match", [
    ((5, 0), "reflect", "less than"), ((0, 6), "circular", "more than once"),
    ((-6, 0), "constant", "negative"), ((1, 1), "typo", "unrecognised")])
def test_pad_past_torch_limits_raises(pad, mode, match):
    x = af.tensor(_data(1, 1, 5))
    with pytest.raises((af.ShapeError, NotImplementedError), match=match):
        F.pad(x, pad, mode=mode)


@pytest.mark.parametrize("data", [[1, 2, 4], [[[1, 2, 3], [0, 3, 5]], [[1, 2, 3], [0, 3, 5]]]])
def test_one_hot_without_num_classes_is_max_plus_one(data):
    want = TF.one_hot(torch.tensor(data)).numpy()
    np.testing.assert_array_equal(F.one_hot(af.tensor(data)).numpy(), want)
    computed = af.tensor(data) * 2 - af.tensor(data)       # a value of a program: read after it
    np.testing.assert_array_equal(F.one_hot(computed).numpy(), want)


def test_one_hot_without_num_classes_refuses_what_torch_refuses():
    with pytest.raises(RuntimeError, match="non-negative"):
        F.one_hot(af.tensor([1, -1]))
    with pytest.raises(RuntimeError, match="empty"):
        F.one_hot(af.tensor(np.zeros(0, np.int32)))


INF = float("inf")
SPECIAL = np.array([[1.0, INF, -INF], [2.0, 3.0, 4.0]], np.float16)
IDX = np.array([[2, 0, 1], [1, 1, 0]])


@pytest.mark.parametrize("fn", [
    lambda lib, x, i: x.gather(1, i),
    lambda lib, x, i: lib.zeros(2, 3).scatter(1, i, INF, reduce="add"),
    lambda lib, x, i: lib.ones(2, 3).scatter(1, i, -INF, reduce="multiply"),
    lambda lib, x, i: lib.zeros(2, 3).scatter(1, i, x),
    lambda lib, x, i: lib.zeros(2, 3).scatter_reduce(1, i, x, "sum", include_self=False),
    lambda lib, x, i: lib.ones(2, 3).scatter_reduce(1, i, x, "prod"),
    lambda lib, x, i: lib.zeros(2, 3).scatter_add(1, i, x),
])
def test_infinities_in_gather_and_scatter_stay_out_of_other_places(fn):
    """The places an index does not pick are filled with a constant, not x - x (NaN at inf)."""
    with af.numerics(specials="ieee"):
        got = fn(af, af.tensor(SPECIAL), af.tensor(IDX)).numpy()
    want = fn(torch, torch.tensor(SPECIAL.astype(np.float32)), torch.tensor(IDX)).numpy()
    np.testing.assert_array_equal(got.astype(np.float32), want)


def test_gather_and_scatter_gradients_match_torch():
    i = IDX
    _match(lambda lib, x, s: x.gather(1, (torch if lib is torch else af).tensor(i)) +
           x.scatter_reduce(1, (torch if lib is torch else af).tensor(i), s, "sum"),
           _data(2, 3), _data(2, 3, seed=2))


@pytest.mark.parametrize("shape,fn", [
    ((3, 3, 3), lambda lib, x: x[5:10]),                        # a slice past the end
    ((10, 10), lambda lib, x: x[1:1] * 2),
    ((3, 3, 3), lambda lib, x: x[-2:-5] + 1),
    ((1, 1, 5, 5), lambda lib, x: _pad(lib, x, (0, 0, 0, -5), "reflect")),
    ((4, 0), lambda lib, x: x.sum(1)),                          # an empty input
    ((2, 0, 4), lambda lib, x: x.cumsum(1)),
    ((1, 0, 3, 0, 5), lambda lib, x: x.mean((1, 3))),
])
def test_gradients_flow_through_empty_values(shape, fn):
    """An op on an empty value runs on the host; its inputs still get torch's gradient (zeros
    of their shape, or an empty one), not None."""
    _match(fn, _data(*shape))


@pytest.mark.parametrize("shape,dim", [((2, 0, 4), 1), ((0, 3), 0), ((2, 3, 0), 2)])
def test_cummax_of_an_empty_tensor_is_empty(shape, dim):
    _match(lambda lib, x: lib.cummax(x, dim=dim).values, _data(*shape))
    assert af.cummin(af.tensor(_data(*shape)), dim).indices.shape == shape


@pytest.mark.parametrize("xs,ws,kw", [
    ((2, 4, 5, 5, 5), (4, 4, 3, 3, 3), {}),
    ((1, 4, 3, 4, 3), (4, 2, 2, 3, 2), {"stride": (2, 1, 2), "padding": (1, 0, 1), "groups": 2}),
    ((1, 2, 3, 3, 3), (2, 3, 2, 2, 2), {"stride": 2, "output_padding": 1, "dilation": 1}),
    ((2, 3, 3, 3), (2, 1, 2, 2, 2), {"dilation": (2, 1, 1)}),           # unbatched
])
def test_conv_transpose3d_matches_torch(xs, ws, kw):
    x, w, b = _data(*xs), _data(*ws, seed=3) / 4, _data(ws[1] * kw.get("groups", 1), seed=4)
    _match(lambda lib, x, w, b: (TF if lib is torch else F).conv_transpose3d(x, w, b, **kw),
           x, w, b)


@pytest.mark.parametrize("index", [
    (False,), (slice(None), False), (False, 1), (None, False), (Ellipsis, False),
    (True, False), (True, True), (slice(None), True, slice(None), True), (slice(None), 0, True)])
def test_bool_scalar_indices_as_torch(index):
    """The bool scalars together add one axis (size 1 if all are True, else 0), in place when
    adjacent, else first; the gradient reaches x (zeros through an empty result)."""
    _match(lambda lib, x: x[index] * 2, _data(2, 3))


@pytest.mark.parametrize("kw", [
    {"kernel_size": (8, 8, 8), "stride": 5, "padding": 1, "count_include_pad": False},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": (2, 3, 2), "stride": (1, 2, 2), "padding": (1, 1, 0), "divisor_override": 5},
])
def test_avg_pool3d_divisors_as_torch(kw):
    _match(lambda lib, x: (TF if lib is torch else F).avg_pool3d(x, **kw), _data(1, 2, 10, 9, 8))


@pytest.mark.parametrize("values,dim", [
    (np.array([0.0, 100.0], np.float16), 0),                  # tiny early terms: 1 / c overflows
    (np.array([[-20.0, 3.0, 40.0], [5.0, -60.0, 2.0]], np.float16), 1),
    (_data(6, 5), 0),
])
def test_logcumsumexp_gradient_stays_finite(values, dim):
    _match(lambda lib, x: lib.logcumsumexp(x, dim), values)


def test_pow_gradient_keeps_a_negative_bases_nan_when_y_minus_1_rounds():
    """y = -0.9995 is an fp16 number; y - 1 rounds to -2 in fp16, so y * x ** (y - 1) would be
    a number where torch's gradient (like the value) is NaN for a negative base."""
    x = np.array([-0.4009, -1.883, 0.75, 0.0, 2.0, 100.0], np.float16)
    y = np.array([-0.9995, -0.9995, 1.5, 2.0, -0.5, 2.0], np.float16)
    with af.numerics(specials="ieee"):
        _match(lambda lib, a, b: a ** b, x, y)
    big = af.tensor([300.0], requires_grad=True)           # 300 ** 2 overflows fp16, not 600
    assert af.grad((big ** af.tensor([2.0])).sum(), [big])[0].tolist() == [600.0]


@pytest.mark.parametrize("shape,reps", [((), (0,)), ((2, 3), (2, 0)), ((3,), (0, 2, 1))])
def test_repeat_zero_times_is_empty(shape, reps):
    _match(lambda lib, x: x.repeat(*reps), _data(*shape))


@pytest.mark.parametrize("src,dst", [("float16", "int16"), ("float32", "int32"),
                                     ("float16", "uint8"), ("int16", "float16")])
def test_view_dtype_reinterprets_bits_as_torch(src, dst):
    x = np.array([[1.0, -2.0, 0.5, 3.0], [4.0, -0.25, 7.0, 0.0]], np.float32).astype(src)
    got = af.tensor(x, dtype=getattr(af, src)).view(getattr(af, dst))
    want = torch.tensor(x).view(getattr(torch, dst))
    assert got.dtype == getattr(af, dst) and got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_view_dtype_refuses_what_it_cannot_do():
    with pytest.raises(RuntimeError, match="whole number"):
        af.ones(3).view(af.int32)                        # 3 fp16 values: 6 bytes
    with pytest.raises(af.AneforgeError, match="detach"):
        af.ones(2, requires_grad=True).view(af.float16)


@pytest.mark.parametrize("equation,shapes,match", [
    ("...ik..., ...jk ->", [(2, 3, 4), (2, 3, 4)], "more than one ellipsis"),
    ("i...j,ji...->...", [(2, 3, 4, 5), (5, 2, 7)], "sizes 4 and 7"),     # must broadcast
])
def test_einsum_refuses_what_torch_refuses(equation, shapes, match):
    with pytest.raises(af.AneforgeError, match=match):
        af.einsum(equation, [af.ones(*s) for s in shapes])
    with pytest.raises(RuntimeError):
        torch.einsum(equation, [torch.ones(*s) for s in shapes])


def test_shifts_by_31_wrap_as_torchs_int32():
    """torch's int32 `x << 31` wraps (2**31 is -2**31 in int32) and `x >> 31` leaves the sign."""
    data = [[0, 1, 2], [1 << 8, 1 << 16, 1 << 30], [-1, -5, 3]]
    for n in (30, 31):
        for op in (lambda v: v << n, lambda v: v >> n):
            want = op(torch.tensor(data, dtype=torch.int)).tolist()
            assert op(af.tensor(data)).tolist() == want
    shift = af.tensor([1, 2, 3])
    assert (af.tensor([1, 1, 1]) << shift).tolist() == [2, 4, 8]     # tensor shifts as before


def test_mean_takes_torchs_dtype():
    data = [[1, 2], [3, 4]]
    want = torch.tensor(data).mean(1, dtype=torch.float32).tolist()
    assert af.tensor(data).mean(1, dtype=af.float32).tolist() == want
    assert af.mean(af.tensor(data), dtype=af.float16).item() == 2.5
    with pytest.raises(af.DTypeError, match="floating"):
        af.tensor(data).mean()
