"""dedup_op_and_var_names (exact)."""
from __future__ import annotations

from ..errors import AneforgeError
from .registry import register


@register("dedup_op_and_var_names", exact=True)
def dedup_op_and_var_names(graph) -> int:
    """Rename values (and, separately, ops) whose name repeats an earlier one: `name_1`,
    `name_2`, ... The program's input and output names never change; two of them sharing a
    name is an error. Traced programs already have unique names; parsed or hand-built ones
    may not, and validation requires it.

        before                                   after
        %castop = cast(x=%x, dtype="fp16")       %castop = cast(x=%x, dtype="fp16")
        %castop = cast(x=%castop, ...)           %castop_1 = cast(x=%castop, ...)
        %square_last = square(x=%castop)         %square_last = square(x=%castop_1)
    """
    f = graph.program.main
    io = list({id(v): v for v in list(f.inputs) + list(f.outputs)}.values())
    taken: set = set()
    for v in io:
        if v.name in taken:
            raise AneforgeError(f"two program inputs/outputs are both named {v.name!r}; "
                                f"rename one before compiling")
        taken.add(v.name)
    fixed = {id(v) for v in io}
    n = 0
    for op in graph.ops:
        for v in op.outputs:
            if id(v) not in fixed:
                n += _claim(graph, v, taken)
    op_names: set = set()
    for op in graph.ops:
        n += _claim(graph, op, op_names)
    return n


def _claim(graph, obj, taken: set) -> int:
    if obj.name not in taken:
        taken.add(obj.name)
        return 0
    obj.name = graph.fresh(obj.name, plain_first=True)   # name_1, name_2...: `taken` is in the graph
    taken.add(obj.name)
    return 1
