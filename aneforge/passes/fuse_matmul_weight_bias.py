"""fuse_matmul_weight_bias (numeric)."""
from __future__ import annotations

import numpy as np

from .graph import binary_with_const, const_value, fuse, next_op
from .registry import register


@register("fuse_matmul_weight_bias", exact=False)
def fuse_matmul_weight_bias(graph) -> int:
    """matmul by a constant rank-2 weight, then add (or sub) of a constant bias along the last
    axis, is MIL linear (which needs both constant). linear adds the bias to the wide
    accumulator before its one rounding; the pair rounded twice. Trained weights are program
    inputs, so this fuses frozen layers only.

        %y = matmul(x=%x, y=%W: const [K, N])        %y = linear(x=%x, weight=W^T, bias=%b)
        %z = add(x=%y, y=%b: const [N])
    """
    n = 0
    for op in graph.walk():
        w = const_value(op.inputs["y"]) if op.type == "matmul" else None
        if w is None or w.ndim != 2 or op.attrs["transpose_x"] or \
                const_value(op.inputs["x"]) is not None:
            continue
        y = op.outputs[0]
        post = next_op(graph, y, ("add", "sub"))
        pair = binary_with_const(post, ("add", "sub"), commutative=post.type == "add") \
            if post is not None else None
        if pair is None or pair[0] is not y or post.outputs[0].type != y.type:
            continue
        b = const_value(pair[1])
        if b.size not in (1, y.shape[-1]) or b.dtype != w.dtype:
            continue
        bias = np.broadcast_to(b.reshape(-1), (y.shape[-1],))
        weight = w if op.attrs["transpose_y"] else w.T
        bias = -bias if post.type == "sub" else bias
        inputs = {"x": op.inputs["x"], "weight": graph.const(np.ascontiguousarray(weight), post),
                  "bias": graph.const(np.ascontiguousarray(bias), post)}
        if fuse(graph, [op, post], "linear", inputs):
            n += 1
        else:
            graph.remove(inputs["weight"].op)
            graph.remove(inputs["bias"].op)
    return n
