"""The compiled tile kernel's fast paths, each bit-equal to the numpy reference
(`reference.tile_matmul`, the definition) on the values that could tell them apart:

- the plain tile (no exponent floor, no saturation check), taken by row blocks of outputs of at
  least PLAIN_ROWS x PLAIN_COLUMNS that `_plain_rows` (or, output by output, `_plain_pairs`)
  clears: tiny products (where the floor acts), partial sums that cross the limit and come
  back, inf, NaN and signed zeros;
- one carry cut per tile instead of one per add (the chain's next add cuts at least as coarse);
- the plain tile 16 lanes at a time by AVX-512 (where numba targets it): the smaller operand
  cut by an add rounded toward zero against a constant of its sign;
- the plain tile 8 lanes at a time (AVX2 without AVX-512): strips of a row over chunks of K,
  masked vectors past the last strip of 32 columns, zero tiles skipped;
- the thread split, whose calling thread runs the first share.

"Bit-equal" means equal float32 bits, except that a NaN only has to be a NaN."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aneforge.hardware import kernels
from aneforge.hardware.kernels import reference

pytestmark = pytest.mark.skipif(not kernels.available(),
                                reason="numba is not installed: no compiled kernels to compare")

SPECIALS = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0 ** -24, 65504.0])


def _wide_cpu():
    from aneforge.hardware.kernels import compiled
    return compiled.WIDE


def same(a, b):
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b))
    np.testing.assert_array_equal(a.view(np.uint32)[~nan], b.view(np.uint32)[~nan])


def tile(x, y, limit=32760.0):
    """The compiled tile matmul (tmode 0), checked against the reference; returns it."""
    with np.errstate(all="ignore"):
        want = reference.tile_matmul(x, y, 0, 0, limit)
        with kernels.using("numba"):
            got = kernels.tile_matmul(x, y, 0, 0, limit)
    same(got, want)
    return got


def signs(rng, shape):
    return rng.choice(np.float32([-1.0, 1.0]), shape)


# value families, each aimed at one hazard of the fast paths
def _fp16(rng, shape):                 # ordinary data: the plain tile runs
    return (rng.standard_normal(shape)).astype(np.float16).astype(np.float32)


def _carries(rng, shape):              # mantissas near all-ones: sums carry past 2**(e + 1)
    mant = 2.0 - rng.integers(0, 4, shape) * 2.0 ** -10
    return (mant * 2.0 ** rng.integers(-3, 4, shape) * signs(rng, shape)).astype(np.float32)


def _tiny(rng, shape):                 # products across 2**-104, 2**-115, 2**-126, subnormal
    mant = 1.0 + rng.integers(0, 1024, shape) / 1024.0
    return (mant * 2.0 ** rng.integers(-75, -44, shape) * signs(rng, shape)).astype(np.float32)


def _big(rng, shape):                  # products ~2**14: partial sums cross 32760 and come back
    return (rng.integers(100, 200, shape) * signs(rng, shape)).astype(np.float32)


FAMILIES = {"fp16": _fp16, "carries": _carries, "tiny": _tiny, "big": _big}


def hazard_operands(data, rng, x_shape, y_shape):
    """x and y drawn from the hazard families, specials sprinkled in, zero rows and whole zero
    tiles in rows of x (the work the kernels skip)."""
    x = FAMILIES[data.draw(st.sampled_from(sorted(FAMILIES)))](rng, x_shape)
    y = FAMILIES[data.draw(st.sampled_from(sorted(FAMILIES)))](rng, y_shape)
    for a in (x, y):
        spots = rng.random(a.shape) < data.draw(st.sampled_from([0.0, 0.0, 0.02]))
        a[spots] = rng.choice(SPECIALS, spots.sum())
    m, k = x_shape[-2:]
    x[..., rng.random(m) < 0.25, :] = 0.0
    x[..., rng.random(m) < 0.5, : 4 * (k // 8)] = 0.0
    return x, y


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_fast_paths_equal_reference(data):
    """Outputs large enough for the plain tile (m >= 16, n >= 8; n < 16 is the thin path),
    any K % 4, batches, operands from the hazard families above, specials sprinkled in, zero
    rows and zero tiles of x (skipped work), and limits the partials reach or never can."""
    bx, by = data.draw(st.sampled_from([((), ()), ((2,), ()), ((), (2,)), ((2,), (2,)),
                                        ((2, 1), (1, 3))]))
    m = data.draw(st.sampled_from([16, 19, 36]))
    n = data.draw(st.sampled_from([8, 13, 16, 21, 40]))
    k = data.draw(st.sampled_from([1, 2, 3, 4, 5, 7, 8, 13, 30]))
    limit = data.draw(st.sampled_from([32760.0, np.inf, 500.0]))
    rng = np.random.default_rng(data.draw(st.integers(0, 10 ** 6)))
    tile(*hazard_operands(data, rng, bx + (m, k), by + (k, n)), limit)


def test_ordinary_data_takes_the_plain_tile():
    """The fast path is not dead code: fp16 data clears the check; each hazard fails it."""
    from aneforge.hardware.kernels import compiled
    rng = np.random.default_rng(0)
    x, y = _fp16(rng, (16, 64)), _fp16(rng, (64, 32))

    def plain(x, y, limit=32760.0):
        ymax = np.empty(y.shape[0], np.float32)
        ysmall = compiled._y_bounds(y, ymax)
        return compiled._plain_rows(x, 0, x.shape[0], ymax, ysmall, np.float32(limit))
    assert plain(x, y) and plain(_big(rng, (16, 8)), _big(rng, (8, 32)), np.inf)
    assert not plain(_big(rng, (16, 8)), _big(rng, (8, 32)))          # may reach the limit
    tiny = x.copy()
    tiny[3, 5] = 2.0 ** -100                            # times the smallest |y|: below 2**-104
    assert not plain(tiny, y)
    for special in (np.inf, np.nan):                  # whatever the limit (2**100 bounds all)
        bad = y.copy()
        bad[7, 3] = special
        assert not plain(x, bad) and not plain(x, bad, np.inf)
    assert not plain(x * np.float32(2.0 ** 60), y * np.float32(2.0 ** 40), np.inf)


def test_tiny_products_need_the_exponent_floor():
    """Where the plain tile and the floored one differ (a partial below 2**-115 after a
    cancellation), the matmul gives the floored result (the check sends the block there)."""
    from aneforge.hardware.kernels import compiled
    lanes = np.float32([1.5 * 2.0 ** -115, -(2.0 ** -115), 2.0 ** -125, 0.0])
    floored = compiled._default_tile(*lanes, 0, 0)
    assert floored != compiled._plain_tile(*lanes, 0, 0)
    assert floored == reference.tile_sum([np.float32([v]) for v in lanes], 0)[0]
    x = np.tile(lanes, (16, 2))                                       # [16, 8]: two tiles
    assert (tile(x, np.ones((8, 8), np.float32)) == floored * 2).all()


def test_partials_crossing_the_limit_saturate():
    """A row whose partial passes the limit and comes back reads inf (the saturation sticks),
    in outputs large enough for the plain tile; rows that stay under it are not saturated."""
    x = np.zeros((16, 16), np.float32)
    x[:8] = [20000, 20000, 0, 0, -20000, -20000, 0, 0] * 2               # 40000, then 0
    x[8:] = [16000, 16000, 0, 0, -16000, -16000, 0, 0] * 2               # 32000, then 0
    r = tile(x, np.ones((16, 8), np.float32))
    assert np.isposinf(r[:8]).all() and (r[8:] == 0).all()


def _spread_columns(m=16, k=16, n=16):
    """x of 100s against y with one large value per row, each in its own column: the row
    bound (sum_k |x| * max_j |y[k, j]| = 240000) passes the limit, each output's own bound
    (~15000) does not."""
    x = np.full((m, k), 100.0, np.float32)
    y = np.full((k, n), 0.01, np.float32)
    y[np.arange(k), np.arange(k) % n] = 150.0
    return x, y


def test_outputs_own_bounds_clear_a_block_the_row_bound_refuses():
    """`_plain_pairs`: a block whose row bound reaches the limit runs plain when every
    output's own bound stays under it, with the reference's bits; a block where one column's
    outputs do cross the limit (row 0's: 34000, then back near 0), though every other output
    of row 0 stays under it, is refused and saturates there, as the reference."""
    from aneforge.hardware.kernels import compiled
    x, y = _spread_columns()

    def cleared(x, y):
        ymax, acc = np.empty(y.shape[0], np.float32), np.empty(y.shape[1], np.float32)
        ysmall = compiled._y_bounds(y, ymax)
        limit = np.float32(32760.0)
        return (compiled._plain_rows(x, 0, x.shape[0], ymax, ysmall, limit),
                compiled._plain_pairs(x, y, 0, x.shape[0], ymax, ysmall, limit, acc))
    assert cleared(x, y) == (False, True)
    tile(x, y)
    x[0, :8] = [170, 170, 0, 0, -170, -170, 0, 0]
    y[:8, 3] = 100.0
    assert cleared(x, y) == (False, False)
    r = tile(x, y)
    assert np.isposinf(r[:, 3]).all() and np.isfinite(np.delete(r, 3, axis=1)).all()


@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 10 ** 6), st.sampled_from([8, 15, 16]))
def test_each_tile_sum_with_carries(seed, m):
    """x @ ones: each output is its row's tile sums added up, so rows of carry-prone products
    test the tile's adder directly, in the plain tile (16 rows; no limit, so no bound keeps it
    out) and the floored one (fewer)."""
    rng = np.random.default_rng(seed)
    x = _carries(rng, (m, 12))
    x[:, rng.random(12) < 0.3] *= 4096.0                 # lanes far apart: most bits cut away
    for limit in (np.inf, 32760.0):
        tile(x, np.ones((12, 9), np.float32), limit)


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("shape", [((40, 20), (20, 24)), ((2, 64, 9), (9, 5)), ((3, 8), (8, 16))])
def test_thread_split_shares_cover_every_task(monkeypatch, threads, shape):
    """Every share of the split is run, the calling thread's first one too: more threads
    than tasks, uneven shares, thin and block tasks."""
    from aneforge.hardware.kernels import compiled
    monkeypatch.setattr(compiled, "PARALLEL_MACS", 0)
    monkeypatch.setenv("ANEFORGE_THREADS", threads)
    rng = np.random.default_rng(int(threads))
    tile(_fp16(rng, shape[0]), _fp16(rng, shape[1]))


def test_shares_the_pool_never_starts_run_on_the_calling_thread(monkeypatch):
    """A pool thread that gets no CPU (a busy machine): the calling thread takes its shares
    back and the output is whole."""
    from concurrent.futures import Future
    from aneforge.hardware.kernels import compiled

    class Idle:                       # a pool whose jobs never start (cancel() succeeds)
        def submit(self, fn, *args):
            return Future()
    monkeypatch.setattr(compiled, "PARALLEL_MACS", 0)
    monkeypatch.setattr(compiled, "_pool", Idle)
    monkeypatch.setenv("ANEFORGE_THREADS", "3")
    rng = np.random.default_rng(5)
    tile(_fp16(rng, (40, 20)), _fp16(rng, (20, 24)))
    tile(_fp16(rng, (70, 12)), _fp16(rng, (12, 3)))


# ---- the 16-lane plain tile (AVX-512), against the reference's tile sum ---------------------
needs_wide = pytest.mark.skipif(not kernels.available() or not _wide_cpu(),
                                reason="numba does not target AVX-512F+DQ here: no 16-lane tile")


def _lanes(rng, n, base):
    """n products around 2**base, each drawn from one hazard: 24-bit mantissas, mantissas on
    the 12-bit grid (ties at the cut), near all ones (carries), powers of two, zeros of both
    signs; exponents spread 2**-30 .. 2**3 around the base."""
    kind = rng.integers(0, 5, n)
    mant = np.select([kind == 0, kind == 1, kind == 2, kind == 3],
                     [1.0 + rng.integers(0, 2 ** 23, n) * 2.0 ** -23,
                      1.0 + rng.integers(0, 2 ** 11, n) * 2.0 ** -11,
                      2.0 - rng.integers(1, 8, n) * 2.0 ** -23 * 2.0 ** rng.integers(0, 13, n),
                      np.ones(n)], 0.0)
    exp = base + rng.choice([-30, -13, -12, -11, -2, -1, 0, 0, 0, 1, 2, 3], n)
    return (mant * 2.0 ** exp * signs(rng, n)).astype(np.float32)


def _cancel(rng, p):
    """Lanes rewritten to cancel: p1 = -p0 (a tie of magnitudes, opposite signs), p2 close to
    -(p0 + p1), p3 = -p2 with its low bits changed."""
    pick = rng.random(p.shape[1]) < 0.5
    p[1, pick] = -p[0, pick]
    pick = rng.random(p.shape[1]) < 0.3
    p[2, pick] = -(p[0, pick] + p[1, pick]) * np.float32(1 + 2.0 ** -20)
    pick = rng.random(p.shape[1]) < 0.3
    p[3, pick] = -(p[2, pick].view(np.uint32) ^ np.uint32(0x155)).view(np.float32)
    return p


def wide_sum(p, acc):
    """acc + the tile of each lane's products p[0..3], by `_plain_wide` (a_k = 1: the
    products are y's rows; 32 lanes at a time, two runs of 16); returns (result, lanes
    done)."""
    from aneforge.hardware.kernels import compiled
    o = acc.copy()
    done = compiled._plain_wide(o, p[0], p[1], p[2], p[3], *np.float32([1, 1, 1, 1]))
    return o, done


@needs_wide
@settings(max_examples=120, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 10 ** 6), st.integers(-48, 32), st.sampled_from([32, 64, 96]),
       st.booleans())
def test_wide_tile_equals_reference_tile_sum(seed, base, n, cancel):
    """The 16-lane tile over adversarial products inside the plain tile's domain (nonzero
    products >= 2**-104, all < 2**100): ties at the cut, carries, cancellation to zero and
    below the larger exponent, equal magnitudes of opposite sign, mixed exponents 2**-78 ..
    2**35, +-0; then added to an accumulator as the matmul does."""
    rng = np.random.default_rng(seed)
    p = np.stack([_lanes(rng, n, base) for _ in range(4)])
    p = _cancel(rng, p) if cancel else p
    acc = (rng.standard_normal(n) * 2.0 ** (base + 2)).astype(np.float32)
    got, done = wide_sum(p, acc)
    assert done == n                                   # every lane by the 16-lane tile
    with np.errstate(all="ignore"):
        want = acc + reference.tile_sum(list(p), 0)
    same(got, want)


@needs_wide
def test_wide_tile_named_cases():
    """Lanes that pin each step of the 16-lane add: the cut of the smaller operand toward zero
    for both signs, a tie of magnitudes with opposite signs (both operands kept), a carry
    whose extra bit the next add or the tile's end clears, and a full cancellation."""
    q = 2.0 ** -11                                    # the cut's step for operands near 1
    cases = [(1.0, 0.75 * q, 0, 0), (1.0, -0.75 * q, 0, 0), (-1.0, 0.75 * q, 0, 0),
             (-1.0, -0.75 * q, 0, 0), (1.5, -1.5, 0.5 * q, 0), (1.5, -1.5, 0, -0.0),
             (2 - q, 2 - q, 0, 0), (2 - q, 2 - q, q, 0), (2 - q, 2 - q, -3.0, 0.375),
             (4096, 3, -4096, 0), (-4096, -3, 4096, 0), (4094, 5, -4096, 0),
             (2048, 1, 0, 0), (0.0, -0.0, 0.0, -0.0), (2.0 ** -104, -(2.0 ** -104), 2.0 ** -90, 0)]
    p = np.zeros((4, 32), np.float32)
    p[:, :len(cases)] = np.float32(cases).T
    p[:, 16:16 + len(cases)] = -np.float32(cases).T                   # the second run of 16
    got, done = wide_sum(p, np.zeros(32, np.float32))
    assert done == 32
    same(got, np.float32(0) + reference.tile_sum(list(p), 0))
    assert got[9] == 2 and got[10] == -2 and got[11] == 2 and got[12] == 2049
    assert got[25] == -2 and got[26] == 2 and got[27] == -2 and got[28] == -2049


