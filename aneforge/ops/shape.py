"""Data movement (MIL iOS15/iOS17 tensor_transformation / tensor_operation): reshape, transpose,
expand_dims, squeeze, concat, split, slice_by_index, tile. All exact: no rounding."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..hardware import hazards
from ..hardware.limits import MAX_RANK
from ._common import (broadcast, norm_axes, norm_axis, require_dtype, require_same_dtype,
                      same_type)
from ._grad import attach, op, where, zeros
from .registry import Attr, define, shape_error


def _reshape_infer(t, attrs):
    x, shape = t["x"], tuple(attrs["shape"])
    if any(d < 0 for d in shape):
        raise shape_error("reshape", t, f"shape {shape} must be fully specified with sizes >= 0")
    if math.prod(shape) != math.prod(x.shape):
        raise shape_error("reshape", t, f"cannot reshape {math.prod(x.shape)} elements to {shape}")
    return same_type(shape, x.dtype)


# The same-order ops run in the fused VM as a flat copy (`fused`).
define("reshape", ("x",), _reshape_infer, lambda nm, x, shape: x.reshape(shape),
       attrs={"shape": Attr("ints")}, exact=True, layout="same_order", fused=("copy", "copy"))


def _transpose_infer(t, attrs):
    x, perm = t["x"], tuple(attrs["perm"])
    if len(perm) != x.rank or any(not -x.rank <= a < x.rank for a in perm) or \
            sorted(a % x.rank for a in perm) != list(range(x.rank)):
        raise shape_error("transpose", t, f"perm {perm} is not a permutation of {x.rank} axes")
    return same_type(tuple(x.shape[a] for a in perm), x.dtype)


define("transpose", ("x",), _transpose_infer, lambda nm, x, perm: np.transpose(x, perm),
       attrs={"perm": Attr("ints")}, exact=True, layout="reorder")


def _expand_dims_infer(t, attrs):
    x = t["x"]
    out_rank = x.rank + len(attrs["axes"])
    axes = norm_axes("expand_dims", t, attrs["axes"], out_rank)
    shape, it = [], iter(x.shape)
    for i in range(out_rank):
        shape.append(1 if i in axes else next(it))
    return same_type(shape, x.dtype)


define("expand_dims", ("x",), _expand_dims_infer,
       lambda nm, x, axes: np.expand_dims(x, tuple(attrs_axes(axes, x.ndim + len(axes)))),
       attrs={"axes": Attr("ints")}, exact=True, layout="same_order", fused=("copy", "copy"))


def attrs_axes(axes, rank):
    return [a % rank for a in axes]


def _squeeze_infer(t, attrs):
    x = t["x"]
    if attrs["axes"] is None:
        axes = tuple(i for i, n in enumerate(x.shape) if n == 1)
    else:
        axes = norm_axes("squeeze", t, attrs["axes"], x.rank)
        if any(x.shape[a] != 1 for a in axes):
            raise shape_error("squeeze", t, f"axes {attrs['axes']} must all have size 1")
    return same_type([n for i, n in enumerate(x.shape) if i not in axes], x.dtype)


def _squeeze_sim(nm, x, axes):
    return np.squeeze(x) if axes is None else np.squeeze(x, tuple(a % x.ndim for a in axes))


define("squeeze", ("x",), _squeeze_infer, _squeeze_sim, attrs={"axes": Attr("ints", None)},
       exact=True, layout="same_order", fused=("copy", "copy"))


def _concat_infer(t, attrs):
    vs = t["values"]
    if not vs:
        raise shape_error("concat", t, "needs at least one tensor")
    if len({v.dtype for v in vs}) > 1:
        raise shape_error("concat", t, "all values must share one dtype")
    if len({v.rank for v in vs}) > 1:
        raise shape_error("concat", t, "all values must have the same rank")
    if vs[0].rank == 0:
        raise shape_error("concat", t, "rank-0 tensors cannot be concatenated; unsqueeze them "
                          "(or use stack)")
    axis = norm_axis("concat", t, attrs["axis"], vs[0].rank)
    for v in vs:
        if v.shape[:axis] + v.shape[axis + 1:] != vs[0].shape[:axis] + vs[0].shape[axis + 1:]:
            raise shape_error("concat", t, f"sizes must match except along axis {attrs['axis']}")
    shape = list(vs[0].shape)
    shape[axis] = sum(v.shape[axis] for v in vs)
    return same_type(shape, vs[0].dtype)


def _concat_sim(nm, values, axis, interleave):
    shape = list(values[0].shape)
    shape[axis] = sum(v.shape[axis] for v in values)
    out = np.empty(shape, np.result_type(*values))
    _concat_into(nm, out, values, axis, interleave)
    return out


def _concat_into(nm, out, values, axis, interleave):
    if interleave:              # stacked after the axis (a negative one too), then merged
        axis %= values[0].ndim
        shape = out.shape[:axis] + (values[0].shape[axis], len(values)) + out.shape[axis + 1:]
        np.stack(values, axis=axis + 1, out=out.reshape(shape))
    else:
        np.concatenate(values, axis=axis, out=out)


define("concat", ("values",), _concat_infer, _concat_sim, variadic=frozenset({"values"}),
       attrs={"axis": Attr("int"), "interleave": Attr("bool", False)}, exact=True,
       layout="assemble", into=_concat_into)


def _split_sizes(t, attrs):
    x = t["x"]
    if x.rank == 0:
        raise shape_error("split", t, "a rank-0 tensor cannot be split")
    axis = norm_axis("split", t, attrs["axis"], x.rank)
    n = x.shape[axis]
    if attrs["split_sizes"] is not None:
        sizes = tuple(attrs["split_sizes"])
        if sum(sizes) != n or any(s < 1 for s in sizes):
            raise shape_error("split", t, f"split_sizes {sizes} must be >= 1 and add up to {n}")
    elif attrs["num_splits"] is not None and attrs["num_splits"] >= 1 and n % attrs["num_splits"] == 0:
        sizes = (n // attrs["num_splits"],) * attrs["num_splits"]
    else:
        raise shape_error("split", t, f"give split_sizes, or num_splits dividing {n}")
    return axis, sizes


def _split_infer(t, attrs):
    axis, sizes = _split_sizes(t, attrs)
    x = t["x"]
    return [same_type(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype) for s in sizes]


def _split_sim(nm, x, num_splits, split_sizes, axis):
    sizes = split_sizes or (x.shape[axis] // num_splits,) * num_splits
    parts = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    return parts[0] if len(parts) == 1 else tuple(parts)      # one output is not a tuple


define("split", ("x",), _split_infer, _split_sim,
       attrs={"num_splits": Attr("int", None), "split_sizes": Attr("ints", None), "axis": Attr("int")},
       exact=True, layout="part")


def slices(shape, begin, end, stride, begin_mask, end_mask, squeeze_mask):
    """Python slices (and axes to squeeze) equal to MIL slice_by_index's arguments."""
    out = []
    for i in range(len(shape)):
        b = None if begin_mask[i] else begin[i]
        e = None if end_mask[i] else end[i]
        if squeeze_mask[i]:
            b = begin[i] % shape[i]
            out.append(slice(b, b + 1, 1))
        else:
            out.append(slice(b, e, stride[i]))
    return tuple(out)


