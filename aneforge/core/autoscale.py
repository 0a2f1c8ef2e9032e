"""Automatic gradient scaling: fp16 backward passes that keep torch's small gradients.

On the ANE every value is fp16 and the matmul output port of M1-class engines flushes results
below 2**-14 to zero (docs/numerics.md), so the many small terms of a backward pass (a
LayerNorm bias's gradient is a sum of thousands of values around 1e-6) vanish, and ordinary
torch training code silently gets wrong gradients. `backward()` therefore seeds the walk with
the loss scale S instead of 1 (a program input, a power of two: no recompile when it changes),
so every value of the backward pass is S times larger, and gives each leaf the gradient
`raw * (1/S)`: `.grad` reads at torch's scale (an inf or NaN gradient stays one, as torch's).

A pass that overflows (a scaled value past fp16's 65504, or the matmul port's 2**15) is run
again, in the same program call, at S / 256, and if that overflows too at S = 1, then at 2**-6
and 2**-12 (`RESCUE`): the program is the same, only its scale input changes (`rescue`;
af.compile's replays do the same). So a step never reads an overflow the scale caused, and a
pass whose values pass the port only below scale 1 (a sum-reduced loss over many samples)
still gets its gradients; a gradient that is itself past fp16's 65504 at torch's scale is inf
in `.grad` (fp16 cannot hold it) and is named in a warning saying how to scale the loss.
After each pass S follows its gradients: the largest power of two that keeps the largest
gradient under HEADROOM (8x below the port's 2**15), up to a ceiling. A rescue (an
intermediate value overflowed where the gradients did not) halves the ceiling; every
`growth_interval` clean passes double it again, up to `max_scale`.

An overflow need not reach a gradient: the engine stores inf - inf and 0 * inf as +0, so a
scaled intermediate past 65504 (BatchNorm's variance term over a small-variance batch, ~1e3 at
torch's scale) that then meets a sum (a conv's input gradient adds +inf and -inf) comes back
as zeros, finite and wrong. So each pass also watches the cotangents entering the ops that sum
(`SUMMING`): their largest |value| is a peak too, and an inf there is an overflow to rescue.

Each pass also returns its peaks (largest and smallest max|g| at torch's scale): the scaler reads them after
the program ran, to choose the scale, and to warn (once per parameter) when a gradient is too
small for fp16 even scaled. Explicit `af.amp.GradScaler` losses are not scaled again.
"""
from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from ..context import CTX
from .trace import KeptStretches, kept_stretch
from ..errors import ANEHazardWarning
from ..hardware import hazards

FP16_NORMAL = 2.0 ** -14       # smallest normal fp16: matmul outputs below it flush on M1
FP16_STEP = 2.0 ** -24         # smallest fp16 subnormal: nothing smaller exists
HEADROOM = 2.0 ** 12           # largest scaled gradient growth may aim for (port: 2**15)
RESCUE_STEP = 8                # a rescue first retries at S / 2**8, then at 1, then lower
LOWEST = 2.0 ** -12            # the lowest scale: gradients of 1e-3 still reach fp16's normals
QUIET_PASSES = 64              # most passes between two underflow scans that named nobody
RESCUE = (lambda s: np.maximum(s / 2.0 ** RESCUE_STEP, 1.0), lambda s: np.ones_like(s),
          lambda s: np.full_like(s, 2.0 ** -6), lambda s: np.full_like(s, LOWEST))
FP16_MAX = 65504.0
# ops whose sums add a cotangent's values together: +inf and -inf meeting there store +0, so a
# scaled overflow entering them is hidden; their incoming cotangents are watched
SUMMING = frozenset({"conv", "linear", "matmul", "scaled_dot_product_attention", "reduce_sum",
                     "reduce_mean"})


