"""Learning-rate schedulers (torch.optim.lr_scheduler), with torch's arguments and defaults.
The lr is a program input (and OneCycleLR's momentum / beta1 too), so a schedule never
recompiles. Each schedule is computed in closed form from the epoch count (torch's chainable
forms give the same values up to float rounding); under af.compile a replayed call advances
the schedule as the eager call did.

>>> import aneforge as af
>>> opt = af.optim.SGD([af.nn.Parameter(af.ones(1))], lr=1.0)
>>> sched = af.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
>>> lrs = []
>>> for _ in range(5):
...     lrs.append(sched.get_last_lr()[0]); sched.step()
>>> lrs
[1.0, 1.0, 0.5, 0.5, 0.25]
"""
from __future__ import annotations

import bisect
import math
import types

from ..context import CTX


class LRScheduler:
    """Base class: `get_lr()` gives each group's lr at epoch `last_epoch`; construction takes
    the first step (epoch 0), as torch's."""

    def __init__(self, optimizer, last_epoch: int = -1):
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g.setdefault("initial_lr", g["lr"])
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self) -> list[float]:
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def step(self, epoch=None) -> None:
        """Advance one epoch (or jump to `epoch`, torch's deprecated form, which
        CosineAnnealingWarmRestarts uses for fractional epochs)."""
        if epoch is not None:
            self.last_epoch = epoch - 1
        self._advance()
        capture = CTX.thread.capture
        if capture is not None:          # af.compile: a replayed call advances the schedule too
            capture.effect(self._advance)

    def state_dict(self) -> dict:
        """torch's: every attribute but the optimizer (af.save writes it).

        >>> import aneforge as af
        >>> opt = af.optim.SGD([af.nn.Parameter(af.ones(1))], lr=1.0)
        >>> af.optim.lr_scheduler.StepLR(opt, step_size=2).state_dict()["last_epoch"]
        0
        """
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore `state_dict()`: the schedule continues where the saved one stopped."""
        self.__dict__.update(state_dict)

    def _advance(self) -> None:
        self.last_epoch += 1
        self._set_lrs(self.get_lr())

    def _set_lrs(self, lrs) -> None:
        for g, lr in zip(self.optimizer.param_groups, lrs):
            g["lr"] = lr


_LRScheduler = LRScheduler       # torch's older name


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (number of milestones reached)."""

    def __init__(self, optimizer, milestones, gamma: float = 0.1, last_epoch: int = -1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        k = bisect.bisect_right(self.milestones, self.last_epoch)
        return [b * self.gamma ** k for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = base_lr * factor until `total_iters`, then base_lr."""

    def __init__(self, optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1):
        if not 0 <= factor <= 1:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        f = self.factor if self.last_epoch < self.total_iters else 1.0
        return [b * f for b in self.base_lrs]


class LinearLR(LRScheduler):
    """lr = base_lr * factor, the factor going linearly from start_factor to end_factor over
    `total_iters` epochs."""

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1):
        if not 0 < start_factor <= 1:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if not 0 <= end_factor <= 1:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t = min(self.total_iters, self.last_epoch) / self.total_iters
        f = self.start_factor + (self.end_factor - self.start_factor) * t
        return [b * f for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ** power."""

    def __init__(self, optimizer, total_iters: int = 5, power: float = 1.0,
                 last_epoch: int = -1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        f = (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
        return [b * f for b in self.base_lrs]


class _Lambdas(LRScheduler):
    """A schedule of one function of the epoch per group (torch saves only callable objects'
    attributes: functions and lambdas are not data)."""

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else \
            [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"Expected {n} lr_lambdas, but got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["lr_lambdas"] = [None if isinstance(f, types.FunctionType) else dict(vars(f))
                               for f in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        for f, saved in zip(self.lr_lambdas, state.pop("lr_lambdas", ())):
            if saved is not None:
                vars(f).update(saved)
        super().load_state_dict(state)


class LambdaLR(_Lambdas):
    """lr = base_lr * lr_lambda(epoch) (one function, or one per group)."""

    def get_lr(self):
        return [b * f(self.last_epoch) for b, f in zip(self.base_lrs, self.lr_lambdas)]


class MultiplicativeLR(_Lambdas):
    """lr = previous lr * lr_lambda(epoch), from epoch 1 on."""

    def get_lr(self):
        if self.last_epoch <= 0:
            return [g["lr"] for g in self.optimizer.param_groups]
        return [g["lr"] * f(self.last_epoch)
                for g, f in zip(self.optimizer.param_groups, self.lr_lambdas)]


def _cosine(low: float, high: float, t: float, period: float) -> float:
    return low + (high - low) * (1 + math.cos(math.pi * t / period)) / 2


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (closed form)."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [_cosine(self.eta_min, b, self.last_epoch, self.T_max) for b in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every T_i epochs (T_0, then times T_mult each restart);
    `step(epoch)` takes fractional epochs, as torch's.

    >>> import aneforge as af
    >>> opt = af.optim.SGD([af.nn.Parameter(af.ones(1))], lr=1.0)
    >>> s = af.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
    >>> [(s.step(), round(s.get_last_lr()[0], 3))[1] for _ in range(4)]
    [0.5, 1.0, 0.5, 1.0]
    """

    def __init__(self, optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [_cosine(self.eta_min, b, self.T_cur, self.T_i) for b in self.base_lrs]

    def step(self, epoch=None) -> None:
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            super().step()
            return
        self._jump(epoch)
        capture = CTX.thread.capture
        if capture is not None:
            capture.effect(self._jump, epoch)

    def _advance(self) -> None:
        self.last_epoch += 1
        self.T_cur += 1
        if self.T_cur >= self.T_i:
            self.T_cur, self.T_i = self.T_cur - self.T_i, self.T_i * self.T_mult
        self._set_lrs(self.get_lr())

    def _jump(self, epoch) -> None:
        """Epoch `epoch` (fractional allowed) in torch's closed form of the restarts."""
        if epoch < 0:
            raise ValueError(f"Expected non-negative epoch, but got {epoch}")
        self.T_i, self.T_cur = self.T_0, epoch
        if epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult ** n
        self.last_epoch = math.floor(epoch)
        self._set_lrs(self.get_lr())


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr rises from max_lr / div_factor to max_lr over `pct_start` of
    `total_steps`, then anneals to initial_lr / final_div_factor (three_phase: back to the
    initial lr first); momentum (or Adam's beta1) cycles the opposite way. Step it once per
    batch.

    >>> import aneforge as af
    >>> opt = af.optim.SGD([af.nn.Parameter(af.ones(1))], lr=0.1, momentum=0.9)
    >>> s = af.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    >>> round(s.get_last_lr()[0], 4), opt.param_groups[0]["momentum"]
    (0.04, 0.95)
    """

    def __init__(self, optimizer, max_lr, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1):
        self.total_steps = _total_steps(total_steps, epochs, steps_per_epoch)
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self.anneal_strategy, self.cycle_momentum = anneal_strategy, cycle_momentum
        self._phases = _phases(self.total_steps, pct_start, three_phase)
        groups = optimizer.param_groups
        for g, top in zip(groups, _per_group(max_lr, groups, "max_lr")):
            g["initial_lr"] = top / div_factor
            g["max_lr"], g["min_lr"] = top, g["initial_lr"] / final_div_factor
        if cycle_momentum:
            _cycle_momentum(self, optimizer, base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps "
                             f"is {self.total_steps}")
        lrs = []
        for g in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr_from, lr_to, m_from, m_to) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(g[lr_from], g[lr_to], pct))
                    if self.cycle_momentum:
                        _set_momentum(self, g, self._anneal(g[m_from], g[m_to], pct))
                    break
                start = end
        return lrs


def _cycle_momentum(scheduler, optimizer, base_momentum, max_momentum, last_epoch) -> None:
    """OneCycleLR's and CyclicLR's momentum set-up, as torch's: each group's momentum (Adam's
    beta1) starts at max_momentum (on a fresh start) and the bounds go into the groups."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                         "option enabled")
    scheduler.use_beta1 = "betas" in optimizer.defaults
    groups = optimizer.param_groups
    for g, low, high in zip(groups, _per_group(base_momentum, groups, "base_momentum"),
                            _per_group(max_momentum, groups, "max_momentum")):
        if last_epoch == -1:
            _set_momentum(scheduler, g, high)
        g["max_momentum"], g["base_momentum"] = high, low


def _set_momentum(scheduler, group: dict, value: float) -> None:
    if scheduler.use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


def _total_steps(total_steps, epochs, steps_per_epoch) -> int:
    if total_steps is not None:
        if not isinstance(total_steps, int) or total_steps <= 0:
            raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
        return total_steps
    if epochs is None or steps_per_epoch is None:
        raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
    for name, v in (("epochs", epochs), ("steps_per_epoch", steps_per_epoch)):
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"Expected positive integer {name}, but got {v}")
    return epochs * steps_per_epoch


def _phases(total: int, pct: float, three_phase: bool) -> list[tuple]:
    """(end step, lr from, lr to, momentum from, momentum to) of each phase, as torch's."""
    up = float(pct * total) - 1
    if three_phase:
        return [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (float(2 * pct * total) - 2, "max_lr", "initial_lr", "base_momentum",
                 "max_momentum"),
                (total - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum")]
    return [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
            (total - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]


def _per_group(value, groups, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ValueError(f"expected {len(groups)} values for {name}, got {len(value)}")
        return list(value)
    return [value] * len(groups)


class CyclicLR(LRScheduler):
    """The cyclical learning rate policy (Smith, 2017): each group's lr runs from base_lr up to
    max_lr in `step_size_up` steps and back in `step_size_down` (default: the same), the
    cycle's height scaled by `mode` ("triangular": 1, "triangular2": halved each cycle,
    "exp_range": gamma ** step) or by `scale_fn` of the cycle or the step (`scale_mode`);
    momentum (or Adam's beta1) cycles the opposite way between max_momentum and
    base_momentum. Step it once per batch.

    >>> import aneforge as af
    >>> opt = af.optim.SGD([af.nn.Parameter(af.ones(1))], lr=1.0, momentum=0.9)
    >>> s = af.optim.lr_scheduler.CyclicLR(opt, base_lr=0.1, max_lr=0.5, step_size_up=2)
    >>> [(round(s.get_last_lr()[0], 3), s.step())[0] for _ in range(5)]
    [0.1, 0.3, 0.5, 0.3, 0.1]
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9,
                 last_epoch: int = -1):
        groups = optimizer.param_groups
        base_lrs = _per_group(base_lr, groups, "base_lr")
        if last_epoch == -1:
            for g, lr in zip(groups, base_lrs):
                g["lr"] = g["initial_lr"] = lr
        self.max_lrs = _per_group(max_lr, groups, "max_lr")
        up = float(step_size_up)
        self.total_size = up + (float(step_size_down) if step_size_down is not None else up)
        self.step_ratio = up / self.total_size
        if mode not in _CYCLES and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode, self.gamma, self._scale_fn_custom = mode, gamma, scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else _CYCLES[mode][1]
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            _cycle_momentum(self, optimizer, base_momentum, max_momentum, last_epoch)
            self.base_momentums = [g["base_momentum"] for g in groups]
            self.max_momentums = [g["max_momentum"] for g in groups]
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def scale_fn(self, x: float) -> float:
        """The cycle height's scale at cycle (or step) x."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return _CYCLES[self.mode][0](self.gamma, x)

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        rise = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [low + (high - low) * rise * scale for low, high in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for g, low, high in zip(self.optimizer.param_groups, self.base_momentums,
                                    self.max_momentums):
                _set_momentum(self, g, high - (high - low) * rise * scale)
        return lrs

    def state_dict(self) -> dict:
        """torch's: a custom scale_fn is kept only if it is a callable object (its __dict__),
        not a function or lambda."""
        state = super().state_dict()
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None if fn is None or isinstance(fn, types.FunctionType) \
            else fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        fn = state.pop("_scale_fn_custom")
        super().load_state_dict(state)
        if fn is not None and self._scale_fn_custom is not None:
            self._scale_fn_custom.__dict__.update(fn)


# CyclicLR's modes: (scale of the cycle height at x, whether x counts cycles or steps)
_CYCLES = {"triangular": (lambda gamma, x: 1.0, "cycle"),
           "triangular2": (lambda gamma, x: 1 / (2.0 ** (x - 1)), "cycle"),
           "exp_range": (lambda gamma, x: gamma ** x, "iterations")}


class _Composite(LRScheduler):
    """A scheduler over schedulers of one optimizer (SequentialLR, ChainedScheduler): its
    state_dict holds theirs."""

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state = dict(state_dict)
        for s, saved in zip(self._schedulers, state.pop("_schedulers")):
            s.load_state_dict(saved)
        super().load_state_dict(state)


class ChainedScheduler(_Composite):
    """Schedulers applied together: each step steps every one of them, and the lr is the
    product of their schedules, base_lr * prod(schedule_i / base_lr) (torch's chained form for
    the multiplicative schedulers: StepLR, MultiStepLR, ExponentialLR, ConstantLR, LinearLR,
    PolynomialLR, MultiplicativeLR, LambdaLR, and CosineAnnealingLR with eta_min 0).

    >>> import aneforge as af
    >>> from aneforge.optim import lr_scheduler as S
    >>> opt = af.optim.SGD([af.nn.Parameter(af.ones(1))], lr=1.0)
    >>> s = S.ChainedScheduler([S.ConstantLR(opt, 0.1, total_iters=2), S.ExponentialLR(opt, 0.9)])
    >>> [(round(s.get_last_lr()[0], 4), s.step())[0] for _ in range(4)]
    [0.1, 0.09, 0.81, 0.729]
    """

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, "
                             "but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        for i, s in enumerate(schedulers):
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(f"ChainedScheduler does not support `ReduceLROnPlateau` "
                                 f"scheduler as it requires additional kwargs to be specified "
                                 f"when calling `step`, but got one at index {i} in the given "
                                 f"schedulers sequence.")
            if s.optimizer is not optimizer:
                raise ValueError(f"ChainedScheduler expects all schedulers to belong to the "
                                 f"same optimizer, but got scheduler {type(s).__name__} at "
                                 f"index {i} with another optimizer")
        self.optimizer, self._schedulers = optimizer, list(schedulers)
        self._set_lrs(self._chained())       # the schedulers' own first steps overwrote each other

    def step(self) -> None:
        """Step every scheduler (torch's ChainedScheduler.step takes no epoch)."""
        super().step()

    def _advance(self) -> None:
        for s in self._schedulers:
            s.last_epoch += 1
        self._set_lrs(self._chained())

    def _chained(self) -> list[float]:
        lrs = [g["initial_lr"] for g in self.optimizer.param_groups]
        for s in self._schedulers:
            lrs = [lr * new / base if base else new
                   for lr, new, base in zip(lrs, s.get_lr(), s.base_lrs)]
        return lrs


class SequentialLR(_Composite):
    """Schedulers one after another: `schedulers[i]` from `milestones[i-1]` on (each restarts
    at its epoch 0 there).

    >>> import aneforge as af
    >>> from aneforge.optim import lr_scheduler as S
    >>> opt = af.optim.SGD([af.nn.Parameter(af.ones(1))], lr=1.0)
    >>> s = S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, 2), S.ExponentialLR(opt, 0.5)], [2])
    >>> [(round(s.get_last_lr()[0], 3), s.step())[0] for _ in range(5)]
    [0.5, 0.5, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch: int = -1):
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler")
        if any(s.optimizer is not optimizer for s in schedulers):
            raise ValueError("SequentialLR expects all schedulers to belong to the same optimizer")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"Sequential Schedulers expects number of schedulers provided to be "
                             f"one more than the number of milestone points, but got number of "
                             f"schedulers {len(schedulers)} and the number of milestones to be "
                             f"equal to {len(milestones)}")
        self.optimizer, self._schedulers, self._milestones = optimizer, list(schedulers), list(milestones)
        self.last_epoch = last_epoch + 1
        for g in optimizer.param_groups:            # undo the schedulers' own first steps
            g["lr"] = g["initial_lr"]
        for s in self._schedulers:
            s.last_epoch -= 1
        self._schedulers[bisect.bisect_right(self._milestones, 0)]._advance()

    def _advance(self) -> None:
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler.last_epoch = -1                # restart it at its epoch 0
        scheduler._advance()


class ReduceLROnPlateau:
    """Multiply the lr by `factor` when `metrics` (passed to `step`) has not improved for
    `patience` epochs (by `threshold`, relative or absolute), then wait `cooldown` epochs.

    >>> import aneforge as af
    >>> opt = af.optim.SGD([af.nn.Parameter(af.ones(1))], lr=1.0)
    >>> s = af.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=1)
    >>> for loss in [1.0, 1.0, 1.0, 1.0]:
    ...     s.step(loss)
    >>> s.get_last_lr()
    [0.1]
    """

    def __init__(self, optimizer, mode: str = "min", factor: float = 0.1, patience: int = 10,
                 threshold: float = 1e-4, threshold_mode: str = "rel", cooldown: int = 0,
                 min_lr=0, eps: float = 1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        self.optimizer, self.mode, self.factor, self.patience = optimizer, mode, factor, patience
        self.threshold, self.threshold_mode, self.cooldown, self.eps = \
            threshold, threshold_mode, cooldown, eps
        self.min_lrs = _per_group(min_lr, optimizer.param_groups, "min_lr")
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def get_last_lr(self) -> list[float]:
        return self._last_lr

    def is_better(self, a: float, best: float) -> bool:
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if rel else best - self.threshold)
        return a > (best * (self.threshold + 1.0) if rel else best + self.threshold)

    def step(self, metrics, epoch=None) -> None:
        """One epoch's metric (a number or a one-element tensor)."""
        self._observe(float(metrics), epoch)
        capture = CTX.thread.capture
        if capture is not None and hasattr(metrics, "ref"):   # af.compile: the replay's value
            capture.effect(lambda m: self._observe(float(m.reshape(-1)[0])), metrics)

    def _observe(self, current: float, epoch=None) -> None:
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self.is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for g, low in zip(self.optimizer.param_groups, self.min_lrs):
                new = max(g["lr"] * self.factor, low)
                if g["lr"] - new > self.eps:
                    g["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)


__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "ConstantLR", "LinearLR",
           "PolynomialLR", "LambdaLR", "MultiplicativeLR", "CosineAnnealingLR",
           "CosineAnnealingWarmRestarts", "OneCycleLR", "SequentialLR", "ReduceLROnPlateau",
           "CyclicLR", "ChainedScheduler"]
