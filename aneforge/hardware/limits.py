"""The ANE's shape limits that every op's result must respect (ANEForge `docs/capabilities.md`),
and the longest matmul contraction.

Two layers of checks: the limits every family's MIL parser applies (rank 0..5, every axis
1..65536), always; then the caps of the target you chose (`aneforge.hardware.targets`: per-axis spatial
and channel caps, the conv kernel width), when one is chosen.
"""
from __future__ import annotations

import contextlib
import threading

from . import targets
from ..errors import LimitError

MAX_RANK = 5              # rank 0..5; rank 6 fails ANECCompile (ANEForge docs/developer/op-quirks.md)
MAX_AXIS = 65536          # every axis 1..65536 at MIL parse (ANEForge docs/capabilities.md)
MAX_CONTRACTION = 16384   # the matmul contraction every family accepts (M1-M3; M4/M5: 65536)


def axis_bound() -> int:
    """Every axis of 1..axis_bound() passes both layers (the recording fast path)."""
    return min(MAX_AXIS, targets.fast_bound())


def check_shape(op: str, shape: tuple[int, ...], inputs: str = "") -> None:
    """Raise LimitError, naming the op and its input shapes, if `shape` cannot live on the ANE
    (or, with a target chosen, on that target)."""
    where = f" (inputs {inputs})" if inputs else ""
    if len(shape) > MAX_RANK:
        raise LimitError(f"{op}: result shape {shape}{where} has rank {len(shape)}; the ANE allows "
                         f"rank <= {MAX_RANK}. Reshape to merge axes first.")
    for i, n in enumerate(shape):
        if not 1 <= n <= MAX_AXIS:
            if (n == 0 or n > MAX_AXIS) and getattr(_EMPTY, "allowed", False):
                continue
            raise LimitError(f"{op}: result shape {shape}{where} has axis {i} of size {n}; every axis "
                             f"must be 1..{MAX_AXIS} on the ANE"
                             + (". Empty tensors are not supported." if n < 1 else
                                ". Split the work along that axis."))
    if getattr(_EMPTY, "allowed", False) and oversized(shape):
        return                   # host data past 65536: no program holds it, on any target
    targets.check_shape(op, shape, where)


def check_leaf_shape(shape: tuple[int, ...]) -> None:
    """`check_shape` for host data becoming a tensor: an empty one (a size-0 axis) or one with
    an axis past MAX_AXIS (a dataset) is allowed, as a host value no program holds
    (aneforge.core.empty); the rank is checked."""
    if len(shape) <= MAX_RANK and (not shape or 1 <= min(shape) and max(shape) <= axis_bound()):
        return                       # (the common case, a data loader's every sample: ~1 us)
    if 0 in shape or oversized(shape):
        with host_allowed():
            check_shape("tensor", shape)
    else:
        check_shape("tensor", shape)


_EMPTY = threading.local()


def oversized(shape: tuple[int, ...]) -> bool:
    """Whether `shape` has an axis past MAX_AXIS (and a rank the ANE holds, and no empty axis):
    data no program can take, kept on the host (aneforge.core.empty)."""
    return len(shape) <= MAX_RANK and 0 not in shape and bool(shape) and max(shape) > MAX_AXIS


@contextlib.contextmanager
def host_allowed():
    """Inside: size-0 axes and axes past MAX_AXIS pass `check_shape` (aneforge.core.empty types
    a host op on empty or oversized tensors with the ops' own rules)."""
    before = getattr(_EMPTY, "allowed", False)
    _EMPTY.allowed = True
    try:
        yield
    finally:
        _EMPTY.allowed = before


def check_kernel_width(op: str, kw: int, inputs: str = "") -> None:
    """Raise LimitError if the chosen target's conv kernel-width cap rejects `kw`."""
    targets.check_kernel_width(op, kw, f" (inputs {inputs})" if inputs else "")
