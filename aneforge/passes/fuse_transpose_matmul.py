"""fuse_transpose_matmul (exact)."""
from __future__ import annotations

from .graph import producer
from .registry import register


@register("fuse_transpose_matmul", exact=True)
def fuse_transpose_matmul(graph) -> int:
    """A transpose that only swaps the last two axes, feeding a matmul, is the matmul's
    transpose_x / transpose_y flag (the transpose goes if nothing else reads it).

        %a = transpose(x=%x, perm=[1, 0])             %c = matmul(x=%x, y=%y, transpose_x=True)
        %c = matmul(x=%a, y=%y)

    Left alone: any other perm, e.g. (1, 0, 2), which moves a batch axis.
    """
    n = 0
    for op in graph.walk():
        if op.type != "matmul":
            continue
        for arg, flag in (("x", "transpose_x"), ("y", "transpose_y")):
            t = producer(op.inputs[arg], "transpose")
            if t is None or not _swaps_last_two(t.attrs["perm"]):
                continue
            op.attrs = {**op.attrs, flag: not op.attrs[flag]}
            graph.set_input(op, arg, t.inputs["x"])
            n += 1
    return n


def _swaps_last_two(perm) -> bool:
    r = len(perm)
    want = list(range(r - 2)) + [r - 1, r - 2]
    return r >= 2 and [p % r for p in perm] == want
