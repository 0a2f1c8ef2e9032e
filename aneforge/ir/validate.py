"""Check a Program's invariants: unique names, topological order, registered ops, types that
agree with each op's own inference, and program I/O dtypes the ANE accepts."""
from __future__ import annotations

from ..dtypes import IO_DTYPES
from ..errors import AneforgeError, DTypeError


class ValidationError(AneforgeError):
    """A Program that breaks an IR invariant."""


def validate(program) -> None:
    from ..ops import REGISTRY
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
        _check_io(v, "input")
        define(v)
    for op in f.block.operations:
        opdef = REGISTRY.get(op.type)
        if opdef is None:
            raise ValidationError(f"unknown op {op.type!r} in {op.name!r}")
        for v in op.input_vars():
            if id(v) not in defined:
                raise ValidationError(f"{op.type} {op.name!r} uses {v.name!r} before it is defined")
        for k in opdef.const_inputs:
            v = op.inputs.get(k)
            if v is not None and (v.op is None or v.op.type != "const"):
                raise ValidationError(f"{op.type} {op.name!r}: input {k!r} must come from a const")
        expected = opdef.infer_types(_in_types(op), op.attrs)
        got = [v.type for v in op.outputs]
        if expected != got:
            raise ValidationError(f"{op.type} {op.name!r}: outputs typed {got}, op infers {expected}")
        for v in op.outputs:
            define(v)
    for v in f.outputs:
        if id(v) not in defined:
            raise ValidationError(f"output {v.name!r} is not defined in the function")
        _check_io(v, "output")


def _in_types(op):
    return {k: (tuple(u.type for u in v) if isinstance(v, tuple) else v.type)
            for k, v in op.inputs.items()}


def _check_io(v, what):
    if v.dtype not in IO_DTYPES:
        raise DTypeError(f"program {what} {v.name!r} has dtype {v.dtype.name}; the ANE accepts only "
                         f"{', '.join(sorted(d.name for d in IO_DTYPES))} at a program's boundary "
                         f"(cast inside the program instead)")
