"""Indexing: basic (x[1:3, :, None, ..., -1]) as MIL slice_by_index + expand_dims; integer
tensor/list indices (several broadcast together, as torch) or a bool mask through index_select
(a one-hot select)."""
from __future__ import annotations

import numbers
import operator

import numpy as np

from .. import dtypes
from ..context import CTX
from ..core import empty
from ..errors import AneforgeError, DTypeError, LimitError, ShapeError
from .args import empty_of, host_values, index_entries, known_values, norm_dim
from .assign import host_index, index_put, setitem
from . import highrank
from .base import TensorBase
from .elementwise import where


def _is_mask(i) -> bool:
    """A bool index entry (tensor, list or array)."""
    if isinstance(i, TensorBase):
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
    if isinstance(i, (bool, np.bool_)):      # False: a new axis of size 0 (getitem)
        return None
    if isinstance(i, numbers.Integral):
        return int(i)
    raise AneforgeError(f"unsupported index {i!r}; use ints, slices, None, ..., an integer "
                        f"tensor/list or a bool mask")


def _is_advanced(i) -> bool:
    return isinstance(i, (TensorBase, list, tuple, range, np.ndarray))    # torch: range too


def _as_index(x, i, n: int, axis: int):
    """An advanced index entry as an integer Tensor in [0, n), checked where its values are
    known on the host (lists, arrays, af.tensor data), as torch checks them."""
    values = host_values(i) if isinstance(i, TensorBase) else np.asarray(i)
    if values is not None:
        return x._as_tensor(_host_index(values, n, axis))
    if i.dtype.is_float or i.dtype.name == "bool":
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    return where(i < 0, i + n, i)           # wrap negatives; no host read of computed indices


# the ufuncs' reductions called directly: `a.min()` goes through numpy's Python wrapper
# first (~1 us a call; `_host_index` checks every host index, each step of an eager loop)
_MIN, _MAX = np.minimum.reduce, np.maximum.reduce


def _host_index(values: np.ndarray, n: int, axis: int) -> np.ndarray:
    """Host index values into an axis of length n, checked as torch checks them and with
    negatives wrapped (int32)."""
    if values.dtype == bool:
        raise AneforgeError("a bool index must be the only advanced index")   # handled earlier
    if values.dtype.kind not in "iu":
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if not values.size or 0 <= _MIN(values, None) and _MAX(values, None) < n:
        return values.astype(np.int32)               # (the common case: two reductions)
    bad = values[(values < -n) | (values >= n)]
    if bad.size:
        raise IndexError(f"index {int(bad.flat[0])} is out of bounds for dimension {axis} "
                         f"with size {n}")
    return np.where(values < 0, values + n, values).astype(np.int32)


def _picked(x, entry, axis: int):
    """x[idx] on `axis` (every other axis whole) for an index known on the host, outside
    af.compile's capture: what `_advanced` records, with the index made once in its final
    shape (one host leaf, not three leaves, a reshape and a tile: an eager loop's `X[ix]`
    and `C[X[ix]]` every step). None where `_advanced`'s general route applies (a mask, a
    computed or empty index, indices picked in bands)."""
    values = host_values(entry) if isinstance(entry, TensorBase) else np.asarray(entry)
    if values is None or _is_mask(entry) or not values.size:
        return None
    known = _host_index(values, x.shape[axis], axis)
    held = _host_pick(x, axis, known)          # np.take: x.shape[:axis] + idx + the rest
    if held is not None:
        return held
    flat = known.reshape(-1)
    if _banded(flat, x.shape[axis]):
        return None
    view = tuple(flat.size if a == axis else 1 for a in range(x.ndim))
    spread = tuple(flat.size if a == axis else s for a, s in enumerate(x.shape))
    spread_index = np.empty(spread, np.int32)
    spread_index[...] = flat.reshape(view)             # (np.broadcast_to costs ~5 us more)
    index = x._held(spread_index, dtypes.int32)
    shape = x.shape[:axis] + known.shape + x.shape[axis + 1:]
    # the gather and its reshape as one kept recording (the gather's own is taken inside it):
    # the same nodes, re-recorded without the reshape's argument handling each step (~1% of
    # the makemore step's time went to the reshape of `C[X[ix]]`)
    return x._kept(("picked", axis, shape), [x, index],
                   lambda: x.gather(axis, index).reshape(shape))


