"""Elementwise binary arithmetic and comparisons (MIL iOS15 elementwise_binary), and unary math."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ._common import (FLOATS, NUMERIC, broadcast, elementwise, require_dtype, require_same_dtype,
                      same_type)
from .registry import Attr, define


def _binary_infer(name, allowed, out_dtype=None):
    def infer(t, attrs):
        require_same_dtype(name, t, ("x", "y"))
        require_dtype(name, t, "x", allowed)
        return same_type(broadcast(name, t, ("x", "y")), out_dtype or t["x"].dtype)
    return infer


ARITHMETIC = {
    "add": (np.add, NUMERIC),
    "sub": (np.subtract, NUMERIC),
    "mul": (np.multiply, NUMERIC),
    "real_div": (np.true_divide, FLOATS),
    "pow": (np.power, FLOATS),
    "maximum": (np.maximum, NUMERIC),
    "minimum": (np.minimum, NUMERIC),
}
for _name, (_fn, _allowed) in ARITHMETIC.items():
    define(_name, ("x", "y"), _binary_infer(_name, _allowed), elementwise(_fn))

COMPARISONS = {
    "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal,
}
for _name, _fn in COMPARISONS.items():
    define(_name, ("x", "y"), _binary_infer(_name, NUMERIC, dtypes.bool_),
           lambda nm, x, y, _fn=_fn: _fn(x, y))

LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or,
           "logical_xor": np.logical_xor}
for _name, _fn in LOGICAL.items():
    define(_name, ("x", "y"), _binary_infer(_name, (dtypes.bool_,)),
           lambda nm, x, y, _fn=_fn: _fn(x, y))


def _unary_infer(name, allowed):
    def infer(t, attrs):
        require_dtype(name, t, "x", allowed)
        return t["x"]
    return infer


define("logical_not", ("x",), _unary_infer("logical_not", (dtypes.bool_,)),
       lambda nm, x: np.logical_not(x))


def _rsqrt(x, epsilon):
    return 1.0 / np.sqrt(x + np.float32(epsilon))


UNARY = {
    "exp": (np.exp, FLOATS, {}),
    "log": (lambda x, epsilon: np.log(x + np.float32(epsilon)), FLOATS,
            {"epsilon": Attr("scalar", 1e-45)}),
    "sqrt": (np.sqrt, FLOATS, {}),
    "rsqrt": (_rsqrt, FLOATS, {"epsilon": Attr("scalar", 1e-12)}),
    "abs": (np.abs, NUMERIC, {}),
    "sin": (np.sin, FLOATS, {}),
    "cos": (np.cos, FLOATS, {}),
}
for _name, (_fn, _allowed, _attrs) in UNARY.items():
    define(_name, ("x",), _unary_infer(_name, _allowed), elementwise(_fn), attrs=_attrs)
