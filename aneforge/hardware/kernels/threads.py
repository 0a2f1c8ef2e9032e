"""The kernels' thread policy, shared by the compiled tile matmuls and the BLAS matmuls."""
from __future__ import annotations

import os

PARALLEL_MACS = 1 << 20     # smaller matmuls run on one thread (a hand-off costs more)


def threads() -> int:
    """Threads for large matmuls: ANEFORGE_THREADS, else the CPUs this process may use."""
    env = os.environ.get("ANEFORGE_THREADS")
    if env:
        return max(1, int(env))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
