"""What the simulator's two ways of running a program share (the interpreter in sim.py and the
run plan in plan.py): gathering a step's arguments, and the hazard report for a NaN entering
the engine."""
from __future__ import annotations

from .. import hazards


class _Boundary:
    """The hazard report's op for a value entering the engine (a program input or constant)."""
    op_type = "input"

    def __init__(self, name):
        self.op_name = name


def gather(env, plan) -> list:
    """A step's arguments from the environment by its argument plan (a slot, a tuple of slots
    for a variadic input, or None for an absent optional one)."""
    return [None if p is None else tuple(env[i] for i in p) if isinstance(p, tuple) else env[p]
            for p in plan]


def nan_hazard(name: str, count: int) -> None:
    hazards.report(_Boundary(name), f"{count} NaN value(s) coerced to +inf at the engine's "
                   f"input (no NaN enters or leaves the ANE)")
