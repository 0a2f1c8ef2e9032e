"""The kernels (aneforge/hardware/kernels): the numpy reference pinned on its hard cases, the compiled
(numba) kernels bit-equal to it, and round16 checked on every float32 against a definition.

"Bit-equal" means equal float32 bits, except that a NaN only has to be a NaN (the engine never
returns one, ANE_FACTS D3, and payloads depend on operand order in the hardware add)."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aneforge.hardware import kernels
from aneforge.hardware.kernels import reference
from test_tile_speed_paths import _cancel, _carries, _lanes

MODES = {"nearest_even": 0, "flush": 1, "half_away": 2, "half_away+flush": 3}
needs_numba = pytest.mark.skipif(not kernels.available(),
                                 reason="numba is not installed: no compiled kernels to compare")


def same(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    assert a.shape == b.shape
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b))
    np.testing.assert_array_equal(a.view(np.uint32)[~nan], b.view(np.uint32)[~nan])


def both(fn, *args):
    """fn run with the numpy reference and (when numba is installed) the compiled kernels."""
    with kernels.using("numpy"), np.errstate(all="ignore"):
        ref = fn(*args)
    if kernels.available():
        with kernels.using("numba"), np.errstate(all="ignore"):
            same(fn(*args), ref)
    return ref


SPECIALS = np.array(
    [0.0, -0.0, 1.0, -1.0, 2049.0, 2051.0, 65504.0, 65519.99, 65520.0, -65520.0, 1e5, -1e5,
     3.4e38, np.inf, -np.inf, np.nan, -np.nan, 2.0 ** -14, -(2.0 ** -14), 2.0 ** -14 - 2.0 ** -30,
     2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, -(2.0 ** -25), (0.5 - 2.0 ** -25) * 2.0 ** -24,
     1.5 * 2.0 ** -24, 2.5 * 2.0 ** -24, 1e-30, -1e-30, 1e-45, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11],
    np.float32)
NAN_PAYLOADS = np.array([0x7FFFFFFF, 0xFFFFFFFF, 0x7FFFF001, 0x7F800001, 0xFF800001],
                        np.uint32).view(np.float32)


# ---- round16 --------------------------------------------------------------------------------
def test_round16_fix_ups_apply_when_a_nan_is_present():
    # the old kernel skipped every fix-up for the whole array when it held a NaN
    x = np.array([np.nan, 1e-6, 65520, -1e5], np.float32)
    r = both(kernels.round16, x, 0)
    assert np.isnan(r[0]) and r[1:].tolist() == [np.float32(np.float16(1e-6)), np.inf, -np.inf]


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_round16_keeps_nan_and_inf(mode):
    r = both(kernels.round16, np.concatenate([NAN_PAYLOADS, np.float32([np.inf, -np.inf])]), mode)
    assert np.isnan(r[:-2]).all() and r[-2:].tolist() == [np.inf, -np.inf]


def test_round16_half_away_subnormals_round_once():
    # (1/2 - 2**-25) * 2**-24 is below half an fp16 subnormal step: it rounds to 0, not up
    # (adding 0.5 in float32 first rounded it to a tie)
    x = np.float32([(0.5 - 2.0 ** -25) * 2.0 ** -24, 0.5 * 2.0 ** -24, -2.5 * 2.0 ** -24])
    assert both(kernels.round16, x, 2).tolist() == [0.0, 2.0 ** -24, -3 * 2.0 ** -24]


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_round16_matches_numpy_cast_and_the_definition(mode):
    x = np.concatenate([SPECIALS, np.random.default_rng(mode).integers(
        0, 2 ** 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    same(both(kernels.round16, x, mode), definition16(x, mode))
    if mode == 0:
        with np.errstate(all="ignore"):
            same(both(kernels.round16, x, mode), x.astype(np.float16).astype(np.float32))


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_round16_every_fp16_value_and_its_ties(mode):
    """For every exponent, sign and 10-bit fp16 mantissa: the float32 patterns at, just
    around and at the ties between fp16 neighbours (the default run's dense sample)."""
    high = (np.arange(512, dtype=np.uint32)[:, None] << 23) | (np.arange(1024, dtype=np.uint32) << 13)
    low = np.array([0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF], np.uint32)
    x = (high.reshape(-1, 1) | low).reshape(-1).view(np.float32)
    same(both(kernels.round16, x, mode), definition16(x, mode))


def test_round16_keeps_shape_and_takes_python_scalars():
    assert both(kernels.round16, 2049.0, 0).shape == ()
    assert both(kernels.round16, np.ones((2, 0, 3)), 0).shape == (2, 0, 3)
    assert both(kernels.round16, np.ones((3, 4)).T, 0).shape == (4, 3)
    # float64 input is first converted to float32 (the carrier): 1 + 2**-11 + 2**-40 becomes
    # the tie 1 + 2**-11, which then rounds to even
    assert both(kernels.round16, np.float64(1 + 2.0 ** -11 + 2.0 ** -40), 0) == 1.0


def definition16(x, mode):
    """round16 by its definition, in float64: the fp16 grid spacing is 2**(e - 10) for
    2**e <= |x| < 2**(e + 1), e >= -14; round x / spacing to an integer; beyond 65504 -> inf."""
    with np.errstate(all="ignore"):
        v = np.asarray(x, np.float64)
        e = np.maximum(np.frexp(v)[1] - 1, -14)
        q = np.ldexp(1.0, e - 10)
        s = v / q
        n = np.copysign(np.floor(np.abs(s) + 0.5), s) if mode & 2 else np.rint(s)
        r = n * q
        r = np.where(np.abs(r) > 65504, np.copysign(np.inf, v), r)
        if mode & 1:
            r = np.where(np.abs(v) < 2.0 ** -14, np.copysign(0.0, v), r)
        r = np.where(np.isfinite(v), r, v)
    return r.astype(np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_round16_numpy_every_float32(mode):
    """Every float32 bit pattern through the numpy reference, against the compiled kernel
    (itself checked against the definition by test_round16_compiled_every_float32), or the
    definition in numpy without numba (2-7 minutes per mode on 2 cores, depending on load:
    `pytest -m slow`)."""
    step = 1 << 24
    for start in range(0, 1 << 32, step):
        x = np.arange(start, start + step, dtype=np.uint32).view(np.float32)
        if kernels.available():
            with kernels.using("numba"):
                want = kernels.round16(x, mode)
        else:
            want = definition16(x, mode)
        same(reference.round16(x, mode), want)


NAN_TO_ZERO = 4                                                  # the engine's stores
SWEEP_MODES = dict(MODES, **{"nearest_even+nan_to_zero": NAN_TO_ZERO})
# the NaN patterns: exponent all ones, a mantissa not zero, either sign
NAN_PATTERNS = ((0x7F800001, 0x80000000), (0xFF800001, 1 << 32))


def assert_no_mismatch(mode: int, start: int = 0, stop: int = 1 << 32) -> None:
    from exhaustive16 import count_mismatches
    first, count = count_mismatches(mode, start=start, stop=stop)
    assert count == 0, f"{count} float32 patterns differ, the first {first:#010x}"


@needs_numba
@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_round16_compiled_every_float32(mode):
    """Every float32 bit pattern through the compiled rounding every compiled kernel uses,
    against the definition compiled (exhaustive16.py: a branch-free loop compiled per mode that
    vectorizes; 6.5-10 s of CPU per mode, 2**32 patterns)."""
    assert_no_mismatch(mode)


@needs_numba
def test_round16_compiled_nan_to_zero_every_nan():
    """The engine's stores (mode 4: NaN -> +0) on every NaN pattern, exhaustively. Mode 4 takes
    its own code only there: compiled.r16 sends it to r16_ieee (mode & 3 == 0), whose one test
    of mode & 4 is in the NaN branch, and every other pattern takes `_via_half` as mode 0 does
    (swept above, every pattern); so does the definition (its mode & 4 is in its NaN branch
    too). The mode's sweep of all 2**32 patterns (~6.5 s of CPU; these 2**24 take a 256th) is
    `test_round16_compiled_every_float32_nan_to_zero`, under `-m slow`."""
    for start, stop in NAN_PATTERNS:
        assert_no_mismatch(NAN_TO_ZERO, start, stop)


@needs_numba
@pytest.mark.slow
def test_round16_compiled_every_float32_nan_to_zero():
    assert_no_mismatch(NAN_TO_ZERO)


@needs_numba
@pytest.mark.parametrize("mode", SWEEP_MODES.values(), ids=SWEEP_MODES.keys())
def test_exhaustive_definition_is_the_definition(mode):
    """The sweep's compiled definition against definition16 (numpy, float64) on every fp16
    value, its neighbours and ties, the special values and random patterns."""
    from exhaustive16 import definitions
    high = (np.arange(512, dtype=np.uint32)[:, None] << 23) | (np.arange(1024, dtype=np.uint32) << 13)
    low = np.array([0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF], np.uint32)
    noise = np.random.default_rng(mode).integers(0, 2 ** 32, 1 << 16, dtype=np.uint64)
    x = np.concatenate([(high.reshape(-1, 1) | low).reshape(-1).view(np.float32), SPECIALS,
                        NAN_PAYLOADS, noise.astype(np.uint32).view(np.float32)])
    got, nan = definitions(x, mode), np.isnan(x)
    same(got[~nan], definition16(x[~nan], mode & 3))
    assert (got[nan] == 0).all() if mode & 4 else np.isnan(got[nan]).all()


@needs_numba
def test_exhaustive_sweep_finds_a_wrong_rounding():
    """The sweep is not vacuous: rounding toward zero (11 significant bits kept by a mask) differs
    first at 1 + 2**-11 + 2**-23, the first pattern past the tie above 1.0; in the 8 fp16 steps
    above 1.0 at the 0xFFF patterns past each tie, and at the 4 ties to an odd neighbour."""
    from numba import njit
    from exhaustive16 import count_mismatches
    from aneforge.hardware.kernels.compiled import _bits, _float

    @njit
    def toward_zero(v, mode):
        return _float(_bits(v) & np.uint32(0xFFFFE000))

    first, count = count_mismatches(0, toward_zero, 0x3F800000, 0x3F800000 + (1 << 16))
    assert first == 0x3F801001 and count == 8 * 0xFFF + 4


# ---- matmul ---------------------------------------------------------------------------------
def fp16(shape, rng, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float16).astype(np.float32)


def test_matmul_shortcut_bug_products_are_rounded():
    # 0.5 * 2**-24 = 2**-25 rounds (a tie) to 0 in fp16: the old powers-of-two BLAS shortcut
    # returned 1024 * 2**-25 = 3.05e-5
    x, y = np.full((1, 1024), 0.5, np.float32), np.full((1024, 1), 2.0 ** -24, np.float32)
    assert both(kernels.matmul, x, y, 0).tolist() == [[0.0]]


def test_matmul_adds_sequentially_over_k():
    # 300 * 65504 = 19651200 (spacing 2 in fp32): each later + 1 is a tie back to even, so the
    # ones vanish when they come last and count when they come first
    big, ones = [65504.0] * 300, [1.0] * 1000
    for order, want in ((big + ones, 19651200.0), (ones + big, 19652200.0)):
        x = np.array([order], np.float32)
        for n in (1, 2, 5):              # no dependence on N (the old reference changed at N = 1)
            assert both(kernels.matmul, x, np.ones((len(order), n), np.float32), 0).tolist() \
                == [[want] * n]


@pytest.mark.parametrize("rows", [5, 50])     # few outputs (accumulate) / many (row adds)
def test_matmul_reference_does_not_depend_on_its_chunk(monkeypatch, rows):
    rng = np.random.default_rng(0)
    x, y = fp16((3, rows, 700), rng), fp16((700, 9), rng, 100.0)
    want = reference.matmul(x, y, 0)
    monkeypatch.setattr(reference, "_CHUNK", 37)
    same(reference.matmul(x, y, 0), want)
    monkeypatch.undo()
    same(both(kernels.matmul, x, y, 0), want)
    same(want[1], _sequential(x[1], y, 0))


def _sequential(x, y, mode):
    """The documented order written out: acc = +0, then acc += round16(x[i, k] * y[k, j])."""
    acc = np.zeros((x.shape[0], y.shape[1]), np.float32)
    with np.errstate(all="ignore"):
        for k in range(x.shape[1]):
            acc = acc + reference.round16(x[:, k, None] * y[None, k, :], mode)
    return acc


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
@pytest.mark.parametrize("case", ["ties", "subnormal", "overflow", "not_fp16", "specials"])
def test_matmul_hard_cases(case, mode):
    rng = np.random.default_rng(1)
    m, k, n = 7, 33, 9
    if case == "ties":           # (1 + a 2**-10)(1 + b 2**-10): products land on fp16 ties
        x = 1 + rng.integers(0, 8, (m, k)).astype(np.float32) * 2.0 ** -10
        y = (1 + rng.integers(0, 8, (k, n)).astype(np.float32) * 2.0 ** -10) * \
            rng.choice([-1, 1], (k, n)).astype(np.float32)
    elif case == "subnormal":    # products around 2**-24 .. 2**-14
        x, y = fp16((m, k), rng, 2.0 ** -8), fp16((k, n), rng, 2.0 ** -9)
    elif case == "overflow":     # products beyond 65504 and partial sums beyond it
        x, y = fp16((m, k), rng, 300.0), fp16((k, n), rng, 300.0)
    elif case == "not_fp16":     # float32 data that is not fp16 (double rounding is the model)
        x, y = rng.standard_normal((m, k)).astype(np.float32), \
            rng.standard_normal((k, n)).astype(np.float32)
    else:
        x = rng.choice(SPECIALS, (m, k)).astype(np.float32)
        y = rng.choice(SPECIALS, (k, n)).astype(np.float32)
    same(both(kernels.matmul, x, y, mode), _sequential(x, y, mode))


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_matmul_compiled_equals_reference(data):
    """Shapes with broadcast batches, edges of the 4-row and column blocks, empty axes."""
    bx = data.draw(st.sampled_from([(), (1,), (3,), (2, 1), (1, 3)]))
    by = data.draw(st.sampled_from([(), (1,), (3,), (2, 3)]))
    m, k, n = (data.draw(st.sampled_from([0, 1, 3, 4, 5, 9])) for _ in range(3))
    mode = data.draw(st.sampled_from(list(MODES.values())))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    values = np.concatenate([SPECIALS, fp16(64, rng, 2.0 ** data.draw(st.integers(-12, 8)))])
    x = rng.choice(values, bx + (m, k)).astype(np.float32)
    y = rng.choice(values, by + (k, n)).astype(np.float32)
    r = both(kernels.matmul, x, y, mode)
    assert r.shape == np.broadcast_shapes(bx, by) + (m, n)


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_matmul_zeros_of_x_against_inf_and_nan_in_y(mode):
    """The compiled kernel skips a k where x is 0 across a row block (one-hot, relu): never
    where y's row holds inf or NaN (0 * inf = NaN), and -0 + 0 must stay +0."""
    rng = np.random.default_rng(3)
    x = np.zeros((37, 12), np.float32)
    x[np.arange(37), rng.integers(0, 12, 37)] = 1.0          # one-hot rows
    x[5:9] = -0.0
    x[20:24, 3] = 2.0 ** -20
    y = fp16((12, 7), rng)
    y[3, 2], y[7, 4], y[9, 0] = np.inf, np.nan, -np.inf
    y[10] = -0.0
    r = both(kernels.matmul, x, y, mode)
    same(r, _sequential(x, y, mode))
    assert np.isnan(r[:, 2]).sum() > 0 and not np.signbit(r[5:9, 1]).any()


@needs_numba
def test_matmul_compiled_large_uses_threads_and_blocks():
    rng = np.random.default_rng(2)
    x, y = fp16((2, 70, 300), rng), fp16((300, 1100), rng)      # > one 512-column block
    both(kernels.matmul, x, y, 0)


# ---- narrow sum -----------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_narrow_sum_compiled_equals_reference(mode):
    rng = np.random.default_rng(mode)
    terms = np.concatenate([fp16((50, 3, 4), rng, 100.0), rng.choice(SPECIALS, (20, 3, 4)),
                            fp16((50, 3, 4), rng, 2.0 ** -12)]).astype(np.float32)
    both(kernels.narrow_sum, terms, mode)
    # ones stall at 2048 (2049 ties to even); half-away climbs by 2 up to 4096 (spacing 4)
    assert both(kernels.narrow_sum, np.ones((4096,), np.float32), mode).tolist() == \
        (2048.0 if mode < 2 else 4096.0)
    both(kernels.narrow_sum, terms[:1], mode)


# ---- the switch -----------------------------------------------------------------------------
def _python(code, **env):
    full = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_import_does_not_import_numba():
    assert _python("import sys, aneforge; print('numba' in sys.modules)") == "False"


def test_environment_switch_forces_numpy():
    code = "from aneforge.hardware import kernels; print(kernels.active(), kernels.wait())"
    assert _python(code, ANEFORGE_KERNELS="numpy") == "numpy numpy"
    if kernels.available():      # nothing runs before the first kernel call; then numba
        assert _python(code, ANEFORGE_KERNELS="auto") == "numpy numba"


def test_without_numba_the_numpy_kernels_run(tmp_path):
    (tmp_path / "numba.py").write_text("raise ImportError('no numba here')\n")
    code = ("import numpy as np, aneforge as af; from aneforge.hardware import kernels; "
            "v = (af.tensor([[1.0, 2.0]]) @ af.tensor([[3.0], [4.0]])).item(); "
            "print(v, kernels.wait())")
    import os
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    assert _python(code, PYTHONPATH=path) == "11.0 numpy"


def _training(steps: int = 3) -> list:
    """A few AdamW steps of a small GELU MLP: each loss, then the final weights."""
    import aneforge as af
    import aneforge.nn as nn
    import aneforge.nn.functional as F
    af.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    opt = af.optim.AdamW(model.parameters(), lr=1e-2)
    x = af.tensor(np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32))
    y = af.tensor(np.arange(6) % 4)
    out = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss.numpy())
    return out + [p.numpy() for p in model.parameters()]


