"""fold_scalar_multiplies (exact)."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..hardware.kernels.reference import round16
from ..ops.registry import layout_ops
from .graph import binary_with_const, producer, splat
from .registry import register

_MOVES = layout_ops("same_order")          # reshape, expand_dims, squeeze: no value changes
_PORTED = ("matmul", "linear")             # fp16 results bounded by the matmul output port
_F16_MAX = 65504.0


@register("fold_scalar_multiplies", exact=True)
def fold_scalar_multiplies(graph) -> int:
    """Two scalar multiplies with only reshapes between them become one, where the first
    is exact: m * a with a = +-1, or a = +-2 on a matmul's fp16 result (the output port keeps
    |m| <= 32752, so 2m never overflows, and doubling any fp16 value below that is exact). Then
    (m * a) * b is the one product m * (a * b) in float32, rounded once, as before. The wide
    sum's route (`x.sum(-1) / n`: matmul with a column of 0.5, times 2, a reshape, times 1/n
    once divide_to_multiply ran) keeps one multiply instead of two.

        before                                       after
        %m = matmul(x=%x, y=%half)                   %m = matmul(x=%x, y=%half)
        %d = mul(x=%m, y=2.0)                        %d = mul(x=%m, y=0.25)
        %r = reshape(x=%d, shape=[4])                %r = reshape(x=%d, shape=[4])
        %s = mul(x=%r, y=0.125)
    """
    n = 0
    for op in graph.walk("mul"):
        pair = binary_with_const(op, ("mul",))
        b = None if pair is None else splat(pair[1])
        if b is None or not np.isfinite(b) or b == 0 or op.outputs[0].dtype != dtypes.float16:
            continue
        inner = _inner(graph, pair[0], op)
        folded = None if inner is None else _folded(graph, inner, b)
        if folded is None:
            continue
        graph.set_input(inner, "y" if inner.inputs["y"] is folded[1] else "x",
                        graph.const(np.asarray(folded[0], np.float16), before=inner))
        n += graph.replace_op(op, [pair[0]])
    return n


def _inner(graph, v, reader):
    """The multiply whose result reaches `reader` through reshapes only, each value read once."""
    while graph.only_use(v) is reader:
        op = producer(v)
        if op is None or op.type not in _MOVES | {"mul"}:
            return None
        if op.type == "mul":
            return op
        v, reader = op.inputs["x"], op
    return None


def _folded(graph, inner, b: float):
    """(a * b, a's const) when inner = m * a is exact for every m it can see and a * b is an
    fp16 number; else None."""
    pair = binary_with_const(inner, ("mul",))
    a = None if pair is None else splat(pair[1])
    if a is None or abs(a) not in (1.0, 2.0) or pair[0].dtype != dtypes.float16:
        return None
    if abs(a) == 2.0 and 2.0 * _ported_bound(graph, pair[0]) > _F16_MAX:
        return None
    ab = np.float32(a) * np.float32(b)              # a power of two: exact in float32
    if not abs(ab) <= _F16_MAX or np.float32(np.float16(ab)) != ab:
        return None
    return float(ab), pair[1]


def _ported_bound(graph, m) -> float:
    """The largest |m| a matmul or linear stores (the fp16 rounding of the largest float32
    below the port's overflow), inf for other producers or without an overflow."""
    limit = graph.numerics.matmul_overflow
    if producer(m, *_PORTED) is None or limit is None:
        return np.inf
    below = np.nextafter(np.float32(limit), np.float32(0))
    return float(round16(np.array([below], np.float32), graph.numerics.store_mode)[0])
