"""Realization: cut the live subgraph into a Program, compile it once per signature, run it.

    targets ──cut──► (key, ordered op nodes, leaf inputs)
        key hit  ──► cached Executable
        key miss ──► build Program (with boundary casts) ─► passes ─► backend.compile ─► cache
    run(leaf data) ──► outputs become realized leaves

The key is structural: leaf types, op names, attributes, wiring, the numerics model, the ANE
target, the pass pipeline setting and the backend — never the values of host data, so a
training loop compiles once and then only runs. Passes are deterministic functions of the
structure, so the key is taken from the trace as recorded and the pipeline runs on a miss only.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from . import dtypes
from .context import CTX
from .errors import AneforgeError, DTypeError
from . import passes
from .ir import Block, Function, Operation, Program, TensorType, Var
from .ir.dag import fresh_name, topological
from .ir.signature import structure
from .numerics import get_numerics
from .targets import get_target
from .runtime import get_backend


@dataclass
class CacheInfo:
    hits: int = 0
    misses: int = 0
    compile_seconds: float = 0.0
    entries: int = 0
    limit: int = 0
    evictions: int = 0

    def __repr__(self) -> str:
        return (f"CacheInfo(hits={self.hits}, misses={self.misses}, "
                f"compile_seconds={self.compile_seconds:.4f}, entries={self.entries}, "
                f"limit={self.limit}, evictions={self.evictions})")


class Run(NamedTuple):
    """One program run seen by `recording()`."""
    program: Program
    inputs: list
    traced: Program


class Entry(NamedTuple):
    """One compiled program: the optimized Program, the backend's Executable, the pass report."""
    program: Program
    executable: object
    report: passes.Report




@contextlib.contextmanager
def recording():
    """Collect a `Run` (program, inputs, traced) for every program run inside the block: the
    optimized Program the cache holds, the boundary arrays it was fed, and the Program as
    traced, before the passes (for inspection, tests and benchmarks).

    >>> import aneforge as af
    >>> from aneforge.compiler import recording
    >>> with recording() as runs:
    ...     (af.ones(3) * 2.0).numpy().tolist()
    [2.0, 2.0, 2.0]
    >>> [op.type for op in runs[-1][0].operations]
    ['const', 'mul']
    """
    log: list = []
    CTX.recorders.append(log)
    try:
        yield log
    finally:
        CTX.recorders.remove(log)


def cache_info() -> CacheInfo:
    """Compile-cache statistics: a training loop should show one miss and then only hits.

    >>> import aneforge as af
    >>> af.cache_info().misses >= 0
    True
    """
    c = CTX.cache
    return CacheInfo(c.hits, c.misses, c.compile_seconds, len(c.entries), c.limit, c.evictions)


def set_cache_limit(entries: int) -> int:
    """Keep at most `entries` compiled programs (least recently used dropped first; default
    256); returns the previous limit. A training loop needs one; each new batch shape adds one.

    >>> import aneforge as af
    >>> old = af.set_cache_limit(64)
    >>> af.cache_info().limit
    64
    >>> _ = af.set_cache_limit(old)
    """
    if not isinstance(entries, int) or entries < 1:
        raise ValueError(f"the compile cache needs room for at least one program, got {entries!r}")
    c = CTX.cache
    previous, c.limit = c.limit, entries
    while len(c.entries) > c.limit:
        del c.entries[next(iter(c.entries))]
        c.evictions += 1
    return previous


def clear_cache() -> None:
    """Forget every compiled program and reset the statistics."""
    CTX.cache.clear()


def _pending_sources(node) -> list:
    return [src for src, _ in node.args if src.data is None]


class Cut:
    """The pending subgraph that produces some target values, in topological order."""

    def __init__(self, targets: list[tuple]):
        self.outputs: list[tuple] = list(dict.fromkeys(   # a multi-output node gives all
            [(node, i) for node, _ in targets for i in range(len(node.types))]))
        self.nodes: list = topological(   # op nodes, topologically ordered
            [n for n, _ in self.outputs if n.data is None], _pending_sources)
        self.leaves: list[tuple] = list(dict.fromkeys(   # (node, index) read as inputs, in order
            [ref for node in self.nodes for ref in node.args if ref[0].data is not None]))

    def key(self, numerics, backend_name: str) -> tuple:
        ops = ((n.key, n.srcs.items(), [(n, i) for i in range(len(n.types))]) for n in self.nodes)
        leaves = [(ref, ref[0].types[ref[1]]) for ref in self.leaves]
        return backend_name, numerics, structure(leaves, ops, self.outputs, many=list)

    def program(self) -> Program:
        """The MIL Program: leaves become inputs (cast in from their transport dtype), target
        values become outputs (cast out to one). Core ML's functions take and return tensors
        of rank >= 1, so a scalar crosses the boundary as shape (1,) and is reshaped inside."""
        vars: dict = {}
        ops: list[Operation] = []
        inputs: list[Var] = []
        names: set = set()

        def fresh(prefix, type):
            return Var(fresh_name(prefix, names, len(names)), type)   # x_0, cast_1, mul_2, ...

        for node, i in self.leaves:
            t = node.types[i]
            v = fresh("x", TensorType(boundary_shape(t.shape), dtypes.transport(t.dtype)))
            inputs.append(v)
            vars[(id(node), i)] = _reshape_to(_cast_to(v, t.dtype, ops, fresh), t.shape, ops, fresh)
        for node in self.nodes:
            args = {k: (tuple(vars[(id(n), i)] for n, i in v) if isinstance(v, list)
                        else vars[(id(v[0]), v[1])]) for k, v in node.srcs.items()}
            outs = [fresh(node.op, t) for t in node.types]
            ops.append(Operation(node.op, args, dict(node.attrs), outs, outs[0].name))
            for i, v in enumerate(outs):
                vars[(id(node), i)] = v
        outputs = []
        for node, i in self.outputs:
            v = _reshape_to(vars[(id(node), i)], boundary_shape(node.types[i].shape), ops, fresh)
            outputs.append(_cast_to(v, dtypes.transport(v.dtype), ops, fresh))
        return Program({"main": Function(Block(inputs, ops, outputs))})