@needs_numba
def test_the_background_swap_mid_run_gives_the_same_bits(monkeypatch):
    """Under "auto" the compiled kernels come in whenever their load ends, here in the middle
    of a program run (at its 40th fp16 rounding): the steps give the bits they give all-numpy
    and all-numba."""
    with kernels.using("numpy"):
        ref = _training()
    with kernels.using("numba"):
        for a, b in zip(_training(), ref):
            same(a, b)
    loaded, calls = kernels._fast(), []

    class Pending:                                   # a load that has not ended yet
        def start(self):
            pass

    def round16(x, mode):
        calls.append(kernels.active())
        if len(calls) == 40:
            kernels._compiled.append(loaded)         # the loader's publication
        return reference_round16(x, mode)

    reference_round16 = reference.round16
    monkeypatch.setattr(kernels, "_compiled", [])
    monkeypatch.setattr(kernels, "_LOADER", Pending())
    monkeypatch.setattr(reference, "round16", round16)
    with kernels.using("auto"):
        swapped = _training()
    assert calls[:40] == ["numpy"] * 40 and len(calls) == 40, calls    # then numba only
    assert kernels.active() == "numba"
    for a, b in zip(swapped, ref):
        same(a, b)


@needs_numba
def test_a_fresh_numba_cache_compiles_in_the_background(tmp_path):
    """On an empty numba cache the first kernel call returns at once (numpy), child processes
    compile the kernels into the cache, and the load swaps them in (WARM cut to one kernel:
    the others take ~15 s to compile)."""
    code = ("import aneforge as af; from aneforge.hardware import kernels; "
            "kernels.WARM = kernels.WARM[:1]; "
            "v = (af.tensor([[1.0, 2.0]]) @ af.tensor([[3.0], [4.0]])).item(); "
            "first = kernels.active(); now = kernels.wait(); "
            "print(v, first, now, kernels._load_cached(kernels._kernels()))")
    assert _python(code, ANEFORGE_KERNELS="auto", NUMBA_CACHE_DIR=str(tmp_path)) == \
        "11.0 numpy numba True"
    assert any(tmp_path.rglob("*to_float16*.nbi"))       # written by the child process


