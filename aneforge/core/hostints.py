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
simulator runs): the same values, nothing compiled. A float result (`ix.float()`) is still
recorded: its rounding is the program's.
"""
from __future__ import annotations

from ..errors import LimitError
from ..hardware import limits
from ..ops import REGISTRY
from ..ops.registry import is_literal
from . import empty
from .trace import Node, is_const, type_of


def on_host(refs) -> bool:
    """Whether the (node, index) references (or lists of them, or None) are all integer or bool
    host values, at least one of them realized data rather than a literal."""
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
    return data


def evaluate(op: str, srcs: dict, attrs: dict) -> Node | None:
    """`op` on host operands (`on_host`) as a realized node, or None when a result is floating
    point or the op's check refuses it (the caller records it, and its error is raised there)."""
    opdef = REGISTRY[op]
    try:
        with limits.host_allowed():
            full, types = opdef.apply(srcs, attrs, type_of, is_const)
    except LimitError:
        return None
    if any(t.dtype.is_float for t in types):
        return None
    return empty.hold(Node(None, {}, {}, types, empty.compute(opdef, srcs, full, types), False,
                           None, ()))
