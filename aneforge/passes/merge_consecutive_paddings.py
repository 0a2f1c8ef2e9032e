"""merge_consecutive_paddings (exact)."""
from __future__ import annotations

from ..ops.padding import widths
from .graph import producer
from .registry import register


@register("merge_consecutive_paddings", exact=True)
def merge_consecutive_paddings(graph) -> int:
    """A pad of a pad is one pad when both are constant with the same value, or when they pad
    different axes (any one mode).

        before                                            after
        %a = pad(x=%x: [1, 2, 6, 8], pad=[1, 1], mode="reflect")
        %b = pad(x=%a, pad=[1, 1, 0, 0], mode="reflect")  %b = pad(x=%x, pad=[1, 1, 1, 1],
                                                                     mode="reflect")
    """
    n = 0
    for op in graph.walk("pad"):
        inner = producer(op.inputs["x"], "pad")
        if inner is None or inner.attrs["mode"] != op.attrs["mode"]:
            continue
        rank = len(op.outputs[0].shape)
        w1, w2 = widths(rank, inner.attrs["pad"]), widths(rank, op.attrs["pad"])
        disjoint = all(not any(a) or not any(b) for a, b in zip(w1, w2))
        if op.attrs["mode"] == "constant":
            ok = inner.attrs["constant_val"] == op.attrs["constant_val"]
        else:
            ok = disjoint
        if not ok:
            continue
        merged = [(a[0] + b[0], a[1] + b[1]) for a, b in zip(w1, w2)]
        first = next((i for i, w in enumerate(merged) if any(w)), rank)
        op.attrs = {**op.attrs, "pad": tuple(p for w in merged[first:] for p in w)}
        graph.set_input(op, "x", inner.inputs["x"])
        n += 1
    return n
