"""Which runs of a program's steps a run plan (runtime/plan.py) fuses, and how: the opcode of
each fusable op (`FUSED`, `REDUCE`), what it can prove about an int value's range (`BOUNDS`,
`exact`: float32 holds it exactly), the shape of a fusable reduction (`reduction`) and the
segments consecutive fusable steps form (`segments`: blocked or not)."""
from __future__ import annotations

import math
import operator

import numpy as np

from .. import dtypes
from ..ops import REGISTRY
from ..ops.registry import WHOLE, layout_ops

# MIL op -> (opcode under IEEE specials, opcode under the engine's specials): the ops whose
# numpy kernel is one IEEE float32 operation per element, or a copy (`OpDef.fused`)
FUSED = {name: op.fused for name, op in REGISTRY.items() if op.fused}
# reductions over trailing axes -> (opcode with an fp32 accumulator, with the narrow fp16 one)
REDUCE = {name: op.fold for name, op in REGISTRY.items() if op.fold}


def _hull(*bounds):
    return min(b[0] for b in bounds), max(b[1] for b in bounds)


def _corners(f, x, y):
    return _hull(*[(v, v) for v in (f(x[0], y[0]), f(x[0], y[1]), f(x[1], y[0]), f(x[1], y[1]))])


# MIL op -> the range of its int result from its inputs' ranges (lo, hi): what the plan can
# prove about an int value (bool results are 0 / 1 whatever their op)
BOUNDS = {
    "add": lambda x, y: (x[0] + y[0], x[1] + y[1]),
    "sub": lambda x, y: (x[0] - y[1], x[1] - y[0]),
    "mul": lambda x, y: _corners(operator.mul, x, y),
    "maximum": lambda x, y: _corners(max, x, y),
    "minimum": lambda x, y: _corners(min, x, y),
    "abs": lambda x: (max(0, x[0], -x[1]), max(-x[0], x[1])),
    "select": lambda cond, a, b: _hull(a, b),
    "cast": lambda x: x,            # an int to an int: `exact` checks the range fits its dtype
    # data movement: the input's values, moved or repeated
    **{name: lambda x: x for name in layout_ops(*WHOLE)},
}
EXACT = 1 << 24            # float32 holds every integer up to this
# elementwise ops a chain of one value's functions may hold (`RunPlan._composites`), besides
# the pointwise ones run as lookups: the fused ones that compute (an exact one only copies or
# selects: a table saves nothing). Comparisons and logical_not are here too, but their bool
# results never join an fp16 chain.
CHAINED = {name for name, op in REGISTRY.items() if op.fused and op.elementwise and not op.exact}

# elements per block of a blocked run: 16 KB a value, so a run's live blocks stay in the level-2
# cache, and long enough that each op's ~40 ns of setup per block is small (1024-element blocks
# spent a third of an AdamW update's time there)
BLOCK = 4096

# the reductions' opcodes (and `RunPlan._peaks`' absmax): never in a blocked run (`segments`)
FOLDS = {name for pair in REDUCE.values() for name in pair} | {"absmax"}


def exact(dtype, bound) -> bool:
    """Whether float32 holds every value of an int or bool `dtype` within `bound` exactly,
    and the dtype holds them (no wrap-around)."""
    if dtype == dtypes.bool_:
        return True
    if dtype.np.kind not in "iu":
        return False
    info = np.iinfo(dtype.np)
    return max(info.min, -EXACT) <= bound[0] and bound[1] <= min(info.max, EXACT)


def reduction(shape, axes, leading: bool):
    """A reduction of a contiguous value over `axes` as (R, C, [(rs, cs)]): R results, result
    r over the C elements r * rs + c * cs. The reduced axes (of size > 1) must all come after
    the kept ones (rs = C, cs = 1) or, if `leading`, all before them (rs = 1, cs = R); else
    None."""
    axes = range(len(shape)) if axes is None else {a % len(shape) for a in axes}
    kept = [i for i, n in enumerate(shape) if n != 1 and i not in axes]
    folded = [i for i, n in enumerate(shape) if n != 1 and i in axes]
    if 0 in shape:
        return None
    cols = math.prod(shape[i] for i in folded)
    rows = math.prod(shape) // cols
    if not kept or not folded or max(kept) < min(folded):
        return rows, cols, [(cols, 1)]
    if leading and max(folded) < min(kept):
        return rows, cols, [(1, rows)]
    return None


def segments(shapes, names, repeat) -> list:
    """For each step: None (runs its own kernel), or (segment number, blocked). A segment is
    a maximal run of consecutive fusable steps; it is blocked when every op in it is an
    elementwise one over one flat range of the same length (operands contiguous or one value)
    of at least 2 BLOCK, with no outer loop (`repeat`). A blocked run of at most `SHORT`
    steps next to an unblocked fusable step runs unblocked, in that step's segment: blocking
    it would keep no value in cache (it has almost none to keep), and a segment more costs a
    call (~2 us; a training step's bias add, GELU and AdamW's scalar math otherwise alternate
    between the two kinds). Same ops, same order per element: the same bits."""
    def key(k):
        rows, cols, st, _ = shapes[k]
        flat = rows == 1 and all(cs in (0, 1) for _, cs in st) and names[k] not in FOLDS \
            and k not in repeat
        return cols if flat and cols >= 2 * BLOCK else None
    keys = [None if loops is None else key(k) for k, loops in enumerate(shapes)]
    _demote_short(shapes, keys)
    out, number = [], 0
    for k, loops in enumerate(shapes):
        if loops is None:
            out.append(None)
            continue
        if not (k and shapes[k - 1] is not None and keys[k - 1] == keys[k]):
            number += 1
        out.append((number, keys[k] is not None))
    return out


SHORT = 2          # blocked runs this short join an unblocked neighbour (`segments`)


def _demote_short(shapes, keys) -> None:
    """Unblock (key None) each blocked run of at most `SHORT` steps that has an unblocked
    fusable step right before or after it."""
    k, n = 0, len(keys)
    while k < n:
        end = k + 1
        while keys[k] is not None and end < n and shapes[end] is not None and \
                keys[end] == keys[k]:
            end += 1
        if keys[k] is not None and end - k <= SHORT and any(
                0 <= j < n and shapes[j] is not None and keys[j] is None for j in (k - 1, end)):
            keys[k:end] = [None] * (end - k)
        k = end
