"""Reverse-mode autograd over the lazy trace.

`backward` walks the nodes that require grad in reverse topological order and asks each op's
registry entry for its gradient rule, `REGISTRY[op].vjp(g, ins, attrs, out)`, which returns the
cotangent of each input built from registered ops. Everything specific to an op lives in its
rule beside its definition in aneforge/ops/; this module only walks, sums broadcast axes (in ONE
place, `sum_to`) and accumulates.

ANE-safe by construction: zeros come from `x - x` (`ops._grad.zeros`), never from a multiply by zero after a reduce
(ANEForge `docs/developer/autograd.md`: a reduce_sum/reduce_mean output times exactly 0 fails
ANECCompile), and backward ops are recorded into the same trace, so a
training step (forward, backward, update) is one program.
"""
from __future__ import annotations

import contextlib
import weakref
from typing import Sequence

import numpy as np

from .context import CTX
from .core import autoscale
from .core.trace import mark_writes_stale
from .errors import AneforgeError
from .ops import REGISTRY
from .ops._grad import zeros
from .tensor.base import TensorBase
from .tensor.highrank import HighRank, wrap
from .tensor.reduce import reduce
from .core.trace import SEQ, KeptStretches, Stretch, current_tape, half_scalar, record
from .ir.dag import topological


# ---- grad mode -----------------------------------------------------------------------
class no_grad(contextlib.ContextDecorator):
    """Record ops without gradient information (a context manager and a decorator).

    >>> import aneforge as af
    >>> w = af.ones(2, requires_grad=True)
    >>> with af.no_grad():
    ...     (w * 2).requires_grad
    False
    """

    def __init__(self, mode: bool = False):
        self.mode = mode

    def _recreate_cm(self):       # as a decorator: a fresh instance per call (threads, recursion)
        return type(self)(self.mode)

    def __enter__(self):
        self.prev = CTX.thread.grad_enabled
        CTX.thread.grad_enabled = self.mode

    def __exit__(self, *exc):
        CTX.thread.grad_enabled = self.prev


class inference_mode(no_grad):
    """torch.inference_mode: no gradient recording while `mode` is True (the default).

    >>> import aneforge as af
    >>> w = af.ones(2, requires_grad=True)
    >>> with af.inference_mode():
    ...     (w * 2).requires_grad
    False
    """

    def __init__(self, mode: bool = True):
        super().__init__(not mode)

    def _recreate_cm(self):
        return type(self)(not self.mode)


def enable_grad() -> no_grad:
    return no_grad(True)


def set_grad_enabled(mode: bool) -> no_grad:
    return no_grad(mode)


def is_grad_enabled() -> bool:
    return CTX.thread.grad_enabled


# ---- broadcasting undone --------------------------------------------------------------
def sum_to(g: "Tensor", shape: tuple[int, ...]) -> "Tensor":
    """Sum a broadcast cotangent back to `shape` (the one place broadcasting is undone).

    Long float16 sums run through the matmul accumulator (aneforge.tensor.reduce): the engine's
    reduce_sum accumulates in fp16 (sbryngelson/ane-guide, numerics chapter).
    """
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape)
                                      if n == 1 and g.shape[i + lead] != 1)
    return reduce(g, axes, keepdim=True).reshape(shape)


# ---- the walk ------------------------------------------------------------------------
def _topo(roots) -> list:
    """The nodes requiring grad reachable from `roots`, each after its sources
    (`ir.dag.topological`). Sources in reverse argument order: it fixes the order cotangents
    are summed in, and fp16 sums depend on it; a custom Function's output leads to the
    Function's inputs."""
    custom = _CUSTOM if _CUSTOM else None

    def sources(n):
        group = custom.get(n) if custom is not None else None
        refs = reversed(n.args) if group is None else group.input_refs()
        return [src for src, _ in refs if src.requires_grad]
    return topological([r for r in roots if r.requires_grad], sources)


def _host_zeros(refs, at):
    """Zeros shaped as the input(s) `refs` (an empty one is empty), made on the host."""
    if isinstance(refs, list):
        return [_host_zeros(r, at) for r in refs]
    t = refs[0].types[refs[1]]
    return at(*refs)._as_tensor(np.zeros(t.shape, t.dtype.np))