@needs_numba
def test_the_compiling_child_compiles_its_groups_side_by_side(tmp_path, monkeypatch):
    """`_spawn`'s child compiles each group of kernels in a process of its own (forked after
    numba's tables are built, on Linux) into numba's cache; `_uncached` finds their index files
    there without importing numba, and still misses a kernel not compiled."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    pair = [w for w in kernels.WARM if w[1] in ("to_float16", "has_nan")]
    assert kernels._uncached(pair[:1]) and kernels._uncached(pair)     # an empty cache
    child = kernels._spawn([[f"{m}.{n}"] for m, n, _ in pair], 0)
    assert child.wait() == 0
    assert not kernels._uncached(pair)
    assert kernels._uncached(pair + [w for w in kernels.WARM if w[1] == "port"])
    named = {f.name.split("-")[0] for f in tmp_path.rglob("*.nbi")}
    assert {"casts.to_float16", "casts.has_nan"} <= named
    assert "compiled.port" not in named


@needs_numba
def test_one_compile_of_the_same_kernels_at_a_time(tmp_path, monkeypatch):
    """A compiling child started while another process holds the same groups' lock waits
    (does not compile beside it); let go with the cache still empty, it compiles; started
    again while the lock is held, it waits and then finds the kernels written, and leaves
    without importing numba (the process that started it loads them)."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    groups = [["casts.to_float16"]]
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(kernels.__file__))))
    program = kernels._CHILD.format(nice=0, package=package, groups=groups)
    program += "\nprint('numba' in sys.modules)"
    run = [sys.executable, "-c", program]
    for expect in ("True", "False"):        # the first compiles; the second finds the cache
        with kernels._one_at_a_time(groups) as waited:
            assert not waited
            child = subprocess.Popen(run, stdout=subprocess.PIPE, text=True)
            time.sleep(1.5)
            assert child.poll() is None     # waiting for the lock
            assert any(tmp_path.rglob("*.nbi")) == (expect == "False")
        assert child.communicate(timeout=120)[0].strip() == expect
        assert child.returncode == 0
        assert any(tmp_path.rglob("*to_float16*.nbi"))
    with kernels._one_at_a_time(groups) as outer:     # other groups: another lock
        with kernels._one_at_a_time([["casts.has_nan"]]) as inner:
            assert not outer and not inner


