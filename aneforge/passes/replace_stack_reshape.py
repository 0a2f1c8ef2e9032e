"""replace_stack_reshape (exact)."""
from __future__ import annotations

from .graph import fuse, next_op, producer
from .registry import register


@register("replace_stack_reshape", exact=True)
def replace_stack_reshape(graph) -> int:
    """A stack (expand_dims of each value on one new axis, then concat on it — how af.stack
    records) followed by a reshape that merges the new axis into a neighbour is one concat:
    merged into the axis after it, a plain concat; into the axis before it, an interleaved one.

        before                                       after
        %a = expand_dims(x=%x: [1, 5, 3, 4], axes=[2])
        %b = expand_dims(x=%y: [1, 5, 3, 4], axes=[2])
        %s = concat(values=(%a, %b), axis=2)         %r = concat(values=(%x, %y), axis=2)
        %r = reshape(x=%s, shape=[1, 5, 6, 4])            (axis 1 and shape [1, 10, 3, 4]:
                                                           interleave=True)
    """
    n = 0
    for op in graph.walk("concat"):
        found = _match(graph, op)
        if found is not None:
            values, axis, interleave, chain = found
            n += fuse(graph, chain, "concat", {"values": values}, axis=axis, interleave=interleave)
    return n


def _match(graph, concat):
    out = concat.outputs[0]
    a = concat.attrs["axis"] % len(out.shape)
    if concat.attrs["interleave"]:
        return None
    dims = [producer(v, "expand_dims") for v in concat.inputs["values"]]
    if any(d is None or [x % len(out.shape) for x in d.attrs["axes"]] != [a] for d in dims):
        return None
    reshape = next_op(graph, out, ("reshape",))
    if reshape is None:
        return None
    s, r, k = out.shape, tuple(reshape.outputs[0].shape), len(dims)
    values = tuple(d.inputs["x"] for d in dims)
    if a + 1 < len(s) and r == s[:a] + (k * s[a + 1],) + s[a + 2:]:
        return values, a, False, dims + [concat, reshape]
    if a > 0 and r == s[:a - 1] + (s[a - 1] * k,) + s[a + 1:]:
        return values, a - 1, True, dims + [concat, reshape]
    return None