def _slice_infer(t, attrs):
    x = t["x"]
    args = [attrs[k] for k in ("begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask")]
    if any(len(a) != x.rank for a in args):
        raise shape_error("slice_by_index", t, f"begin/end/stride/masks need {x.rank} entries each")
    if any(s == 0 for s in attrs["stride"]):
        raise shape_error("slice_by_index", t, "stride must not be 0")
    for axis, (n, b, sq) in enumerate(zip(x.shape, attrs["begin"], attrs["squeeze_mask"])):
        if sq and not -n <= b < n:
            raise shape_error("slice_by_index", t, f"index {b} is out of range for axis {axis} "
                              f"of size {n}")
    shape = []
    for n, sl, sq in zip(x.shape, slices(x.shape, *args), attrs["squeeze_mask"]):
        if not sq:        # an empty slice: the result's check raises LimitError (host value)
            shape.append(len(range(*sl.indices(n))))
    return same_type(shape, x.dtype)


def _slice_sim(ctx, x, begin, end, stride, begin_mask, end_mask, squeeze_mask):
    r = x[slices(x.shape, begin, end, stride, begin_mask, end_mask, squeeze_mask)]
    if x.ndim and begin[-1] % x.shape[-1] and not begin_mask[-1] and not squeeze_mask[-1]:
        r = _width_crop(ctx, r, x)
    sq = tuple(i for i, s in enumerate(squeeze_mask) if s)
    return np.squeeze(r, sq) if sq else r


