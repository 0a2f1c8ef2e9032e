"""The lazy trace: a DAG of Nodes, one per recorded op, shared by every Tensor handle.

A Node is either pending (an op with source references) or realized (its `data` holds one
array per output). Realizing a node that does not require grad drops its sources, so the
trace never grows without bound across training steps: the next step starts from leaves.
"""
from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any

import numpy as np

from ..context import CTX
from ..dtypes import float16
from ..errors import LimitError
from ..ir.signature import canonical, op_key
from ..ir.types import TensorType
from ..ops import REGISTRY
from ..ops.registry import is_literal


SEQ = itertools.count()


class Node:
    __slots__ = ("op", "srcs", "args", "attrs", "types", "data", "requires_grad", "key", "origin",
                 "grad", "owner", "freed", "overwritten", "seq", "sid", "reads", "mid", "tape",
                 "__weakref__")

    def __init__(self, op: str | None, srcs: dict[str, Any], attrs: dict[str, Any],
                 types: list[TensorType], data: list | None = None, requires_grad: bool = False,
                 key: tuple | None = None, args: list | None = None, prekey: tuple | None = None):
        self.op, self.srcs, self.attrs, self.types = op, srcs, attrs, types
        # every source (node, index) in argument order, variadic flattened (`record` passes it)
        self.args = _flat_args(srcs) if args is None else args
        self.data, self.requires_grad = data, requires_grad
        self.origin = None        # the Program that computed a realized node
        self.grad = None          # a leaf's accumulated gradient (a Tensor)
        self.owner = None         # weakref to the handle whose value this leaf is (Tensor.set_)
        self.freed = False        # differentiated once without retain_graph (autograd)
        self.overwritten = None   # {output index: seq when an in-place op replaced it}
        self.seq = next(SEQ)     # recording order (in-place checks: ops after an overwrite)
        # Everything that identifies this op structurally, computed once at record time.
        self.key = key if key is not None or op is None else op_key(op, attrs)
        # see `_prekey`: this node's realization, keyed while recording (sid None: none)
        self.sid, self.reads = (None, ()) if prekey is None else prekey
        self.mid = None           # its recording memo's number (see `_tape`)
        self.tape = None          # its place on this thread's tape (see `_tape`)

    @property
    def realized(self) -> bool:
        return self.data is not None

    def set_data(self, arrays: list, origin=None) -> None:
        self.data, self.origin = arrays, origin
        self.sid, self.reads = None, ()       # (the reads would keep its inputs alive)
        CTX.realized_seq = next(SEQ)          # every older prekey may now hold a stale pending node
        if not self.requires_grad:
            self.op, self.srcs, self.args, self.key = None, {}, (), None

    def refs(self):
        """(node, output index) of every source, in argument order (variadic flattened)."""
        return self.args


def leaf(array, type: TensorType, requires_grad: bool = False) -> Node:
    return Node(None, {}, {}, [type], [array], requires_grad, None, ())


def half_scalar(v: float) -> Node:
    """A host number as the float16 leaf `af.tensor(v)` makes (numpy rounds the double once),
    without `af.tensor`'s checks of user data (~10 us): for scalars a step makes anew each
    time (the loss scale, Adam's bias corrections). Outside af.compile's capture only, which
    is told of each leaf `af.tensor` makes."""
    return leaf(np.asarray(v, np.float16), _HALF_SCALAR)


_HALF_SCALAR = TensorType((), float16)


# ---- written leaves: a value set into a handle, computed by the next realization --------
# `p.data += -lr * p.grad` (Tensor.set_ of a pending value) makes p a new leaf at once, as
# torch does, but its array comes later: a *written* leaf is a leaf (op None) without data
# whose one argument is the pending value it will hold. Every realization computes the values
# of all its thread's written leaves alive (`writes`), in the same program, and then gives each
# its array (`land_writes`): N parameter updates and the `.item()` after them run as one
# program, not N + 1. (Per thread: another thread landing a leaf mid-cut broke the cut.)
# Until then the trace reads a written leaf as the value it holds (the cut wires readers to
# the argument); autograd sees a leaf.
def written_leaf(ref: tuple, type: TensorType, requires_grad: bool) -> Node:
    """A leaf that will hold pending value `ref` (a written leaf's, the value it will hold)."""
    ref = written(ref)
    node = Node(None, {}, {}, [type], None, requires_grad, None, [ref])
    CTX.thread.writes.append(weakref.ref(node))
    return node


