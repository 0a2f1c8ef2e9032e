"""The graph-pass pipeline on real programs: op counts and simulator time before and after the
default pipeline, for the training step of examples/train_mlp.py (64-128-10 MLP, GELU, AdamW,
loss scaling) and for a small pre-norm transformer block (forward, and a training step)."""
from __future__ import annotations

import copy
import math
import statistics
import time

import numpy as np

from . import section, settings


def _raw(run_step):
    """(Program, inputs) that `run_step()` compiles and runs to compute the loss it returns,
    as recorded (no passes)."""
    import aneforge.passes as P
    from aneforge.core.realization import recording
    with P.pipeline("none"), recording() as runs:
        loss = run_step()
        loss.item()
    return next((r.program, r.inputs) for r in runs if r.program is loss.ref[0].origin)


def mlp_step_program(batch: int = 64):
    """(Program, inputs) of the training step of examples/train_mlp.py (the same network,
    optimizer and gradient scaler), before any pass."""
    import aneforge as af
    import aneforge.nn as nn
    import aneforge.nn.functional as F
    af.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10))
    opt = af.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    scaler = af.amp.GradScaler(init_scale=256.0)
    rng = np.random.default_rng(0)
    x, y = rng.random((batch, 64)).astype(np.float32), rng.integers(0, 10, batch)

    def step():
        loss = F.cross_entropy(model(af.tensor(x)), af.tensor(y))
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return _raw(step)


def transformer_block(d: int = 64, heads: int = 4, hidden: int = 256):
    """A pre-norm transformer block from aneforge.nn pieces: LayerNorm, Linear q/k/v, matmul,
    softmax with an additive causal mask, Linear out, GELU MLP."""
    import aneforge.nn as nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.fc1, self.act, self.fc2 = nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d)

        def forward(self, x, mask):
            b, t, _ = x.shape
            e = d // heads
            y = self.ln1(x)
            q, k, v = (f(y).reshape(b, t, heads, e).permute(0, 2, 1, 3)
                       for f in (self.q, self.k, self.v))
            s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(e)) + mask
            a = (s.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(b, t, d)
            x = x + self.o(a)
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))
    return Block()


def transformer_programs(batch: int = 4, tokens: int = 16, d: int = 64):
    """(Program, inputs) of the forward and of a training step of `transformer_block`, before
    any pass."""
    import aneforge as af
    af.manual_seed(0)
    block = transformer_block(d)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, tokens, d)).astype(np.float32)
    target = rng.standard_normal((batch, tokens, d)).astype(np.float32)
    mask = np.triu(np.full((tokens, tokens), -1e4, np.float32), 1)   # additive, -1e4 not -inf

    def forward():
        with af.no_grad():
            return block(af.tensor(x), af.tensor(mask)).sum()
    opt = af.optim.AdamW(block.parameters(), lr=1e-3)

    def step():
        loss = ((block(af.tensor(x), af.tensor(mask)) - af.tensor(target)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return _raw(forward), _raw(step)


def measure(name: str, program, inputs) -> list[tuple[str, float, str]]:
    """Rows: op counts and simulator time per run, before and after the default pipeline."""
    import aneforge.passes as P
    from aneforge.hardware.numerics import get_numerics
    from aneforge.runtime.sim import SimBackend
    optimized = copy.deepcopy(program)
    report = P.run(optimized, "default")
    runs = [SimBackend().compile(p, get_numerics()) for p in (program, optimized)]
    t0, t1 = _interleaved([lambda e=e: e.run(inputs) for e in runs],
                          repeat=3 if settings.steps < 50 else 15)
    nonconst = lambda counts: sum(n for t, n in counts.items() if t != "const")  # noqa: E731
    return [(f"{name}: ops before -> after", report.ops_before, f"-> {report.ops_after}"),
            ("  non-const ops before -> after", nonconst(report.counts_before),
             f"-> {nonconst(report.counts_after)}"),
            ("  sim time before", t0 * 1e3, "ms"), ("  sim time after", t1 * 1e3, "ms"),
            ("  ratio after / before", t1 / t0, "x"),
            ("  pipeline time (once per compile)", report.seconds * 1e3, "ms")]


def _interleaved(fns, repeat: int) -> list[float]:
    """Median seconds per call of each of `fns`, timed in alternation (after one warm-up each)
    so that load from other processes hits both sides alike."""
    times = [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(repeat):
        for fn, ts in zip(fns, times):
            start = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - start)
    return [statistics.median(ts) for ts in times]


@section("passes")
def passes() -> list[tuple[str, float, str]]:
    quick = settings.steps < 50                       # --quick: smaller programs, fewer runs
    forward, step = transformer_programs(*((2, 8, 32) if quick else (4, 16, 64)))
    return (measure("train_mlp step", *mlp_step_program(16 if quick else 64))
            + measure("transformer forward", *forward) + measure("transformer step", *step))
