"""The simulator's numerics model: how the ANE rounds, accumulates and overflows.

One named object, `Numerics`, holds every numerical choice the simulator makes; each ANE target
has its default model (`for_target`), and `af.numerics(...)` changes switches. The defaults
reproduce the published M1/M5 hardware measurements of the public book sbryngelson/ane-guide
(chapters part-1-machine/03-numerics.md and part-6-silicon/20-datapath-mac.md); open points are
switches. docs/numerics.md has the table with each source.

| switch | default | alternatives | what |
|---|---|---|---|
| rounding | "nearest_even" (M1..M3), "half_away" (M4, M5) | | fp16 rounding of stored results |
| subnormals | "keep" | "flush" | elementwise results below 2**-14 (the engine keeps them) |
| accumulator | "tile4" | "per_product", "blas" | the MAC datapath of matmul/linear/conv |
| matmul_products | "exact" | "fp16" | products exact (fp16 x fp16 fits fp32) or rounded first |
| tile_truncation | "toward_zero" | "toward_neg_inf" | the 12-bit in-tile adder's cut (open) |
| tile_carry | "truncate" | "nearest_even" | its carry renormalisation (open) |
| tile_result | "12bit" | "fp16" | a tile's sum kept at 12 bits or cut to fp16 (open) |
| matmul_overflow | 32760.0 | None | an accumulator partial at or past it is +-inf (2**15 at the port) |
| matmul_subnormals | "flush" (M1..M3), "keep" (M4, M5) | | matmul outputs below 2**-14 -> +0 |
| specials | "engine" | "ieee" | no NaN leaves the engine (NaN in -> +inf, indeterminate -> +0), log(0) = -45440, 1/(-0) = +inf |
| width_slice_gain | 16.0 (M1, M2), None | | a last-axis slice with a nonzero begin x16 before the store |
| softmax_max | True | False | softmax subtracts the row max in hardware |
| activations | "tables" (M1), "exact" | | sigmoid/tanh/gelu/silu from reconstructed 33-knot tables, or computed |

`accumulator="per_product"` with `matmul_products="fp16"` (the named model `"per_product"`:
`af.numerics("per_product")`) is the simulator's earlier model: every product rounded to fp16,
an fp32 sum in order over K.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from . import kernels
from ..context import CTX

F16_TINY = np.float32(2.0 ** -14)     # smallest normal fp16
F16_MAX = np.float32(65504.0)
CHOICES = {"rounding": ("nearest_even", "half_away"), "subnormals": ("keep", "flush"),
           "accumulator": ("tile4", "per_product", "blas"), "matmul_products": ("exact", "fp16"),
           "tile_truncation": ("toward_zero", "toward_neg_inf"),
           "tile_carry": ("truncate", "nearest_even"), "tile_result": ("12bit", "fp16"),
           "matmul_subnormals": ("flush", "keep"), "specials": ("engine", "ieee"),
           "activations": ("exact", "tables")}


@dataclass(frozen=True)
class Numerics:
    rounding: str = "nearest_even"
    subnormals: str = "keep"
    accumulator: str = "tile4"
    matmul_products: str = "exact"
    tile_truncation: str = "toward_zero"
    tile_carry: str = "truncate"
    tile_result: str = "12bit"
    matmul_overflow: float | None = 32760.0
    matmul_subnormals: str = "flush"
    reduce_accumulate: str = "fp16"
    specials: str = "engine"
    width_slice_gain: float | None = 16.0
    softmax_max: bool = True
    activations: str = "exact"

    def __post_init__(self):
        for field, allowed in CHOICES.items() | {("reduce_accumulate", ("fp16", "wide"))}:
            if getattr(self, field) not in allowed:
                raise ValueError(f"Numerics.{field} must be one of {allowed}, "
                                 f"got {getattr(self, field)!r}")

        # the kernels' small ints, computed once (not fields: equality and hashing ignore them)
        object.__setattr__(self, "mode", kernels.mode(self.rounding, self.subnormals))
        object.__setattr__(self, "store_mode", kernels.mode(
            self.rounding, self.subnormals, nan_to_zero=self.specials == "engine"))
        object.__setattr__(self, "tile_mode", kernels.tile_mode(
            self.tile_truncation, self.tile_carry, self.tile_result, self.matmul_products))

    def round16(self, x) -> np.ndarray:
        """Round to the nearest fp16 value under this model, returned as float32.

        The simulator carries fp16 values in float32 arrays; `aneforge.hardware.kernels.round16` rounds
        them (numba when installed, else numpy float32 arithmetic: numpy's own float16
        conversion is an order of magnitude slower, and two orders slower on subnormals).
        Under `specials="engine"` a NaN result (an indeterminate form: inf - inf, 0 * inf,
        sqrt(-1)) is stored as +0, as the engine returns.
        """
        return kernels.round16(x, self.store_mode)


# What differs by ANE family (docs/numerics.md): M1 flushes matmul subnormals and M5 keeps them
# (measured; M2/M3 unmeasured, taken as M1); the x16 width-slice gain is measured on M1 and M2,
# and measured absent on M4/M5 (A15, M3: unknown, not modelled); the activation tables' figures
# were measured on M1 only, so only M1 reads them by default; M5 stores a 2049 tie as 2050
# where M1 stores 2048: ties round away from zero on A16 (M4 unmeasured, taken as M5).
FAMILY = {"A13": {"activations": "tables"}, "A14": {}, "A15": {"width_slice_gain": None},
          "A16": {"matmul_subnormals": "keep", "width_slice_gain": None,
                  "rounding": "half_away"}}
PRESETS = {"per_product": {"accumulator": "per_product", "matmul_products": "fp16",
                           "matmul_overflow": 32758.8, "matmul_subnormals": "keep", "specials": "ieee",
                           "activations": "exact",
                           "width_slice_gain": None}}


def for_target(target) -> Numerics:
    """The default numerics model of an ANE target (a Target from aneforge.hardware.targets)."""
    model = _BY_FAMILY.get(target.family)
    if model is None:
        model = _BY_FAMILY[target.family] = Numerics(**FAMILY.get(target.family, {}))
    return model


_BY_FAMILY: dict = {}
_BY_TARGET: dict = {}          # CTX.target (None: the default target) -> its default model
ANE = Numerics(**FAMILY["A13"])        # M1's model


def get_numerics() -> Numerics:
    """The numerics model the simulator compiles new programs with: the one set with
    `set_numerics`/`numerics`, else the current target's default (`for_target`)."""
    if CTX.numerics is not None:
        return CTX.numerics
    model = _BY_TARGET.get(CTX.target)         # each call of a replayed step asks
    if model is None:
        from .targets import get_target
        model = _BY_TARGET[CTX.target] = for_target(get_target())
    return model


