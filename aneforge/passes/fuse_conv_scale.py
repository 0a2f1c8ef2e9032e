"""fuse_conv_scale (numeric)."""
from __future__ import annotations

import numpy as np

from .graph import conv_then_const, fold_into_conv
from .registry import register


@register("fuse_conv_scale", exact=False)
def fuse_conv_scale(graph) -> int:
    """conv followed by mul by a per-channel constant, or real_div of the conv by one, is one
    conv with weight and bias scaled (in fp32, rounded once to the weight dtype).

        %y = conv(x=%x, weight=%W, bias=%b)          %z = conv(x=%x, weight=W * s, bias=b * s)
        %z = mul(x=%y, y=%s: const [1, C_out, 1, 1])
    """
    n = 0
    for op, post, cv in conv_then_const(graph, ("mul", "real_div")):
        if post.type == "real_div" and post.inputs["x"] is not op.outputs[0]:
            continue                                             # c / conv does not fold
        if post.type == "real_div":
            if not np.all(cv != 0):
                continue
            cv = 1.0 / cv.astype(np.float32)
        n += fold_into_conv(graph, op, [post], scale=cv)
    return n
