"""The lazy trace: a DAG of Nodes, one per recorded op, shared by every Tensor handle.

A Node is either pending (an op with source references) or realized (its `data` holds one
array per output). Realizing a node that does not require grad drops its sources, so the
trace never grows without bound across training steps: the next step starts from leaves.
"""
from __future__ import annotations

import itertools
from typing import Any

from .context import CTX
from .ir.signature import canonical, op_key
from .ir.types import TensorType
from .ops import REGISTRY


SEQ = itertools.count()


class Node:
    __slots__ = ("op", "srcs", "args", "attrs", "types", "data", "requires_grad", "key", "origin",
                 "grad", "owner", "freed", "overwritten", "seq", "__weakref__")

    def __init__(self, op: str | None, srcs: dict[str, Any], attrs: dict[str, Any],
                 types: list[TensorType], data: list | None = None, requires_grad: bool = False,
                 key: tuple | None = None, args: list | None = None):
        self.op, self.srcs, self.attrs, self.types = op, srcs, attrs, types
        # every source (node, index) in argument order, variadic flattened (`record` passes it)
        self.args = _flat_args(srcs) if args is None else args
        self.data, self.requires_grad = data, requires_grad
        self.origin = None        # the Program that computed a realized node
        self.grad = None          # a leaf's accumulated gradient (a Tensor)
        self.owner = None         # weakref to the handle whose value this leaf is (Tensor.set_)
        self.freed = False        # differentiated once without retain_graph (autograd)
        self.overwritten = None   # {output index: seq when an in-place op replaced it}
        self.seq = next(SEQ)     # recording order (in-place checks: ops after an overwrite)
        # Everything that identifies this op structurally, computed once at record time.
        self.key = key if key is not None or op is None else op_key(op, attrs)

    @property
    def realized(self) -> bool:
        return self.data is not None

    def set_data(self, arrays: list, origin=None) -> None:
        self.data, self.origin = arrays, origin
        if not self.requires_grad:
            self.op, self.srcs, self.args, self.key = None, {}, [], None

    def refs(self):
        """(node, output index) of every source, in argument order (variadic flattened)."""
        return self.args


def leaf(array, type: TensorType, requires_grad: bool = False) -> Node:
    return Node(None, {}, {}, [type], [array], requires_grad)


def record(op: str, srcs: dict[str, Any], attrs: dict[str, Any], requires_grad: bool) -> Node:
    """Check the op NOW (shapes, dtypes, ANE limits) and append it to the trace.

    `srcs` maps MIL argument names to (node, index) references, or lists of them (variadic).
    The check's outcome depends only on the op, the input types, the attributes and the target
    (whose caps it enforces), so it is remembered (`_APPLIED`): a training loop records the
    same few hundred uses every step.
    """
    memo, args, absent = [op, canonical(attrs) if attrs else (), CTX.target], [], False
    for k, v in srcs.items():              # one pass: the memo's input types, and the args
        memo.append(k)
        if type(v) is tuple:
            memo.append(v[0].types[v[1]])
            args.append(v)
        elif v is None:
            memo.append(None)
            absent = True
        else:
            memo.append(tuple([n.types[i] for n, i in v]))
            args.extend(v)
    memo = tuple(memo)
    hit = _APPLIED.get(memo)
    if hit is None:
        hit = _apply(op, srcs, attrs, memo)
    elif hit[4]:
        REGISTRY[op].check_const_inputs(srcs, _is_const)
    full, types, key, floating, _ = hit
    if absent:
        srcs = {k: v for k, v in srcs.items() if v is not None}
    return Node(op, srcs, full, types, None, requires_grad and floating, key, args)   # shared: never mutated


def _apply(op: str, srcs: dict, attrs: dict, memo: tuple) -> tuple:
    opdef = REGISTRY[op]
    full, types = opdef.apply(srcs, attrs, _type, _is_const)
    hit = (full, types, op_key(op, full), any(t.dtype.is_float for t in types),
           bool(opdef.const_inputs))
    if len(_APPLIED) >= _APPLIED_MAX:
        _APPLIED.clear()
    _APPLIED[memo] = hit
    return hit


# (op, canonical attributes, target, then each argument's name and input types) -> (full
# attributes, result types, op key, any float, has const inputs): a pure cache of
# OpDef.apply's outcome (which depends on nothing else), bounded.
_APPLIED: dict = {}
_APPLIED_MAX = 1 << 14


def _flat_args(srcs: dict) -> list:
    args = []
    for v in srcs.values():
        if type(v) is list:
            args.extend(v)
        elif v is not None:
            args.append(v)
    return args


def _type(ref) -> TensorType:
    return ref[0].types[ref[1]]


def _is_const(ref) -> bool:
    return ref[0].op == "const"
