"""topological_reorder (exact)."""
from __future__ import annotations

from .registry import register

MOVABLE = ("cast", "transpose")


@register("topological_reorder", exact=True)
def topological_reorder(graph) -> int:
    """Move each cast and transpose to just before its first reader (program outputs at the
    end), as coremltools does: the moved value is then alive, and held in memory, for the
    shortest time. Everything else keeps its order; ops moved to the same reader keep theirs.

        before                                   after
        %a = cast(x=%x, dtype="fp32")            %b = relu(x=%x)
        %b = relu(x=%x)                          %c = exp(x=%b)
        %c = exp(x=%b)                           %a = cast(x=%x, dtype="fp32")
        %d = add(x=%a, y=%a)                     %d = add(x=%a, y=%a)
    """
    ops = graph.ops
    position = {id(op): i for i, op in enumerate(ops)}
    waiting: dict = {}           # id(first reader) -> movable ops placed just before it
    for op in ops:
        if op.type in MOVABLE:
            readers = graph.uses(op.outputs[0])
            first = min(readers, key=lambda u: position[id(u)]) if readers else None
            waiting.setdefault(None if first is None else id(first), []).append(op)
    order: list = []

    def emit(op):
        for m in waiting.get(id(op), ()):
            emit(m)
        order.append(op)

    for op in ops:
        if op.type not in MOVABLE:
            emit(op)
    for op in waiting.get(None, ()):
        emit(op)
    moved = sum(a is not b for a, b in zip(order, ops))
    if moved:
        graph.set_operations(order)
    return moved
