"""numba kernels of a program's boundary, bit-identical to `reference.py` and numpy's casts:
float32 <-> float16 (whole arrays and spans of rows), the NaN check of a program's outputs, and
the run plan's moves of rows between arena places; with the bit-level intrinsics the other
compiled kernels (`compiled.py`) build on. Imported only when numba is installed and the
compiled kernels are on; compiled on first call and cached on disk (`cache=True`)."""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types, uint64
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

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


@intrinsic
def _to_half_bits(typingctx, v):
    def codegen(context, builder, sig, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
    return types.uint16(types.float32), codegen


@intrinsic
def _from_half_bits(typingctx, h):
    def codegen(context, builder, sig, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
    return types.float32(types.uint16), codegen


@intrinsic
def _unowned(typingctx, a):
    """A view of array a that owns nothing (no meminfo): its slices and rows take no
    reference counts (the caller's array stays alive for the whole call). A view of an owned
    array counts a reference up and down, two atomic instructions: a kernel taking a row per
    tile or block (the tile matmul, the fused runs) spent much of its time on them."""
    def codegen(context, builder, sig, args):
        src = context.make_array(sig.args[0])(context, builder, args[0])
        out = context.make_array(sig.return_type)(context, builder)
        populate_array(out, data=src.data, shape=src.shape, strides=src.strides,
                       itemsize=src.itemsize, meminfo=None)
        return out._getvalue()
    return a(a), codegen


@njit(cache=True)
def to_float16(x, out):
    """float32 -> the bits of IEEE float16 (nearest-even), as numpy's astype(float16)."""
    for i in range(x.size):
        out[i] = _to_half_bits(x[i])


@njit(cache=True)
def to_float16_spans(x, spans, out):
    """`to_float16` of several rows of x into one buffer, one after the other: x[at:at + n]
    for each (at, n) of spans (a run plan's fp16 outputs in one call, not one each). Each row
    goes through `to_float16`'s loop on slices (indexing by offsets kept it from vectorizing:
    20x slower)."""
    o = 0
    for k in range(spans.shape[0]):
        at, n = spans[k, 0], spans[k, 1]
        to_float16(x[at:at + n], out[o:o + n])
        o += n


@njit(cache=True)
def from_float16_spans(bits, spans, x, coerce, nans):
    """fp16 bits (several inputs one after the other) into rows x[at:at + n] of float32, for
    each (at, n) of spans; a NaN read as +inf when `coerce` (the engine's input rule), counted
    per span in `nans`."""
    o = 0
    for k in range(spans.shape[0]):
        at, n = spans[k, 0], spans[k, 1]
        nans[k] = _load_row(bits[o:o + n], x[at:at + n], coerce)
        o += n


@njit(cache=True, inline="always")
def _load_row(bits, out, coerce):
    nan = 0
    for i in range(bits.size):
        v = _from_half_bits(bits[i])
        if v != v:
            nan += 1
            v = np.float32(np.inf) if coerce else v
        out[i] = v
    return nan


@njit(cache=True)
def move(arena, rows, out, n, fill, filled):
    """A chain of data movement as one copy (runtime/moves.py): arena[out:out + n] set to
    `fill` first when `filled` (a pad's constant), then each row's piece copied, row = (source,
    destination, four sizes, four source strides, four destination strides). Values are
    moved, never computed: their bits are their sources'."""
    if filled:
        region = arena[out:out + n]
        for i in range(n):          # loops from 0 over a slice vectorize (no wraparound test)
            region[i] = fill
    for p in range(rows.shape[0]):
        src, dst = rows[p, 0], rows[p, 1]
        n0, n1, n2, n3 = rows[p, 2], rows[p, 3], rows[p, 4], rows[p, 5]
        s0, s1, s2, s3 = rows[p, 6], rows[p, 7], rows[p, 8], rows[p, 9]
        d0, d1, d2, d3 = rows[p, 10], rows[p, 11], rows[p, 12], rows[p, 13]
        for a in range(n0):
            for b in range(n1):
                for c in range(n2):
                    fs = src + a * s0 + b * s1 + c * s2
                    fd = dst + a * d0 + b * d1 + c * d2
                    if s3 == 1 and d3 == 1:
                        to, frm = arena[fd:fd + n3], arena[fs:fs + n3]
                        for e in range(n3):
                            to[e] = frm[e]
                    elif s3 >= 0 and d3 >= 0:   # unsigned places: no wraparound test (2x)
                        ufd, ufs, ud3, us3 = uint64(fd), uint64(fs), uint64(d3), uint64(s3)
                        for e in range(uint64(n3)):
                            arena[ufd + e * ud3] = arena[ufs + e * us3]
                    else:                       # a reversed axis
                        for e in range(n3):
                            arena[fd + e * d3] = arena[fs + e * s3]


@njit(cache=True)
def has_nan(x):
    """Whether float32 x (1-D) holds a NaN: an OR over blocks, so the loop vectorizes."""
    for i0 in range(0, x.size, 256):
        bad = False
        for i in range(i0, min(i0 + 256, x.size)):
            bad |= x[i] != x[i]
        if bad:
            return True
    return False


@njit(cache=True)
def from_float16(h, out):
    """the bits of float16 -> float32 (exact)."""
    for i in range(h.size):
        out[i] = _from_half_bits(h[i])
