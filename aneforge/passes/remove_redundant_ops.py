"""remove_redundant_ops: common subexpression elimination (exact)."""
from __future__ import annotations

from ..ir.signature import op_key
from .graph import COMMUTATIVE
from .registry import register


@register("remove_redundant_ops", exact=True)
def remove_redundant_ops(graph) -> int:
    """Ops of one type with the same attributes and the same input values compute the same
    thing: keep the first, read it for the others. Constant inputs compare by value (consts
    are deduplicated first), others by identity; the operands of commutative ops (add, mul,
    maximum, minimum, equal, not_equal) compare as a set.

        before                                   after
        %1 = abs(x=%g)                           %1 = abs(x=%g)
        %2 = abs(x=%g)                           %3 = maximum(x=%1, y=%1)
        %3 = maximum(x=%1, y=%2)
    """
    seen: dict = {}
    n = 0
    for op in graph.walk():
        key = _key(op)
        first = seen.setdefault(key, op)
        if first is not op and graph.replace_op(op, list(first.outputs)):
            n += 1
    return n


def _key(op):
    args = tuple(sorted((k, tuple(map(id, v)) if isinstance(v, tuple) else id(v))
                        for k, v in op.inputs.items()))
    if op.type in COMMUTATIVE:
        args = tuple(sorted(a for _, a in args))
    return op_key(op.type, op.attrs), args
