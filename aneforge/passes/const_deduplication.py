"""const_deduplication (exact)."""
from __future__ import annotations

from .registry import register


@register("const_deduplication", exact=True)
def const_deduplication(graph) -> int:
    """Give every distinct constant (dtype, shape, bytes) one const op; readers of a repeat
    read the first. Unlike coremltools' pass (tensors of 100+ elements) this takes every size:
    a scalar literal is a const op here too, and training steps repeat them by the dozen.

        before                                   after
        %a = const(val=0.5)                      %a = const(val=0.5)
        %b = const(val=0.5)                      %p = mul(x=%x, y=%a)
        %p = mul(x=%x, y=%a)                     %q = mul(x=%y, y=%a)
        %q = mul(x=%y, y=%b)
    """
    first: dict = {}
    n = 0
    for op in graph.walk():
        if op.type != "const":
            continue
        val = op.attrs["val"]
        key = (val.dtype.str, val.shape, val.tobytes())
        seen = first.setdefault(key, op.outputs[0])
        if seen is not op.outputs[0] and graph.replace_op(op, [seen]):
            n += 1
    return n
