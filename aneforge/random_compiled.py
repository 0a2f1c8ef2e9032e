"""numba form of aneforge.random_kernels' x86-64 normal kernel (torch's AVX2 Box-Muller through
avx_mathfun.h), bit-identical to the numpy reference there (aneforge_tests/test_rng_torch.py).

Imported only when the compiled kernels are on (aneforge.hardware.kernels.active() is
"numba"); compiled on first call and cached on disk. fastmath stays off: each float32
operation rounds as the reference's; the contracted multiply-adds are LLVM's fma intrinsic
(one rounding), as GCC's -ffp-contract=fast made them in torch's build.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .hardware.kernels.compiled import _bits, _float      # float32 <-> uint32 bits
from .random_kernels import (_COSCOF, _DP, _FOPI, _HALF, _LOG_P, _LOG_Q1, _LOG_Q2, _ONE, _SINCOF,
                     _SQRTHF, _TWO_PI_F)

_P0, _P1, _P2, _P3, _P4, _P5, _P6, _P7, _P8 = _LOG_P
_DP1, _DP2, _DP3 = _DP
_S0, _S1, _S2 = _SINCOF
_C0, _C1, _C2 = _COSCOF
_ZERO = np.float32(0.0)
_MINUS_TWO = np.float32(-2.0)
_MIN_NORM = np.float32(1.17549435e-38)


@intrinsic
def _fmaf(typingctx, a, b, c):
    """a * b + c in float32, rounded once (llvm.fma.f32)."""
    def codegen(context, builder, sig, args):
        f32 = ir.FloatType()
        fn = builder.module.declare_intrinsic("llvm.fma", [f32], ir.FunctionType(f32, [f32] * 3))
        return builder.call(fn, args)
    return types.float32(types.float32, types.float32, types.float32), codegen


@njit(cache=True)
def _log_ps(x):
    x = max(x, _MIN_NORM)
    bits = _bits(x)
    e = np.float32(np.int32(bits >> np.uint32(23)) - np.int32(0x7F)) + _ONE
    x = _float((bits & np.uint32(0x807FFFFF)) | np.uint32(0x3F000000))   # mantissa in [0.5, 1)
    small = x < _SQRTHF
    tmp = x if small else _ZERO
    x = x - _ONE
    e = e - (_ONE if small else _ZERO)
    x = x + tmp
    z = x * x
    y = _fmaf(_fmaf(_fmaf(_fmaf(_P0, x, _P1), x, _P2), x, _P3), x, _P4)
    y = _fmaf(_fmaf(_fmaf(_fmaf(y, x, _P5), x, _P6), x, _P7), x, _P8) * x
    y = _fmaf(y, z, e * _LOG_Q1)
    y = _fmaf(z, -_HALF, y)
    return _fmaf(e, _LOG_Q2, x + y)


@njit(cache=True)
def _sincos_ps(x):
    j = np.int32(x * _FOPI)
    j = (j + np.int32(1)) & np.int32(~1)
    y = np.float32(j)
    sin_sign = np.uint32((j & np.int32(4)) << np.int32(29))
    cos_sign = np.uint32((~(j - np.int32(2)) & np.int32(4)) << np.int32(29))
    sin_poly = (j & np.int32(2)) == 0
    x = _fmaf(y, _DP1, x)
    x = _fmaf(y, _DP2, x)
    x = _fmaf(y, _DP3, x)
    z = x * x
    c = _fmaf(_fmaf(_C0, z, _C1), z, _C2) * z
    c = _fmaf(c, z, -(z * _HALF)) + _ONE
    s = _fmaf(_fmaf(_fmaf(_S0, z, _S1), z, _S2) * z, x, x)
    s_part = s if sin_poly else _ZERO
    c_part = _ZERO if sin_poly else c
    s, c = s - s_part, c - c_part
    return _float(_bits(c_part + s_part) ^ sin_sign), _float(_bits(c + s) ^ cos_sign)


@njit(cache=True)
def box_muller_avx2(u1, u2, mean, std):
    """The reference's `_box_muller_avx2` over flat float32 arrays."""
    cos_out = np.empty_like(u1)
    sin_out = np.empty_like(u1)
    for i in range(u1.size):
        radius = np.sqrt(_MINUS_TWO * _log_ps(u1[i]))
        sin, cos = _sincos_ps(_TWO_PI_F * u2[i])
        cos_out[i] = _fmaf(radius * cos, std, mean)
        sin_out[i] = _fmaf(radius * sin, std, mean)
    return cos_out, sin_out
