"""noop_elimination (exact)."""
from __future__ import annotations

from .graph import is_splat, reduce_axes
from .registry import register


@register("noop_elimination", exact=True)
def noop_elimination(graph) -> int:
    """Remove ops whose result equals one of their inputs: identity; reshape to the same
    shape; transpose by the identity perm; tile by all-ones reps; squeeze / slice_by_index
    (stride 1) / split / concat that keep the shape; reductions over size-1 axes with
    keep_dims; add/sub of a zero constant; mul by / real_div by / pow to a one constant;
    maximum / minimum of a value with itself. Only when the result has the input's type (a
    constant operand may not broadcast the result bigger).

        before                                   after
        %r = reshape(x=%x, shape=[2, 3])         %y = relu(x=%x)
        %z = const(val=0.0)
        %a = add(x=%r, y=%z)
        %y = relu(x=%a)
    """
    n = 0
    for op in graph.walk():
        rule = RULES.get(op.type)
        keep = rule(op) if rule is not None else None
        if keep is not None and keep.type == op.outputs[0].type and graph.replace_op(op, [keep]):
            n += 1
    return n


def _x(op):
    return op.inputs["x"]


def _same_shape(op):
    return _x(op) if op.outputs[0].shape == _x(op).shape else None


def _identity_perm(op):
    perm = op.attrs["perm"]
    return _x(op) if [a % len(perm) for a in perm] == list(range(len(perm))) else None


def _slice(op):
    return _same_shape(op) if all(s == 1 for s in op.attrs["stride"]) else None


def _reduce(op):
    x = _x(op)
    return x if op.attrs["keep_dims"] and all(x.shape[a] == 1 for a in reduce_axes(op)) else None


def _with_const(value, commutative):
    def rule(op):
        x, y = op.inputs["x"], op.inputs["y"]
        if is_splat(y, value):
            return x
        if commutative and is_splat(x, value):
            return y
        return None
    return rule


def _self(op):
    return op.inputs["x"] if op.inputs["x"] is op.inputs["y"] else None


RULES = {
    "identity": _x,
    "reshape": _same_shape,
    "squeeze": _same_shape,
    "tile": _same_shape,
    "transpose": _identity_perm,
    "slice_by_index": _slice,
    "split": lambda op: _x(op) if len(op.outputs) == 1 else None,
    "concat": lambda op: op.inputs["values"][0] if len(op.inputs["values"]) == 1 else None,
    "reduce_sum": _reduce, "reduce_mean": _reduce, "reduce_max": _reduce, "reduce_min": _reduce,
    "add": _with_const(0, True),
    "sub": _with_const(0, False),
    "mul": _with_const(1, True),
    "real_div": _with_const(1, False),
    "pow": _with_const(1, False),
    "maximum": _self,
    "minimum": _self,
}
