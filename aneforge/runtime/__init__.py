"""Backends by name. Only `sim` exists so far; the macOS backends (`coreml`, `ane`) slot in
here as one module each behind runtime/base.py's interface."""
from __future__ import annotations

from ..context import CTX
from ..errors import BackendUnavailable
from .base import Backend, Executable
from .sim import SimBackend

BACKENDS: dict[str, Backend] = {"sim": SimBackend()}


def backends() -> dict[str, tuple[bool, str]]:
    """Each backend's name -> (available here, why or why not)."""
    return {name: b.available() for name, b in BACKENDS.items()}


def get_backend() -> Backend:
    return BACKENDS[CTX.backend]


def set_backend(name: str) -> None:
    """Choose the backend new programs compile for (default "sim")."""
    if name not in BACKENDS:
        raise BackendUnavailable(f"no backend {name!r}; known: {sorted(BACKENDS)}")
    ok, why = BACKENDS[name].available()
    if not ok:
        raise BackendUnavailable(f"backend {name!r} cannot run here: {why}")
    CTX.backend = name


__all__ = ["Backend", "Executable", "BACKENDS", "backends", "get_backend", "set_backend"]
