"""Backends by name: `ane` (macOS, Espresso's e5rt API), `coreml` (macOS, Core ML) and `sim`
(the numpy simulator, everywhere), one module each behind runtime/base.py's interface.

The default is the first available of DEFAULT_ORDER for this platform (on macOS ane, then
coreml, then sim; elsewhere sim), unless the environment variable ANEFORGE_BACKEND names one.
"""
from __future__ import annotations

import os
import sys

from ..context import CTX
from ..errors import BackendUnavailable
from .ane import AneBackend
from .base import Backend, Executable
from .coreml import CoreMLBackend
from .sim import SimBackend

BACKENDS: dict[str, Backend] = {"ane": AneBackend(), "coreml": CoreMLBackend(), "sim": SimBackend()}
DEFAULT_ORDER = {"darwin": ("ane", "coreml", "sim")}
ENV = "ANEFORGE_BACKEND"


def backends() -> dict[str, tuple[bool, str]]:
    """Each backend's name -> (available here, why or why not).

    >>> import aneforge as af
    >>> af.backends()["sim"][0]
    True
    """
    return {name: b.available() for name, b in BACKENDS.items()}


def get_backend() -> Backend:
    return BACKENDS[CTX.backend]


def _check(name: str, where: str) -> None:
    if name not in BACKENDS:
        raise BackendUnavailable(f"{where}: no backend {name!r}; known: {', '.join(BACKENDS)}")
    ok, why = BACKENDS[name].available()
    if not ok:
        raise BackendUnavailable(f"{where}: backend {name!r} cannot run here: {why}")


def set_backend(name: str) -> None:
    """Choose the backend new programs compile for; `af.backends()` says which can run here.

    >>> import aneforge as af
    >>> af.set_backend("sim")
    """
    _check(name, f"set_backend({name!r})")
    CTX.backend = name


def default_backend(platform: str = sys.platform, env: dict = os.environ) -> str:
    """$ANEFORGE_BACKEND if set (it must be able to run here), else the first available of
    DEFAULT_ORDER for `platform` (only "sim" outside macOS: nothing else is probed there)."""
    if env.get(ENV):
        _check(env[ENV], f"{ENV}={env[ENV]}")
        return env[ENV]
    return next(n for n in DEFAULT_ORDER.get(platform, ("sim",)) if BACKENDS[n].available()[0])


CTX.backend = default_backend()

__all__ = ["Backend", "Executable", "BACKENDS", "backends", "get_backend", "set_backend",
           "default_backend"]
