"""Data types: MIL names, the numpy type behind each, and which may cross a program's boundary.

The ANE stores and computes in fp16; fp32, int32 and bool exist only inside a program
(ANEForge `docs/capabilities.md`). A tensor whose dtype may not cross the boundary travels as its
*transport* dtype and is cast on the way in and out of the program.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .errors import DTypeError


@dataclass(frozen=True, eq=False)     # one object per dtype: == and hash by identity (fast)
class DType:
    name: str            # the MIL spelling: fp16, fp32, int32, bool, ...
    torch_name: str      # the torch spelling: float16, float32, int32, bool, ...
    np_name: str
    is_float: bool
    rank: int            # type-promotion order: bool < ints < fp16 < fp32

    @cached_property
    def np(self) -> np.dtype:
        return np.dtype(self.np_name)

    def __repr__(self) -> str:
        return f"aneforge.{self.torch_name}"

    def __reduce__(self):                 # copies and pickles stay the one object per dtype
        return as_dtype, (self.name,)


float16 = DType("fp16", "float16", "float16", True, 5)
float32 = DType("fp32", "float32", "float32", True, 6)
int8 = DType("int8", "int8", "int8", False, 1)
uint8 = DType("uint8", "uint8", "uint8", False, 1)
int16 = DType("int16", "int16", "int16", False, 2)
uint16 = DType("uint16", "uint16", "uint16", False, 2)
int32 = DType("int32", "int32", "int32", False, 3)
bool_ = DType("bool", "bool", "bool", False, 0)
half, float = float16, float32

ALL = (float16, float32, int8, uint8, int16, uint16, int32, bool_)
# torch's bfloat16, a name only: the ANE has no bfloat16 arithmetic (docs/numerics.md), so
# as_dtype refuses it and autocast(dtype=bfloat16) warns and computes in float16. It exists so
# torch code that names it without using it runs (nanoGPT's train.py builds
# {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}).
bfloat16 = DType("bf16", "bfloat16", "float32", True, 6)
BY_NAME = {d.name: d for d in ALL}

# What the ANE accepts as program input/output (ANEForge `docs/capabilities.md`).
IO_DTYPES = frozenset({float16, int8, uint8, int16, uint16})
# How a dtype that may not cross the boundary travels in one piece. int32 data outside int16's
# range, and every int32 output, cross as two uint16 parts instead (aneforge/core/boundary.py).
TRANSPORT = {float32: float16, int32: int16, bool_: uint8}

_FROM_NUMPY = {
    "float16": float16, "float32": float16, "float64": float16,
    "int8": int8, "uint8": uint8, "int16": int16, "uint16": uint16,
    "int32": int32, "int64": int32, "uint32": int32, "uint64": int32,
    "bool": bool_,
}


EXACT = {d.np: d for d in ALL}                # numpy dtype -> the dtype of the same name
_BY_NP = {np.dtype(k): v for k, v in _FROM_NUMPY.items()}


def transport(dt: DType) -> DType:
    return TRANSPORT.get(dt, dt)


def from_numpy(np_dtype) -> DType:
    """The aneforge dtype for host data of numpy dtype `np_dtype` (floats become float16)."""
    try:
        return _BY_NP[np_dtype]
    except (KeyError, TypeError):
        pass
    try:
        return _FROM_NUMPY[np.dtype(np_dtype).name]
    except KeyError:
        raise DTypeError(f"host data of numpy dtype {np.dtype(np_dtype)} has no aneforge dtype; "
                         f"use a float, integer or bool array") from None


def as_dtype(d) -> DType:
    """Accept an aneforge dtype, a MIL/torch/numpy name, a numpy dtype or a torch dtype."""
    if isinstance(d, DType) and d is not bfloat16:
        return d
    name = str(d).removeprefix("torch.").removeprefix("aneforge.")
    if name in ("bfloat16", "bf16"):
        raise DTypeError("bfloat16 is not an ANE type: the ANE stores and computes in float16 "
                         "(fp32 only inside a program); use float16, or float32 for values "
                         "float16 cannot hold")
    if name in BY_NAME:
        return BY_NAME[name]
    for dt in ALL:
        if name == dt.torch_name:
            return dt
    aliases = {"half": float16, "float": float32, "int64": int32, "long": int32, "int": int32}
    if name in aliases:
        return aliases[name]
    try:
        return from_numpy(np.dtype(name))
    except TypeError:
        raise DTypeError(f"unknown dtype {d!r}; use one of "
                         f"{', '.join(x.torch_name for x in ALL)}") from None


def promote(a: DType, b: DType) -> DType:
    return a if a.rank >= b.rank else b
