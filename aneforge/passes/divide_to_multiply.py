"""divide_to_multiply (numeric)."""
from __future__ import annotations

import numpy as np

from .graph import const_value
from .registry import register


@register("divide_to_multiply", exact=False)
def divide_to_multiply(graph) -> int:
    """real_div by a constant becomes mul by its reciprocal, rounded to the constant's dtype
    (exact when every divisor is a power of two; otherwise within one fp16 rounding).
    Skipped where the reciprocal is not a normal number of that dtype: an underflowing
    multiplier after a reduce would hit the mul(reduce, 0) compile wall.

        before                                   after
        %c = const(val=3.0)                      %r = const(val=0.33325)
        %y = real_div(x=%x, y=%c)                %y = mul(x=%x, y=%r)
    """
    n = 0
    for op in graph.walk():
        c = const_value(op.inputs["y"]) if op.type == "real_div" else None
        if c is None or c.dtype.kind != "f" or const_value(op.inputs["x"]) is not None:
            continue   # const / const is const_elimination's
        with np.errstate(all="ignore"):
            r = (np.float32(1) / c.astype(np.float32)).astype(c.dtype)
        if not np.all(np.isfinite(r)) or np.any(np.abs(r) < np.finfo(c.dtype).tiny):
            continue
        new = graph.add("mul", {"x": op.inputs["x"], "y": graph.const(r, before=op)}, before=op)
        if graph.replace_op(op, [new]):
            n += 1
        else:
            graph.remove(new.op)
    return n