def boundary_shape(shape: tuple) -> tuple:
    return shape or (1,)


def _reshape_to(v: Var, shape: tuple, ops: list, fresh) -> Var:
    if v.shape == shape:
        return v
    out = fresh("reshape", TensorType(shape, v.dtype))
    ops.append(Operation("reshape", {"x": v}, {"shape": shape}, [out], out.name))
    return out


def _cast_to(v: Var, dtype, ops: list, fresh) -> Var:
    if v.dtype == dtype:
        return v
    out = fresh("cast", TensorType(v.shape, dtype))
    ops.append(Operation("cast", {"x": v}, {"dtype": dtype.name}, [out], out.name))
    return out


def to_transport(array: np.ndarray, dtype) -> np.ndarray:
    t = dtypes.transport(dtype)
    if t is dtype:
        return array
    if t.np.kind in "iu" and array.size:
        info = np.iinfo(t.np)
        if array.min() < info.min or array.max() > info.max:
            raise DTypeError(f"{dtype.torch_name} values must lie in [{info.min}, {info.max}] to "
                             f"cross the program boundary as {t.name} (the ANE has no int32 I/O)")
    return array.astype(t.np)


def from_transport(array: np.ndarray, dtype) -> np.ndarray:
    return array if array.dtype == dtype.np else array.astype(dtype.np)


def realize(refs: list[tuple]) -> None:
    """Compute every pending (node, index) in `refs` with one program run.

    Participants (`CTX.participants`: optimizers) may add values of their own first: an
    optimizer whose gradients are pending plans its step into this same program, so reading
    the loss before `opt.step()` still runs one program per training step.
    """
    if all(n.data is not None for n, _ in refs):
        return
    refs = list(refs)
    if CTX.thread.backward_records:
        for participant in list(CTX.participants):
            refs += participant.join_realization(refs)
    run(refs)


def run(refs: list[tuple]) -> None:
    """Compile (once per signature) and run the program computing `refs` (no participants)."""
    pending = list(dict.fromkeys((n, i) for n, i in refs if n.data is None))
    if not pending:
        return
    cache = CTX.cache
    cut = Cut(pending)
    numerics, backend, pipeline = get_numerics(), get_backend(), passes.get_pipeline()
    key = cut.key(numerics, backend.name) + (pipeline, get_target().name)
    entry = cache.entries.get(key)
    if entry is None:
        start = time.perf_counter()
        program = cut.program()
        report = passes.run(program, pipeline, numerics)
        entry = Entry(program, backend.compile(program, numerics), report)
        cache.compile_seconds += time.perf_counter() - start
        cache.misses += 1
        if passes.debugging():
            print(f"passes for {len(cut.nodes)} traced ops:\n{report}")
        cache.entries[key] = entry
    else:
        cache.hits += 1
        cache.entries.move_to_end(key)        # the most recently used last
    while len(cache.entries) > cache.limit:   # least recently used first
        del cache.entries[next(iter(cache.entries))]
        cache.evictions += 1
    program, exe = entry.program, entry.executable
    inputs = [to_transport(n.data[i], n.types[i].dtype).reshape(boundary_shape(n.types[i].shape))
              for n, i in cut.leaves]
    if CTX.thread.capture is not None:
        CTX.thread.capture.ran(cut, entry)
    if CTX.recorders:
        run = Run(program, inputs, cut.program())
        for log in CTX.recorders:
            log.append(run)
    results = exe.run(inputs)
    by_node: dict = {}
    for (node, i), r in zip(cut.outputs, results):
        by_node.setdefault(node, {})[i] = from_transport(r, node.types[i].dtype).reshape(
            node.types[i].shape)
    for node, outs in by_node.items():
        node.set_data([outs[i] for i in range(len(node.types))], program)


def program_for(refs: list[tuple]) -> Program:
    """The Program that realizing `refs` would run (nothing is compiled or run), or, for one
    value that is already realized, the program that computed it."""
    pending = [(n, i) for n, i in refs if n.data is None]
    if pending:
        return Cut(pending).program()
    origins = {id(n.origin): n.origin for n, _ in refs}
    if len(origins) == 1 and None not in origins.values():
        return next(iter(origins.values()))
    raise AneforgeError("these tensors hold host data or come from different programs; "
                        "no single program produced them")
