"""Execution plans: a realization as ANE segments, host segments, a value table and a memory
plan (the model is ExecuTorch's program schema: chains of kernel and delegate calls over
values with planned memory).

    Program ──partition(budget)──► [segment Program, ...] ─ each backend.compile ─► Plan
    Plan.run(inputs): value table <- inputs; per segment: run on its slots; outputs

A program within one ANE program's budget (the common case) is one segment and runs as before,
with no plan around it. A larger one is cut into segments in program order; a value that one
segment makes and a later one reads crosses as a boundary value (fp16, int32 as two uint16
parts, uint8, rank >= 1: the Core ML function boundary, `core/boundary`), in a slot of the
plan's value table, released after its last reader. Host segments (numpy: nonzero, unique,
a bool-mask index, ...) sit between realizations: the values they read are realized first,
what they make is a leaf the next program reads (`tensor/core.host_segment`); af.compile
replays them as steps of one run.

The budget of one ANE program (`Budget`): weight bytes ~2 GB (ANEForge docs/llm.md: "one ANE
program holds ~2 GB of baked weights; larger LLMs are split into chunks"); no public source
gives an op-count cap, so ops are unbounded unless set (`af.plan_budget(ops=...)`).
"""
from __future__ import annotations

import contextlib
from typing import NamedTuple

import numpy as np

from .. import dtypes
from ..context import CTX
from ..errors import ANEHazardWarning, HostSegmentNotice
from ..hardware.hazards import warn_at_user
from ..ir import Block, Function, Operation, Program, TensorType, Var
from ..ir.dag import fresh_name
from ..runtime.plan import Arena
from . import boundary


WEIGHT_BYTES = 2 * 1024 ** 3       # ANEForge docs/llm.md: ~2 GB of baked weights per program


class Budget(NamedTuple):
    """What one ANE program may hold: non-const ops and baked weight bytes (None: no cap)."""
    ops: int | None = None
    weight_bytes: int | None = WEIGHT_BYTES


def budget() -> Budget:
    """The budget in force: `af.plan_budget`'s, else the default."""
    return CTX.budget or Budget()


@contextlib.contextmanager
def plan_budget(ops: int | None = None, weight_bytes: int | None = WEIGHT_BYTES):
    """Within the block, split programs over `ops` non-const ops or `weight_bytes` of baked
    weights into several ANE segments (for testing partitioning on small programs, or to keep
    segments small). The budget is part of the compile-cache key.

    >>> import aneforge as af
    >>> x = af.arange(6).float()
    >>> with af.plan_budget(ops=2):
    ...     ((x + 1) * 2 - 3).tolist()
    [-1.0, 1.0, 3.0, 5.0, 7.0, 9.0]
    """
    for name, n in (("ops", ops), ("weight_bytes", weight_bytes)):
        if n is not None and (not isinstance(n, int) or n < 1):
            raise ValueError(f"plan_budget: {name} must be a positive int or None, got {n!r}")
    previous, CTX.budget = CTX.budget, Budget(ops, weight_bytes)
    try:
        yield CTX.budget
    finally:
        CTX.budget = previous


# ---- segments ---------------------------------------------------------------------------------
class Segment(NamedTuple):
    """One ANE segment: its Program, the value-table slots it reads and writes, its size and
    why it ends where it does."""
    program: Program
    reads: list
    writes: list
    ops: int
    weight_bytes: int
    cut: str


def _weight_bytes(op: Operation) -> int:
    v = op.outputs[0]
    return int(np.prod(v.shape, dtype=np.int64)) * v.dtype.np.itemsize


_FP32_CROSSES = "; a float32 value crosses as float16"


def _bounds(ops: list, limit: Budget) -> list[tuple[int, int, str]]:
    """(start, end, reason) of each segment: greedy in program order, each as long as the budget
    allows, cut where no float32 value crosses (the boundary carries fp16) if such a place
    leaves the rest within budget."""
    last = {}
    for k, op in enumerate(ops):
        for v in op.input_vars():
            last[id(v)] = k
    out, start = [], 0
    for k, op in enumerate(ops):
        over = _over(ops, start, k, limit)
        if over and any(o.type != "const" for o in ops[start:k]):
            end = _clean_cut(ops, start, k, last, limit)
            reason = f"the {over} budget ({getattr(limit, over)}) is reached"
            if end is None:
                end, reason = k, reason + _FP32_CROSSES
            out.append((start, end, reason))
            start = end
    out.append((start, len(ops), "the program ends"))
    return out


