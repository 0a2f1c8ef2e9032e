"""Activations (MIL iOS15 activation.py / elementwise_unary clip): relu, sigmoid, tanh, gelu,
silu, softplus, softsign, clip, softmax. The ANE evaluates most of these from lookup tables (ANEForge
`docs/op-catalog.md`); under `Numerics.activations="exact"` the simulator computes them in fp32
and rounds once (the torch-faithful reading), under `"tables"` it evaluates reconstructed
tables (activation_tables.py)."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import AneforgeError
from ._common import FLOATS, elementwise, norm_axis, require_dtype
from ._grad import attach, where, zeros
from .activation_tables import TableSpec, tabled
from .registry import Attr, define, shape_error


def _float_unary(name):
    def infer(t, attrs):
        require_dtype(name, t, "x", FLOATS)
        return t["x"]
    return infer


_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
         -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def erfc(x: np.ndarray) -> np.ndarray:
    """erfc with RELATIVE error < 1.2e-7 everywhere (Numerical Recipes' Chebyshev fit `erfcc`),
    so gelu's tail 0.5 x erfc(-x/sqrt2) keeps full fp16 precision where 1 + erf(x) cancels."""
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = np.zeros_like(t)
    for c in reversed(_ERFC[1:]):
        poly = t * (c + poly)
    r = t * np.exp(-a * a + _ERFC[0] + poly)
    return np.where(x >= 0, r, 2.0 - r).astype(x.dtype)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))    # exp overflow -> 1/inf = 0, as it should (errstate ignored)


GELU_MODES = {
    "EXACT": lambda x: 0.5 * x * erfc(x * np.float32(-0.7071067811865476)),
    # 0.5 x (1 + tanh(u)) written as x sigmoid(2u): the same function, without the cancellation
    "TANH_APPROXIMATION": lambda x: x * sigmoid(
        np.float32(2 * 0.7978845608028654) * (x + np.float32(0.044715) * x * x * x)),
    "SIGMOID_APPROXIMATION": lambda x: x * sigmoid(np.float32(1.702) * x),
}


def _gelu_infer(t, attrs):
    require_dtype("gelu", t, "x", FLOATS)
    if attrs["mode"] not in GELU_MODES:
        raise AneforgeError(f"gelu: mode {attrs['mode']!r} is not one of {sorted(GELU_MODES)}")
    return t["x"]


def _const(c):
    return lambda x: np.full_like(x, c)


_zero = _const(0.0)


def _gelu_exact(x):
    return 0.5 * x * erfc(x * -0.7071067811865476)


def _silu(x):
    return x * sigmoid(x)


# The engine's tables (ane-guide 03-numerics.md), reconstructed: docs/numerics.md derives each
# row. sigmoid: the high-precision table on its published domain [-9.938, 8.320], through its
# knots, beta for worst error 0.0034. The others: domain +-D where the clamp to the asymptote is
# off by the worst error E (tanh 0.00168, gelu 0.0057, silu 0.0028: where silu's in-table error
# meets its clamp), minimax knot values; beta for gelu(0) = -0.000543 and silu(0) = -0.001259.
TABLES = {
    "sigmoid": TableSpec(sigmoid, -9.9375, 8.3203125, 1.05, "knots", _zero, _const(1.0)),
    "tanh": TableSpec(np.tanh, -3.5406, 3.5406, 2.0, "lowered", _const(-1.0), _const(1.0)),
    "gelu": TableSpec(_gelu_exact, -2.8816, 2.8816, 1.908, "lowered", _zero, lambda x: x),
    "silu": TableSpec(_silu, -7.9511, 7.9511, 2.539, "lowered", _zero, lambda x: x),
}


def _activation(fn, table=None, engine=None):
    """The op's kernel: fn in fp32 (activations="exact"), or its table (activations="tables";
    fp16 inputs read it by their bits, fp32 ones through the knots); `engine` is fn with the
    engine's special values (`elementwise`)."""
    exact = elementwise(fn, engine)
    lookup = table and tabled(table)

    def simulate(ctx, x, **attrs):
        if lookup and ctx.numerics.activations == "tables":
            return lookup(x, ctx.out_dtypes[0] == dtypes.float16)
        return exact(ctx, x, **attrs)
    return simulate


