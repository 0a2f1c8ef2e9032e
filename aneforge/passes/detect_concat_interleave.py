"""detect_concat_interleave (exact)."""
from __future__ import annotations

from .graph import fuse, next_op
from .registry import register


@register("detect_concat_interleave", exact=True)
def detect_concat_interleave(graph) -> int:
    """concat of n values of size C along an axis, reshaped to split that axis into (n, C),
    the two swapped by a transpose and merged back, is an interleaved concat (shufflenet's
    channel shuffle on axis -3; any axis here).

        before                                           after
        %c = concat(values=(%a, %b), axis=1)  [B, 2C, H, W]
        %r = reshape(x=%c, shape=[B, 2, C, H, W])        %o = concat(values=(%a, %b), axis=1,
        %t = transpose(x=%r, perm=[0, 2, 1, 3, 4])                   interleave=True)
        %o = reshape(x=%t, shape=[B, 2C, H, W])
    """
    n = 0
    for op in graph.walk("concat"):
        found = _match(graph, op)
        if found is not None:
            n += fuse(graph, found, "concat", {"values": op.inputs["values"]},
                      axis=op.attrs["axis"], interleave=True)
    return n


def _match(graph, concat):
    values, out = concat.inputs["values"], concat.outputs[0]
    a, k = concat.attrs["axis"] % len(out.shape), len(concat.inputs["values"])
    c = values[0].shape[a]
    if concat.attrs["interleave"] or k < 2 or any(v.shape[a] != c for v in values):
        return None
    split = next_op(graph, out, ("reshape",))
    if split is None or tuple(split.outputs[0].shape) != out.shape[:a] + (k, c) + out.shape[a + 1:]:
        return None
    swap = next_op(graph, split.outputs[0], ("transpose",))
    rank = len(out.shape) + 1
    perm = list(range(rank))
    perm[a], perm[a + 1] = a + 1, a
    if swap is None or [p % rank for p in swap.attrs["perm"]] != perm:
        return None
    merge = next_op(graph, swap.outputs[0], ("reshape",))
    if merge is None or tuple(merge.outputs[0].shape) != out.shape:
        return None
    return [concat, split, swap, merge]