class AutoScaler:
    """The loss scale of automatic gradient scaling, and what the passes it scaled showed.

    >>> import aneforge as af
    >>> s = af.amp.auto_scaler()
    >>> s.scale, s.enabled
    (1024.0, True)
    """

    def __init__(self, init_scale: float = 1024.0, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 200,
                 max_scale: float = 32768.0, enabled: bool = True):
        self.scale, self.growth_factor, self.backoff_factor = float(init_scale), growth_factor, backoff_factor
        self.growth_interval, self.max_scale, self.enabled = growth_interval, max_scale, enabled
        self.clean_passes = 0
        self.ceiling = max_scale          # lowered after a rescue, raised after clean passes
        self.init_scale = float(init_scale)
        self._key, self._refs = None, ()  # the parameter set whose state is active (select)
        self._groups: dict = {}           # the other sets' (scale, ceiling, clean passes)
        self.skipped_steps = 0           # passes not finite even unscaled (their steps skipped)
        self.rescued_passes = 0          # passes that overflowed scaled and ran again at S = 1
        self._rescued = False            # the pass observed next was rescued
        self.pending: list = []          # Scaled passes not observed yet
        self._warned: dict = {}          # id(handle) -> weakref: warned about (once each)
        self._hidden = False             # the pass observed next overflowed inside at every scale
        self._quiet: dict = {}           # parameter set -> (passes left unscanned, interval)

    def select(self, leaves: tuple) -> float:
        """Make the adaptive state of the parameter set `leaves` (weak references to the
        parameters: a model) the active one, and return its scale: two models trained in one
        process (a notebook) do not inherit each other's scale; a set whose parameters died is
        forgotten (a new one reusing their ids is never mistaken for it)."""
        if leaves is self._refs:          # the same pass again (a replay): nothing to switch
            return self.scale
        key = tuple(id(r()) for r in leaves)
        if key != self._key or any(r() is None for r in self._refs):
            if self._key is not None and all(r() is not None for r in self._refs):
                self._groups[self._key] = (self._refs, (self.scale, self.ceiling, self.clean_passes))
            self._groups = {k: v for k, v in self._groups.items()
                            if all(r() is not None for r in v[0])}
            while len(self._groups) > 64:
                self._groups.pop(next(iter(self._groups)))
            _, state = self._groups.pop(key, (None, (self.init_scale, self.max_scale, 0)))
            self.scale, self.ceiling, self.clean_passes = state
            self._key, self._refs = key, leaves
        return self.scale

    def state_dict(self) -> dict:
        return {"scale": self.scale, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": self.clean_passes, "ceiling": self.ceiling,
                "skipped_steps": self.skipped_steps,
                "rescued_passes": self.rescued_passes}

    def load_state_dict(self, state: dict) -> None:
        self.scale = float(state["scale"])
        self.growth_factor = float(state["growth_factor"])
        self.backoff_factor = float(state["backoff_factor"])
        self.growth_interval = int(state["growth_interval"])
        self.clean_passes = int(state["_growth_tracker"])
        self.ceiling = float(state.get("ceiling", self.max_scale))
        self.skipped_steps = int(state.get("skipped_steps", 0))
        self.rescued_passes = int(state.get("rescued_passes", 0))

    # ---- after a scaled pass ran ----------------------------------------------------------
    def observe(self, handles: tuple, peaks) -> None:
        """A scaled pass's peaks (its largest and smallest max|g| as scaled, and the scale it
        ran at) came back: choose the next scale, and warn where a gradient underflowed or is
        past fp16's range. (Runs after every replayed step: kept to a few numpy calls.)"""
        rescued, self._rescued = self._rescued, False
        self.rescued_passes += rescued
        top, low, ran_at, inner = peaks.ravel().tolist()
        self._hidden = not math.isfinite(inner)
        inner = 0.0 if self._hidden else inner   # the values' own inf: no scale keeps it finite
        if not math.isfinite(top + low):         # an inf or a NaN, even at the lowest scale
            self.scale = max(self.scale * self.backoff_factor, 1.0)
            self.clean_passes = 0
            self.skipped_steps += 1
            hazards.warn_at_user(f"automatic gradient scaling: a gradient is inf or NaN at every "
                                 f"loss scale down to {LOWEST:g}: a NaN or an infinity in the values "
                                 f"themselves (an inf weight or input, or the function's own, as "
                                 f"sqrt's at 0, where torch's is inf too). The loss scale "
                                 f"is now {self.scale:g} (af.amp.auto_scaler() has the state)",
                                 RuntimeWarning)
            return
        top, low = top / ran_at, low / ran_at    # torch's scale
        if top > FP16_MAX:
            self._warn_overflow(handles)
        if low < FP16_STEP / 0.05:
            self._warn_underflow(handles)
        self.clean_passes += 1
        if rescued:                    # an intermediate overflowed: stay below that scale a while
            self.ceiling = max(min(self.scale * self.backoff_factor, self._fit(top),
                                   self._fit(inner / ran_at * HEADROOM / FP16_MAX)), 1.0)
            self.clean_passes = 0
        elif self.clean_passes >= self.growth_interval:
            self.ceiling = min(self.ceiling * self.growth_factor, self.max_scale)
            self.clean_passes = 0
        self.scale = min(self._fit(top), self.ceiling)

    def _fit(self, top: float) -> float:
        """The largest power of two that keeps a pass whose largest gradient is `top` under
        HEADROOM."""
        if not top > 0:
            return self.max_scale
        return min(max(2.0 ** math.floor(math.log2(HEADROOM / top)), LOWEST), self.max_scale)

    def _warn_overflow(self, handles: tuple) -> None:
        """A gradient is past fp16's 65504 at torch's scale (the pass itself ran finite, at a
        lower scale): name each parameter whose `.grad` holds an inf, once."""
        for ref in handles:
            p = _holder(ref())
            g = None if p is None else p.grad
            if g is None or g.ref[0].data is None or (id(p) in self._warned and self._warned[id(p)]() is p):
                continue
            if (np.abs(np.asarray(g.ref[0].data[g.ref[1]], np.float32)) < FP16_MAX).all():
                continue
            self._warned[id(p)] = weakref.ref(p)
            hazards.warn_at_user(
                f"automatic gradient scaling: the gradient of {_name(p)} is past fp16's range "
                f"(+-65504) at torch's scale, so .grad holds +-65504 there (saturated: inf would "
                f"write inf into the weight); torch's float32 holds the larger value. "
                f"Scale the loss down: reduction='mean' instead of 'sum', or backward() on "
                f"loss / 1024 with the learning rate times 1024", ANEHazardWarning)

    def _warn_underflow(self, handles: tuple) -> None:
        """Some gradient of the pass peaks below what fp16 holds to 5% (or is all zeros while
        others are not): find which from the leaves' gradients on the host, and warn once
        each. (Only when the pass's smallest peak is that small; but a loop that memorizes its
        batch gets there every step, and the scan reads every gradient on the host (~2 ms over
        500k parameters): a scan that names nobody new waits twice as many passes before the
        next one, up to QUIET_PASSES, so a parameter that starts underflowing later is still
        named within that many passes.)"""
        key = tuple(id(ref()) for ref in handles)
        skip, every = self._quiet.get(key, (0, 1))
        if skip:
            self._quiet[key] = (skip - 1, every)
            return
        if len(self._quiet) > 64:
            self._quiet.clear()
        named = self._scan_underflow(handles)
        self._quiet[key] = (0, 1) if named else (every, min(2 * every, QUIET_PASSES))

    def _scan_underflow(self, handles: tuple) -> bool:
        """Read the gradients of `handles` on the host; warn for each parameter that underflowed
        and was not named yet. Whether any was named now."""
        peaks, named = [], False
        for ref in handles:
            p = _holder(ref())
            g = None if p is None else p.grad
            data = None if g is None else g.ref[0].data
            peaks.append((p, -1.0 if data is None else float(np.abs(data[g.ref[1]]).max())))
        others = any(v > 0 for _, v in peaks)
        for p, peak in peaks:
            if p is None or peak < 0 or not (0 < peak < FP16_STEP / 0.05 or (peak == 0 and others)):
                continue
            if id(p) in self._warned and self._warned[id(p)]() is p:
                continue
            self._warned[id(p)], named = weakref.ref(p), True
            what = "is all zeros" if peak == 0 else f"peaks at {peak:.2g}"
            hazards.warn_at_user(f"automatic gradient scaling: the gradient of {_name(p)} {what} "
                                 f"while others are not: {self._why_small()}", ANEHazardWarning)
        return named

    def _why_small(self) -> str:
        """Why a gradient came back too small, and what to do: an overflow the engine hid, or
        an underflow (the scale cannot help the first: raising it makes it worse)."""
        if self._hidden:
            return ("a value of the backward pass overflowed fp16 (past 65504) even at torch's "
                    "scale, and the engine stores inf - inf and 0 * inf as 0, so the gradients "
                    "behind it were lost, not underflowed; torch's float32 holds them. Do not "
                    "raise the scale: scale the loss down (reduction='mean' instead of 'sum'), "
                    "or find the large value (a normalization over a near-constant input, a "
                    "division by a tiny value).")
        return ("where torch's is nonzero, it underflowed fp16 (smallest normal 6.1e-5; M1's "
                "matmul flushes below it). Raise the scale (af.amp.set_auto_scale(True, "
                "init_scale=...)), scale that parameter's use up, or keep it on the host in fp32.")


