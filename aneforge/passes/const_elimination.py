"""const_elimination: constant folding through the simulator's own kernels (exact)."""
from __future__ import annotations

import numpy as np

from ..ir import Block, Function, Operation, Program, Var
from ..runtime.sim import SimExecutable
from .graph import const_value
from .registry import register

FOLD_MAX_ELEMENTS = 4096   # a fold may not grow the constants beyond this, or its inputs' size


@register("const_elimination", exact=True)
def const_elimination(graph) -> int:
    """Replace an op whose inputs are all consts by consts holding its results, computed by
    the simulator itself (the same kernel, then the same `Numerics.round16` storing step), so
    the folded program computes the same values. Results larger than both FOLD_MAX_ELEMENTS
    and the op's constant inputs are left alone (a fold must not bloat the weights).

        before                                   after
        %a = const(val=2.0)                      %m = const(val=0.7)
        %b = const(val=0.35)                     %y = mul(x=%x, y=%m)
        %m = mul(x=%a, y=%b)
        %y = mul(x=%x, y=%m)
    """
    n = 0
    for op in graph.walk():
        if op.type == "const" or not _foldable(op):
            continue
        values = evaluate(op, graph.numerics)
        new = [graph.const(v, before=op) for v in values]
        if graph.replace_op(op, new):
            n += 1
        else:
            for v in new:
                graph.remove(v.op)
    return n


def _foldable(op) -> bool:
    ins = list(op.input_vars())
    if not ins or any(const_value(v) is None for v in ins):
        return False
    size = sum(int(np.prod(v.shape)) for v in op.outputs)
    return size <= max(FOLD_MAX_ELEMENTS, sum(const_value(v).size for v in ins))


def evaluate(op, numerics) -> list[np.ndarray]:
    """The op's results on its const inputs, as the simulator computes them (arrays of the
    outputs' dtypes): a one-op program run by the simulator's executor."""
    consts = {id(v): Operation("const", {}, {"val": const_value(v)}, [Var(f"c{i}", v.type)],
                               f"c{i}") for i, v in enumerate(op.input_vars())}
    args = {k: (tuple(consts[id(u)].outputs[0] for u in v) if isinstance(v, tuple)
                else consts[id(v)].outputs[0]) for k, v in op.inputs.items()}
    outs = [Var(f"o{i}", v.type) for i, v in enumerate(op.outputs)]
    one = Operation(op.type, args, op.attrs, outs, "o")
    program = Program({"main": Function(Block([], list(consts.values()) + [one], outs))})
    return SimExecutable(program, numerics).run([])
