"""`af.backends`, at torch's path: `torch.backends.mps`, `torch.backends.cudnn` and
`torch.backends.cuda` as modules (`import aneforge.backends.cudnn as cudnn` works as in torch's
own examples), and, called, aneforge's own backends by name with whether each runs here.

The flags torch scripts set (`cudnn.benchmark = True`, `cuda.matmul.allow_tf32 = True`) are
accepted and read back; they change nothing here: aneforge has no cuDNN and no CUDA, and its
programs are compiled once per shape signature whatever `benchmark` says.

>>> import aneforge as af
>>> af.backends()["sim"][0], af.backends.mps.is_available(), af.backends.cudnn.is_available()
(True, True, False)
"""
from __future__ import annotations

import sys
import types

from ..runtime import backends as _listing
from . import cuda, cudnn, mps  # noqa: F401  (torch's submodules)


class _Backends(types.ModuleType):
    """The package, callable: `af.backends()` lists aneforge's backends (a module attribute
    cannot make a module callable; its class can)."""

    def __call__(self) -> dict:
        """Each backend's name -> (available here, why)."""
        return _listing()

    def __repr__(self) -> str:
        return f"<module 'aneforge.backends': {', '.join(_listing())}; .mps, .cudnn, .cuda as torch's>"


sys.modules[__name__].__class__ = _Backends
