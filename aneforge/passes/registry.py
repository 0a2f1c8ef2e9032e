"""Passes by name. A pass is a function `fn(graph) -> int` (the number of rewrites it made, 0
when it changed nothing) registered with whether it is exact:

- exact: the simulator's outputs stay the same values (bit for bit, except that -0 and +0 may
  trade places, e.g. when `add(x, 0)` is dropped);
- numeric: the result may move by fp16 roundings (a fused op rounds once where its parts
  rounded several times, a division becomes a multiplication by a rounded reciprocal).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import AneforgeError


@dataclass(frozen=True)
class Pass:
    name: str
    fn: Callable
    exact: bool
    doc: str

    def __call__(self, graph) -> int:
        return int(self.fn(graph) or 0)

    @property
    def kind(self) -> str:
        return "exact" if self.exact else "numeric"


PASSES: dict[str, Pass] = {}


def register(name: str, exact: bool):
    """Register `fn` as the pass `name` (its docstring draws the program before and after)."""
    def wrap(fn):
        if name in PASSES:
            raise AneforgeError(f"pass {name!r} is registered twice")
        PASSES[name] = Pass(name, fn, exact, (fn.__doc__ or "").strip())
        return fn
    return wrap


def get_pass(name: str) -> Pass:
    try:
        return PASSES[name]
    except KeyError:
        raise AneforgeError(f"no graph pass {name!r}; known passes: {sorted(PASSES)}") from None
