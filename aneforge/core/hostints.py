"""Integer values computed on the host at once: index arithmetic as torch code writes it.

The ANE computes in fp16; the integer tensors of its programs are indices (gathers, embeddings,
targets). torch code does index arithmetic on them one element at a time, nanoGPT's batch
sampler for one:

    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])

Each `i` is a 0-d tensor and each slice bound an `int(tensor)`: recorded, every bound would be a
program of its own, realized to read one number (2-3 ms each, 128 per batch). So an op whose
operands are all integer (or bool) host values (realized, or literals; at least one realized),
that needs no gradient and is not being captured by `af.compile` (there an operand is the value
of the call being recorded, not of every call), and whose results are all integer or bool,
runs here when it is recorded, by the op's own numpy kernel (`OpDef.simulate`, the one the
simulator runs): the same values, nothing compiled. Still recorded: a float result
(`ix.float()`: its rounding is the program's), and a result larger than its operands (a one-hot
mask from an index, a repeat: the program makes it from the small value, which is all it loads).
"""
from __future__ import annotations

import math

from ..context import CTX
from ..errors import LimitError
from ..hardware import limits
from ..ops import REGISTRY
from ..ops.registry import is_literal
from . import empty
from .trace import Node, is_const, type_of


def on_host(refs) -> bool:
    """Whether the (node, index) references (or lists of them, or None) are all integer or bool
    host values, at least one of them realized data rather than a literal, and no kept
    recording is being made (`trace.kept_stretch`: it must stay a function of its inputs,
    re-recorded with their next values, so a value computed from them now cannot enter it)."""
    data = False
    for v in refs:
        if v is None:
            continue
        for node, i in ([v] if type(v) is tuple else v):
            if node.data is None:
                if not is_literal(node.op) or node.types[i].dtype.is_float:
                    return False
            elif node.types[i].dtype.is_float:
                return False
            else:
                data = True
    tape = CTX.thread.tape
    return data and (tape is None or tape.log is None)


def evaluate(op: str, srcs: dict, attrs: dict) -> Node | None:
    """`op` on host operands (`on_host`) as a realized node, or None when a result is floating
    point or the op's check refuses it (the caller records it, and its error is raised there)."""
    opdef = REGISTRY[op]
    try:
        with limits.host_allowed():
            full, types = opdef.apply(srcs, attrs, type_of, is_const)
    except LimitError:
        return None
    if any(t.dtype.is_float for t in types) or _size(types) > _size(
            [node.types[i] for v in srcs.values() if v is not None
             for node, i in ([v] if type(v) is tuple else v)]):
        return None
    return empty.hold(Node(None, {}, {}, types, empty.compute(opdef, srcs, full, types), False,
                           None, ()))


def _size(types) -> int:
    return sum(math.prod(t.shape) for t in types)