ACTIVATIONS = {
    "erf": lambda x: 1.0 - erfc(x),
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": sigmoid,
    "tanh": np.tanh,
    "silu": _silu,
}
# relu's kernel is one float32 operation: it runs in the fused VM as well
_FUSED = {"relu": ("relu", "relu")}
for _name, _fn in ACTIVATIONS.items():
    define(_name, ("x",), _float_unary(_name), _activation(_fn, TABLES.get(_name)),
           pointwise=True, elementwise=1, fused=_FUSED.get(_name))


def _softplus(x):
    return np.logaddexp(np.float32(0.0), x)      # log(1 + e^x) without overflow or cancellation


def _softsign(x):
    # x / (1 + |x|), and its limit +-1 at +-inf (the quotient would be inf / inf)
    return np.where(np.isinf(x), np.sign(x), x / (np.float32(1.0) + np.abs(x)))


def _collapse_at_inf(fn):
    """fn with +inf -> +0: the engine's softplus and softsign tables collapse there, measured
    on M1 (sbryngelson/ane-guide part-1-machine/03-numerics.md)."""
    return lambda x: np.where(x == np.inf, np.float32(0.0), fn(x))


# MIL iOS15 softplus and softsign (no attributes). Their engine tables are not published, so
# both are computed in fp32 and rounded once under either `activations`; only the special
# value +inf takes the engine's answer under `specials="engine"`.
SPECIAL_ACTIVATIONS = {"softplus": _softplus, "softsign": _softsign}
for _name, _fn in SPECIAL_ACTIVATIONS.items():
    define(_name, ("x",), _float_unary(_name), _activation(_fn, engine=_collapse_at_inf(_fn)),
           pointwise=True, elementwise=1)


_GELU = {"table": _activation(lambda x, mode: GELU_MODES[mode](x), TABLES["gelu"]),
         "computed": _activation(lambda x, mode: GELU_MODES[mode](x))}


def _gelu(ctx, x, mode):
    # the published gelu table is the exact (erf) gelu's; the approximations stay computed
    return _GELU["table" if mode == "EXACT" else "computed"](ctx, x, mode=mode)


define("gelu", ("x",), _gelu_infer, _gelu, attrs={"mode": Attr("str", "EXACT")},
       pointwise=True, elementwise=1)


def _clip_infer(t, attrs):
    require_dtype("clip", t, "x", FLOATS)
    if not attrs["alpha"] < attrs["beta"]:
        raise AneforgeError(f"clip: alpha={attrs['alpha']} must be < beta={attrs['beta']} "
                            f"(iOS17 clip); use maximum/minimum to clamp to a single value")
    return t["x"]


define("clip", ("x",), _clip_infer,
       elementwise(lambda x, alpha, beta: np.clip(x, np.float32(alpha), np.float32(beta))),
       attrs={"alpha": Attr("scalar"), "beta": Attr("scalar")}, pointwise=True, elementwise=1)


def _softmax_infer(t, attrs):
    require_dtype("softmax", t, "x", FLOATS)
    norm_axis("softmax", t, attrs["axis"], t["x"].rank)
    return t["x"]


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _engine_softmax(x, axis):
    # the engine subtracts the max in hardware; an inf lane (a NaN coerced at the input) minus
    # the max inf is the indeterminate +0, so that lane takes all the mass (ane-guide 03-numerics.md)
    d = x - x.max(axis=axis, keepdims=True)
    e = np.exp(np.where(np.isnan(d), np.float32(0.0), d))
    return e / e.sum(axis=axis, keepdims=True)


define("softmax", ("x",), _softmax_infer, elementwise(_softmax, _engine_softmax),
       attrs={"axis": Attr("int", -1)})


# ---- gradient rules ----------------------------------------------------------------------
_INV_SQRT_2PI = 0.3989422804014327


