"""split_long_matmul (numeric; ANE-specific legalization)."""
from __future__ import annotations

import numpy as np

from .graph import const_value
from .registry import register


@register("split_long_matmul", exact=False)
def split_long_matmul(graph) -> int:
    """A matmul or linear whose contraction axis K, or output width N, exceeds the engine's cap
    (the target's spatial cap: 16384 on M1-M3, 65536 on M4/M5; docs/capabilities.md; or the
    pipeline option `contraction_cap`) is split into tiles of at most the cap. Width tiles are concatenated
    (the same values); contraction tiles are added, each tile's output rounded to fp16 first,
    so the result may move by those roundings (and a tile past the cliff, ANEForge `docs/numeric-cliffs.md`, is inf).
    linear's constant weight is cut into constant tiles; its bias goes with the first.

        before                                       after
        %y = matmul(x=%x: [8, 40000],                %x0 = slice_by_index(x=%x, [0:16384])
                    y=%w: [40000, 4])                %w0 = slice_by_index(x=%w, [0:16384])
                                                     %y0 = matmul(x=%x0, y=%w0)
                                                     ... tiles 1, 2 ...
                                                     %y = add(x=add(x=%y0, y=%y1), y=%y2)
    """
    cap, n = graph.options.contraction_cap, 0
    for op in graph.walk("matmul", "linear"):
        split = _matmul if op.type == "matmul" else _linear
        out = split(graph, op, cap)
        if out is not None:
            n += graph.replace_op(op, [out])
    return n


def _ranges(size, cap):
    return [(s, min(s + cap, size)) for s in range(0, size, cap)]


def _matmul(graph, op, cap):
    x, y = op.inputs["x"], op.inputs["y"]
    tx, ty = op.attrs["transpose_x"], op.attrs["transpose_y"]
    kx, ky = len(x.shape) - (2 if tx else 1), len(y.shape) - (1 if ty else 2)
    ny = len(y.shape) - (2 if ty else 1)
    if y.shape[ny] > cap:            # width: column tiles of y, outputs side by side
        parts = [graph.add("matmul", {"x": x, "y": _slice(graph, op, y, ny, a, b)}, before=op,
                           transpose_x=tx, transpose_y=ty) for a, b in _ranges(y.shape[ny], cap)]
        return graph.add("concat", {"values": tuple(parts)}, before=op, axis=-1)
    if x.shape[kx] <= cap:
        return None
    parts = [graph.add("matmul", {"x": _slice(graph, op, x, kx, a, b),
                                  "y": _slice(graph, op, y, ky, a, b)},
                       before=op, transpose_x=tx, transpose_y=ty)
             for a, b in _ranges(x.shape[kx], cap)]
    return _total(graph, op, parts)


def _linear(graph, op, cap):
    x, w = op.inputs["x"], const_value(op.inputs["weight"])
    b = const_value(op.inputs["bias"]) if "bias" in op.inputs else None
    if w.shape[0] > cap:
        parts = [graph.add("linear", {"x": x, "weight": graph.const(w[a:z], op),
                                      "bias": None if b is None else graph.const(b[a:z], op)},
                           before=op) for a, z in _ranges(w.shape[0], cap)]
        return graph.add("concat", {"values": tuple(parts)}, before=op, axis=-1)
    if w.shape[1] <= cap:
        return None
    parts = [graph.add("linear", {"x": _slice(graph, op, x, len(x.shape) - 1, a, z),
                                  "weight": graph.const(np.ascontiguousarray(w[:, a:z]), op),
                                  "bias": graph.const(b, op) if b is not None and not a else None},
                       before=op) for a, z in _ranges(w.shape[1], cap)]
    return _total(graph, op, parts)


def _total(graph, op, parts):
    total = parts[0]
    for part in parts[1:]:
        total = graph.add("add", {"x": total, "y": part}, before=op)
    return total


def _slice(graph, op, v, axis, start, end):
    rank = len(v.shape)
    begin = tuple(start if i == axis else 0 for i in range(rank))
    stop = tuple(end if i == axis else n for i, n in enumerate(v.shape))
    return graph.add("slice_by_index", {"x": v}, before=op, begin=begin, end=stop,
                     stride=(1,) * rank, begin_mask=(False,) * rank, end_mask=(False,) * rank,
                     squeeze_mask=(False,) * rank)
