"""select_optimization (exact)."""
from __future__ import annotations

from .graph import splat
from .registry import register


@register("select_optimization", exact=True)
def select_optimization(graph) -> int:
    """A select whose condition is a constant with one value everywhere is the branch it picks;
    a select whose branches are the same value is that value. Only when the kept branch already
    has the result's shape (select may broadcast).

        before                                   after
        %c = const(val=True)                     %y = exp(x=%a)
        %s = select(cond=%c, a=%a, b=%b)
        %y = exp(x=%s)

    coremltools' second case (a constant ±inf branch becomes add(select(cond, inf, 0), b)) is
    not done: it turns -inf + inf into NaN and -0 into +0, so it would not be exact, and no
    recorded program has it (masks are built as additive -1e4, ANEForge `docs/mil-primer.md`).
    """
    n = 0
    for op in graph.walk():
        if op.type != "select":
            continue
        a, b = op.inputs["a"], op.inputs["b"]
        c = splat(op.inputs["cond"])
        keep = a if a is b else None if c is None else (a if c else b)
        if keep is not None and keep.type == op.outputs[0].type:
            n += graph.replace_op(op, [keep])
    return n
