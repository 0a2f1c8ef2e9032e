"""`af.compile(fn)`: capture a function of tensors once per input signature, then replay it.

The first call with a new signature (argument shapes and dtypes, Python-number arguments by
value, grad mode and the compile settings) runs `fn` as usual while a `Capture` watches: which
programs run, where each program input comes from, where each output goes, and which Python
effects the participants (optimizers, GradScaler, modules) perform. Later calls skip `fn`
entirely: new argument arrays and the current parameters and optimizer state go straight to the
cached executables, and the effects are re-applied (parameters adopt their new values, the
optimizer counts its step, the scaler reads its skip flag).

Every program input must have a known source, or the capture is refused (the function then runs
as usual on every call, with one warning saying why; `fullgraph=True` raises instead):

| source | at replay |
|---|---|
| an argument (a Tensor, or an array the function passes to `af.tensor`) | the new argument |
| a value held by a handle updated with `Tensor.set_` (parameters, optimizer state) | its current value |
| a value a participant computes (learning rate, bias corrections, loss scale, random draws) | computed again |
| a constant made in the function (`af.zeros`, `af.eye`, ...) or a tensor made before it | the same value |
| an output of an earlier program of the same call | that output |

What cannot be replayed, and is refused: reading a value on the host inside the function
(`.item()`, `.numpy()`, `bool(t)`: the function might branch on it — return the tensor
instead), tensors made from other host data inside the function, non-tensor return values.
Like torch.compile, other Python state the function reads (globals, closure variables that are
not tensors) is fixed at capture: call `.reset()` after changing it.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import numpy as np

from . import dtypes
from .core import autoscale, boundary, realization
from .context import CTX
from .errors import AneforgeError
from .ir.types import TensorType
from .hardware.numerics import get_numerics
from .passes import get_pipeline
from .tensor import Tensor
from .core.trace import leaf, written


class NotReplayable(AneforgeError):
    """Why a function cannot be captured for replay (raised with fullgraph=True)."""


class Capture:
    """What one call of a compiled function did, recorded while it ran eagerly."""

    def __init__(self, args: list):
        self.args = args                 # the argument objects, flattened
        self.arg_nodes = {id(a.ref[0]): k for k, a in enumerate(args) if isinstance(a, Tensor)}
        self.created: dict = {}          # id(node) -> (node, how to remake it or None)
        self.actions: list = []          # ("run", Run) | ("effect", fn), in call order
        self.guards: dict = {}           # key -> (fn, value at capture)
        self.refusals: list[str] = []
        self.runs: list = []
        self.outputs: dict = {}          # (id(node), i) -> (run index, output index)
        self.records: list = []          # backward records made during the call
        self.cleared: dict = {}          # id(leaf) -> leaf whose .grad the call assigned
        self.pending_sets: list = []     # (handle, ref): set_ to a value not computed yet

    # ---- what the library reports while the function runs --------------------------------
    def created_leaf(self, node, data=None, remake: Callable | None = None) -> None:
        """A leaf made inside the function. `data` is the host object it was made from (an
        argument is recognised by identity); `remake(obj)` converts a new argument the same
        way; `remake` alone (data None) recomputes the value (random draws)."""
        if data is not None:
            k = next((k for k, a in enumerate(self.args) if a is data), None)
            self.created[id(node)] = (node, None if k is None else ("arg", k, remake))
        else:
            self.created[id(node)] = (node, ("remake", remake) if remake else ("const",))

    def provide(self, tensor: Tensor, fn: Callable[[], Any]) -> None:
        """`tensor` (a host leaf made in the function) takes the value fn() at replay."""
        node = tensor.ref[0]
        self.created[id(node)] = (node, ("provide", fn, tensor.dtype))

    def effect(self, fn: Callable, *reads: Tensor) -> None:
        """fn(*arrays) is re-run at this point of each replay, with the values `reads` have then
        (the eager call has already done it: nothing runs now)."""
        self.actions.append(("effect", (fn, [t.ref for t in reads])))

    def set_when_computed(self, handle: Tensor, source: Tensor) -> bool:
        """`handle.set_(source)` of a pending value: the program that computes it (the next
        realization, which computes every written leaf) sets it on replay, right after it
        runs, instead of a program of its own now (BatchNorm's running statistics would
        otherwise recompute the forward pass up to them, once per buffer). Returns True."""
        self.pending_sets.append((handle, written(source.ref)))
        return True

    def guard(self, fn: Callable[[], Any], key=None) -> None:
        """fn() must return the same at replay, or the function is captured again (one guard
        per `key`, default fn itself)."""
        key = fn if key is None else key
        if key not in self.guards:
            self.guards[key] = (fn, fn())

    def backward_into(self, node) -> None:
        """backward() is about to add a gradient to leaf `node`. Adding to one this call did not
        compute cannot be replayed; finding none that this call did not clear is an assumption
        about the next call too (it is guarded)."""
        grad = node.grad
        if grad is None:
            if id(node) not in self.cleared:
                self.guard(functools.partial(_no_grad_now, node), ("no grad", id(node)))
        elif grad.ref[0].data is not None and (id(grad.ref[0]), grad.ref[1]) not in self.outputs:
            self.refusals.append("gradients accumulate across calls (call zero_grad() inside "
                                 "the function)")

    def grad_set(self, node) -> None:
        """A leaf's .grad was assigned (zero_grad sets None) inside the call."""
        self.cleared[id(node)] = node

    def checked(self, node, i: int) -> bool:
        """Whether a replay can check that leaf (node, i)'s int values fit int16 before it
        runs anything (an argument's), or they never change (a constant's): the leaf may then
        cross the boundary as one int16 (core/boundary.py), as an eager step's labels do."""
        src = self.source(node, i)
        return src is not None and src[0] in ("targ", "arg", "fixed")

    def host_read(self, what: str) -> None:
        self.refusals.append(f"it reads a value on the host ({what}) — return the tensor "
                             f"instead and read it after the call")

    def host_write(self) -> None:
        self.refusals.append("it sets a tensor from host data")

    def ran(self, cut, entry, rescues: list = ()) -> None:
        """A program ran; `rescues`: automatic scaling's rules for running it again unscaled
        (aneforge.core.autoscale.rescue), which a replay applies the same way."""
        j = len(self.runs)
        for k, (node, i) in enumerate(cut.outputs):
            self.outputs[(id(node), i)] = (j, k)
        run = _Run(entry, [(n, i) for n, i in cut.leaves], list(cut.outputs), list(rescues),
                   boundary.wide_leaves(cut.leaves, self))
        self.runs.append(run)
        self.actions.append(("run", run))
        self._settle_sets(j)

    def _settle_sets(self, j: int) -> None:
        """The pending sets whose values run j computed become effects right after it."""
        waiting = []
        for handle, ref in self.pending_sets:
            if self.outputs.get((id(ref[0]), ref[1]), (None,))[0] == j:
                self.actions.append(("effect", (handle.set_, [ref])))
            else:
                waiting.append((handle, ref))
        self.pending_sets = waiting

    def host_step(self, compute: Callable, reads: list, nodes: list) -> None:
        """A host segment ran (tensor/core.host_segment): a replay runs `compute` again on the
        values `reads` have then; its results must have the captured shapes, else the
        function runs and is captured again (the shapes depend on the data)."""
        j = len(self.runs)
        for k, node in enumerate(nodes):
            self.outputs[(id(node), 0)] = (j, k)
        run = _HostRun(compute, list(reads), [(n, 0) for n in nodes])
        self.runs.append(run)
        self.actions.append(("host", run))

    # ---- after the call: resolve every value's source --------------------------------------
    def source(self, node, i: int):
        """Where (node, i)'s value comes from at replay, or None if it cannot be known."""
        k = self.arg_nodes.get(id(node))
        if k is not None:
            return ("targ", k, i)
        out = self.outputs.get((id(node), i))
        if out is not None:
            return ("out",) + out
        if node.owner is not None:
            return ("owner", node.owner)
        made = self.created.get(id(node))
        if made is None:
            return ("fixed", node.data[i])          # made before the call: never changes
        how = made[1]
        if how is None:
            return None
        if how[0] == "const":
            return ("fixed", node.data[i])
        return how

    def finish(self, result) -> "Replay":
        flat, rebuild = _flatten(result)
        for t in flat:
            if not isinstance(t, Tensor):
                self.refusals.append(f"it returns a {type(t).__name__}, not tensors")
        if not self.records and any(isinstance(t, Tensor) and t.requires_grad for t in flat):
            self.refusals.append(
                "its result requires grad and its backward runs outside it (a replay computes "
                "values, not the graph a later backward needs); compile the whole training "
                "step instead: forward, loss.backward() and optimizer.step() in one function "
                "(for inference, call it under af.no_grad(): then it replays)")
        self._grad_effects()
        for k, (kind, what) in enumerate(self.actions):
            if kind == "effect":
                fn, refs = what
                srcs = [self.source(n, i) for n, i in refs]
                if None in srcs:
                    self.refusals.append("a step reads a value no program computes")
                self.actions[k] = (kind, (fn, srcs))
        for run in self.runs:
            run.sources = [self.source(n, i) for n, i in run.leaves]
            for (n, i), s in zip(run.leaves, run.sources):
                if s is None:
                    t = n.types[i]
                    self.refusals.append(f"a {t.dtype.name}{list(t.shape)} tensor it makes from "
                                         f"host data that is not an argument feeds a program")
        if not self.runs:
            self.refusals.append("it runs no program")
        kinds = [kind for kind, _ in self.actions]
        if "effect" in kinds and "host" in kinds[kinds.index("effect"):]:
            self.refusals.append("a host segment (nonzero, unique, a bool mask, ...) follows a "
                                 "step that changes state (its shapes can change on replay)")
        if self.refusals:
            raise NotReplayable("; ".join(dict.fromkeys(self.refusals)))
        for run in self.runs:
            run.settle()
        returns = [(self.source(*t.ref), t.tensor_type) for t in flat]
        return Replay(self.actions, list(self.guards.values()), returns, rebuild, self._checks())

    def _checks(self) -> list:
        """Readers of the arguments that the programs take as one int16 (`checked`): a
        replay first checks that their new values fit, else captures again."""
        out = []
        for run in self.runs:
            for j in getattr(run, "narrow", ()):
                src = run.sources[j]
                if src[0] == "targ":
                    out.append(_READERS["targ"](*src[1:]))
                elif src[0] == "arg":
                    out.append(functools.partial(_raw_arg, src[1]))
        return out

    def _grad_effects(self) -> None:
        """Gradients the call left on leaves: re-point them at the new values on replay."""
        leaves = dict(self.cleared)
        for rec in self.records:
            leaves.update((k, ref()) for k, ref in rec.leaves.items() if ref() is not None)
        for node in leaves.values():
            owner = node.owner
            g = (owner().ref[0] if owner is not None else node).grad
            src = None if g is None else self.source(*g.ref)
            if g is not None and src is None:
                self.refusals.append("a gradient is not computed by its programs")
            self.actions.append(("grad", (node, src, None if g is None else g.tensor_type)))


