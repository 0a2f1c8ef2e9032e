"""One table: a training step (or a matmul) in aneforge on the simulator against torch eager
CPU fp32 with the same number of threads, timed by interleaved rounds (aneforge, torch,
aneforge, ...) and reported as medians, so load from other processes hits both alike."""
from __future__ import annotations

import functools
import os
import statistics
import time
import warnings

from . import section, settings
from ..errors import ANEHazardWarning
from .workloads import bn_cnn, char_lm, cnn, eager_loop, gpt, matmul, mlp, mlp_deep, train_step
from .startup import rows as startup_rows


def threads() -> int:
    """Threads aneforge computes with: the compiled kernels' pool, else one (numpy's
    elementwise loops are single-threaded; the fp16-product matmul does not use BLAS)."""
    from ..hardware import kernels
    if kernels.active() == "numba":
        return kernels.threads()
    return 1


def machine() -> str:
    from ..hardware import kernels
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # the rows time the compiled kernels: on a clean numba cache they are still compiling in
    # the background (the start-up rows measure that case in a fresh process of their own)
    if kernels.wait() == "numba":
        import numba
        kind = f"numba {numba.__version__} on"
    else:
        kind = "numba off (numpy kernels)"
    return f"{cpus} cores usable, {kind}, aneforge and torch both on {threads()} thread(s)"


def workloads():
    n = settings.matmul_size
    small = settings.steps < 100
    rows = [(f"MLP 64-128-10 step, batch {b}", mlp(b)) for b in (64, 256)]
    rows.append((f"CNN 2 conv + linear step, batch {8 if small else 32}, 16x16", cnn(8 if small else 32)))
    rows.append((f"char-LM embed+MLP step, batch {16 if small else 64}, context 32",
                 char_lm(16 if small else 64)))
    out = [(name, lambda lib, w=w: train_step(*w, lib)) for name, w in rows]
    out += [(f"{name}, af.compile replay", lambda lib, w=w: train_step(*w, lib, compiled=True))
            for name, w in rows]
    out += model_steps(small)
    out.append((f"{rows[0][0]}, af.compile replay, fp32 BLAS matmuls (accumulator='blas')",
                lambda lib: train_step(*rows[0][1], lib, compiled=True,
                                   numerics={"accumulator": "blas"})))
    out += [(f"MLP 64-128-128-10 AdamW eager step, batch {b}",
             lambda lib, b=b: train_step(*mlp_deep(b), lib)) for b in (64, 256)]
    out += [(f"MLP 64-128-128-10 AdamW step, batch {b}, af.compile replay",
             lambda lib, b=b: train_step(*mlp_deep(b), lib, compiled=True)) for b in (64, 256)]
    out.append(("makemore MLP eager loop on raw tensors, batch 32 (C[X[ix]], p.data += -lr * "
                "p.grad, loss.item())", eager_loop))
    out.append((f"matmul {n}x{n}x{n} fp16 (aneforge: ANE tile datapath)", matmul(n)))
    return out


def model_steps(small: bool) -> list:
    """Steps of real model shapes under af.compile: a GPT-style LM (attention, LayerNorm,
    softmax) and a CNN with BatchNorm written as an nn.Module."""
    batch = 4 if small else 8
    rows = [(f"GPT-style LM step (2 layers, width 64, 2 heads, block 32, batch {batch})",
             gpt(batch)),
            (f"BatchNorm CNN step (conv-bn-relu-pool x2 + linear, batch {16 if small else 32})",
             bn_cnn(16 if small else 32))]
    return [(f"{name}, af.compile replay", lambda lib, w=w: train_step(*w, lib, compiled=True))
            for name, w in rows]


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


def _memorized(fn):
    """fn with aneforge's hazard warnings off: the models train on a few random batches
    (`workloads.BATCHES`), and a warning that a gradient underflows fp16 would be about that
    training, not the timing; the table would drown in it."""
    @functools.wraps(fn)
    def quiet(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ANEHazardWarning)
            return fn(*args, **kwargs)
    return quiet


@_memorized
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
                for name, _, _, a, t in pairs] + overheads() + startup_rows()
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