def test_a_cache_numba_keeps_elsewhere_is_asked_for(tmp_path, monkeypatch):
    """Without NUMBA_CACHE_DIR numba caches in the package's __pycache__ when it may write
    there, else in a place of its own: `_uncached` cannot look there and says False (the
    loader then asks numba)."""
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert not kernels._uncached(kernels.WARM)


@needs_numba
def test_a_fresh_numba_cache_swaps_in_the_lean_forms_then_the_full(tmp_path):
    """The load's two stages on an empty numba cache, with a probe swap (lean form
    to_float16, full form port: quick to compile): the lean stage is published with the
    probe bound to its lean form, then the full stage rebinds it; `stage()` follows."""
    code = ("from aneforge.hardware import kernels; from aneforge.hardware.kernels import reference; "
            "kernels.WARM = kernels.WARM[:1] + (('compiled', 'port', ('f4:1', 'float32', 'boolean')),); "
            "kernels.SWAPS = {('compiled', 'probe'): ('to_float16', 'port')}; "
            "kernels.FULL = {('compiled', 'port')}; seen = []; publish = kernels._Loader._publish; "
            "kernels._Loader._publish = lambda self, m, full=True: (publish(self, m, full), "
            "seen.append((kernels.stage(), kernels._module('compiled').probe.py_func.__name__))); "
            "first = kernels.stage(); kernels.round16(1.0, 0); now = kernels.wait(); "
            "print(first, seen, now); print([e for e, _ in kernels._LOADER.log])")
    out, log = _python(code, ANEFORGE_KERNELS="auto", NUMBA_CACHE_DIR=str(tmp_path)).splitlines()
    assert out == "numpy [('lean', 'to_float16'), ('full', 'port')] numba"
    # the loader's record, which bench/startup.py reports: compiled by the children, then in
    assert log == str(["start", "lean compiled", "lean in", "full compiled", "full in"])


@needs_numba
def test_a_programs_second_run_waits_for_the_first_compiled_kernels(tmp_path):
    """On an empty numba cache a program's first run goes on the numpy reference at once; its
    second (a loop: where the run plan is built) waits for the first compiled kernels
    (`kernels.settle`) instead of running more reference steps, ~250x slower, on the core
    the compiling children need. WARM cut to one kernel, quick to compile; no run plan (its
    kernels take seconds to compile)."""
    code = ("import aneforge as af; from aneforge.hardware import kernels; "
            "kernels.WARM = kernels.WARM[:1]; "
            "f = lambda: (af.tensor([1.0, 2.0]) + af.tensor([3.0, 4.0])).tolist(); "
            "v = f(); first = kernels.active(); w = f(); "
            "print(v, first, w, kernels.active(), kernels._SETTLED.is_set())")
    env = dict(os.environ, ANEFORGE_KERNELS="auto", NUMBA_CACHE_DIR=str(tmp_path),
               ANEFORGE_SIM_PLAN="never")
    fresh = subprocess.run([sys.executable, "-c", code + "; f()"], env=env, capture_output=True,
                           text=True, check=True)
    assert fresh.stdout.strip() == "[4.0, 6.0] numpy [4.0, 6.0] numba True"
    # the wait is announced, once; with the kernels in the cache nothing waits or is said
    assert fresh.stderr.count("aneforge: compiling the simulator's kernels") == 1, fresh.stderr
    cached = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True)
    assert "compiling" not in cached.stderr, cached.stderr


