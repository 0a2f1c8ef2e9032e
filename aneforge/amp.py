"""Dynamic loss scaling for fp16 training (torch.amp.GradScaler's API).

fp16 gradients underflow without a loss scale; too large a scale overflows them to inf. The
scaler multiplies the loss by `scale`, unscales the gradients inside the step program, skips
the update there when any gradient is not finite (weights and state stay untouched), and then
halves the scale; after `growth_interval` clean steps it doubles it. The scale is a program
input: changing it never recompiles. Scales of about 128-1024 are reported working on hardware (ANEForge `docs/training.md`).
"""
from __future__ import annotations

from .context import CTX
from .creation import tensor
from .optim.optimizer import warn_skipped
from .tensor import Tensor


class ScaledLoss(Tensor):
    """`GradScaler.scale(loss)`: loss * scale, naming the unscaled loss as a companion (the step
    program returns it too) and the scaler (whose settings an early-planned step uses)."""

    __slots__ = ("scaler", "companions")

    def __init__(self, scaled: Tensor, scaler: "GradScaler", loss: Tensor):
        super().__init__(*scaled.ref)
        self.scaler, self.companions = scaler, (loss,)


class GradScaler:
    """
    >>> import aneforge as af
    >>> w = af.nn.Parameter(af.ones(2))
    >>> opt, scaler = af.optim.SGD([w], lr=0.1), af.amp.GradScaler(init_scale=1024.0)
    >>> scaler.scale((w * w).sum()).backward()
    >>> scaler.step(opt); scaler.update()
    >>> [round(v, 2) for v in w.tolist()]
    [0.8, 0.8]
    """

    def __init__(self, init_scale: float = 1024.0, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True,
                 max_scale: float = 32768.0):
        self._scale, self.growth_factor, self.backoff_factor = init_scale, growth_factor, backoff_factor
        self.growth_interval, self.enabled, self.max_scale = growth_interval, enabled, max_scale
        self._clean_steps = 0
        self._found_inf = False
        self._unscaled: set[int] = set()

    def get_scale(self) -> float:
        return self._scale if self.enabled else 1.0

    def state_dict(self) -> dict:
        """torch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker.

        >>> import aneforge as af
        >>> af.amp.GradScaler(init_scale=256.0).state_dict()["scale"]
        256.0
        """
        if not self.enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self.growth_factor,
                "backoff_factor": self.backoff_factor, "growth_interval": self.growth_interval,
                "_growth_tracker": self._clean_steps}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore `state_dict()` (this scaler's, or torch's GradScaler's)."""
        if not state_dict:
            return
        self._scale = float(state_dict["scale"])
        self.growth_factor = float(state_dict["growth_factor"])
        self.backoff_factor = float(state_dict["backoff_factor"])
        self.growth_interval = int(state_dict["growth_interval"])
        self._clean_steps = int(state_dict["_growth_tracker"])

    def scale(self, loss: Tensor) -> Tensor:
        """loss * scale (the scale is a program input). The unscaled loss is computed by the
        same step program as the update, so reading it before or after the step costs nothing."""
        if not self.enabled:
            return loss
        scaled = loss * self._scalar(lambda: self._scale)
        return ScaledLoss(scaled, self, loss)

    def step_args(self, optimizer) -> tuple:
        """(grad_scale, check_finite) that `step(optimizer)` passes to optimizer.step(): the
        unscale factor is a host scalar tensor (None once `unscale_` has run)."""
        if not self.enabled:
            return None, False
        if id(optimizer) in self._unscaled:
            return None, True
        return self._scalar(lambda: 1.0 / self._scale), True

    def unscale_(self, optimizer) -> None:
        """Divide the gradients by the scale now (lazily), e.g. before clip_grad_norm_."""
        if not self.enabled or id(optimizer) in self._unscaled:
            return
        inv = self._scalar(lambda: 1.0 / self._scale)
        for g in optimizer.param_groups:
            for p in g["params"]:
                if p.grad is not None:
                    p.grad = p.grad * inv
        self._host(self._unscaled.add, id(optimizer))

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step() with the gradients unscaled and non-finite steps skipped."""
        if not self.enabled:
            return optimizer.step(*args, **kwargs)
        scale, check_finite = self.step_args(optimizer)
        out = optimizer.step(*args, grad_scale=scale, check_finite=check_finite, **kwargs)
        self._host(self._after_step, optimizer)
        return out

    def _after_step(self, optimizer) -> None:
        self._found_inf = optimizer.last_step_skipped
        self._unscaled.discard(id(optimizer))

    def update(self) -> None:
        """Lower the scale after a skipped step; raise it after `growth_interval` clean ones."""
        if self.enabled:
            self._host(self._update)

    def _update(self) -> None:
        if self._found_inf:
            self._scale *= self.backoff_factor
            self._clean_steps = 0
            warn_skipped(self._scale)
        else:
            self._clean_steps += 1
            if self._clean_steps >= self.growth_interval:
                self._scale = min(self._scale * self.growth_factor, self.max_scale)
                self._clean_steps = 0
        self._found_inf = False

    # ---- af.compile: what a replay recomputes and re-applies -----------------------------
    def _scalar(self, value) -> Tensor:
        """A host scalar input whose value af.compile recomputes on each replay."""
        t = tensor(value())
        capture = CTX.thread.capture
        if capture is not None:
            capture.provide(t, value)
        return t

    def _host(self, fn, *args) -> None:
        """Run host bookkeeping now; af.compile re-runs it on each replay."""
        fn(*args)
        capture = CTX.thread.capture
        if capture is not None:
            capture.effect(lambda: fn(*args))