def is_written(node: Node) -> bool:
    return node.op is None and node.data is None


def written(ref: tuple) -> tuple:
    """The pending value a written leaf will hold (ref itself for any other value)."""
    node = ref[0]
    return node.args[0] if node.op is None and node.data is None else ref


def writes() -> list:
    """The pending values of every written leaf alive (what a realization computes too)."""
    out, alive = [], []
    for w in CTX.thread.writes:
        node = w()
        if node is not None and node.data is None:
            alive.append(w)
            out.append(node.args[0])
    CTX.thread.writes[:] = alive
    return out


def mark_writes_stale() -> None:
    """What backward() does: the written leaves pending now belong to an earlier step."""
    CTX.thread.stale_writes = weakref.WeakSet(
        node for node in (w() for w in CTX.thread.writes)
        if node is not None and node.data is None)


def stale_write(node: Node) -> bool:
    """Whether writing over handle value `node` writes over a write of an earlier step that
    nothing has read yet: a loop of hand-written updates (`with no_grad(): p -= lr * p.grad`)
    that reads no value each step, as torch's "Learning PyTorch with Examples" tutorials do
    (they print every 100 steps). The caller computes the pending writes first, so each
    update runs in a program of one step's size, the same program every step, compiled once.
    Without it every step's update chained onto the last and the first read computed one
    program of all the steps since, compiled anew for each length (measured on torch's
    polynomial tutorial: 70 ms a step over its first 200 steps, 15-40 ms a step after with a
    read every 200 steps, against 2.4-5.6 ms a step this way)."""
    return node.data is None and node in CTX.thread.stale_writes


def land_writes() -> None:
    """Give each written leaf whose value is now computed its array (a plain leaf from now)."""
    kept = []
    for w in CTX.thread.writes:
        node = w()
        if node is None or node.data is not None:
            continue
        src, i = node.args[0]
        if src.data is None:
            kept.append(w)
            continue
        node.data, node.args = [src.data[i]], ()
    CTX.thread.writes[:] = kept


def record(op: str, srcs: dict[str, Any], attrs: dict[str, Any], requires_grad: bool) -> Node:
    """Check the op NOW (shapes, dtypes, ANE limits) and append it to the trace.

    `srcs` maps MIL argument names to (node, index) references, or lists of them (variadic).
    The check's outcome depends only on the op, the input types, the attributes and the target
    (whose caps it enforces), so it is remembered (`_APPLIED`): a training loop records the
    same few hundred uses every step.
    """
    memo, args, absent = [op, canonical(attrs) if attrs else (), CTX.target], [], False
    for k, v in srcs.items():              # one pass: the memo's input types, and the args
        memo.append(k)
        if type(v) is tuple:
            memo.append(v[0].types[v[1]])
            args.append(v)
        elif v is None:
            memo.append(None)
            absent = True
        else:
            memo.append(tuple([n.types[i] for n, i in v]))
            args.extend(v)
    kept = {k: v for k, v in srcs.items() if v is not None} if absent else srcs
    return _node(op, srcs, attrs, requires_grad, tuple(memo), args, kept)


def record_binary(op: str, x: tuple, y: tuple, requires_grad: bool) -> Node:
    """`record(op, {"x": x, "y": y}, {}, requires_grad)`, unrolled for the arithmetic operators
    (the same memo, so the same checks and prekeys)."""
    srcs = {"x": x, "y": y}
    memo = (op, (), CTX.target, "x", x[0].types[x[1]], "y", y[0].types[y[1]])
    return _node(op, srcs, {}, requires_grad, memo, [x, y], srcs)


