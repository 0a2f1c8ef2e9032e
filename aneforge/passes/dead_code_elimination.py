"""dead_code_elimination (exact)."""
from __future__ import annotations

from .registry import register


@register("dead_code_elimination", exact=True)
def dead_code_elimination(graph) -> int:
    """Remove ops none of whose outputs reach a program output.

        before                                   after
        %c = const(val=2.0)                      %c = const(val=2.0)
        %m = matmul(x=%x, y=%w)                  %a = add(x=%x, y=%c)
        %a = add(x=%x, y=%c)                     -> (%a)
        -> (%a)
    """
    live = {id(v) for v in graph.block.outputs}
    keep = []
    for op in reversed(graph.ops):
        if any(id(v) in live for v in op.outputs):
            keep.append(op)
            live.update(id(v) for v in op.input_vars())
    removed = len(graph.ops) - len(keep)
    if removed:
        graph.set_operations(keep[::-1])
    return removed
