"""Momentum that a scheduler cycles: torch's OneCycleLR (and CyclicLR) set `base_momentum` and
`max_momentum` on each group and change its momentum (Adam: beta1) every step. In such a group
the momentum reaches the program as a per-step input, so the cycling never recompiles; in any
other group it stays a constant, which the passes fold and deduplicate.
"""
from __future__ import annotations


def cycled(group: dict) -> bool:
    """Does a scheduler cycle this group's momentum? (torch's OneCycleLR/CyclicLR keys.)"""
    return "base_momentum" in group


class CycledMomentum:
    """An optimizer mixin for the setting named `MOMENTUM` ("momentum", or Adam's "betas",
    whose first entry cycles). Its value is structure (af.compile captures again when it
    changes) except the cycled part of a cycled group, of which only whether it is zero is."""
    MOMENTUM = "momentum"

    @property
    def dynamic(self) -> tuple:
        return ("lr", self.MOMENTUM)

    def _structure(self) -> tuple:
        return super()._structure() + tuple(self._fixed(g) for g in self.param_groups)

    def _fixed(self, group: dict):
        value = group[self.MOMENTUM]
        if not cycled(group):
            return value
        return tuple(value[1:]) if isinstance(value, tuple) else bool(value)

    def momentum(self, group: dict, h: dict):
        """The momentum (beta1) update() uses: hyper()'s per-step input `h["momentum"]` in a
        cycled group, else the group's number."""
        if cycled(group):
            return h["momentum"]
        value = group[self.MOMENTUM]
        return value[0] if isinstance(value, tuple) else value

    def momentum_hyper(self, group: dict) -> dict:
        """hyper()'s per-step momentum inputs: momentum (and 1 - momentum) in a cycled group."""
        if not cycled(group):
            return {}
        value = group[self.MOMENTUM]
        m = value[0] if isinstance(value, tuple) else value
        return {"momentum": m, "one_minus_momentum": 1 - m}

    def one_minus_momentum(self, group: dict, h: dict):
        return h["one_minus_momentum"] if cycled(group) else 1 - self.momentum(group, h)
