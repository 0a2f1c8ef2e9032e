"""Normalizations (MIL iOS15 normalization.py): layer_norm, instance_norm, batch_norm. Graph
passes fuse their composite forms into these; the kernels compute in fp32 and the result is
rounded once (the composite rounds after every step). MIL requires gamma, beta (and batch_norm's
mean and variance) to be constants."""
from __future__ import annotations

import numpy as np

from ._common import FLOATS, norm_axes, require_dtype, require_same_dtype
from ._grad import attach
from .registry import Attr, define, shape_error


def _check_affine(name, t, want):
    for k in ("gamma", "beta"):
        if t.get(k) is not None:
            require_same_dtype(name, t, ("x", k))
            if t[k].shape != want:
                raise shape_error(name, t, f"{k} must have shape {list(want)}")


def _layer_axes(t, attrs):
    x = t["x"]
    return tuple(range(x.rank)) if attrs["axes"] is None else \
        tuple(sorted(norm_axes("layer_norm", t, attrs["axes"], x.rank)))


def _layer_norm_infer(t, attrs):
    require_dtype("layer_norm", t, "x", FLOATS)
    axes = _layer_axes(t, attrs)
    _check_affine("layer_norm", t, tuple(t["x"].shape[a] for a in axes))
    return t["x"]


def _instance_norm_infer(t, attrs):
    require_dtype("instance_norm", t, "x", FLOATS)
    if t["x"].rank not in (3, 4):
        raise shape_error("instance_norm", t, "x must be [N, C, D] or [N, C, H, W]")
    _check_affine("instance_norm", t, t["x"].shape[1:2])
    return t["x"]


def normalize(x: np.ndarray, axes: tuple, epsilon: float) -> np.ndarray:
    """(x - mean) / sqrt(var + epsilon) over `axes`, in fp32."""
    xc = x - x.mean(axis=axes, keepdims=True)
    return xc / np.sqrt((xc * xc).mean(axis=axes, keepdims=True) + np.float32(epsilon))


def _affine(out, gamma, beta, shape):
    out = out if gamma is None else out * gamma.reshape(shape)
    return out if beta is None else out + beta.reshape(shape)


def _layer_norm_sim(ctx, x, gamma, beta, axes, epsilon):
    axes = tuple(range(x.ndim)) if axes is None else tuple(sorted(a % x.ndim for a in axes))
    with np.errstate(all="ignore"):
        out = normalize(x, axes, epsilon)
        return _affine(out, gamma, beta, [n if i in axes else 1 for i, n in enumerate(x.shape)])


def _instance_norm_sim(ctx, x, gamma, beta, epsilon):
    with np.errstate(all="ignore"):
        out = normalize(x, tuple(range(2, x.ndim)), epsilon)
        return _affine(out, gamma, beta, [1, x.shape[1]] + [1] * (x.ndim - 2))


AFFINE = dict(optional=frozenset({"gamma", "beta"}), const_inputs=frozenset({"gamma", "beta"}))
define("layer_norm", ("x", "gamma", "beta"), _layer_norm_infer, _layer_norm_sim,
       attrs={"axes": Attr("ints"), "epsilon": Attr("scalar", 1e-5)}, **AFFINE)
define("instance_norm", ("x", "gamma", "beta"), _instance_norm_infer, _instance_norm_sim,
       attrs={"epsilon": Attr("scalar", 1e-5)}, **AFFINE)


def _batch_norm_infer(t, attrs):
    require_dtype("batch_norm", t, "x", FLOATS)
    if not 3 <= t["x"].rank <= 5:
        raise shape_error("batch_norm", t, "x must be [N, C, ...] of rank 3-5")
    _check_affine("batch_norm", t, t["x"].shape[1:2])
    for k in ("mean", "variance"):
        require_same_dtype("batch_norm", t, ("x", k))
        if t[k].shape != t["x"].shape[1:2]:
            raise shape_error("batch_norm", t, f"{k} must have shape [{t['x'].shape[1]}]")
    return t["x"]


def _per_channel(rank):
    return [1, -1] + [1] * (rank - 2)


def _batch_norm_sim(ctx, x, mean, variance, gamma, beta, epsilon):
    shape = _per_channel(x.ndim)
    with np.errstate(all="ignore"):
        out = (x - mean.reshape(shape)) / np.sqrt(variance.reshape(shape) + np.float32(epsilon))
        return _affine(out, gamma, beta, shape)


define("batch_norm", ("x", "mean", "variance", "gamma", "beta"), _batch_norm_infer,
       _batch_norm_sim, attrs={"epsilon": Attr("scalar", 1e-5)},
       optional=frozenset({"gamma", "beta"}),
       const_inputs=frozenset({"mean", "variance", "gamma", "beta"}))


# ---- gradient rules (gamma and beta are constants: only x gets a cotangent) ----------------
def normalize_vjp(g, x, gamma, axes, shape, epsilon):
    xc = x - x.mean(axes, keepdim=True)
    rstd = ((xc * xc).mean(axes, keepdim=True) + epsilon).rsqrt()
    xhat = xc * rstd
    d = g if gamma is None else g * gamma.reshape(shape)
    return (d - d.mean(axes, keepdim=True) - xhat * (d * xhat).mean(axes, keepdim=True)) * rstd


def _layer_norm_vjp(g, ins, attrs, out):
    x = ins["x"]
    axes = tuple(range(x.ndim)) if attrs["axes"] is None else \
        tuple(sorted(a % x.ndim for a in attrs["axes"]))
    shape = tuple(n if i in axes else 1 for i, n in enumerate(x.shape))
    return {"x": normalize_vjp(g, x, ins.get("gamma"), axes, shape, attrs["epsilon"])}


def _instance_norm_vjp(g, ins, attrs, out):
    x = ins["x"]
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    return {"x": normalize_vjp(g, x, ins.get("gamma"), tuple(range(2, x.ndim)), shape,
                               attrs["epsilon"])}


def _batch_norm_vjp(g, ins, attrs, out):
    shape = tuple(_per_channel(ins["x"].ndim))
    scale = (ins["variance"] + attrs["epsilon"]).rsqrt()
    scale = scale if ins.get("gamma") is None else scale * ins["gamma"]
    return {"x": g * scale.reshape(shape)}


attach("layer_norm", _layer_norm_vjp)
attach("batch_norm", _batch_norm_vjp)
attach("instance_norm", _instance_norm_vjp)