class _Run:
    __slots__ = ("entry", "leaves", "outputs", "sources", "in_types", "out_types", "in_boundary",
                 "out_boundary", "rescues", "wide", "narrow")

    def __init__(self, entry, leaves, outputs, rescues=(), wide=()):
        self.entry, self.leaves, self.outputs, self.sources = entry, leaves, outputs, []
        self.rescues, self.wide = list(rescues), set(wide)

    def settle(self) -> None:
        """Keep the types of the program's inputs and outputs, not the capture's nodes (and
        the arrays they hold)."""
        self.in_types = [n.types[i] for n, i in self.leaves]
        self.out_types = [n.types[i] for n, i in self.outputs]
        self.leaves = self.outputs = None
        # per input: (type, boundary shape, converts?, in two parts?) so that a replay passes
        # fp16 arrays of the right shape straight through (host cost per step: a few hundred
        # microseconds); an int32 input not in parts crosses as one int16 (core/boundary.py)
        forms = [(t, boundary.transport_type(t, j in self.wide)) for j, t in
                 enumerate(self.in_types)]
        self.in_boundary = [(t, tt.shape, tt.dtype is not t.dtype, j in self.wide)
                            for j, (t, tt) in enumerate(forms)]
        self.narrow = [j for j, t in enumerate(self.in_types)
                       if boundary.split(t.dtype) and j not in self.wide]
        # per output: its type, shape and numpy dtype; a result of that shape and dtype is
        # its value as it is (decoding would only reshape it to its own shape)
        self.out_boundary = [(t, t.shape, t.dtype.np) for t in self.out_types]


