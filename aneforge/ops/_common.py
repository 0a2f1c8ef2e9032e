"""Shared pieces of op definitions: type checks, broadcasting, and the fp32-then-round kernel."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import DTypeError
from ..ir.types import TensorType
from .registry import describe, shape_error

FLOATS = (dtypes.float16, dtypes.float32)
NUMERIC = (dtypes.float16, dtypes.float32, dtypes.int32)


def require_dtype(op: str, in_types: dict, name: str, allowed) -> None:
    t = in_types[name]
    if t.dtype not in allowed:
        raise DTypeError(f"{op}: input {name!r} has dtype {t.dtype.name}; {op} accepts "
                         f"{', '.join(d.name for d in allowed)} (inputs {describe(in_types)}). "
                         f"Cast it first, e.g. x.to(aneforge.float16).")


def require_same_dtype(op: str, in_types: dict, names) -> None:
    kinds = {in_types[n].dtype for n in names}
    if len(kinds) > 1:
        raise DTypeError(f"{op}: inputs {', '.join(names)} must share one dtype "
                         f"(inputs {describe(in_types)}); cast one of them first.")


def broadcast(op: str, in_types: dict, names) -> tuple[int, ...]:
    shapes = [in_types[n].shape for n in names]
    if all(s == shapes[0] for s in shapes):
        return shapes[0]
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        sizes = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise shape_error(op, in_types, "shapes do not broadcast (numpy/MIL rules: aligned "
                              "from the right, each axis equal or 1)")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def norm_axis(op: str, in_types: dict, axis: int, rank: int) -> int:
    """`axis` in [0, rank); a scalar takes axis 0 or -1, as torch wraps it like rank 1."""
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise shape_error(op, in_types, f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def norm_axes(op: str, in_types: dict, axes, rank: int) -> tuple[int, ...]:
    out = tuple(norm_axis(op, in_types, a, rank) for a in axes)
    if len(set(out)) != len(out):
        raise shape_error(op, in_types, f"axes {tuple(axes)} repeat an axis")
    return out


def elementwise(fn, engine=None):
    """A kernel computing `fn` in fp32 (fp16 values arrive as float32); the simulator rounds
    the result to the op's declared dtype afterwards (the ANE's elementwise model: fp32, then
    rounded once; sbryngelson/ane-guide part-1-machine/03-numerics.md). `engine` is the op's
    behaviour on special values where the engine differs from IEEE (log(+0) = -45440,
    1/(-0) = +inf, ...), used under `Numerics.specials="engine"`; NaN results become +0 in
    the store either way (Numerics.round16)."""
    def simulate(ctx, *xs, **attrs):         # the executor runs every step under errstate
        f = engine if engine is not None and ctx.numerics.specials == "engine" else fn
        return f(*xs, **attrs)
    return simulate


def positive_zero(x):
    """x with -0 turned into +0 (the engine has no negative zero at these ops' boundary)."""
    return x + np.float32(0.0)


def same_type(shape, dtype) -> TensorType:
    return TensorType(shape if type(shape) is tuple else tuple(int(d) for d in shape), dtype)
