"""Reductions (MIL iOS15 reduction.py). reduce_sum and reduce_mean accumulate in fp16, one
rounding per term (ANEForge `docs/developer/numerics.md`: "matmul accumulates wide but reduce_sum accumulates narrow"), so
an integer sum is exact only up to 2048 (ANEForge `docs/numeric-cliffs.md`). `Numerics.reduce_accumulate="wide"` switches
to an fp32 accumulator."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..hardware import kernels
from ._common import NUMERIC, norm_axes, norm_axis, require_dtype, same_type
from ._grad import attach, expand_reduced, where, zeros
from .registry import Attr, define


def _reduced_shape(shape, axes, keep_dims):
    if keep_dims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _reduce_infer(name):
    def infer(t, attrs):
        require_dtype(name, t, "x", NUMERIC)
        x = t["x"]
        axes = tuple(range(x.rank)) if attrs["axes"] is None else norm_axes(name, t, attrs["axes"], x.rank)
        return same_type(_reduced_shape(x.shape, axes, attrs["keep_dims"]), x.dtype)
    return infer


def _axes(x, axes):
    return tuple(range(x.ndim)) if axes is None else tuple(a % x.ndim for a in axes)


def narrow_sum(nm, x: np.ndarray, axes) -> np.ndarray:
    """Sum over `axes` with a running fp16 accumulator (one rounding per added term), the
    terms taken in C order of the reduced axes."""
    moved = np.moveaxis(x, axes, tuple(range(len(axes))))
    terms = moved.reshape((-1,) + moved.shape[len(axes):])
    return kernels.narrow_sum(terms, nm.mode)


def _sum(ctx, x, axes):
    axes = _axes(x, axes)
    if ctx.in_dtypes[0] == dtypes.float16 and ctx.numerics.reduce_accumulate == "fp16" and x.size:
        return narrow_sum(ctx.numerics, x, axes)
    return x.sum(axis=axes)


def _keep(r, x, axes, keep_dims):
    return r.reshape(_reduced_shape(x.shape, _axes(x, axes), True)) if keep_dims else r


def _sum_sim(ctx, x, axes, keep_dims):
    with np.errstate(all="ignore"):
        return _keep(_sum(ctx, x, axes), x, axes, keep_dims)


def _mean_sim(ctx, x, axes, keep_dims):
    count = math.prod([x.shape[a] for a in _axes(x, axes)])
    with np.errstate(all="ignore"):
        return _keep(_sum(ctx, x, axes) / np.float32(count), x, axes, keep_dims)


def _extremum_sim(fn):
    def sim(nm, x, axes, keep_dims):
        return fn(x, axis=_axes(x, axes), keepdims=keep_dims)
    return sim


REDUCE_ATTRS = {"axes": Attr("ints", None), "keep_dims": Attr("bool", False)}
# name: (kernel, exact, the fused-VM opcodes with an fp32 and with an fp16 accumulator)
REDUCTIONS = {
    "reduce_sum": (_sum_sim, False, ("sum", "sum16")),
    "reduce_mean": (_mean_sim, False, ("mean", "mean16")),
    "reduce_max": (_extremum_sim(np.max), True, ("max", "max")),
    "reduce_min": (_extremum_sim(np.min), True, ("min", "min")),
}
for _name, (_sim, _exact, _fold) in REDUCTIONS.items():
    define(_name, ("x",), _reduce_infer(_name), _sim, attrs=dict(REDUCE_ATTRS), exact=_exact,
           fold=_fold)


def _arg_infer(name):
    def infer(t, attrs):
        require_dtype(name, t, "x", NUMERIC)
        x = t["x"]
        axis = norm_axis(name, t, attrs["axis"], x.rank)
        return same_type(_reduced_shape(x.shape, (axis,), attrs["keep_dims"]), dtypes.int32)
    return infer


def _arg_sim(fn):
    def sim(nm, x, axis, keep_dims):      # the first index on ties, as torch
        return fn(x, axis=axis, keepdims=keep_dims).astype(np.int32)
    return sim


for _name, _fn in (("reduce_argmax", np.argmax), ("reduce_argmin", np.argmin)):
    define(_name, ("x",), _arg_infer(_name), _arg_sim(_fn),
           attrs={"axis": Attr("int", -1), "keep_dims": Attr("bool", False)})


# ---- gradient rules ----------------------------------------------------------------------
def _sum_vjp(g, ins, attrs, out):
    return {"x": expand_reduced(g, ins["x"], attrs["axes"], attrs["keep_dims"])}


def _mean_vjp(g, ins, attrs, out):
    x = ins["x"]
    axes = tuple(range(x.ndim)) if attrs["axes"] is None else attrs["axes"]
    count = math.prod([x.shape[a] for a in axes])
    return {"x": expand_reduced(g / float(count), x, attrs["axes"], attrs["keep_dims"])}


def _extremum_vjp(g, ins, attrs, out):
    """Split evenly between tied extremes, as torch's amax/amin."""
    x = ins["x"]
    full = expand_reduced(out, x, attrs["axes"], attrs["keep_dims"])
    hit = x == full
    count = hit.to(x.dtype).sum(attrs["axes"] if attrs["axes"] is not None else None, keepdim=True)
    share = expand_reduced(g, x, attrs["axes"], attrs["keep_dims"]) / count.expand(x.shape)
    return {"x": where(hit, share, zeros(share))}


for _name, _rule in (("reduce_sum", _sum_vjp), ("reduce_mean", _mean_vjp),
                     ("reduce_max", _extremum_vjp), ("reduce_min", _extremum_vjp)):
    attach(_name, _rule)
