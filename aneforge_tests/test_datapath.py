"""The bit-faithful ANE datapath: every published hardware measurement, on its target, at the
value the engine returns; the model's prediction for each discriminating probe under each
switch; the compiled tile kernel bit-equal to its numpy reference; hazard warnings; the
reconstructed activation tables at the published figures.

Sources: the public book sbryngelson/ane-guide, chapters part-1-machine/03-numerics.md and
part-6-silicon/20-datapath-mac.md (M1 and M5 measurements)."""
import math
import warnings

import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn.functional as F
from aneforge.hardware import kernels
from aneforge.hardware.kernels import reference
from aneforge.tensor import record_op
from aneforge.ops.activation_tables import build, lookup
from aneforge.ops.activations import TABLES

needs_numba = pytest.mark.skipif(not kernels.available(), reason="numba is not installed")


def reduce_row(values, target="M1", **switches):
    """`v @ ones(K, 1)`, fp16 in and out: how the measurements reduce a row."""
    v = np.asarray(values, np.float32)[None, :]
    with af.target(target), af.numerics(**switches):
        return (af.tensor(v) @ af.ones(v.shape[1], 1)).item()


# ---- D1: the accumulator (M1) ----------------------------------------------------------------
def test_one_large_term_then_1024_ones_gives_5116():
    # the tile [4096, 1, 1, 1] is 4096 (its ones fall below the 12-bit adder's cut); the other
    # 1021 ones reach the wide accumulator: 5117, stored as fp16 5116 (exact 5120)
    assert reduce_row([4096.0] + [1.0] * 1024) == 5116.0


@pytest.mark.parametrize("b", [1024.0, 3000.0, 4090.0])
def test_cancelling_triples_below_4096_keep_every_unit(b):
    assert reduce_row([b, -b, 1.0] * 16) == 16.0


@pytest.mark.parametrize("b", [4096.0, 8000.0, 16000.0, 30000.0])
def test_cancelling_triples_from_4096_leave_four_survivors(b):
    assert reduce_row([b, -b, 1.0] * 16) == 4.0
    # the orders [B, 1, -B] and [B, -B, 1] give identical bytes
    assert reduce_row([b, 1.0, -b] * 16) == 4.0


def test_survivors_for_every_fp16_b():
    bs = np.arange(1, 32753, dtype=np.float32)
    bs = np.unique(bs.astype(np.float16).astype(np.float32))
    rows = np.tile(np.stack([bs, -bs, np.ones_like(bs)], 1), 16)           # [n, 48]
    with af.target("M1"):
        got = (af.tensor(rows) @ af.ones(48, 1)).numpy()[:, 0]
    np.testing.assert_array_equal(got[bs <= 4094], 16.0)
    np.testing.assert_array_equal(got[bs >= 4096], 4.0)


def test_the_accumulator_across_tiles_is_wide():
    assert reduce_row([8192.0] + [1.0] * 16) == 8208.0
    assert reduce_row([1.0] * 16384) == 16384.0
    assert reduce_row([16000.0, -16000.0, 1.0]) == 1.0


def test_subnormal_pair_flushed_on_m1_kept_on_m5():
    d = 2.0 ** -20
    assert reduce_row([d, d], "M1") == 0.0
    assert np.signbit(reduce_row([-d, -d], "M1")) == False      # +0, not -0  # noqa: E712
    assert reduce_row([d, d], "M5") == 2 * d
    # the flush is in the accumulator only: elementwise ops keep subnormals on M1
    with af.target("M1"):
        assert (af.tensor([d]) + af.tensor([d])).item() == 2 * d


def test_the_earlier_model_stays_reachable():
    with af.numerics("per_product"):
        assert reduce_row([4096.0] + [1.0] * 1024) == 5120.0
        assert reduce_row([4096.0, -4096.0, 1.0] * 16) == 16.0
    assert af.get_numerics().accumulator == "tile4"


