"""RMSprop with torch's update formulas (momentum, centered, weight decay, maximize)."""
from __future__ import annotations

import numpy as np

from ..creation import tensor
from .optimizer import Optimizer
from .momentum import CycledMomentum
from .roots import RootState, root_mean


class RMSprop(CycledMomentum, RootState, Optimizer):
    """torch.optim.RMSprop. The running average of g^2 is kept as its square root
    (aneforge/optim/roots.py); `state_dict()` reports torch's `square_avg`.

    >>> import aneforge as af
    >>> w = af.nn.Parameter(af.ones(2))
    >>> opt = af.optim.RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 2) for v in w.tolist()]
    [0.9, 0.9]
    """
    ROOTS = {"square_avg_sqrt": "square_avg"}

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False, master_weights: str = "compensated"):
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize),
                         master_weights)

    def init_state(self, p):
        z = np.zeros(p.shape, np.float16)
        state = {"square_avg_sqrt": tensor(z)}
        if any(g["momentum"] for g in self.param_groups):
            state["momentum_buffer"] = tensor(z)
        if any(g["centered"] for g in self.param_groups):
            state["grad_avg"] = tensor(z)
        return state

    def hyper(self, group, step):
        return {"lr": group["lr"], **self.momentum_hyper(group)}

    def update(self, p, g, state, h, group):
        alpha = group["alpha"]
        g = -g if group["maximize"] else g
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        r = root_mean(state["square_avg_sqrt"], g, alpha)
        new = {"square_avg_sqrt": r}
        if group["centered"]:
            m = state["grad_avg"] * alpha + g * (1 - alpha)
            new["grad_avg"] = m
            r = _centered(r, m)
        avg = r + max(group["eps"], 2.0 ** -24)
        step = g / avg
        if group["momentum"]:
            step = state["momentum_buffer"] * self.momentum(group, h) + step
            new["momentum_buffer"] = step
        return step * -h["lr"], new


def _centered(r, m):
    """sqrt(r^2 - m^2) (>= 0: a variance), scaled by r as roots.root_mean is."""
    a = r.maximum(2.0 ** -14)
    rn, mn = r / a, m / a
    return a * (rn * rn - mn * mn).relu().sqrt()
