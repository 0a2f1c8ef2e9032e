"""Pin the simulator's numerics model to the measured ANE facts (shared/ANE_FACTS.md)."""
import numpy as np
import pytest

import aneforge as af
from aneforge.hardware.numerics import Numerics
from aneforge.tensor import record_op


def run(t):
    return t.numpy()


def test_storage_rounds_to_nearest_even_by_default():
    # 2049 lies halfway between fp16 neighbours 2048 and 2050: even mantissa wins.
    x = af.tensor([2048.0]) + 1.0
    assert run(x).tolist() == [2048.0]
    assert run(af.tensor([2050.0]) + 1.0).tolist() == [2052.0]


def test_half_away_rounding_switch():
    with af.numerics(rounding="half_away"):
        assert run(af.tensor([2048.0]) + 1.0).tolist() == [2050.0]
        assert run(af.tensor([-2048.0]) - 1.0).tolist() == [-2050.0]
        assert run(af.tensor([1.0]) + 2.0 ** -11).tolist() == [1.0 + 2.0 ** -10]


def test_elementwise_computes_wide_then_rounds_once():
    # Two fp16 adds round twice: 1 + 2**-12 -> 1, then 1 + 2**-11 (a tie) -> 1.
    a = af.tensor([1.0])
    assert run(a + 2.0 ** -12 + 2.0 ** -11).tolist() == [1.0]
    # One add of their sum (3 * 2**-12, past the halfway point) rounds up to the next fp16.
    assert run(a + 3 * 2.0 ** -12).tolist() == [1.0 + 2.0 ** -10]
    # sigmoid(x) computed wide: no intermediate overflow or rounding for large |x|
    assert run(af.tensor([-30.0, 30.0]).sigmoid()).tolist() == [0.0, 1.0]


def test_overflow_to_inf():
    assert np.isinf(run(af.tensor([60000.0]) * 2.0)).all()
    assert run(af.tensor([65504.0]) + 0.0).tolist() == [65504.0]
    assert np.isneginf(run(af.tensor([-40000.0]) - 30000.0)).all()


def test_subnormal_switch():
    tiny = af.tensor([2.0 ** -20])
    assert run(tiny * 1.0).tolist() == [2.0 ** -20]
    with af.numerics(subnormals="flush"):
        assert run(af.tensor([2.0 ** -20]) * 1.0).tolist() == [0.0]


def _matmul_row(value, k=16):
    # [1, K] @ ones[K, 16] with K equal terms: the probe of fact N15.
    x = af.tensor(np.full((1, k), value / k))
    return run(x @ af.ones(k, 16))


def test_matmul_cliff_at_32752():
    assert np.isfinite(_matmul_row(32752.0)).all()
    with pytest.warns(af.ANEHazardWarning, match="saturates"):
        assert np.isinf(_matmul_row(32768.0)).all()
    # the cliff depends on the output, not on K
    with pytest.warns(af.ANEHazardWarning):
        assert np.isinf(_matmul_row(32768.0, k=128)).all()
    with af.numerics(matmul_overflow=None):
        assert _matmul_row(32768.0).tolist()[0][0] == 32768.0


def test_matmul_accumulates_wide():
    # 16384 ones sum exactly in the matmul accumulator; fp16 running sums stall at 2048.
    ones = af.ones(1, 16384)
    assert run(ones @ af.ones(16384, 1)).item() == 16384.0


def test_matmul_rounds_each_product_to_fp16():
    # (1 + 2**-10) * (1 + 2**-10) = 1 + 2**-9 + 2**-20: the 2**-20 is lost per product.
    v = 1 + 2.0 ** -10
    x, y = af.tensor(np.full((1, 1024), v)), af.tensor(np.full((1024, 1), v))
    exact = 1024 * v * v
    products_fp16 = 1024 * float(np.float16(v * v))
    got = run(x @ y).item()
    assert got == float(np.float16(products_fp16))
    with af.numerics(matmul_products="exact"):
        assert run(af.tensor(np.full((1, 1024), v)) @ y).item() == float(np.float16(exact))


