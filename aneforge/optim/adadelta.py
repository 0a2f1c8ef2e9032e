"""Adadelta with torch's update formulas (rho, eps, weight decay, maximize)."""
from __future__ import annotations

import math

import numpy as np

from ..creation import tensor
from .optimizer import Optimizer
from .roots import RootState, hypot, root_mean


class Adadelta(RootState, Optimizer):
    """torch.optim.Adadelta. Both running averages (of g^2 and of the squared updates) are
    kept as their square roots (aneforge/optim/roots.py), so sqrt(v + eps) is a hypotenuse with
    sqrt(eps); `state_dict()` reports torch's `square_avg` and `acc_delta`.

    >>> import aneforge as af
    >>> w = af.nn.Parameter(af.ones(2))
    >>> opt = af.optim.Adadelta([w])
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 3) for v in w.tolist()]     # torch: 0.99684, one fp16 step below 1 - 0.003
    [0.997, 0.997]
    """
    ROOTS = {"square_avg_sqrt": "square_avg", "acc_delta_sqrt": "acc_delta"}

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, foreach=None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False,
                 master_weights: str = "compensated"):
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize), master_weights)

    def init_state(self, p):
        z = np.zeros(p.shape, np.float16)
        return {"square_avg_sqrt": tensor(z), "acc_delta_sqrt": tensor(z)}

    def update(self, p, g, state, h, group):
        rho, root_eps = group["rho"], math.sqrt(group["eps"])
        g = -g if group["maximize"] else g
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        r = root_mean(state["square_avg_sqrt"], g, rho)
        delta = hypot(state["acc_delta_sqrt"], root_eps) / hypot(r, root_eps) * g
        u = root_mean(state["acc_delta_sqrt"], delta, rho)
        return delta * -h["lr"], {"square_avg_sqrt": r, "acc_delta_sqrt": u}
