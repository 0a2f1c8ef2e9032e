"""decompose_masked_attention (exact; ANE-specific)."""
from __future__ import annotations

import numpy as np

from ..ops.attention import MASKED, scale
from .registry import register


@register("decompose_masked_attention", exact=True)
def decompose_masked_attention(graph) -> int:
    """MIL's scaled_dot_product_attention takes a mask, but the engine ignores it (ANEForge
    `docs/mil-primer.md`): a masked sdpa becomes matmul -> scale -> additive mask -> softmax ->
    matmul. A bool mask becomes select(mask, scores, -1e4) (-1e4, not -inf: the engine's
    softmax needs a finite floor). An unmasked sdpa stays fused. The simulator defines sdpa as
    this decomposition, so the values do not change.

        before                                       after
        %o = scaled_dot_product_attention(           %s = matmul(x=%q, y=%k, transpose_y=True)
               query=%q, key=%k, value=%v,           %c = const(val=0.125)
               attn_mask=%m)                         %t = mul(x=%s, y=%c)
                                                     %a = add(x=%t, y=%m)
                                                     %p = softmax(x=%a, axis=-1)
                                                     %o = matmul(x=%p, y=%v)
    """
    n = 0
    for op in graph.walk():
        if op.type != "scaled_dot_product_attention" or op.inputs.get("attn_mask") is None:
            continue
        q, k, v, m = (op.inputs[a] for a in ("query", "key", "value", "attn_mask"))
        dt = q.dtype.np
        s = graph.add("matmul", {"x": q, "y": k}, before=op, transpose_y=True)
        s = graph.add("mul", {"x": s, "y": graph.const(np.asarray(scale(q.shape[-1]), dt), op)},
                      before=op)
        s = graph.add("select", {"cond": m, "a": s, "b": graph.const(np.asarray(MASKED, dt), op)},
                      before=op) if m.dtype.name == "bool" else \
            graph.add("add", {"x": s, "y": m}, before=op)
        p = graph.add("softmax", {"x": s}, before=op, axis=-1)
        out = graph.add("matmul", {"x": p, "y": v}, before=op)
        n += graph.replace_op(op, [out])
    return n
