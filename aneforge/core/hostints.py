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

A one-element read (`.item()`, `int()`, `float()`, `bool()`, an index) of elements picked out
of a larger value reads them the same way (`read`): torch code reads results element by
element (minGPT's adder scores `int(correct[i])` for each of 500 problems, its dataset
`self.ixes[idx].item()` for each sample). A program per element was a compile per distinct
`i` (each slice's bounds are its own program), 0.4 s each there. So the value the elements
are picked from (through slices, reshapes, transposes: data movement) is realized once and
kept, as `.cpu()` keeps torch's, and each read picks its element from it here, by the
movement ops' own kernels: the same bits (a float slice through the width crop's gain, which
changes what it moves, still runs as the read's program).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

from ..context import CTX
from ..hardware.numerics import get_numerics
from ..ops import REGISTRY
from ..ops.registry import is_literal, layout_ops
from . import empty
from .realization import _pending_order, realize
from .trace import Node, current_tape

_MOST = 64         # pending ops computed here at most (an index is a few ops from its data)
# data movement: a read through these picks elements of their input, any dtype
_MOVES = layout_ops("same_order", "reorder", "part", "repeat")


def read(node: Node, index: int):
    """A one-element read of pending output `index` of `node`, on the host: by `value`, or
    (elements picked out of a larger value through data movement) from that value, realized
    and kept once; None where neither applies (the caller realizes the read's own program).

    A pending value recorded before this thread's tape is realized and kept too when the read
    passes through it (minGPT's `self.ixes = perm[num_test:]`, made once by a dataset):
    left pending, each step's read of it would put on the step's tape a node whose source is
    off the tape, and the step would lose its kept program (core/trace.py `Tape`)."""
    if CTX.thread.capture is not None:
        return None
    tape = current_tape()
    path, base, at = [], node, index
    for _ in range(_MOST):
        if base.data is not None or base.op not in _MOVES:
            break
        path.append((base, at))
        base, at = base.args[0]
    chain = path + ([(base, at)] if base.data is None else [])
    old = [ref for ref in chain[1:] if tape is None or tape.place(ref[0]) is None]
    if old:                                  # the nearest: what this read's slice reads
        target, i = old[0]
    elif base.data is None:
        v = value(node, index)
        if v is not None:
            return v
        target, i = base, at
    else:
        return _moved(node, index)
    if target is node or target.op is None or target.requires_grad or \
            math.prod(target.types[i].shape) <= 1:       # (a loss's sum, reshaped: itself)
        return None
    realize([(target, i)])
    return _moved(node, index)


def _moved(node: Node, index: int):
    """Output `index` of `node` from its pending data movement over values in hand (None
    when anything else is still pending)."""
    nodes = [n for n in _pending_order([node]) if not is_literal(n.op)]
    if len(nodes) > _MOST or any(n.op not in _MOVES or _alters(n) for n in nodes):
        return None
    return _computed(nodes)[node][0][index]


def _alters(node: Node) -> bool:
    """Whether the op changes a float value it moves (a slice through the width crop's gain,
    `ops/shape.py`): the engine's datapath, which a read here would skip."""
    alters = REGISTRY[node.op].alters
    return alters is not None and any(t.dtype.is_float for t in node.types) and \
        alters(SimpleNamespace(numerics=get_numerics()), node.attrs)


def _computed(nodes: list) -> dict:
    """Each of the ordered pending `nodes` run by its numpy kernel: {node: (values, types)}."""
    known: dict = {}
    for n in nodes:
        known[n] = (empty.compute(REGISTRY[n.op], n.srcs, n.attrs, n.types, known), n.types)
    return known


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
    return _computed(nodes)[node][0][index]
