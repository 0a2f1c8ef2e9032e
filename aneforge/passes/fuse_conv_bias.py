"""fuse_conv_bias (numeric)."""
from __future__ import annotations

import numpy as np

from .graph import conv_then_const, fold_into_conv
from .registry import register


@register("fuse_conv_bias", exact=False)
def fuse_conv_bias(graph) -> int:
    """conv followed by add / sub of a per-channel constant ([C_out], [C_out, 1, 1],
    [1, C_out, 1, 1] or one value) is one conv with the constant folded into its bias (rounded
    to the bias dtype: one rounding where there were two). c - conv negates weight and bias.

        %y = conv(x=%x, weight=%W, bias=%b)          %z = conv(x=%x, weight=%W, bias=b + c)
        %z = add(x=%y, y=%c: const [1, C_out, 1, 1])
    """
    n = 0
    for op, post, cv in conv_then_const(graph, ("add", "sub")):
        if post.type == "sub" and post.inputs["x"] is not op.outputs[0]:     # c - conv
            n += fold_into_conv(graph, op, [post], scale=-np.ones_like(cv), shift=cv)
        else:
            n += fold_into_conv(graph, op, [post], shift=cv if post.type == "add" else -cv)
    return n