def _width_crop(ctx, r, whole=None):
    """A nonzero begin on the last axis goes through a crop DMA with a gain (x16 on M1/M2)
    before the fp16 store: |x| > 4094 (4094 * 16 = 65504) becomes +-inf (sbryngelson/ane-guide
    part-1-machine/03-numerics.md; measured absent on M4/M5)."""
    gain = ctx.numerics.width_slice_gain
    if gain is None or r.dtype != np.float32 or ctx.out_dtypes[0] != dtypes.float16 or not r.size:
        return r
    # the largest |x| first (two passes, no temporaries): float32 rounding is monotonic, so
    # when it passes every value does; a NaN fails the compare and takes the full check. Of
    # `whole` (what r is a slice of) when it is contiguous and not much larger: a strided
    # view reduces several times slower per element (conv2d's im2col taps)
    seen = whole if whole is not None and whole.flags.c_contiguous and \
        whole.size <= 8 * r.size else r
    if max(seen.max(), -seen.min()) * np.float32(gain) < np.float32(65520.0):
        return r
    over = np.abs(r) * np.float32(gain) >= np.float32(65520.0)
    if over.any():
        hazards.report(ctx, f"{int(over.sum())} value(s) with |x| > {65504 / gain:g} overflowed "
                       f"the width-slice crop's x{gain:g} gain and read back as +-inf (a nonzero "
                       f"begin on the last axis; slice another axis, or keep |x| <= 4094)")
        r = np.where(over, np.copysign(np.float32(np.inf), r), r)
    return r


def _slice_alters(ctx, attrs) -> bool:
    """Whether the slice may go through the width crop's gain (`_width_crop`): a begin on the
    last axis, not masked, on a target with the gain (any nonzero begin: the shape is not
    asked, so this may say yes where the crop turns out not to run)."""
    last = len(attrs["begin"]) - 1
    return ctx.numerics.width_slice_gain is not None and bool(attrs["begin"][last]) and \
        not attrs["begin_mask"][last] and not attrs["squeeze_mask"][last]


define("slice_by_index", ("x",), _slice_infer, _slice_sim, attrs={
    "begin": Attr("ints"), "end": Attr("ints"), "stride": Attr("ints"),
    "begin_mask": Attr("bools"), "end_mask": Attr("bools"), "squeeze_mask": Attr("bools")},
    exact=True, layout="part", alters=_slice_alters)


def _tile_infer(t, attrs):
    x, reps = t["x"], tuple(attrs["reps"])
    if len(reps) != x.rank or any(r < 1 for r in reps):
        raise shape_error("tile", t, f"reps {reps} needs {x.rank} entries, each >= 1")
    return same_type([n * r for n, r in zip(x.shape, reps)], x.dtype)


# not `fused`: a tile runs as a copy only when it broadcasts (the run plan decides)
define("tile", ("x",), _tile_infer, lambda nm, x, reps: np.tile(x, reps), attrs={"reps": Attr("ints")},
       exact=True, layout="repeat")


def _select_infer(t, attrs):
    require_dtype("select", t, "cond", (dtypes.bool_,))
    require_same_dtype("select", t, ("a", "b"))
    shape = broadcast("select", t, ("cond", "a", "b"))
    if broadcast("select", t, ("a", "b")) != shape:
        # Core ML types select as broadcast(a, b), ignoring cond's shape
        raise shape_error("select", t, "a or b must have the result's shape; cond may not add "
                          "axes (expand a or b first; af.where does it for you)")
    return same_type(shape, t["a"].dtype)


define("select", ("cond", "a", "b"), _select_infer, lambda nm, cond, a, b: np.where(cond, a, b),
       exact=True, elementwise=3, fused=("select", "select"))


