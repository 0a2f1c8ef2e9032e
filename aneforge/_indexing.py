"""Basic indexing, x[1:3, :, None, ..., -1], as MIL slice_by_index + expand_dims."""
from __future__ import annotations

import numbers

import numpy as np

from .errors import AneforgeError, LimitError, ShapeError


def _expand_ellipsis(index: tuple, rank: int) -> tuple:
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    if used > rank:
        raise IndexError(f"too many indices for tensor of dimension {rank} (got {used})")
    out = []
    for i in index:
        out.extend([slice(None)] * (rank - used) if i is Ellipsis else [i])
    if Ellipsis not in index:
        out.extend([slice(None)] * (rank - used))
    return tuple(out)


def _entry(i):
    """One index entry as an int, slice, None or Ellipsis: numpy integers are ints and True is
    a new axis, as in torch."""
    if i is None or i is Ellipsis or isinstance(i, slice):
        return i
    if isinstance(i, (bool, np.bool_)):
        if i:
            return None
        raise LimitError("x[False] selects nothing; the ANE has no empty tensors")
    if isinstance(i, numbers.Integral):
        return int(i)
    if isinstance(i, (list, tuple)) or hasattr(i, "__array__"):
        raise AneforgeError("indexing with tensors or lists (advanced indexing) is not "
                            "supported: the ANE has no data-dependent gather. Use a one-hot "
                            "matmul or af.where with a mask.")
    raise AneforgeError(f"unsupported index {i!r}; use ints, slices, None and ...")


def getitem(x, index):
    from .tensor import record_op
    index = tuple(_entry(i) for i in (index if isinstance(index, tuple) else (index,)))
    index = _expand_ellipsis(index, x.ndim)
    begin, end, stride, squeeze, new_axes = [], [], [], [], []
    axis, out_pos = 0, 0
    for i in index:
        if i is None:
            new_axes.append(out_pos)
            out_pos += 1
            continue
        n = x.shape[axis]
        if isinstance(i, int):
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for dimension {axis} with size {n}")
            begin.append(i % n), end.append(i % n + 1), stride.append(1), squeeze.append(True)
        else:
            if i.step is not None and i.step <= 0:
                raise ShapeError(f"slice step must be positive, got {i.step}")
            b, e, s = i.indices(n)
            if len(range(b, e, s)) == 0:
                raise LimitError(f"slice {i} of dimension {axis} (size {n}) is empty; the ANE has "
                                 f"no empty tensors")
            begin.append(b), end.append(e), stride.append(s), squeeze.append(False)
            out_pos += 1
        axis += 1
    if any(squeeze) or any((b, e, s) != (0, n, 1) for b, e, s, n in zip(begin, end, stride, x.shape)):
        x = record_op("slice_by_index", {"x": x}, {
            "begin": tuple(begin), "end": tuple(end), "stride": tuple(stride),
            "begin_mask": (False,) * len(begin), "end_mask": (False,) * len(begin),
            "squeeze_mask": tuple(squeeze)})
    if new_axes:
        x = record_op("expand_dims", {"x": x}, {"axes": tuple(new_axes)})
    return x
