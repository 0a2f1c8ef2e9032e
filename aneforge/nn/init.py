"""torch.nn.init's initializers, drawing from the generator `af.manual_seed` seeds.

Each writes a new value into the tensor (a parameter's handle stays the same) and returns it.
"""
from __future__ import annotations

import math

import numpy as np

from ..creation import generator as generator_engine
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


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    """Fill with U[a, b) samples: torch's values after the same seed (Tensor.uniform_).

    >>> import aneforge as af
    >>> w = af.nn.init.uniform_(af.zeros(2, 3), -1, 1, generator=af.Generator().manual_seed(0))
    >>> bool((w.abs() <= 1).all())
    True
    """
    return assign(tensor, generator_engine(generator).uniform(tensor.shape, a, b))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    """Fill with N(mean, std^2) samples: torch's values after the same seed (Tensor.normal_)."""
    return assign(tensor, generator_engine(generator).normal(tensor.shape, mean, std))


def constant_(t, val: float):
    return assign(t, np.full(t.shape, val))


def zeros_(t):
    return constant_(t, 0.0)


def ones_(t):
    return constant_(t, 1.0)


# The bounds are computed in torch's order of operations (std first, then sqrt(3) * std), so
# the float32 bound, and with it every drawn value, is torch's.
def kaiming_uniform_(tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None):
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None):
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    fan_in, fan_out = _fans(tensor.shape)
    bound = math.sqrt(3.0) * (gain * math.sqrt(2.0 / float(fan_in + fan_out)))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    fan_in, fan_out = _fans(tensor.shape)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _fan(tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} not supported, please use one of fan_in, fan_out")
    return _fans(tensor.shape)[0 if mode == "fan_in" else 1]