class Scaled:
    """One scaled backward pass: its per-leaf peaks (a lazy tensor), weak references to the
    leaves it reached (for names in warnings), its scale input and its gradients."""
    __slots__ = ("scaler", "peaks", "handles", "scale", "views", "thread")

    def __init__(self, scaler: AutoScaler, peaks, handles: tuple, scale, views: list):
        self.scaler, self.peaks, self.handles = scaler, peaks, handles
        self.scale, self.views = scale, views
        self.thread = threading.get_ident()     # the thread whose trace it is on

    def refs(self) -> list:
        return [self.peaks.ref]


def default() -> AutoScaler:
    if CTX.auto_scale is None:
        CTX.auto_scale = AutoScaler()
    return CTX.auto_scale


def scaler_for(leaves: list) -> AutoScaler | None:
    """The scaler of a backward pass reaching `leaves` (nodes): a model's own setting when every
    leaf is one of its parameters' current values, else the default; None when off."""
    chosen = default()
    if CTX.model_scales:
        nodes = {id(n) for n in leaves}
        for params, setting in CTX.model_scales:
            mine = {id(p.ref[0]) for p in params}
            if nodes and nodes <= mine:
                chosen = setting
                break
    return chosen if chosen is not None and chosen.enabled else None


def scale(leaves: list, grads: dict, seed_scale, watched: list = ()):
    """Turn the raw (scaled) gradients of `leaves` into torch-scale ones, in place in `grads`
    (key -> (ref, tensor)); return the pass's peaks: [largest max|g|, smallest max|g|] over its
    leaves as scaled (inf or NaN when the pass overflowed), the scale it ran at, and the largest
    |value| of the `watched` cotangents (inf when one overflowed where a sum may hide it)."""
    raws = [grads[k][1] for k in leaves]
    refs = kept_stretch(_SCALINGS, ("autoscale.scale", len(raws)),
                        [g.ref for g in [*raws, *watched, seed_scale]],
                        lambda: _scaled(raws, seed_scale, watched))
    at = seed_scale._at
    for k, ref in zip(leaves, refs):
        grads[k] = (grads[k][0], at(*ref))
    return at(*refs[-1])


