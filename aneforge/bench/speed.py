"""One table: a training step (or a matmul) in aneforge on the simulator against torch eager
CPU fp32 with the same number of threads, timed by interleaved rounds (aneforge, torch,
aneforge, ...) and reported as medians, so load from other processes hits both alike."""
from __future__ import annotations

import os
import statistics
import time

import numpy as np

from . import section, settings


def threads() -> int:
    """Threads aneforge computes with: the compiled kernels' pool, else one (numpy's
    elementwise loops are single-threaded; the fp16-product matmul does not use BLAS)."""
    from .. import kernels
    if kernels.active() == "numba":
        return kernels.threads()
    return 1


def machine() -> str:
    from .. import kernels
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if kernels.active() == "numba":
        import numba
        kind = f"numba {numba.__version__} on"
    else:
        kind = "numba off (numpy kernels)"
    return f"{cpus} cores usable, {kind}, aneforge and torch both on {threads()} thread(s)"


def _train(make_model, make_batch, loss_fn, lib, compiled=False, numerics=None):
    """A step function: forward, loss, backward, AdamW update, loss read back; `compiled`:
    aneforge's step under af.compile (captured once, then replayed; torch stays eager);
    `numerics`: switches of aneforge's numerics model for the step."""
    if lib == "torch":
        import torch
        torch.manual_seed(0)
        model = make_model(torch.nn)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        batch = [torch.from_numpy(a) for a in make_batch()]
        loss = lambda x, y: loss_fn(torch.nn.functional, model(x), y)   # noqa: E731
    else:
        import aneforge as af
        import aneforge.nn as nn
        af.manual_seed(0)
        model = make_model(nn)
        opt = af.optim.AdamW(model.parameters(), lr=1e-3)
        batch = make_batch()
        loss = lambda x, y: loss_fn(af.nn.functional, model(af.tensor(x)), af.tensor(y))  # noqa: E731

    def train_step(x, y):
        opt.zero_grad()
        value = loss(x, y)
        value.backward()
        opt.step()
        return value
    if compiled and lib != "torch":
        train_step = af.compile(train_step)
    if numerics and lib != "torch":
        def run():
            with af.numerics(**numerics):
                return train_step(*batch).item()
        return run
    return lambda: train_step(*batch).item()


def _mlp(batch):
    rng = np.random.default_rng(0)
    data = lambda: (rng.random((batch, 64)).astype(np.float32), rng.integers(0, 10, batch))  # noqa: E731
    model = lambda nn: nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10))  # noqa: E731
    return model, data, lambda F, out, y: F.cross_entropy(out, y)


def _cnn(batch):
    rng = np.random.default_rng(0)
    data = lambda: (rng.random((batch, 1, 16, 16)).astype(np.float32),  # noqa: E731
                    rng.integers(0, 10, batch))

    def model(nn):
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
                             nn.Flatten(), nn.Linear(16 * 8 * 8, 10))
    return model, data, lambda F, out, y: F.cross_entropy(out, y)


def _char_lm(batch, context=32, vocab=65, width=64):
    """Embedding -> MLP over a context window -> next-character logits."""
    rng = np.random.default_rng(0)
    data = lambda: (rng.integers(0, vocab, (batch, context)), rng.integers(0, vocab, batch))  # noqa: E731

    def model(nn):
        return nn.Sequential(nn.Embedding(vocab, width), nn.Flatten(),
                             nn.Linear(context * width, 256), nn.GELU(), nn.Linear(256, vocab))
    return model, data, lambda F, out, y: F.cross_entropy(out, y)


def _matmul(n):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))

    def make(lib):
        if lib == "torch":
            import torch
            ta, tb = torch.from_numpy(a.astype(np.float32)), torch.from_numpy(b.astype(np.float32))
            return lambda: ta @ tb
        import aneforge as af
        return lambda: (af.tensor(a) @ af.tensor(b)).numpy()
    return make


