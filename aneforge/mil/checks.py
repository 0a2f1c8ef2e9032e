"""The declared-type and name rules both MIL readers apply — MIL text (resolve.py) and MILSpec
protobuf (proto.py) — so the two accept exactly the same programs. Each check returns None, or
(rule, message) with the rule a key of resolve.RULES; the text reader raises it as a
MILSyntaxError with the line, the protobuf reader as the matching AneforgeError subclass."""
from __future__ import annotations

import re

from ..dtypes import IO_DTYPES
from ..errors import AneforgeError, DTypeError, LimitError, ShapeError
from ..hardware.limits import MAX_AXIS, MAX_RANK

IO_NAMES = ", ".join(sorted(d.name for d in IO_DTYPES))
NAME = re.compile(r"@?[A-Za-z_][A-Za-z0-9_]*\Z")     # as text.py tokenizes names

# Words MIL text reserves (coremltools' NameSanitizer): never value names.
RESERVED = frozenset({"any", "bool", "program", "func", "tensor", "list", "dict", "tuple", "true",
                      "false", "string", "bf16", "fp16", "fp32", "fp64", "int8", "int16", "int32",
                      "int64", "uint8", "uint16", "uint32", "uint64", "state", "const"})

# rule -> the error class the protobuf reader raises for it (the text reader: MILSyntaxError)
ERROR_OF_RULE = {"axis-limit": LimitError, "rank-limit": LimitError, "io-dtype": DTypeError,
                 "io-rank": ShapeError}


def shape_problem(shape: tuple, what: str) -> tuple[str, str] | None:
    """Every declared type: rank <= 5 and every axis 1..65536 (the ANE's limits)."""
    if len(shape) > MAX_RANK:
        return "rank-limit", (f"{what} has rank {len(shape)}; the ANE allows rank <= {MAX_RANK}. "
                              f"Reshape to merge axes.")
    for i, n in enumerate(shape):
        if not 1 <= n <= MAX_AXIS:
            fix = "empty tensors are not supported" if n < 1 else "split the work along that axis"
            return "axis-limit", (f"{what} has axis {i} of size {n}; every axis must be "
                                  f"1..{MAX_AXIS} on the ANE (MIL primer): {fix}")
    return None


def io_problem(dtype: str, shape: tuple, what: str) -> tuple[str, str] | None:
    """A program input or output: an ANE I/O dtype, rank >= 1."""
    if dtype not in {d.name for d in IO_DTYPES}:
        inside = ("bool tensors are compute-only: pass uint8 and compare inside"
                  if dtype == "bool" else
                  "pass fp16 (or int16) and cast(x = ..., dtype = string(\"fp32\")) inside "
                  "the program")
        return "io-dtype", (f"{what} is {dtype}; the ANE accepts only {IO_NAMES} at a program's "
                            f"boundary (MIL primer: {dtype} I/O rejects at MIL parse). "
                            f"{inside[0].upper() + inside[1:]}.")
    if not shape:
        return "io-rank", (f"{what} is a scalar (shape []); Core ML passes tensors of rank >= 1 "
                           f"in and out: declare it [1] and reshape inside")
    return shape_problem(shape, what)


def name_problem(name: str, what: str) -> tuple[str, str] | None:
    """A value name MIL text can write: an identifier, not a reserved word."""
    if name in RESERVED:
        return "duplicate-name", f"{name!r} is a reserved word of MIL text; rename the value"
    if not NAME.match(name):
        return "syntax", (f"{what} {name!r} is not a MIL name (letters, digits and _, not "
                          f"starting with a digit); rename it")
    return None


def as_name(text: str) -> str:
    """`text` (an op's name, which may hold any character) made a MIL value name."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return name if NAME.match(name) and name not in RESERVED else "_" + name


def raise_problem(problem: tuple[str, str] | None) -> None:
    """For readers without lines (protobuf): the problem as an AneforgeError."""
    if problem is not None:
        rule, message = problem
        raise ERROR_OF_RULE.get(rule, AneforgeError)(f"[{rule}] {message}")
