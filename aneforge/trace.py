"""The lazy trace: a DAG of Nodes, one per recorded op, shared by every Tensor handle.

A Node is either pending (an op with source references) or realized (its `data` holds one
array per output). Realizing a node that does not require grad drops its sources, so the
trace never grows without bound across training steps: the next step starts from leaves.
"""
from __future__ import annotations

from typing import Any

from .ir.signature import op_key
from .ir.types import TensorType
from .ops import REGISTRY


class Node:
    __slots__ = ("op", "srcs", "attrs", "types", "data", "requires_grad", "key", "origin", "grad",
                 "owner", "__weakref__")

    def __init__(self, op: str | None, srcs: dict[str, Any], attrs: dict[str, Any],
                 types: list[TensorType], data: list | None = None, requires_grad: bool = False):
        self.op, self.srcs, self.attrs, self.types = op, srcs, attrs, types
        self.data, self.requires_grad = data, requires_grad
        self.origin = None        # the Program that computed a realized node
        self.grad = None          # a leaf's accumulated gradient (a Tensor)
        self.owner = None         # weakref to the handle whose value this leaf is (Tensor.set_)
        # Everything that identifies this op structurally, computed once at record time.
        self.key = None if op is None else op_key(op, attrs)

    @property
    def realized(self) -> bool:
        return self.data is not None

    def set_data(self, arrays: list, origin=None) -> None:
        self.data, self.origin = arrays, origin
        if not self.requires_grad:
            self.op, self.srcs, self.key = None, {}, None

    def refs(self):
        """(node, output index) of every source, in argument order (variadic flattened)."""
        for v in self.srcs.values():
            yield from (v if isinstance(v, list) else (v,))


def leaf(array, type: TensorType, requires_grad: bool = False) -> Node:
    return Node(None, {}, {}, [type], [array], requires_grad)


def record(op: str, srcs: dict[str, Any], attrs: dict[str, Any], requires_grad: bool) -> Node:
    """Check the op NOW (shapes, dtypes, ANE limits) and append it to the trace.

    `srcs` maps MIL argument names to (node, index) references, or lists of them (variadic).
    """
    attrs, types = REGISTRY[op].apply(srcs, attrs, _type, _is_const)
    srcs = {k: v for k, v in srcs.items() if v is not None}
    differentiable = requires_grad and any(t.dtype.is_float for t in types)
    return Node(op, srcs, attrs, types, None, differentiable)


def _type(ref) -> TensorType:
    return ref[0].types[ref[1]]


def _is_const(ref) -> bool:
    return ref[0].op == "const"
