"""fuse_conv_batchnorm (numeric)."""
from __future__ import annotations

import numpy as np

from .graph import const_value, fold_into_conv, next_op
from .registry import register


@register("fuse_conv_batchnorm", exact=False)
def fuse_conv_batchnorm(graph) -> int:
    """conv followed by batch_norm (constant statistics, as MIL requires) is one conv:
    scale = gamma / sqrt(variance + epsilon), weight * scale, (bias - mean) * scale + beta,
    folded in fp32 and rounded once to the weight dtype.

        %y = conv(x=%x, weight=%W, bias=%b)          %z = conv(x=%x, weight=W * scale,
        %z = batch_norm(x=%y, mean=%m, variance=%v,                bias=(b - m) * scale + beta)
                        gamma=%g, beta=%beta, epsilon=eps)
    """
    n = 0
    for op in graph.walk("conv"):
        y = op.outputs[0]
        bn = next_op(graph, y, ("batch_norm",))
        if bn is None or bn.outputs[0].type != y.type:
            continue
        f32 = lambda k, d: (np.float32(d) if k not in bn.inputs else  # noqa: E731
                            const_value(bn.inputs[k]).astype(np.float32))
        mean, var, gamma, beta = (f32(k, d) for k, d in
                                  (("mean", 0), ("variance", 1), ("gamma", 1), ("beta", 0)))
        with np.errstate(all="ignore"):
            scale = gamma / np.sqrt(var + np.float32(bn.attrs["epsilon"]))
        if not np.all(np.isfinite(scale)):
            continue
        co = y.shape[1]
        scale = np.broadcast_to(scale, (co,))
        n += fold_into_conv(graph, op, [bn], scale=scale,
                            shift=np.broadcast_to(beta - mean * scale, (co,)))
    return n
