"""The simulator's hot kernels — fp16 rounding, the tile-datapath and fp16-product matmuls and
the matmul output port, the narrow fp16 sum — (and the float16 casts at a program's
boundary) in two implementations with one meaning: `reference` (numpy, always available, the
definition) and `compiled` (numba, used when installed: `pip install -e ".[fast]"` in a clone).
Both give bit-identical results (aneforge_tests/test_kernels.py).

One switch picks the implementation: the environment variable `ANEFORGE_KERNELS` read at
import (`auto`, the default: numba if importable; `numpy`; `numba`), or `use()`:

>>> from aneforge.hardware import kernels
>>> previous = kernels.use("numpy")      # force the numpy reference
>>> kernels.active()
'numpy'
>>> _ = kernels.use(previous)

Importing aneforge never imports numba. Under "auto" the first kernel call starts loading the
compiled kernels in a background thread and runs the numpy reference until they are ready (the
two are bit-identical, so a program gives the same bits whichever runs, and whenever the swap
happens): on a fresh install numba compiles them once, in child processes on other cores,
into its on-disk cache (lean forms of the two big kernels and the small kernels a loop
calls first, ~3.5 s of CPU in each of two processes after ~1.5 s they share on this AVX2 VM
at load ~5, then the full forms and the rest, ~80-100 s: `_Loader`), from which later runs
load them in ~0.3 s. The lean forms run the bench's MLP step (the README's too) at ~1.4x
the full ones' CPU time: far
from the reference's ~600x. A program's second run (a loop) waits for the lean forms rather than run
on the reference meanwhile (`settle`).
`wait()` blocks until the full forms are in (tests that must run the compiled kernels call
it); "numba" loads them at once.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import math
import os
import subprocess
import sys
import threading
import time

import numpy as np

from . import reference
from .threads import PARALLEL_MACS, threads

CHOICES = ("auto", "numpy", "numba")
_choice = [os.environ.get("ANEFORGE_KERNELS", "auto").strip().lower() or "auto"]
_compiled: list = []          # the imported `compiled` module, once loaded


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """True if numba is installed (found without importing it: importing takes ~0.5 s; looked
    up once per process: every kernel call asks)."""
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):
        return False


def use(choice: str) -> str:
    """Pick the kernels: "auto" (numba when installed), "numpy" or "numba"; returns the
    previous choice."""
    if choice not in CHOICES:
        raise ValueError(f"kernels must be one of {CHOICES}, got {choice!r}")
    if choice == "numba" and not available():
        raise ImportError('the numba kernels need numba: pip install -e ".[fast]" in a clone')
    previous, _choice[0] = _choice[0], choice
    return previous


@contextlib.contextmanager
def using(choice: str):
    """Run a block with the given kernels (tests compare the two this way)."""
    previous = use(choice)
    try:
        yield
    finally:
        use(previous)


def active() -> str:
    """"numba" or "numpy": the implementation the next kernel call runs (under "auto", numpy
    until the background load has swapped the compiled kernels in)."""
    if _choice[0] not in CHOICES:
        raise ValueError(f"ANEFORGE_KERNELS must be one of {CHOICES}, got {_choice[0]!r}")
    if _choice[0] == "numpy" or (_choice[0] == "auto" and (not available() or not _compiled
                                                           or _compiled == [None])):
        return "numpy"
    return "numba"


def _fast():
    """The compiled module, or None when the numpy reference runs (chosen, numba absent or
    broken, or under "auto" still loading in the background: `_Loader`)."""
    if _compiled and _choice[0] != "numpy" and _compiled[0] is not None:
        return _compiled[0]                 # the hot path: loaded, and not switched off
    if active() == "numpy":
        if _choice[0] == "auto" and available() and not _compiled:
            _LOADER.start()                 # the reference runs until the swap
        return None
    _LOADER.start()                         # "numba": wait for the load
    _LOADER.done.wait()
    if _compiled[0] is None:
        from . import compiled              # noqa: F401  (raises numba's ImportError)
    return _compiled[0]


def _fast_late():
    """`_fast()` for the kernels of `LATE` this module calls: None while only the lean stage
    is in (the numpy reference runs rather than numba compile them in this process), or
    while `forms("lean")` runs a block as the lean stage does."""
    fast = _fast()
    return fast if _FULL.is_set() and not (_LEAN_BLOCK and _LEAN_BLOCK[-1]) else None


def settle(timeout: float = 60.0) -> None:
    """Wait (at most `timeout` seconds) while the first compiled kernels compile on a fresh
    install, then return; at once otherwise. The simulator calls it before a program's second
    run, where the run plan would be built (a loop: runtime/sim.py). The numpy reference
    steps it would run meanwhile are ~250x slower than the compiled ones, so the ~45 steps of
    a 4 s compile did what the compiled kernels do in ~30 ms, and they took a core the
    compiling children need on a 2-core machine: waiting lets the compiled kernels in sooner.
    A program run once (a one-off `.numpy()`) does not wait: it runs on the reference. The
    first wait says so on stderr (once per process), so a pause of seconds is not a mystery."""
    if _SETTLED.is_set():
        return
    if not _NOTICED:
        _NOTICED.append(True)
        print("aneforge: compiling the simulator's kernels with numba, once per install (cached "
              "on disk); the next step waits a few seconds for them", file=sys.stderr, flush=True)
    _SETTLED.wait(timeout)


def stage() -> str:
    """"numpy", "lean" or "full": which compiled kernels are in (`_Loader`; "lean": the
    small ones and the lean forms of the fused VM and the tile matmul, same bits)."""
    return _LOADER.stage


def wait(timeout: float | None = None) -> str:
    """Block until the compiled kernels are loaded, the full forms too (or known to be
    unavailable), at most `timeout` seconds; returns `active()`.

    >>> wait() in ("numba", "numpy")
    True
    """
    if _choice[0] != "numpy" and available():
        _LOADER.start()
        _LOADER.done.wait(timeout)
    return active()


# ---- loading the compiled kernels without stopping the caller --------------------------------
# The kernels the default numerics call from Python, with the argument types they are called
# with (runtime/plan.py's fused runs, the tile matmul, the casts and roundings): these are
# loaded, or compiled into numba's cache, before the swap. Others (other numerics models, other
# types) compile on first use. Types: "f4:2" a C-contiguous 2-D float32 array ("r": read-only),
# else a numba scalar type.
_TILE = ("f4:3", "f4:3", "i8:1r", "i8:1r", "f4:3", "int64", "int64", "float32", "int64", "int64")
_RUN = ("f4:1", "i8:2", "f4:1", "f4:1", "f4:1", "int64", "u2:1", "int64")
WARM = (
    ("casts", "to_float16", ("f4:1", "u2:1")),
    ("casts", "to_float16", ("f4:1r", "u2:1")),     # a read-only input (a batch held by x[i])
    ("casts", "from_float16", ("u2:1", "f4:1")),
    ("casts", "has_nan", ("f4:1",)),
    ("compiled", "_round16_ieee", ("f4:1", "f4:1", "int64")),
    ("compiled", "_narrow_sum", ("f4:2", "f4:1", "int64")),
    ("compiled", "port", ("f4:1", "float32", "boolean")),
    ("compiled", "port_round", ("f4:2", "f4:1", "float32", "boolean", "int64")),
    ("compiled", "_lean_tasks", _TILE),
    ("fused", "run_lean", _RUN),
    ("casts", "to_float16_spans", ("f4:1", "i8:2", "u2:1")),
    ("casts", "from_float16_spans", ("u2:1", "i8:2", "f4:1", "boolean", "i8:1")),
    ("casts", "move", ("f4:1", "i8:2", "int64", "int64", "float32", "boolean")),
    ("compiled", "_default_tasks", _TILE),
    ("compiled", "transpose", ("f4:3", "f4:3")),
    ("fused", "run_full", _RUN),
)
# Two kernels have a full form that takes numba ~57 s (the fused VM) and ~17-26 s (the tile
# matmul) of CPU to compile on this AVX2 VM under load, and a lean one, the same bits slower,
# that takes ~3-3.5 s (the VM: one function, every reduction but absmax left to its kernel)
# and ~2 s (the tile matmul: one loop nest, the default tile only), at LLVM -O`LEAN_OPT`.
# On a fresh install the lean forms and the small kernels are compiled first (a program's
# first run goes on the numpy reference, its second waits: `settle`), then the full forms,
# and each is swapped in when loaded: the name the callers call (module, name) is bound to
# the lean form, then the full.
SWAPS = {("fused", "run"): ("run_lean", "run_full"),
         ("compiled", "default_tasks"): ("_lean_tasks", "_default_tasks")}
# Small kernels compiled with the full forms, not before: nothing a training step under
# af.compile runs in its loop calls them (the README's MLP, instrumented: its steps from the
# second on call the casts to fp16, the round16 of the plan's tables, the tile matmul,
# port_round, the narrow sum, the fused VM and the boundary spans), and they took ~1.9 s of
# CPU of the lean stage's busier process (move ~1.2, the others ~0.7). Until the full stage
# is in, the callers here run the NaN check, the cast from fp16 and the port on the numpy
# reference (`_fast_late`: same bits; a step's first run calls them, on the reference
# anyway); a program whose run plan moves data compiles `move` in its own process at its
# first call (numba compiles a kernel at its first call with new types; ~1.3 s, once).
# port_round and the narrow sum stay in the lean stage (~1.5 s of its CPU): on the numpy
# reference they took the MLP step's lean forms from ~1.4x to ~2-3.4x the full ones' time,
# past the bench's steady-state bound of 3x (the full forms' arrival, ~90 s, became the
# steady state).
# The transpose of a bound matmul's operand (~1.4 s of CPU on a fresh cache) joined them: the
# lean stage copies by numpy (`_copier`).
LATE = {("casts", "move"), ("casts", "has_nan"), ("casts", "from_float16"), ("compiled", "port"),
        ("compiled", "transpose")}
# The LLVM optimization level the lean forms compile at (`_opt`): numba's default, 3. Levels 1
# and 2 compile them with ~10-25% less CPU, but ran the MLP step's lean forms at ~1.7-2.5x the
# full forms' time against ~1.4-1.7x at 3 (process CPU, 4 rounds each), too near the bench's
# 3x steady-state bound.
LEAN = {(module, lean) for (module, _), (lean, _) in SWAPS.items()}
LEAN_OPT = 3
FULL = {(module, full) for (module, _), (_, full) in SWAPS.items()} | LATE


def _numba_type(spec: str):
    from numba import from_dtype, types
    if ":" not in spec:
        return getattr(types, spec)
    dtype, ndim = spec.split(":")
    return types.Array(from_dtype(np.dtype(dtype)), int(ndim[0]), "C", readonly=ndim[1:] == "r")


def _kernels(warm=None):
    """[(dispatcher, argument types)] of `warm` (default WARM; imports numba)."""
    import importlib
    return [(getattr(importlib.import_module(f"{__name__}.{module}"), name),
             tuple(map(_numba_type, specs))) for module, name, specs in warm or WARM]


def _stages() -> tuple[tuple, tuple]:
    """WARM as its two stages: the lean forms and the small kernels, then the full forms (and
    `LATE`)."""
    lean = tuple(w for w in WARM if w[:2] not in FULL)
    return lean, tuple(w for w in WARM if w[:2] in FULL)


class _NotCached(Exception):
    pass


def _load_cached(kernels) -> bool:
    """Load each kernel from numba's on-disk cache, compiling none: False at the first one
    not there (numba announces a compile before starting it; this thread's is stopped)."""
    from numba.core import event
    me = threading.get_ident()

    class Refuse(event.Listener):
        def on_start(self, ev):
            if threading.get_ident() == me:
                raise _NotCached

        def on_end(self, ev):
            pass

    try:
        with event.install_listener("numba:compile", Refuse()):
            for kernel, sig in kernels:
                kernel.compile(sig)
    except _NotCached:
        return False
    return True


def _compile_elsewhere(warm, nice: int = 0) -> subprocess.Popen:
    """Start compiling `warm` into numba's on-disk cache in a child process (`compile_groups`:
    its groups side by side, `_child`) and return it: on other cores, and not under this
    process's GIL (numba's compiler is mostly Python: compiling in a thread here would halve
    the speed of the steps the caller runs meanwhile).
    `nice`: the children's lower priority (the full forms: the caller's steps, on the lean
    kernels by then, go first). On a busy machine niced children get little CPU (measured:
    ~5% of a core each at load 7; the full forms had not come in after 240 s) but a child at
    the caller's priority took two thirds of the caller's steps (measured at load 5: 2250
    steps per 5 s against 6100): the caller's steps go first, and the children, which finish
    their work after the caller exits, fill numba's cache for the next run."""
    groups: dict = {}
    for module, name, _ in warm:
        groups.setdefault(_child(module, name), []).append(f"{module}.{name}")
    return _spawn(list(groups.values()), nice)


def _spawn(groups: list[list[str]], nice: int) -> subprocess.Popen:
    """A child process running `compile_groups(groups)` at niceness `nice` (`_CHILD`)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    path = [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, ANEFORGE_KERNELS="numba", PYTHONPATH=os.pathsep.join(path))
    return subprocess.Popen([sys.executable, "-c", _CHILD.format(
        nice=nice, package=os.path.join(root, "aneforge"), groups=groups)], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _child(module: str, name: str) -> str:
    """Which process compiles a WARM kernel: one per module, the boundary kernels (casts.py)
    with the small kernels. On the lean stage (CPU on this AVX2 VM under load, `_prepare`'s
    ~1.5 s done, which they share) the tile matmul's lean form and the small kernels take
    ~2.3 + ~1.2 s, the fused VM's lean form ~3-3.5 s: two processes on two cores; on the full
    stage the tile matmul (and the small kernels) and the fused VM compile side by side."""
    return "compiled" if module == "casts" else module


# A compiling child's program. It imports the kernels without the rest of aneforge: the
# package's __init__ (the whole library, ~0.2 s of CPU) stands in as an empty module of the
# same path, so the kernels keep their module names, files and numba cache entries. Nor does
# it import scipy's BLAS, which numba's first compile imports to offer np.dot and the like
# (0.3-0.45 s of CPU before any kernel compiles; no kernel calls them: one that did would
# fail to compile here, loudly, and compile in the caller's load instead).
_CHILD = """import os, sys, types
os.nice({nice})
sys.modules["scipy.linalg.cython_blas"] = None
package = types.ModuleType("aneforge")
package.__path__ = [{package!r}]
sys.modules["aneforge"] = package
from aneforge.hardware import kernels
kernels.compile_groups({groups!r})"""


def compile_warm(names: list[str] | None = None) -> None:
    """Compile (or load) the WARM kernels named ("compiled.port", ...; None: all) in this
    process, the lean forms at LLVM optimization level LEAN_OPT (`_opt`)."""
    warm = [w for w in WARM if names is None or f"{w[0]}.{w[1]}" in names]
    for (kernel, sig), (module, name, _) in zip(_kernels(warm), warm):
        with _opt(LEAN_OPT if (module, name) in LEAN else None):
            kernel.compile(sig)


@contextlib.contextmanager
def _opt(level: int | None):
    """A block whose numba compiles run LLVM at optimization `level` (None: as set), through
    numba's own setting, the environment variable NUMBA_OPT, which its compiler reads again
    at each compile when the environment changed. A kernel's machine code is cached as it
    was compiled; a kernel that calls one compiled so links that one's code into its own and
    optimizes the whole again at its own level, so only the lean forms and their callees'
    machine code of their own (which nothing calls from Python but `rows_per_task`, two
    integer operations) carry the lower level."""
    if level is None:
        yield
        return
    previous = os.environ.get("NUMBA_OPT")
    os.environ["NUMBA_OPT"] = str(level)
    try:
        yield
    finally:
        if previous is None:
            del os.environ["NUMBA_OPT"]
        else:
            os.environ["NUMBA_OPT"] = previous


def compile_groups(groups: list[list[str]]) -> None:
    """`compile_warm` of each group of names side by side (`_compile_elsewhere`'s child runs
    this): numba is imported and its compiler's tables built once (~0.45 s of CPU, the same
    in every process), then the process forks a copy of itself per group after the first,
    which it compiles itself. Where fork is not the way to start a process (not Linux), a
    fresh process per group instead.

    One compile of the same groups at a time per cache (`_one_at_a_time`): a process started
    while another compiles them waits, then loads what the other wrote (~0.5 s) instead of
    compiling it all again beside it. Without this, every short script run on a fresh cache
    left its own compile running after it exited (measured: 47 copies of the full stage at
    once, at load 50, none finishing)."""
    with _one_at_a_time(groups) as waited:
        names = {name for group in groups for name in group}
        if waited and not _uncached([w for w in WARM if f"{w[0]}.{w[1]}" in names]):
            return                          # the other process wrote them: the caller loads
        _compile_groups(groups)


def _compile_groups(groups: list[list[str]]) -> None:
    if sys.platform.startswith("linux"):
        _prepare()
        copies = [_forked(names) for names in groups[1:]]
    else:
        copies = [_spawn([names], 0) for names in groups[1:]]
    compile_warm(groups[0])
    for copy in copies:
        os.waitpid(copy, 0) if isinstance(copy, int) else copy.wait()


@contextlib.contextmanager
def _one_at_a_time(groups: list[list[str]]):
    """Hold an exclusive lock on a file named for `groups` in the cache's place (`_place`;
    the temp directory when numba keeps its cache elsewhere) for the block, which gets
    whether it had to wait for another process holding it. The lock goes with the process
    that holds it (flock: released at its exit, even a crash). No locking where flock is
    absent."""
    try:
        import fcntl
    except ImportError:                     # not POSIX: compile side by side as before
        yield False
        return
    import tempfile
    key = hashlib.sha1(repr(sorted(map(sorted, groups))).encode()).hexdigest()[:16]
    place = _place() or tempfile.gettempdir()
    os.makedirs(place, exist_ok=True)
    with open(os.path.join(place, f"aneforge-compile-{key}.lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            waited = False
        except OSError:                     # another process compiles them: wait for it
            fcntl.flock(lock, fcntl.LOCK_EX)
            waited = True
        try:
            yield waited
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _forked(names: list[str]) -> int:
    """A forked copy of this process that compiles `names` and exits; its pid."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            compile_warm(names)
            code = 0
        finally:
            os._exit(code)
    return pid


