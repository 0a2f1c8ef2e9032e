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
import weakref
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..context import CTX
from ..dtypes import float16
from ..errors import AneforgeError
from .. import passes
from ..ir import Block, Function, Operation, Program, Var
from ..ir.dag import fresh_name
from ..hardware.numerics import get_numerics
from ..hardware.targets import get_target
from . import autoscale, boundary
from .plan import compile_plan
from .trace import SEQ, Deferred, current_tape, land_writes, prekey_leaves, writes, written
from ..runtime import get_backend


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
    >>> from aneforge.core.realization import recording
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


class Cut:
    """The pending subgraph that produces some target values, in topological order, and its
    structural key, found in one walk (a cache hit does nothing else before running).

    The key numbers leaf j as -(j + 1) and a node's output i as (its first number) + i, nodes
    numbered in topological order; each op contributes its key (name, attributes) and its
    arguments (name, number or tuple of numbers): neither data nor names enter it.
    """

    def __init__(self, targets: list[tuple]):
        self.outputs: list[tuple] = list(dict.fromkeys(   # a multi-output node gives all
            [(node, i) for node, _ in targets for i in range(len(node.types))]))
        self.nodes: list = _pending_order([n for n, _ in self.outputs if n.data is None])
        self.leaves, self.structure = _wiring(self.nodes, self.outputs)

    def key(self, numerics, backend_name: str) -> tuple:
        return backend_name, numerics, self.structure

    def program(self, wide: tuple = (), int32_out: bool = False) -> Program:
        """The MIL Program: leaves become inputs, target values outputs, each in the form
        that crosses the boundary (`core/boundary.py`: casts, int32 as two uint16 parts,
        scalars as shape (1,)); `wide`: the leaf positions whose int32 data cross in parts;
        `int32_out`: int32 results leave as int32 (an export for a runtime that takes it)."""
        vars: dict = {}
        ops: list[Operation] = []
        inputs: list[Var] = []
        names: set = set()

        def fresh(prefix, type):
            return Var(fresh_name(prefix, names, len(names)), type)   # x_0, cast_1, mul_2, ...

        emit = boundary.Emitter(ops, fresh)
        for j, (node, i) in enumerate(self.leaves):
            t = node.types[i]
            v = fresh("x", boundary.transport_type(t, j in wide))
            inputs.append(v)
            vars[(id(node), i)] = boundary.enter(v, t, emit)
        for node in self.nodes:
            if node.op is None:       # a written leaf: the value it will hold
                src, i = node.args[0]
                vars[(id(node), 0)] = vars[(id(src), i)]
                continue
            args = {k: (tuple(vars[(id(n), i)] for n, i in v) if isinstance(v, list)
                        else vars[(id(v[0]), v[1])]) for k, v in node.srcs.items()}
            outs = [fresh(node.op, t) for t in node.types]
            ops.append(Operation(node.op, args, dict(node.attrs), outs, outs[0].name))
            for i, v in enumerate(outs):
                vars[(id(node), i)] = v
        outputs = [boundary.leave(vars[(id(node), i)], emit, int32_out) for node, i in self.outputs]
        return Program({"main": Function(Block(inputs, ops, outputs))})


_MARK = object()      # on the walk's stack: the node below it has all its sources placed


def _pending_order(roots: list) -> list:
    """Every pending node `roots` depend on through pending sources, each after its sources:
    depth first, sources in argument order (`ir.dag.topological`, unrolled: it runs on every
    realization)."""
    order, seen, stack = [], set(), roots[::-1]
    push, pop = stack.append, stack.pop
    while stack:
        node = pop()
        if node is _MARK:
            order.append(pop())
        elif node not in seen:
            seen.add(node)
            if type(node.srcs) is Deferred:    # a stretch re-recorded lazily: its nodes now
                node.srcs.expand()
            push(node)
            push(_MARK)
            args = node.args
            for j in range(len(args) - 1, -1, -1):
                src = args[j][0]
                if src.data is None and src not in seen:
                    push(src)
    return order