def _node(op: str, srcs: dict, attrs: dict, requires_grad: bool, memo: tuple, args: list,
          kept: dict) -> Node:
    """The recorded node: `memo` keys the check, `kept` are the sources given (not None)."""
    hit = _APPLIED.get(memo)
    if hit is None:
        hit = _apply(op, srcs, attrs, memo)
    elif hit[4]:
        REGISTRY[op].check_const_inputs(srcs, is_const)
    full, types, key, floating, _, mid = hit
    node = Node(op, kept, full, types, None, requires_grad and floating, key, args,  # shared:
                _prekey(memo, args))                                               # never mutated
    node.mid = mid
    taped(node)
    return node


def _apply(op: str, srcs: dict, attrs: dict, memo: tuple) -> tuple:
    opdef = REGISTRY[op]
    full, types = opdef.apply(srcs, attrs, type_of, is_const)
    if any(0 in t.shape for t in _memo_types(memo)):
        raise EmptyOperand(f"{op}: an operand is empty; the ANE has no empty tensors")
    hit = (full, types, op_key(op, full), any(t.dtype.is_float for t in types),
           bool(opdef.const_inputs), next(_MID))
    if len(_APPLIED) >= _APPLIED_MAX:
        _APPLIED.clear()
        _MEMO_OF.clear()
    _APPLIED[memo] = hit
    _MEMO_OF[hit[5]] = memo
    return hit


def _memo_types(memo: tuple):
    """The input types in a recording memo (after op, attributes, target: name, type pairs)."""
    for t in memo[4::2]:
        if type(t) is tuple:
            yield from t
        elif t is not None:
            yield t


class EmptyOperand(LimitError):
    """An op was given an empty tensor: the Tensor layer evaluates it on the host
    (core/empty.py) instead of recording it."""


# (op, canonical attributes, target, then each argument's name and input types) -> (full
# attributes, result types, op key, any float, has const inputs, the memo's number): a pure
# cache of OpDef.apply's outcome (which depends on nothing else), bounded. The number
# stands for the memo in tape keys (never reused, also after a clear).
_APPLIED: dict = {}
_APPLIED_MAX = 1 << 14
_MID = itertools.count()
_MEMO_OF: dict = {}      # the memo's number -> the memo (a `Stretch` re-records ops from it)


# ---- the tape: a realization's cache key, built up while recording ----------------------
# Every node a thread records between two realizations gets a place on its tape, and the
# tape a structure id, interned link by link from the previous id, the node's memo number
# and its wiring: a pending source by its place (and output index), a leaf read by the
# leaf's number in order of first read (so the id says which reads are of one leaf). Two
# tapes with one id are the same recording up to leaf values; with the places of the values
# to compute, the id fixes the program and which of the tape's leaves it reads (realization
# keeps that per tape key: a cache hit then neither walks nor keys the trace). A pending
# source recorded before the tape (or on another thread's) breaks the tape until the next
# realization; so does its length passing _TAPE_MAX. Each link holds the node's
# requires_grad and marks a written leaf's read: one id is one graph for autograd too (which
# nodes it walks: `autograd._KnownOrder`), given which leaves require grad.
class Tape:
    __slots__ = ("sid", "base", "count", "leafno", "start", "log")

    def __init__(self):
        self.sid, self.count = 0, 0
        self.base = next(_TAPE_SERIAL) << 32     # places are base + i: tapes never share one
        self.leafno: dict = {}                   # leaf ref (node, index) -> its number (kept alive)
        self.start = next(SEQ)                   # stale once a realization comes after it
        self.log = None                          # a list of the nodes put on it (`Stretch`)

    def place(self, node) -> int | None:
        """`node`'s place on this tape, or None."""
        p = node.tape
        return None if p is None or not 0 <= p - self.base < self.count else p - self.base


_TAPE_SERIAL = itertools.count()
_TAPE_MAX = 1 << 16
_TAPE_IDS: dict = {}
_TAPE_IDS_MAX = 1 << 17


def current_tape() -> Tape | None:
    """This thread's tape if it is whole and no realization came since it began."""
    tape = CTX.thread.tape
    if tape is None or tape.sid is None or tape.start < CTX.realized_seq:
        return None
    return tape