def _advanced(x, index: tuple):
    """x[..., idx, ...] with one integer tensor/list `idx` (torch: the indexed axis is replaced
    by idx's shape), or x[mask] with a bool mask (its true positions, read on the host: the
    result's shape depends on them). Built from index_select, a one-hot select and sum."""
    advanced = [k for k, i in enumerate(index) if _is_advanced(i)]
    if len(advanced) > 1:
        return _several(x, index, advanced)
    k = advanced[0]
    entry = index[k]
    rest = index[:k] + (slice(None),) + index[k + 1:]
    axis = sum(1 for i in index[:k] if i is not None and i is not Ellipsis)
    if CTX.thread.capture is None and all(i == _WHOLE for i in rest):
        out = _picked(x, entry, axis)
        if out is not None:
            return out
    if _is_mask(entry):
        mask = entry if isinstance(entry, TensorBase) else np.asarray(entry)
        span = x.shape[axis:axis + mask.ndim]
        if tuple(mask.shape) != span:
            raise IndexError(f"The shape of the mask {tuple(mask.shape)} at index {axis} does "
                             f"not match the shape of the indexed tensor {span}")
        x = x.reshape(x.shape[:axis] + (-1,) + x.shape[axis + mask.ndim:])
        idx = _true_positions(x, mask, "x[mask]")
        if not idx.numel():                       # nothing selected: an empty tensor
            return getitem(empty_of(x, x.shape[:axis] + (0,) + x.shape[axis + 1:]), rest)
        shape = idx.shape
    else:
        idx = _as_index(x, entry, x.shape[axis], axis)
        shape = idx.shape
    # host indices stay host data (no reshape recorded), but not inside af.compile's capture,
    # which replays only the leaves it knows how to make again
    known = host_values(idx) if CTX.thread.capture is None else None
    flat = idx.reshape(-1) if known is None else known.reshape(-1)
    out = getitem(x.index_select(axis, flat), rest)
    pos = sum(1 for i in index[:k] if i is None or isinstance(i, slice))
    return out.reshape(out.shape[:pos] + shape + out.shape[pos + 1:])


_WHOLE = slice(None)

# A one-hot select costs (entries picked) x (axis length) cells; past this a host index that
# never goes back (a bool mask's positions, a sorted index) is picked in bands (_in_bands).
_BANDED_CELLS = 1 << 22
_BANDS = 64              # at most this many bands (each is a slice, a one-hot and a sum) ...
_BAND = 256              # ... of at least this many entries


def _banded(known: np.ndarray, n: int) -> bool:
    """Whether host indices `known` into an axis of length n are picked in bands: the one-hot
    would be large and the indices never go back."""
    flat = known.reshape(-1)
    return flat.size * n > _BANDED_CELLS and bool(np.all(flat[1:] >= flat[:-1]))


def _selected(x, d: int, index):
    """x's entries at `index` (1-D) along axis d: a one-hot select and sum (gather)."""
    k = index.reshape(-1).shape[0]
    view = tuple(k if a == d else 1 for a in range(x.ndim))
    shape = tuple(k if a == d else s for a, s in enumerate(x.shape))
    return x.gather(d, index.reshape(view).expand(shape))


