"""Hazard reports: the simulator warns (`ANEHazardWarning`) when a value hits a hardware cliff.

Callers test for the cliff with one vectorised `any()` over values they already hold and call
`report` only when it fired, so a run that hits nothing pays nothing more. The warning names
the MIL op (its type and name in the program) and the line of user code that ran it.

>>> import warnings, numpy as np
>>> import aneforge as af
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     _ = (af.tensor(np.full((1, 2), 20000.0)) @ af.ones(2, 1)).numpy()
>>> caught[0].category.__name__
'ANEHazardWarning'
"""
from __future__ import annotations

import os
import sys
import sysconfig
import warnings

from ..context import CTX
from ..errors import ANEHazardWarning

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # aneforge/
_STDLIB = os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep


def skipped(filename: str) -> bool:
    """aneforge's own frames, and the standard library's (a contextlib or functools wrapper,
    such as a decorator around the user's forward, is not the user's line)."""
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE) or (path.startswith(_STDLIB) and "site-packages" not in path)


def _user_frame():
    """The innermost frame outside aneforge and the standard library (the user's line that
    realized the value)."""
    f = sys._getframe(1)
    while f is not None and skipped(f.f_code.co_filename):
        f = f.f_back
    return f


def report(ctx, why: str, saturated: bool = False) -> None:
    """Warn that op `ctx.op_name` (MIL type `ctx.op_type`) hit a cliff, and why (`saturated`:
    values became +-inf, which automatic scaling's rescue looks for)."""
    held = CTX.thread.held_hazards
    if held is not None:              # a run automatic scaling may redo: emit once it is kept
        held.append((ctx, why, saturated))
        return
    f = _user_frame()
    where = f" (run from {f.f_code.co_filename}:{f.f_lineno})" if f is not None else ""
    warn_at_user(f"ANE hazard in MIL op {ctx.op_type} {ctx.op_name!r}{where}: {why}",
                 ANEHazardWarning)


def warn_at_user(message: str, category) -> None:
    """warnings.warn attributed to the user's line (outside aneforge and the standard library)."""
    f = _user_frame()
    if f is None:
        warnings.warn(message, category, stacklevel=2)
    else:
        warnings.warn_explicit(message, category, f.f_code.co_filename, f.f_lineno,
                               module=f.f_globals.get("__name__"), registry=f.f_globals.setdefault(
                                   "__warningregistry__", {}))
