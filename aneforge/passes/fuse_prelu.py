"""fuse_prelu (exact)."""
from __future__ import annotations

from .graph import (binary_with_const, const_value, fuse, is_splat, other_operand,
                    per_channel, producer)
from .registry import register


@register("fuse_prelu", exact=True)
def fuse_prelu(graph) -> int:
    """relu(x) + a * relu(-x), with a constant per-channel a ([C, 1, 1] or [1, C, 1, 1]) on an
    [N, C, H, W] x, is prelu(x, alpha=-a) (also relu(x) - a * relu(-x): alpha=a). -x may be
    mul(x, -1) or sub(0, x). Exact: for x < 0 both round the product a * x once; for x > 0
    both give x.

        x --> relu ------------------------------> add --> y           x --> prelu(-a) --> y
        x --> mul(-1) --> relu --> mul(a) -------^
    """
    n = 0
    for op in graph.walk("add", "sub"):
        for r in ((op.inputs["x"], op.inputs["y"]) if op.type == "add" else (op.inputs["x"],)):
            found = _match(op, r)
            if found is not None:
                x, alpha, chain = found
                a = graph.const(alpha, before=op)
                if fuse(graph, chain + [op], "prelu", {"x": x, "alpha": a}):
                    n += 1
                    break
                graph.remove(a.op)
    return n


def _match(op, r):
    """(x, alpha, [ops]) if op = r ± a * relu(-x) with r = relu(x)."""
    relu = producer(r, "relu")
    scaled = producer(other_operand(op, r), "mul")
    pair = binary_with_const(scaled, ("mul",)) if scaled is not None else None
    inner = producer(pair[0], "relu") if pair is not None else None
    neg = producer(inner.inputs["x"], "mul", "sub") if inner is not None else None
    if relu is None or neg is None:
        return None
    x = relu.inputs["x"]
    negates = (neg.type == "mul" and any(u is x for u in (neg.inputs["x"], neg.inputs["y"]))
               and is_splat(other_operand(neg, x), -1.0)) or \
        (neg.type == "sub" and neg.inputs["y"] is x and is_splat(neg.inputs["x"], 0.0))
    alpha = per_channel(const_value(pair[1]), x)
    if not negates or alpha is None or op.outputs[0].type != x.type:
        return None
    return x, -alpha if op.type == "add" else alpha, [relu, neg, inner, scaled]