def test_generic_plain_tile_still_equals_reference():
    """The plain tile's scalar form (`_no_wide`: CPUs without AVX-512, and the lanes past the
    last 16) over the hazard families: it stays bit-equal to the reference."""
    from aneforge.hardware.kernels import compiled
    rng = np.random.default_rng(11)
    for fx, fy in (("fp16", "carries"), ("carries", "big"), ("fp16", "fp16")):
        x, y = FAMILIES[fx](rng, (8, 13)), FAMILIES[fy](rng, (13, 40))
        out = np.empty((8, 40), np.float32)
        compiled._rows(x, y, out, 0, 8, *compiled._thin_scratch(8, 40, 13, 8), 0, 0,
                       np.float32(np.inf), compiled._plain_tile, compiled._unlimited,
                       compiled._no_wide)
        with np.errstate(all="ignore"):
            same(out, reference.tile_matmul(x, y, 0, 0, np.inf))


def test_huge_products_take_the_general_path():
    """Products near 2**118 under an infinite limit (nothing saturates, so only the 2**100
    bound keeps such blocks off the plain tile, whose 16-lane form needs exponents <= 114)."""
    rng = np.random.default_rng(3)
    x = _fp16(rng, (16, 12)) * np.float32(2.0 ** 62)
    y = _fp16(rng, (12, 32)) * np.float32(2.0 ** 56)
    assert np.isfinite(tile(x, y, np.inf)).all()


