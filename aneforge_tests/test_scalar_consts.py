"""Python numbers fp16 cannot hold stay exact: x / 70000, x * 1e-8, x + 70000 give torch's answer
(the fp64 result rounded once to fp16), never a silent 0 or inf from an fp16 constant."""
import operator
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import aneforge as af
from aneforge.core import scalar_consts

F16 = np.float16


@pytest.fixture(autouse=True)
def ieee_specials():
    """These tests check the constant splitting against IEEE fp16 arithmetic; the engine's own
    special values (1/-0 = +inf, no NaN) are test_datapath's."""
    with af.numerics(specials="ieee"):
        yield
OPS = {
    "mul": (operator.mul, False), "rmul": (operator.mul, True),
    "div": (operator.truediv, False), "rdiv": (operator.truediv, True),
    "add": (operator.add, False), "radd": (operator.add, True),
    "sub": (operator.sub, False), "rsub": (operator.sub, True),
}


def _apply(fn, reverse, x, c):
    return fn(c, x) if reverse else fn(x, c)


def _want(fn, reverse, values, c):
    with np.errstate(all="ignore"):
        return _apply(fn, reverse, values.astype(np.float64), c).astype(F16)


def _ulps(got, want):
    """Distance in fp16 steps (inf and nan must match exactly)."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    finite = np.isfinite(got) & np.isfinite(want)
    g, w = got.view(np.int16).astype(np.int32), want.view(np.int16).astype(np.int32)
    g = np.where(g < 0, -(g & 0x7FFF), g)       # sign-magnitude to a monotone integer line
    w = np.where(w < 0, -(w & 0x7FFF), w)
    return np.where(same, 0, np.where(finite, np.abs(g - w), 1 << 20))


def _as_held(op, c):
    """The number the program holds for c: an fp16 constant in range; beyond it, c at fp16's
    11-bit precision (a product's mantissa) or as fp16 parts (a sum's), without the range."""
    if not scalar_consts.needs_split(op, c):
        return float(F16(c))
    if op in ("add", "sub"):
        return sum(float(F16(p)) for p in scalar_consts._parts(float(c)))
    m, e = np.frexp(float(c))
    return float(np.ldexp(np.round(m * 2048) / 2048, e))


VALUES = np.array([1.0, -60000.0, 0.5, 1e-3, 0.0, -0.0, 6e-8, -1e-6, 3e4, 65504.0, -2.0,
                   np.inf, -np.inf], dtype=F16)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("c", [70000.0, 1e6, 1e-8, 1e-6, 2e-5, 131010.0, 2e5, 1e9, 1e300,
                               -70000.0, -1e-8, 100000, -(2 ** 40)])
def test_out_of_range_scalar_matches_fp64_rounded(op, c):
    fn, reverse = OPS[op]
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # no numpy overflow-in-cast warning either
        got = _apply(fn, reverse, af.tensor(VALUES), c).numpy()
    want = _want(fn, reverse, VALUES, c)
    assert _ulps(got, want).max() <= 1, (got, want)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(op=st.sampled_from(sorted(OPS)),
       exponent=st.floats(-40, 40), mantissa=st.floats(1.0, 9.99), negative=st.booleans(),
       values=st.lists(st.floats(-65504, 65504, width=16), min_size=1, max_size=8))
def test_any_scalar_rounds_like_torch(op, exponent, mantissa, negative, values):
    fn, reverse = OPS[op]
    c = (-1 if negative else 1) * mantissa * 10.0 ** exponent
    x = np.array(values, dtype=F16)
    got = _apply(fn, reverse, af.tensor(x), c).numpy()
    name = {"div": "real_div", "rdiv": "real_div"}.get(op, op.lstrip("r"))
    want = _want(fn, reverse, x, _as_held(name, c))
    # one rounding, plus a second one only where the result is an fp16 denormal
    tolerance = np.where(np.abs(want.astype(np.float64)) < 2.0 ** -14, 2, 1)
    assert (_ulps(got, want) <= tolerance).all(), (c, x, got, want)


@pytest.mark.parametrize("op", ["mul", "div", "rdiv", "add", "rsub"])
@pytest.mark.parametrize("c", [70000.0, 1e-7])
def test_out_of_range_scalar_gradient_matches_torch(op, c):
    fn, reverse = OPS[op]
    x0 = np.array([0.5, -2.0, 3.0, 1.5], dtype=F16)
    x = af.tensor(x0, requires_grad=True)
    _apply(fn, reverse, x, c).sum().backward()
    t = torch.tensor(x0.astype(np.float32), requires_grad=True)
    _apply(fn, reverse, t, c).sum().backward()
    with np.errstate(over="ignore"):
        # past fp16 at torch's scale .grad saturates at +-65504 (automatic scaling; warned)
        want = np.clip(t.grad.numpy(), -65504, 65504).astype(F16)
    assert _ulps(x.grad.numpy(), want).max() <= 2, (x.grad.numpy(), want)


def test_in_range_scalars_stay_one_constant():
    x = af.tensor([1.0, 2.0])
    for c in (0.5, 65504.0, 2.0 ** -14, 3, 0.0):
        assert not scalar_consts.needs_split("mul", c)
    assert not scalar_consts.needs_split("add", 1e-8)        # fp16 rounding of the sum is right
    assert not scalar_consts.needs_split("mul", float("inf"))
    assert scalar_consts.needs_split("real_div", 70000)
    assert (x * 0.5).numpy().tolist() == [0.5, 1.0]


def test_float32_tensors_compute_in_fp16_and_integers_keep_their_constant():
    x32 = af.tensor([1e-3, 2e-3], dtype=af.float32)      # fp16 storage and arithmetic on the engine
    np.testing.assert_array_equal((x32 * 1e6).numpy(),
                                  (x32.numpy().astype(np.float64) * 1e6).astype(F16))
    xi = af.tensor([3, 4])
    assert ((xi + 70000) - 69999).numpy().tolist() == [4, 5]      # int arithmetic stays exact
    assert (xi / 70000).dtype == af.float16
    assert _ulps((xi / 70000).numpy(), (np.array([3, 4]) / 70000).astype(F16)).max() <= 1


def test_chain_survives_the_pass_pipeline_in_compiled_steps():
    @af.compile
    def f(x):
        return (x / 70000) * 1e8 - 70000

    x = af.tensor([8.0, 16.0, 40.0])
    for _ in range(2):
        got = f(x).numpy()
    r = x.numpy().astype(np.float64)
    for step in (lambda v: v / 70000, lambda v: v * 1e8, lambda v: v - 70000):
        r = step(r).astype(F16).astype(np.float64)        # torch's fp16: each op rounds once
    want = r.astype(F16)
    assert _ulps(got, want).max() <= 1