def _prepare() -> None:
    """Import the kernels' modules and numba, and build numba's typing and target tables (the
    first compile does, ~0.3 s: here a function of nothing, not cached)."""
    from numba import njit
    _kernels(WARM)
    njit(_nothing).compile(())


def _nothing():
    return None


def _uncached(warm) -> bool:
    """Whether numba's on-disk cache surely lacks a kernel of `warm`, known without importing
    numba (~0.4 s of CPU before the compiling children could start): no index file of its
    name (numba's "<module>.<name>-<line>.py<version>.nbi") where numba keeps this
    directory's cache: under NUMBA_CACHE_DIR (numba's UserProvidedCacheLocator) or in the
    package's __pycache__ (its InTreeCacheLocator). False when not sure (a cache numba
    keeps elsewhere, an index that may be stale): the caller asks numba."""
    place = _place()
    if place is None:
        return False
    try:
        names = os.listdir(place)
    except OSError:
        return True
    return any(not any(n.startswith(f"{module}.{name}-") and n.endswith(".nbi") for n in names)
               for module, name, _ in warm)


# numba keys a cached kernel by its own source file's stamp, but compiled.py's tile matmuls
# inline the LLVM code avx2.py and avx512.py build: after those change (an update), the cache
# would keep loading the old strips (the same bits; the old speed). Their hash is kept beside
# the cache, and a mismatch drops compiled.py's entries so they compile anew.
INLINED = ("avx2.py", "avx512.py")
_INLINED_STAMP = "aneforge-inlined.sha1"


