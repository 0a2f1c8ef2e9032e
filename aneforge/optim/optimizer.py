"""Optimizer base: torch's param_groups / state / zero_grad / step, with the update recorded into
the same trace as forward and backward, so a training step realizes as ONE program.

Everything that changes between steps (learning rate, bias corrections, the loss scale) is a
program input, never a literal, so a loop of N steps compiles exactly once.

Precision with fp16-only program I/O: each parameter travels as a compensated pair of fp16
values (hi, lo) — the parameter itself and a small remainder kept in `state["lo"]`. The update is
added to lo first and then folded into hi with Fast2Sum (all fp16 ops: paired-fp16 arithmetic
that the ANE compiler does not fold away, per ANEForge `docs/developer/numerics.md`), so a
step smaller than half an fp16 ulp of the weight is not lost. `master_weights="fp16"` turns this
off (plain fp16 weights). docs/training.md has the measurement behind the default.
"""
from __future__ import annotations

import math
import warnings
from typing import Iterable

import numpy as np

from ..core import realization, scalar_consts
from ..core.trace import KeptStretches, Stretch, current_tape, half_scalar
from ..context import CTX
from ..autograd import carried, enable_grad, no_grad
from ..creation import tensor
from ..errors import AneforgeError
from ..nn.parameter import assign, host_array
from ..tensor import Tensor
from ..tensor.elementwise import where

MASTER_WEIGHTS = ("compensated", "fp16")
# kept updates of a step's parameters (Optimizer._updated): key -> (trace.Stretch, each
# parameter's new state's keys), this thread's
_UPDATES = KeptStretches()


