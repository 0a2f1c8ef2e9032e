"""fuse_linear_bias (numeric)."""
from __future__ import annotations

import numpy as np

from .graph import const_value, fuse, next_op, other_operand
from .registry import register


@register("fuse_linear_bias", exact=False)
def fuse_linear_bias(graph) -> int:
    """linear followed by add / sub of a constant along the last axis is one linear with the
    constant folded into its bias (rounded to the bias dtype; c - linear negates the weight).

        %y = linear(x=%x, weight=%W, bias=%b)        %z = linear(x=%x, weight=%W, bias=b + c)
        %z = add(x=%y, y=%c: const [N])
    """
    n = 0
    for op in graph.walk():
        if op.type != "linear":
            continue
        y = op.outputs[0]
        post = next_op(graph, y, ("add", "sub"))
        c = other_operand(post, y) if post is not None else None
        cv = const_value(c) if c is not None else None
        if cv is None or post.outputs[0].type != y.type or cv.size not in (1, y.shape[-1]):
            continue
        w = const_value(op.inputs["weight"])
        b = const_value(op.inputs["bias"]) if "bias" in op.inputs else \
            np.zeros(y.shape[-1], w.dtype)
        if cv.dtype != w.dtype:
            continue
        cv = np.broadcast_to(cv.reshape(-1), b.shape).astype(np.float32)
        if post.type == "add":
            weight, bias = w, b.astype(np.float32) + cv
        elif post.inputs["x"] is y:
            weight, bias = w, b.astype(np.float32) - cv
        else:
            weight, bias = -w, cv - b.astype(np.float32)
        made = [graph.const(bias.astype(w.dtype), post)]
        if weight is not w:
            made.append(graph.const(weight, post))
        inputs = {"x": op.inputs["x"], "bias": made[0],
                  "weight": made[-1] if weight is not w else op.inputs["weight"]}
        if fuse(graph, [op, post], "linear", inputs):
            n += 1
        else:
            for v in made:
                graph.remove(v.op)
    return n
