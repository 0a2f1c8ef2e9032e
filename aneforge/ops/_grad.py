"""Helpers for the gradient rules written beside each op.

Rules build their results from the Tensors they are given: Tensor methods, and `op` / `const`
below, which record through one of those Tensors. So the rules never import aneforge.tensor, which
sits above the op definitions (docs/architecture.md, "Layers")."""
from __future__ import annotations

import numpy as np

from .registry import REGISTRY


def op(name: str, inputs: dict, **attrs):
    """Record op `name` on `inputs` (argument name -> Tensor, or a sequence for a variadic one)."""
    like = next(t for v in inputs.values() if v is not None
                for t in (v if isinstance(v, (tuple, list)) else (v,)))
    return like._record(name, inputs, attrs)


def const(value, like):
    """A literal of `like`'s dtype baked into the program (a const op)."""
    return like._record("const", {}, {"val": np.asarray(value, dtype=like.dtype.np)})


def where(cond, a, b):
    return op("select", {"cond": cond, "a": a, "b": b})


def zeros(x):
    """Zeros of x's shape and dtype (false for bool), built from x: the one way aneforge makes
    zeros inside a program. x - x, never mul(x, 0): mul(reduce(...), 0) fails ANECCompile
    (a measured compiler rejection; `ops/walls.py` refuses it in the simulator too)."""
    if x.dtype.name == "bool":
        return x & False
    return x - x


def zero_link(x):
    """Zeros that carry a zero gradient back to x (torch's gradient of a value that does not
    depend on x): zeros of x clipped to the finite range (inf - inf would be NaN)."""
    big = float(np.finfo(x.dtype.np).max)
    return zeros(x.clamp(-big, big))


def expand_reduced(g, x, axes, keep_dims):
    """Bring a reduction's cotangent back to x's shape."""
    axes = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    if not keep_dims:
        g = g.reshape(tuple(1 if i in axes else n for i, n in enumerate(x.shape)))
    return g.expand(x.shape)


def attach(name: str, vjp) -> None:
    REGISTRY[name].vjp = vjp
