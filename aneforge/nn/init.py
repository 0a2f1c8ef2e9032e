"""torch.nn.init's initializers, drawing from the generator `af.manual_seed` seeds.

Each writes a new value into the tensor (a parameter's handle stays the same) and returns it.
"""
from __future__ import annotations

import math

import numpy as np

from ..creation import generator
from .parameter import assign


def calculate_gain(nonlinearity: str, param=None) -> float:
    gains = {"linear": 1.0, "conv1d": 1.0, "conv2d": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3,
             "relu": math.sqrt(2.0), "selu": 0.75}
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity not in gains:
        raise ValueError(f"unsupported nonlinearity {nonlinearity!r}")
    return gains[nonlinearity]


def _fans(shape) -> tuple[int, int]:
    if len(shape) < 2:
        raise ValueError(f"fan in and fan out need a tensor with >= 2 dims, got shape {shape}")
    field = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * field, shape[0] * field


def uniform_(t, a: float = 0.0, b: float = 1.0):
    return assign(t, generator().uniform(a, b, t.shape))


def normal_(t, mean: float = 0.0, std: float = 1.0):
    return assign(t, generator().normal(mean, std, t.shape))


def constant_(t, val: float):
    return assign(t, np.full(t.shape, val))


def zeros_(t):
    return constant_(t, 0.0)


def ones_(t):
    return constant_(t, 1.0)


def kaiming_uniform_(t, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"):
    fan = _fans(t.shape)[0 if mode == "fan_in" else 1]
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(t, -bound, bound)


def kaiming_normal_(t, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu"):
    fan = _fans(t.shape)[0 if mode == "fan_in" else 1]
    return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan))


def xavier_uniform_(t, gain: float = 1.0):
    fan_in, fan_out = _fans(t.shape)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound)


def xavier_normal_(t, gain: float = 1.0):
    fan_in, fan_out = _fans(t.shape)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))