def _wiring(nodes: list, outputs: list) -> tuple[list, tuple]:
    """(leaves read, in order of first use; the structural key) of ordered pending nodes."""
    base: dict = {}           # node -> number of its first output
    leaves: dict = {}         # (node, index) -> leaf number
    body, count = [], 0

    def number(ref):
        node = ref[0]
        if node.data is None:
            return base[node] + ref[1]
        j = leaves.get(ref)
        if j is None:
            j = leaves[ref] = len(leaves)
        return -1 - j

    for node in nodes:
        if node.op is None:           # a written leaf (trace.written_leaf): its value's number
            base[node] = number(node.args[0])
            continue
        entry = [node.key]
        for k, v in node.srcs.items():
            entry.append(k)
            entry.append(number(v) if type(v) is tuple else tuple([number(u) for u in v]))
        body.append(tuple(entry))
        base[node] = count
        count += len(node.types)
    outs = tuple([number(ref) for ref in outputs])
    types = tuple([(n.types[i].shape, n.types[i].dtype.name) for n, i in leaves])
    return list(leaves), Structure((types, tuple(body), outs))


class Structure(tuple):
    """A cut's structural key (leaf types, body, outputs), hashed once: the tape key hands a
    training step the same one every step, and hashing its few hundred ops each time cost
    more than the lookup. Equal to (and hashed as) the plain tuple."""

    def __hash__(self) -> int:
        h = self.__dict__.get("hash")
        if h is None:
            h = self.__dict__["hash"] = tuple.__hash__(self)
        return h


def realize(refs: list[tuple]) -> None:
    """Compute every pending (node, index) in `refs` with one program run.

    Participants (`CTX.participants`: optimizers) may add values of their own first: an
    optimizer whose gradients are pending plans its step into this same program, so reading
    the loss before `opt.step()` still runs one program per training step.
    """
    if all(n.data is not None for n, _ in refs):
        return
    refs = list(refs)
    if CTX.thread.writes:          # values set into handles (trace.written_leaf) come too
        refs = [written(r) for r in refs] + writes()
    if CTX.thread.carried:
        refs += _carried()
    if CTX.thread.backward_records:
        grads, roots = _siblings(refs)
        refs += grads
        for participant in list(CTX.participants):
            refs += participant.join_realization(refs)
        refs += autoscale.pending_refs(refs) + roots
    run(refs)
    if CTX.thread.writes:
        land_writes()
    autoscale.settle()


def carry(refs: list[tuple]) -> None:
    """Compute these pending (node, index) values with the next realization, if their nodes are
    still alive then: a recurrent layer's final states, which the next step reads (detached,
    as word_language_model's `repackage_hidden` does) after this step's program ran. Without
    it each step's program would recompute the previous step's recurrence from its own
    pending states: a longer program, compiled anew, every step."""
    if CTX.thread.capture is None:              # (a captured step returns what it carries)
        CTX.thread.carried += [(weakref.ref(n), i) for n, i in refs if n.data is None]


def _carried() -> list[tuple]:
    out = [(n, i) for n, i in ((w(), i) for w, i in CTX.thread.carried)
           if n is not None and n.data is None]
    CTX.thread.carried.clear()
    return out


def realize_writes() -> None:
    """Compute every value set into a handle and not computed yet (trace.written_leaf): what
    af.compile does before it captures or replays, so its programs read parameters' arrays."""
    if CTX.thread.writes:
        realize(writes())


def _siblings(refs: list[tuple]) -> tuple[list, list]:
    """What a backward() left pending that this realization computes too (its gradients, and
    its roots: the loss, so `loss.item()` after them costs nothing): the first read of any of
    it computes all of it in one program, so reading N parameters' gradients one by one (or
    updating N parameters from them) runs one program, not N (each a new cut, and a compile
    per signature). When `refs` are only gradients of some backward passes, those passes';
    otherwise (a value that may be computed from any of them) every pending pass's."""
    wanted = {id(n) for n, _ in refs if n.data is None}
    passes = [(r, [g.ref for g in r.grads()]) for r in CTX.thread.backward_records]
    passes = [(r, grads) for r, grads in passes if grads]
    mine = [(r, grads) for r, grads in passes if any(id(n) in wanted for n, _ in grads)]
    if not mine or not wanted <= {id(n) for _, grads in mine for n, _ in grads}:
        mine = passes
    return [g for _, grads in mine for g in grads], [o for r, _ in mine for o in r.outputs()]