_SCALINGS = KeptStretches()   # `scale`'s recordings, by the types it reads (trace.kept_stretch)


def _scaled(raws: list, seed_scale, watched: list) -> list:
    """`scale`'s recording: the refs of each raw gradient at torch's scale, then the peaks."""
    inv = 1.0 / seed_scale
    # an empty gradient (of an empty leaf) has no max: its peak is 0
    tops = [g.abs().amax().to(inv.dtype) if g.numel() else inv - inv for g in raws]
    top, low = tops[0], tops[0]
    for t in tops[1:]:
        top, low = top.maximum(t), low.minimum(t)
    # A pass that ran below S = 1 did so to stay finite: a gradient past fp16 at torch's scale
    # reads +-65504 (saturated; warned), not inf, which would write inf into a weight. At
    # S >= 1 the bound is inf: a gradient inf at torch's scale (sqrt's at 0) stays inf, as in
    # torch; finite values pass both bounds unchanged.
    bound = FP16_MAX / (seed_scale < 1.0).to(inv.dtype)          # 65504 / 0 = inf
    out = []
    for g in raws:
        b = bound.to(g.dtype)
        out.append((g * inv.to(g.dtype)).minimum(b).maximum(-b).ref)
    inner = inv - inv
    for c in watched:            # max, not a sum: the engine turns inf - inf into 0
        if c.numel():
            inner = inner.maximum(c.abs().amax().to(inv.dtype))
    return out + [_stack([top.reshape(1), low.reshape(1), seed_scale.reshape(1).to(top.dtype),
                          inner.reshape(1)]).ref]


