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

    def admit(self, program) -> None:
        """What every backend checks before compiling: that it can run here, that the Program
        is valid MIL, and that it avoids the graphs the ANE compiler rejects (ops/walls.py)."""
        from ..errors import BackendUnavailable
        from ..ops import validate
        from ..ops.walls import check_walls
        ok, why = self.available()
        if not ok:
            raise BackendUnavailable(f"backend {self.name!r} cannot run here: {why}")
        validate(program)
        check_walls(program)


def macos_version() -> tuple[int, ...] | None:
    """(major, minor) of macOS, or None elsewhere."""
    import platform
    import sys
    if sys.platform != "darwin":
        return None
    release = platform.mac_ver()[0]
    return tuple(int(p) for p in release.split(".")[:2] if p.isdigit()) or (0,)


def this_machine() -> str:
    """'Linux x86_64', 'macOS 15.2 arm64': how a backend's reason names where it is."""
    import platform
    v = macos_version()
    system = platform.system() if v is None else "macOS " + ".".join(map(str, v))
    return f"{system} {platform.machine()}"


def cache_root(route: str) -> str:
    """Where a backend keeps compiled programs across processes: $ANEFORGE_CACHE_DIR/<route>,
    else ~/Library/Caches/aneforge/<route> on macOS (~/.cache/aneforge/<route> elsewhere)."""
    import os
    import sys
    base = os.environ.get("ANEFORGE_CACHE_DIR") or os.path.expanduser(
        "~/Library/Caches/aneforge" if sys.platform == "darwin" else "~/.cache/aneforge")
    return os.path.join(base, route)