def run(refs: list[tuple]) -> None:
    """Compile (once per signature) and run the program computing `refs` (no participants)."""
    pending = list(dict.fromkeys([(n, i) for n, i in refs if n.data is None]))
    if not pending:
        return
    cache = CTX.cache
    numerics, backend, pipeline = get_numerics(), get_backend(), passes.get_pipeline()
    tape, tkey = _tape_places(pending)
    cut = (_taped(tape, tkey, pending) if tkey else None) or _prekeyed(pending) \
        or Cut(pending)
    if tkey and type(cut) is Cut:
        _remember_tape(tape, tkey, cut)
    wide = boundary.wide_leaves(cut.leaves, CTX.thread.capture)
    key = cut.key(numerics, backend.name) + (pipeline, get_target().name, CTX.budget, wide)
    key = cache.aliases.get(key, key)
    entry = cache.entries.get(key)
    if entry is None and type(cut) is Prekeyed:   # a new prekey (or its program was dropped):
        cut = cut.full(pending)                   # the walked key, which a structure compiled
        if len(cache.aliases) >= 4 * cache.limit:  # before was cached under: compiled once
            cache.aliases.clear()
        cache.aliases[key] = key = cut.key(numerics, backend.name) + key[3:]
        entry = cache.entries.get(key)
    if entry is None:
        start = time.perf_counter()
        program = cut.program(wide)
        report = passes.run(program, pipeline, numerics)
        entry = Entry(program, compile_plan(program, backend, numerics), report)
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
    inputs = _inputs(cut.leaves, wide)
    rules = autoscale.rescue_rules(cut.leaves, cut.outputs)
    if CTX.thread.capture is not None:
        CTX.thread.capture.ran(cut, entry, rules)
    for log in CTX.explainers:
        log.append(entry)
    if CTX.recorders:
        run = Run(program, inputs, Cut(pending).program(wide))
        for log in CTX.recorders:
            log.append(run)
    results = autoscale.rescue(exe.run, inputs, rules) if rules else exe.run(inputs)
    _land(cut.outputs, results, program)
    CTX.thread.tape = None    # stale now; dropping it lets go of the leaves it read


def _inputs(leaves: list, wide: tuple) -> list:
    """The program inputs of `leaves` (`boundary.encode`): a leaf that crosses as it is
    stored (fp16 of the boundary's shape: most of a step's) is its array, without a call."""
    out, encode = [], boundary.encode
    for j, (n, i) in enumerate(leaves):
        t, a = n.types[i], n.data[i]
        if t.dtype is float16 and a.shape == t.shape and t.shape:
            out.append(a)
        else:
            out.append(encode(a, t, j in wide))
    return out


def _land(outputs: list, results: list, program) -> None:
    """Give each computed node its arrays (`Node.set_data`). Every cut lists all outputs of
    a node together and in order (`Cut`, `_taped`, `_prekeyed`), so a node's arrays are one
    run of `results`. A training step lands dozens of values each step: an fp16 result the
    run already gives in its type and shape lands without a call (`boundary.decode` would
    hand it back as it is), and `Node.set_data`'s steps run inline, the staleness mark once."""
    CTX.realized_seq = next(SEQ)          # (what each `set_data` marks: older prekeys stale)
    decode, k, end = boundary.decode, 0, len(outputs)
    while k < end:
        node = outputs[k][0]
        types = node.types
        if len(types) == 1:
            a, t = results[k], types[0]
            if t.dtype is not float16 or a.dtype != _F16 or a.shape != t.shape:
                a = decode(a, t)
            node.data, node.origin, node.sid, node.reads = [a], program, None, ()
            if not node.requires_grad:
                node.op, node.srcs, node.args, node.key = None, {}, (), None
            k += 1
            continue
        node.set_data([decode(r, t) for r, t in zip(results[k:k + len(types)], types)], program)
        k += len(types)


