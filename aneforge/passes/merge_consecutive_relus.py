"""merge_consecutive_relus (exact)."""
from __future__ import annotations

from .graph import producer
from .registry import register


@register("merge_consecutive_relus", exact=True)
def merge_consecutive_relus(graph) -> int:
    """relu is idempotent: relu(relu(x)) is the inner relu.

        before                                   after
        %a = relu(x=%x)                          %a = relu(x=%x)
        %b = relu(x=%a)                          %c = exp(x=%a)
        %c = exp(x=%b)
    """
    n = 0
    for op in graph.walk():
        if op.type == "relu" and producer(op.inputs["x"], "relu") is not None:
            n += graph.replace_op(op, [op.inputs["x"]])
    return n
