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
  (each a mean of its chunk, so the intermediate values stay in range), each stage reshaping
  to (rows, K / n, n) directly: a flat (rows, K) would be an axis past the 65536 limit.
"""
from __future__ import annotations

import functools
import warnings
import math

import numpy as np

from .. import dtypes
from ..hardware import limits
from ..ops._grad import zeros
from .args import _dim_or_axis, _need_float, minmax, norm_dim
from .base import TensorBase
from .movement import cat

NARROW_MAX = 16                       # longest float16 reduction left on the engine's reduce_sum
CAP = limits.MAX_CONTRACTION          # a matmul contraction every ANE family accepts


def axes_of(x, dim, op: str = "sum") -> tuple[int, ...]:
    """torch's `dim` (None, an int, or a sequence) as sorted, non-negative axes."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return tuple(range(x.ndim))
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    return tuple(sorted({norm_dim(d, x.ndim, op) for d in dims}))


def length(x, axes: tuple[int, ...]) -> int:
    return math.prod([x.shape[a] for a in axes])


def is_wide(x, axes: tuple[int, ...]) -> bool:
    """Whether a sum of x over axes takes the matmul route."""
    return x.dtype == dtypes.float16 and length(x, axes) > NARROW_MAX and x.numel() > 0


def reduce(x, dim=None, keepdim: bool = False, divisor: float = 1.0):
    """sum(x over dim) / divisor, by the route the reduced length calls for."""
    axes = axes_of(x, dim)                      # checks dim, as torch does, also for a 0-d x
    if x.ndim == 0:
        return x if divisor == 1 else x / float(divisor)
    layout = _layout(x, axes) if is_wide(x, axes) else None
    if layout is None:
        return _narrow(x, axes, keepdim, divisor)
    out = _wide(x, axes, divisor, layout)
    return out.reshape(_out_shape(x.shape, axes, keepdim))


def _narrow(x, axes, keepdim, divisor):
    attrs = {"axes": axes, "keep_dims": keepdim}
    if divisor == length(x, axes) and x.dtype.is_float:
        return x._record("reduce_mean", {"x": x}, attrs)
    s = x._record("reduce_sum", {"x": x}, attrs)
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


def _layout(x, axes) -> tuple | None:
    """(rows shape, stage lengths), or None when no legal matmul layout exists (a prime length
    above the cap, or too many kept axes to stage): those stay on reduce_sum."""
    k = length(x, axes)
    stages = _stages(k)
    kept = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    r = math.prod(kept)
    rows = (r,) if r <= limits.axis_bound() else kept
    if stages is None or len(rows) + 2 > limits.MAX_RANK and len(stages) > 1 or \
            k // stages[0] > limits.axis_bound():          # the first stage's rest is an axis
        return None
    return rows, stages


def _column(x, n: int, value: float, row: bool = False):
    return x._const(np.full((1, n) if row else (n, 1), value), x.dtype)


def _wide(x, axes, divisor, layout):
    rows, stages = layout
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
        return _column(x, k, value, row=True) @ x.reshape(k, rows[0])
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    flat = x.permute(kept + axes).reshape(rows + (k,))
    return flat @ _column(x, k, value)


def _staged(x, axes, rows, stages, values):
    """Contract the last `n` of the remaining length per stage, with that stage's column."""
    kept = tuple(i for i in range(x.ndim) if i not in axes)
    rest = math.prod(stages)
    y = x.permute(kept + axes)
    for n, value in zip(stages, values):
        # straight to (rows, rest, n): the flat (rows, k) between stages would be an axis over
        # the engine's limit whenever k is (the reason this length is staged at all)
        rest //= n
        y = (y.reshape(rows + (rest, n)) @ _column(x, n, value)).reshape(rows + (rest,))
    return y


# ---- the torch-level reductions built on it -----------------------------------------------
def _mean(x, dim=None, keepdim: bool = False):
    return reduce(x, dim, keepdim, float(length(x, axes_of(x, dim, "mean"))) if x.ndim else 1.0)


