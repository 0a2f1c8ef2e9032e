"""Sums the way torch users expect them on the ANE: the one place a torch-level sum picks its route.

The engine's `reduce_sum` (and `reduce_mean`) keeps an fp16 running sum, one rounding per added
term (sbryngelson/ane-guide, numerics chapter): once the running sum is large, small addends are
lost (a sum of ones stalls at 2048; the variance of 13125 standard-normal values reads ~0.7). Its
matmul accumulates wide (4-lane tiles, then an fp32-class sum across tiles; same source), so a sum
over K elements is computed as `x @ column(K, 1)`, the reduced axes brought last (or first, as
`row @ x`, when they lead).

The route: a float16 reduction longer than `NARROW_MAX` = 16 elements goes through the matmul;
up to 16 the narrow sum stays (one op, no transpose). Measured on the simulator, 512 rows per
length, rms error against the exact sum in fp16 ulps of sum|x| (`examples/reduction_accuracy.py`):

    K                     8     16     32     64    256   1024   4096
    narrow, x**2 terms  0.54   0.79   0.96   1.38   3.57   17.8    120
    M1 tile model       0.54   0.52   0.51   0.51   0.52   0.54   0.52

(signed normal terms: ~0.3 ulps narrow at every K, since the running sum only grows like
sqrt(K)). Up to 16 terms the narrow sum is within 1.5x of the matmul, whose first 4-lane tile
adds with a 12-bit truncating adder that rounds no better than fp16; beyond it degrades like
sqrt(K) and then breaks down once addends fall under half an ulp of the running sum. Integer
sums keep `reduce_sum` (exact), and so do float32 ones: the numerics model accumulates an fp32
reduce_sum in fp32; how the engine runs fp32 inside a program is not publicly measured.

The column's value, and what the matmul output port allows (32752 passes, 2**15 = 32768 and
above read inf, and on M1 |r| < 2**-14 is flushed to zero; ane-guide datapath chapter):
- a sum uses a column of 0.5 and doubles the result (both exact): sums up to fp16's own 65504
  come out right; only |sum| < 2**-13 is flushed on M1.
- a mean (or a variance, divisor K - correction) uses a column of 1/divisor: the result never
  exceeds the largest input, so it overflows only if the mean itself reaches 32768. A mean of
  magnitude below 2**-14 (6.1e-5) reads 0 on M1 (kept on M5). One rounding of 1/divisor (exact
  for powers of two) plus the output rounding, as many as dividing after the sum, without the
  sum's overflow.
- reductions longer than the engine's contraction cap (16384) run in stages of at most 16384
  (each a mean of its chunk, so the intermediate values stay in range).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from . import dtypes, limits
from .tensor import Tensor, const, norm_dim, record_op

NARROW_MAX = 16                       # longest float16 reduction left on the engine's reduce_sum
CAP = limits.MAX_CONTRACTION          # a matmul contraction every ANE family accepts


def axes_of(x: Tensor, dim, op: str = "sum") -> tuple[int, ...]:
    """torch's `dim` (None, an int, or a sequence) as sorted, non-negative axes."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return tuple(range(x.ndim))
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    return tuple(sorted({norm_dim(d, x.ndim, op) for d in dims}))


def length(x: Tensor, axes: tuple[int, ...]) -> int:
    return math.prod([x.shape[a] for a in axes])


def is_wide(x: Tensor, axes: tuple[int, ...]) -> bool:
    """Whether a sum of x over axes takes the matmul route."""
    return x.dtype == dtypes.float16 and length(x, axes) > NARROW_MAX and x.numel() > 0


def reduce(x: Tensor, dim=None, keepdim: bool = False, divisor: float = 1.0) -> Tensor:
    """sum(x over dim) / divisor, by the route the reduced length calls for."""
    axes = axes_of(x, dim)                      # checks dim, as torch does, also for a 0-d x
    if x.ndim == 0:
        return x if divisor == 1 else x / float(divisor)
    plan = _plan(x, axes) if is_wide(x, axes) else None
    if plan is None:
        return _narrow(x, axes, keepdim, divisor)
    out = _wide(x, axes, divisor, plan)
    return out.reshape(_out_shape(x.shape, axes, keepdim))