def _gelu_vjp(g, ins, attrs, out):
    x = ins["x"]
    if attrs["mode"] == "EXACT":               # Phi(x) + x phi(x)
        cdf = ((x * 0.7071067811865476).erf() + 1.0) * 0.5
        pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
        return {"x": g * (cdf + x * pdf)}
    if attrs["mode"] == "TANH_APPROXIMATION":
        k, c = 0.7978845608028654, 0.044715
        # Beyond |x| = 10 the derivative is 0 or 1 in fp16; clipping keeps x^3 finite there
        # (an fp16 x^3 overflows from |x| ~ 40 and 0 * inf would make the gradient NaN).
        x = x.clamp(-10.0, 10.0)
        t = ((x + x * x * x * c) * k).tanh()
        d = (t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * k * (x * x * (3 * c) + 1.0)
        return {"x": g * d}
    s = (x * 1.702).sigmoid()
    return {"x": g * (s + x * 1.702 * s * (1.0 - s))}


def _silu_vjp(g, ins, attrs, out):
    x = ins["x"]
    s = x.sigmoid()
    return {"x": g * s * (x * (1.0 - s) + 1.0)}


def _clip_vjp(g, ins, attrs, out):
    x = ins["x"]                                # torch passes the gradient on the bounds too
    inside = where(x >= attrs["alpha"], x <= attrs["beta"], x > attrs["beta"])  # else false
    return {"x": where(inside, g, zeros(g))}


def _softsign_vjp(g, ins, attrs, out):
    d = 1.0 / (ins["x"].abs() + 1.0)            # d softsign = 1 / (1 + |x|)^2
    return {"x": g * d * d}


def _softmax_vjp(g, ins, attrs, out):
    """y (g - sum(g y) / sum(y)): the sum of the fp16 y is 1 only to within its roundings, and
    dividing by it keeps softmax's exact invariance to a constant cotangent (the gradient of
    softmax(x).sum() is exactly 0, as torch's is to 1e-9, where it read 2.4e-4); the typical
    gradient's error moves from 4.28e-4 to 4.46e-4 (median over 20 random (8, 64) cases)."""
    axis = attrs["axis"]
    return {"x": out * (g - (g * out).sum(axis, keepdim=True) / out.sum(axis, keepdim=True))}


GRADIENTS = {
    "relu": lambda g, ins, a, out: {"x": where(ins["x"] > 0, g, zeros(g))},
    "sigmoid": lambda g, ins, a, out: {"x": g * out * (1.0 - out)},
    "tanh": lambda g, ins, a, out: {"x": g * (1.0 - out * out)},
    "erf": lambda g, ins, a, out: {"x": g * (ins["x"] * ins["x"] * -1.0).exp() * 1.1283791670955126},
    "silu": _silu_vjp,
    "softplus": lambda g, ins, a, out: {"x": g * ins["x"].sigmoid()},
    "softsign": _softsign_vjp,
    "gelu": _gelu_vjp,
    "clip": _clip_vjp,
    "softmax": _softmax_vjp,
}
for _name, _rule in GRADIENTS.items():
    attach(_name, _rule)


# ---- leaky_relu (what fuse_leaky_relu makes of maximum(mul(x, alpha), x)) -----------------
def _leaky_relu_infer(t, attrs):
    require_dtype("leaky_relu", t, "x", FLOATS)
    return t["x"]


define("leaky_relu", ("x",), _leaky_relu_infer,
       elementwise(lambda x, alpha: np.where(x >= 0, x, x * np.float32(alpha))),
       attrs={"alpha": Attr("scalar")}, pointwise=True, elementwise=1)
attach("leaky_relu", lambda g, ins, a, out: {"x": where(ins["x"] > 0, g, g * a["alpha"])})


# ---- prelu (what fuse_prelu makes of relu(x) - a * relu(-x)): a per-channel slope, axis 1 ---
def _prelu_infer(t, attrs):
    require_dtype("prelu", t, "x", FLOATS)
    x, a = t["x"], t["alpha"]
    if x.rank != 4 or a.shape != x.shape[1:2] or a.dtype != x.dtype:   # Core ML: rank 3 / 5
        raise shape_error("prelu", t, "x must be [N, C, H, W] and alpha [C] of its dtype "
                          "(Core ML takes rank 3 or 5 only with one alpha: use leaky_relu)")
    return x


def _channel(a, rank):
    return a.reshape((1, -1) + (1,) * (rank - 2))


define("prelu", ("x", "alpha"), _prelu_infer,
       elementwise(lambda x, alpha: np.where(x > 0, x, x * _channel(alpha, x.ndim))),
       const_inputs=frozenset({"alpha"}))
attach("prelu", lambda g, ins, a, out: {"x": where(
    ins["x"] > 0, g, g * ins["alpha"].reshape((1, -1) + (1,) * (ins["x"].ndim - 2)))})
