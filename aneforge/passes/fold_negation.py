"""fold_negation (exact; ours, not in the catalogue)."""
from __future__ import annotations

from .graph import is_splat, producer
from .registry import register


@register("fold_negation", exact=True)
def fold_negation(graph) -> int:
    """y + (0 - x) is y - x, and y - (0 - x) is y + x: the same IEEE operations (only the
    sign of a zero result may differ). The negation goes when nothing else reads it.

        before                                       after
        %n = sub(x=0.0, y=%x)                        %z = sub(x=%y, y=%x)
        %z = add(x=%y, y=%n)
    """
    n = 0
    for op in graph.walk("add", "sub"):
        for key in (("x", "y") if op.type == "add" else ("y",)):
            x = _negated(op.inputs[key])
            if x is None:
                continue
            other = op.inputs["y" if key == "x" else "x"]
            if op.type == "sub" or key == "y":
                op.type = "sub" if op.type == "add" else "add"
                graph.set_input(op, "y", x)
            else:                                   # (0 - x) + y  ->  y - x
                op.type = "sub"
                graph.set_inputs(op, {"x": other, "y": x})
            n += 1
            break
    return n


def _negated(v):
    op = producer(v, "sub")
    return op.inputs["y"] if op is not None and is_splat(op.inputs["x"], 0.0) \
        and op.outputs[0].type == op.inputs["y"].type else None
