"""rank0_expand_dims_swap (exact)."""
from __future__ import annotations

from ..ops.registry import elementwise_ops
from .graph import binary_with_const, const_value, next_op
from .registry import register

BINARY = tuple(sorted(elementwise_ops(2)))


@register("rank0_expand_dims_swap", exact=True)
def rank0_expand_dims_swap(graph) -> int:
    """A rank-0 elementwise op with a scalar constant, whose only reader lifts it to rank 1
    (expand_dims, or the reshape to (1,) a scalar output crosses the boundary with), is done at
    rank 1 instead: the lift moves before the op and the constant is stored as (1,). Core ML
    backends compute rank-0 tensors as rank 1, and the op's result is then the lifted value.

        before                                       after
        %s = sub(x=%r: [], y=1.0: [])                %e = expand_dims(x=%r, axes=[0])
        %e = expand_dims(x=%s, axes=[0])             %e2 = sub(x=%e, y=1.0: [1])
    """
    n = 0
    for op in graph.walk(*BINARY):
        pair = binary_with_const(op, (op.type,), commutative=True)
        lift = next_op(graph, op.outputs[0], ("expand_dims", "reshape")) \
            if pair is not None and op.outputs[0].shape == () else None
        if lift is None or lift.outputs[0].shape != (1,) or pair[0].shape != ():
            continue
        t, c = pair
        lifted = graph.add(lift.type, {"x": t}, before=lift, **lift.attrs)
        c1 = graph.const(const_value(c).reshape(1), before=lift)
        args = {"x": lifted, "y": c1} if op.inputs["x"] is t else {"x": c1, "y": lifted}
        n += graph.replace_op(lift, [graph.add(op.type, args, before=lift)])
    return n