def open_tape() -> Tape | None:
    """This thread's tape, a new one if a realization came since it began (as the next
    recorded node would make it: a kept stretch recorded first in a step keys as later ones
    do); None if it is broken."""
    thread = CTX.thread
    tape = thread.tape
    if tape is None or tape.start < CTX.realized_seq:
        tape = thread.tape = Tape()
    return None if tape.sid is None else tape


def taped(node: Node) -> None:
    """Put recorded `node` on this thread's tape (a new tape after a realization)."""
    thread = CTX.thread
    tape = thread.tape
    if tape is None or tape.start < CTX.realized_seq:
        tape = thread.tape = Tape()
    sid, base, count = tape.sid, tape.base, tape.count
    if sid is None or count >= _TAPE_MAX:
        tape.sid = None
        return
    wires = _wires(tape, node.args, count)
    if wires is None:
        tape.sid = None
        return
    tape.sid = _tape_id((sid, node.mid, wires, node.requires_grad))
    node.tape = base + count
    tape.count = count + 1
    if tape.log is not None:
        tape.log.append(node)


def _wires(tape: Tape, refs, count: int) -> tuple | None:
    """How `refs` are wired on `tape` (its first `count` places): a leaf read by the leaf's
    number (numbered in order of first read), a pending value by its place; None if one is
    pending off the tape."""
    wires, base = [], tape.base
    for ref in refs:
        src = ref[0]
        if src.data is not None:                    # a leaf read: by the leaf's number
            leafno = tape.leafno
            j = leafno.get(ref)
            if j is None:
                j = leafno[ref] = len(leafno)
            wires.append(-1 - j)
            continue
        written = src.op is None          # a written leaf: the value it will hold (marked:
        if written:                       # autograd's walk stops at the leaf, not its value)
            ref = src.args[0]
            src = ref[0]
        p = src.tape
        if p is None or not base <= p < base + count:
            return None
        wires.append(p - base if ref[1] == 0 and not written else (p - base, ref[1], written))
    return tuple(wires)


def _tape_id(desc: tuple) -> int:
    """The interned id of a tape link (never reused, also after a clear)."""
    sid = _TAPE_IDS.get(desc)
    if sid is None:
        if len(_TAPE_IDS) >= _TAPE_IDS_MAX:
            _TAPE_IDS.clear()
        sid = _TAPE_IDS[desc] = next(_SID)
    return sid


# ---- stretches: a part of a tape recorded once, re-recorded node for node ----------------
# A training loop's backward() walks the same graph every step and its gradient rules record
# the same ops. A `Stretch` keeps what one walk recorded as a recipe: each op with its
# recording memo (the op, attributes and input types: the checks are memo hits) and each
# source by where it was on the tape: a node of the stretch, a node recorded before it (by
# place) or a leaf read before it (by number). On a later tape with the same id the recipe
# re-records the same nodes without running a rule. Anything else read inside the stretch (a
# leaf made there, a host value: `host_read`) may differ next time, so such a stretch is not
# kept. A stretch begun with `inputs` (an optimizer's update of one parameter) reads only
# those and its own nodes: it is re-recorded on any tape, from new inputs of the same types.
# A re-recording needs no check (each op's memo hit is kept) and goes on the tape as one link
# (the stretch's number and how its inputs are wired), not one per node: its nodes' places
# follow from the tape's count, so the link's id fixes them as node-by-node links would. Its
# nodes get no prekey: a tape is current whenever a stretch is re-recorded, and the tape key
# keys their realization (a realization after the tape broke walks the cut instead).
HOST_READS = [0]      # values read on the host so far (Tensor.value): a stretch must read none


def host_read() -> None:
    HOST_READS[0] += 1


