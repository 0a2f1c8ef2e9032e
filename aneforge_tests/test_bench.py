"""The benchmark sections run (at small sizes) and report what they promise."""
import re

import numpy as np
import pytest

import aneforge.bench as bench
from aneforge.bench import settings
from aneforge.bench.__main__ import main


def test_every_section_runs_quick(capsys, monkeypatch):
    # one thread, as the suite's torch (conftest): the table times aneforge and torch on the
    # kernels' thread count, and torch's two OpenMP threads beside the other pytest-xdist
    # worker spin at their barriers (its steps took 0.3 s of CPU, not 5-30 ms)
    monkeypatch.setenv("ANEFORGE_THREADS", "1")
    monkeypatch.setattr(settings, "matmul_size", settings.matmul_size)
    monkeypatch.setattr(settings, "steps", settings.steps)
    main(["--quick"])
    out = capsys.readouterr().out
    for name in bench.SECTIONS:
        assert f"[{name}]" in out
    # the speed section is one table: training steps eager and replayed against torch with
    # the same threads, the BLAS-matmul step, the matmul, and aneforge's host overheads
    table = out.split("[speed]")[1]
    for row in ("MLP 64-128-10 step, batch 64", "af.compile replay", "accumulator='blas'",
                "matmul 64x64x64", "host overhead per recorded op", "cache-hit realization",
                "host time outside the executor", "MLP 64-128-128-10 AdamW eager step, batch 64",
                "MLP 64-128-128-10 AdamW step, batch 256, af.compile replay",
                "makemore MLP eager loop on raw tensors", "first step to steady state"):
        assert row in table, row
    for row in ("GPT-style LM step", "BatchNorm CNN step"):    # real model shapes, compiled
        assert f"{row}" in table and "ratio aneforge / torch" in table.split(row)[1], row
    assert "thread(s)" in out.splitlines()[0]          # the machine line: cores, numba, threads
    # the training section's rows as printed (not a second run of the section: its 24 steps
    # from a cleared cache cost seconds and measure nothing the printed run did not)
    rows = printed_rows(out, "training")
    assert rows["compiles over 12 steps"] == 1
    assert rows["ratio aneforge / torch, batch 64"] > 0


def printed_rows(out: str, name: str) -> dict[str, float]:
    """{row name: value} of section `name`'s table as `bench.report` prints it."""
    text = out.split(f"\n[{name}]\n")[1].split("\n\n[")[0]
    return {m[1]: float(m[2]) for m in re.finditer(r"^ +(\S.*?) +(\S+)  \S*$", text, re.M)}


def test_printed_rows_read_back_what_report_printed():
    rows = [("aneforge MLP step, batch 64 (median)", 1.2345678, "ms"),
            ("  compiles over 12 steps", 1, ""), ("  ratio aneforge / torch, batch 64", 2.5, "x")]
    out = f"machine\n\n[training]\n{bench.report(rows)}\n\n[core]\n{bench.report(rows[:1])}\n"
    assert printed_rows(out, "training") == {"aneforge MLP step, batch 64 (median)": 1.235,
                                             "compiles over 12 steps": 1.0,
                                             "ratio aneforge / torch, batch 64": 2.5}


def test_steady_state_is_judged_on_windows():
    """A lone slow step (another process took the core) does not move the arrival; a slow
    phase (the numpy kernels, a stall while kernels load) does, to the end of its last
    window whose median is slow."""
    from aneforge.bench.startup import WINDOW, settled
    steady = 1e-3
    lone = [steady] * 50
    lone[30] = 50 * steady
    assert settled(lone, steady, 3.0) == 0.0
    phase = [0.1] * 5 + [5 * steady] * 20 + [steady] * 50
    # the last window of mostly slow steps (at 3x: 6 of 10; at 1.2x the median of 5 slow and
    # 5 steady ones, 3x, counts too) ends a few steps after the phase
    assert settled(phase, steady, 3.0) == pytest.approx(0.6 + (WINDOW // 2 - 1) * steady)
    assert settled(phase, steady, 1.2) == pytest.approx(0.6 + WINDOW // 2 * steady)


def test_the_full_forms_load_stall_is_reported():
    """The time steps lost between the children's end and the first step on the full forms,
    against the lean steps before: here two stalls of 20 ms."""
    from aneforge.bench.startup import load_stall
    times = [0.1] * 3 + [1e-3] * 60 + [1e-3, 21e-3, 1e-3, 21e-3] + [5e-4] * 10
    stages = ["numpy"] * 3 + ["lean"] * 64 + ["full"] * 10
    began = [sum(times[:i]) for i in range(len(times))]
    run = {"times": times, "stages": stages, "log": [["full compiled", began[63] - 1e-4]]}
    assert load_stall(run, began) == pytest.approx(0.040)
    assert load_stall(dict(run, log=[]), began) != load_stall(dict(run, log=[]), began)  # NaN


def test_steady_state_comes_no_earlier_than_the_compiled_kernels():
    """A wait for the first compiled kernels is one long step (the second): no window's
    median sees it, yet the steps were not steady before the compiled kernels ran."""
    from aneforge.bench.startup import arrivals
    times = [0.1, 4.0] + [1e-3] * 100 + [5e-4] * 100
    stages = ["numpy"] * 2 + ["lean"] * 100 + ["full"] * 100
    got = arrivals({"times": times, "stages": stages, "log": []}, 100)
    assert got["lean"] == got["ready"] == pytest.approx(4.1)
    assert got["full"] == pytest.approx(4.2) and got["steady"] == 5e-4
    # full speed: the last window of 10 holding 5 lean steps ends 5 steps into the full forms
    assert got["fast"] == pytest.approx(4.2 + 5 * 5e-4)


@pytest.mark.parametrize("lib", ["aneforge", "torch"])
def test_step_functions_cycle_through_distinct_batches(lib):
    """A timed step trains on BATCHES batches in turn, never on one batch repeated: a
    memorized batch's gradients shrink to fp16 zeros, whose tiles the simulator's matmul
    skips, and the step would time faster than real training."""
    from aneforge.bench import workloads
    made, seen = [], []

    def make_batch():
        made.append(np.full((2, 3), len(made) + 1.0, np.float32))
        return made[-1], np.zeros(2, np.int64)

    def loss_fn(F, out, y):
        return out.sum()

    def make_model(nn):
        class Spy(nn.Linear):
            def forward(self, x):
                seen.append(float(x[0, 0].item()))
                return super().forward(x)
        return Spy(3, 2)
    step = workloads.train_step(make_model, make_batch, loss_fn, lib)
    for _ in range(workloads.BATCHES + 2):
        step()
    assert len(made) == workloads.BATCHES > 1
    assert seen == [i % workloads.BATCHES + 1.0 for i in range(workloads.BATCHES + 2)]


def test_the_cache_hit_row_times_the_realization_alone():
    """The realization of an already-compiled program is timed by itself (the chains recorded
    before the clock), not as a difference of two timings, which read -24 us under load."""
    from aneforge.bench.core import cache_hit
    hit, build = cache_hit()
    assert hit > 0 and build > 0
