"""Core overheads: recording an op, a cache-hit realization, and the simulator's matmul."""
from __future__ import annotations

import numpy as np

from . import section, settings, timeit


@section("core")
def core() -> list[tuple[str, float, str]]:
    import aneforge as af
    rows = []
    x = af.ones(1, 8)

    def record(n=1000):
        y = x
        for _ in range(n):
            y = y + 1.0
        return y
    rows.append(("host overhead per recorded op", timeit(record, repeat=5) / 1000 * 1e6, "us"))

    data = [np.random.default_rng(i).standard_normal((1, 8)).astype(np.float16) for i in range(2)]

    def chain(a):
        y = af.tensor(a)
        for i in range(50):
            y = y * 1.01 if i % 2 else y + 0.5
        return y
    chain(data[0]).numpy()                      # compile once
    pending = [chain(data[1])]

    def hit():
        pending[0].numpy()
        pending[0] = chain(data[1])
    total = timeit(hit, repeat=20)
    build = timeit(lambda: chain(data[1]), repeat=20)
    rows.append(("cache-hit realization, 50-op program", (total - build) * 1e6, "us"))
    rows.append(("  (recording those 50 ops, not included)", build * 1e6, "us"))

    n = settings.matmul_size
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float16)
    b = np.random.default_rng(1).standard_normal((n, n)).astype(np.float16)

    def matmul():                   # a cache hit: inputs in, one matmul, output back
        return (af.tensor(a) @ af.tensor(b)).numpy()
    faithful = timeit(matmul, repeat=3)
    with af.numerics(accumulator="blas"):
        exact = timeit(matmul, repeat=5)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    ref = timeit(lambda: a32 @ b32, repeat=7)
    rows += [(f"sim matmul {n}x{n} fp16 (ANE tile datapath)", faithful * 1e3, "ms"),
             (f"sim matmul {n}x{n} fp16 (fp32 BLAS)", exact * 1e3, "ms"),
             (f"numpy float32 matmul {n}x{n}", ref * 1e3, "ms"),
             ("ratio sim(tile datapath) / numpy f32", faithful / ref, "x"),
             ("ratio sim(BLAS) / numpy f32", exact / ref, "x")]
    try:
        import torch
        t32a, t32b = torch.from_numpy(a32), torch.from_numpy(b32)
        tref = timeit(lambda: t32a @ t32b, repeat=7)
        rows += [(f"torch float32 matmul {n}x{n}", tref * 1e3, "ms"),
                 ("ratio sim(BLAS) / torch f32", exact / tref, "x")]
    except ImportError:
        rows.append(("torch not installed: no torch column", 0.0, ""))
    return rows