def _reduce(op, x):
    """MIL reduce_sum / reduce_mean itself: Tensor.sum / mean of more than 16 float16 terms is
    a matmul (aneforge.tensor.reduce)."""
    return record_op(op, {"x": x}, {"axes": None, "keep_dims": False})


def test_reduce_sum_accumulates_in_fp16():
    # integer sums are exact to 2048 and not beyond (fact N23)
    assert run(_reduce("reduce_sum", af.ones(2048))).item() == 2048.0
    assert run(_reduce("reduce_sum", af.ones(4096))).item() == 2048.0   # 2048 + 1 rounds back
    assert run(af.full((8,), 256.0).sum()).item() == 2048.0
    terms = af.tensor([256.0] * 7 + [257.0])
    assert run(terms.sum()).item() == 2048.0               # 2049 ties to even
    with af.numerics(rounding="half_away"):
        assert run(af.tensor([256.0] * 7 + [257.0]).sum()).item() == 2050.0  # as measured (N23)
    with af.numerics(reduce_accumulate="wide"):
        assert run(_reduce("reduce_sum", af.ones(4096))).item() == 4096.0


def test_reduce_sum_as_matmul_is_more_accurate():
    x = af.ones(1, 4096)
    assert run(_reduce("reduce_sum", x)).item() == 2048.0
    assert run(x @ af.ones(4096, 1)).item() == 4096.0
    assert run(x.sum()).item() == 4096.0                    # Tensor.sum takes the matmul


def test_reduce_mean_divides_the_narrow_sum():
    assert run(_reduce("reduce_mean", af.ones(4096))).item() == 0.5


def test_numerics_is_part_of_the_cache_key():
    af.clear_cache()
    run(af.ones(3) + 1.0)
    with af.numerics(rounding="half_away"):
        run(af.ones(3) + 1.0)
    assert af.cache_info().misses == 2


def test_numerics_rejects_unknown_settings():
    with pytest.raises(ValueError, match="rounding"):
        Numerics(rounding="stochastic")


def test_compile_wall_mul_reduce_zero():
    x = af.randn(4, 8)
    bad = x.sum(1) * 0.0
    with pytest.raises(af.CompileWallError, match=r"sub\(x, x\)"):
        bad.numpy()
    # a Python number below fp16's range is applied as exact fp16 factors, not as a zero constant:
    # no wall, and the product is torch's (fp64 product rounded once to fp16)
    m = x.mean(1)
    for c in (1e-30, 1e-6):
        want = (m.numpy().astype(np.float64) * c).astype(np.float16)
        assert np.array_equal(run(m * c), want)
    s = x.sum(1)
    ok = (s - s) + 3.0                                     # the ANE-safe form
    assert run(ok).tolist() == [3.0] * 4
    assert run(x.sum(1) * 2.0).shape == (4,)               # reduce * nonzero compiles
    assert run(x * 0.0).tolist() == [[0.0] * 8] * 4        # mul-by-zero without a reduce compiles


def test_the_same_changes_give_the_same_model_object():
    """`with af.numerics(...)` around each step reuses one model per (model, changes)."""
    with af.numerics(accumulator="blas", rounding="half_away") as first:
        pass
    with af.numerics(rounding="half_away", accumulator="blas") as second:
        pass
    assert first is second and first.accumulator == "blas" and first.rounding == "half_away"
    with af.numerics(accumulator="per_product") as other:
        assert other is not first and other.accumulator == "per_product"


@pytest.mark.parametrize("value", ["bogus", ["tile4"]])
def test_a_bad_switch_value_still_says_which_values_are_allowed(value):
    with pytest.raises(ValueError, match="accumulator must be one of"):
        af.set_numerics(accumulator=value)