@needs_numba
def test_the_forms_switch_binds_and_restores():
    from aneforge.hardware.kernels import compiled, fused
    kernels.wait()
    with kernels.forms("lean"):
        assert fused.run is fused.run_lean and compiled.default_tasks is compiled._lean_tasks
    assert fused.run is fused.run_full and compiled.default_tasks is compiled._default_tasks


def _called(function) -> set:
    """The names a function's source calls by name (`f(...)`) or by attribute (`_self.f`)."""
    import ast
    import inspect
    names = set()
    for node in ast.walk(ast.parse(inspect.getsource(function.py_func))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            names.add(node.func.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "_self":
            names.add(node.attr)
    return names


@needs_numba
def test_the_lean_forms_compile_few_specialisations():
    """What a fresh install compiles first (`kernels.SWAPS`' lean forms) stays small: the tile
    matmul's lean form is one loop nest over the default tile and the saturation check (each
    further tile, `_thin` and the plain rows' check cost ~1-1.5 s of CPU each on an AVX2 VM:
    ~12 s in all against ~3 s; `_block` as a callee was compiled on its own and again into
    the caller), and the lean VM folds no reduction but absmax (the full VM's folds,
    `_reduce`, doubled its compile: ~16 s against ~7) and calls no compiled function but its
    operands' reader and the roundings (each function called is compiled on its own and
    again into the caller; the elements through `_apply`, a function per line and one for the
    absmax took ~5.7 s against ~3.5)."""
    from aneforge.hardware.kernels import compiled, fused
    tile = _called(compiled._lean_tasks)
    assert {"_default_tile", "_saturate"} <= tile
    assert not tile & {"_block", "_block_tail", "_thin", "_thin_k", "_rows", "_plain_rows",
                       "_plain_tile", "_y_bounds", "tile_tasks"}
    vm = _called(fused.run_lean)
    assert {"_line", "r16", "r16_ieee"} <= vm - {"njit", "range", "min", "max", "abs"} <= {
        "_line", "r16", "r16_ieee", "_unowned", "_bits", "_float", "_from_half_bits",
        "_to_half_bits"}                # (the intrinsics: no function of their own)


@needs_numba
def test_the_lean_vm_returns_each_reduction_to_its_kernel():
    """run_lean stops at a reduction's row, as run_full stops at an unsettled one (the plan runs
    the op's kernel, then resumes after it); the elementwise rows before it are done, the
    ones after it only when resumed."""
    from aneforge.hardware.kernels import fused
    kernels.wait()
    width, at = fused.WIDTH, fused.ROW.index

    def row(op, out, a, b, cols=4):
        r = [0] * width
        for field, v in (("opcode", fused.OP[op]), ("store", -1), ("rows", 1), ("cols", cols),
                         ("out", out), ("a", a), ("a_rs", cols), ("a_cs", 1), ("b", b),
                         ("b_rs", cols), ("b_cs", 1)):
            r[at(field)] = v
        return r
    arena = np.zeros(32, np.float32)
    arena[:8] = np.arange(8)
    code = np.array([row("add", 8, 0, 4), row("sum", 12, 8, 0), row("mul", 16, 0, 4)],
                    np.int64)
    scratch = [np.zeros(8, np.float32) for _ in range(3)]
    tables = np.zeros(0, np.uint16)
    for run in (fused.run_lean, fused.run_full):
        arena[8:] = 0
        stop = run(arena, code, *scratch, 0, tables, 0)
        assert arena[8:12].tolist() == [4, 6, 8, 10]
        if run is fused.run_lean:
            assert stop == 1 and arena[12] == 0 and not arena[16:20].any()
            assert run(arena, code, *scratch, 0, tables, 2) == -1
        else:
            assert stop == -1 and arena[12] == 28
        assert arena[16:20].tolist() == [0, 5, 12, 21]


@needs_numba
def test_the_compiling_child_leaves_scipy_alone(tmp_path):
    """The compiling child does not import scipy's BLAS (numba's first compile would: 0.3-0.45
    s of CPU before any kernel compiles) and still compiles its kernels."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(kernels.__file__))))
    program = kernels._CHILD.format(nice=0, package=package, groups=[["casts.to_float16"]])
    code = program + "\nprint('scipy.linalg' in sys.modules, 'numba' in sys.modules)"
    assert _python(code, NUMBA_CACHE_DIR=str(tmp_path)) == "False True"
    assert any(tmp_path.rglob("*to_float16*.nbi"))


def test_each_module_compiles_in_a_process_of_its_own():
    """The lean stage in two processes, one per module (the small kernels and the tile
    matmul's lean form; the fused VM's), the full stage likewise (`_child`)."""
    lean, full = kernels._stages()
    for stage in (lean, full):
        assert {kernels._child(m, n) for m, n, _ in stage} == {"compiled", "fused"}


def test_use_rejects_unknown_kernels():
    with pytest.raises(ValueError, match="numpy"):
        kernels.use("cuda")


# ---- float16 casts at the program boundary --------------------------------------------------
def test_float16_casts_equal_numpy():
    every_fp16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    wide = both(kernels.astype, every_fp16, np.float32)
    same(wide, every_fp16.astype(np.float32))
    high = (np.arange(512, dtype=np.uint32)[:, None] << 23) | (np.arange(1024, dtype=np.uint32) << 13)
    x = (high.reshape(-1, 1) | np.array([0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF], np.uint32))
    x = np.concatenate([x.reshape(-1).view(np.float32), SPECIALS]).reshape(-1, 2)
    narrow = both(kernels.astype, x, np.float16)
    assert narrow.dtype == np.float16 and narrow.shape == x.shape
    with np.errstate(all="ignore"):
        same(narrow.astype(np.float32), x.astype(np.float16).astype(np.float32))
    assert both(kernels.astype, np.float32(2049.0), np.float16) == 2048.0
    assert both(kernels.astype, np.arange(3), np.float32).dtype == np.float32


# ---- the tile-of-4 matmul and the output port -------------------------------------------------
TMODES = [0, 1, 2, 4, 8, 15]      # the default datapath, and each open point of the model


def tile(x, y, mode=0, tmode=0, limit=32760.0):
    """The tile matmul by the reference, the compiled kernel and its lean form (what a fresh
    install runs while the full one compiles: `kernels.SWAPS`), all bit-equal."""
    ref = both(kernels.tile_matmul, x, y, mode, tmode, limit)
    if kernels.available():
        with kernels.using("numba"), kernels.forms("lean"), np.errstate(all="ignore"):
            same(kernels.tile_matmul(x, y, mode, tmode, limit), ref)
    return ref


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_tile_matmul_compiled_equals_reference(data):
    """Every path of the compiled tile kernel against the reference: K % 4 = 1, 2, 3 (the last
    tile's missing lanes are zeros, no padding copy), thin outputs (n < 16, vectorized across
    rows; n == 1) and wide ones, rows around the task sizes (8 and 32), 2-D, equal and broadcast
    batches, zero rows of x (skipped work) against inf and NaN in y, saturation, subnormals."""
    bx = data.draw(st.sampled_from([(), (3,), (2, 1), (1,)]))
    by = data.draw(st.sampled_from([(), (3,), (1, 3), (2, 3)]))
    m = data.draw(st.sampled_from([1, 3, 4, 5, 8, 9, 33]))
    n = data.draw(st.sampled_from([1, 2, 5, 16, 17]))
    k = data.draw(st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 9, 14]))
    mode = data.draw(st.sampled_from(list(MODES.values())))
    tmode = data.draw(st.sampled_from(TMODES))
    limit = data.draw(st.sampled_from([32760.0, np.inf]))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    values = np.concatenate([SPECIALS, fp16(64, rng, 2.0 ** data.draw(st.integers(-12, 9)))])
    x = rng.choice(values, bx + (m, k)).astype(np.float32)
    y = rng.choice(values, by + (k, n)).astype(np.float32)
    x[..., rng.random(m) < 0.5, :] = 0.0
    r = tile(x, y, mode, tmode, limit)
    assert r.shape == np.broadcast_shapes(bx, by) + (m, n)


@pytest.mark.parametrize("tmode", TMODES)
@pytest.mark.parametrize("k", [5, 6, 7, 8])
@pytest.mark.parametrize("n", [1, 3, 20])
def test_tile_matmul_tail_lanes_are_zeros(tmode, k, n):
    """K % 4 = 1, 2, 3: the kernel's missing lanes give what explicit zero padding gives."""
    rng = np.random.default_rng(k * n)
    x, y = fp16((37, k), rng, 30.0), fp16((k, n), rng, 30.0)
    pad = -k % 4
    xp, yp = np.pad(x, ((0, 0), (0, pad))), np.pad(y, ((0, pad), (0, 0)))
    same(tile(x, y, 0, tmode), reference.tile_matmul(xp, yp, 0, tmode, 32760.0))


@pytest.mark.parametrize("n", [1, 4, 24])
def test_tile_matmul_zeros_of_x_against_inf_and_nan_in_y(n):
    """A tile whose x lanes are all 0 is skipped only where y's four rows are finite (0 * inf
    is NaN); -0 lanes must leave +0 sums."""
    rng = np.random.default_rng(n)
    x = np.zeros((40, 16), np.float32)
    x[np.arange(40), rng.integers(0, 16, 40)] = 1.0          # one-hot rows
    x[5:9] = -0.0
    y = fp16((16, n), rng)
    y[3, 0], y[9, n - 1] = np.inf, np.nan
    r = tile(x, y)
    assert np.isnan(r[x[:, 3] == 0, 0]).all() and np.isnan(r[x[:, 9] == 0, n - 1]).all()
    assert (r[5:9, 1:n - 1] == 0).all() and not np.signbit(r[5:9, 1:n - 1]).any()


@needs_numba
@pytest.mark.parametrize("shape", [((300, 70), (70, 1)), ((2, 90, 64), (64, 40))])
def test_tile_matmul_split_over_threads(monkeypatch, shape):
    from aneforge.hardware.kernels import compiled
    monkeypatch.setattr(compiled, "PARALLEL_MACS", 0)
    monkeypatch.setenv("ANEFORGE_THREADS", "2")
    rng = np.random.default_rng(4)
    tile(fp16(shape[0], rng), fp16(shape[1], rng))


@pytest.mark.parametrize("by", [(), (1,), (1, 1)])
def test_tile_matmul_of_a_batch_against_one_matrix_is_each_matrix_alone(by):
    """x [..., M, K] against one y (a linear layer over [batch, tokens, features]) runs as one
    matrix of all x's rows: the bits are each batch entry's own product's, zero rows and
    specials included, through both the plain and the checked tiles."""
    rng = np.random.default_rng(5)
    x = fp16((2, 3, 9, 6), rng)
    x[0, 1, 2:5] = 0.0
    x[1, 2, 0, 1] = np.inf
    y = fp16(by + (6, 40), rng)
    r = tile(x, y)
    assert r.shape == (2, 3, 9, 40)
    for b in np.ndindex(2, 3):
        same(r[b], tile(x[b], y.reshape(6, 40)))


def test_tile_matmul_saturates_and_leaves_subnormals():
    """The accumulator becomes +-inf once |acc| >= limit and stays there; sums below 2**-14
    come out as they are (the port flushes them, not the kernel)."""
    x = np.float32([[200.0] * 8, [2.0 ** -12] * 8, [-200.0] * 4 + [200.0] * 4])
    y = np.full((8, 2), 100.0, np.float32)
    y[:, 1] = 2.0 ** -6
    r = tile(x, y)
    assert r[0, 0] == np.inf and r[2, 0] == -np.inf         # -80000 saturated: +80000 can't undo it
    assert r[1, 1] == 8 * 2.0 ** -18 and r[0, 1] == 25.0


PORT_VALUES = np.float32([0.0, -0.0, 1.0, -2.0, 2.0 ** -15, -(2.0 ** -20), 2.0 ** -14, 32759.0,
                          32760.0, -32760.0, 1e9, np.inf, -np.inf, np.nan, 2.0 ** -24, 6e4])


@pytest.mark.parametrize("overflow", [32760.0, 32758.8, None])
@pytest.mark.parametrize("flush", [True, False])
def test_port_compiled_equals_reference(overflow, flush):
    acc = np.tile(PORT_VALUES, (3, 1))
    counts = {}
    for name in ("numpy", "numba") if kernels.available() else ("numpy",):
        with kernels.using(name):
            counts[name] = (a := acc.copy(), kernels.port(a, overflow, flush))
    want, count = counts["numpy"]
    for got, n in counts.values():
        same(got, want)
        assert n == count
    # 32760, -32760, 1e9, +-inf, 6e4; and 32759 past 32758.8
    assert count == (0 if overflow is None else 3 * (6 + (overflow <= 32759)))
    assert np.isposinf(want[:, 8]).all() == (overflow is not None)
    assert (want[:, [0, 1, 4, 5, 14]] == 0).all() == flush
    assert np.signbit(want[:, 1]).any() != flush          # -0 flushed to +0
    assert np.isnan(want[:, 13]).all() and (want[:, 6] == 2.0 ** -14).all()


def test_port_works_in_place_on_views():
    acc = np.tile(PORT_VALUES, (2, 1))
    view = acc[:, ::2]
    assert kernels.port(view, 32760.0, True) == 2 * 3
    assert np.isposinf(acc[:, 8]).all() and acc[0, 9] == -32760.0    # only the view changed


@needs_numba
@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
@pytest.mark.parametrize("overflow", [32760.0, None])
@pytest.mark.parametrize("flush", [True, False])
@pytest.mark.parametrize("biased", [True, False])
def test_port_bound_is_bias_port_then_store(mode, overflow, flush, biased):
    """The bound matmul's one-pass finish (bias, port, fp16 store) gives the bits of the three
    steps it replaces as the numpy reference runs them, and port's count."""
    rng = np.random.default_rng(mode)
    acc = np.concatenate([np.tile(PORT_VALUES, (len(SPECIALS), 1)),
                          rng.choice(SPECIALS, (len(SPECIALS), len(PORT_VALUES)))])
    bias = rng.choice(np.concatenate([SPECIALS, PORT_VALUES]), acc.shape[1]) if biased else None
    with kernels.using("numpy"), np.errstate(all="ignore"):
        want = acc + bias if biased else acc.copy()
        count = kernels.port(want, overflow, flush)
        want = kernels.round16(want, mode)
    with kernels.using("numba"):
        got = acc.copy()
        finish = kernels.port_bound(got, bias, overflow, flush, mode)
        assert finish() == count
    same(got, want)
    assert count > 0 or overflow is None


# ---- the 16-lane plain tile on any row length (AVX-512 masked runs) ---------------------------
def _wide_cpu() -> bool:
    from aneforge.hardware.kernels import compiled
    return compiled.WIDE


needs_wide = pytest.mark.skipif(not kernels.available() or not _wide_cpu(),
                                reason="numba does not target AVX-512F+DQ here: no 16-lane tile")


@needs_wide
@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 10 ** 6), st.integers(-48, 32),
       st.sampled_from([1, 2, 5, 9, 15, 16, 17, 31, 33, 40, 47, 63, 65, 72]), st.booleans())
