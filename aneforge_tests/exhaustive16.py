"""A compiled sweep over every float32 bit pattern (test_kernels.py): the compiled `r16`, the
rounding every compiled kernel uses, against round16's definition written in float64 (as
test_kernels.definition16, and independent of the kernels' formulas): the fp16 grid spacing is
q = 2**(max(e, -14) - 10) for 2**e <= |x| < 2**(e + 1); round x / q to an integer
(nearest-even, or half away from zero); beyond 65504 -> ±inf; flush: |x| < 2**-14 -> ±0;
inf stays; NaN stays NaN (+0 under mode bit 2, the engine's stores).

The loop is compiled per mode and written without branches, so that LLVM vectorizes it (the
IEEE path of r16 does too): 2**32 patterns take seconds per mode. Chunks run on threads (the
loops release the GIL; not numba's parallel=True, whose threading layer may spin after the
call)."""
import functools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from aneforge.hardware.kernels.compiled import _bits, _float, r16, threads

CHUNK = 1 << 24


def _f64_unary(name):
    """An LLVM float64 intrinsic (llvm.rint, llvm.floor): one instruction that vectorizes."""
    @intrinsic
    def fn(typingctx, v):
        def codegen(context, builder, sig, args):
            return builder.call(builder.module.declare_intrinsic(name, [ir.DoubleType()]), args)
        return types.float64(types.float64), codegen
    return fn


_rint, _floor = _f64_unary("llvm.rint"), _f64_unary("llvm.floor")


@intrinsic
def _f64(typingctx, u):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@njit(cache=True)
def definition(v, mode):
    """round16 of float32 v by the definition, computed in float64 (every step exact)."""
    x = np.float64(v)
    e = max(np.int64((_bits(v) >> np.uint32(23)) & np.uint32(0xFF)) - 127, -14)
    q, inverse = _f64((e - 10 + 1023) << 52), _f64((10 - e + 1023) << 52)  # 2**(e-10), 2**(10-e)
    s = x * inverse
    n = np.copysign(_floor(abs(s) + 0.5), s) if mode & 2 else _rint(s)
    r = n * q
    r = np.copysign(np.inf, x) if abs(r) > 65504.0 else r
    r = 0.0 * x if mode & 1 and abs(x) < 2.0 ** -14 else r
    r = x if abs(x) == np.inf else r
    return (0.0 if mode & 4 else x) if x != x else r


@njit(cache=True)
def definitions(x, mode):
    """`definition` over a float32 array (the tests check it against the numpy definition)."""
    out = np.empty(x.size, np.float32)
    for i in range(x.size):
        out[i] = definition(x[i], mode)
    return out


@functools.lru_cache(maxsize=None)
def _counter(mode: int, rounding):
    """count(start, stop): how many patterns in [start, stop) `rounding` (r16) rounds
    otherwise (NaN matches any NaN). Compiled per mode (~1 s, not cached: a closure), so that
    the mode is a constant and LLVM drops the other modes' code and vectorizes the loop: 2-5x
    faster."""
    @njit(nogil=True)
    def count(start, stop):
        bad = 0
        for b in range(start, stop):
            v = _float(np.uint32(b))
            got, want = rounding(v, mode), np.float32(definition(v, mode))
            bad += (_bits(got) != _bits(want)) & ((got == got) | (want == want))
        return bad
    return count


@njit(cache=True)
def _first(start, stop, mode, rounding):
    for b in range(start, stop):
        v = _float(np.uint32(b))
        got, want = rounding(v, mode), np.float32(definition(v, mode))
        if _bits(got) != _bits(want) and not (got != got and want != want):
            return b
    return -1


def count_mismatches(mode: int, rounding=r16, start: int = 0,
                     stop: int = 1 << 32) -> tuple[int, int]:
    """(first mismatching bit pattern or 0, number of mismatches) over the patterns [start,
    stop), all 2**32 by default, in chunks on threads."""
    starts, count = range(start, stop, CHUNK), _counter(mode, rounding)
    with ThreadPoolExecutor(threads()) as pool:
        counts = list(pool.map(lambda s: count(s, min(s + CHUNK, stop)), starts))
    bad = [s for s, c in zip(starts, counts) if c]
    return (_first(bad[0], min(bad[0] + CHUNK, stop), mode, rounding) if bad else 0), sum(counts)