_F16 = np.dtype(np.float16)


class Prekeyed(NamedTuple):
    """A cut known without walking the trace, from the pending node's prekey (`trace._prekey`)
    or from the tape key of the pending values (`trace.Tape`): the leaves it reads, the
    outputs it writes, and its key."""
    leaves: list
    outputs: list
    structure: tuple

    def key(self, numerics, backend_name: str) -> tuple:
        return backend_name, numerics, self.structure

    def full(self, pending: list) -> Cut:
        """The walked cut, which must read the same leaves in the same order (checked)."""
        cut = Cut(pending)
        if cut.leaves != self.leaves:
            raise AneforgeError(f"internal error: a prekey's {len(self.leaves)} leaves differ "
                                f"from the cut's {len(cut.leaves)}")
        return cut


def _tape_places(pending: list) -> tuple:
    """(this thread's current tape, the tape key of `pending`: the tape's id and the places
    of the values on it), or (None, None)."""
    tape = current_tape()
    if tape is None:
        return None, None
    places, base, count = [], tape.base, tape.count
    for node, i in pending:                   # (`tape.place`, inline: every realization)
        p = node.tape
        if p is None or not 0 <= p - base < count:
            return None, None
        places.append((p - base, i))
    return tape, (tape.sid, tuple(places))


def _taped(tape, tkey: tuple, pending: list) -> Prekeyed | None:
    """The cut of `pending` from its tape key (`trace.Tape`), when one was walked before."""
    known = CTX.cache.tapes.get(tkey)
    if known is None:
        return None
    structure, numbers, single = known
    reads = list(tape.leafno)                 # by number: in order of first read
    outputs = pending if single else \
        list(dict.fromkeys([(n, i) for n, _ in pending for i in range(len(n.types))]))
    return Prekeyed([reads[j] for j in numbers], outputs, structure)


def _remember_tape(tape, tkey: tuple, cut: Cut) -> None:
    """Keep what walking `cut` found under its tape key: its structure and leaves, and
    whether its values are each a whole one-output node's (the key's places fix the nodes'
    ops, so then the outputs are the pending values themselves, in order)."""
    tapes = CTX.cache.tapes
    if len(tapes) >= 4 * CTX.cache.limit:
        tapes.clear()
    single = all(len(n.types) == 1 for n, _ in cut.outputs) and len(cut.outputs) == len(tkey[1])
    tapes[tkey] = (cut.structure, tuple([tape.leafno[ref] for ref in cut.leaves]), single)


def _prekeyed(pending: list) -> Prekeyed | None:
    """All outputs of one pending node whose prekey is current: its leaves and key, no walk."""
    node = pending[0][0]
    if node.sid is None or node.seq < CTX.realized_seq or any(n is not node for n, _ in pending):
        return None
    reads = prekey_leaves(node.reads)
    first = dict.fromkeys(reads)              # a leaf read twice is one program input
    leaves = list(first)
    same = None
    if len(leaves) != len(reads):             # the key says which reads are of one leaf
        first.update(zip(leaves, range(len(leaves))))
        same = tuple([first[r] for r in reads])
    return Prekeyed(leaves, [(node, i) for i in range(len(node.types))], ("prekey", node.sid, same))


def program_for(refs: list[tuple]) -> Program:
    """The Program that realizing `refs` would run (nothing is compiled or run), or, for one
    value that is already realized, the program that computed it."""
    pending = [(n, i) for n, i in refs if n.data is None]
    if pending:
        cut = Cut(pending)
        return cut.program(boundary.wide_leaves(cut.leaves))
    origins = {id(n.origin): n.origin for n, _ in refs}
    if len(origins) == 1 and None not in origins.values():
        return next(iter(origins.values()))
    raise AneforgeError("these tensors hold host data or come from different programs; "
                        "no single program produced them")
