"""torch-named functions over tensors: af.cat, af.stack, af.where, af.matmul, af.exp, ..."""
from __future__ import annotations

import numbers
from typing import Sequence

import numpy as np

from . import dtypes
from .errors import AneforgeError
from .tensor import Tensor, const, operands, record_op


def _as_tensors(tensors: Sequence) -> list[Tensor]:
    tensors = list(tensors)
    if not tensors:
        raise AneforgeError("expected a non-empty sequence of tensors")
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = dtypes.promote(dt, t.dtype)
    return [t.to(dt) for t in tensors]


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate along `dim` (MIL concat).

    >>> import aneforge as af
    >>> af.cat([af.ones(2, 1), af.zeros(2, 2)], dim=1).shape
    (2, 3)
    """
    tensors = _as_tensors(tensors)
    if len(tensors) == 1:
        return tensors[0]
    return record_op("concat", {"values": tuple(tensors)}, {"axis": dim})


concat = concatenate = cat


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join along a new axis `dim` (expand_dims each, then concat)."""
    tensors = _as_tensors(tensors)
    return cat([t.unsqueeze(dim % (t.ndim + 1)) for t in tensors], dim=dim % (tensors[0].ndim + 1))


def where(condition: Tensor, input, other) -> Tensor:
    """Elementwise `input` where `condition` is true, else `other` (MIL select).

    >>> import aneforge as af
    >>> x = af.tensor([-1.0, 2.0])
    >>> af.where(x > 0, x, 0.0).tolist()
    [0.0, 2.0]
    """
    if condition.dtype != dtypes.bool_:
        raise AneforgeError(f"where: condition must be a bool tensor, got {condition.dtype}; "
                            f"compare first, e.g. x > 0")
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        dt = _scalars_dtype(input, other)
        a, b = const(input, dt), const(other, dt)
    elif not isinstance(input, Tensor):
        b, a = operands(other, input)
    else:
        a, b = operands(input, other)
    shape = np.broadcast_shapes(condition.shape, a.shape, b.shape)
    if np.broadcast_shapes(a.shape, b.shape) != shape:
        a = a.expand(shape)                 # Core ML types select as broadcast(a, b) alone
    return record_op("select", {"cond": condition, "a": a, "b": b}, {})


def _scalars_dtype(*values) -> dtypes.DType:
    """torch's dtype for Python numbers alone: bool, else int (int32 here), else float16."""
    if all(isinstance(v, bool) for v in values):
        return dtypes.bool_
    if all(isinstance(v, numbers.Integral) for v in values):
        return dtypes.int32
    return dtypes.float16


def matmul(input: Tensor, other: Tensor) -> Tensor:
    return input.matmul(other)


def maximum(input: Tensor, other) -> Tensor:
    return input.maximum(other)


def minimum(input: Tensor, other) -> Tensor:
    return input.minimum(other)


def clamp(input: Tensor, min=None, max=None) -> Tensor:
    return input.clamp(min, max)


clip = clamp


def split(tensor: Tensor, split_size_or_sections, dim: int = 0):
    return tensor.split(split_size_or_sections, dim)


def chunk(input: Tensor, chunks: int, dim: int = 0):
    return input.chunk(chunks, dim)


def _method(name: str):
    def fn(input: Tensor, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"af.{name}(x, ...) is x.{name}(...)."
    return fn


_METHODS = ("exp log sqrt rsqrt abs relu sigmoid tanh sin cos neg sum mean amax amin max min "
            "argmax argmin softmax log_softmax reshape flatten permute transpose t unsqueeze "
            "squeeze pow square reciprocal").split()
globals().update({name: _method(name) for name in _METHODS})
__all__ = ["cat", "concat", "stack", "where", "matmul", "maximum", "minimum", "clamp", "clip",
           "split", "chunk", *_METHODS]