def set_numerics(numerics: Numerics | str | None = None, **changes) -> Numerics:
    """Replace the numerics model (a Numerics, or a named one: "per_product"), or change some
    switches of the current one; returns the previous one. A model set here stays in force
    across `af.target(...)` changes; `set_numerics()` goes back to the target's default.

    >>> import aneforge as af
    >>> old = af.set_numerics(rounding="half_away")      # old: the model in force before
    >>> _ = af.set_numerics()                            # back to the target's default
    """
    prev = get_numerics()
    if numerics is None and not changes:
        CTX.numerics = None
        return prev
    if isinstance(numerics, str):
        if numerics not in PRESETS:
            raise ValueError(f"no numerics model {numerics!r}; named models: {sorted(PRESETS)}")
        numerics, changes = prev, {**PRESETS[numerics], **changes}
    try:
        CTX.numerics = _changed(numerics or prev, tuple(sorted(changes.items())))
    except TypeError:                   # an unhashable value: the model's own check says why
        CTX.numerics = dataclasses.replace(numerics or prev, **changes)
    return prev


@functools.lru_cache(maxsize=256)
def _changed(base: Numerics, changes: tuple) -> Numerics:
    """`base` with some switches changed, made once per (model, changes): a `with
    af.numerics(...)` around each step of a loop then costs a dictionary lookup, not a new
    model's validation (~10 us)."""
    return dataclasses.replace(base, **dict(changes))


@contextlib.contextmanager
def numerics(model: str | None = None, **changes):
    """Use a changed numerics model inside a `with` block: switches, or a named model.

    >>> import aneforge as af
    >>> with af.numerics(matmul_products="fp16"):
    ...     pass
    >>> with af.numerics("per_product"):        # the simulator's earlier MAC model
    ...     (af.tensor([[4096.0] + [1.0] * 1024]) @ af.ones(1025, 1)).item()
    5120.0
    """
    raw = CTX.numerics                 # None (the target's default) comes back as None
    if model is not None or changes:
        set_numerics(model, **changes)
    try:
        yield get_numerics()
    finally:
        CTX.numerics = raw