@pytest.mark.parametrize("k", [5, 6, 7, 9, 14])
def test_last_tile_missing_lanes_in_the_wide_path(k):
    """K % 4 != 0 on outputs wide enough for the 16-lane tile: the last tile's missing lanes
    are x's 0 against y's last row (products -0 where that row is negative), with carries and
    cancellations in the lanes that are there."""
    rng = np.random.default_rng(k)
    x, y = _carries(rng, (12, k)), -np.abs(_carries(rng, (k, 70)))
    x[:, -1] = -x[:, -2] * np.float32(1 + 2.0 ** -10)          # cancels the lane before it
    for limit in (32760.0, np.inf):
        tile(x, y, limit)


def test_the_wide_tile_follows_numbas_cpu_features(monkeypatch):
    """The 16-lane tile is compiled in exactly when numba targets AVX-512F and DQ (its own
    feature string: NUMBA_CPU_FEATURES wins over the host's)."""
    from numba.core import config
    from aneforge.hardware.kernels import avx512
    monkeypatch.setattr(config, "CPU_FEATURES", "+avx2,+fma,+avx512f,+avx512dq,+avx512vl")
    assert avx512._avx512()
    monkeypatch.setattr(config, "CPU_FEATURES", "+avx2,+fma,+avx512f")
    assert not avx512._avx512()
    monkeypatch.setattr(config, "CPU_FEATURES", "")
    assert not avx512._avx512()


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("shape", [((64, 96), 80), ((2, 8, 96), 80), ((8, 40), 44)])
def test_a_bound_matmul_by_a_transposed_weight_equals_reference(family, shape):
    """x @ W.T bound for the run plan: where W holds more values than x and the result,
    `tile_bound` computes (W @ x.T).T (the same products in the same tiles and order); the
    bits are the reference's, specials and limits included."""
    from aneforge.hardware.kernels import _swap_pays
    rng = np.random.default_rng(7)
    (xshape, n), k = shape, shape[0][-1]
    x = FAMILIES[family](rng, xshape)
    w = FAMILIES[family](rng, (n, k))
    x.reshape(-1)[rng.integers(0, x.size, 6)] = rng.choice(SPECIALS, 6)
    assert _swap_pays(x, w.T) == (x.size + x.size // k * n < w.size)
    for limit in (32760.0, np.inf):
        with np.errstate(all="ignore"):
            want = reference.tile_matmul(x, w.T, 0, 0, limit)
            with kernels.using("numba"):
                out = np.empty(want.shape, np.float32)
                kernels.tile_bound(x, w.T, out, 0, 0, limit)()
        same(out, want)


# ---- the 8-lane plain tile (AVX2, no AVX-512), against the reference's tile matmul ---------
def _eight_cpu():
    from aneforge.hardware.kernels import avx2
    return avx2.EIGHT


needs_eight = pytest.mark.skipif(not kernels.available() or not _eight_cpu(),
                                 reason="numba does not target AVX2 here: no 8-lane tile")


def block8(x, y, i0, i1):
    """`plain_block8` on rows i0 .. i1 of x @ y, in an output prefilled with NaN whose
    buffer runs on past its end: returns the output and the tail, which must stay NaN (the
    masked lanes past a row write nothing)."""
    from aneforge.hardware.kernels import avx2
    m, n = x.shape[0], y.shape[1]
    buf = np.full(m * n + 16, np.nan, np.float32)
    out = buf[:m * n].reshape(m, n)
    avx2.plain_block8(x, y, out, i0, i1)
    return out, buf[m * n:]


def _eight_equals_reference(x, y, i0, i1):
    """`block8` rows i0 .. i1 bit-equal to the reference (the plain tile's domain: no limit
    reached); the other rows, and the buffer past the output, untouched."""
    out, past = block8(x, y, i0, i1)
    with np.errstate(all="ignore"):
        want = reference.tile_matmul(x, y, 0, 0, np.inf)
    same(out[i0:i1], want[i0:i1])
    assert np.isnan(out[:i0]).all() and np.isnan(out[i1:]).all() and np.isnan(past).all()


@needs_eight
@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 10 ** 6), st.integers(-48, 32),
       st.sampled_from([1, 7, 8, 31, 32, 33, 45, 70]),
       st.sampled_from([1, 2, 3, 4, 5, 8, 13, 64, 259, 522]), st.booleans())
