"""Running averages of squares, kept as their square roots (Adam, RMSprop, Adagrad, Adadelta).

A running average of g^2 leaves fp16's range where g does not (g = 1e-4 gives 1e-8, below
fp16's smallest subnormal; Adagrad's growing sum passes 65504), while its square root stays
where g is. The updates are scaled hypotenuses: with a = max(r, |g|, TINY),

    sqrt(beta * r^2 + (1 - beta) * g^2) = a * sqrt(beta * (r/a)^2 + (1 - beta) * (g/a)^2).

`RootState` gives an optimizer torch's state names: `state_dict()` reports each root's square
under torch's key, and `load_state_dict` accepts torch's squares.
"""
from __future__ import annotations

import numpy as np

from ..creation import tensor

# fp16's smallest normal: keeps a = max(r, |g|, TINY) away from 0 (0/0 before any gradient)
TINY = 2.0 ** -14


def root_mean(r, g, beta, gain=None):
    """sqrt(beta * r^2 + gain * g^2) (gain defaults to 1 - beta) from r and g, in fp16 range;
    beta and gain are numbers or per-step inputs (scalar tensors)."""
    a = r.maximum(g.abs()).maximum(TINY)
    rn, gn = r / a, g / a
    return a * (rn * rn * beta + gn * gn * (1 - beta if gain is None else gain)).sqrt()


def hypot(r, c: float):
    """sqrt(r^2 + c^2) for a tensor r >= 0 and a number c > 0 (sqrt(v + eps), v = r^2)."""
    a = r.maximum(c)
    rn = r / a
    return a * (rn * rn + (c / a) * (c / a)).sqrt()


class RootState:
    """An optimizer mixin: `ROOTS` maps each state key kept as a square root to torch's key of
    its square (Adam: {"exp_avg_sqrt": "exp_avg_sq"})."""
    ROOTS: dict = {}

    def state_dict(self) -> dict:
        """torch's state (each root's square under torch's name), plus the exact roots
        aneforge keeps (and `lo`, see Optimizer), so a reload resumes bit-equal."""
        sd = super().state_dict()
        for s in sd["state"].values():
            for ours, theirs in self.ROOTS.items():
                r = s[ours].numpy().astype(np.float32)
                s[theirs] = tensor(r * r)
        return sd

    def _loaded_state(self, p, saved: dict) -> dict:
        for ours, theirs in self.ROOTS.items():
            if ours not in saved and theirs in saved:          # torch's state
                saved = {**saved, ours: np.sqrt(np.asarray(saved[theirs], np.float32))}
        return super()._loaded_state(p, saved)

