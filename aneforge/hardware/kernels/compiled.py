"""numba kernels, bit-identical to `reference.py` (imported only when numba is installed and
the compiled kernels are on; compiled on first call and cached on disk, `cache=True`).

fastmath stays off: the kernels must add in the documented order with IEEE float32 rounding
(one exception, `_row_bound`: it only bounds a sum, with slack, and may reassociate to vectorize).
fp16 rounding under the default model (nearest-even, subnormals kept) is LLVM's float -> half
-> float conversion (one F16C / fcvt instruction pair, exact IEEE); the other models use the
same integer formulas as the reference.
"""
from __future__ import annotations

import functools
import itertools
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .avx2 import (COPY_COLUMNS, EIGHT, GROUPS, plain_block8, tiles8, tiles_along_k,
                   transpose8)
from .avx512 import WIDE, _plain_wide, _tiles16
from .casts import _bits, _float, _unowned, _via_half
# the boundary kernels live in casts.py; their callers reach them here too
from .casts import (from_float16, from_float16_spans, has_nan, move,  # noqa: F401
                    to_float16, to_float16_spans)
from .threads import PARALLEL_MACS, threads

# Kernels taking a function (the rounding, the tile's sum) are called through small wrappers
# that fix it at compile time: a function passed from Python costs numba a type lookup per call,
# and its specializations are compiled again in every process (~3 s each); passed inside
# compiled code it costs nothing and is cached on disk. The wrappers name it as an attribute of
# this module: numba will not cache a function that passes a global dispatcher by its bare name
# ("uses dynamic globals"), but resolves a module attribute to a constant.
_self = sys.modules[__name__]
_TINY = np.float32(2.0 ** -14)
_MAX = np.float32(65504.0)
_INF = np.float32(np.inf)
_UP = np.float32(2.0 ** 24)
_DOWN = np.float32(2.0 ** -24)
_ZERO = np.float32(0.0)
_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
ROWS = 4          # rows of x sharing each loaded row of y
TILE_ROWS = 8     # the same in the tile matmul (its tile work amortizes a row's setup); up to 32
                  # for outputs of at most 128 columns (a task's own costs amortized: 1.1x), up
                  # to 64 for wide ones in AVX2 strips (`rows_per_task`)
SKIP_ROWS = 16     # from this many rows of x on, zeros of x skip work
SHARES = 4        # chunks per thread of a split matmul (more: less waiting on a descheduled
                  # thread's last chunk, more calls)
THIN = 16          # tile matmul outputs narrower than this vectorize across rows, not columns
THIN_ROWS = 32     # rows per task in that case
PLAIN_ROWS, PLAIN_COLUMNS = 8, 8    # from this size of output on, tile matmuls try the plain tile
ALONG_K = 64     # thin outputs of plain blocks from this K on: tiles side by side along K


@njit(cache=True)
def _outside(v, mode):
    """round16 of a value outside the fp16 normal range (as reference._outside)."""
    if v != v:
        return _ZERO if mode & 4 else v
    if abs(v) >= _TINY:
        return _INF if v > _ZERO else -_INF
    s = v * _UP
    if mode & 1:
        return _ZERO * s
    if mode & 2:
        t = np.float32(np.trunc(s))
        q = abs(t) + (_ONE if abs(s - t) >= _HALF else _ZERO)
        return np.float32(np.copysign(q, s)) * _DOWN
    return np.float32(np.rint(s)) * _DOWN


@njit(cache=True)
def r16_ieee(v, mode):
    """r16 under nearest-even with subnormals kept: IEEE float -> half -> float; a NaN is
    returned as is, or as +0 under mode bit 2 (as the reference does)."""
    return (_ZERO if mode & 4 else v) if v != v else _via_half(v)


@njit(cache=True)
def r16(v, mode):
    """One float32 value rounded to fp16 under `mode` (see reference.py)."""
    if mode & 3 == 0:
        return r16_ieee(v, mode)
    b = _bits(v)
    if mode & 2:
        r = _float(np.uint32((b + np.uint32(0x1000)) & np.uint32(0xFFFFE000)))
    else:
        c = v * np.float32(8193.0)
        r = c - (c - v)
    d = np.uint32(np.uint32(b << np.uint32(1)) - np.uint32(0x71000000))
    if d >= np.uint32(0x1DFFE000) and v != _ZERO:
        return _outside(v, mode)
    return r


# round16 and narrow_sum run once per op output: they call their rounding directly (a
# function passed from Python costs a type lookup, and an allocation numba keeps, per call);
# round16 has a version per rounding because the default one vectorizes.
@njit(cache=True)
def _round16_ieee(x, out, mode):
    for i in range(x.size):
        out[i] = r16_ieee(x[i], mode)


@njit(cache=True)
def _round16_any(x, out, mode):
    for i in range(x.size):
        out[i] = r16(x[i], mode)


def round16(x, out, mode):
    (_round16_ieee if mode & 3 == 0 else _round16_any)(x, out, mode)


