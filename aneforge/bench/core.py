"""Core overheads: recording an op, a cache-hit realization, an af.compile replay's host time,
and the simulator's matmul.

The host-overhead rows are wall time, as a user sees it; on a shared machine the CPU-time rows
beside them (this process only) show the same work without other processes' load."""
from __future__ import annotations

import statistics
import time

import numpy as np

from . import section, settings, timeit
from .workloads import mlp, train_step


@section("core")
def core() -> list[tuple[str, float, str]]:
    import aneforge as af
    rows = [("host overhead per recorded op", record_overhead() * 1e6, "us"),
             ("  (the same, CPU time)", record_overhead(cputime) * 1e6, "us")]
    hit, build = cache_hit()
    rows.append(("cache-hit realization, 50-op program", hit * 1e6, "us"))
    rows.append(("  (the same, CPU time)", cache_hit(cputime)[0] * 1e6, "us"))
    rows.append(("  (recording those 50 ops, not included)", build * 1e6, "us"))
    host, inside = replay_host_time()
    rows.append(("af.compile replay, MLP 64-128-10 step: host time outside the executor",
                 host * 1e3, "ms"))
    rows.append(("  (the same, CPU time)", replay_host_time(clock=time.process_time)[0] * 1e3,
                 "ms"))
    rows.append(("  (the executor's own time in that step)", inside * 1e3, "ms"))

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


def record_overhead(clock=None) -> float:
    """Seconds to record one op (`y + 1.0` on a small tensor), over 1000 of them."""
    import aneforge as af
    x = af.ones(1, 8)

    def record(n=1000):
        y = x
        for _ in range(n):
            y = y + 1.0
        return y
    return (clock or timeit)(record, repeat=5) / 1000


def cache_hit(clock=None) -> tuple[float, float]:
    """(seconds to realize a 50-op program already compiled: cut, key, lookup and run; seconds
    to record its ops, not included)."""
    import aneforge as af
    clock = clock or timeit
    data = [np.random.default_rng(i).standard_normal((1, 8)).astype(np.float16) for i in range(2)]

    def chain(a):
        y = af.tensor(a)
        for i in range(50):
            y = y * 1.01 if i % 2 else y + 0.5
        return y
    chain(data[0]).numpy()                      # compile once
    build = clock(lambda: chain(data[1]), repeat=20)
    # the chains are recorded before the clock runs, one per timed call (and the warm-up):
    # the realization is timed alone, not as (record + realize) - record, a difference of
    # two noisy timings that read below zero under load
    pending = [chain(data[1]) for _ in range(21)]
    return clock(lambda: pending.pop().numpy(), repeat=20), build


def cputime(fn, repeat: int = 7) -> float:
    """`timeit` in CPU time of this process (other processes' load left out)."""
    fn()
    rounds = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        rounds.append(time.process_time() - start)
    return statistics.median(rounds)


def replay_host_time(batch: int = 64, clock=time.perf_counter) -> tuple[float, float]:
    """(host seconds outside the executor, seconds inside it): medians over replayed training
    steps of the digits MLP (forward, cross-entropy, backward, AdamW, loss read), the executor
    timed by wrapping each compiled program's `run`."""
    from ..context import CTX
    step = train_step(*mlp(batch), "aneforge", compiled=True)
    step(), step()                              # capture, then one replay
    inside = [0.0]
    exes = [entry.executable for entry in CTX.cache.entries.values()]
    for exe in exes:
        exe.run = _timed(exe.run, inside, clock)
    try:
        hosts, kernels = [], []
        for _ in range(max(settings.steps, 20)):
            inside[0] = 0.0
            start = clock()
            step()
            total = clock() - start
            hosts.append(total - inside[0])
            kernels.append(inside[0])
    finally:
        for exe in exes:
            del exe.run                         # back to the class's method
    return statistics.median(hosts), statistics.median(kernels)


def _timed(run, acc: list, clock):
    def timed(inputs):
        start = clock()
        try:
            return run(inputs)
        finally:
            acc[0] += clock() - start
    return timed
