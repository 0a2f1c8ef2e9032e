"""merge_consecutive_reshapes (exact)."""
from __future__ import annotations

from ..ops.registry import layout_ops
from .graph import producer
from .registry import register

RESHAPES = tuple(sorted(layout_ops("same_order")))   # each only relabels the same elements


@register("merge_consecutive_reshapes", exact=True)
def merge_consecutive_reshapes(graph) -> int:
    """A reshape (or expand_dims / squeeze / identity: every op of layout "same_order") of a
    reshape reads the first one's input: one reshape to the final shape. The inner one goes
    when nothing else reads it (DCE).

        before                                   after
        %a = reshape(x=%x, shape=[6, 4])         %c = reshape(x=%x, shape=[2, 12])
        %b = expand_dims(x=%a, axes=[0])
        %c = reshape(x=%b, shape=[2, 12])
    """
    n = 0
    for op in graph.walk():
        if op.type not in RESHAPES:
            continue
        inner = producer(op.inputs["x"], *RESHAPES)
        if inner is None:
            continue
        src = inner.inputs["x"]
        if src.shape == op.outputs[0].shape and graph.replace_op(op, [src]):
            n += 1
            continue
        op.type, op.attrs = "reshape", {"shape": op.outputs[0].shape}
        graph.set_input(op, "x", src)
        n += 1
    return n
