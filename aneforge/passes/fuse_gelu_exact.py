"""fuse_gelu_exact (numeric)."""
from __future__ import annotations

import math

from .graph import fuse, half_x_times, prev
from .registry import register


@register("fuse_gelu_exact", exact=False)
def fuse_gelu_exact(graph) -> int:
    """0.5 * x * (1 + erf(x / sqrt(2))) is gelu(mode=EXACT): one op, rounded once.

        [x] -> real_div(1.414) -> erf -> add(1) -> mul(0.5) -> mul(x) -> [...]
        (or mul(0.7071) for the division; mul(x) before mul(0.5); or (0.5 x) * (1 + erf))

        [x] -> gelu(mode="EXACT") -> [...]
    """
    n = 0
    for op in graph.walk():
        if op.type != "erf":
            continue
        pre = prev(op.inputs["x"], ("real_div",), const=math.sqrt(2)) or \
            prev(op.inputs["x"], ("mul",), const=1 / math.sqrt(2))
        tail = half_x_times(graph, op.outputs[0], pre[1]) if pre is not None else None
        if tail is not None:
            n += fuse(graph, [pre[0], op] + tail[1], "gelu", {"x": pre[1]}, mode="EXACT")
    return n
