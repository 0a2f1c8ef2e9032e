"""Argument handling shared by the Tensor families: torch's rules for `dim`, sizes and dtypes.

Nothing here records an op; these check and normalize what a method was given.
"""
from __future__ import annotations

import math
import operator
from collections import namedtuple
from typing import Sequence

import numpy as np

from .. import dtypes
from ..errors import DTypeError, ShapeError
from ..ops.registry import is_literal

minmax = namedtuple("minmax", ["values", "indices"])


class Shaped:
    """torch's shape facts of anything with a `shape` tuple (the Tensor, a high-rank view)."""
    __slots__ = ()

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[norm_dim(dim, self.ndim, "size")]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(self.shape)


def norm_dim(dim, ndim: int, op: str = "") -> int:
    """`dim` as an axis in [0, ndim), checked as torch checks it (a 0-d tensor takes 0 or -1).

    >>> norm_dim(-1, 3), norm_dim(2, 3)
    (2, 2)
    >>> norm_dim(3, 2)
    Traceback (most recent call last):
    ...
    IndexError: Dimension out of range (expected to be in range of [-2, 1], but got 3)
    """
    try:
        d = operator.index(dim)
    except TypeError:
        raise TypeError(f"{op + '(): ' if op else ''}argument 'dim' must be int, not "
                        f"{type(dim).__name__}") from None
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {d})")
    return d % n if ndim else 0


def _dim_or_axis(dim, axis, name: str, required: bool = False):
    """torch's `axis=` alias of `dim` (numpy's spelling)."""
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{name}(): give dim or axis, not both")
        return axis
    if required and dim is None:
        raise TypeError(f"{name}() missing required argument 'dim'")
    return dim


def _sizes(args) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    out = []
    for pos, a in enumerate(args):
        try:
            out.append(operator.index(a))
        except TypeError:
            raise TypeError(f"size must be a tuple of ints, but found element of type "
                            f"{type(a).__name__} at pos {pos}") from None
    return tuple(out)


def _infer_size(shape: Sequence[int], numel: int, old) -> tuple[int, ...]:
    if list(shape).count(-1) > 1:
        raise ShapeError(f"reshape: only one dimension can be -1, got {tuple(shape)}")
    known = math.prod([s for s in shape if s != -1])
    if -1 in shape:
        if known == 0 or numel % known:
            raise ShapeError(f"reshape: shape {tuple(shape)} is invalid for input of size {numel} "
                             f"(shape {old})")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if math.prod(shape) != numel:
        raise ShapeError(f"reshape: shape {tuple(shape)} is invalid for input of size {numel} "
                         f"(shape {old})")
    return tuple(shape)


def _need_float(x: Tensor, op: str) -> Tensor:
    """torch computes these only in floating point (softmax of an int tensor is an error)."""
    if not x.dtype.is_float:
        raise DTypeError(f"{op}() needs a floating tensor, got {x.dtype}; use .float() or "
                         f".half() first")
    return x


def _same_kind(op: str, a: Tensor, b: Tensor) -> None:
    """torch's matmul takes one dtype: int @ float and bool operands are errors there."""
    if a.dtype == dtypes.bool_ or b.dtype == dtypes.bool_ or a.dtype.is_float != b.dtype.is_float:
        raise DTypeError(f"{op}: expected both operands to be floating (or both integer), got "
                         f"{a.dtype} and {b.dtype}; cast with .half() first")


def empty_of(x, shape: tuple) -> Tensor:
    """An empty tensor (a size-0 axis) of `shape` and x's dtype: a host value, as every empty
    tensor is (aneforge.core.empty; the ANE has none)."""
    return x._as_tensor(np.empty(shape, x.dtype.np))


def host_values(t):
    """The values of a tensor that is host data (an af.tensor, a realized result), else None:
    index checks use them without running anything."""
    node, k = t.ref
    return None if node.data is None else np.asarray(node.data[k])


def known_values(t):
    """host_values, or the value of a literal (a constant recorded from host data), else None."""
    node, k = t.ref
    if node.data is not None:
        return np.asarray(node.data[k])
    return np.asarray(node.attrs["val"]) if is_literal(node.op) else None


def index_entries(index) -> tuple:
    """An index's entries, as torch reads them: a tuple as is, a list holding a sequence, a
    slice, a tensor, None or Ellipsis as a tuple of entries (torch's older rule, still applied:
    `x[[[0]]]` is `x[[0]]`), anything else as one entry."""
    if type(index) is list and len(index) < 32 and any(
            isinstance(i, (list, tuple, slice)) or hasattr(i, "shape") or i is None or
            i is Ellipsis for i in index):
        return tuple(index)
    return index if isinstance(index, tuple) else (index,)