def var_mean(x, dim=None, keepdim: bool = False, correction=1) -> tuple:
    """Two passes: the mean, then the (wide) mean of squared deviations over K - correction.
    With K - correction <= 0 it warns and divides by zero, as torch does (torch: nan or inf;
    the engine, which never emits NaN, gives +0 for 0/0)."""
    axes = axes_of(x, dim, "var")
    dof = (length(x, axes) if x.ndim else 1) - correction
    if dof <= 0:
        warnings.warn("var(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the reduction factor (input numel divided by output numel).",
                      RuntimeWarning, stacklevel=3)
    if x.ndim == 0:
        return reduce(zeros(x), None, keepdim, float(dof)) if dof > 0 else zeros(x) / 0.0, x
    mu = _mean(x, dim, keepdim=True)
    if not length(x, axes):               # over a size-0 axis: NaN, as torch's (and the mean)
        return _mean(x, dim, keepdim), mu if keepdim else mu.reshape(_out_shape(x.shape, axes, False))
    centered = x - mu
    v = reduce(centered * centered, dim, keepdim, float(dof)) if dof > 0 else \
        reduce(centered * centered, dim, keepdim) / 0.0
    return v, mu if keepdim else mu.reshape(_out_shape(x.shape, axes, False))


# an arg-extremum's op -> the method giving the extremum it points at
_EXTREMUM_OF = {"reduce_argmax": "amax", "reduce_argmin": "amin"}


