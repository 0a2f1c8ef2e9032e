"""A fresh install's lean stage (kernels/__init__.py): port_round and the narrow sum compile
with it (the reference's port_round bit for bit the compiled one's), the lean forms compile
at their LLVM optimization level through numba's own setting, a stage with nothing to
compile starts no child, and the start-up bench reports the lean stage's CPU."""
from __future__ import annotations

import os

import numpy as np
import pytest

from aneforge.hardware import kernels
from aneforge.hardware.kernels import reference
from bits import assert_same_bits

pytestmark = pytest.mark.skipif(not kernels.available(), reason="the compiled kernels need numba")

# values through every path of the port and the store: zeros of both signs, subnormals, the
# flush edge, the overflow edges, infinities and NaN
SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 6e-8, -6e-8, 3e-5, -3e-5, 2.0 ** -14, -2.0 ** -15,
                     65504.0, -65520.0, 32760.0, -32768.0, 70000.0, 1 / 3, np.inf, -np.inf,
                     np.nan], np.float32)
MODES = (0, 1, 2, 3, 4, 5, 6, 7)


@pytest.mark.parametrize("mode", MODES)
def test_reference_port_round_is_the_compiled_ones(mode):
    """reference.port_round (what a bound matmul's finish runs before the full stage is in)
    against the compiled port_round: bias or none, a limit or none (NaN), flush or not."""
    kernels.wait()
    from aneforge.hardware.kernels import compiled
    rng = np.random.default_rng(mode)
    acc = rng.choice(SPECIALS, (9, 16)).astype(np.float32) * rng.choice(
        np.array([1.0, 0.75, 3.0], np.float32), (9, 16))
    bias = rng.choice(SPECIALS, 16).astype(np.float32)
    with np.errstate(all="ignore"):
        for add in (np.zeros(0, np.float32), bias):
            for limit in (np.float32(32760.0), np.float32(np.nan), np.float32(4.0)):
                for flush in (False, True):
                    a, b = acc.copy(), acc.copy()
                    count = compiled.port_round(a, add, limit, flush, mode)
                    assert reference.port_round(b, add, limit, flush, mode) == count
                    assert_same_bits(b, a)


def test_port_round_and_the_narrow_sum_compile_with_the_lean_stage():
    """port_round and the narrow sum are lean-stage kernels: on the numpy reference they made
    the lean forms' MLP step ~2-3.4x the full ones', past the bench's steady-state bound."""
    lean = {w[:2] for w in kernels.WARM} - kernels.FULL
    assert {("compiled", "port_round"), ("compiled", "_narrow_sum")} <= lean
    assert not {("compiled", "port_round"), ("compiled", "_narrow_sum")} & kernels.LATE


def test_the_lean_forms_compile_at_their_optimization_level(monkeypatch):
    """`_opt` sets numba's optimization level for the compiles of a block (numba reads
    NUMBA_OPT again when the environment changed) and puts it back after; compile_warm
    compiles the lean forms (`LEAN`) under LEAN_OPT and every other kernel at the level set."""
    from numba import njit
    from numba.core import config
    monkeypatch.delenv("NUMBA_OPT", raising=False)
    seen = []

    def probe():
        njit(lambda: None).compile(())       # a compile: numba reads its settings again
        seen.append(int(config.OPT))
    probe()
    with kernels._opt(kernels.LEAN_OPT):
        assert os.environ["NUMBA_OPT"] == str(kernels.LEAN_OPT)
        probe()
    assert "NUMBA_OPT" not in os.environ
    probe()
    assert seen == [3, kernels.LEAN_OPT, 3]
    levels = {}
    monkeypatch.setattr(kernels, "_kernels", lambda warm: [
        (type("K", (), {"compile": lambda self, sig, _n=f"{m}.{n}": levels.setdefault(
            _n, os.environ.get("NUMBA_OPT"))})(), ()) for m, n, _ in warm])
    kernels.compile_warm()
    lean = {f"{m}.{n}" for m, n in kernels.LEAN}
    assert lean and {n for n, level in levels.items() if level == str(kernels.LEAN_OPT)} == lean
    assert all(level is None for n, level in levels.items() if n not in lean)


def test_a_stage_with_nothing_to_compile_starts_no_child(monkeypatch):
    """The loader publishes an empty stage at once (a WARM cut down to lean kernels only):
    no compiling child is started for it (its child failed on an empty list of groups)."""
    started = []
    monkeypatch.setattr(kernels, "_compile_elsewhere", lambda warm, nice=0: started.append(warm))
    loader = kernels._Loader()
    published = []
    monkeypatch.setattr(loader, "_publish", lambda module, full=True: published.append(full))
    loader._compile(object(), [((), True)])
    assert started == [] and published == [True]


def test_the_startup_bench_reports_the_lean_stages_cpu():
    """bench/startup.py's first run reports the CPU seconds its job and the compiling
    children spent until the first step on compiled kernels (the job's `lean_cpu`), NaN from
    a record without it."""
    from aneforge.bench.startup import arrivals
    times = [0.1, 4.0] + [1e-3] * 100 + [5e-4] * 100
    stages = ["numpy"] * 2 + ["lean"] * 100 + ["full"] * 100
    run = {"times": times, "stages": stages, "log": []}
    assert arrivals(dict(run, lean_cpu=7.5), 100)["lean_cpu"] == 7.5
    assert np.isnan(arrivals(run, 100)["lean_cpu"])
