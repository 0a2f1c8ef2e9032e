"""Check a Program's invariants: unique names, topological order, types that agree with each
op's own inference, and program I/O dtypes the ANE accepts.

What an op infers is the op registry's business, a layer above: it passes `type_op` in
(`aneforge.ops.validate(program)` is the usual entry)."""
from __future__ import annotations

from typing import Callable

from ..dtypes import IO_DTYPES
from ..errors import AneforgeError, DTypeError


class ValidationError(AneforgeError):
    """A Program that breaks an IR invariant."""


def validate(program, type_op: Callable, ane_io: bool = True) -> None:
    """Raise a ValidationError (or the op's own error) at the first broken invariant.
    `type_op(op)` checks one operation and returns the types it infers for its outputs;
    `ane_io`: inputs and outputs must have the ANE's boundary dtypes (not for a program
    exported to a runtime that takes int32, as ExecuTorch's)."""
    f = program.main
    defined, names = set(), set()

    def define(v):
        if not v.name:
            raise ValidationError(f"a value has an empty name: {v!r}")
        if v.name in names:
            raise ValidationError(f"duplicate SSA name {v.name!r}; every value needs a unique name")
        names.add(v.name)
        defined.add(id(v))

    for v in f.inputs:
        if ane_io:
            _check_io(v, "input")
        define(v)
    for op in f.block.operations:
        for v in op.input_vars():
            if id(v) not in defined:
                raise ValidationError(f"{op.type} {op.name!r} uses {v.name!r} before it is defined")
        expected = type_op(op)
        got = [v.type for v in op.outputs]
        if expected != got:
            raise ValidationError(f"{op.type} {op.name!r}: outputs typed {got}, op infers {expected}")
        for v in op.outputs:
            define(v)
    for v in f.outputs:
        if id(v) not in defined:
            raise ValidationError(f"output {v.name!r} is not defined in the function")
        if ane_io:
            _check_io(v, "output")


def _check_io(v, what):
    if v.dtype not in IO_DTYPES:
        raise DTypeError(f"program {what} {v.name!r} has dtype {v.dtype.name}; the ANE accepts only "
                         f"{', '.join(sorted(d.name for d in IO_DTYPES))} at a program's boundary "
                         f"(cast inside the program instead)")