class Stretch:
    """The recipe of the nodes recorded on `tape` since `begin(tape)` (see above). Each node
    is re-made requiring grad as it was recorded: a stretch is re-recorded only where what
    decides that (the grad mode, which inputs require grad) is as it was."""
    __slots__ = ("steps", "outputs", "places", "serial", "used", "lazy", "leafnos", "flat")

    @staticmethod
    def begin(tape: Tape, inputs: list | None = None) -> tuple:
        """The mark `end` takes; `inputs`: the refs of a closed stretch's inputs."""
        tape.log = []
        given = None if inputs is None else {(id(n), i): k for k, (n, i) in enumerate(inputs)}
        return (tape.count, len(tape.leafno), HOST_READS[0], CTX.realized_seq, given, tape.sid,
                inputs or ())

    @staticmethod
    def stop(tape: Tape) -> None:
        """Stop logging (after `end`, or when the recording raised)."""
        tape.log = None

    @classmethod
    def end(cls, tape: Tape, mark: tuple, outputs: list) -> "Stretch | None":
        """The recipe of what was recorded since `mark`, whose values `outputs` (refs) are;
        None if it cannot be re-recorded."""
        log, tape.log = tape.log, None
        count, leaves, reads, realized, given, sid, inputs = mark
        if (current_tape() is not tape or log is None or HOST_READS[0] != reads
                or CTX.realized_seq != realized or len(log) != tape.count - count):
            return None
        local = {id(n): j for j, n in enumerate(log)}

        def where(ref):
            node, i = ref
            j = local.get(id(node))
            if j is not None:
                return 0, j, i
            if given is not None:
                k = given.get((id(node), i))
                return None if k is None else (3, k, 0)
            if node.data is not None:
                k = tape.leafno.get(ref)
                return None if k is None or k >= leaves else (2, k, 0)
            p = tape.place(node) if node.op is not None else None
            return None if p is None or p >= count else (1, p, i)
        outs = [where(r) for r in outputs]
        if None in outs:
            return None
        given_out = {w[1] for w in outs if w[0] == 0}
        steps = []
        for j, n in enumerate(log):
            srcs = {k: where(v) if type(v) is tuple else [where(u) for u in v]
                    for k, v in n.srcs.items()}
            wired = [w for v in srcs.values() for w in (v if type(v) is list else [v])]
            memo = _MEMO_OF.get(n.mid)
            hit = _APPLIED.get(memo) if memo is not None else None
            if hit is None or None in wired:
                return None
            # a literal read inside: the same node serves the re-recordings (it has no
            # sources and is never computed on its own), once per tape (see `remake`)
            kept = n if is_literal(n.op) and not wired and j not in given_out else None
            steps.append((n.op, memo, n.attrs, srcs, hit, kept, n.requires_grad))
        self = cls()
        self.steps, self.outputs, self.serial = steps, outs, next(_STRETCH_SERIAL)
        read = [w for step in steps for v in step[3].values()
                for w in (v if type(v) is list else [v])]
        self.places = {w[1] for w in read if w[0] == 1} | {w[1] for w in outs if w[0] == 1}
        self.used = sorted({w[1] for w in read if w[0] == 3})     # the inputs it reads
        self.leafnos = sorted({w[1] for w in read if w[0] == 2} | {w[1] for w in outs if w[0] == 2})
        # made lazily (`Deferred`): nothing in it requires grad (autograd never enters it),
        # and each output is one whole node's value (so one stand-in node can be it)
        self.lazy = not any(step[6] for step in steps) and all(
            w[2] == 0 and len(steps[w[1]][4][1]) == 1 for w in outs if w[0] == 0)
        self.flat = [_flat_step(step) for step in steps]
        self._link(tape, sid, count, leaves, inputs)
        return self

    def _link(self, tape: Tape, sid: int, count: int, leaves: int, inputs: list) -> None:
        """Leave `tape` as a re-recording from id `sid`, count `count` and `leaves` leaf
        numbers leaves it (one link, the inputs' leaves numbered in their order), so that the
        first recording and the later ones key alike."""
        for ref in list(tape.leafno)[leaves:]:      # only inputs: they are numbered anew
            del tape.leafno[ref]
        link = _wires(tape, [inputs[k] for k in self.used], count)
        tape.sid = None if link is None else _tape_id((sid, ("stretch", self.serial), link))

    def remake(self, tape: Tape, placed: dict, inputs: list = ()) -> list | None:
        """Record the recipe again on `tape` (whose id is the one it was kept under, unless it
        is closed); `placed` maps the places of the tape's nodes it reads to them, `inputs`
        are a closed stretch's. Returns the refs of its outputs (None, recording nothing, if
        `placed` lacks one of them)."""
        if not self.places <= placed.keys():
            return None
        current = not (tape is None or tape is not CTX.thread.tape or tape.sid is None or
                       tape.start < CTX.realized_seq or tape.log is not None)
        if current and self.lazy:
            made = self._deferred(tape, placed, inputs)
            if made is not None:
                return made
        made = []
        leaves = list(tape.leafno) if tape is not None and self.leafnos else []

        def ref(w):
            kind, j, i = w
            return ((made[j], i) if kind == 0 else (placed[j], i) if kind == 1 else
                    leaves[j] if kind == 2 else inputs[j])
        if not current:
            for op, memo, attrs, wiring, _, _, grad in self.steps:   # node by node (`_node`)
                srcs = {k: ref(w) if type(w) is tuple else [ref(u) for u in w]
                        for k, w in wiring.items()}
                made.append(_node(op, srcs, attrs, grad, memo, _flat_args(srcs), srcs))
            return [ref(w) for w in self.outputs]
        count = tape.count
        link = _wires(tape, [inputs[k] for k in self.used], count)
        place = tape.base + count if link is not None else None
        for op, hit, kept, grad, names, wires, local in self.flat:
            if place is not None:
                place += 1                          # a kept literal keeps its place too
            if kept is not None:
                p = kept.tape          # its place: once per tape, as a recording would use it
                if place is None or p is None or not tape.base <= p < place - 1:
                    if place is not None:
                        kept.tape = place - 1
                    made.append(kept)
                    continue
            if local is not None:                   # each argument one node made here
                srcs, args = {}, []
                for k, j, i in local:
                    args.append(a := (made[j], i))
                    srcs[k] = a
            else:                                   # `ref`, unrolled for sources made here
                args = [(made[w[1]], w[2]) if w[0] == 0 else ref(w) for w in wires]
                srcs = dict(zip(names, args)) if type(names) is tuple else \
                    _regroup(names, args)
            if hit[4]:
                REGISTRY[op].check_const_inputs(srcs, is_const)
            node = Node(op, srcs, hit[0], hit[1], None, grad, hit[2], args)
            node.mid, node.tape = hit[5], None if place is None else place - 1
            made.append(node)
        if link is None or place - tape.base > _TAPE_MAX:
            tape.sid = None
        else:
            tape.sid = _tape_id((tape.sid, ("stretch", self.serial), link))
            tape.count = place - tape.base
        return [ref(w) for w in self.outputs]

    def _deferred(self, tape: Tape, placed: dict, inputs: list) -> list | None:
        """`remake` on a current tape without making the recipe's nodes: only a stand-in node
        for each output (its op, attributes and type; its sources a `Deferred`), on the tape
        at the place the output's node would take. A walk that needs the nodes (a cut that is
        not known by its tape key) makes them then (`Deferred.expand`), the same nodes
        `remake` makes; a training step's realization, known by its tape key, never does.
        None (nothing recorded) past the tape's length."""
        count = tape.count
        link = _wires(tape, [inputs[k] for k in self.used], count)
        start = tape.base + count
        if link is None or count + len(self.steps) > _TAPE_MAX:
            return None
        leaves = list(tape.leafno) if self.leafnos else ()
        group = Deferred(self, {p: placed[p] for p in self.places} if self.places else {},
                         {j: leaves[j] for j in self.leafnos} if self.leafnos else {}, inputs, start)
        made, outs, steps = {}, [], self.steps
        for w in self.outputs:
            j = w[1]
            if w[0] != 0:
                outs.append(group.ref(w, ()))
                continue
            node = made.get(j)
            if node is None:
                step = steps[j]
                hit = step[4]
                node = made[j] = Node(step[0], group, hit[0], hit[1], None, False, hit[2], ())
                node.mid, node.tape = hit[5], start + j
            outs.append((node, 0))
        group.outs = {j: weakref.ref(n) for j, n in made.items()}
        tape.sid = _tape_id((tape.sid, ("stretch", self.serial), link))
        tape.count = count + len(self.steps)
        return outs