def test_eight_lane_tile_equals_reference_tile_sums(seed, base, n, k, cancel):
    """The 8-lane tile over adversarial products inside the plain tile's domain (nonzero
    products >= 2**-104, all < 2**100: ties at the cut, carries, cancellation to zero and below
    the larger exponent, equal magnitudes of opposite sign, +-0), lane by lane: x's rows are
    ones and powers of two (exact products: y's values, scaled), so each output is its
    column's tile sums added up. Widths around the strips of 32 and the masked vectors of 8,
    K around the tile of 4 and the chunks of 256, rows skipped by whole zero tiles."""
    rng = np.random.default_rng(seed)
    y = np.concatenate([_cancel(rng, np.stack([_lanes(rng, n, base) for _ in range(4)]))
                        if cancel else np.stack([_lanes(rng, n, base) for _ in range(4)])
                        for _ in range((k + 3) // 4)])[:k]
    x = np.float32(2.0) ** rng.integers(-2, 3, (6, k)).astype(np.float32) * signs(rng, (6, k))
    x[1] = 0.0                                                  # a row of zeros: all skipped
    x[2, rng.random(k) < 0.5] = 0.0                             # zero lanes, some whole tiles
    x[3, : 4 * (k // 8)] = 0.0
    _eight_equals_reference(x, y, 1, 5)


@needs_eight
@pytest.mark.parametrize("family", ["fp16", "carries", "big"])      # "tiny": not a plain block
@pytest.mark.parametrize("shape", [(9, 13, 40), (8, 64, 192), (3, 300, 64), (5, 6, 17), (2, 4, 8),
                                   (32, 32, 32), (4, 1, 33)])
def test_eight_lane_blocks_equal_reference(family, shape):
    """Blocks of ordinary shapes from the hazard families whose blocks `_plain_rows` clears
    under an infinite limit (as the tile matmul gives them to the 8-lane tile), any K % 4."""
    from aneforge.hardware.kernels import compiled
    m, k, n = shape
    rng = np.random.default_rng(m * k + n)
    x, y = FAMILIES[family](rng, (m, k)), FAMILIES[family](rng, (k, n))
    x[rng.random(m) < 0.3, : 4 * (k // 8)] = 0.0
    ymax = np.empty(k, np.float32)
    assert compiled._plain_rows(x, 0, m, ymax, compiled._y_bounds(y, ymax), np.float32(np.inf))
    _eight_equals_reference(x, y, 0, m)


@needs_eight
def test_eight_lane_tile_named_cases():
    """Lanes that pin each step of the 8-lane add (as the 16-lane test's): the cut of the
    smaller operand toward zero for both signs, a tie of magnitudes with opposite signs, a
    carry whose extra bit the next add or the tile's end clears, a full cancellation, the
    smallest products of the plain domain; each case in a strip of 32 and a masked vector."""
    q = 2.0 ** -11
    cases = [(1.0, 0.75 * q, 0, 0), (1.0, -0.75 * q, 0, 0), (-1.0, 0.75 * q, 0, 0),
             (-1.0, -0.75 * q, 0, 0), (1.5, -1.5, 0.5 * q, 0), (1.5, -1.5, 0, -0.0),
             (2 - q, 2 - q, 0, 0), (2 - q, 2 - q, q, 0), (2 - q, 2 - q, -3.0, 0.375),
             (4096, 3, -4096, 0), (-4096, -3, 4096, 0), (4094, 5, -4096, 0),
             (2048, 1, 0, 0), (0.0, -0.0, 0.0, -0.0), (2.0 ** -104, -(2.0 ** -104), 2.0 ** -90, 0),
             (2.0 ** 99, -(2.0 ** 99), 2.0 ** -104, 0)]
    p = np.float32(cases).T
    y = np.ascontiguousarray(np.concatenate([p, -p, p[:, :5]], axis=1))    # 37: 32 + 5
    out, _ = block8(np.ones((1, 4), np.float32), y, 0, 1)
    with np.errstate(all="ignore"):
        same(out, reference.tile_matmul(np.ones((1, 4), np.float32), y, 0, 0, np.inf))
    assert out[0, 9] == 2 and out[0, 10] == -2 and out[0, 11] == 2 and out[0, 12] == 2049
    assert out[0, 15] == 2.0 ** -104 and out[0, 16 + 9] == -2 and out[0, 32 + 4] == q / 2


def test_the_eight_lane_tile_follows_numbas_cpu_features(monkeypatch):
    """The 8-lane tile is compiled in exactly when numba targets AVX2 (its own feature
    string: NUMBA_CPU_FEATURES wins over the host's), and the tile matmul's plain blocks take
    it only without AVX-512 (whose 16-lane form is faster)."""
    from numba.core import config
    from aneforge.hardware.kernels import avx2, compiled
    lanes = compiled._plain_is_wide()
    assert lanes == (16 if compiled.WIDE else 8 if avx2.EIGHT else 0)
    monkeypatch.setattr(config, "CPU_FEATURES", "+avx,+avx2,+fma")
    assert avx2._avx2()
    monkeypatch.setattr(config, "CPU_FEATURES", "+avx,-avx2,+fma")
    assert not avx2._avx2()


# ---- thin outputs (fewer than 16 columns) by the 8-lane tile, transposed ----------------------
@needs_eight
@pytest.mark.parametrize("family", ["fp16", "carries", "big"])      # "tiny": not a plain block
@pytest.mark.parametrize("shape", [(40, 13, 1), (40, 64, 1), (33, 67, 2), (32, 5, 9), (7, 300, 15),
                                   (40, 4, 3)])
def test_thin_eight_lane_blocks_equal_reference(family, shape):
    """`_thin8` on a block of rows (at most THIN_ROWS, the last task's fewer too) of a thin
    output: bit-equal to the reference, the rows outside the block untouched, whatever the
    scratch held before (lanes past the block's rows are zeroed, computed, never read)."""
    from aneforge.hardware.kernels import avx2, compiled
    m, k, n = shape
    rng = np.random.default_rng(m * k + n)
    x, y = FAMILIES[family](rng, (m, k)), FAMILIES[family](rng, (k, n))
    x[rng.random(m) < 0.3, : 4 * (k // 8)] = 0.0                    # whole zero tiles
    rows = compiled.THIN_ROWS
    xt = np.full(((k + 3) // 4 * 4, rows), 3.0e38, np.float32)      # stale, huge: harmless
    yt, ot = np.empty((n, k), np.float32), np.full((n, rows), np.nan, np.float32)
    compiled._columns_of(y, yt)
    with np.errstate(all="ignore"):
        want = reference.tile_matmul(x, y, 0, 0, np.inf)
    for i0, i1 in ((0, min(rows, m)), (min(rows, m) // 2, m)):
        out = np.full((m, n), np.nan, np.float32)
        compiled._thin8(x, out, i0, i1, xt, yt, ot, avx2.plain_block8)
        same(out[i0:i1], want[i0:i1])
        assert np.isnan(out[:i0]).all() and np.isnan(out[i1:]).all()


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_thin_outputs_equal_reference(data):
    """Thin outputs (1 to 15 columns, at least as many rows) through the whole tile matmul: the
    transposed 8-lane path where numba targets AVX2 (a column of ones, K >= 64, or two columns
    and more), `_thin` otherwise and for the blocks the check refuses; batches (y's columns
    copied again for each matrix of y), tasks of 32 rows and a shorter last one, hazard
    families, specials, zero rows and tiles, limits reached or not."""
    bx, by = data.draw(st.sampled_from([((), ()), ((2,), ()), ((), (2,)), ((2,), (2,))]))
    n = data.draw(st.sampled_from([1, 2, 3, 9, 15]))
    m = data.draw(st.sampled_from([15, 32, 45, 70]))
    k = data.draw(st.sampled_from([1, 3, 8, 31, 64, 67, 130]))
    limit = data.draw(st.sampled_from([32760.0, np.inf, 500.0]))
    rng = np.random.default_rng(data.draw(st.integers(0, 10 ** 6)))
    tile(*hazard_operands(data, rng, bx + (m, k), by + (k, n)), limit)