class Optimizer:
    dynamic = ("lr",)          # group settings that reach the program only through hyper()

    def __init__(self, params: Iterable, defaults: dict, master_weights: str = "compensated"):
        if master_weights not in MASTER_WEIGHTS:
            raise ValueError(f"master_weights must be one of {MASTER_WEIGHTS}, got {master_weights!r}")
        self.defaults, self.master_weights = defaults, master_weights
        params = list(params)
        if not params:
            raise AneforgeError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = [{**defaults, **g, "params": list(g["params"])} for g in groups]
        for g in self.param_groups:
            _check_group(g)
        self.state: dict = {}
        self._steps = 0
        self._staged: _StagedUpdate | None = None   # an update staged by an early read, not adopted
        self._stepping = False
        self._hyper_leaves: dict = {}      # (group id, name) -> (value, host leaf): _hyper_inputs
        self.last_step_skipped = False
        CTX.participants.add(self)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self._params():
            p.grad = None
        self._staged = None

    def _params(self):
        for g in self.param_groups:
            yield from g["params"]

    # ---- what each optimizer defines -----------------------------------------------------
    def init_state(self, p: Tensor) -> dict:
        """New state tensors for parameter p (zeros, as host leaves)."""
        return {}

    def hyper(self, group: dict, step: int) -> dict:
        """Per-step scalars (become program inputs): lr, bias corrections, ..."""
        return {"lr": group["lr"]}

    def update(self, p: Tensor, g: Tensor, state: dict, h: dict, group: dict):
        """Return (delta to add to p, new state tensors), recorded lazily."""
        raise NotImplementedError

    # ---- the step ------------------------------------------------------------------------
    @no_grad()
    def step(self, closure=None, grad_scale=None, check_finite: bool = False):
        """Update every parameter that has a gradient: forward, backward and update run as ONE
        program (with the loss and the gradients as outputs, so reading them later is free).

        `grad_scale` (a number, or a host scalar tensor) multiplies each gradient first (an
        unscale from loss scaling);
        with `check_finite` the update is skipped, in the program, when any gradient is inf or
        NaN (`last_step_skipped` says so afterwards).

        When something was read between `backward()` and `step()` (`loss.item()`, a `.grad`),
        that read already ran the program with this update planned in; `step()` then only
        adopts the results, provided nothing it depends on changed since.
        """
        loss = None
        if closure is not None:
            with enable_grad():       # as torch: the closure re-evaluates the model
                loss = closure()
        self._count_step()
        capture = CTX.thread.capture
        if capture is not None:              # af.compile: replays count steps and check groups
            capture.effect(self._count_step)
            capture.guard(self._structure)
        if grad_scale is not None and not isinstance(grad_scale, Tensor):
            grad_scale = tensor(float(grad_scale))
        update, self._staged = self._staged, None
        if update is None or not update.matches(self, self._steps, _value(grad_scale), check_finite):
            update = self._stage_update(0, grad_scale, check_finite)
            if update is None:
                self._note_skipped(None)
                return loss
            self._stepping = True          # this realization is the step: nothing to plan
            try:
                realization.realize(update.targets + self._record_outputs())
            finally:
                self._stepping = False
        update.commit()
        self._consume_records()
        self._note_skipped(update.ok)
        return loss

    def _count_step(self) -> None:
        self._steps += 1

    def _structure(self) -> tuple:
        """What a captured step's program is built from, besides per-step inputs: the groups'
        settings (all but the per-step scalars) and parameters, and the master-weight mode."""
        return (self.master_weights, tuple(
            (tuple(map(id, g["params"])),
             tuple((k, v) for k, v in g.items() if k not in ("params", *self.dynamic)))
            for g in self.param_groups))

    def _note_skipped(self, ok: Tensor | None) -> None:
        self._set_skipped(None if ok is None else ok.value())
        capture = CTX.thread.capture
        if capture is not None:
            capture.effect(self._set_skipped, *([] if ok is None else [ok]))

    def _set_skipped(self, ok=None) -> None:
        self.last_step_skipped = ok is not None and not bool(ok.reshape(-1)[0])
        if self.last_step_skipped:      # as torch, where GradScaler skips optimizer.step()
            self._steps -= 1            # altogether: a skipped step is not counted

    def join_realization(self, refs: list) -> list:
        """Called by every realization while gradients are pending in this thread: if some are
        this optimizer's, plan the coming step into the same program (refs to add)."""
        if self._stepping or (self._staged is not None and self._staged.current(self)):
            return []
        if CTX.thread.capture is not None:   # af.compile replays what the function does, only
            return []
        records = self._records()
        if not records:
            return []
        grad_scale, check_finite = _expected_step_args(self, records)
        update = self._stage_update(1, grad_scale, check_finite)
        if update is None:
            return []
        self._staged = update
        return update.targets + [r for rec in records for r in rec.outputs()]

    def _records(self) -> list:
        nodes = [p.ref[0] for p in self._params()]
        return [r for r in CTX.thread.backward_records
                if r.pending() and any(r.touches(n) for n in nodes)]

    def _record_outputs(self) -> list:
        return [r for rec in self._records() for r in rec.outputs()]

    def _consume_records(self) -> None:
        nodes = [p.ref[0] for p in self._params()]
        records = CTX.thread.backward_records
        records[:] = [r for r in records if not any(r.touches(n) for n in nodes)]

    def _stage_update(self, ahead: int, scale: Tensor | None,
                      check_finite: bool) -> "_StagedUpdate | None":
        """Record lazily (nothing runs) the update of step number `self._steps + ahead`."""
        step = self._steps + ahead
        live = [(g, p) for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not live:
            return None
        for _, p in live:
            if p not in self.state:
                self.state[p] = self._fresh_state(p)
        update = _StagedUpdate(self, step, _value(scale), check_finite, live, ahead > 0)
        grads = [p.grad * scale if scale is not None else p.grad for _, p in live]
        ok = _all_finite(grads) if check_finite else None
        hypers = {id(group): self._hyper_inputs(group, ahead) for group in self.param_groups}
        settings = {id(group): tuple((k, v) for k, v in group.items()
                                     if k not in ("params", *self.dynamic))
                    for group in self.param_groups}
        made = self._updated([(p, g, self.state[p], hypers[id(group)], group, settings[id(group)])
                              for (group, p), g in zip(live, grads)])
        for (_, p), (new_p, new_state) in zip(live, made):
            state = self.state[p]
            for old, new in [(p, new_p)] + [(state[k], v) for k, v in new_state.items()]:
                update.writes.append((old, new if ok is None else where(ok, new, old)))
        update.ok = ok
        update.targets = ([new.ref for _, new in update.writes] + [p.grad.ref for _, p in live] +
                        ([ok.ref] if ok is not None else []))
        return update

    def _updated(self, params: list) -> list:
        """(new p, new state) of each (p, g, state, h, group, settings) in `params`, recorded
        lazily. What `update` and `_apply` record depends only on the optimizer, each group's
        `settings` (all but the per-step ones, which come in `h`) and the types of what they
        read, so the first step of each kind is kept as one closed `trace.Stretch` and later
        ones re-record its nodes (the same program and bits) without running the update's
        Python arithmetic again: one re-recording a step, not one a parameter (each cost a
        key, a tape link and a group of stand-ins)."""
        inputs = [t for p, g, state, h, _, _ in params
                  for t in (p, g, *state.values(), *h.values())]
        # (kept nodes are re-made not requiring grad: only under no_grad, as step() runs)
        thread = CTX.thread
        tape = current_tape() if thread.capture is None and not thread.grad_enabled and all(
            isinstance(t, Tensor) for t in inputs) else None
        refs = [t.ref for t in inputs] if tape is not None else []
        key = self._update_key(params, refs)
        try:
            kept = _UPDATES.by_key.get(key) if tape is not None else None
        except TypeError:             # a group setting that is not hashable: no reuse
            tape = kept = None
        if kept is not None:
            stretch, names = kept
            made = iter([params[0][0]._at(*r) for r in stretch.remake(tape, {}, refs)])
            return [(next(made), {k: next(made) for k in mine}) for mine in names]
        mark = Stretch.begin(tape, refs) if tape is not None else None
        try:
            out = [self._recorded(p, g, state, h, group) for p, g, state, h, group, _ in params]
            if mark is not None:
                self._keep(key, Stretch.end(tape, mark, [t.ref for new_p, new_state in out
                                                         for t in (new_p, *new_state.values())]),
                           [list(new_state) for _, new_state in out])
        finally:
            if mark is not None:
                Stretch.stop(tape)
        return out

    def _update_key(self, params: list, refs: list) -> tuple:
        """What a step's kept update is kept under: the optimizer, each parameter's state and
        hyperparameter names and group settings, the inputs' types and which are one value."""
        first: dict = {}
        key = [type(self), self.master_weights,
               tuple([(tuple(state), tuple(h), settings)
                      for _, _, state, h, _, settings in params])]
        for k, ref in enumerate(refs):       # (one loop, not two: every step)
            key += (ref[0].types[ref[1]], first.setdefault(ref, k))
        return tuple(key)

    def _recorded(self, p: Tensor, g: Tensor, state: dict, h: dict, group: dict) -> tuple:
        """(new p, new state) of one parameter, recorded."""
        delta, new_state = self.update(p, g, state, h, group)
        new_p, lo = self._apply(p, delta, state)
        if lo is not None:
            new_state["lo"] = lo
        return new_p, new_state

    @staticmethod
    def _keep(key: tuple, stretch, names: list) -> None:
        if stretch is not None:
            updates = _UPDATES.by_key
            if len(updates) >= 256:
                updates.clear()
            updates[key] = (stretch, names)

    def _hyper_inputs(self, group: dict, ahead: int) -> dict:
        """The per-step scalars as program inputs; af.compile recomputes them on each replay.
        One that has the value it had last step is last step's host leaf again (a leaf is an
        immutable value: the program reads the same number; no new conversion each step)."""
        values = self.hyper(group, self._steps + ahead)
        capture = CTX.thread.capture
        kept = self._hyper_leaves
        out = {}
        for k, v in values.items():
            v = float(v)
            last = kept.get((id(group), k))
            if capture is not None or last is None or last[0] != v or \
                    math.copysign(1.0, last[0]) != math.copysign(1.0, v):      # (-0.0: 0.0)
                last = kept[(id(group), k)] = (v, tensor(v) if capture is not None else
                                               Tensor(half_scalar(v)))
                _warn_if_lost(k, v, last[1])      # (a kept leaf was checked when it was made)
            out[k] = last[1]
        if capture is not None:
            for k, t in out.items():
                capture.provide(t, lambda k=k: self.hyper(group, self._steps + ahead)[k])
        return out

    def _fresh_state(self, p: Tensor) -> dict:
        state = self.init_state(p)
        if self.master_weights == "compensated":
            state["lo"] = tensor(np.zeros(p.shape, np.float16))
        return state

    def _apply(self, p: Tensor, delta: Tensor, state: dict):
        if self.master_weights == "fp16":
            return p + delta, None
        # Fast2Sum of (p, lo + delta): |p| >= |lo + delta| for any sane step.
        d = state["lo"] + delta
        s = p + d
        return s, d - (s - p)

    def state_dict(self) -> dict:
        """torch's layout: `state` by parameter index (each with its `step`), and `param_groups`
        with the settings and the indices of their parameters. `af.save` writes it;
        `load_state_dict` restores it exactly (training resumes bit-equal).

        >>> import aneforge as af
        >>> w = af.nn.Parameter(af.ones(2))
        >>> opt = af.optim.SGD([w], lr=0.1, momentum=0.9)
        >>> (w * w).sum().backward(); opt.step()
        >>> sorted(opt.state_dict()["state"][0]), opt.state_dict()["param_groups"][0]["params"]
        (['lo', 'momentum_buffer', 'step'], [0])
        """
        index = {id(p): i for i, p in enumerate(self._params())}
        return {"state": {index[id(p)]: {"step": float(self._steps),
                                         **{k: v.detach() for k, v in s.items()}}
                          for p, s in self.state.items()},
                "param_groups": [{k: v for k, v in g.items() if k != "params"} |
                                 {"params": [index[id(p)] for p in g["params"]]}
                                 for g in self.param_groups]}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore `state_dict()` (this optimizer's, or torch's for the same optimizer): the
        settings of each group and the per-parameter state. Everything is checked first (group
        sizes, state shapes); an error changes nothing.

        >>> import aneforge as af
        >>> w = af.nn.Parameter(af.ones(2))
        >>> opt = af.optim.Adam([w], lr=0.1)
        >>> (w * w).sum().backward(); opt.step()
        >>> again = af.optim.Adam([w], lr=0.5)
        >>> again.load_state_dict(opt.state_dict())
        >>> again.param_groups[0]["lr"], sorted(again.state[w])
        (0.1, ['exp_avg', 'exp_avg_sqrt', 'lo'])
        """
        if not (isinstance(state_dict, dict) and {"state", "param_groups"} <= set(state_dict)):
            raise ValueError("loaded state dict must be a dict with 'state' and 'param_groups' "
                             "(what Optimizer.state_dict() returns)")
        params = list(self._params())
        groups = state_dict["param_groups"]
        _check_loadable(self, groups, state_dict["state"], params)
        state, steps, lost = {}, [], {}
        for i, saved in state_dict["state"].items():
            p = params[int(i)]
            if "step" in saved:
                steps.append(int(float(np.asarray(host_array(saved["step"])).reshape(-1)[0])))
            state[p] = self._loaded_state(p, {k: host_array(v) for k, v in saved.items() if k != "step"})
            lost.update({f"state[{i}][{k!r}]": counts for k, counts in state[p].pop(_LOST).items()})
        updated = [{**g, **{k: (tuple(v) if isinstance(g.get(k), tuple) else v)
                            for k, v in saved.items() if k in g and k != "params"}}
                   for g, saved in zip(self.param_groups, groups)]
        for g in updated:               # every group checked before any is changed
            _check_group(g)
        for g, new in zip(self.param_groups, updated):
            g.update(new)
        self.state = state
        self._steps = max(steps) if steps else int(bool(state))
        self._staged = None
        scalar_consts.report_range(f"{type(self).__name__}.load_state_dict", lost)

    def _loaded_state(self, p: Tensor, saved: dict) -> dict:
        """The state tensors of `p` from saved host arrays (keys this optimizer keeps)."""
        out, lost = self._fresh_state(p), {}
        for k in list(out):
            if k in saved:
                value = np.asarray(saved[k])
                with np.errstate(over="ignore"):     # reported once per load, by name
                    half = value.astype(np.float16)
                lost[k] = scalar_consts.range_losses(value, half)
                out[k] = tensor(half)
        return {**out, _LOST: lost}


# `_loaded_state`'s entry for what the fp16 cast lost ({key: (overflowed, flushed)}): popped,
# then reported once for the whole load
_LOST = "_range_losses"


def _check_loadable(opt: Optimizer, groups: list, state: dict, params: list) -> None:
    sizes = [len(g["params"]) for g in opt.param_groups]
    saved = [len(g["params"]) for g in groups]
    if sizes != saved:
        raise ValueError(f"loaded state dict has groups of {saved} parameters, this optimizer "
                         f"has groups of {sizes}: it belongs to another model or optimizer")
    for i, s in state.items():
        if not 0 <= int(i) < len(params):
            raise ValueError(f"loaded state dict has state for parameter {i}, this optimizer "
                             f"has {len(params)} parameters")
        shape = params[int(i)].shape
        for k, v in s.items():
            got = np.shape(host_array(v))
            if k != "step" and got != shape:
                raise ValueError(f"loaded state dict: state[{i}][{k!r}] has shape {got}, the "
                                 f"parameter has shape {shape}")


def _check_group(group: dict) -> None:
    """torch's argument checks (ValueError, torch's wording), plus what fp16 programs need."""
    def number(name, low=0.0, high=None, closed=True):
        v = group.get(name)
        if v is None:
            return
        ok = isinstance(v, (int, float)) and math.isfinite(v) and (
            v >= low if closed else v > low) and (high is None or v < high)
        if not ok:
            raise ValueError(f"Invalid {name.replace('_', ' ')} value: {v!r} (needs a finite "
                             f"number >= {low}{'' if high is None else f' and < {high}'})")
    for name in ("lr", "eps", "weight_decay", "momentum", "dampening"):
        number(name)
    for i, b in enumerate(group.get("betas", ())):
        if not (isinstance(b, (int, float)) and 0.0 <= b < 1.0):
            raise ValueError(f"Invalid beta parameter at index {i}: {b!r} (needs 0 <= beta < 1)")
    for p in group["params"]:
        if not isinstance(p, Tensor):
            raise TypeError(f"optimizer params must be Tensors, got {type(p).__name__}")
        if not p.is_leaf:
            raise ValueError("can't optimize a non-leaf Tensor: pass the parameters (leaves), "
                             "e.g. model.parameters(), not values computed from them")
        if not p.dtype.is_float:
            raise ValueError(f"can't optimize a {p.dtype} tensor: parameters are floating")


def _all_finite(grads: list[Tensor]) -> Tensor:
    peak = None
    for g in grads:
        m = g.abs().amax()
        peak = m if peak is None else peak.maximum(m)
    return peak < float("inf")         # NaN compares false, so NaN counts as not finite


class _StagedUpdate:
    """One recorded (lazy) update: new values for parameters and state, and what it was recorded
    from, so a step planned early is adopted only if nothing it read has changed since."""

    def __init__(self, opt: Optimizer, step: int, grad_scale, check_finite: bool, live: list,
                 early: bool = True):
        self.step, self.grad_scale, self.check_finite = step, grad_scale, check_finite
        # what `matches` compares, for an update staged before step() (one recorded by
        # step() itself is committed at once)
        self.inputs = _inputs(opt, live) if early else None
        self.hypers = _hypers(opt, step) if early else None
        self.writes: list[tuple[Tensor, Tensor]] = []
        self.ok: Tensor | None = None
        self.targets: list = []

    def current(self, opt: Optimizer) -> bool:
        """Were it stepped now (step number one on), would this update still apply?"""
        return self.matches(opt, opt._steps + 1, self.grad_scale, self.check_finite)

    def matches(self, opt: Optimizer, step: int, grad_scale, check_finite: bool) -> bool:
        if (step, grad_scale, check_finite) != (self.step, self.grad_scale, self.check_finite):
            return False
        live = [(g, p) for g in opt.param_groups for p in g["params"] if p.grad is not None]
        now = _inputs(opt, live)
        return (len(now) == len(self.inputs) and all(a is b for a, b in zip(now, self.inputs))
                and _hypers(opt, step) == self.hypers)

    def commit(self) -> None:
        for old, new in self.writes:          # (the new values are this update's own)
            old._hold_computed(new)


def _inputs(opt: Optimizer, live: list) -> tuple:
    """Everything an update reads, by identity: parameters, their gradients, their state."""
    out = []
    for _, p in live:
        out += [p, p.ref[0], p.grad.ref[0]]
        out += [t.ref[0] for t in opt.state.get(p, {}).values()]
    return tuple(out)


def _hypers(opt: Optimizer, step: int) -> list:
    return [opt.hyper(g, step) for g in opt.param_groups]


def _value(grad_scale):
    """grad_scale as a number (staged updates compare numbers)."""
    return None if grad_scale is None else float(grad_scale.value().reshape(-1)[0])


def _expected_step_args(opt: Optimizer, records: list) -> tuple:
    """(grad_scale, check_finite) the coming step will most likely get: a GradScaler's, when the
    loss went through one (its scaled loss names it), else a plain step's."""
    for rec in records:
        scaler = carried(rec.root, "scaler")
        if scaler is not None:
            return scaler.step_args(opt)
    return None, False


def _warn_if_lost(name: str, value: float, t: Tensor) -> None:
    """A per-step scalar travels as fp16: say so when that loses it (0, or off by > 1%)."""
    stored = float(t.value().reshape(-1)[0])
    if value != 0 and abs(stored - value) > 0.01 * abs(value):
        warnings.warn(f"optimizer: {name}={value:g} is {stored:g} as an fp16 program input (fp16's "
                      f"smallest step is 6e-8): the update is lost or distorted. Use a larger "
                      f"learning rate, or scale the loss and the learning rate together.",
                      RuntimeWarning, stacklevel=5)


def warn_skipped(scale: float) -> None:
    warnings.warn(f"gradients were not finite: the step was skipped and the loss scale lowered to "
                  f"{scale:g}", RuntimeWarning, stacklevel=3)


__all__ = ["Optimizer", "assign"]
