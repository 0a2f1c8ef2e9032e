"""Helpers for the gradient rules written beside each op (imported lazily: rules run on Tensors,
and tensor.py imports the registry)."""
from __future__ import annotations


def op(name: str, inputs: dict, **attrs):
    from ..tensor import record_op
    return record_op(name, inputs, attrs)


def where(cond, a, b):
    return op("select", {"cond": cond, "a": a, "b": b})


def zeros(x):
    """Zeros like x as x - x: never mul(..., 0), which fails ANECCompile after a reduce."""
    return x - x


def expand_reduced(g, x, axes, keep_dims):
    """Bring a reduction's cotangent back to x's shape."""
    axes = tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)
    if not keep_dims:
        g = g.reshape(tuple(1 if i in axes else n for i, n in enumerate(x.shape)))
    return g.expand(x.shape)


def attach(name: str, vjp) -> None:
    from .registry import REGISTRY
    REGISTRY[name].vjp = vjp
