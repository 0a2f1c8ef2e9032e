"""cast_optimization (exact)."""
from __future__ import annotations

from .. import dtypes as D
from .graph import producer
from .registry import register

# A -> the dtypes that hold every value of A exactly (so a cast A -> B loses nothing).
LOSSLESS = {
    D.bool_: {D.int8, D.uint8, D.int16, D.uint16, D.int32, D.float16, D.float32},
    D.int8: {D.int16, D.int32, D.float16, D.float32},
    D.uint8: {D.int16, D.uint16, D.int32, D.float16, D.float32},
    D.int16: {D.int32, D.float32},
    D.uint16: {D.int32, D.float32},
    D.float16: {D.float32},
}


@register("cast_optimization", exact=True)
def cast_optimization(graph) -> int:
    """Remove casts to the dtype a value already has, and fuse cast(cast(x, B), C) into
    cast(x, C) (or into x, when C is x's dtype) when B holds every value of x's dtype exactly
    (then the first cast changes no value, and cast semantics depend only on the value).

        before                                   after
        %a = cast(x=%x: int8, dtype="fp16")      %b = cast(x=%x: int8, dtype="fp32")
        %b = cast(x=%a, dtype="fp32")

        %a = cast(x=%x: fp16, dtype="fp32")      (nothing: %x is read directly)
        %b = cast(x=%a, dtype="fp16")

    Left alone: fp32 -> bool -> fp16 (bool keeps 0/1 only), int32 -> int8 -> uint8 (the
    middle cast wraps), fp32 -> fp16 -> fp32 (rounds).
    """
    n = 0
    for op in graph.walk():
        if op.type != "cast":
            continue
        x, out = op.inputs["x"], op.outputs[0]
        if x.dtype == out.dtype:
            n += graph.replace_op(op, [x])
            continue
        inner = producer(x, "cast")
        if inner is None:
            continue
        src = inner.inputs["x"]
        if x.dtype not in LOSSLESS.get(src.dtype, ()):
            continue
        if src.dtype == out.dtype:
            n += graph.replace_op(op, [src])
        else:
            graph.set_input(op, "x", src)
            n += 1
    return n
