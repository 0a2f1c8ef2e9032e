"""How much host memory a simulated program needs, checked before anything is allocated.

A lazily recorded ``x.expand(16, 16, 16, 16, 65536)`` is a 4-billion-element tensor: cheap to
record, but the simulator would try to allocate ~17 GB for it (fp16 values are carried in
float32) and take the machine down with it. ``check(program)`` computes the run's peak memory
from the same lifetime rule the simulator frees by (a value lives from the op that makes it to
the last op that reads it; program inputs and outputs live throughout) and raises
``OutOfMemoryError`` naming the largest value when the peak is over the budget.

The budget is ``ANEFORGE_SIM_MAX_BYTES`` (bytes, or with a K/M/G suffix) when set, else 90% of the
memory the system reports available when the program is compiled (Linux ``MemAvailable``; half the
physical memory where that is unknown).
"""
from __future__ import annotations

import os

import numpy as np

from .. import dtypes
from ..errors import OutOfMemoryError


def carried_bytes(var) -> int:
    """Bytes the simulator holds for `var`: fp16 is carried in float32 arrays."""
    itemsize = 4 if var.dtype == dtypes.float16 else np.dtype(var.dtype.np).itemsize
    return int(np.prod(var.shape, dtype=np.int64)) * itemsize if var.shape else itemsize


def peak_bytes(program) -> tuple[int, object]:
    """(peak bytes alive at once during a run, the largest single value)."""
    f = program.main
    ops = f.block.operations
    last = {}
    for k, op in enumerate(ops):
        for v in op.input_vars():
            last[id(v)] = k
    pinned = {id(v) for v in f.inputs} | {id(v) for v in f.outputs}
    alive = sum(carried_bytes(v) for v in f.inputs)
    peak, largest = alive, max(f.inputs, key=carried_bytes, default=None)
    dying: dict[int, int] = {}
    for k, op in enumerate(ops):
        for v in op.outputs:
            size = carried_bytes(v)
            alive += size
            if largest is None or size > carried_bytes(largest):
                largest = v
            if id(v) not in pinned:
                dying[last.get(id(v), k)] = dying.get(last.get(id(v), k), 0) + size
        peak = max(peak, alive)
        alive -= dying.pop(k, 0)
    return peak, largest


def budget() -> int:
    """The bytes a simulated run may use (ANEFORGE_SIM_MAX_BYTES, else 90% of available memory)."""
    text = os.environ.get("ANEFORGE_SIM_MAX_BYTES", "").strip().upper()
    if text:
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1], 1)
        try:
            return int(float(text.rstrip("KMG")) * scale)
        except ValueError:
            raise ValueError(f"ANEFORGE_SIM_MAX_BYTES={text!r}: expected a number of bytes, "
                             f"optionally with a K, M or G suffix (e.g. 8G)") from None
    return int(_available() * 0.9)


def _available() -> int:
    """Memory the system can give now: Linux's MemAvailable, else half the physical memory."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):     # no sysconf (Windows): no check
        return 1 << 62


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.1f} MiB"


def check(program) -> None:
    """Raise OutOfMemoryError if running `program` on the simulator needs more than budget()."""
    peak, largest = peak_bytes(program)
    limit = budget()
    if peak > limit:
        op = largest.op.type if largest is not None and largest.op is not None else "input"
        raise OutOfMemoryError(
            f"this program needs {_gib(peak)} of host memory at its peak to simulate, over the "
            f"budget of {_gib(limit)}; the largest value is {largest.name!r} ({op}, shape "
            f"{tuple(largest.shape)}, {_gib(carried_bytes(largest))}). Reduce the batch or the "
            f"expanded shapes, split the work into smaller programs, or raise the budget with "
            f"ANEFORGE_SIM_MAX_BYTES (e.g. ANEFORGE_SIM_MAX_BYTES=32G).")