class _HostRun:
    """A host segment of a captured call: its computation, what it read, the shapes it made."""
    __slots__ = ("compute", "leaves", "outputs", "sources", "shapes")

    def __init__(self, compute, leaves, outputs):
        self.compute, self.leaves, self.outputs, self.sources = compute, leaves, outputs, []

    def settle(self) -> None:
        self.shapes = [n.types[i].shape for n, i in self.outputs]
        self.leaves = self.outputs = None


class Diverged(Exception):
    """A replayed host segment made shapes other than the captured ones, or an int argument
    a program takes as int16 left its range: capture again."""


class Replay:
    """A captured call, ready to run again on new arguments. Every source is turned into a
    reader once (`_READERS`), so a replay only calls them: no dispatch per value."""

    def __init__(self, actions, guards, returns, rebuild, checks=()):
        self.actions, self.guards, self.returns, self.rebuild = actions, guards, returns, rebuild
        self.steps = _steps(actions)
        self.readers = [(_reader(s), t) for s, t in returns]
        self.checks = list(checks)       # readers of int arguments that must fit int16

    def valid(self) -> bool:
        return all(fn() == value for fn, value in self.guards)

    def __call__(self, args: list):
        for read in self.checks:          # before any step: nothing is half done
            if not boundary.fits_int16(read(args, None)):
                raise Diverged
        outs: list = []
        for act, what, readers in self.steps:
            act(what, [read(args, outs) for read in readers], outs)
        return self.rebuild([Tensor(leaf(read(args, outs), t)) for read, t in self.readers])


