"""What the simulator's two ways of running a program share (the interpreter in sim.py and the
run plan in plan.py): its records of a step and of a value's slot, gathering a step's
arguments, and the hazard report for a NaN entering the engine."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ..hardware import hazards


class Step(NamedTuple):
    """One op as the simulator runs it: `simulate(ctx, *gather(env, reads), **attrs)`, its
    results put in the slots `outs`, each through `store` (one function per result rounding
    or casting it to its dtype; None for an exact op, whose values are kept as they are). A
    NamedTuple: the interpreter's loop unpacks it as fast as a plain tuple."""
    simulate: Callable
    ctx: Any                  # sim.OpContext: the numerics model and the op's types
    reads: list               # per input: its slot, a tuple of slots (variadic) or None
    attrs: dict
    outs: list                # the result slots
    store: Any                # list of store functions, None (exact), or the run plan's marker


class Slot(NamedTuple):
    """What the simulator knows of a value before running: its shape (None when not static)
    and dtype (what the run plan lays out)."""
    shape: tuple | None
    dtype: Any


class _Boundary:
    """The hazard report's op for a value entering the engine (a program input or constant)."""
    op_type = "input"

    def __init__(self, name):
        self.op_name = name


def gather(env, reads) -> list:
    """A step's arguments from the environment by its reads (a slot, a tuple of slots for a
    variadic input, or None for an absent optional one)."""
    return [None if p is None else tuple(env[i] for i in p) if isinstance(p, tuple) else env[p]
            for p in reads]


def nan_hazard(name: str, count: int) -> None:
    hazards.report(_Boundary(name), f"{count} NaN value(s) coerced to +inf at the engine's "
                   f"input (no NaN enters or leaves the ANE)")
