"""Start-up costs: a fresh process's first steps while numba's kernels load or compile (a
program's first run on the numpy reference, its second waiting for the first compiled
kernels: aneforge/hardware/kernels/__init__.py), and parsing a large MIL text.

Two arrivals are reported from a first run. Steady state: the steps run within 3x the final
steady step (on the full forms), the lean compiled forms' speed counting as steady and the
numpy reference's (~600x) not. Full speed: within 1.2x; the lean forms run this MLP step at
~1.4x the full ones' CPU time (they trade speed for a short compile), so it comes with the
full forms.
Both are judged on windows of consecutive steps (`WINDOW`, `settled`), and never before the
first step on compiled kernels (the wait for them is one long step), rather than on the last
single slow step: on this shared 2-core machine other processes make a lone step 10x slow at
any time, and the single-step rule read the end of the run (41 s) whatever aneforge did; a
slow phase of aneforge's own still shows, since most steps of its windows are slow. The one
phase the windows see through is the load of the full forms into the process, stalls of
5-25 ms every few steps for ~0.15 s: a row of its own reports the time they cost
(`load_stall`)."""
from __future__ import annotations

import bisect
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

from . import settings

# A small training job in a fresh process: the speed table's MLP 64-128-10 step of batch 64
# under af.compile (as examples/train_mlp.py's), run until the full compiled kernels are in
# and `after` more steps have run (at most `limit` seconds); prints each step's seconds, the
# kernels it ran on (kernels.stage(): numpy, lean, full) and the loader's events (start,
# "lean compiled" by the children, "lean in", ...), in seconds from the first step's start,
# and the CPU seconds from the first step's start to the first step on compiled kernels of
# the process and of the compiling children it has waited for (the lean stage's, whose
# forked copies its child waited for: `lean_cpu`; the wall time is other tenants' too).
_JOB = """
import json, resource, sys, time
from aneforge.bench.workloads import mlp, train_step
from aneforge.hardware import kernels
after, limit = int(sys.argv[1]), float(sys.argv[2])
def cpu():
    return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage, (
        resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))
step = train_step(*mlp(64), "aneforge", compiled=True)
times, stages, full, lean_cpu, cpu0 = [], [], None, None, cpu()
start = time.perf_counter()
while len(times) < (full or 10 ** 9) + after and time.perf_counter() - start < limit:
    stage = kernels.stage()
    if lean_cpu is None and stage != "numpy":
        lean_cpu = cpu() - cpu0
    t = time.perf_counter()
    step()
    times.append(time.perf_counter() - t)
    stages.append(stage)
    if full is None and stage == "full":
        full = len(times)
log = [(event, at - start) for event, at in kernels._LOADER.log]
print(json.dumps({"times": times, "stages": stages, "log": log, "lean_cpu": lean_cpu}))
kernels.wait()          # the compiling children end before their cache directory is removed
"""

# Steady state is judged on windows of this many consecutive steps, by their median: on a
# shared machine a lone step is now and then 10x the steady one (another process took the
# core: measured 4.5 ms steps against 0.37 ms, long after the last swap), which says nothing
# of aneforge; a slow phase of aneforge's own (the numpy kernels, a stall while the full forms
# load) lasts many steps, and a window whose median is slow is one where most steps were.
WINDOW = 10


def settled(times: list[float], steady: float, factor: float) -> float:
    """Seconds from the first step's start to the end of the last window of WINDOW steps
    whose median exceeds factor x `steady` (0.0 if none does)."""
    ends = [i + WINDOW for i in range(len(times) - WINDOW + 1)
            if statistics.median(times[i:i + WINDOW]) > factor * steady]
    return sum(times[:ends[-1]]) if ends else 0.0


def first_run(fresh: bool = True, after: int = 200, limit: float = 180.0) -> dict:
    """Run `_JOB` in a fresh process, on an empty numba cache when `fresh` (else the cache in
    place), and return its first and second steps, its steady step (the median of its last
    100, on the full kernels), the time from its first step's start to the first step on
    compiled kernels, lean or full (`lean`; `lean_cpu`: the CPU seconds of the process and
    its compiling children until then), and on the full ones (`full`; NaN where that did
    not come within `limit`), to steady state (`ready`: `settled` at 3x the steady step, the
    lean forms' speed counting as steady) and to full speed (`fast`: `settled` at 1.2x), both
    at least `lean`, the time its steps lost while the full forms loaded (`stall`:
    `load_stall`), and the job's own record (`run`: its step times, stages and the loader's
    events)."""
    env = dict(os.environ, ANEFORGE_KERNELS="auto")
    with tempfile.TemporaryDirectory() as cache:
        if fresh:
            env["NUMBA_CACHE_DIR"] = cache
        out = subprocess.run([sys.executable, "-c", _JOB, str(after), str(limit)], env=env,
                             capture_output=True, text=True, check=True).stdout
    return arrivals(json.loads(out.splitlines()[-1]), after)