# source kind -> (its fields -> reader(args, outs) -> the array at replay)
_READERS = {
    "out": lambda j, k: lambda args, outs: outs[j][k],
    "owner": lambda handle: lambda args, outs: _held(handle()),
    "fixed": lambda array: lambda args, outs: array,
    "targ": lambda k, i: lambda args, outs: args[k]._node.data[i],
    "arg": lambda k, remake: lambda args, outs: remake(args[k]),
    "provide": lambda fn, dtype: lambda args, outs: np.asarray(fn(), dtype=dtype.np).reshape(()),
    "remake": lambda fn: lambda args, outs: fn(),             # a fresh draw
}


def _raw_arg(k, args, outs):
    return args[k]


def _held(tensor: Tensor):
    if tensor._node.data is None:       # written since the last call (`mul_` under no_grad)
        tensor.realize()
    return tensor._node.data[tensor._idx]


def _reader(src):
    return _READERS[src[0]](*src[1:])


def _run_step(run, arrays, outs) -> None:
    outs.append(_run(run, arrays))


def _host_step(run, arrays, outs) -> None:
    results = run.compute(*arrays)
    if [r.shape for r in results] != run.shapes:
        raise Diverged
    outs.append(results)


def _effect_step(fn, arrays, outs) -> None:
    fn(*arrays)


def _sets_step(sets, arrays, outs) -> None:
    for tensor, j, k in sets:
        a = outs[j][k]
        t = tensor._node.types[tensor._idx]
        tensor._adopt(a, t if t.shape == a.shape else TensorType(a.shape, t.dtype))


