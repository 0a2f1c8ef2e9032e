"""Optimizer base: torch's param_groups / state / zero_grad / step, with the update recorded into
the same trace as forward and backward, so a training step realizes as ONE program.

Everything that changes between steps (learning rate, bias corrections, the loss scale) is a
program input, never a literal, so a loop of N steps compiles exactly once.

Precision with fp16-only program I/O: each parameter travels as a compensated pair of fp16
values (hi, lo) — the parameter itself and a small remainder kept in `state["lo"]`. The update is
added to lo first and then folded into hi with Fast2Sum (all fp16 ops, ANE_FACTS N42), so a
step smaller than half an fp16 ulp of the weight is not lost. `master_weights="fp16"` turns this
off (plain fp16 weights). docs/training.md has the measurement behind the default.
"""
from __future__ import annotations

import warnings
from typing import Iterable

import numpy as np

from .. import compiler
from ..autograd import no_grad
from ..creation import tensor
from ..errors import AneforgeError
from ..nn.parameter import assign
from ..tensor import Tensor
from ..trace import leaf

MASTER_WEIGHTS = ("compensated", "fp16")


class Optimizer:
    def __init__(self, params: Iterable, defaults: dict, master_weights: str = "compensated"):
        if master_weights not in MASTER_WEIGHTS:
            raise ValueError(f"master_weights must be one of {MASTER_WEIGHTS}, got {master_weights!r}")
        self.defaults, self.master_weights = defaults, master_weights
        params = list(params)
        if not params:
            raise AneforgeError("optimizer got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        self.param_groups = [{**defaults, **g, "params": list(g["params"])} for g in groups]
        self.state: dict = {}
        self._steps = 0
        self.last_step_skipped = False

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self._params():
            p.grad = None

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
    def step(self, closure=None, grad_scale: Tensor | None = None, check_finite: bool = False):
        """Record and run one update of every parameter that has a gradient (one program).

        `grad_scale` multiplies each gradient first (an unscale from loss scaling); with
        `check_finite` the update is skipped, in the program, when any gradient is inf or NaN.
        """
        loss = closure() if closure is not None else None
        self._steps += 1
        live = [(g, p) for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not live:
            return loss
        grads = [p.grad * grad_scale if grad_scale is not None else p.grad for _, p in live]
        ok = _all_finite(grads) if check_finite else None
        new_values: list[tuple[Tensor, Tensor]] = []
        hypers = {id(group): {k: tensor(float(v)) for k, v in self.hyper(group, self._steps).items()}
                  for group in self.param_groups}
        for (group, p), g in zip(live, grads):
            h = hypers[id(group)]
            state = self.state.setdefault(p, self._fresh_state(p))
            delta, new_state = self.update(p, g, state, h, group)
            new_p, lo = self._apply(p, delta, state)
            if lo is not None:
                new_state["lo"] = lo
            for name, (old, new) in {"param": (p, new_p), **{k: (state[k], v) for k, v in
                                                           new_state.items()}}.items():
                new_values.append((old, new if ok is None else _select(ok, new, old)))
        targets = [new for _, new in new_values] + ([ok] if ok is not None else [])
        compiler.realize([t.ref for t in targets], include_wanted=True)
        for old, new in new_values:
            _adopt(old, new)
        self.last_step_skipped = ok is not None and not bool(ok.item())
        return loss

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
        index = {id(p): i for i, p in enumerate(self._params())}
        return {"state": {index[id(p)]: {k: v.detach() for k, v in s.items()}
                          for p, s in self.state.items()},
                "param_groups": [{k: v for k, v in g.items() if k != "params"} |
                                 {"params": [index[id(p)] for p in g["params"]]}
                                 for g in self.param_groups]}


def _all_finite(grads: list[Tensor]) -> Tensor:
    peak = None
    for g in grads:
        m = g.abs().amax()
        peak = m if peak is None else peak.maximum(m)
    return peak < float("inf")         # NaN compares false, so NaN counts as not finite


def _select(ok: Tensor, new: Tensor, old: Tensor) -> Tensor:
    from ..functions import where
    return where(ok, new, old)


def _adopt(old: Tensor, new: Tensor) -> None:
    """Point handle `old` (a parameter or state leaf) at the realized value of `new`."""
    grad = old._node.grad
    old._node = leaf(new.numpy(), new.type, old._node.requires_grad)
    old._idx = 0
    old._node.grad = grad


def warn_skipped(scale: float) -> None:
    warnings.warn(f"gradients were not finite: the step was skipped and the loss scale lowered to "
                  f"{scale:g}", RuntimeWarning, stacklevel=3)


__all__ = ["Optimizer", "assign"]
