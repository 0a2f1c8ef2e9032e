"""The numpy reference kernels: always available, and the definition the compiled kernels in
`compiled.py` must match bit for bit (aneforge_tests/test_kernels.py checks that).

Every kernel takes `mode`, the rounding of the numerics model as one small int (`kernels.mode`):
bit 1 = round half away from zero (else nearest-even), bit 0 = flush fp16 subnormals to 0,
bit 2 = a NaN rounds to +0 (the engine's indeterminate forms; else NaN stays NaN).
"""
from __future__ import annotations

import numpy as np

F16_TINY = np.float32(2.0 ** -14)     # smallest normal fp16
F16_MAX = np.float32(65504.0)
# |x| in [2**-14, 65520) rounds to a normal finite fp16 value by the fast formulas below; the
# window is tested on the float32 bits shifted left once (sign dropped), as one unsigned compare.
_LO = np.uint32(0x38800000 << 1)
_SPAN = np.uint32((0x477FF000 - 0x38800000) << 1)
_CHUNK = 1 << 22      # products the matmul materializes at once


def round16(x, mode: int) -> np.ndarray:
    """Round float32 values to the nearest fp16 value (returned as float32).

    Nearest-even uses the Veltkamp split: c = x * (2**13 + 1); c - (c - x) is x rounded to
    24 - 13 = 11 significant bits, ties to even, exact over the fp16 normal range. Half-away
    adds half an fp16 ulp to the sign-magnitude bits and truncates. Values outside the normal
    range (subnormals, overflow, inf, NaN) are redone one by one in `_outside`; exact zeros
    come through the fast formulas unchanged, so relu outputs stay on the fast path.
    """
    x = np.asarray(x, dtype=np.float32)
    shape, x = x.shape, x.reshape(-1)
    with np.errstate(all="ignore"):
        if mode & 2:
            r = ((x.view(np.uint32) + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
        else:
            c = x * np.float32(8193.0)
            r = c - (c - x)
        d = x.view(np.uint32) << np.uint32(1)
        d -= _LO
        idx = np.flatnonzero(d >= _SPAN)
        if idx.size:
            v = x[idx]
            idx, v = idx[v != 0], v[v != 0]
            r[idx] = _outside(v, mode)
    return r.reshape(shape)


def _outside(v: np.ndarray, mode: int) -> np.ndarray:
    """round16 of values outside the fp16 normal range: subnormals (fixed spacing 2**-24, or
    flushed to a signed 0), overflow (±inf), inf and NaN (returned unchanged)."""
    out = np.copysign(np.float32(np.inf), v)
    small = np.abs(v) < F16_TINY
    s = v[small] * np.float32(2.0 ** 24)
    if mode & 1:
        q = np.float32(0.0) * s
    elif mode & 2:                        # trunc, then away from zero at or past the half
        t = np.trunc(s)
        q = np.copysign(np.abs(t) + (np.abs(s - t) >= 0.5), s).astype(np.float32)
    else:
        q = np.rint(s)
    out[small] = q * np.float32(2.0 ** -24)
    nan = np.isnan(v)
    out[nan] = np.float32(0.0) if mode & 4 else v[nan]
    return out


def matmul(x: np.ndarray, y: np.ndarray, mode: int) -> np.ndarray:
    """x @ y (float32, broadcast batch dims, rank >= 2) with each product rounded to fp16 and
    an fp32 accumulator that adds the products in order k = 0, 1, ..., K-1 from +0."""
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    m, k, n = x.shape[-2], x.shape[-1], y.shape[-1]
    acc = np.zeros(batch + (m, n), np.float32)
    step = max(1, _CHUNK // max(1, acc.size))
    with np.errstate(all="ignore"):
        for k0 in range(0, k, step):
            p = round16(x[..., :, k0:k0 + step, None] * y[..., None, k0:k0 + step, :], mode)
            if acc.size >= 1024:         # few, large rows: add them one by one
                for kk in range(p.shape[-2]):
                    acc += p[..., kk, :]
            else:                        # many small rows: accumulate (sequential) in one call
                p[..., 0, :] += acc      # acc + p[0], the first step
                acc = np.add.accumulate(p, axis=-2)[..., -1, :]
    return acc


def port(acc: np.ndarray, overflow: float | None, flush: bool) -> int:
    """The output port of matmul/linear/conv, in place on a float array: |v| >= overflow reads
    back as +-inf (None: no limit), then |v| < 2**-14 becomes +0 if `flush`. Returns how many
    values saturated."""
    count = 0
    if overflow is not None:
        big = np.abs(acc) >= overflow
        count = int(np.count_nonzero(big))
        acc[big] = np.copysign(np.float32(np.inf), acc[big])
    if flush:
        acc[np.abs(acc) < F16_TINY] = 0
    return count


def port_round(acc: np.ndarray, bias: np.ndarray, overflow: np.float32, flush: bool,
               mode: int) -> int:
    """A bound matmul's result finished in place, float32 acc [rows, cols]: bias [cols]
    added (empty: none), the output port (`port`; a NaN overflow: no limit), then the fp16
    store under `mode`. Returns port's count."""
    if bias.size:
        np.add(acc, bias, out=acc)
    count = port(acc, None if np.isnan(overflow) else overflow, flush)
    acc[...] = round16(acc, mode)
    return count


def narrow_sum(terms: np.ndarray, mode: int) -> np.ndarray:
    """Sum over axis 0 with a running fp16 accumulator: acc = round16(acc + term), in order."""
    acc = np.array(terms[0], dtype=np.float32)
    with np.errstate(all="ignore"):
        for term in terms[1:]:
            acc = round16(acc + term, mode)
    return acc


# ---- the tile-of-4 accumulator ----------------------------------------------------------------
# tmode bits: 1 = cut toward -inf (else toward zero), 2 = carry rounds to nearest-even (else it
# cuts), 4 = a tile's result cut to fp16 (else kept at 12 bits), 8 = products rounded to fp16
# under `mode` (else exact: an fp16 x fp16 product fits float32).
def _scale_bits(bits: np.ndarray, offset: int) -> np.ndarray:
    return (np.uint32(offset) - bits).astype(np.uint32) << np.uint32(23)


def add12(x: np.ndarray, y: np.ndarray, tmode: int) -> np.ndarray:
    """x + y in the 12-bit truncating adder: e = floor(log2(max(|x|, |y|))), both operands cut
    to multiples of q = 2**(e - 11); a sum reaching 2**(e + 1) is cut again at 2q (the carry).
    Computed on the integers x / q, y / q: every step is exact in float32."""
    cut = np.floor if tmode & 1 else np.trunc
    carry = np.rint if tmode & 2 else cut
    m = np.maximum(x.view(np.uint32) & np.uint32(0x7FFFFFFF), y.view(np.uint32) & np.uint32(0x7FFFFFFF))
    m = np.maximum(m >> np.uint32(23), np.uint32(12))
    scale = _scale_bits(m, 265).view(np.float32)
    q = (m - np.uint32(11)).astype(np.uint32) << np.uint32(23)
    s = cut(x * scale) + cut(y * scale)
    s = np.where(np.abs(s) >= np.float32(4096), carry(s * np.float32(0.5)) * np.float32(2), s)
    return s * q.view(np.float32)


def cut16(v: np.ndarray, tmode: int) -> np.ndarray:
    """v cut (toward zero, or -inf) to the fp16 grid: 11 significant bits, spacing 2**-24
    below 2**-14."""
    cut = np.floor if tmode & 1 else np.trunc
    m = np.maximum((v.view(np.uint32) & np.uint32(0x7FFFFFFF)) >> np.uint32(23), np.uint32(113))
    q = ((m - np.uint32(10)).astype(np.uint32) << np.uint32(23)).view(np.float32)
    return cut(v * _scale_bits(m, 264).view(np.float32)) * q


def tile_sum(p: list, tmode: int) -> np.ndarray:
    """One tile: four products added left to right by add12. An inf or NaN product makes the
    tile inf or NaN, as their plain sum would be (the scale taken from an inf exponent turns
    the finite operands into 0)."""
    t = add12(add12(add12(p[0], p[1], tmode), p[2], tmode), p[3], tmode)
    return cut16(t, tmode) if tmode & 4 else t


def tile_matmul(x: np.ndarray, y: np.ndarray, mode: int, tmode: int, limit: float) -> np.ndarray:
    """x @ y (float32, broadcast batch dims, rank >= 2) through the ANE's MAC datapath: lanes
    k = 4t .. 4t + 3 form tile t (K zero-padded to a multiple of 4); each tile is summed by
    `tile_sum`; tiles are added in order into an fp32 accumulator from +0, which becomes +-inf
    once |acc| >= limit (it stays there: the engine's partials saturate)."""
    k = x.shape[-1]
    pad = -k % 4
    if pad:
        x = np.concatenate([x, np.zeros(x.shape[:-1] + (pad,), np.float32)], -1)
        y = np.concatenate([y, np.zeros(y.shape[:-2] + (pad, y.shape[-1]), np.float32)], -2)
    batch = np.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    acc = np.zeros(batch + (x.shape[-2], y.shape[-1]), np.float32)
    limit = np.float32(limit)
    with np.errstate(all="ignore"):
        for k0 in range(0, k + pad, 4):
            p = [x[..., :, k0 + i, None] * y[..., None, k0 + i, :] for i in range(4)]
            p = [round16(v, mode) for v in p] if tmode & 8 else p
            acc = acc + tile_sum(p, tmode)
            acc = np.where(np.abs(acc) >= limit, np.copysign(np.float32(np.inf), acc), acc)
    return acc.astype(np.float32, copy=False)