def _inputs(node, at) -> dict:
    return {k: ([at(n, i) for n, i in v] if isinstance(v, list) else at(v[0], v[1]))
            for k, v in node.srcs.items()}


def _accumulate(grads: dict, ref, g: "Tensor") -> None:
    key = (id(ref[0]), ref[1])
    grads[key] = (ref, g if key not in grads else grads[key][1] + g)


def _vjp(node, cotangents: list, at) -> dict:
    """The rule's cotangents of `node`'s inputs; `at(node, i)` is a handle on a value."""
    if all(0 in t.shape for t in node.types):       # an empty result: it moved no value, so
        return {k: _host_zeros(v, at) for k, v in node.srcs.items()}   # every input gets 0s
    rule = REGISTRY[node.op].vjp
    if rule is None:
        raise NotImplementedError(f"no gradient rule (vjp) for op {node.op!r}")
    outs = [at(node, i) for i in range(len(node.types))]
    gs = [g if g is not None else zeros(o) for g, o in zip(cotangents, outs)]
    single = len(outs) == 1
    return rule(gs[0] if single else gs, _inputs(node, at), node.attrs, outs[0] if single else outs)


def _backprop(roots: Sequence, seeds: Sequence, retain_graph: bool, order=None,
              scale=None, leaves_only: bool = False, watched: list | None = None) -> dict:
    """Cotangents of every requires-grad value reachable from `roots`, keyed by (id(node), i)
    (`leaves_only`: the caller reads only the leaves', so a repeated walk may be re-recorded:
    `_RepeatedWalk`).

    As in torch, a graph is differentiated once unless `retain_graph`: a second walk through an
    op a first one freed raises (torch frees the tensors the rule saved; here it keeps the
    familiar error instead of silently adding a second copy of the gradients). `watched`
    collects the cotangents entering ops whose sums can hide an overflow (autoscale.SUMMING)."""
    grads: dict = {}
    for r, s in zip(roots, seeds):
        _accumulate(grads, r.ref, s)
    known = _KnownOrder.key(roots, seeds) if leaves_only and order is None else None
    where = None
    if known is not None:
        order, where = _KnownOrder.order(known, roots[0].ref[0])
    if order is None:
        order = _topo([r.ref[0] for r in roots])
        if known is not None:
            _KnownOrder.keep(known, order)
    freed, check = _marks(order)
    if freed:
        raise AneforgeError("Trying to backward through the graph a second time. Specify "
                            "retain_graph=True when calling backward() (or af.grad) the first "
                            "time if you need to differentiate it again.")
    if not retain_graph:
        for n in order:
            if n.op is not None:
                n.freed = True
    waiting = _FunctionCalls(order, scale) if _CUSTOM else None
    custom = _CUSTOM and any(n in _CUSTOM for n in order)      # a Function's backward: Python
    repeated = _RepeatedWalk.of(order, seeds, where) if leaves_only and not check and \
        not custom else None
    if repeated is not None and repeated.known is not None:
        if repeated.remake(grads, roots[0]._at, watched):
            return grads
    mark = repeated.begin() if repeated is not None else None
    try:
        _walk(order, grads, roots, check, waiting, watched)
        if repeated is not None:
            repeated.keep(mark, grads, watched)
    finally:
        if repeated is not None:
            Stretch.stop(repeated.tape)
    return grads


def _walk(order: list, grads: dict, roots: Sequence, check: bool, waiting,
          watched: list | None) -> None:
    """The reverse walk: each op's rule sends its inputs' cotangents into `grads`; `watched`
    collects the cotangents entering ops whose sums can hide an overflow (autoscale.SUMMING)."""
    with no_grad():
        for node in reversed(order):
            if node.op is None:
                continue
            cot = [grads.get((id(node), i), (None, None))[1] for i in range(len(node.types))]
            if waiting is not None and node in _CUSTOM:
                for ref, g in waiting.arrive(node, cot[0]):
                    _send(grads, ref, g)
                continue
            if all(c is None for c in cot):
                continue
            if watched is not None and node.op in autoscale.SUMMING:
                watched.extend(c for c in cot if c is not None)
            start = next(SEQ)
            cotangents = _vjp(node, cot, roots[0]._at)
            if check:
                _check_versions(node, cotangents, start)
            for name, g in cotangents.items():
                _send(grads, node.srcs.get(name), g)