def _flat_step(step: tuple) -> tuple:
    """A recipe step as `Stretch.remake` runs it on a current tape: (op, memo hit, kept
    literal, requires grad, argument names, wires in argument order, and where each argument
    is one source made by the recipe: (name, step, output index) of each, else None; most
    steps read only the recipe's own nodes). The names are a tuple when each argument is one
    source, else a list of (name, count or None for one source)."""
    op, _, _, wiring, hit, kept, grad = step
    wires, names = [], []
    for k, w in wiring.items():
        if type(w) is tuple:
            wires.append(w)
            names.append((k, None))
        else:
            wires.extend(w)
            names.append((k, len(w)))
    local = None
    if all(n is None for _, n in names):
        names = tuple(k for k, _ in names)
        if all(w[0] == 0 for w in wires):
            local = tuple((k, w[1], w[2]) for k, w in zip(names, wires))
    return op, hit, kept, grad, names, tuple(wires), local


def _regroup(names: list, args: list) -> dict:
    """The sources by argument name of `args` in argument order (a variadic's as a list)."""
    srcs, at = {}, 0
    for k, n in names:
        if n is None:
            srcs[k] = args[at]
            at += 1
        else:
            srcs[k] = args[at:at + n]
            at += n
    return srcs


class Deferred:
    """The sources of the nodes of a stretch re-recorded lazily (`Stretch._deferred`): what
    the recipe reads (tape nodes by place, leaves by number, a closed stretch's inputs), the
    tape place it began at and the stand-in nodes of its outputs. A stand-in's `srcs` is this
    object until `expand` (the cut's walk calls it)."""
    __slots__ = ("stretch", "placed", "leaves", "inputs", "start", "outs")

    def __init__(self, stretch, placed: dict, leaves: dict, inputs: list, start: int):
        self.stretch, self.placed, self.leaves, self.inputs = stretch, placed, leaves, inputs
        self.start, self.outs = start, {}

    def ref(self, w: tuple, made) -> tuple:
        kind, j, i = w
        return ((made[j], i) if kind == 0 else (self.placed[j], i) if kind == 1 else
                self.leaves[j] if kind == 2 else self.inputs[j])

    def expand(self) -> None:
        """Make the recipe's nodes (the stand-ins still pending become theirs, with their
        sources), as a recording makes them (a literal is a node of its own each time)."""
        if self.outs is None:                  # (made already)
            return
        made, ref = [], self.ref
        for j, (op, _, _, wiring, hit, _, grad) in enumerate(self.stretch.steps):
            srcs = {k: ref(w, made) if type(w) is tuple else [ref(u, made) for u in w]
                    for k, w in wiring.items()}
            alive = self.outs.get(j)
            node = alive() if alive is not None else None
            if node is not None and node.srcs is self:
                node.srcs, node.args = srcs, _flat_args(srcs)
            elif node is None:             # (a computed stand-in stays the value it holds)
                node = Node(op, srcs, hit[0], hit[1], None, grad, hit[2], _flat_args(srcs))
                node.mid, node.tape = hit[5], self.start + j
            made.append(node)
        self.placed = self.leaves = self.inputs = self.outs = None


