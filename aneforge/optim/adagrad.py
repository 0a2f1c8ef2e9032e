"""Adagrad with torch's update formulas (lr_decay, initial accumulator, weight decay)."""
from __future__ import annotations

import math

import numpy as np

from ..creation import tensor
from .optimizer import Optimizer
from .roots import RootState, root_mean


class Adagrad(RootState, Optimizer):
    """torch.optim.Adagrad. The growing sum of g^2 is kept as its square root (it would pass
    fp16's 65504 long before its root does; aneforge/optim/roots.py); `state_dict()` reports
    torch's `sum`.

    >>> import aneforge as af
    >>> w = af.nn.Parameter(af.ones(2))
    >>> opt = af.optim.Adagrad([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step()
    >>> [round(v, 2) for v in w.tolist()]
    [0.9, 0.9]
    """
    ROOTS = {"sum_sqrt": "sum"}

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, foreach=None, *, maximize: bool = False,
                 differentiable: bool = False, fused=None, master_weights: str = "compensated"):
        for name, v in (("lr_decay", lr_decay),
                        ("initial_accumulator_value", initial_accumulator_value)):
            if not 0.0 <= v:
                raise ValueError(f"Invalid {name} value: {v}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize), master_weights)

    def init_state(self, p):
        start = max(g["initial_accumulator_value"] for g in self.param_groups
                    if any(q is p for q in g["params"]))
        return {"sum_sqrt": tensor(np.full(p.shape, math.sqrt(start), np.float16))}

    def hyper(self, group, step):
        return {"clr": group["lr"] / (1 + (step - 1) * group["lr_decay"])}

    def update(self, p, g, state, h, group):
        g = -g if group["maximize"] else g
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        s = root_mean(state["sum_sqrt"], g, 1.0, gain=1.0)      # sqrt(sum + g^2)
        std = s + max(group["eps"], 2.0 ** -24)
        return g / std * -h["clr"], {"sum_sqrt": s}