class _RepeatedWalk:
    """A backward walk whose graph is all on this thread's tape: keyed by the tape's id and
    the places of the walked nodes (leaves by number: which ones require grad is part of the
    key) and of its starting cotangents. The first walk with a key is recorded as a
    `trace.Stretch`; later ones re-record its ops node for node (the same nodes, so the same
    program and bits) instead of running the gradient rules: a training loop's backward()
    after the first step. (The rules are fixed: ops/ attaches them at import.)"""
    __slots__ = ("tape", "key", "known", "order", "seeds")

    @classmethod
    def of(cls, order: list, seeds: Sequence, known: list | None = None) -> "_RepeatedWalk | None":
        """`known`: the order's places and leaf numbers, as `_KnownOrder` kept them."""
        tape = current_tape()
        if tape is None or CTX.thread.capture is not None:
            return None
        where, base, count, leafno = list(known or ()), tape.base, tape.count, tape.leafno
        for n in order if known is None else ():    # (`tape.place`, unrolled)
            p = n.tape
            if p is not None and n.op is not None and 0 <= p - base < count:
                where.append(p - base)
                continue
            p = leafno.get((n, 0)) if n.data is not None else None
            if p is None:
                return None
            where.append(-1 - p)
        for s in seeds:
            p = tape.place(s.ref[0])
            if p is None:
                return None
            where.append((p, s.ref[1]))
        self = cls()
        self.tape, self.key, self.order, self.seeds = tape, (tape.sid, tuple(where)), order, seeds
        self.known = _WALKS.by_key.get(self.key)
        return self

    def begin(self) -> tuple:
        return Stretch.begin(self.tape)

    def keep(self, mark: tuple, grads: dict, watched: list | None) -> None:
        """Keep the walk just recorded (its leaves' gradients, and the watched cotangents, are
        what a replay gives)."""
        leaves = [(ref, g.ref) for ref, g in grads.values() if ref[0].op is None]
        seen = [w.ref for w in watched or ()]
        stretch = Stretch.end(self.tape, mark,
                              [r for r, _ in leaves] + [g for _, g in leaves] + seen)
        if stretch is not None:
            walks = _WALKS.by_key
            if len(walks) >= _WALKS_MAX:
                walks.clear()
            walks[self.key] = (stretch, len(leaves))

    def _placed(self, nodes: list, wanted: set) -> tuple:
        """The tape's pending nodes the walked nodes are or read, by place; and where the
        `wanted` places were found: (place, position in `nodes`, argument or -1)."""
        tape, placed, found = self.tape, {}, []
        base, count = tape.base, tape.count
        for k, node in enumerate(nodes):
            for a, src in enumerate([node, *(r[0] for r in node.args)]):   # `tape.place`
                p = src.tape
                if p is not None and 0 <= p - base < count and src.data is None and \
                        src.op is not None:
                    if p - base in wanted and p - base not in placed:
                        found.append((p - base, k, a - 1))
                    placed[p - base] = src
        return placed, tuple(found)

    def remake(self, grads: dict, at, watched: list | None) -> bool:
        """Add the leaves' gradients to `grads` (the roots'), and the watched cotangents to
        `watched`, re-recorded from the kept stretch; False (nothing recorded) if it reads a
        node this walk does not place."""
        stretch, n = self.known
        tape, seen = self.tape, _FOUND.by_key
        nodes = [*self.order, *(s.ref[0] for s in self.seeds)]
        found = seen.get(self.key)
        placed = _found(found, nodes, tape.base) if found is not None else None
        if placed is None:
            placed, found = self._placed(nodes, stretch.places)
            if len(seen) >= _WALKS_MAX:
                seen.clear()
            seen[self.key] = found
        refs = stretch.remake(tape, placed)
        if refs is None:
            return False
        for (node, i), (g, j) in zip(refs[:n], refs[n:2 * n]):
            grads[(id(node), i)] = ((node, i), at(g, j))
        if watched is not None:
            watched.extend(at(g, j) for g, j in refs[2 * n:])
        return True


