"""Basic indexing, x[1:3, :, None, ..., -1], as MIL slice_by_index + expand_dims."""
from __future__ import annotations

from .errors import AneforgeError, ShapeError


def _expand_ellipsis(index: tuple, rank: int) -> tuple:
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    if used > rank:
        raise ShapeError(f"too many indices ({used}) for a tensor of dimension {rank}")
    out = []
    for i in index:
        out.extend([slice(None)] * (rank - used) if i is Ellipsis else [i])
    if Ellipsis not in index:
        out.extend([slice(None)] * (rank - used))
    return tuple(out)


def getitem(x, index):
    from .tensor import Tensor, _op
    index = index if isinstance(index, tuple) else (index,)
    for i in index:
        if isinstance(i, (Tensor, list)) or hasattr(i, "__array__"):
            raise AneforgeError("indexing with tensors or lists (advanced indexing) is not "
                                "supported: the ANE has no data-dependent gather. Use a one-hot "
                                "matmul or af.where with a mask.")
        if not (i is None or i is Ellipsis or isinstance(i, (int, slice))):
            raise AneforgeError(f"unsupported index {i!r}; use ints, slices, None and ...")
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
                raise ShapeError(f"index {i} is out of bounds for dimension {axis} with size {n}")
            begin.append(i % n), end.append(i % n + 1), stride.append(1), squeeze.append(True)
        else:
            if i.step is not None and i.step <= 0:
                raise ShapeError(f"slice step must be positive, got {i.step}")
            b, e, s = i.indices(n)
            if len(range(b, e, s)) == 0:
                raise ShapeError(f"slice {i} of dimension {axis} (size {n}) is empty; the ANE has "
                                 f"no empty tensors")
            begin.append(b), end.append(e), stride.append(s), squeeze.append(False)
            out_pos += 1
        axis += 1
    if any(squeeze) or any((b, e, s) != (0, n, 1) for b, e, s, n in zip(begin, end, stride, x.shape)):
        x = _op("slice_by_index", {"x": x}, {
            "begin": tuple(begin), "end": tuple(end), "stride": tuple(stride),
            "begin_mask": (False,) * len(begin), "end_mask": (False,) * len(begin),
            "squeeze_mask": tuple(squeeze)})
    if new_axes:
        x = _op("expand_dims", {"x": x}, {"axes": tuple(new_axes)})
    return x
