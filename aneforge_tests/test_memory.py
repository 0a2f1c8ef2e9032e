"""The simulator's memory: values are dropped after their last use, and loops do not grow."""
import fnmatch
import gc
import resource
import tracemalloc

import numpy as np
import pytest

import aneforge as af
from aneforge.hardware import kernels
import aneforge.nn as nn
import aneforge.nn.functional as F


def peak_bytes(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_chain_of_ops_holds_a_few_values_at_once_not_all_of_them(monkeypatch):
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "never")      # the interpreter's frees
    x = af.tensor(np.random.default_rng(0).random((128, 128)))
    y = x
    for _ in range(12):
        y = (y * 1.001).relu() + 0.5
    y = y.mean()                                # (a sum of 16k values near 7 would overflow fp16)
    y.numpy()                                   # compile
    exe = af.program(y)                         # the program that computed y
    from aneforge.runtime import get_backend
    runner = get_backend().compile(exe, af.get_numerics())
    inputs = [np.asarray(x.numpy()).astype(np.float16)]
    one = 128 * 128 * 4                         # one float32 carrier array
    peak = peak_bytes(lambda: runner.run(inputs))
    assert peak < 10 * one, peak / one          # 36 intermediate values; a handful alive at once
    runner.frees = [[] for _ in runner.frees]   # without the plan: every value stays
    assert peak_bytes(lambda: runner.run(inputs)) > 30 * one


def _loop(steps, compiled):
    af.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = af.optim.AdamW(model.parameters(), lr=1e-3)
    x = np.random.default_rng(0).random((steps, 4, 8)).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 2, (steps, 4))

    def step(xb, yb):
        opt.zero_grad()
        loss = F.cross_entropy(model(af.tensor(xb)), af.tensor(yb))
        loss.backward()
        opt.step()
        return loss
    step = af.compile(step) if compiled else step
    return lambda i: step(x[i], y[i]).item()