def _over(ops: list, start: int, k: int, limit: Budget) -> str | None:
    """Which budget ops[start:k + 1] exceeds (None: it fits)."""
    if limit.ops is not None and ops[k].type != "const" and \
            sum(o.type != "const" for o in ops[start:k + 1]) > limit.ops:
        return "ops"
    if limit.weight_bytes is not None and ops[k].type == "const" and \
            sum(_weight_bytes(o) for o in ops[start:k + 1] if o.type == "const") > limit.weight_bytes:
        return "weight_bytes"
    return None


def _clean_cut(ops: list, start: int, k: int, last: dict, limit: Budget) -> int | None:
    """The latest cut p in (start, k] that no float32 value crosses, with ops[p:k + 1] within
    the budget and a non-const op before it; None if there is none."""
    for p in range(k, start, -1):
        if _over(ops, p, k, limit) or not any(o.type != "const" for o in ops[start:p]):
            continue
        if not any(v.dtype == dtypes.float32 and last.get(id(v), -1) >= p
                   for op in ops[start:p] if op.type != "const" for v in op.outputs):
            return p
    return None


def partition(program: Program, limit: Budget) -> tuple[list[Segment], list[int]] | None:
    """The program's segments under `limit` and the value-table slot of each program output,
    or None if it fits one ANE program."""
    ops = program.operations
    bounds = _bounds(ops, limit)
    if len(bounds) == 1:
        return None
    if any(why.endswith(_FP32_CROSSES) for _, _, why in bounds):
        warn_at_user(f"the program is cut into ANE segments where a float32 value crosses "
                     f"between them, as float16 (the ANE's programs take and return no float32): "
                     f"its low bits are lost. Raise af.plan_budget(ops=...) so that the cut "
                     f"falls elsewhere.", ANEHazardWarning)
    f = program.main
    slot = {id(v): k for k, v in enumerate(f.inputs)}       # value table: inputs first
    made = {}                                                # id(var) -> segment making it
    for s, (a, b, _) in enumerate(bounds):
        for op in ops[a:b]:
            for v in op.outputs:
                made[id(v)] = s
    consts = {id(v): op for op in ops if op.type == "const" for v in op.outputs}
    needed = _crossings(ops, bounds, f.outputs, made, consts)
    for v in needed:
        slot.setdefault(id(v), len(slot))
    segments = []
    for s, (a, b, why) in enumerate(bounds):
        segments.append(_segment(ops[a:b], s, why, needed, made, consts, slot))
    return segments, [slot[id(v)] for v in f.outputs]


def _crossings(ops, bounds, outputs, made, consts) -> list:
    """Values a later segment reads, or program outputs, that a segment makes (consts are
    copied into each segment that reads them instead)."""
    crossing = {}
    for s, (a, b, _) in enumerate(bounds):
        for op in ops[a:b]:
            for v in op.input_vars():
                if id(v) not in consts and made.get(id(v), s) != s:
                    crossing[id(v)] = v
    for v in outputs:
        if id(v) in made:
            crossing[id(v)] = v
    return list(crossing.values())


def _segment(ops, s, why, needed, made, consts, slot) -> Segment:
    """Segment `s` as its own Program: crossing inputs enter in their boundary form and are
    converted back, crossing outputs leave in it; the consts it reads are copied in."""
    names = {v.name for op in ops + list(consts.values()) for v in op.outputs} | \
        {v.name for v in needed}
    body, inputs, reads, env = [], [], [], {}

    def fresh(prefix, type):
        return Var(fresh_name(prefix, names, len(names)), type)
    emit = boundary.Emitter(body, fresh)

    def value(v):
        if id(v) in env:
            return env[id(v)]
        if id(v) in consts:                       # a copy of the const in this segment
            env[id(v)] = _clone(consts[id(v)], env, body)
        else:                                     # a program input or an earlier segment's
            x = fresh("x", boundary.transport_type(v.type))
            inputs.append(x)
            reads.append(slot[id(v)])
            env[id(v)] = boundary.enter(x, v.type, emit)
        return env[id(v)]

    for op in ops:
        if op.type != "const":
            for v in op.input_vars():
                value(v)
            _clone(op, env, body)
    crossing = [v for v in needed if made[id(v)] == s]
    outs = [boundary.leave(env[id(v)], emit) for v in crossing]     # int32: in two parts
    program = Program({"main": Function(Block(inputs, body, outs))})
    return Segment(program, reads, [slot[id(v)] for v in crossing],
                   sum(op.type != "const" for op in ops),
                   sum(_weight_bytes(op) for op in body if op.type == "const"), why)


