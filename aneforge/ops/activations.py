"""Activations (MIL iOS15 activation.py / elementwise_unary clip): relu, sigmoid, tanh, gelu,
silu, clip, softmax. The ANE evaluates most of these from lookup tables (facts N34-N36); the
simulator computes them in fp32 and rounds once, which is the torch-faithful reading."""
from __future__ import annotations

import numpy as np

from ..errors import AneforgeError
from ._common import FLOATS, elementwise, norm_axis, require_dtype
from .registry import Attr, define


def _float_unary(name):
    def infer(t, attrs):
        require_dtype(name, t, "x", FLOATS)
        return t["x"]
    return infer


def erf(x: np.ndarray) -> np.ndarray:
    """erf in fp32 (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7: far below one fp16 ulp)."""
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                           + t * 1.061405429))))
    return (s * (1.0 - poly * np.exp(-a * a))).astype(x.dtype)


def sigmoid(x):
    return 0.5 * (np.tanh(0.5 * x) + 1.0)      # overflow-free form of 1 / (1 + e^-x)


GELU_MODES = {
    "EXACT": lambda x: 0.5 * x * (1.0 + erf(x * np.float32(0.7071067811865476))),
    "TANH_APPROXIMATION": lambda x: 0.5 * x * (1.0 + np.tanh(
        np.float32(0.7978845608028654) * (x + np.float32(0.044715) * x * x * x))),
    "SIGMOID_APPROXIMATION": lambda x: x * sigmoid(np.float32(1.702) * x),
}


def _gelu_infer(t, attrs):
    require_dtype("gelu", t, "x", FLOATS)
    if attrs["mode"] not in GELU_MODES:
        raise AneforgeError(f"gelu: mode {attrs['mode']!r} is not one of {sorted(GELU_MODES)}")
    return t["x"]


ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": sigmoid,
    "tanh": np.tanh,
    "silu": lambda x: x * sigmoid(x),
}
for _name, _fn in ACTIVATIONS.items():
    define(_name, ("x",), _float_unary(_name), elementwise(_fn))

define("gelu", ("x",), _gelu_infer, elementwise(lambda x, mode: GELU_MODES[mode](x)),
       attrs={"mode": Attr("str", "EXACT")})


def _clip_infer(t, attrs):
    require_dtype("clip", t, "x", FLOATS)
    if not attrs["alpha"] <= attrs["beta"]:
        raise AneforgeError(f"clip: alpha={attrs['alpha']} must be <= beta={attrs['beta']}")
    return t["x"]


define("clip", ("x",), _clip_infer,
       elementwise(lambda x, alpha, beta: np.clip(x, np.float32(alpha), np.float32(beta))),
       attrs={"alpha": Attr("scalar"), "beta": Attr("scalar")})


def _softmax_infer(t, attrs):
    require_dtype("softmax", t, "x", FLOATS)
    norm_axis("softmax", t, attrs["axis"], t["x"].rank)
    return t["x"]


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


define("softmax", ("x",), _softmax_infer, elementwise(_softmax), attrs={"axis": Attr("int", -1)})