def test_wide_tile_masked_lanes_equal_reference_tile_sum(seed, base, n, cancel):
    """Rows whose length is not a multiple of 32: the last n % 32 lanes run as masked runs of
    16, bit-equal to the reference's tile sum over adversarial products (ties at the cut,
    carries, cancellation, equal magnitudes of opposite sign, +-0); the lanes past n are
    neither read (y's rows go on with NaN and inf) nor written (o's buffer goes on with
    sentinels)."""
    from aneforge.hardware.kernels import compiled
    rng = np.random.default_rng(seed)
    p = np.stack([_lanes(rng, n, base) for _ in range(4)])
    p = _cancel(rng, p) if cancel else p
    rows = np.full((4, n + 16), np.nan, np.float32)
    rows[:, n + 1::2] = np.inf
    rows[:, :n] = p
    acc = (rng.standard_normal(n) * 2.0 ** (base + 2)).astype(np.float32)
    buf = np.full(n + 16, 7.0, np.float32)
    buf[:n] = acc
    ones = np.float32([1, 1, 1, 1])
    assert compiled._plain_wide(buf[:n], *(rows[k, :n] for k in range(4)), *ones) == n
    with np.errstate(all="ignore"):
        same(buf[:n], acc + reference.tile_sum(list(p), 0))
    assert (buf[n:] == 7.0).all()