def _steps(actions: list) -> list:
    """Each action as (act, what, readers); consecutive effects that set a handle to a program
    output (an optimizer's update of each parameter and state tensor) become one step, a loop
    over (handle, run, output) triples."""
    out = []
    for kind, what in actions:
        if kind != "effect" or not _sets_an_output(*what):
            out.append(_STEPS[kind](what))
            continue
        if not out or out[-1][0] is not _sets_step:
            out.append((_sets_step, [], []))
        fn, (src,) = what
        out[-1][1].append((fn.__self__, src[1], src[2]))
    return out


def _sets_an_output(fn, srcs) -> bool:
    return getattr(fn, "__func__", None) is Tensor.set_ and len(srcs) == 1 and srcs[0][0] == "out"


def _grad_step(what, arrays, outs) -> None:
    node, type = what
    owner = node.owner
    target = owner()._node if owner is not None else node
    target.grad = Tensor(leaf(arrays[0], type)) if arrays else None


# action kind -> its captured form -> (act(what, arrays, outs), what, readers of the arrays)
_STEPS = {
    "run": lambda run: (_run_step, run, [_reader(s) for s in run.sources]),
    "host": lambda run: (_host_step, run, [_reader(s) for s in run.sources]),
    "effect": lambda what: (_effect_step, what[0], [_reader(s) for s in what[1]]),
    "grad": lambda what: (_grad_step, (what[0], what[2]),
                          [] if what[1] is None else [_reader(what[1])]),
}


def _run(run: _Run, arrays: list) -> list:
    inputs = [boundary.encode(a, t, wide) if convert else a if a.shape == shape else
              a.reshape(shape) for a, (t, shape, convert, wide) in zip(arrays, run.in_boundary)]
    exe = run.entry.executable
    results = autoscale.rescue(exe.run, inputs, run.rescues) if run.rescues else exe.run(inputs)
    CTX.cache.hits += 1
    return [r if r.shape == shape and r.dtype == np_dtype else boundary.decode(r, t)
            for r, (t, shape, np_dtype) in zip(results, run.out_boundary)]


def _no_grad_now(node) -> bool:
    owner = node.owner
    return (owner().ref[0] if owner is not None else node).grad is None


def _flatten(obj):
    """(list of leaves, rebuild(list) -> same structure) for tensors in tuples/lists/dicts."""
    if obj is None:
        return [], lambda xs: None
    if isinstance(obj, (tuple, list)):
        parts = [_flatten(o) for o in obj]
        sizes = [len(p[0]) for p in parts]

        def rebuild(xs):
            out, at = [], 0
            for (_, rb), n in zip(parts, sizes):
                out.append(rb(xs[at:at + n]))
                at += n
            return type(obj)(out)
        return [x for p in parts for x in p[0]], rebuild
    if isinstance(obj, dict):
        keys = list(obj)
        flat, rb = _flatten([obj[k] for k in keys])
        return flat, lambda xs: dict(zip(keys, rb(xs)))
    return [obj], lambda xs: xs[0]


# ---- af.compile ------------------------------------------------------------------------------
_EAGER = object()           # a signature whose capture was refused: always run the function