# ---- the discriminating probes, under each switch ----------------------------------------------
PROBES = [  # (row, switches, the model's prediction)
    ([4096.0, 3.0, -4096.0], {}, 2.0),
    ([4096.0, 3.0, -4096.0], {"tile_truncation": "toward_neg_inf"}, 2.0),
    ([-4096.0, -3.0, 4096.0], {}, -2.0),
    ([-4096.0, -3.0, 4096.0], {"tile_truncation": "toward_neg_inf"}, -4.0),
    ([4094.0, 5.0, -4096.0], {}, 2.0),
    ([4094.0, 5.0, -4096.0], {"tile_carry": "nearest_even"}, 4.0),
    ([2048.0, 1.0, 0.0, 0.0, -2048.0], {}, 1.0),
    ([2048.0, 1.0, 0.0, 0.0, -2048.0], {"tile_result": "fp16"}, 0.0),
]


@pytest.mark.parametrize("row, switches, want", PROBES)
def test_probe(row, switches, want):
    assert reduce_row(row, **switches) == want


@pytest.mark.parametrize("products, want", [("exact", 0.0473633), ("fp16", 0.046875)])
def test_probe_exact_or_rounded_products(products, want):
    a = af.tensor([[1 + 2.0 ** -5, -1.0]])
    b = af.tensor([[1 + 2.0 ** -6], [1.0]])
    with af.numerics(matmul_products=products):
        assert (a @ b).item() == pytest.approx(want, abs=2e-7)


def test_unknown_switch_values_are_rejected():
    with pytest.raises(ValueError, match="tile_carry"):
        af.Numerics(tile_carry="up")
    with pytest.raises(ValueError, match="named models"):
        af.set_numerics("nope")


# ---- D2: output port and elementwise ranges ---------------------------------------------------
@pytest.mark.parametrize("row", [[32752.0], [16376.0, 16376.0]])
def test_matmul_output_32752_passes(row):
    assert reduce_row(row) == 32752.0


@pytest.mark.parametrize("row", [[32768.0], [16384.0, 16384.0]])
def test_matmul_output_32768_is_inf(row):
    with pytest.warns(af.ANEHazardWarning):
        assert reduce_row(row) == np.inf


def test_an_interior_partial_past_2_15_stays_inf():
    row = [20000.0, 20000.0, 0.0, 0.0, -20000.0, -20000.0, 0.0, 0.0]      # true sum 0
    with pytest.warns(af.ANEHazardWarning):
        assert reduce_row(row) == np.inf


def test_elementwise_keeps_the_full_fp16_range():
    assert (af.tensor([30000.0]) * 2.0).item() == 60000.0
    assert (af.tensor([65504.0]) + 8.0).item() == 65504.0
    assert (af.tensor([65504.0]) + 16.0).item() == np.inf
    # x * x first reaches inf at x = 256 (ane-guide's constants table)
    x = af.tensor([255.875, 256.0])
    assert (x * x).tolist() == [65472.0, np.inf]


def reduce_sum(x):
    """MIL reduce_sum itself (the narrow fp16 running sum), over every axis."""
    return record_op("reduce_sum", {"x": af.tensor(x)}, {"axes": None, "keep_dims": False})


def test_reduce_sum_is_narrow_and_rounds_to_nearest_even_on_m1():
    with af.target("M1"):
        assert af.tensor([256.0] * 7 + [257.0]).sum().item() == 2048.0


# reshape -> reduce_sum of 8 small integers summing to 2049 (ANEForge bench/numeric_cliffs.py's
# row): the last partial, 2049, is a tie at spacing 2. M1 rounds it to even (2048); M5 reads
# 2050 (sbryngelson/ane-guide 03-numerics.md), as a store rounding ties away from zero does.
ROW_2049 = [257.0] + [256.0] * 7


@pytest.mark.parametrize("target, want", [("M1", 2048.0), ("M2", 2048.0), ("M5", 2050.0),
                                          ("M4", 2050.0)])
def test_the_2049_tie_per_target(target, want):
    with af.target(target):
        assert af.get_numerics().rounding == ("half_away" if want == 2050.0 else "nearest_even")
        assert reduce_sum(ROW_2049).item() == want
        assert reduce_sum([-v for v in ROW_2049]).item() == -want      # away from zero
        assert (af.tensor([2048.0]) + 1.0).item() == want               # every fp16 store
        assert (af.tensor([[2048.0, 1.0]]) @ af.ones(2, 1)).item() == want   # the output port
        assert (af.tensor([2050.0]) + 1.0).item() == 2052.0    # even is also away from 0


def test_reduce_sum_keeps_the_full_fp16_range():
    assert reduce_sum([30000.0, 30000.0]).item() == 60000.0
    assert reduce_sum([65504.0, 16.0]).item() == np.inf


