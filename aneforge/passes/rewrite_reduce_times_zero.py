"""rewrite_reduce_times_zero (exact; ANE-specific; opt-in)."""
from __future__ import annotations

from ..ops.walls import is_zero_const, source_op
from .registry import register


@register("rewrite_reduce_times_zero", exact=True)
def rewrite_reduce_times_zero(graph) -> int:
    """mul(reduce output, 0) — also a multiplier that rounds to fp16 zero — fails ANECCompile
    (ANEForge `docs/developer/autograd.md`). It becomes the engine-safe zero sub(r, r), plus the zero
    constant when that broadcasts the result bigger. Same values (r * 0 and r - r are both 0
    for finite r and NaN for inf or NaN r; only the sign of a zero may differ).

        before                                       after
        %r = reduce_sum(x=%x, axes=[1])              %r = reduce_sum(x=%x, axes=[1])
        %z = const(val=0.0)                          %y = sub(x=%r, y=%r)
        %y = mul(x=%r, y=%z)

    Not in the default pipeline: there the compile wall stays visible (docs/numerics.md), so
    code that multiplies by zero is fixed where it is written.
    """
    n = 0
    for op in graph.walk():
        if op.type != "mul":
            continue
        for r, z in ((op.inputs["x"], op.inputs["y"]), (op.inputs["y"], op.inputs["x"])):
            src = source_op(r)
            if src is None or not src.type.startswith("reduce_") or not is_zero_const(z):
                continue
            if r.dtype != op.outputs[0].dtype:
                continue
            new = graph.add("sub", {"x": r, "y": r}, before=op)
            if new.shape != op.outputs[0].shape:
                new = graph.add("add", {"x": new, "y": z}, before=op)
            n += graph.replace_op(op, [new])
            break
    return n