# ---- gradient rules ----------------------------------------------------------------------
def _transpose_vjp(g, ins, attrs, out):
    perm = [p % g.ndim for p in attrs["perm"]]
    return {"x": g.permute([perm.index(i) for i in range(g.ndim)])}


def _concat_vjp(g, ins, attrs, out):
    if attrs["interleave"]:
        raise NotImplementedError("no gradient rule for concat(interleave=True)")
    sizes = [v.shape[attrs["axis"]] for v in ins["values"]]
    parts = op("split", {"x": g}, split_sizes=tuple(sizes), axis=attrs["axis"])
    return {"values": list(parts) if isinstance(parts, tuple) else [parts]}


def _split_vjp(gs, ins, attrs, outs):
    return {"x": op("concat", {"values": tuple(gs)}, axis=attrs["axis"])}


def _tile_vjp(g, ins, attrs, out):
    x = ins["x"]
    for axis, r in enumerate(attrs["reps"]):
        if r > 1:
            g = _untiled(g, axis, r, x.shape[axis])
    return {"x": g.reshape(x.shape)}


def _untiled(g, axis: int, r: int, n: int):
    """The sum of g's r repeats of n entries along `axis`: one sum over the repeats (by the
    route its length calls for, as broadcasting's gradient is summed), not r - 1 recorded adds
    (an index_select of k entries is a one-hot tiled k times: k ops and k fp16 roundings)."""
    if n == 1:
        return g.sum(axis, keepdim=True)
    if g.ndim < MAX_RANK:
        return g.reshape(g.shape[:axis] + (r, n) + g.shape[axis + 1:]).sum(axis)
    parts = op("split", {"x": g}, num_splits=r, axis=axis)     # no rank left to split into
    g = parts[0]
    for p in parts[1:]:
        g = g + p
    return g


def _scatter_axis(g, axis: int, begin: int, stride: int, size: int):
    """Place g's entries at begin, begin + stride, ... of an axis of `size`, zeros elsewhere:
    interleaved zero slabs for a stride, then one constant pad (what the graph passes make of
    a concat with zeros anyway, recorded as one op instead of five)."""
    m = g.shape[axis]
    if stride > 1:     # interleave s-1 zero slabs after every entry: no extra rank needed
        z = g - g
        g = op("concat", {"values": (g,) + (z,) * (stride - 1)}, axis=axis, interleave=True)
        g = g.narrow(axis, 0, (m - 1) * stride + 1)
    tail = size - begin - g.shape[axis]
    if not (begin or tail):
        return g
    widths = (begin, tail) + (0, 0) * (g.ndim - 1 - axis)
    return op("pad", {"x": g}, pad=widths, mode="constant", constant_val=0.0)


def _slice_vjp(g, ins, attrs, out):
    x = ins["x"]
    keep = [n if sq else None for n, sq in zip(x.shape, attrs["squeeze_mask"])]
    g = g.reshape(tuple(1 if sq else s for sq, s in zip(attrs["squeeze_mask"], _unsqueezed(g, keep))))
    args = [attrs[k] for k in ("begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask")]
    for axis, sl in enumerate(slices(x.shape, *args)):
        b, _, s = sl.indices(x.shape[axis])
        if g.shape[axis] != x.shape[axis]:
            g = _scatter_axis(g, axis, b, s, x.shape[axis])
    return {"x": g}


def _unsqueezed(g, keep):
    it = iter(g.shape)
    return [1 if k is not None else next(it) for k in keep]


GRADIENTS = {
    "reshape": lambda g, ins, a, out: {"x": g.reshape(ins["x"].shape)},
    "expand_dims": lambda g, ins, a, out: {"x": g.reshape(ins["x"].shape)},
    "squeeze": lambda g, ins, a, out: {"x": g.reshape(ins["x"].shape)},
    "transpose": _transpose_vjp,
    "concat": _concat_vjp,
    "split": _split_vjp,
    "tile": _tile_vjp,
    "slice_by_index": _slice_vjp,
    "select": lambda g, ins, a, out: {"a": where(ins["cond"], g, zeros(g)),
                                      "b": where(ins["cond"], zeros(g), g)},
}
for _name, _rule in GRADIENTS.items():
    attach(_name, _rule)
