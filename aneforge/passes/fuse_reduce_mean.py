"""fuse_reduce_mean (numeric)."""
from __future__ import annotations

import numpy as np

from .graph import binary_with_const, reduce_axes, splat
from .registry import register


@register("fuse_reduce_mean", exact=False)
def fuse_reduce_mean(graph) -> int:
    """reduce_sum followed by a division by (or a multiplication by the rounded reciprocal of)
    the number of summed elements is reduce_mean. With real_div it is bit-exact under the
    default numerics (reduce_mean divides the same fp16 running sum, ANEForge `docs/developer/numerics.md`); with mul, or a
    wide accumulator, it moves by one rounding.

        before                                       after
        %s = reduce_sum(x=%x, axes=[1])              %m = reduce_mean(x=%x, axes=[1])
        %c = const(val=8.0)
        %m = real_div(x=%s, y=%c)
    """
    n = 0
    for op in graph.walk():
        if op.type != "reduce_sum":
            continue
        s = op.outputs[0]
        user = graph.only_use(s)
        if user is None or s.dtype.np.kind != "f":
            continue
        pair = binary_with_const(user, ("real_div",), commutative=False) or \
            binary_with_const(user, ("mul",))
        if pair is None or pair[0] is not s or user.outputs[0].type != s.type:
            continue
        x = op.inputs["x"]
        count = int(np.prod([x.shape[a] for a in reduce_axes(op)]))
        c = splat(pair[1])
        want = count if user.type == "real_div" else float(np.asarray(1 / count, s.dtype.np))
        if c != want:
            continue
        mean = graph.add("reduce_mean", {"x": x}, before=user, axes=op.attrs["axes"],
                         keep_dims=op.attrs["keep_dims"])
        if graph.replace_op(user, [mean]):
            n += 1
        else:
            graph.remove(mean.op)
    return n
