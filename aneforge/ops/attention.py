"""scaled_dot_product_attention (MIL iOS18 transformers.py): softmax(Q K^T / sqrt(E) + mask) V.

The simulator defines it as its decomposition — matmul, mul by the fp16-rounded scale, the
mask, softmax, matmul — with every step stored in the input dtype, so the
`decompose_masked_attention` pass (MIL's sdpa takes no mask on the engine: ANEForge `docs/mil-primer.md`)
computes the same values. A bool mask keeps the scores where True and puts -1e4 elsewhere (the
engine-safe additive mask, not -inf: a fully masked row comes out uniform, not NaN).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..hardware import kernels
from ._common import FLOATS, broadcast, require_dtype, require_same_dtype, same_type
from ._grad import attach, where
from .activations import _softmax
from .linalg import fp16_matmul, port
from .registry import define, shape_error
from ..ir.types import TensorType

MASKED = -1e4      # the additive mask value the engine needs (-1e4, not -inf: ANEForge `docs/mil-primer.md`)


def _sdpa_infer(t, attrs):
    q, k, v = t["query"], t["key"], t["value"]
    require_dtype("scaled_dot_product_attention", t, "query", FLOATS)
    require_same_dtype("scaled_dot_product_attention", t, ("query", "key", "value"))
    if not 3 <= q.rank == k.rank == v.rank:
        raise shape_error("scaled_dot_product_attention", t, "query, key and value need one "
                          "rank >= 3: [B, *, L, E], [B, *, S, E], [B, *, S, EV]")
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-2] != v.shape[:-2] or q.shape[-1] != k.shape[-1] \
            or k.shape[-2] != v.shape[-2]:
        raise shape_error("scaled_dot_product_attention", t, "shapes must be [B, *, L, E], "
                          "[B, *, S, E], [B, *, S, EV]")
    scores = TensorType(q.shape[:-1] + k.shape[-2:-1], q.dtype)
    m = t.get("attn_mask")
    if m is not None:
        if m.dtype != dtypes.bool_:
            require_same_dtype("scaled_dot_product_attention", t, ("query", "attn_mask"))
        if m.rank > scores.rank or broadcast("scaled_dot_product_attention",
                                             {"s": scores, "m": m}, ("s", "m")) != scores.shape:
            raise shape_error("scaled_dot_product_attention", t,
                              f"attn_mask must broadcast to the scores' shape {list(scores.shape)}")
    return same_type(q.shape[:-1] + v.shape[-1:], q.dtype)


def _sdpa_sim(ctx, query, key, value, attn_mask):
    fp16 = ctx.in_dtypes[0] == dtypes.float16
    store = ctx.numerics.round16 if fp16 else (lambda a: np.asarray(a, np.float32))

    def matmul(a, b):
        return port(ctx, fp16_matmul(ctx.numerics, a, b)) if fp16 else kernels.blas_matmul(a, b)

    with np.errstate(all="ignore"):
        s = store(matmul(query, np.swapaxes(key, -1, -2)))
        s = store(s * store(np.float32(scale(query.shape[-1]))))
        if attn_mask is not None:
            s = np.where(attn_mask, s, np.float32(MASKED)) if attn_mask.dtype == bool \
                else store(s + attn_mask)
        return matmul(store(_softmax(s, -1)), value)


def scale(e: int) -> float:
    return 1.0 / math.sqrt(e)


define("scaled_dot_product_attention", ("query", "key", "value", "attn_mask"), _sdpa_infer,
       _sdpa_sim, optional=frozenset({"attn_mask"}))


def _sdpa_vjp(g, ins, attrs, out):
    q, k, v, m = ins["query"], ins["key"], ins["value"], ins.get("attn_mask")
    c = scale(q.shape[-1])
    s = (q @ k.transpose(-1, -2)) * c
    if m is not None:
        s = where(m, s, s - s + MASKED) if m.dtype == dtypes.bool_ else s + m
    p = s.softmax(-1)
    dp = g @ v.transpose(-1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    grads = {"query": (ds @ k) * c, "key": (ds.transpose(-1, -2) @ q) * c,
             "value": p.transpose(-1, -2) @ g}
    if m is not None and m.dtype != dtypes.bool_:
        grads["attn_mask"] = ds
    return grads


attach("scaled_dot_product_attention", _sdpa_vjp)