def _stack(parts: list):
    first = parts[0]
    if len(parts) == 1:
        return first
    return first._record("concat", {"values": tuple(parts)}, {"axis": 0})


def settle() -> None:
    """After a realization: observe every scaled pass whose peaks it computed (and, inside
    af.compile's capture, have each replay observe it again at this point)."""
    for scaler in _scalers():
        if not scaler.pending:
            continue
        ready = [p for p in scaler.pending if p.peaks.ref[0].data is not None]
        if not ready:
            continue
        scaler.pending = [p for p in scaler.pending if p.peaks.ref[0].data is None]
        capture = CTX.thread.capture
        for p in ready:
            scaler.observe(p.handles, np.asarray(p.peaks.value()))
            if capture is not None:
                capture.effect(_observer(scaler, p.handles), p.peaks)


def pending_refs(refs: list) -> list:
    """What a realization of `refs` computes too while scaled passes are pending: their peaks
    (the scale's next value, and a rescue, need them) and their gradients (they come with the
    pass). When `refs` are only gradients of some passes (a `.grad` read), just those passes;
    otherwise (a value that may be computed from any of them) all of them. Only this thread's:
    another thread's trace is its own (it may be realizing those values right now)."""
    me = threading.get_ident()
    passes = [p for scaler in _scalers() for p in scaler.pending
              if p.peaks.ref[0].data is None and p.thread == me]
    if not passes:
        return []
    wanted = {(id(n), i) for n, i in refs if n.data is None}
    mine = [p for p in passes if wanted & {(id(n), i) for n, i in p.views}]
    views = {(id(n), i) for p in mine for n, i in p.views}
    chosen = mine if wanted and wanted <= views else passes
    return [r for p in chosen for r in (p.peaks.ref, *p.views)]


def rescue_rules(leaves: list, outputs: list) -> list:
    """For a program about to run: (scale input index, peaks output index, scaler) of each
    scaled pass it computes, so that `rescue` can run an overflowed pass again, lower."""
    rules = []
    for scaler in _scalers():
        for p in scaler.pending:
            k_in, k_out = _position(leaves, p.scale.ref), _position(outputs, p.peaks.ref)
            if k_in is not None and k_out is not None:
                rules.append((k_in, k_out, scaler))
    return rules


def _position(refs: list, ref: tuple) -> int | None:
    """Where (node, index) `ref` is in `refs`, else None: a scan in C (nodes compare by
    identity), cheaper on every step than a dict of all a program's inputs and outputs."""
    try:
        return refs.index(ref)
    except ValueError:
        return None


def rescue(run, inputs: list, rules: list) -> list:
    """`run(inputs)`, and if a scaled pass in it overflowed, again with that pass's scale input
    lowered (the same program, same inputs otherwise); the results of the run kept. The first
    retry keeps a scale of S / 2**RESCUE_STEP (small gradients stay out of fp16's subnormals,
    where S = 1 would lose them); only if that overflows too does S = 1 run. Hazards a redone
    run hit (the overflow itself) are dropped; the kept run's are reported. Below S = 1 the
    ladder goes on (`RESCUE`) for passes whose values pass fp16 only scaled down. (Runs around
    every replayed step: the clean run is the fast path.)"""
    results, held = _held_run(run, inputs)
    if not held and all(_finite(results[k_out]) for _, k_out, _ in rules):
        return results                        # the clean run: nothing to redo or report
    bad = _overflowed(results, rules)
    if bad:
        results, held = _lower(run, inputs, rules, bad, results, held)
    elif rules and any(h[2] for h in held):
        results, held = _unhide(run, inputs, rules, results, held)
    for ctx, why, saturated in held:
        hazards.report(ctx, why, saturated)
    return results


