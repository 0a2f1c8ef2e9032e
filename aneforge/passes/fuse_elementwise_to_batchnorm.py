"""fuse_elementwise_to_batchnorm (numeric)."""
from __future__ import annotations

import numpy as np

from .graph import binary_with_const, const_value, fuse, next_op, per_channel
from .registry import register


@register("fuse_elementwise_to_batchnorm", exact=False)
def fuse_elementwise_to_batchnorm(graph) -> int:
    """mul by a per-channel constant then add of a per-channel constant, on an [N, C, H, W]
    value, is batch_norm(mean=0, variance=1, gamma, beta, epsilon=0): one op, rounded once
    (the pair rounded twice). What a frozen conv's folded batch norm looks like.

        before                                       after
        %m = mul(x=%x, y=%s: const [1, C, 1, 1])     %y = batch_norm(x=%x, mean=0, variance=1,
        %y = add(x=%m, y=%b: const [1, C, 1, 1])                     gamma=s, beta=b)
    """
    n = 0
    for op in graph.walk("mul"):
        pair = binary_with_const(op, ("mul",))
        x = pair[0] if pair is not None else None
        if x is None or len(x.shape) != 4 or op.outputs[0].type != x.type:
            continue
        add = next_op(graph, op.outputs[0], ("add", "sub"))
        bias = binary_with_const(add, ("add", "sub"), commutative=add.type == "add") \
            if add is not None else None
        if bias is None or bias[0] is not op.outputs[0] or add.outputs[0].type != x.type:
            continue
        gamma, beta = (per_channel(const_value(c), x) for c in (pair[1], bias[1]))
        if gamma is None or beta is None:
            continue
        c, dt = x.shape[1], x.dtype.np
        consts = {"mean": np.zeros(c, dt), "variance": np.ones(c, dt), "gamma": gamma,
                  "beta": -beta if add.type == "sub" else beta}
        inputs = {"x": x, **{k: graph.const(v, before=add) for k, v in consts.items()}}
        if fuse(graph, [op, add], "batch_norm", inputs, epsilon=0.0):
            n += 1
        else:
            for k in consts:
                graph.remove(inputs[k].op)
    return n
