"""merge_consecutive_transposes (exact)."""
from __future__ import annotations

from .graph import producer
from .registry import register


@register("merge_consecutive_transposes", exact=True)
def merge_consecutive_transposes(graph) -> int:
    """A transpose of a transpose is one transpose by the composed perm (none at all when the
    perms cancel; the inner one goes when nothing else reads it).

        before                                       after
        %a = transpose(x=%x, perm=[1, 2, 0])         %b = transpose(x=%x, perm=[2, 0, 1])
        %b = transpose(x=%a, perm=[1, 2, 0])

        %a = transpose(x=%x, perm=[1, 0])            (%x is read directly)
        %b = transpose(x=%a, perm=[1, 0])
    """
    n = 0
    for op in graph.walk():
        inner = producer(op.inputs["x"], "transpose") if op.type == "transpose" else None
        if inner is None:
            continue
        src = inner.inputs["x"]
        p1, p2 = inner.attrs["perm"], op.attrs["perm"]
        perm = tuple(p1[j % len(p1)] % len(p1) for j in p2)
        if perm == tuple(range(len(perm))) and graph.replace_op(op, [src]):
            n += 1
            continue
        op.attrs = {"perm": perm}
        graph.set_input(op, "x", src)
        n += 1
    return n