# ---- D3: no NaN leaves the engine -------------------------------------------------------------
NAN, INF = float("nan"), float("inf")
NAN_IN = [  # (name, f, input, engine result)
    ("add", lambda x: x + 0.0, NAN, INF),
    ("relu", lambda x: x.relu(), NAN, INF),
    ("sigmoid", lambda x: x.sigmoid(), NAN, 1.0),
    ("tanh", lambda x: x.tanh(), NAN, 1.0),
    ("erf", lambda x: x.erf(), NAN, 1.0),
    ("exp", lambda x: x.exp(), NAN, INF),
    ("maximum", lambda x: af.maximum(x, af.tensor([1.0])), NAN, INF),
]
INDETERMINATE = [
    ("inf - inf", lambda x: x - x, INF, 0.0),
    ("0 * inf", lambda x: x * af.tensor([0.0]), INF, 0.0),
    ("sqrt(-1)", lambda x: x.sqrt(), -1.0, 0.0),
    ("rsqrt(-1)", lambda x: x.rsqrt(), -1.0, 0.0),
    ("log(-1)", lambda x: x.log(), -1.0, 0.0),
    ("log(+0)", lambda x: x.log(), 0.0, -45440.0),
    ("-0 + 0", lambda x: x + 0.0, -0.0, 0.0),
    ("1 / -0", lambda x: 1.0 / x, -0.0, INF),
    ("rsqrt(-0)", lambda x: x.rsqrt(), -0.0, INF),
    ("sqrt(-0)", lambda x: x.sqrt(), -0.0, 0.0),
    ("2**-24 + 0", lambda x: x + 0.0, 2.0 ** -24, 2.0 ** -24),
    ("2**-24 * 1", lambda x: x * 1.0, 2.0 ** -24, 2.0 ** -24),
]


@pytest.mark.parametrize("name, f, x, want", NAN_IN + INDETERMINATE,
                         ids=[c[0] for c in NAN_IN + INDETERMINATE])
def test_special_values(name, f, x, want):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", af.ANEHazardWarning)
        got = f(af.tensor([x])).item()
    assert got == want and np.signbit(got) == np.signbit(want)


def test_softmax_of_a_nan_lane_puts_all_the_mass_there():
    with pytest.warns(af.ANEHazardWarning, match="NaN"):
        assert af.tensor([[1.0, NAN, 2.0]]).softmax(-1).tolist() == [[0.0, 1.0, 0.0]]


def test_ieee_specials_switch():
    with af.numerics(specials="ieee"):
        assert np.isnan(af.tensor([NAN]).relu().item())
        assert af.tensor([0.0]).log().item() == -np.inf
        assert np.isnan(af.tensor([-1.0]).sqrt().item())