def workloads():
    n = settings.matmul_size
    small = settings.steps < 100
    rows = [(f"MLP 64-128-10 step, batch {b}", _mlp(b)) for b in (64, 256)]
    rows.append((f"CNN 2 conv + linear step, batch {8 if small else 32}, 16x16", _cnn(8 if small else 32)))
    rows.append((f"char-LM embed+MLP step, batch {16 if small else 64}, context 32",
                 _char_lm(16 if small else 64)))
    out = [(name, lambda lib, w=w: _train(*w, lib)) for name, w in rows]
    out += [(f"{name}, af.compile replay", lambda lib, w=w: _train(*w, lib, compiled=True))
            for name, w in rows]
    out.append((f"{rows[0][0]}, af.compile replay, fp32 BLAS matmuls (accumulator='blas')",
                lambda lib: _train(*rows[0][1], lib, compiled=True,
                                   numerics={"accumulator": "blas"})))
    out.append((f"matmul {n}x{n}x{n} fp16 (aneforge: ANE tile datapath)", _matmul(n)))
    return out


def _time(fn, number):
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def overheads() -> list[tuple[str, float, None, str]]:
    """aneforge's host costs (no torch counterpart): recording, a cache hit, a replay."""
    from .core import cache_hit, record_overhead, replay_host_time
    return [("host overhead per recorded op", record_overhead(), None, "us"),
            ("cache-hit realization of a 50-op program (cut, key, lookup, run)", cache_hit()[0],
             None, "us"),
            ("af.compile replay of the MLP b64 step: host time outside the executor",
             replay_host_time()[0], None, "ms")]


def measure(rounds: int | None = None, number: int = 3):
    """[(workload, aneforge s, torch s or None, unit)]: medians over interleaved rounds, then
    aneforge's host overheads."""
    rounds = rounds or (3 if settings.steps < 100 else 9)
    try:
        import torch
        before = torch.get_num_threads()
        torch.set_num_threads(threads())
    except ImportError:
        torch = None
    try:
        pairs = []
        for name, make in workloads():
            af_fn = make("aneforge")
            t_fn = make("torch") if torch is not None else None
            for fn in (af_fn, t_fn):          # warm-up: compile, caches, first allocations
                if fn is not None:
                    fn(), fn()
            pairs.append((name, af_fn, t_fn, [], []))
        for _ in range(rounds):
            for name, af_fn, t_fn, af_t, t_t in pairs:
                af_t.append(_time(af_fn, number))
                if t_fn is not None:
                    t_t.append(_time(t_fn, number))
        return [(name, statistics.median(a), statistics.median(t) if t else None, "ms")
                for name, _, _, a, t in pairs] + overheads()
    finally:
        if torch is not None:
            torch.set_num_threads(before)


SCALE = {"ms": 1e3, "us": 1e6}


def table(results) -> str:
    width = max(len(r[0]) for r in results)
    lines = [f"  {'workload':<{width}}  {'aneforge':>12}  {'torch eager':>12}  {'ratio':>8}"]
    for name, a, t, unit in results:
        k = SCALE[unit]
        tt = f"{t * k:9.3f} {unit}" if t is not None else f"{'-':>12}"
        ratio = f"{a / t:7.1f}x" if t else f"{'-':>8}"
        lines.append(f"  {name:<{width}}  {a * k:9.3f} {unit}  {tt}  {ratio}")
    return "\n".join(lines)


@section("speed")
def speed() -> list[tuple[str, float, str]]:
    """The table as report rows (printed by `python -m aneforge.bench speed`)."""
    rows = [(f"machine: {machine()}", 0.0, "")]
    for name, a, t, unit in measure():
        rows.append((f"{name}: aneforge", a * SCALE[unit], unit))
        if t is not None:
            rows += [(f"{name}: torch eager fp32", t * SCALE[unit], unit),
                     (f"{name}: ratio aneforge / torch", a / t, "x")]
    return rows