class _KnownOrder:
    """The walk's order (`_topo`) of a backward whose graph is all on this thread's tape,
    known from the tape's id (which holds every node's requires_grad: `trace.Tape`), the
    places of the root and its starting cotangent and which of the tape's leaves require
    grad now: kept as each node's path from the root (the consumer's position in the order
    and the argument it reads), so a training loop's later steps follow the paths instead of
    searching the graph (8 us against 31 us for makemore's 39 nodes). Each node found is
    checked against the place (or leaf number) it had. Not through a custom Function's
    output (its sources are the Function's inputs, not its arguments), nor when a computed
    value that requires grad is read as a leaf (its graph goes on off the tape)."""

    @staticmethod
    def key(roots: Sequence, seeds: Sequence) -> tuple | None:
        tape = current_tape()
        if tape is None or len(roots) != 1 or CTX.thread.capture is not None:
            return None
        root, seed = tape.place(roots[0].ref[0]), tape.place(seeds[0].ref[0])
        if root is None or seed is None:
            return None
        grads = [n.requires_grad for n, _ in tape.leafno]
        if True in grads and any(n.op is not None for n, _ in tape.leafno if n.requires_grad):
            return None
        return tape.sid, root, roots[0].ref[1], seed, tuple(grads)

    @staticmethod
    def order(key: tuple, root) -> tuple:
        """The order the walk from `root` kept under `key` and its nodes' places (leaf
        numbers as -1 - number), else (None, None)."""
        kept = _ORDERS.by_key.get(key)
        if kept is None:
            return None, None
        paths, where = kept
        tape = CTX.thread.tape
        base, leaves = tape.base, list(tape.leafno)
        nodes = [None] * len(paths)
        nodes[-1] = root
        for k in range(len(paths) - 2, -1, -1):
            at, arg = paths[k]
            nodes[k] = node = nodes[at].args[arg][0]
            w = where[k]
            if (node.tape != base + w) if w >= 0 else leaves[-1 - w][0] is not node:
                return None, None
        if _CUSTOM and any(n in _CUSTOM for n in nodes):
            return None, None
        return nodes, where

    @staticmethod
    def keep(key: tuple, order: list) -> None:
        """Keep `order`'s paths (and each node's place or leaf number) under `key`."""
        tape = CTX.thread.tape
        if _CUSTOM and any(n in _CUSTOM for n in order):
            return
        position = {id(n): k for k, n in enumerate(order)}
        paths: list = [None] * len(order)
        for at, node in enumerate(order):
            for arg, (src, _) in enumerate(node.args):
                k = position.get(id(src))
                if k is not None and paths[k] is None and k != at:
                    paths[k] = (at, arg)
        where = []
        for node in order:
            p = tape.place(node) if node.op is not None else None
            j = tape.leafno.get((node, 0)) if node.data is not None else None
            if p is None and j is None:
                return
            where.append(p if p is not None else -1 - j)
        if None in paths[:-1]:
            return
        orders = _ORDERS.by_key
        if len(orders) >= _WALKS_MAX:
            orders.clear()
        orders[key] = (paths, where)


_ORDERS = KeptStretches()     # this thread's known orders, by key (`_KnownOrder`)


def _found(found: tuple, nodes: list, base: int) -> dict | None:
    """The tape nodes a kept walk reads, by place, where an earlier walk with its key found
    them (`_RepeatedWalk._placed`); None if one is not there (pending, at its place)."""
    placed = {}
    for p, k, a in found:
        src = nodes[k] if a < 0 else nodes[k].args[a][0]
        if src.tape != base + p or src.data is not None or src.op is None:
            return None
        placed[p] = src
    return placed


# backward walks kept for re-recording (_RepeatedWalk): key -> (trace.Stretch, leaves), bounded
_WALKS = KeptStretches()     # this thread's kept walks, by key
_FOUND = KeptStretches()     # where a kept walk's reads were found (`_RepeatedWalk._placed`)
_WALKS_MAX = 256


