"""Elementwise binary arithmetic and comparisons (MIL iOS15 elementwise_binary), and unary math."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ._common import (FLOATS, NUMERIC, broadcast, elementwise, positive_zero, require_dtype,
                      require_same_dtype, same_type)
from ._grad import attach, where, zeros
from .registry import Attr, define


def _binary_infer(name, allowed, out_dtype=None):
    def infer(t, attrs):
        require_same_dtype(name, t, ("x", "y"))
        require_dtype(name, t, "x", allowed)
        return same_type(broadcast(name, t, ("x", "y")), out_dtype or t["x"].dtype)
    return infer


def _engine_div(x, y):
    # the engine divides by a zero as +0: 1/(-0) = +inf (sbryngelson/ane-guide, 03-numerics.md)
    return np.true_divide(x, positive_zero(y))


# name: (IEEE kernel, dtypes, the engine's special-value behaviour where it differs, the
# fused-VM opcodes under IEEE and engine specials: `OpDef.fused`, None for pow, whose numpy
# kernel is not one float32 operation)
ARITHMETIC = {
    "add": (np.add, NUMERIC, None, ("add", "add")),
    "sub": (np.subtract, NUMERIC, None, ("sub", "sub")),
    "mul": (np.multiply, NUMERIC, None, ("mul", "mul")),
    "real_div": (np.true_divide, FLOATS, _engine_div, ("div", "div_engine")),
    "pow": (np.power, FLOATS, None, None),
    "maximum": (np.maximum, NUMERIC, None, ("maximum", "maximum")),
    "minimum": (np.minimum, NUMERIC, None, ("minimum", "minimum")),
}
for _name, (_fn, _allowed, _engine, _fused) in ARITHMETIC.items():
    define(_name, ("x", "y"), _binary_infer(_name, _allowed), elementwise(_fn, _engine),
           elementwise=2, fused=_fused)

COMPARISONS = {
    "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal,
}
for _name, _fn in COMPARISONS.items():      # fused: an opcode of the same name, to 1.0 / 0.0
    define(_name, ("x", "y"), _binary_infer(_name, NUMERIC, dtypes.bool_),
           lambda nm, x, y, _fn=_fn: _fn(x, y), elementwise=2, fused=(_name, _name))

def _unary_infer(name, allowed):
    def infer(t, attrs):
        require_dtype(name, t, "x", allowed)
        return t["x"]
    return infer


define("logical_not", ("x",), _unary_infer("logical_not", (dtypes.bool_,)),
       lambda nm, x: np.logical_not(x), elementwise=1, fused=("logical_not", "logical_not"))


def _rsqrt(x, epsilon):
    return 1.0 / np.sqrt(x + np.float32(epsilon))


def _log(x, epsilon):
    return np.log(x + np.float32(epsilon))


LOG_ZERO = np.float32(-45440.0)    # the engine's log(+0): a finite sentinel (ane-guide 03-numerics.md)


def _engine_log(x, epsilon):
    v = x + np.float32(epsilon)
    return np.where(v == 0, LOG_ZERO, np.log(v))


# name: (IEEE kernel, dtypes, attributes, the engine's special-value behaviour where it differs:
# sqrt(-0) = +0, rsqrt(-0) = +inf, log(+0) = -45440; sbryngelson/ane-guide 03-numerics.md;
# the fused-VM opcodes under IEEE and engine specials, or None: `OpDef.fused`)
UNARY = {
    "exp": (np.exp, FLOATS, {}, None, None),
    "log": (_log, FLOATS, {"epsilon": Attr("scalar", 1e-45)}, _engine_log, None),
    "sqrt": (np.sqrt, FLOATS, {}, lambda x: positive_zero(np.sqrt(x)), ("sqrt", "sqrt_engine")),
    "rsqrt": (_rsqrt, FLOATS, {"epsilon": Attr("scalar", 1e-12)},
              lambda x, epsilon: 1.0 / positive_zero(np.sqrt(x + np.float32(epsilon))), None),
    "abs": (np.abs, NUMERIC, {}, None, ("abs", "abs")),
    "sin": (np.sin, FLOATS, {}, None, None),
    "cos": (np.cos, FLOATS, {}, None, None),
}
for _name, (_fn, _allowed, _attrs, _engine, _fused) in UNARY.items():
    define(_name, ("x",), _unary_infer(_name, _allowed), elementwise(_fn, _engine), attrs=_attrs,
           pointwise=True, elementwise=1, fused=_fused)


# ---- gradient rules: vjp(g, ins, attrs, out) -> {input name: cotangent} ------------------
def _maxmin_vjp(pick):
    # torch splits the gradient evenly on ties
    def vjp(g, ins, attrs, out):
        x, y = ins["x"], ins["y"]
        half, zero = g * 0.5, zeros(g)
        tie = x == y
        return {"x": where(pick(x, y), g, where(tie, half, zero)),
                "y": where(pick(y, x), g, where(tie, half, zero))}
    return vjp


def _pow_vjp(g, ins, attrs, out):
    # torch's pow_backward: no gradient to x where y == 0 (x ** 0 is constant, even at x = 0,
    # where y * x ** (y - 1) is 0 * inf); to y, zero only where x == 0 and y >= 0 (0 ** y is
    # flat there), otherwise out * log(x): -inf for 0 ** (y < 0), NaN for a negative base.
    # y * x ** y / x, not y * x ** (y - 1): fp16 can round y - 1 to an integer (y = -0.9995
    # gives -2), turning a negative base's NaN into a number; x ** (y - 1) where that division
    # cannot serve (x == 0, or x ** y overflowed)
    x, y = ins["x"], ins["y"]
    zero = zeros(g)
    power = where((x == 0.0) | out.isinf(), x ** (y - 1.0), out / x)
    gx = where(y == 0.0, zero, g * y * power)
    flat = where(x == 0.0, y >= 0.0, x != x)         # x == 0 and y >= 0 (x != x: false)
    return {"x": gx, "y": where(flat, zero, g * (out * x.log()))}


def _abs_vjp(g, ins, attrs, out):
    x = ins["x"]
    return {"x": where(x > 0, g, where(x < 0, -g, zeros(g)))}


GRADIENTS = {
    "add": lambda g, ins, a, out: {"x": g, "y": g},
    "sub": lambda g, ins, a, out: {"x": g, "y": -g},
    "mul": lambda g, ins, a, out: {"x": g * ins["y"], "y": g * ins["x"]},
    "real_div": lambda g, ins, a, out: {"x": g / ins["y"], "y": -(g * out) / ins["y"]},
    "pow": _pow_vjp,
    "maximum": _maxmin_vjp(lambda a, b: a > b),
    "minimum": _maxmin_vjp(lambda a, b: a < b),
    "exp": lambda g, ins, a, out: {"x": g * out},
    "log": lambda g, ins, a, out: {"x": g / (ins["x"] + a["epsilon"])},
    "sqrt": lambda g, ins, a, out: {"x": g * 0.5 / out},
    "rsqrt": lambda g, ins, a, out: {"x": g * out * out * out * -0.5},
    "abs": _abs_vjp,
    "sin": lambda g, ins, a, out: {"x": g * ins["x"].cos()},
    "cos": lambda g, ins, a, out: {"x": -(g * ins["x"].sin())},
}
for _name, _rule in GRADIENTS.items():
    attach(_name, _rule)