def mil_unary(op, x):
    """The MIL op `op` alone (softplus, softsign: F.softplus / F.softsign are compositions)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", af.ANEHazardWarning)
        return record_op(op, {"x": af.tensor(np.float16(x))}, {}).numpy()


# softplus(+inf) and softsign(+inf) -> +0: the engine's tables collapse (NaN reads as +inf)
SOFT_SPECIALS = {"softplus": ([INF, NAN, -INF, 0.0], [0.0, 0.0, 0.0, 0.693359375],
                              [INF, NAN, 0.0, 0.693359375]),
                 "softsign": ([INF, NAN, -INF, -3.0], [0.0, 0.0, -1.0, -0.75],
                              [1.0, NAN, -1.0, -0.75])}


@pytest.mark.parametrize("op", sorted(SOFT_SPECIALS))
def test_softplus_and_softsign_of_inf_collapse_to_zero_on_m1(op):
    x, engine, ieee = SOFT_SPECIALS[op]
    with af.target("M1"):
        got = mil_unary(op, x)
        np.testing.assert_array_equal(got, engine)
        assert not np.signbit(got[:2]).any()                 # +0, not -0
        with af.numerics(specials="ieee"):                   # the function's own values
            np.testing.assert_array_equal(mil_unary(op, x), ieee)


def test_torch_level_softplus_and_softsign_keep_their_compositions_at_inf():
    # F.softplus / F.softsign are built from exp, log, abs and division, so torch's answers
    # hold: softplus(+inf) = +inf; softsign(+inf) = inf / inf, NaN in torch and IEEE, the
    # indeterminate +0 on the engine
    x = torch.tensor([INF, 1.0])
    sp, ss = torch.nn.functional.softplus(x).tolist(), torch.nn.functional.softsign(x).tolist()
    with af.target("M1"):
        assert F.softplus(af.tensor([INF, 1.0])).tolist() == [sp[0], np.float16(sp[1])]
        assert F.softsign(af.tensor([INF, 1.0])).tolist() == [0.0, ss[1]]
        with af.numerics(specials="ieee"):
            got = F.softsign(af.tensor([INF, 1.0])).tolist()
    assert np.isnan(ss[0]) and np.isnan(got[0]) and got[1] == ss[1]


# ---- D4 (the part modelled): softmax subtracts the max; exp overflows past ln(65504) -----------
def test_softmax_subtracts_the_max():
    assert af.tensor([[1000.0, 1.0, 2.0, 3.0]]).softmax(-1).tolist() == [[1.0, 0.0, 0.0, 0.0]]
    assert af.tensor([[7.0] * 4]).softmax(-1).tolist() == [[0.25] * 4]


def test_bare_exp_overflows_near_ln_65504():
    assert np.isfinite(af.tensor([11.08]).exp().item())
    assert af.tensor([11.1]).exp().item() == np.inf


# ---- D4: the activation tables (Numerics.activations="tables") ----------------------------------
FP16 = np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
FP16 = np.sort(FP16[np.isfinite(FP16)])          # every finite fp16 value, -0 and +0 included
TABLED = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "gelu": torch.nn.functional.gelu,
          "silu": torch.nn.functional.silu}


def tabled(name, x, target="M1"):
    """The table at x (fp16), run as rows of 256: a 1-D axis is capped at 16384 on M1."""
    x = np.asarray(x, np.float16)
    rows = np.pad(x, (0, -len(x) % 256)).reshape(-1, 256)
    with af.target(target), af.numerics(activations="tables"):
        y = getattr(F, name)(af.tensor(rows)).numpy().astype(np.float64)
    return y.reshape(-1)[:len(x)]


def torch64(name, x):
    return TABLED[name](torch.tensor(np.asarray(x, np.float64))).numpy()


@pytest.mark.parametrize("name, published", [("sigmoid", 0.0034), ("tanh", 0.0017),
                                             ("gelu", 0.0059)])
def test_table_worst_error_over_every_fp16_input_is_the_published_one(name, published):
    err = np.abs(tabled(name, FP16) - torch64(name, FP16)).max()
    assert 0.9 * published <= err <= published


@pytest.mark.parametrize("name, published", [("gelu", -0.000543), ("silu", -0.001259)])
def test_table_origin_bias(name, published):
    got = tabled(name, np.zeros(1, np.float16))[0]
    assert got == np.float16(published)            # the figure, to fp16 precision
    assert tabled(name, np.zeros(1, np.float16), "M5")[0] == np.float16(published)


def test_the_exact_model_has_no_origin_bias():
    with af.numerics(activations="exact"):
        assert F.gelu(af.zeros(1)).item() == 0.0 and F.silu(af.zeros(1)).item() == 0.0


@pytest.mark.parametrize("name, increasing_from", [("sigmoid", -np.inf), ("tanh", -np.inf),
                                                   ("gelu", -0.7518), ("silu", -1.2785)])
def test_tables_are_monotone_where_the_function_is(name, increasing_from):
    x = FP16[FP16.astype(np.float64) >= increasing_from]
    assert np.all(np.diff(tabled(name, x)) >= 0)


PAST_THE_DOMAIN = np.array([-np.inf, -60000.0, -20.0, 20.0, 60000.0, np.inf], np.float16)


@pytest.mark.parametrize("name, want", [
    ("sigmoid", [0, 0, 0, 1, 1, 1]), ("tanh", [-1, -1, -1, 1, 1, 1]),
    ("gelu", [0, 0, 0, 20, 60000, np.inf]), ("silu", [0, 0, 0, 20, 60000, np.inf])])
def test_tables_clamp_to_the_asymptotes_past_their_domain(name, want):
    np.testing.assert_array_equal(tabled(name, PAST_THE_DOMAIN), want)


def test_table_domain_of_the_high_precision_sigmoid():
    # published domain [-9.938, 8.320]: past it the value is the asymptote
    assert tabled("sigmoid", np.float16([8.33]))[0] == 1.0
    assert tabled("sigmoid", np.float16([-9.95]))[0] == 0.0
    assert 0 < tabled("sigmoid", np.float16([-9.9]))[0] < 1e-4


def test_tables_of_nan_under_each_specials_model():
    x = af.tensor([np.nan])
    with af.numerics(activations="tables"), pytest.warns(af.ANEHazardWarning):
        assert x.sigmoid().item() == 1.0 and x.tanh().item() == 1.0    # NaN reads as +inf
    with af.numerics(activations="tables", specials="ieee"):
        assert np.isnan(x.sigmoid().item()) and np.isnan(F.gelu(x).item())


def test_gelu_tanh_approximation_stays_computed():
    x = np.float16([0.0, 1.0])
    with af.numerics(activations="tables"):
        got = F.gelu(af.tensor(x), approximate="tanh").numpy()
    np.testing.assert_array_equal(got, [0.0, np.float16(0.8411920)])


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "gelu", "silu"])
def test_tables_values_and_gradients_against_torch(name):
    x = np.random.default_rng(0).normal(0, 2, 256).astype(np.float16)
    tx = torch.tensor(x.astype(np.float64), requires_grad=True)
    TABLED[name](tx).sum().backward()
    with af.numerics(activations="tables"):
        ax = af.tensor(x, requires_grad=True)
        y = getattr(F, name)(ax)
        y.sum().backward()
        np.testing.assert_allclose(y.numpy(), TABLED[name](tx).detach().numpy(), atol=0.006)
        np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), atol=0.02)


@pytest.mark.parametrize("name, clamp_error, e", [
    ("tanh", lambda d: 1 - math.tanh(d), 0.00168),
    ("gelu", lambda d: d * 0.5 * math.erfc(d / math.sqrt(2)), 0.0057),
    ("silu", lambda d: d / (1 + math.exp(d)), 0.0028)])
def test_table_domain_ends_where_the_clamp_errs_by_e(name, clamp_error, e):
    spec = TABLES[name]
    assert spec.lo == -spec.hi and clamp_error(spec.hi) == pytest.approx(e, rel=1e-3)


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "gelu", "silu"])
def test_tables_have_33_knots_and_32_segments(name):
    table = build(TABLES[name])
    assert len(table.knots) == 33 and len(table.slope) == len(table.intercept) == 32
    assert np.all(np.diff(table.knots) > 0)


def test_sigmoid_table_ends_where_fp16_sigmoid_reaches_1():
    assert TABLES["sigmoid"].hi == np.float16(math.log(4095))      # 1 - sigmoid = 2**-12


@pytest.mark.parametrize("target, default", [("M1", "tables"), ("M1 Max", "tables"),
                                             ("M2", "exact"), ("M3", "exact"), ("M4", "exact"),
                                             ("M5", "exact")])
def test_tables_are_the_default_where_they_were_measured(target, default):
    # the published figures are M1's (ane-guide's constants table: "M1/H13 measured")
    with af.target(target):
        assert af.get_numerics().activations == default
        gelu0 = F.gelu(af.zeros(1)).item()
    assert gelu0 == (np.float16(-0.000543) if default == "tables" else 0.0)


def test_the_activations_switch():
    with af.target("M5"), af.numerics(activations="tables"):
        assert F.silu(af.zeros(1)).item() == np.float16(-0.001259)
    with af.numerics("per_product"):                 # the earlier model computes them
        assert af.get_numerics().activations == "exact"
    with pytest.raises(ValueError, match="activations"):
        af.Numerics(activations="lut")


def table_model(name, x):
    """The engine model written out: the knots' searchsorted (`Table`), then numpy's fp16 store
    (round to nearest-even, subnormals kept) -- an independent path from the simulator's
    bit-indexed lookup and its rounding kernel."""
    return build(TABLES[name])(np.asarray(x, np.float32)).astype(np.float16)


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "gelu", "silu"])
def test_m1_default_is_the_table_model_bit_for_bit(name):
    rows = np.pad(FP16, (0, -len(FP16) % 256)).reshape(-1, 256)
    with af.target("M1"):
        got = getattr(F, name)(af.tensor(rows)).numpy().reshape(-1)[:len(FP16)]
    np.testing.assert_array_equal(got.view(np.uint16), table_model(name, FP16).view(np.uint16))


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "gelu", "silu"])
def test_bit_indexed_lookup_equals_the_knots_on_every_fp16_pattern(name):
    table = build(TABLES[name])
    x = np.arange(2 ** 16, dtype=np.uint16).view(np.float16).astype(np.float32)  # inf, NaN too
    want, got = table(x), lookup(table)(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))


def test_an_fp32_activation_reads_the_table_off_the_fp16_grid():
    # x * 1.0001 in fp32 is off the fp16 grid: reading the table by the fp16 bits would cut it
    # (130 of these 800 inputs then store a different fp16 value)
    x = np.arange(-4, 4, 0.01).astype(np.float16)
    with af.target("M1"):
        got = (af.tensor(x).float() * 1.0001).sigmoid().half().numpy()
    want = build(TABLES["sigmoid"])(x.astype(np.float32) * np.float32(1.0001))
    np.testing.assert_array_equal(got, want.astype(np.float16))


# ---- D5: the width-slice gain (M1 and M2 only) ------------------------------------------------
def width_slice(value, target, index=(slice(None), slice(1, None))):
    x = np.full((2, 8), value, np.float32)
    with af.target(target), warnings.catch_warnings():
        warnings.simplefilter("ignore", af.ANEHazardWarning)
        return af.tensor(x)[index].numpy()


@pytest.mark.parametrize("target", ["M1", "M2"])
def test_width_slice_gain_overflows_past_4094(target):
    assert (width_slice(4094.0, target) == 4094.0).all()
    assert np.isposinf(width_slice(4095.0, target)).all()      # fp16(4095) = 4096
    assert np.isposinf(width_slice(4096.0, target)).all()
    assert np.isneginf(width_slice(-4096.0, target)).all()
    # offset 0, or an offset on another axis, is unaffected
    assert (width_slice(4096.0, target, (slice(None), slice(0, 4))) == 4096.0).all()
    assert (width_slice(4096.0, target, (slice(1, None), slice(None))) == 4096.0).all()


def test_width_slice_gain_saturates_only_the_values_past_4094():
    # the kernel first checks the largest |x| (max and -min): one value past it, of either
    # sign, among small ones still saturates alone
    x = np.random.default_rng(2).uniform(-4094, 4094, (3, 9)).astype(np.float16)
    x[1, 4], x[2, 7] = -5000.0, 4095.0
    want = x[:, 1:].astype(np.float32)
    want[np.abs(want) > 4094] = np.copysign(np.inf, want[np.abs(want) > 4094])
    with af.target("M1"), warnings.catch_warnings():
        warnings.simplefilter("ignore", af.ANEHazardWarning)
        got = af.tensor(x)[:, 1:].numpy()
    np.testing.assert_array_equal(got, want.astype(np.float16))
    assert np.isinf(got).sum() == 2
    # a value past it outside the slice (the check reads the whole input first): no hazard
    x[:, 0], x[1, 4], x[2, 7] = 6000.0, 1.0, -2.0
    with af.target("M1"), warnings.catch_warnings():
        warnings.simplefilter("error", af.ANEHazardWarning)
        np.testing.assert_array_equal(af.tensor(x)[:, 1:].numpy(), x[:, 1:])


@pytest.mark.parametrize("target", ["M4", "M5"])
def test_width_slice_is_exact_from_a16(target):
    assert (width_slice(30000.0, target) == 30000.0).all()


def test_max_pool_padding_is_not_a_width_slice_hazard():
    # max_pool2d pads with the lowest fp16 value, which must never pass through the x16 crop
    # (it would read back as -inf and report a hazard for a value the op made itself)
    x = np.random.default_rng(1).normal(0, 100, (1, 2, 6, 7)).astype(np.float16)
    want = torch.nn.functional.max_pool2d(torch.tensor(x.astype(np.float32)), 3, 2, 1)
    with af.target("M1"), warnings.catch_warnings():
        warnings.simplefilter("error", af.ANEHazardWarning)
        got = F.max_pool2d(af.tensor(x), 3, 2, 1).numpy()
        F.max_pool1d(af.tensor(x[0]), 3, 2, 1).numpy()
    np.testing.assert_array_equal(got, want.numpy())


def test_max_pool_of_values_past_4094_still_warns_on_m1():
    x = np.full((1, 1, 4, 4), 5000.0, np.float16)       # real values through width-offset taps
    with af.target("M1"), pytest.warns(af.ANEHazardWarning, match="x16 gain"):
        got = F.max_pool2d(af.tensor(x), 3, 1, 1).numpy()
    assert np.isinf(got).any()
    with af.target("M5"), warnings.catch_warnings():
        warnings.simplefilter("error", af.ANEHazardWarning)
        assert (F.max_pool2d(af.tensor(x), 3, 1, 1).numpy() == 5000.0).all()


# ---- D6: determinism ----------------------------------------------------------------------------
def test_a_row_does_not_depend_on_batch_size_or_position():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((9, 37)).astype(np.float16).astype(np.float32) * 100
    w = af.tensor(rng.standard_normal((37, 5)).astype(np.float16).astype(np.float32))
    full = (af.tensor(x) @ w).numpy()
    for i in (0, 4, 8):
        np.testing.assert_array_equal((af.tensor(x[i:i + 1]) @ w).numpy()[0], full[i])
    np.testing.assert_array_equal((af.tensor(x[::-1].copy()) @ w).numpy()[::-1], full)


def test_reruns_are_bit_identical_and_association_order_changes_bits():
    rng = np.random.default_rng(2)
    a, b, c = (af.tensor(rng.standard_normal((64, 64)).astype(np.float16)) for _ in range(3))
    left = ((a + b) + c).numpy()
    af.clear_cache()
    np.testing.assert_array_equal(((a + b) + c).numpy().view(np.uint16), left.view(np.uint16))
    right = (a + (b + c)).numpy()
    assert 0 < np.mean(left != right) < 0.5       # each order reproducible, the bytes differ


# ---- hazards ------------------------------------------------------------------------------------
def test_hazard_names_the_op_and_can_be_an_error():
    with pytest.warns(af.ANEHazardWarning, match=r"MIL op matmul 'matmul.*test_datapath\.py"):
        reduce_row([32768.0])
    with pytest.warns(af.ANEHazardWarning, match=r"slice_by_index.*x16 gain"):
        with af.target("M1"):
            af.tensor(np.full((1, 4), 5000.0))[:, 1:].numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", af.ANEHazardWarning)
        with pytest.raises(af.ANEHazardWarning, match="coerced to \\+inf"):
            (af.tensor([NAN]) + 1.0).numpy()
    assert issubclass(af.ANEHazardWarning, UserWarning)


def test_no_hazard_when_nothing_hits_a_cliff():
    with warnings.catch_warnings():
        warnings.simplefilter("error", af.ANEHazardWarning)
        reduce_row([32752.0])
        with af.target("M1"):
            af.tensor(np.full((1, 4), 4094.0))[:, 1:].numpy()
        (af.tensor([INF]) + 1.0).numpy()


# ---- the compiled kernel against its numpy reference ---------------------------------------------
def fp16_values(rng, shape, scale=1.0):
    a = rng.standard_normal(shape) * scale
    a[rng.random(shape) < 0.1] = 0.0
    return a.astype(np.float16).astype(np.float32)


TMODES = [0, 1, 2, 4, 8, 15]


def same_bits(a, b):
    assert a.shape == b.shape
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b))
    np.testing.assert_array_equal(a.view(np.uint32)[~nan], b.view(np.uint32)[~nan])


@needs_numba
@pytest.mark.parametrize("tmode", TMODES)
@pytest.mark.parametrize("shapes", [((5, 7), (7, 3)), ((1, 13), (13, 1)), ((3, 2, 9, 33), (33, 17)),
                                    ((2, 1, 6, 8), (1, 4, 8, 5)), ((17, 64), (64, 40))])
def test_compiled_tile_matmul_equals_reference(tmode, shapes):
    rng = np.random.default_rng(tmode)
    for scale in (1.0, 300.0, 2.0 ** -12):
        x, y = fp16_values(rng, shapes[0], scale), fp16_values(rng, shapes[1], scale)
        with kernels.using("numpy"):
            want = kernels.tile_matmul(x, y, 0, tmode, 32760.0)
        with kernels.using("numba"):
            same_bits(kernels.tile_matmul(x, y, 0, tmode, 32760.0), want)


@needs_numba
@pytest.mark.parametrize("tmode", TMODES)
def test_compiled_tile_matmul_with_inf_and_nan_operands(tmode):
    x = np.float32([[1.0, np.inf, 0.0, 2.0, 3.0], [0.0, 0.0, 0.0, 0.0, 1.0],
                    [5.0, -np.inf, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    y = np.float32([[1.0, 1.0], [1.0, -1.0], [np.inf, 1.0], [np.nan, 1.0], [1.0, 1.0]])
    with kernels.using("numpy"):
        want = kernels.tile_matmul(x, y, 0, tmode, 32760.0)
    with kernels.using("numba"):
        same_bits(kernels.tile_matmul(x, y, 0, tmode, 32760.0), want)
    # an inf product makes its tile inf (the plain sum's value), a NaN one NaN
    assert np.isnan(want[1, 0]) and np.isneginf(want[0, 1]) and np.isposinf(want[2, 1])


@needs_numba
def test_compiled_conv_equals_reference():
    rng = np.random.default_rng(3)
    x = fp16_values(rng, (2, 3, 9, 9), 4.0)
    w = fp16_values(rng, (5, 3, 3, 3))
    outs = []
    for choice in ("numpy", "numba"):
        with kernels.using(choice):
            af.clear_cache()
            outs.append(af.nn.functional.conv2d(af.tensor(x), af.tensor(w)).numpy())
    np.testing.assert_array_equal(outs[0].view(np.uint16), outs[1].view(np.uint16))


def test_reference_add12_is_the_published_adder():
    # add12(x, y): e = floor(log2(max|x|, |y|)), both cut to 2**(e - 11), carry cut at 2**(e - 10)
    f = lambda a, b, t=0: float(reference.add12(np.float32([a]), np.float32([b]), t)[0])  # noqa: E731
    assert f(4096.0, 1.0) == 4096.0          # q = 2: the 1 is cut away
    assert f(2048.0, 1.0) == 2049.0          # q = 1: kept (12 bits, one more than fp16)
    assert f(4094.0, 5.0) == 4098.0          # carry: 4099 cut at 2
    assert f(4094.0, 5.0, 2) == 4100.0       # carry rounded to nearest-even
    assert f(0.0, 0.0) == 0.0


def test_nan_to_num_value_and_gradient_like_torch_under_ieee_specials():
    # the NaN path of nan_to_num exists only with IEEE special values (the engine has no NaN)
    import torch
    x = np.float32([[-2.0, 0.0, 3.0, 0.0]])
    g = np.float32([[0.5, -1.0, 2.0, 1.0]])
    with af.numerics(specials="ieee"):
        a = af.tensor(x, requires_grad=True)
        out = (a / (a - a)).nan_to_num(1.5, 100.0, -7.0)
        (grad,) = af.grad((out * af.tensor(g)).sum(), [a])
        got, got_grad = out.numpy(), grad.numpy()
    t = torch.tensor(x, requires_grad=True)
    want = (t / (t - t)).nan_to_num(1.5, 100.0, -7.0)
    (want * torch.tensor(g)).sum().backward()
    np.testing.assert_array_equal(got, want.detach().numpy())
    np.testing.assert_array_equal(np.isnan(got_grad), np.isnan(t.grad.numpy()))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", af.ANEHazardWarning)
        assert (af.tensor(x) / (af.tensor(x) - af.tensor(x))).nan_to_num(1.5).tolist() == \
            [[-65504.0, 0.0, 65504.0, 0.0]]          # the engine: 0 / 0 is +0, nothing to replace


def test_a_hazard_under_a_decorator_names_the_users_line():
    """opt.step() is wrapped by @no_grad() (a contextlib wrapper, as torch code's @autocast() is
    around forward): the warning names the user's line, not contextlib's."""
    import warnings
    w = af.nn.Parameter(af.tensor(np.full((1, 64), 1000.0, np.float32)))
    opt = af.optim.SGD([w], lr=1e-9)
    af.amp.set_auto_scale(False)
    (w @ w.t()).sum().backward()                    # 6.4e7: past the matmul port's 2**15
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    hazards = [c for c in caught if issubclass(c.category, af.ANEHazardWarning)]
    assert hazards and all(c.filename == __file__ for c in hazards), [c.filename for c in hazards]
