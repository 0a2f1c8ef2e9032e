"""split_long_matmul (numeric; ANE-specific legalization)."""
from __future__ import annotations

from .registry import register


@register("split_long_matmul", exact=False)
def split_long_matmul(graph) -> int:
    """A matmul whose contraction axis K exceeds the engine's cap (16384 on M1-M3, 65536 on
    M4/M5; ANE_FACTS "Limits"; the pipeline option `contraction_cap`) becomes a sum of matmuls
    over K-tiles of at most the cap. Each tile's output is rounded to fp16 before the adds, so
    the result may move by those roundings; a tile's output past the cliff (fact N15) is inf.

        before                                       after
        %y = matmul(x=%x: [8, 40000],                %x0 = slice_by_index(x=%x, [0:16384])
                    y=%w: [40000, 4])                %w0 = slice_by_index(x=%w, [0:16384])
                                                     %y0 = matmul(x=%x0, y=%w0)
                                                     ... tiles 1, 2 ...
                                                     %y = add(x=add(x=%y0, y=%y1), y=%y2)
    """
    cap, n = graph.options.contraction_cap, 0
    for op in graph.walk():
        if op.type != "matmul":
            continue
        x, y = op.inputs["x"], op.inputs["y"]
        tx, ty = op.attrs["transpose_x"], op.attrs["transpose_y"]
        x_axis, y_axis = len(x.shape) - (2 if tx else 1), len(y.shape) - (1 if ty else 2)
        k = x.shape[x_axis]
        if k <= cap:
            continue
        total = None
        for start in range(0, k, cap):
            end = min(start + cap, k)
            part = graph.add("matmul", {"x": _slice(graph, op, x, x_axis, start, end),
                                        "y": _slice(graph, op, y, y_axis, start, end)},
                             before=op, transpose_x=tx, transpose_y=ty)
            total = part if total is None else graph.add("add", {"x": total, "y": part}, before=op)
        n += graph.replace_op(op, [total])
    return n


def _slice(graph, op, v, axis, start, end):
    rank = len(v.shape)
    begin = tuple(start if i == axis else 0 for i in range(rank))
    stop = tuple(end if i == axis else n for i, n in enumerate(v.shape))
    return graph.add("slice_by_index", {"x": v}, before=op, begin=begin, end=stop,
                     stride=(1,) * rank, begin_mask=(False,) * rank, end_mask=(False,) * rank,
                     squeeze_mask=(False,) * rank)
