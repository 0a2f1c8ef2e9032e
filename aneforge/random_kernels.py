"""torch's CPU float kernels for random draws, in numpy (the reference; aneforge.random uses
them, aneforge.random_compiled is their numba form): Box-Muller over blocks of 16 uniforms
with avx_mathfun.h's float polynomials (torch's AVX2 kernel, x86-64) or with the C library's
functions (torch's scalar kernel, elsewhere), and the float32 fused multiply-add they need.
"""
from __future__ import annotations

import math

import numpy as np

_F32 = np.float32

# avx_mathfun.h's constants (Julien Pommier's sse_mathfun, Cephes polynomials), as float32
_LOG_P = [_F32(c) for c in (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1,
                            -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
                            2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)]
_LOG_Q1, _LOG_Q2, _SQRTHF = _F32(-2.12194440e-4), _F32(0.693359375), _F32(0.707106781186547524)
_DP = [_F32(-0.78515625), _F32(-2.4187564849853515625e-4), _F32(-3.77489497744594108e-8)]
_SINCOF = [_F32(-1.9515295891e-4), _F32(8.3321608736e-3), _F32(-1.6666654611e-1)]
_COSCOF = [_F32(2.443315711809948e-005), _F32(-1.388731625493765e-003),
           _F32(4.166664568298827e-002)]
_FOPI, _HALF, _ONE = _F32(1.27323954473516), _F32(0.5), _F32(1.0)
_TWO_PI_F = _F32(2.0 * math.pi)


def fma(a, b, c) -> np.ndarray:
    """float32 a * b + c rounded once (a fused multiply-add). The product of two float32 is
    exact in float64; the float64 sum rounds, and rounding that to float32 is the single
    rounding except where the float64 sum sits exactly halfway between two float32 (or below
    float32's normal range): there the sum's own error (TwoSum) decides."""
    p = np.asarray(a, np.float64) * b
    s = p + c
    r = s.astype(_F32)
    low = s.view(np.int64) & 0x1FFFFFFF
    doubt = (low == 0x10000000) | (np.abs(s) < 2.0 ** -126)
    if doubt.any():
        p, s, c = p[doubt], s[doubt], np.broadcast_to(c, doubt.shape)[doubt]
        err = (p - (s - (s - p))) + (c - (s - p))
        r[doubt] = np.where(err != 0, np.nextafter(s, s + err), s).astype(_F32)
    return r


# torch's AVX2 objects are built by GCC with -mfma, whose default -ffp-contract=fast turns a
# multiply whose one use is an add into a fused multiply-add, the first such multiply in
# statement order winning: the `_fma` calls below are those contractions, the plain `*` and
# `+` the operations left alone (checked bit for bit against torch: test_rng_torch.py).
def _poly(x, coefs, start):
    """Horner's rule, each step one contracted multiply-add."""
    y = start
    for c in coefs:
        y = fma(y, x, c)
    return y


def _log_ps(x: np.ndarray) -> np.ndarray:
    """avx_mathfun.h's log256_ps, operation for operation in float32 (x > 0)."""
    x = np.maximum(x, _F32(1.17549435e-38))
    bits = x.view(np.int32)
    e = ((bits >> 23) - 0x7F).astype(_F32) + _ONE
    x = ((bits & ~0x7F800000) | 0x3F000000).view(_F32)          # mantissa in [0.5, 1)
    small = x < _SQRTHF
    tmp = np.where(small, x, _F32(0))
    x = x - _ONE
    e = e - np.where(small, _ONE, _F32(0))
    x = x + tmp
    z = x * x
    y = _poly(x, _LOG_P[1:], _LOG_P[0]) * x
    y = fma(y, z, e * _LOG_Q1)
    y = fma(z, -_HALF, y)
    return fma(e, _LOG_Q2, x + y)


def _sincos_ps(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """avx_mathfun.h's sincos256_ps, operation for operation in float32 (x >= 0)."""
    j = (x * _FOPI).astype(np.int32)
    j = (j + 1) & ~1
    y = j.astype(_F32)
    sin_sign = ((j & 4) << 29).view(np.uint32)
    cos_sign = ((~(j - 2) & 4) << 29).view(np.uint32)
    sin_poly = (j & 2) == 0
    for dp in _DP:                                 # extended-precision reduction by pi/4
        x = fma(y, dp, x)
    z = x * x
    c = _poly(z, _COSCOF[1:], _COSCOF[0]) * z
    c = fma(c, z, -(z * _HALF)) + _ONE
    s = fma(_poly(z, _SINCOF[1:], _SINCOF[0]) * z, x, x)
    s_part, c_part = np.where(sin_poly, s, _F32(0)), np.where(sin_poly, _F32(0), c)
    s, c = s - s_part, c - c_part
    sin = ((c_part + s_part).view(np.uint32) ^ sin_sign).view(_F32)
    cos = ((c + s).view(np.uint32) ^ cos_sign).view(_F32)
    return sin, cos


def box_muller_avx2(u1, u2, mean, std):
    radius = np.sqrt(_F32(-2.0) * _log_ps(u1))
    sin, cos = _sincos_ps(_TWO_PI_F * u2)
    return fma(radius * cos, std, mean), fma(radius * sin, std, mean)


def box_muller_scalar(u1, u2, mean, std):
    """NormalFill16's scalar form: the C library's logf, cosf and sinf (nearly always the
    correctly rounded values computed here in float64)."""
    radius = np.sqrt(_F32(-2.0) * np.log(u1.astype(np.float64)).astype(_F32))
    theta = (2.0 * math.pi * u2.astype(np.float64)).astype(_F32).astype(np.float64)
    cos, sin = np.cos(theta).astype(_F32), np.sin(theta).astype(_F32)
    return fma(radius * cos, std, mean), fma(radius * sin, std, mean)
