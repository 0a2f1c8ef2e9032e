"""A structural signature: ops, attributes, shapes, dtypes and wiring — never input data.

Names do not enter it either: two programs that differ only in SSA names share a signature.
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np


def canonical(value: Any) -> Any:
    """A hashable, order-stable form of an attribute value."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, canonical(v)) for k, v in value.items()))
    if isinstance(value, np.generic):
        return value.item()
    return value


def structure(program) -> tuple:
    f = program.main
    index = {id(v): i for i, v in enumerate(f.block.vars())}

    def ref(v):
        return tuple(index[id(u)] for u in v) if isinstance(v, tuple) else index[id(v)]

    ins = tuple((v.shape, v.dtype.name) for v in f.inputs)
    from ..ops import REGISTRY
    ops = tuple((op.type,
                 tuple((k, ref(op.inputs[k])) for k in REGISTRY[op.type].inputs if k in op.inputs),
                 canonical(op.attrs),
                 tuple((v.shape, v.dtype.name) for v in op.outputs))
                for op in f.block.operations)
    return ins, ops, tuple(index[id(v)] for v in f.outputs)


def signature(program) -> str:
    return hashlib.sha256(repr(structure(program)).encode()).hexdigest()
