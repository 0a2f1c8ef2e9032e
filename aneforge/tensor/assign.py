"""`x[index] = value` (torch's __setitem__) on SSA programs: the handle takes a new value.

torch writes into x's storage; a program has no storage to write into, so the assignment builds
the new value and `x` (this handle) holds it from then on, as the in-place methods do. Which
elements change is decided by `index` alone, so it is worked out once on the host (numpy's
indexing rules, which torch's follow for these forms):

    host data, nothing to differentiate  -> numpy assigns into a copy (a data loader building
                                            samples, `y[len(ix)+1:] = -1`): no program at all
    otherwise                            -> where(changed, value placed, x): the value padded
                                            into place for a box of slices (a stepped slice,
                                            `pe[:, 0::2]`, is a box once its axis is split as
                                            (n / step, step)), gathered into place for any
                                            other index; gradients reach x (unchanged
                                            elements) and the value (the elements it wrote)

Other handles on the old value (torch's views, `y = x[0]` before the write) keep it: there are
no views here.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes
from ..context import CTX
from ..errors import LimitError
from ..hardware.limits import MAX_RANK
from .args import host_values
from .base import TensorBase
from .elementwise import where


def setitem(x, index, value):
    """The value of x after `x[index] = value` (torch's rules; the caller rebinds the handle).

    >>> import aneforge as af
    >>> x = af.zeros(5)
    >>> x[1:3] = 2.0
    >>> x[x > 1] = af.tensor([7.0, 8.0])
    >>> x.tolist()
    [0.0, 7.0, 8.0, 0.0, 0.0]
    """
    where_ = host_index(index)
    held = host_values(x)
    if held is not None and CTX.thread.capture is None:
        given = value if not isinstance(value, TensorBase) else host_values(value)
        if given is not None and not (CTX.thread.grad_enabled and (
                x.requires_grad or (isinstance(value, TensorBase) and value.requires_grad))):
            return _host_assigned(x, held, where_, given)
    positions = np.arange(x.numel(), dtype=np.int64).reshape(x.shape)[where_]
    if positions.size == 0:
        return x
    v = (value if isinstance(value, TensorBase) else x._as_tensor(np.asarray(value))).to(x.dtype)
    fits = _unled(v.shape, positions.ndim)
    _shaped(np.empty(fits, bool), positions.shape, x.shape, v.shape)    # torch's shape check
    v = v.reshape(fits) if fits != tuple(v.shape) else v
    changed = np.zeros(x.shape, bool)
    changed[where_] = True
    placed = _placed(x, v, where_, positions) if v.numel() > 1 else v.reshape(())
    return where(x._const(changed, dtypes.bool_), placed, x)


def _host_assigned(x, held: np.ndarray, where_: tuple, given):
    """Host data with `given` written at `where_` by numpy, as a new host leaf (a data loader's
    sample built in place: no program, ~3 us). numpy's assignment broadcasts as torch's does
    (leading 1-sized axes of the value dropped) and casts as torch's (floats into integers
    toward zero); a value that does not fit gets torch's message."""
    out = held.copy()
    try:
        out[where_] = given
    except ValueError:
        positions = np.arange(x.numel(), dtype=np.int64).reshape(x.shape)[where_]
        _shaped(np.asarray(given), positions.shape, x.shape)      # raises torch's message
        raise
    return x._held(out, x.dtype)


def index_put(x, indices, values, accumulate: bool = False):
    """torch's `x.index_put(indices, values, accumulate)`: x with `values` written (or, with
    `accumulate`, added: repeated positions add up) at the elements `indices` (a tuple of
    index tensors, as x[indices]) pick.

    >>> import aneforge as af
    >>> x = af.zeros(4)
    >>> x.index_put((af.tensor([1, 1, 3]),), af.tensor([1.0, 2.0, 5.0]), accumulate=True).tolist()
    [0.0, 3.0, 0.0, 5.0]
    """
    where_ = host_index(tuple(indices))
    if not accumulate:
        return setitem(x, where_, values)
    positions = np.arange(x.numel(), dtype=np.int64).reshape(x.shape)[where_]
    v = (values if isinstance(values, TensorBase) else x._as_tensor(np.asarray(values))).to(x.dtype)
    if np.unique(positions).size == positions.size:        # no repeats: add in place
        return setitem(x, where_, x[where_] + v.expand(*positions.shape))
    flat = positions.reshape(-1)
    if x.numel() > 65536 or flat.size > 65536:
        raise LimitError(f"index_put(accumulate=True) with repeated positions gathers over one axis "
                         f"past the ANE's 65536 ({x.numel()} elements); accumulate in parts")
    added = x.reshape(-1).scatter_add(0, x._const(flat.astype(np.int32), dtypes.int32),
                                      v.expand(*positions.shape).reshape(-1))
    return added.reshape(x.shape)


def host_index(index):
    """`index` with tensors replaced by their values (an index decides which elements change:
    a pending index tensor is read once, on the host)."""
    entries = index if isinstance(index, tuple) else (index,)
    out = []
    for i in entries:
        if isinstance(i, TensorBase):
            i = i.numpy()
        elif isinstance(i, (list, range)):
            i = np.asarray(i)
        if isinstance(i, np.ndarray) and i.dtype.kind not in "iub":
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        out.append(i)
    return tuple(out)


def _unled(shape: tuple, ndim: int) -> tuple:
    """A value's shape without the leading 1-sized axes past `ndim` (torch assigns a [1, 6]
    value into a row of 6, as numpy does)."""
    shape = tuple(shape)
    while len(shape) > ndim and shape[0] == 1:
        shape = shape[1:]
    return shape