_STRETCH_SERIAL = itertools.count()      # a stretch's number in tape links (never reused)


class KeptStretches(threading.local):
    """Where `kept_stretch` keeps its recordings: one dict per thread. A kept stretch holds
    the nodes of its literals, which a realization turns into leaves; shared by two threads,
    one thread's realization changed a node the other's cut was reading."""

    def __init__(self):
        self.by_key: dict = {}


def kept_stretch(kept: KeptStretches, key: tuple, inputs: list, build) -> list:
    """The refs `build()` returns, recorded from the values `inputs` (refs) alone: the first
    time for `key` and the inputs' types by running `build`, kept in `kept` as a closed
    `Stretch`, later re-recorded from it (the same nodes, so the same program and bits; no
    Python of `build` runs; `kept` is this thread's). `build` must be a function of the
    inputs' values and `key` alone (a host read or a leaf made inside makes the recording not
    kept); the grad mode, which inputs require grad and the target are part of the key.
    Outside af.compile's capture only (a replay runs what the function did); there `build()`
    runs."""
    thread = CTX.thread
    tape = None if thread.capture is not None else open_tape()
    if tape is None or tape.log is not None:
        return build()
    # per input: its type, whether it requires grad and which input it is the value of
    first: dict = {}
    full = [key, thread.grad_enabled, CTX.target]
    for k, ref in enumerate(inputs):       # (one loop, not three: every kept recording)
        node = ref[0]
        full += (node.types[ref[1]], node.requires_grad, first.setdefault(ref, k))
    full = tuple(full)
    kept = kept.by_key
    stretch = kept.get(full)
    if stretch is not None:
        return stretch.remake(tape, {}, inputs)
    mark = Stretch.begin(tape, inputs)
    try:
        out = build()
        stretch = Stretch.end(tape, mark, out)
    finally:
        Stretch.stop(tape)
    if stretch is not None:
        if len(kept) >= 256:
            kept.clear()
        kept[full] = stretch
    return out


