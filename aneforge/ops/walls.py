"""Graphs the ANE compiler rejects although they are valid MIL: a reduce_sum/reduce_mean output
multiplied by exactly 0 (or a constant that rounds to 0 in fp16) fails ANECCompile (the ANEForge
project, github.com/sbryngelson/ANEForge, `docs/developer/autograd.md` and `docs/mil-primer.md`).

Every backend checks these at compile time, so a program that runs on the simulator is one
that compiles on the engine. They live beside the ops (they need op semantics, not a backend)
so that the MIL readers (mil/), the backends (runtime/) and the passes (rewrite_reduce_times_zero
reads `source_op` and `is_zero_const`) all import them from below.
"""
from __future__ import annotations

import numpy as np

from ..errors import CompileWallError
from .registry import WHOLE, is_literal, layout_ops

# Ops whose result holds nothing but their input's values (moved, repeated): a value seen
# through them is still the reduce's output.
_TRANSPARENT = layout_ops(*WHOLE)


def source_op(var):
    """The op making `var`, seen through ops that only move data (None for an input)."""
    while var.op is not None and var.op.type in _TRANSPARENT:
        var = var.op.inputs["x"]
    return var.op


def is_zero_const(var) -> bool:
    """Whether `var` is (data movement of) a float const that is 0 once rounded to fp16."""
    op = source_op(var)
    if op is None or not is_literal(op.type):
        return False
    val = op.attrs["val"]
    # |v| <= 2**-25 rounds to 0 in fp16 (half the smallest subnormal, ties to even)
    return val.dtype.kind == "f" and not np.any(np.abs(val.astype(np.float64)) > 2.0 ** -25)


def check_reduce_times_zero(program) -> None:
    """mul(reduce_*(...), 0) fails ANECCompile, also when the multiplier underflows fp16 to 0."""
    for op in program.operations:
        if op.type != "mul":
            continue
        x, y = op.inputs["x"], op.inputs["y"]
        for a, b in ((x, y), (y, x)):
            src = source_op(a)
            if src is not None and src.type.startswith("reduce_") and is_zero_const(b):
                raise CompileWallError(
                    f"op {op.name!r}: mul({src.type} output, 0) fails the ANE compiler "
                    f"(ANECCompile), also when the multiplier underflows fp16 to 0. Build zeros "
                    f"as sub(x, x) and constants as add(sub(x, x), c) instead of multiplying by 0.")


WALLS = (check_reduce_times_zero,)


def check_walls(program) -> None:
    for wall in WALLS:
        wall(program)
