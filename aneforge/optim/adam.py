"""Adam and AdamW with torch's update formulas, in fp16 programs.

The second moment is stored as its square root, r = sqrt(v) (aneforge/optim/roots.py: v
itself would leave fp16's range); `state_dict()` reports torch's `exp_avg_sq` = r^2.
"""
from __future__ import annotations

import math

import numpy as np

from ..creation import tensor
from .optimizer import Optimizer
from .momentum import CycledMomentum
from .roots import RootState, root_mean


class Adam(CycledMomentum, RootState, Optimizer):
    """torch.optim.Adam (amsgrad is not supported).

    >>> import aneforge as af
    >>> w = af.nn.Parameter(af.ones(2))
    >>> opt = af.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 3) for v in w.tolist()]
    [0.9, 0.9]
    """

    decoupled = False
    ROOTS = {"exp_avg_sqrt": "exp_avg_sq"}
    MOMENTUM = "betas"             # OneCycleLR cycles beta1 (aneforge/optim/momentum.py)

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None, master_weights: str = "compensated"):
        if amsgrad:
            raise NotImplementedError(f"{type(self).__name__}(amsgrad=True) is not supported in "
                                      f"aneforge; pass amsgrad=False")
        # foreach / capturable / differentiable / fused choose torch's kernels: one program here
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize), master_weights)

    def init_state(self, p):
        z = np.zeros(p.shape, np.float16)
        return {"exp_avg": tensor(z), "exp_avg_sqrt": tensor(z)}

    def hyper(self, group, step):
        b1, b2 = group["betas"]
        return {"step_size": group["lr"] / (1 - b1 ** step),
                "inv_sqrt_bc2": 1 / math.sqrt(1 - b2 ** step),
                "lr_decay": group["lr"] * group["weight_decay"], **self.momentum_hyper(group)}

    def update(self, p, g, state, h, group):
        g = -g if group["maximize"] else g
        if group["weight_decay"] and not self.decoupled:
            g = g + p * group["weight_decay"]
        m = state["exp_avg"] * self.momentum(group, h) + g * self.one_minus_momentum(group, h)
        r = root_mean(state["exp_avg_sqrt"], g, group["betas"][1])
        denom = r * h["inv_sqrt_bc2"] + max(group["eps"], 2.0 ** -24)
        delta = -(m / denom) * h["step_size"]
        if group["weight_decay"] and self.decoupled:
            delta = delta - p * h["lr_decay"]
        return delta, {"exp_avg": m, "exp_avg_sqrt": r}


class AdamW(Adam):
    """torch.optim.AdamW: weight decay decoupled from the gradient (default 1e-2)."""

    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None, master_weights: str = "compensated"):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         master_weights=master_weights)