# ---- prekeys: a realization's cache key and inputs, built up while recording ------------
# A pending node's prekey is (structure id, leaf reads). The structure id numbers, by interning,
# the tree the node computes: its recording memo (op, attributes, target, argument names and
# input types: what fixes the op) and, per source, None for a leaf or the structure id (with
# the output index if not 0) of a pending source. Two ids are equal exactly when the trees
# are, so an id plus which leaf reads are of one leaf keys the program (a pending value used
# twice is one node in the program and two branches of the tree; ops are pure, so both
# compute the same). The leaf reads are (node, index) pairs in the order the realization's cut
# finds them (depth first: a node's sources' reads, then its own; the first of repeats
# counts), grouped as recorded: () for none, else a tuple of reads and groups ending in its
# read count (a chain shares its source's group). A realization makes every prekey recorded
# before it stale (its pending nodes may now hold data): `CTX.realized_seq`.
_SIDS: dict = {}
_SIDS_MAX = 1 << 16
_SID = itertools.count()         # never reused, also after _SIDS is cleared
_PREKEY_READS_MAX = 256           # reads (with repeats) past which walking the cut is cheaper


def _prekey(memo: tuple, args: list) -> tuple | None:
    """The prekey of a node recorded as `memo` (op, attributes, target, argument names and input
    types: what fixes its op key) reading `args`: None if a pending source has no current one."""
    wires, parts, reads, count, stale = [], [], [], 0, CTX.realized_seq
    for ref in args:
        node = ref[0]
        if node.data is not None:                # a leaf read: the memo holds its type
            wires.append(None)
            reads.append(ref)
            continue
        sid = node.sid
        if sid is None or node.seq < stale:
            return None
        wires.append(sid if ref[1] == 0 else (sid, ref[1]))
        if node.reads:
            parts.append(node.reads)
            count += node.reads[-1]
    if reads:                                    # read after the sources' own reads
        parts += reads
        count += len(reads)
    if count > _PREKEY_READS_MAX:
        return None
    desc = (memo, tuple(wires))
    sid = _SIDS.get(desc)
    if sid is None:
        if len(_SIDS) >= _SIDS_MAX:
            _SIDS.clear()
        sid = _SIDS[desc] = next(_SID)
    if len(parts) == 1 and type(parts[0][0]) is not Node:
        return sid, parts[0]                     # a chain shares its source's reads
    return sid, (*parts, count) if parts else ()


def prekey_leaves(reads: tuple) -> list:
    """A prekey's leaf reads in order (with repeats), flattened without recursion."""
    out, stack = [], [iter(reads)]
    while stack:
        for part in stack[-1]:
            if type(part) is int:                # a group's count
                continue
            if type(part[0]) is Node:
                out.append(part)
            else:
                stack.append(iter(part))
                break
        else:
            stack.pop()
    return out


def _flat_args(srcs: dict) -> list:
    args = []
    for v in srcs.values():
        if type(v) is list:
            args.extend(v)
        elif v is not None:
            args.append(v)
    return args


def type_of(ref) -> TensorType:
    return ref[0].types[ref[1]]


def is_const(ref) -> bool:
    return is_literal(ref[0].op)