def peak_rss() -> int:
    """The process's peak resident memory so far (kilobytes on Linux, bytes on macOS)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def assert_flat(step, warm: range, measured: range, limit: int) -> None:
    """`live_growth` below `limit` bytes. A window over it is measured once more, the same
    steps again: what grows every step grows again, while a one-off allocation of a window
    does not (seen once in a full run under pytest-xdist, 12.8 kB in one window, where alone
    and in every other run the window stays under the limit: a bounded cache another test
    of the process left part full, a library's lazy table)."""
    grown = live_growth(step, warm, measured)
    if grown >= limit:
        grown = live_growth(step, warm[-len(warm) // 4:], measured)
    assert grown < limit, f"{grown} bytes more after {len(measured)} steps, twice over"


def live_growth(step, warm: range, measured: range) -> int:
    """Bytes still allocated after `measured` steps that were not after `warm` (its last
    quarter traced too: tracing starts within the warm-up so its own first allocations are
    not counted). The numpy kernels run here: numba fills bounded type caches of its own over
    tens of thousands of calls, which would hide aneforge's own growth (its executor, replay
    and trace)."""
    with kernels.using("numpy"):
        return _live_growth(step, warm, measured)


def _live_growth(step, warm: range, measured: range) -> int:
    # the warm-up's first three quarters untraced: a traced step on the numpy kernels costs
    # ~4x an untraced one (the replayed loop: 48 ms against 12 ms of CPU), and what they
    # allocate is never counted, kept or freed (traced, a block they made and a measured step
    # freed would have offset that much growth)
    untraced = len(warm) - len(warm) // 4
    for i in warm[:untraced]:
        step(i)
    tracemalloc.start(FRAMES)
    try:
        for i in warm[untraced:]:
            step(i)
        gc.collect()
        early = _this_thread_bytes()
        for i in measured:
            step(i)
        gc.collect()
        return _this_thread_bytes() - early
    finally:
        tracemalloc.stop()


# On a clean numba cache the kernels' loader thread imports the compiled kernels while the
# steps run (hardware/kernels: numpy until then): what numba, llvmlite and the import system
# allocate then is not the steps' growth.
FRAMES = 1
LOADER_FILES = ("*numba*", "*llvmlite*", "<frozen importlib*", "*importlib*", "*pickle*")
# The filters' patterns compiled now, untraced: fnmatch compiles a pattern at its first match
# and keeps it (its lru_cache), and compiled within a measurement (the first snapshot's filter,
# after its count) they were ~3.7 kB of growth no step made, in the first measurement of every
# process (measured: 3708 bytes after 150 replayed steps, 400 with the patterns compiled first)
FILTERS = [tracemalloc.Filter(False, pattern) for pattern in LOADER_FILES]
for _pattern in LOADER_FILES:
    fnmatch.fnmatch("", _pattern)


def _this_thread_bytes() -> int:
    snapshot = tracemalloc.take_snapshot().filter_traces(FILTERS)
    return sum(trace.size for trace in snapshot.traces)


def test_memory_stays_flat_over_a_thousand_replayed_steps():
    step = _loop(1000, compiled=True)
    for i in range(100):
        step(i)
    # 150 measured steps (< 14 bytes a step, as 4096 over 300 were): each costs ~45 ms of CPU
    # traced on the numpy kernels; the window grows ~400 bytes
    assert_flat(step, range(100, 300), range(300, 450), 2048)
    early = peak_rss()
    for i in range(450, 1000):
        step(i)
    assert peak_rss() - early < early // 100, (early, peak_rss())


def test_memory_stays_flat_over_eager_steps():
    step = _loop(300, compiled=False)
    for i in range(100):
        step(i)
    assert_flat(step, range(100, 150), range(150, 300), 8192)      # < 60 bytes a step


def test_the_flatness_check_sees_a_leak():
    kept = []
    leak = lambda i: kept.append(bytes(100 + i))            # noqa: E731  (~130 bytes a step)
    with pytest.raises(AssertionError, match="twice over"):
        assert_flat(leak, range(0, 20), range(20, 120), 4096)
    assert_flat(lambda i: bytes(100 + i), range(0, 20), range(20, 120), 4096)


def test_planned_peak_matches_the_simulators_lifetimes():
    from aneforge.runtime import memory
    x = af.tensor(np.ones((64, 64), np.float16))
    y = x
    for _ in range(6):
        y = (y * 1.5).relu() + 0.25
    prog = af.program(y.sum())
    peak, largest = memory.peak_bytes(prog)
    one = 64 * 64 * 4
    assert largest.shape == (64, 64)
    assert 2 * one <= peak <= 5 * one           # input + a producer, its consumer, a view


def test_a_program_over_the_memory_budget_is_refused_before_allocating(monkeypatch):
    from aneforge.core.realization import clear_cache
    clear_cache()
    x = af.ones(4096)[None, None].expand(64, 64, 4096)        # 64 MiB carried in float32
    monkeypatch.setenv("ANEFORGE_SIM_MAX_BYTES", "16M")
    with pytest.raises(af.OutOfMemoryError, match=r"64\.0 MiB.*ANEFORGE_SIM_MAX_BYTES") as e:
        (x * 2.0).amax().item()
    assert isinstance(e.value, MemoryError)
    monkeypatch.setenv("ANEFORGE_SIM_MAX_BYTES", "1G")
    assert (x * 2.0).amax().item() == 2.0


def test_a_malformed_memory_budget_says_what_it_expects(monkeypatch):
    from aneforge.core.realization import clear_cache
    clear_cache()                                   # the budget is read when a program compiles
    monkeypatch.setenv("ANEFORGE_SIM_MAX_BYTES", "lots")
    with pytest.raises(ValueError, match="K, M or G suffix"):
        (af.ones(3, 5, 7) * 2.0).numpy()
