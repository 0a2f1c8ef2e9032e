"""Indexing: basic (x[1:3, :, None, ..., -1]) as MIL slice_by_index + expand_dims; one integer
tensor/list index or a bool mask per expression through index_select (a one-hot select)."""
from __future__ import annotations

import numbers

import numpy as np

from .errors import AneforgeError, LimitError, ShapeError


def _is_mask(i) -> bool:
    """A bool index entry (tensor, list or array)."""
    from .tensor import Tensor
    if isinstance(i, Tensor):
        return i.dtype.name == "bool"
    return isinstance(i, (list, tuple, np.ndarray)) and np.asarray(i).dtype == bool


def _width(i) -> int:
    """Axes an index entry consumes: a bool mask as many as it has dims, others one."""
    if not _is_mask(i):
        return 1
    return i.ndim if hasattr(i, "ndim") else np.asarray(i).ndim


def _expand_ellipsis(index: tuple, rank: int) -> tuple:
    used = sum(_width(i) for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    if used > rank:
        raise IndexError(f"too many indices for tensor of dimension {rank} (got {used})")
    out = []
    for i in index:
        out.extend([slice(None)] * (rank - used) if i is Ellipsis else [i])
    if not any(i is Ellipsis for i in index):
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
    raise AneforgeError(f"unsupported index {i!r}; use ints, slices, None, ..., an integer "
                        f"tensor/list or a bool mask")


def _is_advanced(i) -> bool:
    from .tensor import Tensor
    return isinstance(i, (Tensor, list, tuple, np.ndarray))


def host_values(t):
    """The values of a tensor that is host data (an af.tensor, a realized result), else None:
    index checks use them without running anything."""
    node, k = t.ref
    return None if node.data is None else np.asarray(node.data[k])


def _as_index(i, n: int, axis: int):
    """An advanced index entry as an integer Tensor in [0, n), checked where its values are
    known on the host (lists, arrays, af.tensor data), as torch checks them."""
    from .creation import tensor
    from .tensor import Tensor
    values = host_values(i) if isinstance(i, Tensor) else np.asarray(i)
    if values is not None:
        if values.dtype == bool:
            raise AneforgeError("a bool index must be the only advanced index")   # handled earlier
        if values.dtype.kind not in "iu":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        bad = values[(values < -n) | (values >= n)]
        if bad.size:
            raise IndexError(f"index {int(bad.flat[0])} is out of bounds for dimension {axis} "
                             f"with size {n}")
        return tensor(np.where(values < 0, values + n, values).astype(np.int32))
    if i.dtype.is_float or i.dtype.name == "bool":
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    from .functions import where
    return where(i < 0, i + n, i)           # wrap negatives; no host read of computed indices


def _advanced(x, index: tuple):
    """x[..., idx, ...] with one integer tensor/list `idx` (torch: the indexed axis is replaced
    by idx's shape), or x[mask] with a bool mask (its true positions, read on the host: the
    result's shape depends on them). Built from index_select, a one-hot select and sum."""
    from .creation import tensor
    from .tensor import Tensor
    where = [k for k, i in enumerate(index) if _is_advanced(i)]
    if len(where) > 1:
        raise AneforgeError("only one tensor/list index per indexing expression is supported; "
                            "index one axis at a time, or use gather / index_select")
    k = where[0]
    entry = index[k]
    rest = index[:k] + (slice(None),) + index[k + 1:]
    axis = sum(1 for i in index[:k] if i is not None and i is not Ellipsis)
    if _is_mask(entry):
        mask = np.asarray(entry) if not isinstance(entry, Tensor) else host_values(entry)
        if mask is None:
            mask = entry.numpy()            # the result's shape depends on it: a host read
        span = x.shape[axis:axis + mask.ndim]
        if mask.shape != span:
            raise IndexError(f"The shape of the mask {mask.shape} at index {axis} does not match "
                             f"the shape of the indexed tensor {span}")
        x = x.reshape(x.shape[:axis] + (-1,) + x.shape[axis + mask.ndim:])
        picked = np.flatnonzero(mask)
        if picked.size == 0:
            raise LimitError("the mask selects nothing; the ANE has no empty tensors")
        idx, shape = tensor(picked.astype(np.int32)), (picked.size,)
    else:
        idx = _as_index(entry, x.shape[axis], axis)
        shape = idx.shape
    out = getitem(x.index_select(axis, idx.reshape(-1)), rest)
    pos = sum(1 for i in index[:k] if i is None or isinstance(i, slice))
    return out.reshape(out.shape[:pos] + shape + out.shape[pos + 1:])


def _slice(x, begin, end, stride, squeeze):
    from .tensor import record_op
    unmasked = (False,) * len(begin)
    return record_op("slice_by_index", {"x": x}, {
        "begin": tuple(begin), "end": tuple(end), "stride": tuple(stride),
        "begin_mask": unmasked, "end_mask": unmasked, "squeeze_mask": tuple(squeeze)})


def narrow(x, axis: int, start: int, stop: int):
    """x[..., start:stop, ...] on one axis (bounds checked by the caller): one slice_by_index
    recorded without parsing an index."""
    if start == 0 and stop == x.shape[axis]:
        return x
    begin, end = [0] * x.ndim, list(x.shape)
    begin[axis], end[axis] = start, stop
    return _slice(x, begin, end, (1,) * x.ndim, (False,) * x.ndim)


def getitem(x, index):
    from .tensor import record_op
    index = index if isinstance(index, tuple) else (index,)
    if any(_is_advanced(i) for i in index):
        return _advanced(x, _expand_ellipsis(tuple(i if _is_advanced(i) else _entry(i)
                                                   for i in index), x.ndim))
    index = tuple(_entry(i) for i in index)
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
        x = _slice(x, begin, end, stride, squeeze)
    if new_axes:
        x = record_op("expand_dims", {"x": x}, {"axes": tuple(new_axes)})
    return x
