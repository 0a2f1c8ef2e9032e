"""fuse_gelu_tanh_approximation (numeric)."""
from __future__ import annotations

import math

from .graph import fuse, half_x_times, other_operand, prev, producer
from .registry import register


@register("fuse_gelu_tanh_approximation", exact=False)
def fuse_gelu_tanh_approximation(graph) -> int:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) is gelu(mode=TANH_APPROXIMATION).
    x^3 may be pow(x, 3) or x * x * x.

        [x] -> pow(3) -> mul(0.044715) -> add(x) -> mul(0.7979) -> tanh -> add(1)
            -> mul(0.5) -> mul(x) -> [...]          (the tail as in fuse_gelu_exact)

        [x] -> gelu(mode="TANH_APPROXIMATION") -> [...]
    """
    n = 0
    for op in graph.walk():
        if op.type != "tanh":
            continue
        scaled = prev(op.inputs["x"], ("mul",), const=math.sqrt(2 / math.pi))
        inner = producer(scaled[1], "add") if scaled is not None else None
        found = _x_plus_cubic(inner) if inner is not None else None
        tail = half_x_times(graph, op.outputs[0], found[0]) if found is not None else None
        if tail is not None:
            chain = found[1] + [inner, scaled[0], op] + tail[1]
            n += fuse(graph, chain, "gelu", {"x": found[0]}, mode="TANH_APPROXIMATION")
    return n


def _x_plus_cubic(add):
    """(x, [ops of 0.044715 x^3]) if add = x + 0.044715 x^3 (either operand order)."""
    for c in (add.inputs["x"], add.inputs["y"]):
        k = prev(c, ("mul",), const=0.044715)
        x = other_operand(add, c)
        cube = _cube(k[1], x) if k is not None else None
        if cube is not None:
            return x, cube + [k[0]]
    return None


def _cube(v, x):
    p = prev(v, ("pow",), const=3.0)
    if p is not None and p[1] is x:
        return [p[0]]
    m = producer(v, "mul")
    if m is None or x not in (m.inputs["x"], m.inputs["y"]):
        return None
    sq = producer(other_operand(m, x), "mul")
    return [sq, m] if sq is not None and sq.inputs["x"] is x and sq.inputs["y"] is x else None
