"""The structural key of a Program: ops, attributes, shapes, dtypes and wiring — never names or
input data, so two programs that differ only in SSA names share a key (`Program.signature`).
The compile cache keys the trace the same way, from the Nodes (`aneforge.core.realization`), with the
op keys and canonical attributes defined here.
"""
from __future__ import annotations

import hashlib
from typing import Any, Iterable

import numpy as np


_PLAIN = frozenset({int, float, bool, str, type(None)})


def canonical(value: Any) -> Any:
    """A hashable, order-stable form of an attribute value."""
    kind = type(value)
    if kind in _PLAIN or (kind is tuple and all(type(v) in _PLAIN for v in value)):
        return value                    # already canonical (the common case: a fast exit)
    if kind is dict:                    # an op's attributes (each recorded op's memo)
        return tuple(sorted([(k, v if type(v) in _PLAIN else canonical(v))
                             for k, v in value.items()]))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(canonical(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, canonical(v)) for k, v in value.items()))
    if isinstance(value, np.generic):
        return value.item()
    return value


def op_key(type: str, attrs: dict) -> tuple:
    """What identifies one op structurally: its name and canonical attributes."""
    return type, canonical(attrs)


def structure(inputs: Iterable, ops: Iterable, outputs: Iterable) -> tuple:
    """The structural key of a DAG whose ops come in topological order.

    `inputs` are (value, TensorType) pairs read from outside; each op is (op key, arguments,
    result values), its arguments (name, value) pairs in a fixed order, where a tuple holds
    the values of a variadic argument; `outputs` are values. A value is any hashable handle:
    the key numbers values in order of definition, so neither names nor data enter it. Result
    types are left out: every route that builds an op infers them from its key and input types
    (`OpDef.apply`).
    """
    number: dict = {}
    ins = []
    for v, t in inputs:
        number[v] = len(number)
        ins.append((t.shape, t.dtype.name))
    body = []
    for key, args, results in ops:
        body.append((key, tuple([(k, tuple([number[u] for u in v]) if type(v) is tuple
                                  else number[v]) for k, v in args])))
        for v in results:
            number[v] = len(number)
    return tuple(ins), tuple(body), tuple([number[v] for v in outputs])


def signature(program) -> str:
    """A hash of the Program's structure (see `structure`)."""
    f = program.main
    ops = ((op_key(op.type, op.attrs), sorted(op.inputs.items()), op.outputs)
           for op in f.block.operations)
    key = structure([(v, v.type) for v in f.inputs], ops, f.outputs)
    return hashlib.sha256(repr(key).encode()).hexdigest()
