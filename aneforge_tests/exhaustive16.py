"""A compiled sweep over every float32 bit pattern (test_kernels.py): the compiled `r16`
against round16's definition written in float64 (as test_kernels.definition16): the fp16 grid
spacing is q = 2**(max(e, -14) - 10) for 2**e <= |x| < 2**(e + 1); round x / q to an integer
(nearest-even, or half away from zero); beyond 65504 -> ±inf; flush: |x| < 2**-14 -> ±0."""
import numpy as np
from numba import njit, prange

from aneforge.kernels.compiled import _float, r16

_E = np.maximum(np.arange(256) - 127, -14) - 10        # log2 of the spacing, per biased exponent
SPACING, INVERSE = np.ldexp(1.0, _E), np.ldexp(1.0, -_E)


@njit(cache=True)
def _definition(bits, v, mode, spacing, inverse):
    if v != v or abs(v) == np.inf:
        return v
    if mode & 1 and abs(v) < 2.0 ** -14:
        return 0.0 * v
    e = (bits >> 23) & 0xFF
    s = v * inverse[e]                   # exact: a power of two
    if mode & 2:
        n = np.floor(abs(s) + 0.5)       # exact in float64: s has at most 24 significant bits
        n = n if s >= 0 else -n
        if n == 0:
            n = 0.0 * s                  # keep the sign of zero
    else:
        n = np.rint(s)
    r = n * spacing[e]
    if abs(r) > 65504.0:
        return np.inf if v > 0 else -np.inf
    return r


@njit(cache=True, parallel=True)
def _sweep(mode, spacing, inverse):
    chunks = 256
    bad = np.zeros(chunks, np.int64)
    first = np.zeros(chunks, np.int64)
    for c in prange(chunks):
        for low in range(1 << 24):
            bits = np.uint32((c << 24) | low)
            v = _float(bits)
            got = np.float64(r16(v, mode))
            want = _definition(bits, np.float64(v), mode, spacing, inverse)
            if got != got and want != want:
                continue
            if got != want or (got == 0 and np.signbit(got) != np.signbit(want)):
                if bad[c] == 0:
                    first[c] = bits
                bad[c] += 1
    return bad, first


def count_mismatches(mode: int) -> tuple[int, int]:
    """(first mismatching bit pattern or 0, number of mismatches)."""
    bad, first = _sweep(mode, SPACING, INVERSE)
    nz = np.flatnonzero(bad)
    return (int(first[nz[0]]) if nz.size else 0), int(bad.sum())