def _narrow(x, axes, keepdim, divisor):
    attrs = {"axes": axes, "keep_dims": keepdim}
    if divisor == length(x, axes) and x.dtype.is_float:
        return record_op("reduce_mean", {"x": x}, attrs)
    s = record_op("reduce_sum", {"x": x}, attrs)
    return s if divisor == 1 else s / float(divisor)


def _out_shape(shape, axes, keepdim):
    if keepdim:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


@functools.lru_cache(maxsize=256)
def _stages(k: int) -> tuple[int, ...] | None:
    """k as a product of contraction lengths of at most CAP (the largest first), or None."""
    out = []
    while k > CAP:
        d = next((d for d in range(CAP, 1, -1) if k % d == 0), None)
        if d is None:
            return None
        out.append(d)
        k //= d
    return tuple(out) + (k,)


def _plan(x: Tensor, axes) -> tuple | None:
    """(rows shape, stage lengths), or None when no legal matmul layout exists (a prime length
    above the cap, or too many kept axes to stage): those stay on reduce_sum."""
    k = length(x, axes)
    stages = _stages(k)
    kept = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    r = math.prod(kept)
    rows = (r,) if r <= limits.axis_bound() else kept
    if stages is None or len(rows) + 2 > limits.MAX_RANK and len(stages) > 1:
        return None
    return rows, stages


def _column(n: int, value: float, dtype, row: bool = False) -> Tensor:
    return const(np.full((1, n) if row else (n, 1), value), dtype)


def _wide(x: Tensor, axes, divisor, plan) -> Tensor:
    rows, stages = plan
    k = length(x, axes)
    if divisor == 1:              # halved, then doubled (exact): sums up to 65504 pass the port
        values, post = (0.5,) + (1.0,) * (len(stages) - 1), 2.0
    elif len(stages) == 1 and divisor <= CAP:            # 1/divisor is a normal fp16
        values, post = (1.0 / divisor,), 1.0
    else:                                                # each stage a mean of its chunk
        values, post = tuple(1.0 / n for n in stages), k / divisor
    out = _one_stage(x, axes, rows, k, values[0]) if len(stages) == 1 else \
        _staged(x, axes, rows, stages, values)
    return out if post == 1.0 else out * post


def _one_stage(x, axes, rows, k, value):
    if axes == tuple(range(len(axes))) and len(rows) == 1:      # leading axes: row @ x
        return _column(k, value, x.dtype, row=True) @ x.reshape(k, rows[0])
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    flat = x.permute(kept + axes).reshape(rows + (k,))
    return flat @ _column(k, value, x.dtype)


def _staged(x, axes, rows, stages, values):
    """Contract the last `n` of the remaining length per stage, with that stage's column."""
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    rest = math.prod(stages)
    y = x.permute(kept + axes).reshape(rows + (rest,))
    for n, value in zip(stages, values):
        rest //= n
        y = (y.reshape(rows + (rest, n)) @ _column(n, value, x.dtype)).reshape(rows + (rest,))
    return y


# ---- the torch-level reductions built on it -----------------------------------------------
def sum(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return reduce(x, dim, keepdim)


def mean(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return reduce(x, dim, keepdim, float(length(x, axes_of(x, dim, "mean"))) if x.ndim else 1.0)


def var_mean(x: Tensor, dim=None, keepdim: bool = False, correction=1) -> tuple[Tensor, Tensor]:
    """Two passes: the mean, then the (wide) mean of squared deviations over K - correction.
    With K - correction <= 0 it warns and divides by zero, as torch does (torch: nan or inf;
    the engine, which never emits NaN, gives +0 for 0/0)."""
    axes = axes_of(x, dim, "var")
    dof = (length(x, axes) if x.ndim else 1) - correction
    if dof <= 0:
        import warnings
        warnings.warn("var(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the reduction factor (input numel divided by output numel).",
                      RuntimeWarning, stacklevel=3)
    if x.ndim == 0:
        return reduce(x - x, None, keepdim, float(dof)) if dof > 0 else (x - x) / 0.0, x
    mu = mean(x, dim, keepdim=True)
    centered = x - mu
    v = reduce(centered * centered, dim, keepdim, float(dof)) if dof > 0 else \
        reduce(centered * centered, dim, keepdim) / 0.0
    return v, mu if keepdim else mu.reshape(_out_shape(x.shape, axes, False))