def _clone(op: Operation, env: dict, body: list) -> Var:
    args = {k: (tuple(env[id(u)] for u in v) if isinstance(v, tuple) else env[id(v)])
            for k, v in op.inputs.items()}
    outs = [Var(v.name, v.type) for v in op.outputs]
    body.append(Operation(op.type, args, op.attrs, outs, op.name))
    for v, new in zip(op.outputs, outs):
        env[id(v)] = new
    return outs[0]


# ---- the plan --------------------------------------------------------------------------------
class Plan:
    """ANE segments compiled for one backend over a value table: what a partitioned program's
    cache entry runs (`Executable.run`'s interface, so af.compile replays it as one run)."""

    def __init__(self, segments: list[Segment], executables: list, n_inputs: int,
                 outputs: list[int]):
        self.segments, self.executables = segments, executables
        self.n_inputs, self.outputs = n_inputs, outputs
        self.size = 1 + max([n for s in segments for n in s.reads + s.writes] + [n_inputs - 1])
        self.memory = memory_plan(self)
        # slots no later segment or output reads, released after each segment: lifetimes
        self.release = []
        keep = set(outputs)
        for s in reversed(segments):
            self.release.append([n for n in s.reads if n not in keep])
            keep.update(s.reads)
        self.release.reverse()

    def run(self, inputs: list) -> list:
        table = list(inputs) + [None] * (self.size - len(inputs))
        for seg, exe, free in zip(self.segments, self.executables, self.release):
            for n, r in zip(seg.writes, exe.run([table[n] for n in seg.reads])):
                table[n] = r
            for n in free:
                table[n] = None
        return [table[n] for n in self.outputs]


def compile_plan(program: Program, backend, numerics):
    """The backend's executable for `program`: one compiled program if it fits the budget in
    force, else a Plan of segments, each compiled for the backend."""
    cut = partition(program, budget())
    if cut is None:
        return backend.compile(program, numerics)
    segments, outputs = cut
    return Plan(segments, [backend.compile(s.program, numerics) for s in segments],
                len(program.main.inputs), outputs)


class Placement(NamedTuple):
    """Where a value-table slot lives in the plan's memory: bytes at `offset` while segments
    `first`..`last` need it (program inputs from segment 0, outputs to the end)."""
    slot: int
    offset: int
    nbytes: int
    first: int
    last: int


def memory_plan(plan: Plan) -> tuple[int, list[Placement]]:
    """(arena bytes, placements) of the values that cross segments, placed by lifetime with the
    run plan's first-fit `Arena`: two values share bytes only if no segment needs both."""
    first, last, size = {}, {}, {}
    for n in range(plan.n_inputs):
        first[n] = 0
    for k, seg in enumerate(plan.segments):
        for n, v in zip(seg.reads, seg.program.main.inputs):
            last[n] = k
            size[n] = _nbytes(v.type)
        for n, v in zip(seg.writes, seg.program.main.outputs):
            first.setdefault(n, k)
            size[n] = _nbytes(v.type)
    for n in plan.outputs:
        last[n] = len(plan.segments)
    arena, places, live = Arena(), [], []
    for k in range(len(plan.segments) + 1):
        for p in [p for p in live if p.last < k]:
            arena.give(p.offset, p.nbytes)
            live.remove(p)
        for n in sorted(n for n in first if first[n] == k and n in size):
            p = Placement(n, arena.take(size[n]), size[n], k, last.get(n, k))
            places.append(p)
            live.append(p)
    return arena.size, places


def _nbytes(t: TensorType) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * t.dtype.np.itemsize


# ---- host segments -----------------------------------------------------------------------------
def host_ran(name: str, reason: str, reads: list, outs: list) -> None:
    """A host segment ran (tensor/core.host_segment): the one-time notice, af.explain's log."""
    if name not in CTX.host_notices:
        CTX.host_notices.add(name)
        warn_at_user(f"{name} runs on the host (numpy), between ANE segments: {reason}. On "
                     f"hardware that is a round trip; af.explain(fn, *args) lists the "
                     f"segments", HostSegmentNotice)
    for log in CTX.explainers:
        log.append(HostStep(name, reason, [a.shape for a in reads], [a.shape for a in outs]))


class HostStep(NamedTuple):
    """A host segment as af.explain reports it."""
    name: str
    reason: str
    in_shapes: list
    out_shapes: list