class Compiled:
    """A function (or module) compiled with `af.compile`: replays captured calls."""

    def __init__(self, fn: Callable, fullgraph: bool = False):
        self._fn, self.fullgraph = fn, fullgraph
        self._replays: dict = {}
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args, **kwargs):
        if CTX.thread.capture is not None:          # inside another capture: just run
            return self._fn(*args, **kwargs)
        realization.realize_writes()                 # parameters' pending `p.data = ...`
        flat, spec = _arguments(args, kwargs)
        key = (spec, CTX.thread.grad_enabled, getattr(self._fn, "training", None),
               get_numerics(), CTX.backend, get_pipeline(), CTX.target, CTX.budget,
               CTX.cache.generation)
        replay = self._replays.get(key)
        if replay is _EAGER:
            return self._fn(*args, **kwargs)
        if replay is not None and replay.valid():
            try:
                return replay(flat)
            except Diverged:                        # a host segment's shapes changed
                pass
        return self._capture(key, flat, args, kwargs)

    def __getattr__(self, name):                     # a compiled module keeps its attributes
        return getattr(self._fn, name)

    def reset(self) -> None:
        """Forget every capture: the next call of each signature runs the function again."""
        self._replays.clear()

    def _capture(self, key, flat, args, kwargs):
        capture = Capture(flat)
        CTX.thread.capture = capture
        try:
            result = self._fn(*args, **kwargs)
            outs, _ = _flatten(result)
            realization.realize([t.ref for t in outs if isinstance(t, Tensor)] +
                             [g.ref for rec in capture.records for g in rec.grads()])
        finally:
            CTX.thread.capture = None
        try:
            self._replays[key] = capture.finish(result)
        except NotReplayable as e:
            if self.fullgraph:
                raise NotReplayable(f"af.compile({_name(self._fn)}, fullgraph=True): cannot "
                                    f"replay this function because {e}") from None
            warnings.warn(f"af.compile({_name(self._fn)}): runs as usual on every call because "
                          f"{e}", RuntimeWarning, stacklevel=3)
            self._replays[key] = _EAGER
        return result


def compile(model: Callable | None = None, *, fullgraph: bool = False, disable: bool = False):
    """Capture `model` (a function of tensors, or a Module) on its first call for each input
    signature, and replay it on later calls without running its Python (torch.compile's name).

    A training step replays as one program run plus a few host copies: parameters, optimizer
    state and per-step scalars (learning rate, bias corrections, loss scale) are fed from their
    current values, and the optimizer's and GradScaler's bookkeeping is re-applied. Return the
    tensors you want to read (the loss): values read inside the function (`.item()`) make it
    impossible to replay. A module compiled on its own (`model = af.compile(model)`) replays
    where its result needs no graph (under `no_grad`); with the backward outside it, it runs
    as usual (warning once per signature), so gradients stay torch's. `fullgraph=True` raises
    where replay is impossible instead of warning and running the function as usual;
    `disable=True` returns `model` unchanged.

    >>> import numpy as np, aneforge as af, aneforge.nn as nn, aneforge.nn.functional as F
    >>> model = nn.Linear(4, 2)
    >>> opt = af.optim.SGD(model.parameters(), lr=0.1)
    >>> @af.compile
    ... def step(x, y):
    ...     opt.zero_grad()
    ...     loss = F.mse_loss(model(x), y)
    ...     loss.backward()
    ...     opt.step()
    ...     return loss
    >>> x, y = af.ones(8, 4), af.zeros(8, 2)
    >>> losses = [step(x, y).item() for _ in range(3)]    # captured once, replayed twice
    >>> losses[0] > losses[1] > losses[2]
    True
    """
    if model is None:
        return lambda fn: compile(fn, fullgraph=fullgraph, disable=disable)
    return model if disable else Compiled(model, fullgraph)


def _arguments(args, kwargs) -> tuple[list, tuple]:
    """The flattened arguments and their signature: tensors and arrays by shape and dtype,
    numbers and strings by value (as torch.compile specializes), other objects by identity."""
    if kwargs or any(isinstance(a, (tuple, list, dict)) for a in args):
        flat, _ = _flatten([list(args), dict(sorted(kwargs.items()))])
    else:
        flat = list(args)                   # the common case: nothing nested
    spec = []
    for k, a in enumerate(flat):
        if isinstance(a, Tensor):
            if a.ref[0].data is None:
                a.realize()
            spec.append(("T", a.shape, a.dtype, a.requires_grad))
        elif isinstance(a, np.ndarray):
            spec.append(("A", a.shape, a.dtype.str))
        elif a is None or isinstance(a, (bool, int, float, str)):
            spec.append(("V", type(a), a))
        else:
            spec.append(("O", id(a)))
    return flat, tuple(spec) + (tuple(kwargs),)


def _name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)