# ---- custom gradients: torch.autograd.Function ------------------------------------------
class FunctionCtx:
    """What a `Function`'s forward leaves for its backward (torch's `ctx`).

    `save_for_backward(*tensors)` / `saved_tensors`, `needs_input_grad` (one bool per forward
    argument), `mark_non_differentiable(*outputs)`, `set_materialize_grads(bool)` (False: an
    output that got no gradient is None in backward instead of zeros), `mark_dirty` (accepted:
    in-place outputs are new values here); any other attribute is yours to set."""

    def __init__(self, needs_input_grad: tuple = ()):
        self.saved_tensors: tuple = ()
        self.needs_input_grad = needs_input_grad
        self.materialize_grads = True
        self.non_differentiable: set = set()

    def save_for_backward(self, *tensors) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, TensorBase):
                raise TypeError(f"save_for_backward can only save variables, but argument "
                                f"{tensors.index(t)} is of type {type(t).__name__}")
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self.non_differentiable |= {id(t) for t in tensors}

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors) -> None:
        """Accepted for torch code: an in-place change makes a new value here (SSA)."""


class Function:
    """A differentiable operation with your own gradient, as `torch.autograd.Function`:
    subclass it with static `forward(ctx, *args)` and `backward(ctx, *grad_outputs)` (or the
    torch 2 style: `forward(*args)` plus `setup_context(ctx, inputs, output)`), and call
    `YourFunction.apply(*args)`. forward runs without recording gradients; backward returns
    one gradient (or None) per forward argument and is built from tensor ops, so it runs
    inside the same program as the rest of the backward pass.

    >>> import aneforge as af
    >>> class ClampGrad(af.autograd.Function):        # identity forward, clipped gradient
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         return x * 1.0
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         return g.clamp(-1.0, 1.0)
    >>> x = af.tensor([1.0, 2.0], requires_grad=True)
    >>> (ClampGrad.apply(x) * af.tensor([0.5, 3.0])).sum().backward()
    >>> x.grad.tolist()
    [0.5, 1.0]
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode AD.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError

    vjp = backward

    @classmethod
    def apply(cls, *args, **kwargs):
        needs = tuple(isinstance(a, TensorBase) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with no_grad():
            if "setup_context" in {k for c in cls.__mro__[:-1] if c is not Function
                                   for k in vars(c)}:          # torch 2 style
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        if not (CTX.thread.grad_enabled and any(needs)):
            return out
        outs = out if isinstance(out, tuple) else (out,)
        group = _FunctionCall(cls, ctx, args)
        linked = tuple(group.link(o) for o in outs)
        return linked if isinstance(out, tuple) else linked[0]


def once_differentiable(fn):
    """torch's decorator for a backward that is not itself differentiable: accepted as is
    (backward already runs without recording gradients of gradients)."""
    return fn


class _FunctionCall:
    """One `Function.apply`: its backward, its ctx, its tensor inputs and the output nodes that
    stand for its outputs in the trace (identity ops whose gradient is the backward's)."""

    def __init__(self, cls, ctx: FunctionCtx, args: tuple):
        self.cls, self.ctx = cls, ctx
        self.inputs = [a.ref if isinstance(a, TensorBase) and a.requires_grad else None
                       for a in args]
        self.outputs: list = []           # per forward output: its node, or None (not linked)
        self.values: list = []            # per forward output: the forward's value (for zeros)

    def link(self, out):
        """`out` as a new value whose gradient comes from this call's backward."""
        if not isinstance(out, TensorBase) or not out.dtype.is_float or \
                id(out) in self.ctx.non_differentiable:
            self.outputs.append(None)
            self.values.append(None)
            return out
        node = record("identity", {"x": out.ref}, {}, True)
        _CUSTOM[node] = self
        self.outputs.append(node)
        self.values.append(out)
        return out._at(node)

    def input_refs(self) -> list:
        return [r for r in self.inputs if r is not None]

    def call(self, cotangents: dict, scale=None) -> list:
        """The backward on the outputs' cotangents: [(input ref, gradient)]. Under automatic
        scaling the walk's cotangents are S times torch's: the backward sees torch's (it may
        be nonlinear in them, e.g. a clipped gradient) and its results are scaled back."""
        grads = []
        for node, value in zip(self.outputs, self.values):
            g = cotangents.get(node)
            if g is None and value is not None and self.ctx.materialize_grads:
                g = zeros(value)
            if g is not None and scale is not None:
                g = g / scale.to(g.dtype)
            grads.append(g)
        result = self.cls.backward(self.ctx, *grads)
        result = result if isinstance(result, tuple) else (result,)
        if len(result) != len(self.inputs):
            raise AneforgeError(f"function {self.cls.__name__}Backward returned an incorrect "
                                f"number of gradients (expected {len(self.inputs)}, got "
                                f"{len(result)})")
        return [(ref, g if scale is None else g * scale.to(g.dtype))
                for ref, g in zip(self.inputs, result) if ref is not None and g is not None]


class _FunctionCalls:
    """During one backward walk: each Function call's output cotangents as they arrive; its
    backward runs when the last of its outputs the walk reaches has arrived."""

    def __init__(self, order: list, scale=None):
        self.reached, self.scale = {id(n) for n in order}, scale
        self.arrived: dict = {}

    def arrive(self, node, g) -> list:
        call = _CUSTOM[node]
        got = self.arrived.setdefault(id(call), {})
        got[node] = g
        expected = [n for n in call.outputs if n is not None and id(n) in self.reached]
        if len(got) < len(expected):
            return []
        return call.call(got, self.scale)


# the identity nodes standing for Function outputs -> their call (gone with the nodes)
_CUSTOM: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _marks(order: list) -> tuple[bool, bool]:
    """(was any node of the graph differentiated already, without retain_graph; was any
    value the graph reads overwritten in place: if not, nothing to check), in one pass
    (loops, not generators: it runs on every backward)."""
    freed = overwritten = False
    for n in order:
        if n.freed:
            freed = True
        if overwritten:
            continue
        if n.overwritten:
            overwritten = True
            continue
        for src, _ in n.args:
            if src.overwritten:
                overwritten = True
                break
    return freed, overwritten


def _check_versions(node, cotangents: dict, start: int) -> None:
    """torch's saved-tensor check: if the gradient rule of `node` read a value (an input or the
    output) that an in-place op replaced after `node` was recorded, raise as torch does. SSA
    keeps the old value, but code relying on it would behave differently under torch, so refuse
    it. The walk covers only the ops the rule just recorded (numbered after `start`)."""
    stale = {(id(n), i) for n, i in [*node.refs(), *((node, i) for i in range(len(node.types)))]
             if n.overwritten and n.overwritten.get(i, -1) > node.seq}
    if not stale:
        return
    used = [g for name, g in cotangents.items() if _needs_grad(node.srcs.get(name))]
    seen, todo = set(), [g.ref for g in _flat(used)]
    while todo:
        n, i = todo.pop()
        if (id(n), i) in stale:
            t = n.types[i]
            raise AneforgeError(
                f"one of the variables needed for gradient computation has been modified by "
                f"an inplace operation: [{t.dtype.torch_name}{list(t.shape)}], an input or "
                f"output of {node.op!r}, was changed in place after it was used. Use an "
                f"out-of-place op (x = x.add(1)) or clone() before modifying.")
        if id(n) not in seen and n.seq > start:
            seen.add(id(n))
            todo.extend(n.refs())


def _needs_grad(refs) -> bool:
    if refs is None:
        return False
    return any(n.requires_grad for n, _ in (refs if isinstance(refs, list) else [refs]))


def _flat(values):
    for v in values:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        elif v is not None:
            yield v


def _send(grads, refs, g) -> None:
    if refs is None or g is None:
        return
    if isinstance(refs, list):
        for ref, gi in zip(refs, g):
            _send(grads, ref, gi)
        return
    if refs[0].requires_grad:
        shape = refs[0].types[refs[1]].shape
        _accumulate(grads, refs, sum_to(g, shape).to(refs[0].types[refs[1]].dtype))


def _seed(t: "Tensor", gradient) -> "Tensor":
    if gradient is None:
        if t.numel() != 1:
            raise AneforgeError(f"backward() on a tensor of shape {t.shape} needs a `gradient` "
                                f"argument (grad can be implicitly created only for scalars)")
        # a 0-d loss's seed as the number 1.0: the same literal, from the checked-once cache
        return t._const(1.0 if t.shape == () else np.ones(t.shape), t.dtype)
    if not isinstance(gradient, TensorBase):
        gradient = t._as_tensor(gradient)
    if gradient.shape != t.shape:
        raise AneforgeError(f"gradient has shape {gradient.shape}, expected {t.shape}")
    return gradient.to(t.dtype)


def backward(tensor: "Tensor", gradient=None, retain_graph: bool | None = None) -> None:
    """Accumulate d(tensor)/d(leaf) into `.grad` of every leaf that requires grad. A floating
    root is differentiated with automatic gradient scaling (aneforge.core.autoscale): the walk
    is seeded with the loss scale, and each `.grad` gets the unscaled value."""
    if not tensor.requires_grad:
        raise AneforgeError("element 0 of tensors does not require grad: nothing to "
                            "differentiate (create parameters with requires_grad=True)")
    order = _topo([tensor.ref[0]]) if CTX.model_scales else None
    scaler = _auto_scaler(tensor, order)
    seed = _seed(tensor, gradient)
    if scaler is not None:
        scale = _scale_input(tensor, scaler)
        seed = seed * scale.to(seed.dtype)
    watched = [] if scaler is not None else None
    grads = _backprop([tensor], [seed], bool(retain_graph), order,
                      scale if scaler is not None else None, leaves_only=True,
                      watched=watched)
    # the leaves that get a gradient: key -> the leaf node a handle holds now (once each)
    current = {k: _current(ref[0]) for k, (ref, _) in grads.items()}
    targets = [k for k, n in current.items() if n.op is None and n.requires_grad]
    auto = None
    if scaler is not None and targets:
        # the scale of this set of parameters (a model): each keeps its own adaptive state
        group = tuple(_identity(current[k]) for k in targets)
        scale.ref[0].data[0] = np.asarray(scaler.select(group), scale.dtype.np)
        if CTX.thread.capture is not None:     # a replay reads the group's scale anew
            CTX.thread.capture.provide(scale, lambda: scaler.select(group))
        with no_grad():
            peaks = autoscale.scale(targets, grads, scale, watched)
        auto = autoscale.Scaled(scaler, peaks, tuple(weakref.ref(current[k]) for k in targets),
                                scale, [grads[k][1].ref for k in targets])
        scaler.pending.append(auto)
    leaves = []
    capture = CTX.thread.capture
    with no_grad():
        for k in targets:
            node, g = current[k], grads[k][1]
            if capture is not None:
                capture.backward_into(node)
            node.grad = g if node.grad is None else node.grad + g
            leaves.append(node)
    if capture is None:
        mark_writes_stale()
    records = CTX.thread.backward_records
    records[:] = [r for r in records if r.pending()]
    records.append(BackwardRecord(tensor, leaves, auto))
    if CTX.thread.capture is not None:
        CTX.thread.capture.records.append(records[-1])


def _auto_scaler(root, order) -> "autoscale.AutoScaler | None":
    """The scaler for a backward from `root`: none for an explicit GradScaler's scaled loss
    (no double scaling) or a non-floating root."""
    if not root.dtype.is_float or carried(root, "scaler") is not None:
        return None
    leaves = [n for n in order if n.op is None] if order is not None else []
    return autoscale.scaler_for(leaves)


def carried(root, name: str):
    """What a root of a subclass carries as `name` (GradScaler's scaled loss: `scaler`,
    `companions`), else None. Looked up on the class first: a plain Tensor's missing
    attribute goes through `Tensor.__getattr__`, whose error message searches for similar
    names (0.8 ms a call, on every backward)."""
    return getattr(root, name) if hasattr(type(root), name) else None


def _identity(node) -> weakref.ref:
    """Which parameter a leaf is: a weak reference to its handle (stable across steps), else
    to the node (weak references compare by their referent while it lives, never after)."""
    owner = node.owner() if node.owner is not None else None
    return weakref.ref(owner if owner is not None else node)


def _scale_input(root, scaler) -> "Tensor":
    """The loss scale as a host scalar: a program input (its value is set once the pass's
    parameters are known: `AutoScaler.select`). Made as `af.tensor` makes it (a float16
    leaf), without its checks of user data, outside af.compile's capture (which is told of
    each leaf made)."""
    if CTX.thread.capture is not None:
        return root._as_tensor(scaler.scale)
    return root._at(half_scalar(scaler.scale))


def _current(node):
    """The leaf a handle holds now, for a leaf it held when the graph was recorded (`x.data`
    writes and `set_` give the handle a new leaf; its gradient goes there, as in torch)."""
    owner = node.owner() if node.op is None and node.owner is not None else None
    now = owner._node if owner is not None else node
    return now if now.op is None and now.requires_grad else node


class BackwardRecord:
    """The gradients one `backward()` left pending in this thread: the leaves that got them and
    the root they came from. Nothing runs at backward(); the first realization that needs any of
    it (a `.item()`, a `.grad` read, `opt.step()`) computes forward, backward and, when an
    optimizer owns the leaves, the update too, in one program (see Optimizer.join_realization).

    `root` may carry `companions`, values the same program should also return (GradScaler's
    scaled loss names the unscaled one), and `scaler` (whose settings the step will use).
    """
    __slots__ = ("root", "leaves", "auto")

    def __init__(self, root: "Tensor", leaves: list, auto=None):
        self.root = root                                  # strong: it is the graph the grads hold anyway
        self.leaves = {id(n): weakref.ref(n) for n in leaves}
        self.auto = auto                                  # autoscale.Scaled, if scaled

    def touches(self, node) -> bool:
        ref = self.leaves.get(id(node))
        return ref is not None and ref() is node

    def pending(self) -> bool:
        """Any of its leaves still holds a gradient that is not computed yet."""
        for ref in self.leaves.values():
            node = ref()
            if node is not None and node.grad is not None and node.grad.ref[0].data is None:
                return True
        return False

    def grads(self) -> list:
        """The gradients of its leaves that are still pending."""
        nodes = (ref() for ref in self.leaves.values())
        return [n.grad for n in nodes if n is not None and n.grad is not None
                and n.grad.ref[0].data is None]

    def outputs(self) -> list:
        """(node, index) of the root and its companions: a step returns them with the update."""
        values = [self.root, *(carried(self.root, "companions") or ())]
        return [t.ref for t in values] + (self.auto.refs() if self.auto is not None else [])


def grad(outputs, inputs, grad_outputs=None, retain_graph: bool | None = None,
         allow_unused: bool = False) -> tuple:
    """d(outputs)/d(inputs) as a tuple of Tensors, without touching `.grad` (torch.autograd.grad).

    >>> import aneforge as af
    >>> x = af.tensor([1.0, 2.0, 3.0], requires_grad=True)
    >>> (gx,) = af.grad((x * x).sum(), x)
    >>> gx.tolist()
    [2.0, 4.0, 6.0]
    """
    outputs = [outputs] if isinstance(outputs, TensorBase) else list(outputs)
    inputs = [inputs] if isinstance(inputs, (TensorBase, HighRank)) else list(inputs)
    shapes = [x.shape if isinstance(x, HighRank) else None for x in inputs]   # rank > 5: its
    inputs = [x._storage if isinstance(x, HighRank) else x for x in inputs]   # rank <= 5 storage
    seeds = grad_outputs if grad_outputs is not None else [None] * len(outputs)
    seeds = [seeds] if isinstance(seeds, TensorBase) else seeds
    grads = _backprop(outputs, [_seed(o, s) for o, s in zip(outputs, seeds)], bool(retain_graph))
    result = []
    for x in inputs:
        node, i = x.ref
        entry = grads.get((id(node), i))
        if entry is None and not x.numel():        # an empty input: `cat` leaves it out of the
            entry = (None, _host_zeros(x.ref, x._at))   # graph; its gradient is empty, as torch's
        if entry is None and not allow_unused:
            raise AneforgeError("one of the inputs does not reach the outputs; pass "
                                "allow_unused=True to get None for it")
        result.append(None if entry is None else entry[1])
    return tuple(g if g is None or shape is None else wrap(g, shape)
                 for g, shape in zip(result, shapes))
