"""Learning-rate schedulers (torch.optim.lr_scheduler). The lr is a program input, so changing
it never recompiles."""
from __future__ import annotations

import math

from ..context import CTX


class LRScheduler:
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

    def step(self) -> None:
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
        for g, lr in zip(self.optimizer.param_groups, self.get_lr()):
            g["lr"] = lr


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (closed form)."""

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t = self.last_epoch
        return [self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * t / self.T_max)) / 2
                for b in self.base_lrs]
