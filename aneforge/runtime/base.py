"""The backend interface: compile a validated Program once, run the result many times.

A backend is one small module exposing a `Backend` subclass; `runtime.BACKENDS` finds it by
name. The core only ever calls `available()`, `compile()` and `Executable.run()`.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np


class Executable(Protocol):
    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Inputs and outputs in the Program's order, as arrays of the boundary dtypes."""


class Backend:
    name = "base"

    def available(self) -> tuple[bool, str]:
        """(can it run here, and if not, why in words a user can act on)."""
        raise NotImplementedError

    def compile(self, program, numerics) -> Executable:
        raise NotImplementedError