def _tasks(out):
    nb, m, _ = out.shape
    return nb * ((m + ROWS - 1) // ROWS)


@njit(cache=True)
def _matmul_task(t, x, y, bx, by, finite, out, mode, rnd):
    """One task of out[b] = x[bx[b]] @ y[by[b]]: ROWS rows of one batch entry. Each product
    is rounded to fp16 (`rnd`) and added to an fp32 accumulator in order k = 0 .. K-1 from +0.
    The k loop is outside the j loop, so the j loop vectorizes across independent accumulators
    while each (i, j) still sums sequentially over k. (j must run over whole C-contiguous rows
    from 0: a column block, j0 + j or a slice, stops numba/LLVM from vectorizing it.)
    A k where x is 0 in every row of the task and y's row is finite is skipped: its products
    are ±0, and adding ±0 leaves the accumulator unchanged (it starts at +0 and a
    round-to-nearest sum is never -0). One-hot and relu'd operands skip most of their work.

    Another datapath (e.g. tiles of 4 products summed by a narrow adder, then a wide sum across
    tiles) is another task function of this shape with a different accumulate step."""
    _, m, n = out.shape
    k = x.shape[2]
    rb = (m + ROWS - 1) // ROWS
    b, i0 = t // rb, (t % rb) * ROWS
    i1 = min(i0 + ROWS, m)
    xb, yb, ob, fin = x[bx[b]], y[by[b]], out[b], finite[by[b]]
    for i in range(i0, i1):
        for j in range(n):
            ob[i, j] = _ZERO
    if i1 - i0 == ROWS:
        o0, o1, o2, o3 = ob[i0], ob[i0 + 1], ob[i0 + 2], ob[i0 + 3]
        for kk in range(k):
            a0, a1, a2, a3 = xb[i0, kk], xb[i0 + 1, kk], xb[i0 + 2, kk], xb[i0 + 3, kk]
            if a0 == _ZERO and a1 == _ZERO and a2 == _ZERO and a3 == _ZERO and fin[kk]:
                continue
            yk = yb[kk]
            for j in range(n):
                v = yk[j]
                o0[j] += rnd(a0 * v, mode)
                o1[j] += rnd(a1 * v, mode)
                o2[j] += rnd(a2 * v, mode)
                o3[j] += rnd(a3 * v, mode)
    else:
        for i in range(i0, i1):
            o = ob[i]
            for kk in range(k):
                a, yk = xb[i, kk], yb[kk]
                if a == _ZERO and fin[kk]:
                    continue
                for j in range(n):
                    o[j] += rnd(a * yk[j], mode)


@njit(cache=True, nogil=True)
def matmul_tasks(x, y, bx, by, finite, out, mode, rnd, first, last):
    x, y, out = _unowned(x), _unowned(y), _unowned(out)
    for t in range(first, last):
        _matmul_task(t, x, y, bx, by, finite, out, mode, rnd)


# matmul_tasks with its rounding fixed (see _self): the IEEE conversion for the default mode
# vectorizes, the general one does not.
@njit(cache=True, nogil=True)
def _matmul_ieee_tasks(x, y, bx, by, finite, out, mode, first, last):
    matmul_tasks(x, y, bx, by, finite, out, mode, _self.r16_ieee, first, last)


@njit(cache=True, nogil=True)
def _matmul_any_tasks(x, y, bx, by, finite, out, mode, first, last):
    matmul_tasks(x, y, bx, by, finite, out, mode, _self.r16, first, last)


def matmul(x, y, bx, by, out, mode):
    """out[b] = x[bx[b]] @ y[by[b]] for C-contiguous float32 x [Bx, M, K], y [By, K, N]
    (split over threads by `run`)."""
    tasks = _tasks(out)
    # which rows of y are finite (a zero of x may skip them); not worth a pass for few rows
    finite = np.isfinite(y).all(axis=2) if out.shape[1] >= SKIP_ROWS else \
        np.zeros(y.shape[:2], np.bool_)
    kernel = _matmul_ieee_tasks if mode & 3 == 0 else _matmul_any_tasks
    run(kernel, tasks, out.size * x.shape[2], x, y, bx, by, finite, out, mode)


def run(kernel, tasks, macs, *args):
    """kernel(*args, first, last) over tasks [0, tasks): on the calling thread when
    the matmul is small (a hand-off costs more), else as SHARES chunks per thread of
    `threads()` (the kernels release the GIL) that the calling thread and the pool's threads
    take in turn from one counter until none is left. A pool thread that gets no CPU in time
    (a busy machine) costs a hand-off, and one that is descheduled mid-way at most its chunk
    in progress, not a fixed half of the work. Not numba's parallel=True, whose OpenMP layer
    spins between calls and slowed the rest of a training step 3x."""
    n = 1 if macs < PARALLEL_MACS else min(threads(), tasks)
    if n <= 1:
        kernel(*args, 0, tasks)
        return
    chunks = min(tasks, SHARES * n)
    cuts = [tasks * i // chunks for i in range(chunks + 1)]
    taken = itertools.count()              # next() is one step under the GIL: each chunk once

    def work():
        while (i := next(taken)) < chunks:
            kernel(*args, cuts[i], cuts[i + 1])
    jobs = [_pool().submit(work) for _ in range(n - 1)]
    try:
        work()
    finally:                     # the pool's chunks write into the output: never leave early
        for job in jobs:
            if not job.cancel():
                job.result()


@functools.lru_cache(maxsize=None)
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max(1, threads() - 1), thread_name_prefix="aneforge-kernel")


@njit(cache=True)
def _narrow_sum(terms, out, mode):
    r, c = terms.shape
    for j in range(c):
        out[j] = terms[0, j]
    for i in range(1, r):
        t = terms[i]
        for j in range(c):
            out[j] = r16(out[j] + t[j], mode)


def narrow_sum(terms, out, mode):
    """Sum over axis 0 of a 2-D array, acc = r16(acc + term) in order (reference.narrow_sum)."""
    _narrow_sum(terms, out, mode)


@njit(cache=True)
def port(acc, overflow, flush):
    """The matmul output port over float32 acc (1-D), in place, in one pass: |v| >= overflow
    -> +-inf (counted; a NaN overflow never matches), then |v| < 2**-14 -> +0 if `flush`.
    Returns the count (reference.port)."""
    big = 0
    for i in range(acc.size):
        v = acc[i]
        if abs(v) >= overflow:
            big += 1
            v = np.float32(np.copysign(_INF, v))
        acc[i] = _ZERO if flush and abs(v) < _TINY else v
    return big


@njit(cache=True)
def port_round(acc, bias, overflow, flush, mode):
    """A bound matmul's result finished in one pass over float32 acc [rows, cols], in place:
    bias [cols] added (empty: none; as `_linear_sim` adds it into the accumulator), the output
    port (`port`), then the executor's fp16 store under `mode` (r16). Three passes and three
    calls from Python before (~1.5 us a call, ~0.5 ns an element). Returns port's count."""
    big = 0
    rows, cols = acc.shape
    biased = bias.size > 0
    for r in range(rows):
        row = acc[r]
        for j in range(cols):
            v = row[j] + bias[j] if biased else row[j]
            if abs(v) >= overflow:
                big += 1
                v = np.float32(np.copysign(_INF, v))
            row[j] = r16(_ZERO if flush and abs(v) < _TINY else v, mode)
    return big


# ---- the tile-of-4 accumulator (reference.tile_matmul is the definition) ---------------------
# add12 works on integers scaled by 2**(11 - e): a power-of-two scale is exact, so every step
# below is an exact float32 operation and the numba and numpy versions agree bit for bit.
_M = np.uint32(0x7FFFFFFF)
_EXP = np.uint32(0x7F800000)
_SCALE = np.uint32(265 << 23)   # (127 + 11 - e + 127) << 23 = _SCALE - (biased e << 23)
_Q = np.uint32(11 << 23)
_MIN_EXP = np.uint32(12 << 23)
_LOW12 = np.uint32(0xFFFFF000)
_CARRY = np.float32(4096.0)


def _llvm_unary(name):
    """An LLVM float intrinsic (llvm.trunc, llvm.floor, llvm.rint) on a float32: one
    instruction that vectorizes; numpy's scalar versions compile to libm calls that do not."""
    @intrinsic
    def fn(typingctx, v):
        def codegen(context, builder, sig, args):
            f = builder.module.declare_intrinsic(name, [ir.FloatType()])
            return builder.call(f, args)
        return types.float32(types.float32), codegen
    return fn


_llvm_trunc, _llvm_floor, _llvm_rint = map(_llvm_unary, ("llvm.trunc", "llvm.floor", "llvm.rint"))


@njit(cache=True, inline="always")
def _cut(v, tmode):
    """The adder's cut: toward -inf (tmode bit 0) or toward zero."""
    return _llvm_floor(v) if tmode & 1 else _llvm_trunc(v)


@njit(cache=True, inline="always")
def _carry(v, tmode):
    """The cut after a carry: nearest-even (tmode bit 1), or the adder's cut."""
    return _llvm_rint(v) if tmode & 2 else _cut(v, tmode)


@njit(cache=True, inline="always")
def _exp(v):
    return _bits(v) & _EXP


@njit(cache=True, inline="always")
def _scales(x, y):
    """(2**(11 - e), 2**(e - 11)) for e = floor(log2(max(|x|, |y|))), from the exponent bits,
    e at least -115 (as the reference: below it q = 2**(e - 11) is no longer a normal float32,
    and the unclamped bits wrapped around for sums under 2**-115)."""
    m = max(_exp(x), _exp(y), _MIN_EXP)
    return _float(np.uint32(_SCALE - m)), _float(np.uint32(m - _Q))


@njit(cache=True, inline="always")
def _add12(x, y, tmode):
    """x + y in the 12-bit truncating adder: both cut to 2**(e - 11), e the exponent of the
    larger; a carry past 2**(e + 1) renormalises (cut again at 2**(e - 10))."""
    scale, q = _scales(x, y)
    s = _cut(x * scale, tmode) + _cut(y * scale, tmode)
    s = _carry(s * _HALF, tmode) * np.float32(2.0) if abs(s) >= _CARRY else s
    return s * q


@njit(cache=True, inline="always")
def _cut_sum(x, y, m):
    """cut(x) + cut(y) toward zero at q = 2**(e - 11), m the exponent field of 2**e (exact).
    A carry (|sum| >= 2**(e + 1)) leaves one bit too many: `_carry_cut` clears it. In a chain
    only the last sum needs it: the next add cuts a partial at a q at least twice as coarse
    after a carry (the exponent field is the cleared value's), and nested cuts toward zero on
    power-of-two grids compose."""
    scale, q = _float(np.uint32(_SCALE - m)), _float(np.uint32(m - _Q))
    return (_llvm_trunc(x * scale) + _llvm_trunc(y * scale)) * q


@njit(cache=True, inline="always")
def _carry_cut(s):
    """The carry's cut toward zero of a `_cut_sum`: its low 12 significand bits cleared (a
    no-op without a carry: the sum is then already a multiple of q)."""
    return _float(_bits(s) & _LOW12)


@njit(cache=True, inline="always")
def _sum_floored(x, y):
    """`_cut_sum` for the default adder: e at least -115 (`_scales`)."""
    return _cut_sum(x, y, max(_exp(x), _exp(y), _MIN_EXP))


@njit(cache=True, inline="always")
def _sum_plain(x, y):
    """`_sum_floored` without the exponent's floor, one instruction less. Equal to it in a
    tile whose nonzero products are at least 2**-104 (`_plain_rows` checks): every nonzero
    partial sum is then a multiple of q >= 2**-115, so the floor only acts on two zeros, which
    here give a zero of either sign (the exponent field 0 makes a negative scale). The
    accumulator cannot tell: a round-to-nearest sum is -0 only from -0 + -0, and it starts at
    +0."""
    return _cut_sum(x, y, max(_exp(x), _exp(y)))


@njit(cache=True)
def _cut16(v, tmode):
    """v cut to the fp16 grid (11 significant bits; spacing 2**-24 below 2**-14)."""
    m = max((_bits(v) & _M) >> np.uint32(23), np.uint32(113))
    scale = _float(np.uint32(np.uint32(264) - m) << np.uint32(23))
    return _cut(v * scale, tmode) * _float(np.uint32(m - np.uint32(10)) << np.uint32(23))


# One tile's sum, from its four exact products. An inf or NaN product makes it inf or NaN, as
# the plain sum would be (the scale from an inf exponent turns the finite operands into 0).
@njit(cache=True)
def _default_tile(p0, p1, p2, p3, mode, tmode):
    """The default datapath (tmode 0): exact products, cuts toward zero, a 12-bit result."""
    return _carry_cut(_sum_floored(_sum_floored(_sum_floored(p0, p1), p2), p3))


@njit(cache=True)
def _plain_tile(p0, p1, p2, p3, mode, tmode):
    """`_default_tile` by `_sum_plain`, for the row blocks `_plain_rows` clears."""
    return _carry_cut(_sum_plain(_sum_plain(_sum_plain(p0, p1), p2), p3))


# inlined by numba: a call per row cost `_thin_k` 1.2x on rows of 64 (LayerNorm's sums)
@njit(cache=True, inline="always")
def _row_tiles(ts, xr, yc, k):
    """ts[t] = the plain tile t of xr * yc (its carry cut), every tile of K: 16 side by side
    by `_tiles16` (AVX-512; on AVX2 32 by `avx2.tiles_along_k`, then 8 by `avx2.tiles8`),
    the last ones by `_plain_tile` (missing lanes past K: products +0)."""
    if WIDE:
        full = k // 64 * 64
        for k0 in range(0, full, 64):
            _tiles16(ts, xr, yc, k0, k0 // 4)
    else:
        along = k // (32 * GROUPS) * (32 * GROUPS)
        for k0 in range(0, along, 32 * GROUPS):
            tiles_along_k(ts, xr, yc, k0, k0 // 4)
        full = k // 32 * 32
        for k0 in range(along, full, 32):
            tiles8(ts, xr, yc, k0, k0 // 4)
    for k0 in range(full, k, 4):
        ts[k0 // 4] = _plain_tile(xr[k0] * yc[k0], _lane(xr, k0 + 1, k) * _lane(yc, k0 + 1, k),
                                  _lane(xr, k0 + 2, k) * _lane(yc, k0 + 2, k),
                                  _lane(xr, k0 + 3, k) * _lane(yc, k0 + 3, k), 0, 0)


@njit(cache=True)
def _thin_k(xb, yb, ob, i0, i1, ts, yc, limit):
    """Rows i0 .. i1 of ob = xb @ yb for few columns, in a block whose tiles are plain
    (`_plain_rows` with no limit: products in the plain tile's range, all finite): each
    output's tiles 16 side by side (`_row_tiles`, lanes along K: no transposed copy, whatever
    the rows), then their sums added in order from +0 with the saturation check (`_saturate`
    at `limit`, as the reference's accumulator: the block need not be shown to stay under
    it), four rows' running sums side by side (independent chains)."""
    k, n = xb.shape[1], ob.shape[1]
    nt = (k + 3) // 4
    for j in range(n):
        for kk in range(k):
            yc[kk] = yb[kk, j]
        for i in range(i0, i1):
            _row_tiles(ts[i - i0], xb[i], yc, k)
        i = i0
        while i + 4 <= i1:
            s0 = s1 = s2 = s3 = _ZERO
            r0, r1, r2, r3 = ts[i - i0], ts[i - i0 + 1], ts[i - i0 + 2], ts[i - i0 + 3]
            for t in range(nt):
                s0, s1 = _saturate(s0 + r0[t], limit), _saturate(s1 + r1[t], limit)
                s2, s3 = _saturate(s2 + r2[t], limit), _saturate(s3 + r3[t], limit)
            ob[i, j], ob[i + 1, j], ob[i + 2, j], ob[i + 3, j] = s0, s1, s2, s3
            i += 4
        for i in range(i, i1):
            s0, r0 = _ZERO, ts[i - i0]
            for t in range(nt):
                s0 = _saturate(s0 + r0[t], limit)
            ob[i, j] = s0


@njit(cache=True)
def _plain_is_wide():
    """The lanes of the plain tile's vector form, by which `tile_tasks` may run a plain block:
    16 (`_plain_wide`, where numba targets AVX-512), 8 (`plain_block8`, AVX2: in the full forms
    only, its strips add ~4 s to the lean forms' ~9 s of compile), else 0."""
    return 16 if WIDE else 8 if EIGHT else 0


@njit(cache=True)
def _no_wide():
    """The tiles without a vector form: the caller's loop does every lane."""
    return 0


@njit(cache=True)
def _any_tile(p0, p1, p2, p3, mode, tmode):
    """Any datapath: products rounded to fp16 under `mode` (tmode bit 3), the adder's cuts
    (bits 0, 1), the result cut to fp16 (bit 2). The bits are tested per tile: one compiled,
    cached function for every datapath (the default one has its own, vectorized)."""
    if tmode & 8:
        p0, p1, p2, p3 = r16(p0, mode), r16(p1, mode), r16(p2, mode), r16(p3, mode)
    t = _add12(_add12(_add12(p0, p1, tmode), p2, tmode), p3, tmode)
    return _cut16(t, tmode) if tmode & 4 else t


@njit(cache=True)
def _saturate(s, limit):
    return s if abs(s) < limit else s * _INF


@njit(cache=True)
def _unlimited(s, limit):
    """The accumulator where `_plain_rows` shows that no partial reaches the limit (an inf or
    NaN passes `_saturate` unchanged too)."""
    return s


_TOP = np.uint32(0xFFFFFFFF)


@njit(cache=True)
def _magnitude(v):
    """|v|'s bits less one, as an unsigned int: a zero wraps to the top, so a minimum finds
    the smallest nonzero magnitude (and a NaN's bits are above inf's)."""
    return np.uint32((_bits(v) & _M) - np.uint32(1))


@njit(cache=True)
def _y_bounds(yb, ymax):
    """For `_plain_rows`: ymax[k] = max |y[k, :]| (inf where the row holds an inf or NaN), and
    returns the smallest nonzero |y| (inf if none), as unsigned max and min of the bits."""
    low = _TOP
    for kk in range(yb.shape[0]):
        row, high = yb[kk], np.uint32(0)
        for j in range(row.size):
            high = max(high, _bits(row[j]) & _M)
            low = min(low, _magnitude(row[j]))
        ymax[kk] = _INF if high >= _EXP else _float(high)
    return _INF if low == _TOP else _float(np.uint32(low + np.uint32(1)))


@njit(cache=True)
def _column_bounds(yb, ymax):
    """`_y_bounds` of a single column (a reduction's column of ones: BatchNorm's statistics
    over [8192, 1]) in one loop over it: a loop per row of one value cost 8 us there."""
    low = _TOP
    for kk in range(yb.shape[0]):
        v = yb[kk, 0]
        high = _bits(v) & _M
        ymax[kk] = _INF if high >= _EXP else _float(high)
        low = min(low, _magnitude(v))
    return _INF if low == _TOP else _float(np.uint32(low + np.uint32(1)))


# fastmath's one use: a bound with slack, whose sum vectorizes only when it may reassociate
@njit(cache=True, fastmath={"reassoc"})
def _row_bound(xr, ymax):
    """(sum_k |xr[k]| * ymax[k] in float32, the smallest nonzero |xr[k]|, inf if none)."""
    bound, low = _ZERO, _TOP
    for kk in range(xr.size):
        bound += abs(xr[kk]) * ymax[kk]
        low = min(low, _magnitude(xr[kk]))
    return bound, _INF if low == _TOP else _float(np.uint32(low + np.uint32(1)))


_PLAIN_TINY = 2.0 ** -104      # nonzero products at least this large: `_sum_plain` is exact
_PLAIN_HUGE = 2.0 ** 100       # and every partial below this: `_plain32` is exact


@njit(cache=True)
def _plain_rows(xb, i0, i1, ymax, ysmall, limit):
    """Whether rows i0 .. i1 of xb @ yb may run the plain tile with no saturation check (tmode
    0): each nonzero product is at least 2**-104 (smallest nonzero |x| times smallest nonzero
    |y|), and no partial reaches `limit`: |acc| <= (1 + 2**-24)**(tiles + 1) * sum_k |x[i, k]|
    * ymax[k], as add12 never grows a magnitude and the products and the accumulator round to
    nearest; the slack covers that factor and the float32 sum of the bound (in any order). The
    bound is also kept under 2**100 whatever the limit (`_plain32` needs exponents <= 114), so
    an inf or NaN operand always fails it."""
    slack = 1.0 + (xb.shape[1] + 64) * 2.0 ** -21
    for i in range(i0, i1):
        bound, small = _row_bound(xb[i], ymax)
        if not np.float64(small) * np.float64(ysmall) >= _PLAIN_TINY:
            return False
        if not np.float64(bound) * slack < min(np.float64(limit), _PLAIN_HUGE):
            return False
    return True


# fastmath as `_row_bound`'s: a bound with slack, summed in any order (products of fp16 values
# are exact in float32, so contraction could not change them either)
@njit(cache=True, fastmath={"reassoc"})
def _pair_bound(xr, yb, acc):
    """max_j sum_k |xr[k]| * |yb[k, j]| in float32 (acc: scratch of yb's width); a k where
    xr is 0 adds nothing (y's row there may hold an inf: `_plain_rows` let it pass)."""
    for j in range(acc.size):
        acc[j] = _ZERO
    for kk in range(xr.size):
        a = abs(xr[kk])
        if a == _ZERO:
            continue
        row = yb[kk]
        for j in range(row.size):
            acc[j] += a * abs(row[j])
    top = _ZERO
    for j in range(acc.size):
        top = max(top, acc[j])
    return top


@njit(cache=True)
def _plain_pairs(xb, yb, i0, i1, ymax, ysmall, limit, acc):
    """`_plain_rows` with the bound of each output on its own: sum_k |x[i, k]| * |y[k, j]|
    (the quantity `_plain_rows` bounds by ymax[k] >= |y[k, j]|, with the same slack) under
    the limit for every (i, j). Costs a float32 product of the block's |x| and |y| (~1/4 of
    the plain tile's work), so it runs only for blocks the row bound refuses: the first
    layer's weight gradients of a GPT-style LM, whose activations reach ~185 in a few rows of
    y, passed `sum_k |x| * ymax` ~1.6e5 while every output's own bound stays far under
    32768."""
    if not _plain_rows(xb, i0, i1, ymax, ysmall, _INF):
        return False
    slack = 1.0 + (xb.shape[1] + 64) * 2.0 ** -21
    for i in range(i0, i1):
        if not np.float64(_pair_bound(xb[i], yb, acc)) * slack < min(np.float64(limit),
                                                                      _PLAIN_HUGE):
            return False
    return True


@njit(cache=True, inline="always")
def _lane(row, kk, k):
    """row[kk], or 0 past K: the missing lanes of the last tile (their products are +0, as
    the reference's zero padding gives)."""
    return row[kk] if kk < k else _ZERO


@njit(cache=True, inline="always")
def _finite_lanes(yb, k0, k):
    """Whether rows k0 .. k0 + 3 of y (those below K) are all finite (v - v is NaN for inf
    and NaN; an OR over the row, so the loop vectorizes)."""
    bad = False
    for kk in range(k0, min(k0 + 4, k)):
        row = yb[kk]
        for j in range(row.size):
            d = row[j] - row[j]
            bad |= d != d
    return not bad


@njit(cache=True)
def _block(xb, yb, ob, i0, i1, mode, tmode, limit, tile, sat, wide):
    """Rows i0 .. i1 of ob = xb @ yb, tile by tile: the tile's four products summed by `tile`,
    added to the fp32 accumulator, then `sat` (`_saturate`: +-inf once |acc| >= limit). The j
    loop is innermost: it vectorizes across independent accumulators while each (i, j) still
    sums its tiles in order. A tile whose four x lanes are 0 in a row is skipped when y's four
    rows are finite (checked once per tile, only when needed): its products are +-0, and
    adding +-0 leaves the accumulator unchanged (it starts at +0, and a round-to-nearest sum
    is never -0). One-hot and relu'd operands skip most of their work. The last tile, when
    K % 4 != 0, is `_block_tail` (y's rows chosen by a condition here, or passed to a helper,
    stop the j loop from vectorizing well: 1.4x slower). Where `wide()` is 16 (the plain tile
    on AVX-512), `_plain_wide` does every row (its last n % 32 lanes masked), the j loop none."""
    n, k = ob.shape[1], xb.shape[1]
    for i in range(i0, i1):
        for j in range(n):
            ob[i, j] = _ZERO
    for k0 in range(0, k - 3, 4):
        y0, y1, y2, y3 = yb[k0], yb[k0 + 1], yb[k0 + 2], yb[k0 + 3]
        finite = -1
        for i in range(i0, i1):
            xr = xb[i]
            a0, a1, a2, a3 = xr[k0], xr[k0 + 1], xr[k0 + 2], xr[k0 + 3]
            if a0 == _ZERO and a1 == _ZERO and a2 == _ZERO and a3 == _ZERO:
                if finite < 0:
                    finite = 1 if _finite_lanes(yb, k0, k) else 0
                if finite:
                    continue
            o = ob[i]
            if wide() == 16 and _plain_wide(o, y0, y1, y2, y3, a0, a1, a2, a3):
                continue                    # (a loop starting past 0 does not vectorize)
            for j in range(n):
                t = tile(a0 * y0[j], a1 * y1[j], a2 * y2[j], a3 * y3[j], mode, tmode)
                o[j] = sat(o[j] + t, limit)
    if k % 4:
        _block_tail(xb, yb, ob, i0, i1, mode, tmode, limit, tile, sat, wide)


@njit(cache=True)
def _block_tail(xb, yb, ob, i0, i1, mode, tmode, limit, tile, sat, wide):
    """The last tile of rows i0 .. i1 when K % 4 != 0: its missing lanes are zeros (products
    +0, as the reference's zero padding gives; `_plain_wide` gets x's missing lanes as 0
    against y's last row instead: products +-0, the same to the plain tile, whose sign of
    zero never reaches the accumulator)."""
    n, k = ob.shape[1], xb.shape[1]
    k0 = k - k % 4
    y0, y1, y2 = yb[k0], yb[min(k0 + 1, k - 1)], yb[min(k0 + 2, k - 1)]
    for i in range(i0, i1):
        xr, o = xb[i], ob[i]
        a0, a1, a2 = xr[k0], _lane(xr, k0 + 1, k), _lane(xr, k0 + 2, k)
        if wide() == 16 and _plain_wide(o, y0, y1, y2, y0, a0, a1, a2, _ZERO):
            continue
        for j in range(n):
            p1 = a1 * yb[k0 + 1, j] if k0 + 1 < k else _ZERO
            p2 = a2 * yb[k0 + 2, j] if k0 + 2 < k else _ZERO
            t = tile(a0 * yb[k0, j], p1, p2, _ZERO, mode, tmode)
            o[j] = sat(o[j] + t, limit)


@njit(cache=True)
def _rows_transposed(xb, i0, r, xt):
    """xt[:K, :r] = rows i0 .. i0 + r of xb, transposed (the thin paths' scratch)."""
    for i in range(r):
        xr = xb[i0 + i]
        for kk in range(xb.shape[1]):
            xt[kk, i] = xr[kk]


@njit(cache=True)
def _thin(xb, yb, ob, i0, i1, xt, acc, yc, mode, tmode, limit, tile, sat, wide):
    """Rows i0 .. i1 of ob = xb @ yb for few columns (n == 1 is x @ a column of ones, the wide
    reductions), where a j loop would be too short to vectorize: the rows are copied
    transposed into the scratch xt [K rounded up to 4, <= THIN_ROWS], each column of y into yc
    (entries past K stay 0 in both: the last tile's missing lanes, products +0), then each
    column is summed with the loop over rows innermost, across independent accumulators."""
    k, n, r = xb.shape[1], ob.shape[1], i1 - i0
    _rows_transposed(xb, i0, r, xt)
    for j in range(n):
        for i in range(r):
            acc[i] = _ZERO
        for kk in range(k):
            yc[kk] = yb[kk, j]
        for k0 in range(0, k, 4):
            v0, v1, v2, v3 = yc[k0], yc[k0 + 1], yc[k0 + 2], yc[k0 + 3]
            x0, x1, x2, x3 = xt[k0], xt[k0 + 1], xt[k0 + 2], xt[k0 + 3]
            if wide() == 16 and _plain_wide(acc, x0, x1, x2, x3, v0, v1, v2, v3):
                continue
            for i in range(r):
                t = tile(x0[i] * v0, x1[i] * v1, x2[i] * v2, x3[i] * v3, mode, tmode)
                acc[i] = sat(acc[i] + t, limit)
        for i in range(r):
            ob[i0 + i, j] = acc[i]


@njit(cache=True)
def rows_per_task(m, n, tmode):
    """Rows of x per task: THIN_ROWS for outputs narrower than THIN columns (and at least as
    tall: `_thin`); for the default datapath's outputs of at least COPY_COLUMNS columns where
    the plain tile runs in 8-lane strips (`plain_block8` copies each strip of y per task),
    half the rows, from TILE_ROWS up to 64 (two tasks or more: a second thread still has
    one); else from TILE_ROWS up to 32 while a block's rows of the output stay within 16 KB
    (`_block` adds each tile into all of them). The strip copies per task cost the char-LM's
    [64, 256] @ [256, 2048] and [256, 64] @ [64, 2048] 1.4x and 1.15x their time in blocks
    of 8 rows (median process time of 20 interleaved rounds, one thread, /tmp A/B of
    `tile_call` against the previous commit's)."""
    if _is_thin(m, n):
        return THIN_ROWS
    if tmode == 0 and _plain_is_wide() == 8 and n >= COPY_COLUMNS:
        return min(64, max(TILE_ROWS, m // 2))
    return min(32, max(TILE_ROWS, 4096 // n))


@njit(cache=True)
def _is_thin(m, n):
    """Whether an output is thin: narrower than THIN columns and at least as tall."""
    return n < THIN and n <= m


@njit(cache=True)
def _thin_scratch(m, n, k, rows):
    """`_thin`'s scratch for an m x n output over K = k, in tasks of `rows` rows: x's rows
    transposed [K rounded up to 4, rows] (none when the output is not thin), a column's sums
    and y's column (its entries past K stay 0: the last tile's missing lanes), allocated once
    per call of the tasks, not per task."""
    r = min(m, rows) if _is_thin(m, n) else 0
    k4 = (k + 3) // 4 * 4
    return np.zeros((k4, r), np.float32), np.empty(r, np.float32), np.zeros(k4, np.float32)


@njit(cache=True)
def _rows(xb, yb, ob, i0, i1, xt, acc, yc, mode, tmode, limit, tile, sat, wide):
    """Rows i0 .. i1 by `_thin` (when there is a transposed scratch) or `_block`."""
    if xt.shape[1]:
        _thin(xb, yb, ob, i0, i1, xt, acc, yc, mode, tmode, limit, tile, sat, wide)
    else:
        _block(xb, yb, ob, i0, i1, mode, tmode, limit, tile, sat, wide)


@njit(cache=True)
def _columns_of(yb, yt):
    """yt [n, K] = yb [K, n] transposed (a thin output's few columns of y, as rows)."""
    for kk in range(yb.shape[0]):
        row = yb[kk]
        for j in range(row.size):
            yt[j, kk] = row[j]


@njit(cache=True)
def _thin8(xb, ob, i0, i1, xt, yt, ot, block8):
    """Rows i0 .. i1 of a thin ob = xb @ yb (narrower than THIN columns), in a block
    `_plain_rows` cleared, where numba targets AVX2: as its transpose ob^T = yb^T @ xb^T by
    `block8`, the rows (at most THIN_ROWS) side by side in 8-lane vectors. yt: y's columns
    as rows (`_columns_of`); xt [K rounded up to 4, >= rows]: the rows copied transposed
    (lanes past the block's rows set to 0: computed, never read); ot [n, >= rows]: the
    transposed result. Each output sums the same exact products (a * b = b * a) in the same
    tiles of 4 in the same order: the same bits as `_thin`, ~2x faster (a classifier's
    [256, 128] @ [128, 10])."""
    k, n, r = xb.shape[1], ob.shape[1], i1 - i0
    _rows_transposed(xb, i0, r, xt)
    for kk in range(k):
        for i in range(r, xt.shape[1]):
            xt[kk, i] = _ZERO
    block8(yt, xt, ot, 0, n)
    for i in range(r):
        for j in range(n):
            ob[i0 + i, j] = ot[j, i]


@njit(cache=True)
def _no_block8(xb, yb, ob, i0, i1):
    """The datapaths without an 8-lane form (`tile_tasks`' `block8`): never called."""


@njit(cache=True, nogil=True)
def tile_tasks(x, y, bx, by, out, mode, tmode, limit, first, last, tile, plain, wide, block8):
    """Tasks [first, last) of out[b] = x[bx[b]] @ y[by[b]]: task t is `rows_per_task` rows of
    one batch entry; any K (the last tile's missing lanes are zeros). Under tmode 0, the row
    blocks `_plain_rows` clears run the tile `plain` with no saturation check (and, where
    `wide()` is 16, its 16-lane form `_plain_wide`; where it is 8, `block8`, the 8-lane
    strips of `plain_block8`), for outputs of at least PLAIN_ROWS x PLAIN_COLUMNS: the check
    reads all of y once per thread and matrix, and each x once, and saves ~40% of the work of
    an output (~15% in the generic loop); a block whose row bound reaches the limit is
    cleared by its outputs' own bounds where they stay under it (`_plain_pairs`). Thin outputs of rows of at least ALONG_K run their
    plain blocks by `_thin_k` where `wide()` is 16 (the reductions of BatchNorm's statistics,
    [8, 8192] @ [8192, 1]: 2x faster than `_thin`'s transposed copy; LayerNorm's, [256, 64] @
    [64, 1]: 1.2x), and single columns where it is 8 (BatchNorm's statistics: ~5x faster
    than `_thin8`, whose one vector of 8 rows waits on its chain); `_thin_k` checks the
    saturation itself, so its blocks need not be shown to stay under the limit (BatchNorm's
    gradient sums, |x| up to ~2000 over 8192 terms, never were). Where it is 8, the other
    thin outputs' plain blocks run by `_thin8`, through `block8`."""
    _, m, n = out.shape
    rows, k = rows_per_task(m, n, tmode), x.shape[2]
    rb = (m + rows - 1) // rows
    x, y, out = _unowned(x), _unowned(y), _unowned(out)
    thin = _is_thin(m, n)
    xt, acc, yc = _thin_scratch(m, n, k, rows)
    along_k = thin and k >= ALONG_K and (wide() == 16 or wide() == 8 and n == 1)
    thin8 = thin and wide() == 8 and n > 1
    check = tmode == 0 and (m >= PLAIN_ROWS and n >= PLAIN_COLUMNS
                            or thin and (k >= ALONG_K or thin8))
    ysmall, seen, ymax = _ZERO, -1, np.empty(k if check else 0, np.float32)
    along_k = along_k and check
    ts = np.empty((min(m, rows) if along_k else 0, (k + 3) // 4), np.float32)
    pair = np.empty(n if check else 0, np.float32)
    yt = np.empty((n if thin8 else 0, k), np.float32)
    ot = np.empty((n if thin8 else 0, xt.shape[1]), np.float32)
    for t in range(first, last):
        b, i0 = t // rb, (t % rb) * rows
        i1 = min(i0 + rows, m)
        xb, yb, ob = x[bx[b]], y[by[b]], out[b]
        if check and by[b] != seen:
            ysmall = _column_bounds(yb, ymax) if n == 1 else _y_bounds(yb, ymax)
            seen = by[b]
            if thin8:
                _columns_of(yb, yt)
        if check and (_plain_rows(xb, i0, i1, ymax, ysmall, _INF if along_k else limit)
                      or not along_k and _plain_pairs(xb, yb, i0, i1, ymax, ysmall, limit,
                                                      pair)):
            if along_k:
                _thin_k(xb, yb, ob, i0, i1, ts, yc, limit)
            elif thin8:
                _thin8(xb, ob, i0, i1, xt, yt, ot, block8)
            elif wide() == 8:
                block8(xb, yb, ob, i0, i1)
            else:
                _rows(xb, yb, ob, i0, i1, xt, acc, yc, mode, tmode, limit, plain,
                      _self._unlimited,
                      wide)
        else:
            _rows(xb, yb, ob, i0, i1, xt, acc, yc, mode, tmode, limit, tile, _self._saturate,
                  _self._no_wide)


# tile_tasks with its tile functions fixed at compile time, one per datapath (see _self).
@njit(cache=True, nogil=True)
def _default_tasks(x, y, bx, by, out, mode, tmode, limit, first, last):
    tile_tasks(x, y, bx, by, out, mode, tmode, limit, first, last, _self._default_tile,
               _self._plain_tile, _self._plain_is_wide, _self.plain_block8)


@njit(cache=True, nogil=True)
def _any_tasks(x, y, bx, by, out, mode, tmode, limit, first, last):
    tile_tasks(x, y, bx, by, out, mode, tmode, limit, first, last, _self._any_tile,
               _self._any_tile, _self._no_wide, _self._no_block8)   # no plain tile: tmode 0 only


@njit(cache=True, nogil=True)
def _lean_tasks(x, y, bx, by, out, mode, tmode, limit, first, last):
    """`_default_tasks` as one loop nest of its own: every row block tile by tile as `_block`
    runs it with the default tile and the saturation check, the last tile's missing lanes
    (K % 4 != 0) as zeros, as `_block_tail` (no plain tile, no `_thin`, no `_thin_k`): the same
    bits, ~1.5x slower on an MLP's products (kernels/__init__.py runs it until
    `_default_tasks` is in). One function, not `_block` called with the tile functions: numba
    compiles each function it calls on its own and then again into every caller's machine
    code, and the calls cost a fresh install's lean stage ~4.3 s of CPU on an AVX2 VM against
    ~2.1 s so."""
    _, m, n = out.shape
    k = x.shape[2]
    rows = rows_per_task(m, n, tmode)
    rb = (m + rows - 1) // rows
    x, y, out = _unowned(x), _unowned(y), _unowned(out)
    for t in range(first, last):
        b, i0 = t // rb, (t % rb) * rows
        i1 = min(i0 + rows, m)
        xb, yb, ob = x[bx[b]], y[by[b]], out[b]
        for i in range(i0, i1):
            for j in range(n):
                ob[i, j] = _ZERO
        for k0 in range(0, k, 4):
            y0, y1 = yb[k0], yb[min(k0 + 1, k - 1)]
            y2, y3 = yb[min(k0 + 2, k - 1)], yb[min(k0 + 3, k - 1)]
            finite = -1
            for i in range(i0, i1):
                xr = xb[i]
                a0 = xr[k0]
                a1 = xr[k0 + 1] if k0 + 1 < k else _ZERO
                a2 = xr[k0 + 2] if k0 + 2 < k else _ZERO
                a3 = xr[k0 + 3] if k0 + 3 < k else _ZERO
                if a0 == _ZERO and a1 == _ZERO and a2 == _ZERO and a3 == _ZERO:
                    if finite < 0:          # (`_block`'s skip of a tile of zeros of x)
                        finite = 1 if _finite_lanes(yb, k0, k) else 0
                    if finite:
                        continue
                o = ob[i]
                if k0 + 4 <= k:
                    for j in range(n):
                        t4 = _default_tile(a0 * y0[j], a1 * y1[j], a2 * y2[j], a3 * y3[j], mode,
                                           tmode)
                        o[j] = _saturate(o[j] + t4, limit)
                else:                       # the last tile: products past K are +0
                    for j in range(n):
                        p1 = a1 * y1[j] if k0 + 1 < k else _ZERO
                        p2 = a2 * y2[j] if k0 + 2 < k else _ZERO
                        t4 = _default_tile(a0 * y0[j], p1, p2, _ZERO, mode, tmode)
                        o[j] = _saturate(o[j] + t4, limit)


@njit(cache=True, nogil=True)
def transpose(src, dst):
    """dst[b] = src[b] transposed, float32 C-contiguous [B, R, C] into [B, C, R]: a bound
    matmul's transposed operand copied into a buffer of its own each call (`copy_call`).
    Where numba targets AVX2, in 8 x 8 blocks (`avx2.transpose8`, the edges one value at a
    time): numpy's strided copy took 1.4 ns a value for a [256, 256] (the GPT-style step's
    ~0.6 ms in all), the blocks ~0.35 (avx2.py's docstring has the numbers)."""
    nb, r, c = src.shape
    src, dst = _unowned(src), _unowned(dst)
    r8, c8 = (r // 8 * 8, c // 8 * 8) if EIGHT else (0, 0)
    for b in range(nb):
        s, d = src[b], dst[b]
        for i0 in range(0, r8, 8):
            for j0 in range(0, c8, 8):
                transpose8(s, d, i0, j0)
            for i in range(i0, i0 + 8):
                for j in range(c8, c):
                    d[j, i] = s[i, j]
        for i in range(r8, r):
            for j in range(c):
                d[j, i] = s[i, j]


def copy_call(buf, a):
    """np.copyto(buf, a) as a function of no arguments, for a C-contiguous float32 buf and
    an `a` of its shape that is the transpose of its last two axes of a C-contiguous float32
    array (a matmul's transposed operand): by `transpose`; any other `a` by numpy."""
    src = np.swapaxes(a, -1, -2)
    if a.ndim < 2 or a.dtype != np.float32 or not src.flags.c_contiguous or a.size == 0:
        return functools.partial(np.copyto, buf, a)
    s3 = src.reshape((-1,) + src.shape[-2:])
    return functools.partial(transpose, s3, buf.reshape((-1,) + a.shape[-2:]))


# the default datapath's tasks: `_default_tasks`, or `_lean_tasks` while it compiles on a fresh
# install (kernels/__init__.py rebinds it)
default_tasks = _default_tasks


def tile_matmul(x, y, bx, by, out, mode, tmode, limit):
    """out[b] = x[bx[b]] @ y[by[b]] through the tile-of-4 datapath (reference.tile_matmul) for
    C-contiguous float32 x [Bx, M, K], y [By, K, N] and any K (split over threads by `run`)."""
    _, m, n = out.shape
    rows = rows_per_task(m, n, tmode)
    tasks = len(bx) * ((m + rows - 1) // rows)
    run(default_tasks if tmode == 0 else _any_tasks, tasks, out.size * x.shape[2], x, y, bx, by,
        out, mode, tmode, np.float32(limit))


def tile_call(x, y, bx, by, out, mode, tmode, limit):
    """`tile_matmul` of these very arrays as a function of no arguments (the run plan's bound
    matmul, run each step): the tasks counted once, and a product too small to split (`run`)
    handed to its kernel directly, without three Python calls on the way (an eager step runs
    a dozen such matmuls)."""
    _, m, n = out.shape
    rows = rows_per_task(m, n, tmode)
    tasks, macs, limit = len(bx) * ((m + rows - 1) // rows), out.size * x.shape[2], np.float32(limit)
    if tmode != 0:
        return functools.partial(run, _any_tasks, tasks, macs, x, y, bx, by, out, mode, tmode,
                                 limit)
    if macs < PARALLEL_MACS:                 # (`default_tasks` read at each call: it is swapped)
        return lambda: default_tasks(x, y, bx, by, out, mode, tmode, limit, 0, tasks)
    return lambda: run(default_tasks, tasks, macs, x, y, bx, by, out, mode, tmode, limit)