def _inlined_hash() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha1()
    for name in INLINED:
        with open(os.path.join(here, name), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def _drop_stale(place: str | None) -> None:
    """Drop compiled.py's cache entries in `place` unless they were made with the current
    avx2.py and avx512.py (their hash, kept there); then record the current hash, in a new
    directory too (a cache made without the hash beside it counts as stale). Nothing happens
    where numba keeps no cache of ours (`place` None or not writable)."""
    if place is None:
        return
    try:
        os.makedirs(place, exist_ok=True)
    except OSError:
        return
    stamp, now = os.path.join(place, _INLINED_STAMP), _inlined_hash()
    try:
        with open(stamp) as f:
            if f.read().strip() == now:
                return
    except OSError:
        pass
    for name in os.listdir(place):
        if name.startswith("compiled.") and name.endswith((".nbi", ".nbc")):
            with contextlib.suppress(OSError):       # another process dropped it first
                os.remove(os.path.join(place, name))
    with contextlib.suppress(OSError):
        with open(stamp, "w") as f:
            f.write(now)


def _place() -> str | None:
    """Where numba keeps this directory's cache: under NUMBA_CACHE_DIR (numba's
    UserProvidedCacheLocator) or in the package's __pycache__ (its InTreeCacheLocator); None
    when numba keeps it elsewhere (the package's directory is not writable)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("NUMBA_CACHE_DIR"):
        sub = f"{os.path.basename(here)}_{hashlib.sha1(here.encode()).hexdigest()}"
        return os.path.join(os.environ["NUMBA_CACHE_DIR"], sub)
    if os.access(here, os.W_OK):
        return os.path.join(here, "__pycache__")
    return None


class _Loader:
    """The load of the compiled kernels, once per process, in two stages (`SWAPS`). The first
    kernel call imports them and loads WARM from numba's on-disk cache (~1 s, in the caller:
    quicker than running the reference meanwhile). What is not there (a fresh install, a new
    numba or a changed kernel) a background thread has compiled into the cache by child
    processes while the caller runs the numpy reference (or waits: `settle`); on a cache that
    surely lacks them (`_uncached`) the children start at once, and the thread imports numba
    while they compile, not the caller before (~0.4 s). The lean stage first (~3.5 s of CPU
    in each of two processes after ~1.5 s they share), loaded and published, then the full
    forms (the children niced below the caller), loaded and swapped in; a stage with nothing
    to compile is published at once. `done` is set once the full forms are in (or
    known to be unavailable).

    Thread safety of the swaps: publishing is one append to `_compiled` under `_LOCK`, after
    every kernel of the stage is loaded; readers (`_fast`) read `_compiled` without the lock
    and see either the empty list (numpy reference) or the loaded module, never a half-loaded
    one; a full form replaces a lean one by one rebinding of the name its callers read. A
    run that sees a swap between two kernel calls mixes the implementations, which give
    identical bits (aneforge_tests/test_kernels.py), and the run plan (runtime/plan.py) is
    only built once `_fast()` returns the module. numba's compiler holds a process-wide lock,
    so a kernel the caller compiles meanwhile (other numerics) waits for the loader's, never
    races it."""

    def __init__(self):
        self.started, self.done = False, threading.Event()
        self.stage = "numpy"            # "lean" or "full" once published
        self.log: list = []             # (event, time.perf_counter()): bench/startup.py reads it

    def start(self) -> None:
        with _LOCK:
            if self.started:
                return
            self.started = True
            self.log.append(("start", time.perf_counter()))
            lean, full = _stages()
            stages = [(lean, False), (full, True)]
            _drop_stale(_place())
            if _uncached(lean):             # a fresh install: the children start at once
                _SETTLED.clear()
                self._background(None, stages)
                return
            try:
                from . import compiled
                lean_kernels, full_kernels = _kernels(lean), _kernels(full)
            except ImportError:             # numba broken: the numpy reference stays
                self._publish(None)
                return
            if _load_cached(lean_kernels):
                if _load_cached(full_kernels):
                    self._publish(compiled, True)
                    return
                self._publish(compiled, False)
                stages = stages[1:]
            if not _compiled:               # the lean stage compiles: `settle` waits for it
                _SETTLED.clear()
            self._background(compiled, stages)

    def _background(self, module, stages) -> None:
        threading.Thread(target=self._compile, args=(module, stages), daemon=True,
                         name="aneforge-kernels-compile").start()

    def _compile(self, module, stages) -> None:
        """Compile `stages` in child processes, then load and publish each; `module`: the
        compiled module, or None when not imported yet (`_uncached`: imported here while the
        first children compile, and numba's tables built, so the load is quick)."""
        try:
            for warm, full in stages:
                if not warm:                # nothing to compile (a cut-down WARM): no child
                    with _LOCK:
                        self._publish(module, full)
                    continue
                children = _compile_elsewhere(warm, nice=10 if full else 0)
                if module is None:
                    try:
                        from . import compiled as module
                        _prepare()
                    except ImportError:     # numba broken: the numpy reference stays
                        children.wait()
                        with _LOCK:
                            self._publish(None)
                        return
                children.wait()
                self.log.append((f"{'full' if full else 'lean'} compiled", time.perf_counter()))
                for kernel, sig in _kernels(warm):  # from the cache now (compiles what is missing)
                    kernel.compile(sig)
                    if full:                # the caller's steps run between two loads, each
                        time.sleep(_LOAD_GAP)   # holding the GIL for 5-25 ms, not after a row
                with _LOCK:
                    self._publish(module, full)
        except BaseException:               # printed by the thread; what is in stays
            with _LOCK:
                if not _compiled:
                    _compiled.append(None)  # the reference stays
                self.done.set()
                _SETTLED.set()
            raise

    def _publish(self, module, full: bool = True) -> None:
        if module is not None:
            for (where, name), choices in SWAPS.items():
                setattr(_module(where), name, getattr(_module(where), choices[full]))
            self.stage = "full" if full else "lean"
            self.log.append((f"{self.stage} in", time.perf_counter()))
        if not _compiled:
            _compiled.append(module)
        _SETTLED.set()
        if full:
            _FULL.set()
            self.done.set()


# Seconds between two loads of the full forms into a running process (`_Loader._compile`): a
# training loop's steps take ~0.3 ms, so ~60 of them run in the gap and no run of consecutive
# steps waits on the loads (they cost the same ~50 ms in all, spread over ~0.3 s).
_LOAD_GAP = 0.02


def _module(name: str):
    import importlib
    return importlib.import_module(f"{__name__}.{name}")


@contextlib.contextmanager
def forms(which: str):
    """Run a block on the "lean" or the "full" forms of the swapped kernels (`SWAPS`; tests
    compare the two), then put back the ones that were bound. Under "lean" the kernels of
    `LATE` run the numpy reference, as they do before the full stage is in."""
    index = ("lean", "full").index(which)
    bound = [(_module(where), name) for where, name in SWAPS]
    saved = [getattr(module, name) for module, name in bound]
    for (module, name), choices in zip(bound, SWAPS.values()):
        setattr(module, name, getattr(module, choices[index]))
    _LEAN_BLOCK.append(which == "lean")         # (the late kernels: `_fast_late`)
    try:
        yield
    finally:
        _LEAN_BLOCK.pop()
        for (module, name), kernel in zip(bound, saved):
            setattr(module, name, kernel)


_LOCK = threading.Lock()
_LOADER = _Loader()
_SETTLED = threading.Event()        # clear while the first compiled kernels compile (`settle`)
_SETTLED.set()
_NOTICED: list = []                 # `settle` said it waits (once per process)
_FULL = threading.Event()           # the full stage is in (`_fast_late`)
_LEAN_BLOCK: list = []              # `forms` blocks open, innermost last: True for "lean"


def mode(rounding: str, subnormals: str, nan_to_zero: bool = False) -> int:
    """The numerics model's rounding as the kernels' small int (see reference.py)."""
    return (2 if rounding == "half_away" else 0) | (1 if subnormals == "flush" else 0) \
        | (4 if nan_to_zero else 0)


def round16(x, mode: int) -> np.ndarray:
    """x rounded to fp16 values, as float32 (any shape; python scalars and float64 are first
    converted to float32)."""
    fast = _fast()
    if fast is None:
        return reference.round16(x, mode)
    x = np.asarray(x, dtype=np.float32)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.shape, np.float32)
    fast.round16(flat, out, mode)
    return out.reshape(x.shape)


