"""SGD with momentum, dampening, Nesterov and weight decay: torch's update formulas."""
from __future__ import annotations

import numpy as np

from ..creation import tensor
from .optimizer import Optimizer
from .momentum import CycledMomentum


class SGD(CycledMomentum, Optimizer):
    """torch.optim.SGD.

    >>> import aneforge as af
    >>> w = af.nn.Parameter(af.ones(3))
    >>> opt = af.optim.SGD([w], lr=0.5)
    >>> (w * w).sum().backward(); opt.step()
    >>> w.tolist()
    [0.0, 0.0, 0.0]
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 foreach=None, differentiable: bool = False, fused=None,
                 master_weights: str = "compensated"):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize), master_weights)

    def init_state(self, p):
        return {"momentum_buffer": tensor(np.zeros(p.shape, np.float16))} if \
            self.defaults["momentum"] or any(g["momentum"] for g in self.param_groups) else {}

    def hyper(self, group, step):
        # torch starts the buffer as a copy of the first gradient: (1 - dampening) from then on
        return {"lr": group["lr"], "fresh": 1.0 if step == 1 else 1.0 - group["dampening"],
                **self.momentum_hyper(group)}

    def update(self, p, g, state, h, group):
        g = -g if group["maximize"] else g
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        new = {}
        if group["momentum"]:
            momentum = self.momentum(group, h)
            buf = state["momentum_buffer"] * momentum + g * h["fresh"]
            new["momentum_buffer"] = buf
            g = g + buf * momentum if group["nesterov"] else buf
        return g * -h["lr"], new
