"""fuse_leaky_relu (exact)."""
from __future__ import annotations

from .graph import binary_with_const, fuse, other_operand, producer, splat
from .registry import register


@register("fuse_leaky_relu", exact=True)
def fuse_leaky_relu(graph) -> int:
    """maximum(alpha * x, x) with a constant 0 <= alpha <= 1 is leaky_relu(x, alpha). Exact:
    for x >= 0 both give x; for x < 0, alpha x >= x and rounding keeps it so, and leaky_relu
    rounds the same product once.

        [x] -> mul(alpha) -> maximum(., x) -> [...]        [x] -> leaky_relu(alpha) -> [...]
    """
    n = 0
    for op in graph.walk():
        if op.type != "maximum":
            continue
        for a in (op.inputs["x"], op.inputs["y"]):
            x, m = other_operand(op, a), producer(a, "mul")
            pair = binary_with_const(m, ("mul",)) if m is not None else None
            alpha = splat(pair[1]) if pair is not None else None
            if alpha is None or pair[0] is not x or not 0.0 <= alpha <= 1.0 \
                    or op.outputs[0].type != x.type:
                continue
            n += fuse(graph, [m, op], "leaky_relu", {"x": x}, alpha=float(alpha))
            break
    return n
