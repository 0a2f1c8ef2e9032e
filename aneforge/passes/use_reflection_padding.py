"""use_reflection_padding (exact)."""
from __future__ import annotations

from ..ops.shape import slices
from .graph import producer
from .registry import register


@register("use_reflection_padding", exact=True)
def use_reflection_padding(graph) -> int:
    """A concat of x between single-element slices of x that mirror it (x[b], ..., x[1] before,
    x[n-2], ..., x[n-1-e] after, along one axis) is pad(mode="reflect").

        before                                                       after
        %l = slice_by_index(x=%x: [1, 2, 6, 8], begin=[0, 0, 0, 1], end=[1, 2, 6, 2])
        %r = slice_by_index(x=%x, begin=[0, 0, 0, 6], end=[1, 2, 6, 7])   %p = pad(x=%x,
        %c = concat(values=(%l, %x, %r), axis=3)                              pad=[1, 1],
                                                                              mode="reflect")
    """
    n = 0
    for op in graph.walk("concat"):
        found = _match(op)
        if found is None:
            continue
        x, a, before, after = found
        pad = [0] * (2 * (len(x.shape) - a))
        pad[0], pad[1] = before, after
        new = graph.add("pad", {"x": x}, before=op, pad=tuple(pad), mode="reflect")
        n += graph.replace_op(op, [new])
    return n


def _match(concat):
    """(x, axis, before, after) if the concat mirrors one of its values around itself."""
    values = concat.inputs["values"]
    if concat.attrs["interleave"] or len(values) < 2 or not values[0].dtype.is_float:
        return None
    a = concat.attrs["axis"] % len(values[0].shape)
    for j, x in enumerate(values):
        left, right, n = values[:j], values[j + 1:], x.shape[a]
        if max(len(left), len(right)) > n - 1:
            continue
        want = [len(left) - k for k in range(len(left))] + [n - 2 - k for k in range(len(right))]
        if [_single(v, x, a) for v in left + right] == want:
            return x, a, len(left), len(right)
    return None


def _single(v, x, axis):
    """i if v = slice_by_index(x) picking element i along `axis` and all of every other axis."""
    op = producer(v, "slice_by_index")
    if op is None or op.inputs["x"] is not x or any(op.attrs["squeeze_mask"]):
        return None
    args = [op.attrs[k] for k in ("begin", "end", "stride", "begin_mask", "end_mask",
                                  "squeeze_mask")]
    picks = [range(*sl.indices(n)) for sl, n in zip(slices(x.shape, *args), x.shape)]
    if any(len(r) != n or r.step != 1 for i, (r, n) in enumerate(zip(picks, x.shape)) if i != axis):
        return None
    r = picks[axis]
    return r.start if len(r) == 1 else None
