"""fuse_layernorm_or_instancenorm (numeric)."""
from __future__ import annotations

import numpy as np

from .graph import (binary_with_const, const_value, fuse, next_op, other_operand,
                    reduce_axes, splat)
from .registry import register


@register("fuse_layernorm_or_instancenorm", exact=False)
def fuse_layernorm_or_instancenorm(graph) -> int:
    """The layer norm composite (what F.layer_norm records) becomes layer_norm; over the
    spatial axes of a rank-3/4 input it is instance_norm. A constant gamma / beta after it is
    folded in; a gamma or beta that is a program input (a trained parameter) stays a mul / add
    after the fused op, since MIL needs them constant (and an engine layer_norm with exactly
    one of them non-constant fails on M1/M2: ANEForge `bench/layer_norm_compile_probe.py`).

        %m = reduce_mean(x=%x, axes=[-1], keep_dims=True)
        %c = sub(x=%x, y=%m)
        %s = mul(x=%c, y=%c)
        %v = reduce_mean(x=%s, axes=[-1], keep_dims=True)       %y = layer_norm(x=%x, axes=[-1],
        %e = add(x=%v, y=1e-5)                                             gamma=%g, beta=%b,
        %r = rsqrt(x=%e)                                                   epsilon=1e-5)
        %n = mul(x=%c, y=%r)
        %w = mul(x=%n, y=%g: const)
        %y = add(x=%w, y=%b: const)
    """
    n = 0
    for op in graph.walk():
        found = _match(graph, op) if op.type == "reduce_mean" and op.attrs["keep_dims"] else None
        if found is None:
            continue
        x, axes, eps, chain, gamma, beta = found
        rank = len(x.shape)
        spatial = rank in (3, 4) and axes == tuple(range(2, rank))
        layer = _affine(chain, gamma, beta, x, axes, [x.shape[a] for a in axes])
        channel = _affine(chain, gamma, beta, x, (1,), [x.shape[1]]) if spatial else None
        # instance_norm when it absorbs more (a per-channel gamma / beta), or as much on NCHW
        instance = channel is not None and (len(channel["chain"]), rank == 4) > \
            (len(layer["chain"]), False)
        affine = channel if instance else layer
        chain = affine.pop("chain")
        inputs = {"x": x, **{k: graph.const(v, before=chain[-1]) for k, v in affine.items()}}
        ok = fuse(graph, chain, "instance_norm", inputs, epsilon=eps) if instance else \
            fuse(graph, chain, "layer_norm", inputs, axes=axes, epsilon=eps)
        if not ok:
            for v in inputs.values():
                if v is not x:
                    graph.remove(v.op)
        n += ok
    return n


def _match(graph, mean):
    """x, axes, epsilon, the chain up to x * rstd, and the optional gamma / beta ops after."""
    x, axes = mean.inputs["x"], reduce_axes(mean)
    mu = mean.outputs[0]
    sub = next((u for u in graph.uses(mu) if u.type == "sub" and u.inputs["x"] is x
                and u.inputs["y"] is mu), None)
    if sub is None or len(graph.uses(mu)) != 1:
        return None
    xc = sub.outputs[0]
    readers = graph.uses(xc)
    sq = next((u for u in readers if u.type == "mul" and u.inputs["x"] is xc
               and u.inputs["y"] is xc), None)
    var = next_op(graph, sq.outputs[0], ("reduce_mean",)) if sq is not None else None
    if var is None or reduce_axes(var) != axes or not var.attrs["keep_dims"]:
        return None
    eps, rs = _rstd(graph, var.outputs[0])
    if rs is None:
        return None
    scale = next_op(graph, rs[-1].outputs[0], ("mul",), other=xc)
    if scale is None or len(readers) != 2:
        return None
    chain = [mean, sub, sq, var] + rs + [scale]
    gamma = next_op(graph, scale.outputs[0], ("mul",))
    gamma = gamma if gamma is not None and binary_with_const(gamma, ("mul",)) else None
    beta = next_op(graph, (gamma or scale).outputs[0], ("add",))
    beta = beta if beta is not None and binary_with_const(beta, ("add",)) else None
    return x, axes, eps, chain, gamma, beta


def _rstd(graph, v):
    """(epsilon, [ops]) for rsqrt(v + eps) (eps as an add or as rsqrt's epsilon)."""
    add = next_op(graph, v, ("add",))
    pair = binary_with_const(add, ("add",)) if add is not None else None
    eps = splat(pair[1]) if pair is not None and pair[0] is v else None
    start = add.outputs[0] if eps is not None else v
    r = next_op(graph, start, ("rsqrt",))
    if r is None:
        return None, None
    total = (eps or 0.0) + r.attrs["epsilon"]
    return total, ([add] if eps is not None else []) + [r]


def _affine(chain, gamma, beta, x, keep, shape):
    """Constant gamma / beta varying along the axes `keep` only, as arrays of `shape`, with the
    chain extended over the ops they replace. A gamma that is not such a constant (a trained
    one) stops it: the beta after it cannot move in front of it."""
    out, last = {"chain": list(chain)}, chain[-1].outputs[0]
    for key, op in (("gamma", gamma), ("beta", beta)):
        if op is None:
            continue
        value = _per_norm(op, last, x, keep, shape)
        if value is None:
            break
        out[key], last = value, op.outputs[0]
        out["chain"].append(op)
    return out


def _per_norm(op, t, x, keep, shape):
    """A const operand of `op` (applied to `t`) as an array of the fused op's gamma shape, if
    it only varies along the axes `keep` and does not broadcast the result."""
    c = other_operand(op, t)
    val = const_value(c) if c is not None else None
    if val is None or c.dtype != x.dtype or op.outputs[0].shape != x.shape \
            or val.ndim > len(x.shape):
        return None
    full = val.reshape((1,) * (len(x.shape) - val.ndim) + val.shape)
    if any(full.shape[i] != 1 for i in range(full.ndim) if i not in keep):
        return None
    picked = np.broadcast_to(full, [x.shape[i] if i in keep else 1 for i in range(full.ndim)])
    return np.ascontiguousarray(picked.reshape(shape)).astype(val.dtype)