def matmul(x, y, mode: int) -> np.ndarray:
    """x @ y for float32 operands of rank >= 2 with broadcast batch dims: each product rounded
    to fp16, summed in fp32 sequentially over k from +0 (docs/numerics.md)."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    fast = _fast()
    if fast is None:
        return reference.matmul(x, y, mode)
    x3, y3, bx, by, batch = _stacks(x, y)
    out = np.empty((len(bx), x3.shape[1], y.shape[-1]), np.float32)
    if out.size:
        fast.matmul(x3, y3, bx, by, out, mode)
    return out.reshape(batch + (x.shape[-2], y.shape[-1]))


@functools.lru_cache(maxsize=1)
def _blas_libraries() -> tuple:
    """numpy's BLAS libraries as threadpoolctl controllers (the `fast` extra installs it), or
    () without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return ()
    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


def blas_matmul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """np.matmul (fp32 BLAS: the `accumulator="blas"` model, fp32 programs) on the threads
    aneforge's own kernels use: one below PARALLEL_MACS multiply-adds, else `threads()`. BLAS
    left to itself threads even a 64 x 64 x 128 product; with the other core busy that made the
    digits MLP step 13x slower (8.7 ms instead of 0.67). The library's own setting is put back
    after the call, or at the end of the enclosing `blas_calls()`; calls that change it take
    turns (a BLAS library's thread count is one global, not to be changed under another
    thread's call)."""
    libraries = _blas_libraries()
    if not libraries:
        return np.matmul(x, y)
    macs = x.size * (y.shape[-1] if y.ndim > 1 else 1)
    want = 1 if macs < PARALLEL_MACS else threads()
    with blas_calls():                          # a block of one call, unless in one already
        calls = _CALLS
        if calls.saved is None:
            _BLAS_LOCK.acquire()                # held to the end of the outermost block
            calls.saved = [lib.get_num_threads() for lib in libraries]
            calls.now = list(calls.saved)
        for i, lib in enumerate(libraries):
            if calls.now[i] != want:
                lib.set_num_threads(want)
                calls.now[i] = want
        return np.matmul(x, y)


