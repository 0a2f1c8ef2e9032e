"""remove_redundant_broadcasts (exact; ours, not in the catalogue)."""
from __future__ import annotations

from ..ops import REGISTRY
from ..ops.registry import apply_to_vars, elementwise_ops, layout_ops
from .graph import producer
from .registry import register

# Ops that broadcast their operands (numpy / MIL rules): a tiled or leading-1 operand may be
# read as it was before it was expanded.
BROADCASTING = elementwise_ops(2) | elementwise_ops(3)
# ops that may have expanded an operand: repeats, and relabellings that add leading 1-axes
_EXPANSIONS = tuple(sorted(layout_ops("repeat", "same_order")))


@register("remove_redundant_broadcasts", exact=True)
def remove_redundant_broadcasts(graph) -> int:
    """An operand of a broadcasting op (elementwise binary, comparison, select) that was
    tiled, or given leading 1-axes by a same-order op (expand_dims, reshape, ...), is read
    before the expansion when the op's result keeps its type: broadcasting does the same work
    without materializing it.
    Autograd's `expand` of a reduced cotangent (tile) is the common case.

        before                                       after
        %t = tile(x=%s: [64, 1], reps=[1, 10])       %d = real_div(x=%a: [64, 10], y=%s)
        %d = real_div(x=%a: [64, 10], y=%t)

    Left alone: a tile both operands need (sub(t, t) would shrink), a reshape that moves
    elements to other axes ([1, 3] -> [3, 1] would broadcast along the other axis).
    """
    n = 0
    for op in graph.walk(*BROADCASTING):
        for key in [k for k in op.inputs if k in REGISTRY[op.type].inputs]:
            source = _unexpanded(op.inputs[key])
            if source is not None and _same_result(op, key, source):
                graph.set_input(op, key, source)
                n += 1
    return n


def _unexpanded(v):
    op = producer(v, *_EXPANSIONS)
    if op is None:
        return None
    src = op.inputs["x"]
    if REGISTRY[op.type].layout == "repeat" or _strip(src.shape) == _strip(v.shape):
        return src
    return None


def _strip(shape):
    shape = list(shape)
    while shape and shape[0] == 1:
        shape.pop(0)
    return shape


def _same_result(op, key, source) -> bool:
    try:
        _, types = apply_to_vars(op.type, {**op.inputs, key: source}, op.attrs)
        return types == [v.type for v in op.outputs]
    except Exception:          # the op does not accept it (shapes no longer broadcast)
        return False
