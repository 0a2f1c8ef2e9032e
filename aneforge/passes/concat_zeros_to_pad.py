"""concat_zeros_to_pad (numeric only for inf/NaN; ours, not in the catalogue)."""
from __future__ import annotations

import numpy as np

from ..ops.registry import WHOLE, layout_ops
from .graph import const_value, producer
from .registry import register

# ops whose result holds nothing but their input's values: zeros seen through them are zeros
_MOVES = tuple(sorted(layout_ops(*WHOLE)))


@register("concat_zeros_to_pad", exact=False)
def concat_zeros_to_pad(graph) -> int:
    """A concat of one value between zeros along an axis is pad(mode="constant"): how conv2d's
    padding and slice gradients record zeros (the ANE-safe x - x, tiled), 3+ ops a side.
    Exact wherever the zeros' source is finite; where it holds inf or NaN, x - x is NaN and the
    pad a true 0 (what torch computes), which is why the pass is not marked exact.

        before                                       after
        %e = slice_by_index(x=%x, ... one row)
        %z = sub(x=%e, y=%e)                         %p = pad(x=%x, pad=[1, 1, 0, 0])
        %c = concat(values=(%z, %x, %z), axis=2)
    """
    n = 0
    for op in graph.walk("concat"):
        values, out = op.inputs["values"], op.outputs[0]
        middle = [i for i, v in enumerate(values) if not _is_zero(v)]
        if op.attrs["interleave"] or len(middle) != 1 or not out.dtype.is_float \
                or len(values) == 1:
            continue
        a, j = op.attrs["axis"] % len(out.shape), middle[0]
        before = sum(v.shape[a] for v in values[:j])
        after = sum(v.shape[a] for v in values[j + 1:])
        pad = [0] * (2 * (len(out.shape) - a))
        pad[0], pad[1] = before, after
        new = graph.add("pad", {"x": values[j]}, before=op, pad=tuple(pad), mode="constant",
                        constant_val=0.0)
        n += graph.replace_op(op, [new])
    return n


def _is_zero(v) -> bool:
    while (op := producer(v, *_MOVES)) is not None:
        v = op.inputs["x"]
    val = const_value(v)
    if val is not None:
        return val.dtype.kind == "f" and not np.any(val)
    op = producer(v, "sub")
    return op is not None and op.inputs["x"] is op.inputs["y"]
