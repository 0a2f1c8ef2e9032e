"""concat_to_pixel_shuffle (exact)."""
from __future__ import annotations

from .registry import register


def _interleaved(op, axis: int, rank: int = 4):
    """The values of `op` if it is concat(axis=axis, interleave=True) of rank-`rank` values."""
    if op is None or op.type != "concat" or not op.attrs["interleave"]:
        return None
    values = op.inputs["values"]
    if len(values[0].shape) != rank or op.attrs["axis"] % rank != axis:
        return None
    return values


@register("concat_to_pixel_shuffle", exact=True)
def concat_to_pixel_shuffle(graph) -> int:
    """f interleaved concats along H, interleaved along W by one more concat, of f*f values of
    one [N, C, H, W] shape, are one channel-interleaved concat and a pixel_shuffle(f). Exact
    (both only move values): out[h f + i, w f + j] = x_{j, i}[h, w], the channel i f + j.

        %a = concat(values=(%x1, %x2), axis=2, interleave=True)
        %b = concat(values=(%x3, %x4), axis=2, interleave=True)
        %y = concat(values=(%a, %b), axis=3, interleave=True)
                                       ->
        %c = concat(values=(%x1, %x3, %x2, %x4), axis=1, interleave=True)
        %y = pixel_shuffle(x=%c, upscale_factor=2)
    """
    n = 0
    for outer in graph.walk("concat"):
        cols = _interleaved(outer, 3)
        if cols is None:
            continue
        f = len(cols)
        inner = [v.op for v in cols]
        rows = [_interleaved(op, 2) for op in inner]
        if f < 2 or any(r is None or len(r) != f for r in rows) \
                or len({id(op) for op in inner}) != f \
                or not all(graph.internal(v, [outer]) for v in cols):
            continue
        shape = rows[0][0].type
        if any(v.type != shape for r in rows for v in r):
            continue
        values = tuple(rows[j][i] for i in range(f) for j in range(f))
        c = graph.add("concat", {"values": values}, before=outer, axis=1, interleave=True)
        y = graph.add("pixel_shuffle", {"x": c}, before=outer, upscale_factor=f)
        if graph.replace_op(outer, [y]):
            n += 1
        else:
            graph.remove(y.op)
            graph.remove(c.op)
    return n
