"""The simulator's numerics model: how the ANE rounds, accumulates and overflows.

One named object, `Numerics`, holds every numerical choice the simulator makes. The defaults
follow public hardware measurements from the ANEForge project (github.com/sbryngelson/ANEForge);
facts that sources dispute are switches (docs/numerics.md has the table with each source):

| switch | default | alternatives | source (ANEForge) |
|---|---|---|---|
| rounding | "nearest_even" | "half_away" | `docs/glossary.md` names half-away; `docs/numeric-cliffs.md` (8 terms summing to 2049 read back 2050) fits it |
| subnormals | "keep" | "flush" (results below 2**-14 become 0) | not measured in any public source |
| matmul_products | "fp16" (each product rounded to fp16) | "exact" (fp32 BLAS) | `docs/developer/numerics.md` |
| matmul_overflow | 32758.8 (|y| above it becomes ±inf) | None (only fp16's own 65504) | `docs/numeric-cliffs.md`, bisected on M1..M5 |
| reduce_accumulate | "fp16" (a running fp16 sum) | "wide" (fp32 accumulator) | `docs/developer/numerics.md` vs `tests/test_numerical.py` |

What is not modelled: the LUT approximations of exp/log/tanh/gelu (`docs/op-catalog.md`: the
simulator computes them in fp32 and rounds once), NaN suppression (`docs/faq.md`), the
width-offset slice clamp of pre-A16 families (`docs/numeric-cliffs.md`).
"""
from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import numpy as np

from . import kernels
from .context import CTX

F16_TINY = np.float32(2.0 ** -14)     # smallest normal fp16
F16_MAX = np.float32(65504.0)


@dataclass(frozen=True)
class Numerics:
    rounding: str = "nearest_even"
    subnormals: str = "keep"
    matmul_products: str = "fp16"
    matmul_overflow: float | None = 32758.8
    reduce_accumulate: str = "fp16"

    def __post_init__(self):
        for field, allowed in (("rounding", ("nearest_even", "half_away")),
                               ("subnormals", ("keep", "flush")),
                               ("matmul_products", ("fp16", "exact")),
                               ("reduce_accumulate", ("fp16", "wide"))):
            if getattr(self, field) not in allowed:
                raise ValueError(f"Numerics.{field} must be one of {allowed}, "
                                 f"got {getattr(self, field)!r}")

    def round16(self, x) -> np.ndarray:
        """Round to the nearest fp16 value under this model, returned as float32.

        The simulator carries fp16 values in float32 arrays; `aneforge.kernels.round16` rounds
        them (numba when installed, else numpy float32 arithmetic: numpy's own float16
        conversion is an order of magnitude slower, and two orders slower on subnormals).
        """
        return kernels.round16(x, kernels.mode(self.rounding, self.subnormals))


ANE = Numerics()


def get_numerics() -> Numerics:
    """The numerics model the simulator compiles new programs with."""
    return ANE if CTX.numerics is None else CTX.numerics


def set_numerics(numerics: Numerics | None = None, **changes) -> Numerics:
    """Replace the numerics model (or change some switches); returns the previous one.

    >>> import aneforge as af
    >>> old = af.set_numerics(rounding="half_away")
    >>> _ = af.set_numerics(old)
    """
    prev = get_numerics()
    CTX.numerics = dataclasses.replace(numerics or prev, **changes)
    return prev


@contextlib.contextmanager
def numerics(**changes):
    """Use a changed numerics model inside a `with` block.

    >>> import aneforge as af
    >>> with af.numerics(matmul_products="exact"):
    ...     pass
    """
    prev = set_numerics(**changes)
    try:
        yield get_numerics()
    finally:
        set_numerics(prev)
