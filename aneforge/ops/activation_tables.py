"""The ANE's activation lookup tables, reconstructed (`Numerics.activations="tables"`).

The engine evaluates sigmoid, tanh, gelu, silu ... from 33-knot piecewise-linear tables: the
input picks one of 32 segments, the value is `slope * x + intercept`, and past the end knots it
is the function's asymptote (sbryngelson/ane-guide, part-1-machine/03-numerics.md). The book
publishes the figures, not the knots; these tables are a reconstruction consistent with them
(docs/numerics.md, "Activation tables", derives every constant below):

- knots symmetric about 0 in index, graded by sinh: knot k of the 16 on each side sits at
  `end * sinh(beta * k / 16) / sinh(beta)`, finer near 0 (`beta` -> 0 is uniform);
- a `"knots"` table passes through the function at its knots; a `"lowered"` table moves each
  knot value by the mean of its two segments' half chord-gaps (the signed midpoint of the
  piece's deviation from its chord), the continuous form of each segment's minimax line: it
  sits below a convex piece at its knots, which is what gives gelu(0) and silu(0) their bias.

Coefficients are float32 here: rounding the intercepts to fp16 puts one-ulp steps at some knots
that would make sigmoid non-monotone; the result is rounded to fp16 once, as every op's.

`Table` evaluates the knots (the definition); `Lookup` holds its values at every fp16 input and
reads them by the input's bits, which is how the simulator runs the tables (M1's default).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

HALF = 16                    # segments on each side of the middle knot: 32 segments, 33 knots


@dataclass(frozen=True)
class TableSpec:
    """How one table is built: the exact function (float64), its domain, grading, fit and the
    asymptotes it clamps to below and above the domain."""
    fn: Callable
    lo: float
    hi: float
    beta: float
    fit: str                 # "knots" | "lowered"
    below: Callable
    above: Callable


def knots(lo: float, hi: float, beta: float) -> np.ndarray:
    """33 knots: 0 in the middle, 16 on each side graded by sinh (finer near 0)."""
    g = np.sinh(beta * np.arange(HALF + 1) / HALF) / np.sinh(beta)
    return np.concatenate([lo * g[:0:-1], hi * g])


def _half_gaps(fn, t: np.ndarray) -> np.ndarray:
    """Per segment: the midpoint of the chord's deviation range over the piece, (max + min) / 2
    of chord - fn on 2001 points (positive on a convex piece)."""
    a, b = t[:-1, None], t[1:, None]
    xs = a + (b - a) * np.linspace(0.0, 1.0, 2001)
    chord = fn(a) + (fn(b) - fn(a)) / (b - a) * (xs - a)
    dev = chord - fn(xs)
    return (dev.max(1) + dev.min(1)) / 2


def knot_values(spec: TableSpec, t: np.ndarray) -> np.ndarray:
    v = spec.fn(t)
    if spec.fit == "lowered":
        h = _half_gaps(spec.fn, t)
        v = v - np.concatenate([h[:1], (h[:-1] + h[1:]) / 2, h[-1:]])
    return v


@dataclass(frozen=True)
class Table:
    knots: np.ndarray        # float32 [33]
    slope: np.ndarray        # float32 [32]
    intercept: np.ndarray    # float32 [32]
    below: Callable
    above: Callable

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The table at x (float32): one searchsorted and a gather, no per-element Python.
        The definition; `Lookup` reads the same values from the input's bits."""
        i = np.clip(np.searchsorted(self.knots, x, side="right") - 1, 0, 2 * HALF - 1)
        with np.errstate(invalid="ignore", over="ignore"):    # past the ends the clamps decide
            y = self.slope[i] * x + self.intercept[i]
        y = np.where(x > self.knots[-1], self.above(x), y)
        y = np.where(x < self.knots[0], self.below(x), y)
        return np.where(np.isnan(x), x, y).astype(np.float32)


# An fp16 value held in a float32 has its low 13 fraction bits zero (10 fraction bits, and a
# subnormal's at most 10 significant bits once normalised), so `bits >> 13` indexes it exactly.
SHIFT = np.uint32(13)


@dataclass(frozen=True)
class Lookup:
    """A table evaluated once at every float32 whose low 13 bits are zero (2**19 of them: every
    fp16 value, inf and NaN included): evaluating it is a shift and a gather, bit-identical to
    `Table` for fp16-valued inputs."""
    table: Table
    values: np.ndarray       # float32 [2**19]

    def __call__(self, x: np.ndarray, fp16: bool = True) -> np.ndarray:
        if not fp16:                     # an fp32 activation: values off the fp16 grid
            return self.table(x)
        x = np.ascontiguousarray(x, np.float32)
        return self.values[x.view(np.uint32) >> SHIFT]


def lookup(table: Table) -> Lookup:
    keys = np.arange(2 ** 19, dtype=np.uint32) << SHIFT
    return Lookup(table, table(keys.view(np.float32)))


def build(spec: TableSpec) -> Table:
    t = knots(spec.lo, spec.hi, spec.beta)
    v = knot_values(spec, t)
    slope = np.diff(v) / np.diff(t)
    return Table(t.astype(np.float32), slope.astype(np.float32),
                 (v[:-1] - slope * t[:-1]).astype(np.float32), spec.below, spec.above)


def tabled(spec: TableSpec):
    """A kernel `f(x, fp16=True)` evaluating spec's table, built on first use (not at import):
    fp16-valued inputs through the bit-indexed `Lookup`, others through the `Table`."""
    table = functools.cache(lambda: lookup(build(spec)))
    return lambda x, fp16=True: table()(x, fp16)