@pytest.mark.parametrize("shape", [((32, 8, 256), (32, 256, 9)), ((2, 16, 64), (2, 64, 72)),
                                   ((40, 64), (64, 65)), ((19, 30), (30, 47)), ((9, 13), (13, 8)),
                                   ((70, 21), (21, 3))])
def test_tile_matmul_of_the_workloads_narrow_outputs(shape):
    """The shapes the CNN and LM steps run whose width is not a multiple of 32 (conv weight
    gradients [8, 256] @ [256, 9], [16, 64] @ [64, 72]; heads of 65 classes), through the
    plain tile with masked lanes, over carry-prone and cancelling operands; and the same
    through the checked tile (a limit the partials reach)."""
    rng = np.random.default_rng(sum(shape[0]) * sum(shape[1]))
    x, y = _carries(rng, shape[0]), _carries(rng, shape[1])
    x[..., 1::3, :] = fp16(x[..., 1::3, :].shape, rng)
    x[..., 0, :] = -x[..., 0, :]
    for limit in (32760.0, 40.0):
        tile(x, y, 0, 0, limit)


# ---- thin outputs of long rows: the tiles side by side along K ---------------------------------
def _along_k_cpu() -> bool:
    from aneforge.hardware.kernels import compiled
    return compiled._plain_is_wide() > 0


needs_along_k = pytest.mark.skipif(not kernels.available() or not _along_k_cpu(),
                                   reason="numba targets neither AVX-512 nor AVX2 here: no "
                                          "tiles side by side along K")


@needs_along_k
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 10 ** 6), st.integers(-48, 32), st.sampled_from([64, 128, 260, 321, 1027]),
       st.booleans())
def test_tiles_along_k_equal_reference_tile_sums(seed, base, k, cancel):
    """`_row_tiles`: every tile of a row side by side (lanes 4t .. 4t + 3 gathered from
    consecutive products: 16 tiles of 64 products on AVX-512; on AVX2 32 of 128, then 8 of
    32), the last ones (and K % 4 missing lanes) one by one, each bit-equal to the
    reference's tile sum of the same four products over adversarial lanes."""
    from aneforge.hardware.kernels import compiled
    rng = np.random.default_rng(seed)
    tiles = (k + 3) // 4
    p = np.stack([_lanes(rng, tiles, base) for _ in range(4)])
    p = _cancel(rng, p) if cancel else p
    p[:, -1] = p[:, -1] * (np.arange(4) < 4 - (-k % 4))             # missing lanes: +0
    row = p.T.reshape(-1)[:k].copy()                                  # lane l of tile t: 4t + l
    ts = np.full(tiles + 1, 7.0, np.float32)
    compiled._row_tiles(ts, row, np.ones(k, np.float32), k)
    with np.errstate(all="ignore"):                  # + 0: as the accumulator reads them (a
        zero = np.float32(0.0)                         # tile of zeros may be -0 on AVX2; from
        same(ts[:tiles] + zero, reference.tile_sum(list(p), 0) + zero)    # +0 it adds nothing)
    assert ts[tiles] == 7.0