_BLAS_LOCK = threading.Lock()


class _Calls(threading.local):
    """This thread's `blas_calls()` state: nesting depth, the BLAS libraries' thread counts
    before the block's first change (None: none yet), and the counts set now."""
    depth, saved, now = 0, None, None


_CALLS = _Calls()


class blas_calls:
    """A block of `blas_matmul` calls (one program run) that restores the BLAS libraries'
    thread counts once, at its end, instead of after each call: a run of a small training step
    makes a dozen BLAS calls, and each get/set/restore through threadpoolctl costs ~5 us. From
    the block's first BLAS call to its end the block holds the turn other threads' calls wait
    for.

    >>> with blas_calls():
    ...     out = blas_matmul(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    >>> out.shape
    (2, 4)
    """

    def __enter__(self):
        _CALLS.depth += 1
        return self

    def __exit__(self, *exc):
        calls = _CALLS
        calls.depth -= 1
        if calls.depth == 0 and calls.saved is not None:
            try:
                for lib, n, now in zip(_blas_libraries(), calls.saved, calls.now):
                    if n != now:
                        lib.set_num_threads(n)
            finally:
                calls.saved = calls.now = None
                _BLAS_LOCK.release()
        return False


def tile_mode(truncation: str, carry: str, result: str, products: str) -> int:
    """The tile datapath's open points as the kernels' small int (see reference.py)."""
    return ((truncation == "toward_neg_inf") | (carry == "nearest_even") << 1
            | (result == "fp16") << 2 | (products == "fp16") << 3)


