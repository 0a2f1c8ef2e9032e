"""Mixed precision on the ANE: automatic gradient scaling, torch's GradScaler and autocast.

fp16 gradients underflow without a loss scale (M1-class engines flush matmul results below
2**-14 to zero); too large a scale overflows them to inf. Every `backward()` of a floating
loss is scaled automatically (aneforge.core.autoscale): `.grad` reads at torch's scale, an
overflowing pass zeroes its gradients and skips the optimizer's step, and the scale adapts.
`set_auto_scale` turns it off (everywhere, or for one model's parameters) or changes its
settings; `auto_scaler()` shows its state.

An explicit `GradScaler` (torch's API) still works and is not scaled twice: its scaled loss
opts out of the automatic scale. It multiplies the loss by `scale`, unscales the gradients
inside the step program, skips the update there when any gradient is not finite (weights and
state stay untouched), and then halves the scale; after `growth_interval` clean steps it
doubles it. Either scale is a program input: changing it never recompiles. Scales of about
128-1024 are reported working on hardware (ANEForge `docs/training.md`).
"""
from __future__ import annotations

import functools

from . import dtypes
from .context import CTX
from .core.autoscale import AutoScaler, default
from .creation import tensor
from .optim.optimizer import warn_skipped
from .tensor import Tensor

DEVICES = ("ane", "cpu", "mps", "cuda", "xpu")     # torch device names: all mean the ANE here


def auto_scaler(model=None) -> AutoScaler:
    """The automatic gradient scaler: the default one, or the one `model`'s parameters use
    (set by `set_auto_scale(..., model=model)`; None if it is off for them). Its `scale`,
    `rescued_passes`, `skipped_steps`, `enabled` and `state_dict()` show the state.

    >>> import aneforge as af
    >>> w = af.nn.Parameter(af.tensor([1e-3]))
    >>> (w * w).sum().backward()
    >>> w.grad.item(), af.amp.auto_scaler().skipped_steps
    (0.002..., 0)
    """
    if model is None:
        return default()
    params = list(model.parameters())
    for handles, scaler in CTX.model_scales:
        if _same(handles, params):
            return scaler
    return default()


def set_auto_scale(enabled: bool = True, model=None, **settings) -> AutoScaler | None:
    """Turn automatic gradient scaling on or off, everywhere or for `model` (a backward pass
    whose leaves are all `model`'s parameters uses the model's setting); `settings` are
    AutoScaler's (init_scale, growth_factor, backoff_factor, growth_interval, max_scale).
    Returns the scaler in effect (None when off).

    >>> import aneforge as af
    >>> _ = af.amp.set_auto_scale(False)               # plain fp16 backward passes
    >>> af.amp.auto_scaler().enabled
    False
    >>> _ = af.amp.set_auto_scale(True, init_scale=1024.0)
    """
    if model is None:
        scaler = default()
        if "init_scale" in settings:            # a fresh start: the adaptive state too
            scaler.scale = scaler.init_scale = float(settings.pop("init_scale"))
            scaler.ceiling, scaler.clean_passes = scaler.max_scale, 0
            scaler._groups.clear()
        for k, v in settings.items():
            if not hasattr(scaler, k):
                raise TypeError(f"set_auto_scale: unknown setting {k!r}; AutoScaler takes "
                                f"init_scale, growth_factor, backoff_factor, growth_interval, "
                                f"max_scale")
            setattr(scaler, k, v)
        scaler.enabled = bool(enabled)
        return scaler if scaler.enabled else None
    params = list(model.parameters())
    CTX.model_scales[:] = [(h, s) for h, s in CTX.model_scales if not _same(h, params)]
    scaler = AutoScaler(**settings) if enabled else None
    CTX.model_scales.append((params, scaler))
    return scaler


def _same(handles: list, params: list) -> bool:
    return len(handles) == len(params) and all(a is b for a, b in zip(handles, params))


class autocast:
    """torch.autocast / torch.amp.autocast, accepted so torch code runs unchanged. It changes
    nothing: on the ANE every op already computes in float16 (aneforge keeps fp32 only where it
    chose it for accuracy, as in wide sums), which is what autocast asks of a GPU; gradients
    are scaled automatically (see `auto_scaler`). bfloat16 is not an ANE type: asking for it
    warns and fp16 is used.

    >>> import aneforge as af
    >>> with af.autocast(device_type="cuda", dtype=af.float16):
    ...     y = af.ones(2) * 3
    >>> y.dtype
    aneforge.float16
    """

    def __init__(self, device_type: str = "ane", dtype=None, enabled: bool = True,
                 cache_enabled: bool | None = None):
        if device_type not in DEVICES:
            raise ValueError(f"autocast: device_type must be one of {DEVICES} (all run on the "
                             f"ANE here), got {device_type!r}")
        if dtype is not None and str(dtype).split(".")[-1] in ("bfloat16", "bf16"):
            import warnings
            warnings.warn("autocast(dtype=bfloat16): the ANE has no bfloat16; aneforge computes "
                          "in float16", RuntimeWarning, stacklevel=2)
        elif dtype is not None and dtypes.as_dtype(dtype) not in (dtypes.float16, dtypes.float32):
            raise ValueError(f"autocast: dtype must be a floating type, got {dtype!r}")
        self.device_type, self.dtype, self.enabled = device_type, dtype, enabled

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapped


class ScaledLoss(Tensor):
    """`GradScaler.scale(loss)`: loss * scale, naming the unscaled loss as a companion (the step
    program returns it too) and the scaler (whose settings an early-planned step uses)."""

    __slots__ = ("scaler", "companions")

    def __init__(self, scaled: Tensor, scaler: "GradScaler", loss: Tensor):
        super().__init__(*scaled.ref)
        self.scaler, self.companions = scaler, (loss,)


class GradScaler:
    """torch.amp.GradScaler: dynamic loss scaling you drive yourself (the automatic scaling of
    every backward pass makes it optional; a loss it scaled is not scaled again). The default
    init_scale is 1024, not torch's 65536: the ANE's matmul port saturates at 32768.

    >>> import aneforge as af
    >>> w = af.nn.Parameter(af.ones(2))
    >>> opt, scaler = af.optim.SGD([w], lr=0.1), af.amp.GradScaler(init_scale=1024.0)
    >>> scaler.scale((w * w).sum()).backward()
    >>> scaler.step(opt); scaler.update()
    >>> [round(v, 2) for v in w.tolist()]
    [0.8, 0.8]
    """

    def __init__(self, device: str = "ane", init_scale: float = 1024.0,
                 growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True, max_scale: float = 32768.0):
        if not isinstance(device, str):
            raise TypeError(f"GradScaler(device, init_scale=...): the first argument is the "
                            f"device, as in torch.amp.GradScaler (any of {DEVICES}: all run on "
                            f"the ANE), got {device!r}; pass init_scale by keyword")
        if device.split(":")[0] not in DEVICES:
            raise ValueError(f"GradScaler: device must be one of {DEVICES}, got {device!r}")
        self.device = device
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