class ReduceMixin(TensorBase):
    """Reductions: sum, mean, var, max, argmax, prod, norm, softmax, ..."""
    __slots__ = ()

    def softmax(self, dim: int | None = None, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "softmax", required=True)
        dim = norm_dim(dim, self.ndim, "softmax")
        return _need_float(self, "softmax")._unary("softmax", axis=dim)

    def var(self, dim=None, keepdim: bool = False, correction: int = 1, unbiased=None, *,
            axis=None) -> "Tensor":
        """Variance with Bessel's correction by default (`correction`, or torch's older
        `unbiased`), as torch. Two passes: the mean, then the mean of squared deviations over
        N - correction, both through the engine's wide matmul accumulator when the reduced
        length would make its fp16 reduce_sum lossy (aneforge.tensor.reduce). A variance whose
        magnitude is below 2**-14 reads 0 on M1 (its matmul output port flushes; M5 keeps it).

        >>> import aneforge as af
        >>> af.tensor([1.0, 2.0, 3.0, 4.0]).var().item()
        1.666...
        """
        dim = _dim_or_axis(dim, axis, "var")
        correction = int(unbiased) if unbiased is not None else correction
        axes_of(self, dim, "var")           # torch checks dim before dtype
        return var_mean(_need_float(self, "var"), dim, keepdim, correction)[0]

    def std(self, dim=None, keepdim: bool = False, correction: int = 1, unbiased=None, *,
            axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "std")
        v = self.var(dim, keepdim, correction, unbiased)
        return v if not self.numel() else v.sqrt()   # empty: var's NaN (none enters the ANE)

    def any(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "any")
        if not self.numel():                  # an empty tensor: torch's any is False
            return self._as_tensor(np.full(_out_shape(self.shape, axes_of(self, dim), keepdim), False))
        return (self != 0).to(dtypes.float16).amax(dim, keepdim) > 0.5

    def all(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "all")
        if not self.numel():                  # an empty tensor: torch's all is True
            return self._as_tensor(np.full(_out_shape(self.shape, axes_of(self, dim), keepdim), True))
        return (self != 0).to(dtypes.float16).amin(dim, keepdim) > 0.5

    def log_softmax(self, dim: int | None = None, *, axis=None) -> "Tensor":
        """x - max - log(sum(exp(x - max))): stable, built from registered ops. The max is
        detached: its exact gradient is zero, and through fp16 it is a cancellation
        (-sum(g) + sum(g) * sum(softmax)) that lands on the argmax (torch's rule has no such term)."""
        dim = _dim_or_axis(dim, axis, "log_softmax", required=True)
        norm_dim(dim, self.ndim, "log_softmax")
        x = _need_float(self, "log_softmax")
        if x.ndim == 0:
            return zeros(x)
        shifted = (x - x.amax(dim, keepdim=True).detach()).movedim(dim, -1)
        # The sum and its broadcast back are matmuls with ones: the forward sum, and the
        # gradient's sum of the cotangent over the axis, run in the wide accumulator (a narrow
        # fp16 sum of K cotangents is off by ~sqrt(K) ulps of the running sum).
        k = x.shape[dim]
        total = shifted.exp() @ self._const(np.ones((k, 1)), x.dtype)
        lse = total.log() @ self._const(np.ones((1, k)), x.dtype)
        return (shifted - lse).movedim(-1, dim)

    def _reduce(self, op: str, dim, keepdim: bool) -> "Tensor":
        if self.dtype == dtypes.bool_:      # MIL reduces numbers: the max of bools is any()
            return self.half()._reduce(op, dim, keepdim) > 0.5
        axes = tuple(dim) if isinstance(dim, (tuple, list)) else () if dim is None else (dim,)
        axes = tuple(norm_dim(a, self.ndim, op) for a in axes) or None   # none: every axis
        if self.ndim == 0:
            return self
        return self._record(op, {"x": self}, {"axes": axes, "keep_dims": keepdim})

    def sum(self, dim=None, keepdim: bool = False, dtype=None, *, axis=None) -> "Tensor":
        """Sum over `dim` (every axis by default). A float16 sum of more than 16 elements runs
        as a matmul with a column of 0.5 (then doubled): the engine's matmul accumulates wide,
        its reduce_sum in fp16 (aneforge.tensor.reduce has the route and its thresholds). Sums up
        to fp16's 65504 are right; beyond, inf as in torch's float16.

        >>> import aneforge as af
        >>> af.ones(4096).sum().item()
        4096.0
        """
        dim = _dim_or_axis(dim, axis, "sum")
        x = self.to(dtype) if dtype is not None else self.int() if self.dtype == dtypes.bool_ else self
        return reduce(x, dim, keepdim)

    def mean(self, dim=None, keepdim: bool = False, dtype=None, *, axis=None) -> "Tensor":
        """Mean over `dim` (every axis by default), of self cast to `dtype` first if given (as
        torch: an integer tensor needs a floating `dtype`). A float16 mean of more than 16
        elements is a matmul with a column of 1/N (the wide accumulator,
        aneforge.tensor.reduce): right while the mean is below 32768 (the port's inf); a mean
        below 2**-14 in magnitude reads 0 on M1.

        >>> import aneforge as af
        >>> (af.ones(4096) * 3).mean().item()
        3.0
        >>> af.tensor([1, 2]).mean(dtype=af.float16).item()
        1.5
        """
        dim = _dim_or_axis(dim, axis, "mean")
        axes_of(self, dim, "mean")          # torch checks dim before dtype
        x = self.to(dtype) if dtype is not None else self
        return _mean(_need_float(x, "mean"), dim, keepdim)

    def amax(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "amax")
        return self._reduce("reduce_max", dim, keepdim)

    def amin(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "amin")
        return self._reduce("reduce_min", dim, keepdim)

    def _extremum(self, reduce, arg, elementwise, dim, keepdim):
        if isinstance(dim, TensorBase):
            return elementwise(self, dim)
        if dim is None:
            return reduce(self)
        return minmax(reduce(self, dim, keepdim), arg(self, dim, keepdim))

    def max(self, dim=None, keepdim: bool = False, *, axis=None):
        """max() -> the largest value; max(dim) -> (values, indices); max(tensor) -> elementwise."""
        dim = _dim_or_axis(dim, axis, "max")
        return self._extremum(type(self).amax, type(self).argmax, type(self).maximum, dim, keepdim)

    def min(self, dim=None, keepdim: bool = False, *, axis=None):
        """min() -> the smallest value; min(dim) -> (values, indices); min(tensor) -> elementwise."""
        dim = _dim_or_axis(dim, axis, "min")
        return self._extremum(type(self).amin, type(self).argmin, type(self).minimum, dim, keepdim)

    def _arg(self, op: str, dim, keepdim: bool) -> "Tensor":
        if self.dtype == dtypes.bool_:
            return self.half()._arg(op, dim, keepdim)
        if self.ndim == 0:                  # MIL reduces rank >= 1: argmax of a scalar is 0
            if dim is not None:
                norm_dim(dim, 0, op)
            return self._record(op, {"x": self.reshape(1)}, {"axis": 0, "keep_dims": False})
        if dim is not None:
            dim = norm_dim(dim, self.ndim, op.replace("reduce_", ""))
        if dim is None:           # the index into the flattened tensor
            flat = self._flat_arg(op)
            return flat.reshape((1,) * self.ndim) if keepdim else flat
        return self._record(op, {"x": self}, {"axis": dim, "keep_dims": keepdim})

    def _flat_arg(self, op: str) -> "Tensor":
        """The flat index of the first extremum. Past the axis limit the flattened tensor is no
        legal value, so the last axis is reduced first (its index and extremum per row), then
        the rows' extrema (recursively), and the two indices combine: the first row holding
        the extremum, its first position, as the flat search finds."""
        n = self.shape[-1]
        if self.numel() <= limits.axis_bound():
            return self._record(op, {"x": self.reshape(-1)}, {"axis": 0, "keep_dims": False})
        at = self._record(op, {"x": self}, {"axis": self.ndim - 1, "keep_dims": False})
        best = getattr(self, _EXTREMUM_OF[op])(-1)
        row = best._flat_arg(op)
        places = self._const(np.arange(best.numel()).reshape(best.shape), dtypes.int32)
        return row * n + ((places == row).int() * at).sum()

    def argmax(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        """Index of the largest value (int32; the first one on ties)."""
        dim = _dim_or_axis(dim, axis, "argmax")
        return self._arg("reduce_argmax", dim, keepdim)

    def argmin(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "argmin")
        return self._arg("reduce_argmin", dim, keepdim)

    def prod(self, dim=None, keepdim: bool = False, dtype=None, *, axis=None) -> "Tensor":
        """Product of the elements (all, or along `dim`), as a tree of multiplications of the
        two halves (log2 n roundings, and the exact product gradient even at zeros).

        >>> import aneforge as af
        >>> af.prod(af.tensor([[1.0, 2.0], [3.0, 4.0]]), 1).tolist()
        [2.0, 12.0]
        """
        dim = _dim_or_axis(dim, axis, "prod")
        x = self.to(dtype) if dtype is not None else self.int() if self.dtype == dtypes.bool_ else self
        if x.ndim == 0:
            return x
        if dim is None and x.numel() > limits.axis_bound():   # no flat axis past the limit:
            while x.ndim > 1:                                  # one legal axis at a time
                x = x.prod(-1)
            return x.prod(0, keepdim).reshape((1,) * self.ndim) if keepdim else x.prod(0)
        d = 0 if dim is None else dim % x.ndim
        x = x.reshape(-1) if dim is None else x
        while x.shape[d] > 1:
            n, half = x.shape[d], x.shape[d] // 2
            pairs = x.narrow(d, 0, half) * x.narrow(d, half, half)
            x = cat([pairs, x.narrow(d, n - 1, 1)], d) if n % 2 else pairs
        if dim is None:
            return x.reshape((1,) * self.ndim) if keepdim else x.reshape(())
        return x if keepdim else x.squeeze(d)

    def logsumexp(self, dim: int | None = None, keepdim: bool = False, *, axis=None) -> "Tensor":
        """log(sum(exp(x))) along `dim`, shifted by the (detached) max for stability.

        >>> import aneforge as af
        >>> af.logsumexp(af.tensor([0.0, 0.0]), 0).item()
        0.69...
        """
        dim = _dim_or_axis(dim, axis, "logsumexp", required=True)
        x = self._floating()
        m = x.amax(dim, keepdim=True).detach()
        out = (x - m).exp().sum(dim, keepdim=True).log() + m
        return out if keepdim else out.squeeze(dim)

    def norm(self, p="fro", dim=None, keepdim: bool = False, dtype=None) -> "Tensor":
        """The vector p-norm over `dim` (all elements by default): p = 'fro' or 2, 1, inf,
        -inf, 0 or any other number; sums of powers run in fp32 (no fp16 overflow of x^2).

        >>> import aneforge as af
        >>> af.tensor([3.0, 4.0]).norm().item()
        5.0
        """
        x = self._floating() if dtype is None else self.to(dtype)
        a = x.abs()
        if p in ("fro", 2, 2.0):
            return (a.float() * a.float()).sum(dim, keepdim=keepdim).sqrt().to(x.dtype)
        if p == float("inf"):
            return a.amax(dim, keepdim)
        if p == float("-inf"):
            return a.amin(dim, keepdim)
        if p == 0:
            return (a != 0).to(x.dtype).sum(dim, keepdim=keepdim)
        if p == 1:
            return a.float().sum(dim, keepdim=keepdim).to(x.dtype)
        if isinstance(p, str):
            raise ValueError(f"norm: p={p!r} is not supported; use 'fro' or a number")
        return (a.float() ** float(p)).sum(dim, keepdim=keepdim).pow(1.0 / p).to(x.dtype)

    def count_nonzero(self, dim=None) -> "Tensor":
        """The number of non-zero elements (all, or along `dim`), int32.

        >>> import aneforge as af
        >>> af.count_nonzero(af.tensor([[0, 1], [2, 3]]), 1).tolist()
        [1, 2]
        """
        return (self != 0).sum(dim)