def arrivals(run: dict, after: int) -> dict:
    """`first_run`'s figures from the job's record `run` (`after`: the steps it ran on the
    full forms)."""
    times, stages = run["times"], run["stages"]
    began = [sum(times[:i]) for i in range(len(times))]
    compiled = [i for i, s in enumerate(stages) if s != "numpy"]     # lean, or full at once
    lean_cpu = run.get("lean_cpu")
    at = dict(first=times[0], second=times[1], run=run,
              lean=began[compiled[0]] if compiled else math.nan,
              lean_cpu=math.nan if lean_cpu is None else lean_cpu,
              full=began[stages.index("full")] if "full" in stages else math.nan)
    if "full" not in stages:            # never came in: no steady state to report
        return dict(steady=math.nan, ready=math.nan, fast=math.nan, stall=math.nan, **at)
    steady = statistics.median(times[-min(100, after):])
    # never before the first step on compiled kernels: a program's second run waiting for
    # them (`kernels.settle`) is one long step, which no window's median sees
    return dict(steady=steady, ready=max(settled(times, steady, 3.0), at["lean"]),
                fast=max(settled(times, steady, 1.2), at["lean"]),
                stall=load_stall(run, began), **at)


def load_stall(run: dict, began: list[float]) -> float:
    """Seconds the job lost while this process loaded the full forms (the children had
    compiled them; numba's load holds the GIL in chunks of 5-25 ms, ~0.1 s in all): its steps
    from the "full compiled" event to the first step on them, less as many of the lean steps
    before (their median). The windows of `settled` see through these sparse stalls, so this
    row reports them. NaN when the lean forms did not run first."""
    times, stages = run["times"], run["stages"]
    event = dict(run["log"]).get("full compiled")
    if event is None or "lean" not in stages or "full" not in stages:
        return math.nan
    first, end = bisect.bisect_left(began, event), stages.index("full")
    lean = [t for t, s in zip(times[:first], stages) if s == "lean"][-50:]
    if not lean:
        return math.nan
    return sum(times[first:end]) - (end - first) * statistics.median(lean)


def rows() -> list[tuple[str, float, None, str]]:
    """The speed table's start-up rows (seconds, shown in ms): on a clean numba cache, or under
    `--quick` (the test suite) on the cache in place."""
    fresh = settings.steps >= 100
    run = first_run(fresh=fresh, after=200 if fresh else 25)
    what = "first run on a clean numba cache" if fresh else "first run, numba cache in place"
    statements = 130_000 if fresh else 2_000
    return [(f"{what}: first step (MLP b64, af.compile)", run["first"], None, "ms"),
            (f"{what}: second step", run["second"], None, "ms"),
            (f"{what}: first step to steady state (windows within 3x the steady step)",
             run["ready"], None, "ms"),
            (f"{what}: first step to the lean compiled kernels", run["lean"], None, "ms"),
            (f"{what}: CPU of the process and its compiling children until then",
             run["lean_cpu"], None, "ms"),
            (f"{what}: first step to the full compiled kernels", run["full"], None, "ms"),
            (f"{what}: first step to full speed (windows within 1.2x the steady step)",
             run["fast"], None, "ms"),
            (f"{what}: time lost to stalls while the full kernels load", run["stall"], None,
             "ms"),
            (f"{what}: steady step", run["steady"], None, "ms"),
            (f"parse + validate MIL text of {statements} statements", mil_parse(statements),
             None, "ms")]


# the generated program's repeating ops and their arguments ({c}: a scalar const of its own)
_CHAIN = (("add", "x = {prev}, y = {before}"), ("sub", "x = {prev}, y = {before}"),
          ("relu", "x = {prev}"), ("mul", "x = {prev}, y = {c}"))


def mil_program(statements: int) -> str:
    """MIL text of `statements` statements (~87 bytes each: 10 MB is ~115k) as a network's
    text looks: a chain of binary ops on [1, 64] fp16 values, every fourth a multiply by a
    scalar const (its own statement), relus between."""
    lines = ["program(1.3)", "{", "    func main<ios18>(tensor<fp16, [1, 64]> x) {"]
    prev, before = "x", "x"
    for i in range(statements // 5 * 4):
        v, (op, form) = f"v{i}", _CHAIN[i % 4]
        if "{c}" in form:
            lines.append(f'        fp16 c{i} = const()[name = string("c{i}"), '
                         f'val = fp16(0x1.8p-1)];')
        args = form.format(prev=prev, before=before, c=f"c{i}")
        lines.append(f'        tensor<fp16, [1, 64]> {v} = {op}({args})[name = string("{v}")];')
        prev, before = v, prev
    return "\n".join(lines + [f"    }} -> ({prev});", "}", ""])


def mil_parse(statements: int) -> float:
    """Seconds to parse and validate `mil_program(statements)` (`af.load_mil`'s front half)."""
    from ..mil.text import parse
    text = mil_program(statements)
    start = time.perf_counter()
    parse(text)
    return time.perf_counter() - start
