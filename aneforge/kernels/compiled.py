"""numba kernels, bit-identical to `reference.py` (imported only when numba is installed and
the compiled kernels are on; compiled on first call and cached on disk, `cache=True`).

fastmath stays off: the kernels must add in the documented order with IEEE float32 rounding.
fp16 rounding under the default model (nearest-even, subnormals kept) is LLVM's float -> half
-> float conversion (one F16C / fcvt instruction pair, exact IEEE); the other models use the
same integer formulas as the reference.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

_TINY = np.float32(2.0 ** -14)
_MAX = np.float32(65504.0)
_INF = np.float32(np.inf)
_UP = np.float32(2.0 ** 24)
_DOWN = np.float32(2.0 ** -24)
_ZERO = np.float32(0.0)
_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
ROWS = 4          # rows of x sharing each loaded row of y
COLS = 512        # output columns per task: a task's accumulators stay in L1
PARALLEL_MACS = 1 << 18     # smaller matmuls run on one thread (thread start-up costs more)


@intrinsic
def _via_half(typingctx, v):
    """float32 -> fp16 (IEEE, nearest-even, subnormals kept, overflow to inf) -> float32."""
    def codegen(context, builder, sig, args):
        return builder.fpext(builder.fptrunc(args[0], ir.HalfType()), ir.FloatType())
    return types.float32(types.float32), codegen


@intrinsic
def _bits(typingctx, v):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.uint32(types.float32), codegen


@intrinsic
def _float(typingctx, u):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.uint32), codegen


@njit(cache=True)
def _outside(v, mode):
    """round16 of a value outside the fp16 normal range (as reference._outside)."""
    if v != v:
        return v
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
def r16(v, mode):
    """One float32 value rounded to fp16 under `mode` (see reference.py)."""
    if mode == 0:
        return v if v != v else _via_half(v)
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


@njit(cache=True)
def round16(x, out, mode):
    for i in range(x.size):
        out[i] = r16(x[i], mode)


def _tasks(out):
    nb, m, n = out.shape
    return nb * ((m + ROWS - 1) // ROWS) * ((n + COLS - 1) // COLS)


@njit(cache=True)
def _matmul_task(t, x, y, bx, by, out, mode):
    """One task of out[b] = x[bx[b]] @ y[by[b]]: ROWS rows by COLS columns of one batch entry.
    Each product is rounded to fp16 (`r16`) and added to an fp32 accumulator in order
    k = 0 .. K-1 from +0. The k loop is outside the j loop, so the j loop vectorizes across
    independent accumulators while each (i, j) still sums sequentially over k.

    Another datapath (e.g. tiles of 4 products summed by a narrow adder, then a wide sum across
    tiles) is another task function of this shape with a different accumulate step."""
    _, m, n = out.shape
    k = x.shape[2]
    rb, cb = (m + ROWS - 1) // ROWS, (n + COLS - 1) // COLS
    b, rest = t // (rb * cb), t % (rb * cb)
    i0, j0 = (rest // cb) * ROWS, (rest % cb) * COLS
    i1, j1 = min(i0 + ROWS, m), min(j0 + COLS, n)
    xb, yb, ob = x[bx[b]], y[by[b]], out[b]
    for i in range(i0, i1):
        for j in range(j0, j1):
            ob[i, j] = _ZERO
    if i1 - i0 == ROWS:
        o0, o1, o2, o3 = ob[i0], ob[i0 + 1], ob[i0 + 2], ob[i0 + 3]
        for kk in range(k):
            a0, a1, a2, a3 = xb[i0, kk], xb[i0 + 1, kk], xb[i0 + 2, kk], xb[i0 + 3, kk]
            yk = yb[kk]
            for j in range(j0, j1):
                w = yk[j]
                o0[j] += r16(a0 * w, mode)
                o1[j] += r16(a1 * w, mode)
                o2[j] += r16(a2 * w, mode)
                o3[j] += r16(a3 * w, mode)
    else:
        for i in range(i0, i1):
            o = ob[i]
            for kk in range(k):
                a, yk = xb[i, kk], yb[kk]
                for j in range(j0, j1):
                    o[j] += r16(a * yk[j], mode)


@njit(cache=True)
def matmul_serial(x, y, bx, by, out, mode, tasks):
    for t in range(tasks):
        _matmul_task(t, x, y, bx, by, out, mode)


@njit(cache=True, parallel=True)
def matmul_parallel(x, y, bx, by, out, mode, tasks):
    for t in prange(tasks):
        _matmul_task(t, x, y, bx, by, out, mode)


def matmul(x, y, bx, by, out, mode):
    """out[b] = x[bx[b]] @ y[by[b]] for C-contiguous float32 x [Bx, M, K], y [By, K, N]."""
    kernel = matmul_parallel if out.shape[1] * out.shape[2] * x.shape[2] * len(bx) >= \
        PARALLEL_MACS else matmul_serial
    kernel(x, y, bx, by, out, mode, _tasks(out))


@njit(cache=True)
def narrow_sum(terms, out, mode):
    """Sum over axis 0 of a 2-D array, acc = r16(acc + term) in order (reference.narrow_sum)."""
    r, c = terms.shape
    for j in range(c):
        out[j] = terms[0, j]
    for i in range(1, r):
        for j in range(c):
            out[j] = r16(out[j] + terms[i, j], mode)