def _unhide(run, first: list, rules: list, results: list, held: list) -> tuple:
    """The matmul port saturated in a run whose gradients read finite: a saturated gradient
    value may have been hidden (a one-hot matmul reads 0 * inf as 0: an embedding's gradient
    came back all zeros), or the forward saturated. One run a rung lower tells: if the
    saturation is gone the scale caused it, and that run is kept; else the first one is."""
    for attempt in RESCUE:
        inputs = list(first)
        for k_in, _, _ in rules:
            inputs[k_in] = attempt(first[k_in]).astype(first[k_in].dtype)
        if all(inputs[k].ravel()[0] >= first[k].ravel()[0] for k, _, _ in rules):
            continue                          # not lower than the first run
        again, held_again = _held_run(run, inputs)
        if _overflowed(again, rules) or any(h[2] for h in held_again):
            return results, held              # the saturation is not the scale's doing
        for _, _, scaler in rules:
            scaler._rescued = True
        return again, held_again
    return results, held


def _held_run(run, inputs: list) -> tuple:
    """`run(inputs)` with the hazards it hits held back: (results, hazards)."""
    thread = CTX.thread
    thread.held_hazards = held = []
    try:
        return run(inputs), held
    finally:
        thread.held_hazards = None


def _finite(peaks) -> bool:
    """Whether a pass's peaks (largest and smallest max|g|, its scale, the largest watched
    cotangent) are finite."""
    top, low, _, inner = peaks.ravel().tolist()
    return math.isfinite(top + low + inner)


def _overflowed(results: list, rules: list) -> list:
    """The (scale input, scaler) of each pass whose peaks came back inf or NaN."""
    return [(k_in, scaler) for k_in, k_out, scaler in rules if not _finite(results[k_out])]


def _lower(run, first: list, rules: list, bad: list, results: list, held: list) -> tuple:
    """Run again down `RESCUE`'s rungs (each below the last) until no pass overflows: (results,
    hazards) of that run. If every rung overflows, the inf is the values' own (an inf input, or
    the function's, as asin's gradient at 1) and the scale cannot help: the run at S = 1 is
    kept, torch's scale, where the finite gradients keep the most bits (the rungs below it
    push small ones into fp16's subnormals); the first run's if S = 1 did not run."""
    inputs, kept = first, (results, held)
    for attempt in RESCUE:
        lowered = [(k_in, scaler, attempt(first[k_in]).astype(first[k_in].dtype))
                   for k_in, scaler in bad]
        if all(new.ravel()[0] >= inputs[k].ravel()[0] for k, _, new in lowered):
            continue                          # this rung is not lower than the last run
        inputs = list(inputs)
        for k_in, scaler, new in lowered:
            inputs[k_in] = new
            scaler._rescued = True
        results, held = _held_run(run, inputs)
        bad = _overflowed(results, rules)
        if not bad:
            return results, held
        if all(new.ravel()[0] >= 1.0 for _, _, new in lowered):
            kept = (results, held)
    return kept


def _scalers() -> list:
    return [s for s in [CTX.auto_scale, *(s for _, s in CTX.model_scales)] if s is not None]


def _observer(scaler: AutoScaler, handles: tuple):
    return lambda peaks: scaler.observe(handles, peaks)


def _holder(node):
    """The handle (a parameter) whose value leaf `node` is or was."""
    if node is None:
        return None
    if node.owner is not None and node.owner() is not None:
        return node.owner()
    for module in list(CTX.modules):
        for _, q in module.named_parameters():
            if q.ref[0] is node:
                return q
    return None


def _name(p) -> str:
    """`layer.weight`-style name of parameter handle p: the longest (outermost module's)."""
    names = [(name, module) for module in list(CTX.modules)
             for name, q in module.named_parameters() if q is p]
    if not names:
        return f"a parameter of shape {tuple(p.shape)}"
    name, module = max(names, key=lambda nm: len(nm[0]))
    return f"parameter {name!r} of {type(module).__name__}"