def tile_matmul(x, y, mode: int, tmode: int, limit: float) -> np.ndarray:
    """x @ y for float32 operands of rank >= 2 with broadcast batch dims, through the ANE's
    MAC datapath: tiles of 4 products summed by a 12-bit truncating adder, an fp32 sum across
    tiles that saturates to +-inf at |acc| >= limit (docs/numerics.md)."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    fast = _fast()
    if fast is None:
        return reference.tile_matmul(x, y, mode, tmode, limit)
    x3, y3, bx, by, batch = _stacks(x, y)
    out = np.empty((len(bx), x3.shape[1], y.shape[-1]), np.float32)
    if out.size:
        fast.tile_matmul(x3, y3, bx, by, out, mode, tmode, limit)
    return out.reshape(batch + (x.shape[-2], y.shape[-1]))


def tile_bound(x, y, out, mode: int, tmode: int, limit: float):
    """`tile_matmul` of x and y into `out` (C-contiguous float32 of the result's shape) as a
    function of no arguments, for arrays whose values change between calls but not their
    places (the run plan's arena): stacks, indexes and the kernel are found once, and an
    operand that is not C-contiguous (a transposed view) is copied into a buffer of its own
    at each call. None when the compiled kernels are not loaded."""
    fast = _fast()
    if fast is None:
        return None
    if _swap_pays(x, y):
        return _swapped(x, y, out, mode, tmode, limit)
    copies = [(np.empty(a.shape, np.float32), a) for a in (x, y) if not a.flags.c_contiguous]
    bufs = {id(a): buf for buf, a in copies}
    x3, y3, bx, by, _ = _stacks(bufs.get(id(x), x), bufs.get(id(y), y))
    out3 = out.reshape(len(bx), x3.shape[1], y.shape[-1])
    call = fast.tile_call(x3, y3, bx, by, out3, mode, tmode, limit) if out3.size else _nothing
    if not copies:
        return call
    copy = [_copier(fast, buf, a) for buf, a in copies]

    def run():
        for each in copy:
            each()
        call()
    return run


def _nothing() -> None:
    pass


def _copier(fast, buf, a):
    """np.copyto(buf, a) as a function of no arguments: a transposed operand by the compiled
    `transpose` (`compiled.copy_call`) once the full stage is in (it is `LATE`), by numpy
    before."""
    compiled = fast.copy_call(buf, a)

    def copy():
        if _fast_late() is None:
            np.copyto(buf, a)
        else:
            compiled()
    return copy


def _swap_pays(x: np.ndarray, y: np.ndarray) -> bool:
    """Whether `tile_bound` of x and y copies less per call as (y^T @ x^T)^T: y the transposed
    view of a C-contiguous matrix (x @ W.T, a linear layer's weight) holding more values than
    x and the result together (a char-LM's [64, 2048] @ [2048, 256]^T: 147k copied, not 524k)."""
    if y.ndim != 2 or y.flags.c_contiguous or not y.T.flags.c_contiguous:
        return False
    if not x.flags.c_contiguous or x.ndim < 2:
        return False
    m, k, n = x.size // x.shape[-1], x.shape[-1], y.shape[-1]
    return m * k + m * n < k * n


def _swapped(x, y, out, mode: int, tmode: int, limit: float):
    """`tile_bound` of x and y as (y^T @ x^T)^T. Each output sums the same products (an fp16
    product is the same either way round) in the same tiles of 4 in the same order, so the
    bits are the same; y^T is y's own memory, x^T and the result's transpose are copied."""
    x2, out2 = x.reshape(-1, x.shape[-1]), out.reshape(-1, y.shape[-1])
    xt = np.empty(x2.T.shape, np.float32)
    out_t = np.empty(out2.T.shape, np.float32)
    inner = tile_bound(y.T, xt, out_t, mode, tmode, limit)
    fast = _fast()
    into, back = _copier(fast, xt, x2.T), _copier(fast, out2, out_t.T)

    def run():
        into()
        inner()
        back()
    return run


def port_bound(out: np.ndarray, bias, overflow: float | None, flush: bool, mode: int):
    """`out` (C-contiguous float32, the run plan's place of a matmul's result) finished in
    place as a function of no arguments: `bias` (None, or a vector of out's last axis) added,
    the output port (`port`), the fp16 store under `mode` (round16), in one compiled pass;
    returns port's count (`reference.port_round` is the same pass in numpy). None
    when the compiled kernels are not loaded."""
    fast = _fast()
    if fast is None:
        return None
    cols = out.shape[-1] if out.ndim else 1
    acc = out.reshape(-1, cols)
    add = np.zeros(0, np.float32) if bias is None else bias
    limit, flush = np.float32(np.nan if overflow is None else overflow), bool(flush)
    return functools.partial(fast.port_round, acc, add, limit, flush, mode)


def port(acc: np.ndarray, overflow: float | None, flush: bool) -> int:
    """The output port of matmul/linear/conv, in place on `acc` (a fresh array): |v| >=
    overflow reads back as +-inf (None: no limit), then |v| < 2**-14 becomes +0 if `flush`.
    Returns how many values saturated (compiled: one pass, no temporaries)."""
    fast = _fast_late()
    if fast is None or acc.dtype != _F32 or not acc.flags.c_contiguous:
        return reference.port(acc, overflow, flush)
    return fast.port(acc.reshape(-1), np.float32(np.nan if overflow is None else overflow),
                     bool(flush))


def _stacks(x: np.ndarray, y: np.ndarray) -> tuple:
    """x and y as C-contiguous [B, rows, cols] stacks, for each matrix of the broadcast batch
    the index of its operands in them, and that batch shape. Equal batches (2-D operands, the
    common case) share one cached index array: no broadcasting work per call. An x whose batch
    is the result's against one matrix y (a linear layer on [batch, tokens, features]) is one
    matrix of all its rows: each output row is computed alone, so the bits are the same, and
    the call skips the broadcast indexes (~15 us)."""
    if x.ndim == 2 and y.ndim == 2:
        return np.ascontiguousarray(x)[None], np.ascontiguousarray(y)[None], _ONE, _ONE, ()
    batch = x.shape[:-2]
    if batch != y.shape[:-2]:
        batch = np.broadcast_shapes(batch, y.shape[:-2])
        if batch == x.shape[:-2] and math.prod(y.shape[:-2]) == 1:
            rows = np.ascontiguousarray(x).reshape((1, math.prod(x.shape[:-1]), x.shape[-1]))
            return rows, _stack(y, 1), _ONE, _ONE, batch
        bx, x3 = _batch_index(x, batch)
        by, y3 = _batch_index(y, batch)
        return x3, y3, bx, by, batch
    count = math.prod(batch)
    index = _arange(count)
    return _stack(x, count), _stack(y, count), index, index, batch


def _batch_index(a: np.ndarray, batch: tuple) -> tuple[np.ndarray, np.ndarray]:
    """a as a C-contiguous [B_a, rows, cols] stack, and for each entry of the broadcast batch
    the index of its matrix in that stack (broadcasting without copies)."""
    own = a.shape[:-2]
    return _broadcast_index(own, batch), _stack(a, math.prod(own))


@functools.lru_cache(maxsize=64)
def _broadcast_index(own: tuple, batch: tuple) -> np.ndarray:
    """For each entry of `batch`, the index of its matrix in a stack of batch shape `own`
    (shared between calls: a training step asks for the same few every run)."""
    index = np.arange(math.prod(own), dtype=np.int64).reshape((1,) * (len(batch) - len(own)) + own)
    return _read_only(np.ascontiguousarray(np.broadcast_to(index, batch)).reshape(-1))


def _read_only(a: np.ndarray) -> np.ndarray:
    """a, not writeable. Every batch index the matmul kernels get is read-only: numba compiles
    a kernel once per argument type, and writeable and read-only arrays are two types (the
    shared indexes must be read-only; mixing them compiled the tile matmul three times)."""
    a.setflags(write=False)
    return a


_ONE = _read_only(np.zeros(1, np.int64))     # the index of the one matrix of a 2-D operand


def _stack(a: np.ndarray, count: int) -> np.ndarray:
    return np.ascontiguousarray(a).reshape((count,) + a.shape[-2:])


@functools.lru_cache(maxsize=64)
def _arange(count: int) -> np.ndarray:
    """0 .. count - 1, shared between calls (the kernels only read it)."""
    return _read_only(np.arange(count, dtype=np.int64))


def narrow_sum(terms: np.ndarray, mode: int) -> np.ndarray:
    """Sum over axis 0 with a running fp16 accumulator (one rounding per added term, the first
    term taken as is)."""
    terms = np.asarray(terms, np.float32)
    fast = _fast()
    if fast is None:
        return reference.narrow_sum(terms, mode)
    flat = np.ascontiguousarray(terms).reshape(terms.shape[0], -1)
    out = np.empty(flat.shape[1], np.float32)
    fast.narrow_sum(flat, out, mode)
    return out.reshape(terms.shape[1:])


def has_nan(a: np.ndarray) -> bool:
    """Whether a float array holds a NaN (compiled: one pass, no temporary array)."""
    fast = _fast_late()
    if fast is None or a.dtype != np.float32:
        return bool(np.isnan(a).any())
    return bool(fast.has_nan(np.ascontiguousarray(a).reshape(-1)))


_F16, _F32 = np.dtype(np.float16), np.dtype(np.float32)


def astype(a, dtype) -> np.ndarray:
    """`a.astype(dtype, copy=False)`, with compiled float32 <-> float16 casts at the program
    boundary (numpy's float16 casts take ~10 ns per element)."""
    a, dtype = np.asarray(a), np.dtype(dtype)
    fast = None if {a.dtype, dtype} != {_F16, _F32} else _fast() if dtype == _F16 else \
        _fast_late()                    # from_float16: `LATE`
    if fast is None:
        return a.astype(dtype, copy=False)
    flat = np.ascontiguousarray(a).reshape(-1)
    out = np.empty(flat.shape, dtype)
    if dtype == _F16:
        fast.to_float16(flat, out.view(np.uint16))
    else:
        fast.from_float16(flat.view(np.uint16), out)
    return out.reshape(a.shape)