def _in_bands(x, d: int, known: np.ndarray, index_of):
    """x.index_select(d, known) for host indices that never go back, in bands of consecutive
    entries: a band of m entries spanning [lo, hi) of the axis is a one-hot of m x (hi - lo)
    over x[lo:hi], and the spans of a strictly rising index do not overlap, so the bands cost
    at most (band size) x (axis length) cells, not (entries) x (axis length): a bool mask over
    45,000 elements picks in ~30M cells, not ~2G. The same single nonzero term per output
    is summed, so the values are those of the one-hot over the whole axis. `index_of` makes a
    band's index tensor (host data, or a literal where the whole index was one)."""
    per = max(_BAND, -(-known.size // _BANDS))
    parts = []
    for a in range(0, known.size, per):
        band = known[a:a + per]
        lo, hi = int(band[0]), int(band[-1]) + 1
        parts.append(_selected(narrow(x, d, lo, hi), d, index_of((band - lo).astype(np.int32))))
    if len(parts) == 1:
        return parts[0]
    return parts[0]._record("concat", {"values": tuple(parts)}, {"axis": d})


def _host_pick(x, d: int, known):
    """x's entries at host indices `known` along axis d, picked on the host when x is integer
    or bool host data (an exact pick either way; the one-hot select it saves is the largest
    part of an eager loop's `X[ix]`): a new host leaf, else None. Not for floats, whose
    one-hot sum runs through the engine's matmul (subnormals flush there), nor inside
    af.compile's capture, whose replays feed new values."""
    held = None if x.dtype.is_float or known is None else host_values(x)
    if held is None or CTX.thread.capture is not None:
        return None
    return x._held(held.take(known, axis=d), x.dtype)


def _several(x, index: tuple, advanced: list):
    """x[i0, :, i1] with several integer tensors/lists, torch's rule: the indices broadcast to
    one shape B and pick x[i0[b], :, i1[b]]; B replaces the indexed axes where they are
    adjacent in the index, else it comes first. The indexed axes are moved first and merged,
    so one index_select with the flat index picks every entry.

    >>> import aneforge as af
    >>> x = af.tensor([[1, 2, 3], [4, 5, 6]])
    >>> x[af.tensor([1, 0]), af.tensor([[2], [0]])].tolist()
    [[6, 3], [4, 1]]
    """
    if any(_is_mask(index[k]) for k in advanced):
        raise AneforgeError("a bool mask must be the only tensor/list index in an expression; "
                            "apply it separately, or turn it into integer indices with "
                            ".nonzero(as_tuple=True)")
    y = getitem(x, tuple(slice(None) if k in advanced else i for k, i in enumerate(index)))
    axes = [sum(1 for i in index[:k] if not isinstance(i, int)) for k in advanced]
    sizes = [y.shape[a] for a in axes]
    idx = [_as_index(y, index[k], n, a) for k, n, a in zip(advanced, sizes, axes)]
    try:
        shape = tuple(np.broadcast_shapes(*(tuple(i.shape) for i in idx)))
    except ValueError:
        raise IndexError(f"shape mismatch: indexing tensors could not be broadcast together "
                         f"with shapes {[tuple(i.shape) for i in idx]}") from None
    rest = [a for a in range(y.ndim) if a not in axes]
    merged = y.permute(*axes, *rest).reshape(-1, *[y.shape[a] for a in rest])
    strides = np.cumprod([1] + sizes[:0:-1])[::-1]
    known = [host_values(i) for i in idx]
    if all(v is not None for v in known):      # the flat index on the host: no int arithmetic
        flat = x._as_tensor(sum(np.broadcast_to(v, shape) * int(s) for v, s in zip(known, strides))
                            .astype(np.int32))
    else:
        flat = sum(i.expand(*shape) * int(s) for i, s in zip(idx, strides))
    out = merged.index_select(0, flat.reshape(-1)).reshape(*shape, *merged.shape[1:])
    between = index[advanced[0]:advanced[-1] + 1]      # ints do not part them (torch's rule)
    if not all(isinstance(i, int) or _is_advanced(i) for i in between):
        return out                                     # apart: B first, as torch
    first = axes[0]
    order = list(range(len(shape), len(shape) + first)) + list(range(len(shape)))
    return out.permute(*order, *range(len(shape) + first, out.ndim))


_DATA_SHAPE = "its result's shape depends on the values of {}"


def _flat_true(mask) -> list:
    return [np.flatnonzero(mask).astype(np.int32)]


def _true_positions(x, mask, name: str):
    """The flat positions of `mask`'s true entries (int32, 1-D): computed on the host, a host
    segment if the mask is computed (its count is the result's shape)."""
    values = host_values(mask) if isinstance(mask, TensorBase) else np.asarray(mask)
    if values is not None:
        return x._as_tensor(_flat_true(values)[0])     # empty when nothing is selected
    if mask.dtype.name != "bool":
        raise DTypeError(f"{name}: the mask must be a bool tensor, got {mask.dtype.name}; "
                         f"compare first (x > 0)")
    return x._host(name, _DATA_SHAPE.format("the mask"), _flat_true, (mask,), (dtypes.int32,))[0]


def _as_mask(x, mask, name: str):
    """`mask` as a bool tensor broadcast with x, and x broadcast with it (torch's rule for
    masked_select / masked_scatter)."""
    mask = x._as_tensor(mask)
    if mask.dtype.name != "bool":
        raise DTypeError(f"{name}: expected a bool mask, got {mask.dtype.name}; compare first "
                         f"(x > 0) or call .bool()")
    try:
        shape = np.broadcast_shapes(x.shape, mask.shape)
    except ValueError:
        raise ShapeError(f"{name}: the mask's shape {mask.shape} does not broadcast with the "
                         f"input's {x.shape}") from None
    return x.expand(*shape) if x.shape != shape else x, \
        mask.expand(*shape) if mask.shape != shape else mask


def _slice(x, begin, end, stride, squeeze):
    unmasked = (False,) * len(begin)
    return x._record("slice_by_index", {"x": x}, {
        "begin": tuple(begin), "end": tuple(end), "stride": tuple(stride),
        "begin_mask": unmasked, "end_mask": unmasked, "squeeze_mask": tuple(squeeze)})


def _on_host(x, index: tuple) -> bool:
    """Whether x[index] reads host data past 65536 (x, or an index tensor: `data[ix]`, `C[X]`)
    without a gradient to keep: then numpy indexes it, as no program can hold it."""
    big = x._host_data() is not None or any(
        isinstance(i, TensorBase) and i._host_data() is not None for i in index)
    if big and x.requires_grad and CTX.thread.grad_enabled:
        raise LimitError(f"x[index]: the index or x (shape {x.shape}) is host data past 65536 on "
                         f"an axis, which no ANE program holds, and x needs a gradient: index a "
                         f"batch out of the large data first (X[ix], then C[X[ix]]), or compute "
                         f"under no_grad")
    return big


def _picked_on_host(x, index: tuple) -> tuple | None:
    """`index` with numbers for its slices' bounds, when x[index] is data in hand indexed by
    numbers and slices, needing no gradient, outside af.compile's capture and a kept
    recording (af.export's trace too), and moving its elements unchanged (a float slice with a nonzero begin on the
    last axis goes through the width crop's gain on the engine: recorded); else None. Then
    numpy picks it, exactly, as a leaf. A dataset's `self.ixes[idx]` (minGPT's adder) or
    `self.X[i]` recorded a slice per sample: each on the step's tape with its own bounds, so
    no two steps' tapes matched and every step walked its trace (core/trace.py `Tape`), and
    `self.X[i]` was a program per sample."""
    if x._node.data is None or x.requires_grad or not empty.on_host_now():
        return None                   # (af.compile's capture, af.export's trace: recorded)
    out = []
    for i in index:
        if isinstance(i, slice):
            try:
                i = slice(*(None if v is None else operator.index(v)
                            for v in (i.start, i.stop, i.step)))
            except TypeError:
                return None
            if i.step is not None and i.step < 1:       # the recorded route's error
                return None
        elif not (i is None or i is Ellipsis or
                  (isinstance(i, numbers.Integral) and not isinstance(i, bool))):
            return None
        out.append(i)
    out = tuple(out)
    return out if not x.dtype.is_float or _keeps_width(x.shape, out) else None


def _keeps_width(shape: tuple, index: tuple) -> bool:
    """Whether basic `index` leaves the last axis whole, takes one element of it, or slices it
    from 0: no crop of the width (`ops/shape.py` `_width_crop`)."""
    taking = [i for i in index if i is not None]
    if not shape or not taking or taking[-1] is Ellipsis or \
            (Ellipsis not in taking and len(taking) < len(shape)):
        return True                  # the last axis whole
    last = taking[-1]
    return not isinstance(last, slice) or last.indices(shape[-1])[0] == 0


def narrow(x, axis: int, start: int, stop: int):
    """x[..., start:stop, ...] on one axis (bounds checked by the caller): one slice_by_index
    recorded without parsing an index."""
    if start == 0 and stop == x.shape[axis]:
        return x
    begin, end = [0] * x.ndim, list(x.shape)
    begin[axis], end[axis] = start, stop
    return _slice(x, begin, end, (1,) * x.ndim, (False,) * x.ndim)


def getitem(x, index):
    if isinstance(index, TensorBase) and x.ndim and CTX.thread.capture is None:
        out = _one_tensor(x, index)
        if out is not None:
            return out
    index = index_entries(index)
    if any(isinstance(i, highrank.HighRank) for i in index):     # a rank > 5 index tensor
        return highrank.index(x, index)
    if _on_host(x, index):                 # a dataset past 65536: numpy's indexing (exact)
        data = x._host_data()
        data = x.numpy() if data is None else data
        picked = np.array(data[host_index(index)])       # a copy: programs read it later
        return x._held(picked, x.dtype) if picked.dtype == x.dtype.np else x._as_tensor(picked)
    picked = _picked_on_host(x, index)
    if picked is not None:
        try:
            return x._held(np.array(x._node.data[x._idx][picked]), x.dtype)
        except IndexError:                    # out of range: the recorded route's message
            pass
    if any(_is_bool(i) for i in index):
        return _scalar_bools(x, index)
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
            begin.append(b), end.append(e), stride.append(s), squeeze.append(False)
            out_pos += 1
        axis += 1
    if any(squeeze) or any((b, e, s) != (0, n, 1) for b, e, s, n in zip(begin, end, stride, x.shape)):
        x = _slice(x, begin, end, stride, squeeze)
    if new_axes:
        x = x._record("expand_dims", {"x": x}, {"axes": tuple(new_axes)})
    return x


def _one_tensor(x, index):
    """x[t] for one integer tensor t known on the host, outside af.compile's capture: what
    the general route below ends in (`_advanced`'s `_picked`, every other axis whole), without
    its dispatch over index kinds (~10 us a call of the ~60 us each of an eager loop's
    `X[ix]`, `C[X[ix]]` and `Y[ix]` took, each step). None where that route does otherwise
    (a mask, host data past 65536, a computed or empty index)."""
    if index.dtype is dtypes.bool_ or _on_host(x, (index,)):
        return None
    return _picked(x, index, 0)


def _is_bool(i) -> bool:
    return isinstance(i, (bool, np.bool_))


def _scalar_bools(x, index: tuple):
    """x[..., True/False, ...], torch's rule: the bool scalars together add one axis, of size 1
    if all are True, else 0 (an empty tensor), where they stand if adjacent, else first."""
    if any(_is_advanced(i) for i in index):
        raise AneforgeError("a True/False index with a tensor/list index in one expression is "
                            "not supported; index in two steps")
    at = [k for k, i in enumerate(index) if _is_bool(i)]
    rest = tuple(i for i in index if not _is_bool(i))
    first = at[0] if at == list(range(at[0], at[-1] + 1)) else 0
    out = getitem(x, rest[:first] + (None,) + rest[first:])
    if all(index[k] for k in at):
        return out
    spread = x.ndim - sum(1 for i in rest if i is not None and i is not Ellipsis)
    pos = sum(spread if i is Ellipsis else int(not isinstance(i, numbers.Integral))
              for i in rest[:first])
    return narrow(out, pos, 0, 0)


def _grown(t, widths, value: float):
    """Float t padded with `value` by (before, after) per axis (MIL pad: exact; indices and
    ints below 2**24 ride in float32 exactly)."""
    flat = tuple(n for pair in widths for n in pair)
    return t._record("pad", {"x": t}, {"pad": flat, "mode": "constant", "constant_val": value})


_SCATTER_REDUCE = {"add": "sum", "multiply": "prod"}     # scatter(reduce=) -> scatter_reduce


class IndexingMixin(TensorBase):
    """x[...], gather, index_select, scatter: one-hot selects and sums."""
    __slots__ = ()

    def _onehot_along(self, dim: int, index: "Tensor"):
        """self and index with `dim` moved last, and the mask [..., k, n]: index == j."""
        if index.dtype.is_float or index.dtype == dtypes.bool_:
            raise DTypeError(f"index must be an integer tensor, got {index.dtype}")
        if index.ndim != self.ndim:
            raise ShapeError(f"index needs as many dims as the tensor ({self.ndim}), got shape "
                             f"{index.shape}")
        d = dim % self.ndim
        x, idx = self.movedim(d, -1), index.movedim(d, -1)
        mask = idx.unsqueeze(-1) == self._const(np.arange(x.shape[-1]), idx.dtype)
        return d, x, idx, mask

    def gather(self, dim: int, index: "Tensor") -> "Tensor":
        """out[i][j] = self[i][index[i][j]] along `dim`: a one-hot select and sum over the
        axis (exact; no dynamic gather on the ANE).

        >>> import aneforge as af
        >>> af.gather(af.tensor([[1, 2], [3, 4]]), 1, af.tensor([[1, 1], [0, 1]])).tolist()
        [[2, 2], [3, 4]]
        """
        # a function of its inputs' values: recorded once per kind, then re-recorded
        return self._kept(("gather", dim), [self, index], lambda: self._gather(dim, index))

    def _gather(self, dim: int, index: "Tensor") -> "Tensor":
        d, x, idx, mask = self._onehot_along(dim, index)
        x = x[tuple(slice(0, k) for k in idx.shape[:-1])]             # index may be smaller
        x = x.int() if x.dtype == dtypes.bool_ else x
        picked = where(mask, x.unsqueeze(-2), 0).sum(-1)    # a 0 fill: x - x is NaN at inf
        picked = picked.to(self.dtype) if self.dtype == dtypes.bool_ else picked
        return picked.movedim(-1, d)

    def index_select(self, dim: int, index) -> "Tensor":
        """The entries at `index` (a 1-D integer tensor or list) along `dim`: a one-hot select
        and sum (exact; the ANE has no dynamic gather). Indices known on the host are checked.

        >>> import aneforge as af
        >>> af.tensor([[1, 2], [3, 4], [5, 6]]).index_select(0, af.tensor([2, 0])).tolist()
        [[5, 6], [1, 2]]
        """
        if not isinstance(index, TensorBase):
            index = self._as_tensor(np.asarray(index, dtype=np.int32))
        if index.ndim > 1:
            raise IndexError("index_select(): Index is supposed to be a vector")
        d = norm_dim(dim, self.ndim, "index_select")
        n = self.shape[d] if self.ndim else 1
        known = known_values(index)
        if known is not None and known.size and (known.min() < 0 or known.max() >= n):
            raise IndexError(f"index_select(): index {int(known[(known < 0) | (known >= n)][0])} "
                             f"is out of range for dimension {d} of size {n}")
        if self.ndim == 0:
            if index.numel() != 1:
                raise IndexError(f"index_select(): Index to scalar can have only 1 value, got "
                                 f"{index.numel()} value(s)")
            return self
        held = _host_pick(self, d, known)
        if held is not None:
            return held
        if known is not None and _banded(known, n):
            leaf = host_values(index) is not None      # else a literal: its bands are too
            return _in_bands(self, d, known.reshape(-1), self._as_tensor if leaf else
                             lambda a: self._const(a, dtypes.int32))
        return _selected(self, d, index)

    def _scattered(self, dim: int, index: "Tensor", src):
        d, x, idx, mask = self._onehot_along(dim, index)
        if any(k > n for k, n in zip(idx.shape[:-1], x.shape[:-1])):
            raise ShapeError(f"scatter: index {index.shape} may not be larger than the tensor "
                             f"{self.shape} on any axis but dim {dim}")
        if isinstance(src, TensorBase):
            src = src.to(self.dtype).movedim(d, -1)[tuple(slice(0, k) for k in idx.shape)]
        else:
            src = self._const(src, self.dtype).expand(idx.shape)
        if idx.shape[:-1] != x.shape[:-1]:      # a smaller index (torch allows it) writes nothing
            grow = [(0, n - k) for k, n in zip(idx.shape[:-1], x.shape[:-1])] + [(0, 0)]
            wide = _grown(idx.to(dtypes.float32), grow, -1.0)          # -1 matches no place
            mask = wide.unsqueeze(-1) == self._const(np.arange(x.shape[-1]), dtypes.float32)
            src = _grown(src.to(dtypes.float32), grow, 0.0).to(self.dtype)
        return d, x, mask, src.unsqueeze(-1)                          # src: [..., k, 1]

    def scatter(self, dim: int, index: "Tensor", src=None, value=None, reduce=None) -> "Tensor":
        """A copy with self[index[i][j]][j] = src[i][j] along `dim` (`src` a tensor or a
        number, or `value=`): one-hot selects and a sum over the index axis. Of duplicate
        indices the last along `dim` is written (torch calls the result one of them; its CPU
        loop writes in that order); every write gets its place's gradient, as torch's rule
        (a gather) gives. `reduce` 'add' or 'multiply' combines self with every value sent
        there (scatter_reduce's 'sum'/'prod').

        >>> import aneforge as af
        >>> af.zeros(4).scatter(0, af.tensor([1, 3]), af.tensor([5.0, 6.0])).tolist()
        [0.0, 5.0, 0.0, 6.0]
        >>> af.zeros(2).scatter(0, af.tensor([0, 0]), af.tensor([5.0, 6.0])).tolist()
        [6.0, 0.0]
        """
        if reduce is not None:
            if reduce not in _SCATTER_REDUCE:
                raise ValueError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r} "
                                 f"(scatter_reduce has 'sum', 'prod', 'mean', 'amax', 'amin')")
            return self.scatter_reduce(dim, index, src if src is not None else value,
                                       _SCATTER_REDUCE[reduce])
        d, x, mask, src = self._scattered(dim, index, src if src is not None else value)
        hit = mask.any(-2)
        order = self._const(np.arange(mask.shape[-2]).reshape(-1, 1), dtypes.int32)
        written = where(mask, order, order - mask.shape[-2]).amax(-2, keepdim=True)
        last = mask & (order == written)                      # the last write to each place
        vals = where(last, src, 0).sum(-2).to(self.dtype)
        if src.requires_grad:       # torch's gradient: every write gets its place's (a gather)
            every = where(mask, src, 0).sum(-2).to(self.dtype)
            vals = vals.detach() + (every - every.detach())
        return where(hit, vals, x).movedim(-1, d)

    def scatter_add(self, dim: int, index: "Tensor", src: "Tensor") -> "Tensor":
        """self with src added at index along `dim` (duplicates accumulate).

        >>> import aneforge as af
        >>> af.zeros(3).scatter_add(0, af.tensor([1, 1]), af.tensor([1.0, 2.0])).tolist()
        [0.0, 3.0, 0.0]
        """
        return self.scatter_reduce(dim, index, src, "sum")

    def scatter_reduce(self, dim: int, index: "Tensor", src: "Tensor", reduce: str,
                       include_self: bool = True) -> "Tensor":
        """Reduce src into self at index along `dim`: reduce 'sum', 'prod', 'mean', 'amax' or
        'amin', with or without self's own values (include_self), as torch.

        >>> import aneforge as af
        >>> x, i = af.zeros(3), af.tensor([0, 0, 2])
        >>> x.scatter_reduce(0, i, af.tensor([1.0, 4.0, 2.0]), "amax").tolist()
        [4.0, 0.0, 2.0]
        """
        d, x, mask, src = self._scattered(dim, index, src)
        hit = mask.any(-2)
        if reduce in ("sum", "mean"):
            got = where(mask, src, 0).sum(-2).to(self.dtype)
            if reduce == "mean":
                count = mask.sum(-2).to(dtypes.float32) + float(include_self)
                got = (((x + got) if include_self else got) / count.maximum(1.0)).to(self.dtype)
                return where(hit, got, x).movedim(-1, d)
            return where(hit, x + got if include_self else got, x).movedim(-1, d)
        if reduce == "prod":
            got = where(mask, src, 1).prod(-2)
            return where(hit, x * got if include_self else got, x).movedim(-1, d)
        if reduce in ("amax", "amin"):
            # masked-out entries take the extreme of the other side: they never win over a hit
            fill = {"amax": src.amin, "amin": src.amax}[reduce](-2, keepdim=True)
            got = getattr(where(mask, src, fill), reduce)(-2)
            got = (x.maximum(got) if reduce == "amax" else x.minimum(got)) if include_self else got
            return where(hit, got, x).movedim(-1, d)
        raise ValueError(f"scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or "
                         f"'amin', got {reduce!r}")

    # ---- data-dependent shapes: host segments (tensor/core.host_segment) -------------------
    def nonzero(self, *, as_tuple: bool = False):
        """The indices of the nonzero entries, one row per entry (int32; torch's int64), or with
        `as_tuple=True` one 1-D tensor per dimension. The count depends on the values, so this
        runs on the host between ANE segments (a HostSegmentNotice says so once).

        >>> import aneforge as af, warnings
        >>> warnings.simplefilter("ignore", af.HostSegmentNotice)
        >>> af.tensor([[0.0, 2.0], [3.0, 0.0]]).nonzero().tolist()
        [[0, 1], [1, 0]]
        >>> [t.tolist() for t in af.tensor([0, 5, 7]).nonzero(as_tuple=True)]
        [[1, 2]]
        """
        if as_tuple:
            return self._host("nonzero", _DATA_SHAPE.format("the input"),
                              lambda a: np.nonzero(np.atleast_1d(a)), (self,),
                              (dtypes.int32,) * max(self.ndim, 1))
        return self._host("nonzero", _DATA_SHAPE.format("the input"),
                          lambda a: [np.argwhere(a)], (self,), (dtypes.int32,))[0]

    def argwhere(self):
        """nonzero(): the indices of the nonzero entries, one row each (int32).

        >>> import aneforge as af, warnings
        >>> warnings.simplefilter("ignore", af.HostSegmentNotice)
        >>> af.argwhere(af.tensor([0.0, 1.0, 2.0])).tolist()
        [[1], [2]]
        """
        return self.nonzero()

    def masked_select(self, mask):
        """The entries where `mask` (broadcast with the input) is true, as a 1-D tensor. The
        positions are found on the host (their count is the result's shape); the values are
        gathered on the ANE, so the gradient scatters back into the input.

        >>> import aneforge as af, warnings
        >>> warnings.simplefilter("ignore", af.HostSegmentNotice)
        >>> x = af.tensor([[1.0, -2.0], [-3.0, 4.0]])
        >>> x.masked_select(x > 0).tolist()
        [1.0, 4.0]
        """
        x, mask = _as_mask(self, mask, "masked_select")
        return x.reshape(-1).index_select(0, _true_positions(x, mask, "masked_select"))

    def masked_scatter(self, mask, source):
        """The input with its entries where `mask` is true replaced, in order, by the first
        entries of `source` (torch's rule; gradients reach both). The positions are read on
        the host from the mask; the values move on the ANE.

        >>> import aneforge as af, warnings
        >>> warnings.simplefilter("ignore", af.HostSegmentNotice)
        >>> x = af.zeros(4)
        >>> x.masked_scatter(af.tensor([True, False, True, False]), af.tensor([5.0, 6.0])).tolist()
        [5.0, 0.0, 6.0, 0.0]
        """
        x, mask = _as_mask(self, mask, "masked_scatter")
        source = self._as_tensor(source)
        n = source.numel()

        def order(m):            # entry k of a true place takes source[k]; others read 0
            rank = np.cumsum(m.reshape(-1)) - 1
            if rank[-1] >= n:
                raise ShapeError(f"masked_scatter: the mask has {rank[-1] + 1} true entries "
                                 f"but source has only {n} elements")
            return [np.maximum(rank, 0).astype(np.int32)]
        (pos,) = self._host("masked_scatter", "its source positions depend on the mask's "
                            "values", order, (mask,), (dtypes.int32,))
        picked = source.to(x.dtype).reshape(-1).index_select(0, pos).reshape(x.shape)
        return where(mask, picked, x)

    def unique(self, sorted: bool = True, return_inverse: bool = False,
               return_counts: bool = False, dim: int | None = None):
        """The distinct values (sorted, as torch returns them on every device), optionally with
        each input entry's index into them (`return_inverse`) and each value's count
        (`return_counts`; int32, torch's int64); `dim` compares whole slices along it. Their
        number depends on the values: a host segment. Not differentiable, as in torch.

        >>> import aneforge as af, warnings
        >>> warnings.simplefilter("ignore", af.HostSegmentNotice)
        >>> values, inverse, counts = af.tensor([3, 1, 3, 2]).unique(return_inverse=True,
        ...                                                         return_counts=True)
        >>> values.tolist(), inverse.tolist(), counts.tolist()
        ([1, 2, 3], [2, 0, 2, 1], [1, 1, 2])
        """
        axis = None if dim is None else norm_dim(dim, self.ndim)

        def distinct(a):
            values, inverse, counts = np.unique(a, return_inverse=True, return_counts=True,
                                                axis=axis)
            return values, inverse.reshape(a.shape if axis is None else (-1,)), counts
        outs = self._host("unique", _DATA_SHAPE.format("the input"), distinct, (self,),
                          (self.dtype, dtypes.int32, dtypes.int32))
        picked = (outs[0],) + ((outs[1],) if return_inverse else ()) + \
            ((outs[2],) if return_counts else ())
        return picked[0] if len(picked) == 1 else picked

    def __getitem__(self, index) -> "Tensor":
        return getitem(self, index)

    def index_put(self, indices, values, accumulate: bool = False) -> "Tensor":
        """x with values put at `indices` (torch's; aneforge.tensor.assign.index_put)."""
        return index_put(self, indices, values, accumulate)

    def index_put_(self, indices, values, accumulate: bool = False) -> "Tensor":
        """In-place index_put: this handle takes the new value."""
        return self._inplace(lambda: index_put(self, indices, values, accumulate))

    def __setitem__(self, index, value):
        """torch's `x[index] = value`: this handle takes the new value (aneforge.tensor.assign)."""
        self._inplace(lambda: setitem(self, index, value))
