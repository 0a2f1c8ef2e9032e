"""Index arithmetic read as a Python index is computed on the host, not by a program.

The ANE computes in fp16; the integer tensors of its programs are indices (gathers, embeddings,
targets). torch code does index arithmetic on them one element at a time, nanoGPT's batch
sampler for one:

    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])

Each slice bound is an `int(tensor)` (`Tensor.__index__`) of a pending value (`i + 1`):
realized as programs, every bound was a compile-cache lookup and a run of its own (2-3 ms
each, 128 a batch). So `__index__` of a pending value first tries `value`: when everything
it depends on that is still pending is a short chain of integer (or bool) ops on host values
(realized, or literals), needing no gradient and outside af.compile's capture, each op runs
here in order by its own numpy kernel (`OpDef.simulate`, the one the simulator runs): the same
values, nothing compiled. Anything else (a float anywhere in it: its rounding is a program's)
is realized as before. Values read otherwise (`.numpy()`, a program input) are untouched:
what programs are recorded and run does not change.
"""
from __future__ import annotations

from ..context import CTX
from ..ops import REGISTRY
from ..ops.registry import is_literal
from . import empty
from .realization import _pending_order
from .trace import Node

_MOST = 64         # pending ops computed here at most (an index is a few ops from its data)


def value(node: Node, index: int):
    """Output `index` of pending `node` computed on the host (numpy), or None when what it
    depends on is not all integer ops on host values (see above). Nothing is kept: the nodes
    stay pending, so no recording's key or tape changes (realizing them here would start a new
    tape, and a batch recorded before it, read by the step after, would break the step's)."""
    if CTX.thread.capture is not None or any(s.types[i].dtype.is_float for s, i in node.args):
        return None                      # (a read of argmax(logits): no walk of the model)
    nodes = [n for n in _pending_order([node]) if not is_literal(n.op)]
    if len(nodes) > _MOST:
        return None
    for n in nodes:
        if n.op is None or n.requires_grad or any(t.dtype.is_float for t in n.types) or \
                any(s.types[i].dtype.is_float for s, i in n.args):
            return None                  # a written leaf's pending write, a float: a program
    known: dict = {}
    for n in nodes:
        known[n] = (empty.compute(REGISTRY[n.op], n.srcs, n.attrs, n.types, known), n.types)
    return known[node][0][index]
