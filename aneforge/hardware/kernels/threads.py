"""The kernels' thread policy, shared by the compiled tile matmuls and the BLAS matmuls."""
from __future__ import annotations

import os

# smaller matmuls run on one thread (a hand-off costs more): at 2 threads, 2**22 against 2**20
# took the GPT-style step from 8.2-8.5 to 8.05-8.35 ms and the char-LM step from 11.1 to
# 10.45-10.6 ms (their matmuls of 1-3M MACs split no more), 512**3 unchanged at 3.9 ms (7.2 on
# one thread)
PARALLEL_MACS = 1 << 22


def threads() -> int:
    """Threads for large matmuls: ANEFORGE_THREADS, else the CPUs this process may use."""
    env = os.environ.get("ANEFORGE_THREADS")
    if env:
        return max(1, int(env))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
