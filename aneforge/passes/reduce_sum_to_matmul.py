"""reduce_sum_to_matmul (numeric; ANE-specific; opt-in)."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from .graph import reduce_axes
from .registry import register


@register("reduce_sum_to_matmul", exact=False)
def reduce_sum_to_matmul(graph) -> int:
    """An fp16 reduce_sum over trailing axes becomes a matmul with a ones vector: the engine's
    reduce_sum keeps an fp16 running sum (an integer sum stalls at 2048), its matmul a wide
    accumulator (ANEForge `docs/developer/numerics.md`), so the sum gets more accurate. The summed axes fold
    into one contraction axis of at most the pipeline's `contraction_cap`.

        before                                           after
        %s = reduce_sum(x=%x: [64, 10], axes=[-1],       %o = const(val=ones[10, 1])
                        keep_dims=True)                  %s = matmul(x=%x, y=%o)

    Caveat: a sum above ~32752 becomes inf (the matmul output cliff, ANEForge `docs/numeric-cliffs.md`) where the
    running sum reaches fp16's 65504. Not in the default pipeline: it changes the simulated
    running sum that docs/numerics.md pins; add it with `pipeline(add=[...])` or "ane".
    """
    n = 0
    for op in graph.walk():
        x = op.inputs.get("x")
        if op.type != "reduce_sum" or x.dtype != dtypes.float16 or not x.shape:
            continue
        axes = reduce_axes(op)
        k = int(np.prod([x.shape[a] for a in axes]))
        if axes != tuple(range(len(x.shape) - len(axes), len(x.shape))) or \
                not 2 <= k <= graph.options.contraction_cap:
            continue
        rows = x.shape[:len(x.shape) - len(axes)]
        flat = x if len(axes) == 1 and rows else graph.add(
            "reshape", {"x": x}, before=op, shape=(rows or (1,)) + (k,))
        ones = graph.const(np.ones((k, 1), np.float16), before=op)
        s = graph.add("matmul", {"x": flat, "y": ones}, before=op)
        if s.shape != op.outputs[0].shape:
            s = graph.add("reshape", {"x": s}, before=op, shape=op.outputs[0].shape)
        n += graph.replace_op(op, [s])
    return n
