"""The ANE's shape limits that every op's result must respect (reference/facts_limits.md §1-2),
and the longest matmul contraction (§5)."""
from __future__ import annotations

from .errors import LimitError

MAX_RANK = 5              # L1: rank 0..5; rank 6 fails ANECCompile
MAX_AXIS = 65536          # L4: every axis 1..65536 at MIL parse
MAX_CONTRACTION = 16384   # L5: the matmul contraction every family accepts (M1-M3; M4/M5: 65536)


def check_shape(op: str, shape: tuple[int, ...], inputs: str = "") -> None:
    """Raise LimitError, naming the op and its input shapes, if `shape` cannot live on the ANE."""
    where = f" (inputs {inputs})" if inputs else ""
    if len(shape) > MAX_RANK:
        raise LimitError(f"{op}: result shape {shape}{where} has rank {len(shape)}; the ANE allows "
                         f"rank <= {MAX_RANK}. Reshape to merge axes first.")
    for i, n in enumerate(shape):
        if not 1 <= n <= MAX_AXIS:
            raise LimitError(f"{op}: result shape {shape}{where} has axis {i} of size {n}; every axis "
                             f"must be 1..{MAX_AXIS} on the ANE"
                             + (". Empty tensors are not supported." if n < 1 else
                                ". Split the work along that axis."))