def _shaped(value: np.ndarray, shape: tuple, x_shape: tuple, given: tuple | None = None):
    """`value` broadcast to the indexed shape, torch's error (naming the `given` shape, if the
    value was reshaped) otherwise."""
    try:
        return np.broadcast_to(value, shape)
    except ValueError:
        given = list(value.shape if given is None else given)
        raise RuntimeError(f"shape mismatch: value tensor of shape {given} cannot be "
                           f"broadcast to indexing result of shape {list(shape)} (assigning into "
                           f"a tensor of shape {list(x_shape)})") from None


def _placed(x, v, where_, positions):
    """A tensor of x's shape holding, at each assigned element, the value's element written
    there (numpy's order: a repeated position keeps the last write)."""
    box = _box(where_, x.shape)
    if box is not None and len(_view(x.shape, box[2])) <= MAX_RANK:
        return _padded(x, v.expand(*positions.shape), *box)
    if max(x.numel(), positions.size) > 65536:
        raise LimitError(
            f"x[index] = value: {_gathered(where_)} places the value by a gather over x's "
            f"{x.numel()} elements as one axis, past the ANE's 65536 per axis. Ints, slices "
            f"(any positive step; at most {MAX_RANK - x.ndim} stepped axes here) and ... place "
            f"it without a gather; else write x = af.where(mask, values of x's shape, x), or "
            f"assign in parts of at most 65536 elements (part = x[a:b]; part[...] = v; "
            f"x[a:b] = part)")
    flat = v.expand(*positions.shape).reshape(-1)
    return flat.index_select(0, x._const(_sources(positions.ravel(), x.numel()),
                                         dtypes.int32)).reshape(x.shape)


def _sources(positions: np.ndarray, n: int) -> np.ndarray:
    """For each of x's n elements, the value's entry written there (numpy's order: a repeated
    position keeps the last write). Where positions rise (a bool mask, sorted indices), an
    unchanged element reads the entry before it, which `where` then discards: the index never
    goes back, so index_select picks it in bands, not by one one-hot over every element."""
    entries = np.arange(positions.size, dtype=np.int32)
    if np.all(positions[1:] > positions[:-1]):
        held = np.full(n, -1, np.int32)
        held[positions] = entries
        return np.maximum(np.maximum.accumulate(held), 0)
    source = np.zeros(n, np.int32)
    source[positions] = entries
    return source


def _gathered(where_: tuple) -> str:
    """What in `where_` needs the gather, in the user's words."""
    kinds = {"a boolean mask" if i.dtype == bool else "an index tensor (or list)"
             for i in where_ if isinstance(i, np.ndarray)}
    if any(i is None for i in where_):
        kinds.add("a None (new axis)")
    return " and ".join(sorted(kinds)) or f"this index ({len(where_)} stepped axes)"


def _view(shape: tuple, steps: tuple) -> tuple:
    """x's shape with each axis of step s > 1 split as (ceil(n / s), s): there the elements
    b, b + s, b + 2s, ... of that axis are one run of the first part at one phase of the
    second, so a stepped slice is a box of step-1 slices (placed by a pad, no gather)."""
    return tuple(m for n, s in zip(shape, steps) for m in ((n,) if s == 1 else (-(-n // s), s)))


def _padded(x, v, begin, sizes, steps):
    """The value (of the box's shape) padded with zeros into x's shape at the (stepped) box:
    padded in the split view (_view), merged back, and cut to x's shape where a split axis was
    rounded up to a multiple of its step."""
    starts, counts = [], []
    for b, k, s in zip(begin, sizes, steps):
        starts += [b] if s == 1 else [b // s, b % s]
        counts += [k] if s == 1 else [k, 1]
    view = _view(x.shape, steps)
    widths = tuple(n for b, k, full in zip(starts, counts, view) for n in (b, full - b - k))
    floating = v.dtype.is_float
    w = (v if floating else v.to(dtypes.float32)).reshape(counts)
    padded = w._record("pad", {"x": w}, {"pad": widths, "mode": "constant", "constant_val": 0.0})
    merged = tuple(-(-n // s) * s for n, s in zip(x.shape, steps))
    out = padded.reshape(merged)
    if merged != x.shape:                      # an axis rounded up to a multiple of its step
        out = out[tuple(slice(0, n) for n in x.shape)]
    return out if floating else out.to(x.dtype)


def _box(where_: tuple, shape: tuple):
    """(begin, sizes, steps) of the box `where_` selects when it is only ints, slices with a
    positive step and Ellipsis (each axis an evenly spaced run), else None."""
    if any(i is None for i in where_):
        return None
    rest = len(shape) - sum(1 for i in where_ if i is not Ellipsis)
    entries = []
    for i in where_:
        entries.extend([slice(None)] * rest if i is Ellipsis else [i])
    entries += [slice(None)] * (len(shape) - len(entries))
    begin, sizes, steps = [], [], []
    for i, n in zip(entries, shape):
        if isinstance(i, numbers.Integral) and not isinstance(i, (bool, np.bool_)):
            begin.append(int(i) % n), sizes.append(1), steps.append(1)
        elif isinstance(i, slice) and (i.step is None or i.step > 0):
            b, e, step = i.indices(n)
            count = len(range(b, e, step))
            begin.append(b), sizes.append(count), steps.append(step if count > 1 else 1)
        else:
            return None
    return tuple(begin), tuple(sizes), tuple(steps)