@pytest.mark.parametrize("family", ["fp16", "carries", "tiny", "big"])
@pytest.mark.parametrize("shape", [((8, 300), (300, 1)), ((16, 1030), (1030, 3)),
                                   ((33, 258), (258, 2)), ((5, 4099), (4099, 1)),
                                   ((2, 9, 512), (2, 512, 1)), ((40, 64), (64, 1)),
                                   ((33, 65), (65, 2))])
def test_thin_outputs_of_long_rows_equal_reference(family, shape):
    """Reductions over long rows (x @ a column of ones: BatchNorm's statistics over batch and
    pixels, [8, 8192] @ [8192, 1]; LayerNorm's over 64 features) and other thin outputs: each
    output's tiles along K, then their sums in order, as the reference; zero rows and tiles,
    specials (which send a block to the checked path) and limits the partials reach."""
    from test_tile_speed_paths import FAMILIES
    rng = np.random.default_rng(len(family) * shape[0][-1])
    x, y = FAMILIES[family](rng, shape[0]), FAMILIES[family](rng, shape[1])
    x[..., 1, :] = 0.0
    x[..., 2, :64] = 0.0
    tile(x, np.abs(y), 0, 0, 32760.0)
    tile(x, y, 0, 0, 1e4)
    x[..., 3, 5] = np.inf
    tile(x, y, 0, 0, 32760.0)


@needs_along_k
@pytest.mark.parametrize("k", [64, 160, 300])
def test_thin_k_saturates_partials_that_cross_the_limit(k):
    """`_thin_k` adds each output's tiles with the accumulator's saturation, so a column sum
    whose partial passes the limit and comes back reads inf (it sticks), exactly as the
    reference, in blocks the check clears with no limit (BatchNorm's gradient sums); rows that
    stay under it, and a row that ends past it, as the reference too."""
    from aneforge.hardware.kernels import compiled
    x = np.zeros((6, k), np.float32)
    x[0, :8] = [20000, 20000, 0, 0, -20000, -20000, 0, 0]               # 40000, then 0
    x[1, :8] = [16000, 16000, 0, 0, -16000, -16000, 0, 0]               # 32000, then 0
    x[2, -8:] = [-20000, -20000, 0, 0, 20000, 20000, 0, 0]              # -40000, then 0
    x[3] = 600.0                                                        # ends past it
    x[4] = fp16((k,), np.random.default_rng(k))
    x[5, 1::2] = 2.0 ** -20
    y = np.ones((k, 1), np.float32)
    out, ts, yc = np.full((6, 1), np.nan, np.float32), np.empty((6, k // 4 + 1), np.float32), \
        np.empty(k, np.float32)
    compiled._thin_k(x, y, out, 0, 6, ts, yc, np.float32(32760.0))
    want = both(kernels.tile_matmul, x, y, 0, 0, 32760.0)
    same(out, want)
    assert np.isposinf(out[0]) and out[1] == 0 and np.isneginf(out[2]) and np.isposinf(out[3])
    same(tile(x, y), want)                            # the whole matmul, by whichever path


# ---- the thread split: chunks taken from one counter --------------------------------------------
@needs_numba
@pytest.mark.parametrize("threads", ["2", "3"])
@pytest.mark.parametrize("tasks", [1, 5, 12, 100])
def test_split_runs_each_chunk_once_and_a_slow_thread_costs_its_chunk(monkeypatch, threads,
                                                                      tasks):
    """`run` cuts the tasks into chunks that the calling thread and the pool take from one
    counter: every task runs exactly once, and a pool thread slowed down (a busy machine)
    leaves the remaining chunks to the others instead of holding a fixed share."""
    import threading
    import time
    from aneforge.hardware.kernels import compiled
    monkeypatch.setattr(compiled, "PARALLEL_MACS", 0)
    monkeypatch.setenv("ANEFORGE_THREADS", threads)
    caller, done, lock = threading.get_ident(), [], threading.Lock()

    def kernel(first, last):
        if threading.get_ident() != caller:
            time.sleep(0.05)                      # the pool's threads: descheduled
        with lock:
            done.append((first, last, threading.get_ident() == caller))
    compiled.run(kernel, tasks, 1 << 30)
    covered = sorted(t for first, last, _ in done for t in range(first, last))
    assert covered == list(range(tasks))
    chunks = min(tasks, compiled.SHARES * int(threads))
    assert len(done) == chunks
    assert sum(mine for *_, mine in done) >= chunks - (int(threads) - 1)


@needs_numba
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("tmode", [0, 1])
@pytest.mark.parametrize("transposed", [False, True])
def test_a_bound_tile_matmul_runs_its_kernel_directly_with_the_same_bits(monkeypatch, split,
                                                                         tmode, transposed):
    """`tile_bound` (the run plan's matmul, called each step) hands a small product to its
    kernel without `tile_matmul`'s calls on the way (`compiled.tile_call`); split over
    threads, in the other tile mode and from a transposed operand's copy it gives the same
    bits as `tile_matmul`, and it reads operands' new values at each call."""
    from aneforge.hardware.kernels import compiled
    if split:
        monkeypatch.setattr(compiled, "PARALLEL_MACS", 0)
        monkeypatch.setenv("ANEFORGE_THREADS", "2")
    rng = np.random.default_rng(9)
    x, y = fp16((32, 30), rng), fp16((30, 200), rng)
    y = np.ascontiguousarray(y.T).T if transposed else y
    out = np.empty((32, 200), np.float32)
    with kernels.using("numba"), np.errstate(all="ignore"):
        call = kernels.tile_bound(x, y, out, 0, tmode, 32760.0)
        for _ in range(2):
            call()
            same(out, kernels.tile_matmul(x, y, 0, tmode, 32760.0))
            x[...] = fp16((32, 30), rng)          # new values in the same places
