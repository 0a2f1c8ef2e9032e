"""The run plan's moves: chains of data-movement steps composed into one copy of strided
pieces per value a computing step reads.

conv2d's column gradient is the case that pays: for each of a 3x3 kernel's taps, a split part
is reshaped, interleaved with zeros (a stride), sliced and padded, once per spatial axis —
up to six numpy calls a tap, each writing a whole intermediate value, for what is one copy of
the tap's gradient (and its zeros) into a padded grid. Here the chain's own kernels run once,
at planning, on element numbers instead of values (float64 holds them exactly; each pad's
constant is replaced by a negative sentinel): the result says, for each element, which
element of which source value lands there. That map is cut into strided pieces (each
source's elements form a box whose places are affine in the box's index: a copy of up to four
loops), and the run does the pad's fill, then each piece (`kernels.compiled.move`). Values are
moved, never computed: a moved value's bits are its source's, as the steps would place them.

A slice whose width crop may saturate (`slice_by_index`'s `_width_crop`: M1/M2's x16 gain
before the store) moves behind a guard (`GUARDS`): each run first tests its input as the
crop's own first test does (max |x| * gain under the store's overflow), and only then copies;
an input that fails (a value past 4094, or a NaN) runs the chain's steps by their kernels,
which report the hazard and place what the crop makes. conv2d's im2col (nine such slices of
the padded input, stacked by one concat) and max pool's strided slices are the cases that pay:
one test of the input, not one per slice, and a compiled copy for numpy's slices and concat.

What is left as it was: chains of a single kernel step (nothing to compose: numpy's copy is
as fast), a computing step without a guard (a pad that reflects) and what reads its result,
a guarded step reading a value the chain itself makes (its test needs the value whole), a
map that cuts into no pieces (not affine per source, nor in BLOCKS blocks of the result), and
values living one block at a time in a blocked fused run.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..ops.registry import LAYOUTS, REGISTRY, layout_ops
from .layout import VIEWS

# every exact data-movement op (`OpDef.layout`): its result is its inputs' elements (and a pad's
# constant), so a chain of them is one map from result element to source element
MOVES = layout_ops(*LAYOUTS)
# the moves the run plan may also run as fused strided copies (a transpose): a chain takes
# them as it takes a kernel step, and they run fused where no chain does
REORDERS = layout_ops("reorder")
_FUSED_CHAINED = VIEWS | REORDERS
LOOPS = 4                    # loops of a piece (`kernels.compiled.move`)
WIDTH = 2 + 3 * LOOPS        # a piece's row: source, destination, then sizes and both strides
BLOCKS = 4096               # pieces of one value at most (`Moves._blocks`)
_OVERFLOW = np.float32(65520.0)     # the fp16 store's first value rounding to inf


def _no_crop(ctx, x) -> bool:
    """Whether no slice of x goes through the width crop's gain: `_width_crop`'s own first
    test (aneforge/ops/shape.py), max |x| * gain under the store's overflow, on all of x (a
    NaN fails it). Passing it, every slice of x is its elements moved."""
    gain = ctx.numerics.width_slice_gain
    return gain is None or not x.size or \
        bool(max(x.max(), -x.min()) * np.float32(gain) < _OVERFLOW)


# computing data-movement ops a chain takes in behind a guard: op -> guard(ctx, its input's
# value), true when on that input the op only moves elements
GUARDS = {"slice_by_index": _no_crop}


class Moves:
    """The composed chains of one executable. `pieces`: step -> [(result slot, fill or None,
    pieces relative to the sources' and the result's places)]; `dead`: the chain steps that
    no longer run; `unwritten`: the values only they made (no place); `sources`: step -> the
    values its pieces (or its guards' fallback) read (they live until it); `guards`: step ->
    [(guard, ctx, the slot it tests)] for the guarded steps its chain composes; `steps`:
    step -> the chain steps it composes, in order (what its fallback runs)."""

    def __init__(self, exe, shapes, placed, local, keep, dead):
        self.exe, self.shapes = exe, shapes
        refused: set = set()
        while True:
            chain = self._chain(placed, local, keep, dead, refused)
            out = self._materialized(chain, keep)
            self.origin, self.end = {}, 0
            self.pieces, failed = self._compose(chain, out)
            if not failed:
                break
            refused |= failed
        self.dead = {k for k in chain if k not in out}
        self.unwritten = {s for k in self.dead for s in exe.steps[k].outs}
        self.sources = {k: {s for _, _, ps in parts for s, _ in ps}
                        for k, parts in self.pieces.items()}
        self.steps, self.guards = {}, {}
        for k in self.pieces:
            steps = self._ancestors(k, chain)
            guarded = [j for j in steps if _computes(exe.steps[j])]
            if guarded:
                self.steps[k] = steps
                self.guards[k] = [(GUARDS[exe.ops[j].type], exe.steps[j].ctx,
                                   _slots(exe.steps[j].reads)[0]) for j in guarded]
                made = {s for j in steps for s in exe.steps[j].outs}
                self.sources[k] |= {s for j in steps for s in _slots(exe.steps[j].reads)
                                    if s not in made}

    # -- which steps ------------------------------------------------------------------------
    def _chain(self, placed, local, keep, dead, refused) -> set:
        """The chain steps: data movement over placed whole values, each composed result
        gaining at least two kernel steps, or a split's several (numpy copies each part into
        its place by a call of its own)."""
        chain = self._closed(self._chainable(placed, local, dead, refused), keep)
        while True:
            out = self._materialized(chain, keep)
            single = {k for k in out if self._kernel_steps(k, chain) < 2 and
                      len(self.exe.steps[k].outs) == 1}
            if not single:
                return chain
            chain = self._closed(chain - single, keep)

    def _chainable(self, placed, local, dead, refused) -> set:
        """Data-movement steps over placed, whole values (no block-local one): run by their
        kernels, fused same-order copies (a reshape) or fused reorders; a computing one only
        behind a guard (`GUARDS`). None reading a value a computing step outside them makes,
        even through views (`_cropped`)."""
        exe, found = self.exe, set()
        for k, step in enumerate(exe.steps):
            slots = set(_slots(step.reads)) | set(step.outs)
            if k in dead or k in refused or step.ctx.op_type not in MOVES or \
                    step.store is not None or not slots <= placed or slots & local or \
                    (_computes(step) and step.ctx.op_type not in GUARDS):
                continue
            if self.shapes[k] is None or step.ctx.op_type in _FUSED_CHAINED:
                found.add(k)
        while True:
            cropped = self._cropped(found)
            drop = {k for k in found if cropped.intersection(_slots(exe.steps[k].reads))}
            if not drop:
                return found
            found -= drop

    def _cropped(self, chainable) -> set:
        """Values a computing step other than `chainable`'s makes, and views of them."""
        out = set()
        for k, step in enumerate(self.exe.steps):
            if (_computes(step) and k not in chainable) or (
                    step.ctx.op_type in VIEWS and out.intersection(_slots(step.reads))):
                out.update(step.outs)
        return out

    def _closed(self, chain, keep) -> set:
        """`chain` without the fused copies whose result a step outside it reads (a fused
        segment reads its place): from the last step back, so the copies before see it."""
        exe = self.exe
        for k in sorted(chain, reverse=True):
            if self.shapes[k] is not None and any(
                    s in keep or not chain.issuperset(exe.readers.get(s, ()))
                    for s in exe.steps[k].outs):
                chain.discard(k)
        return chain

    def _materialized(self, chain, keep) -> dict:
        """Chain steps run by their kernels whose results a step outside the chain reads (or
        the program keeps): step -> those results."""
        exe, out = self.exe, {}
        for k in chain:
            mine = [s for s in exe.steps[k].outs
                    if s in keep or not chain.issuperset(exe.readers.get(s, ()))]
            if mine:
                out[k] = mine
        return out

    def _kernel_steps(self, k, chain) -> int:
        """How many steps run by their kernels (or as fused reorders, each a strided pass of
        its own) step k's result composes (k included); a guarded one counts twice (its
        kernel tests its input, then copies: a move tests once, in a compiled pass)."""
        exe = self.exe
        return sum((self.shapes[j] is None or exe.ops[j].type in REORDERS) +
                   _computes(exe.steps[j]) for j in self._ancestors(k, chain))

    def _ancestors(self, k, chain) -> list:
        """The chain steps step k's result composes (k included), in program order."""
        exe = self.exe
        made = {s: j for j in chain for s in exe.steps[j].outs}
        todo, seen = [k], set()
        while todo:
            j = todo.pop()
            if j not in seen:
                seen.add(j)
                todo += [made[s] for s in _slots(exe.steps[j].reads) if s in made]
        return sorted(seen)

    # -- the maps -----------------------------------------------------------------------------
    def _compose(self, chain, out):
        """Each materialized value's pieces, from the chain's kernels run on element
        numbers; and the steps whose maps do not cut into pieces."""
        exe, ids, pieces, failed = self.exe, {}, {}, set()
        made = {s: j for j in chain for s in exe.steps[j].outs}
        self._fills = []                 # each pad's constant, numbered by its sentinel
        for k in sorted(chain):
            step = exe.steps[k]
            if _computes(step):          # its guard tests its input whole: not a chain's
                failed.update(made[s] for s in _slots(step.reads) if s in made)
            args = [None if p is None else tuple(self._ids(s, ids) for s in p)
                    if isinstance(p, tuple) else self._ids(p, ids) for p in step.reads]
            attrs, fill = dict(step.attrs), REGISTRY[step.ctx.op_type].fill
            if fill is not None:         # numbered by a negative sentinel element
                self._fills.append(np.float32(attrs[fill]))
                attrs[fill] = -float(len(self._fills))
            res = step.simulate(step.ctx, *args, **attrs)
            for s, r in zip(step.outs, (res,) if len(step.outs) == 1 else res):
                ids[s] = np.ascontiguousarray(r, dtype=np.float64)
            if k in out:
                parts = [self._cut(s, ids[s]) for s in out[k]]
                if None in parts:
                    failed.add(k)
                else:
                    pieces[k] = parts
        return pieces, failed

    def _ids(self, s, ids):
        """Value s's element numbers: made by a chain step, or a source's own range."""
        if s not in ids:
            shape = self.exe.info[s].shape
            self.origin[s], self.end = self.end, self.end + math.prod(shape)
            ids[s] = np.arange(self.origin[s], self.end, dtype=np.float64).reshape(shape)
        return ids[s]

    def _cut(self, s, numbers):
        """(s, its fill or None, [(source, piece relative to the places)]) for a map (the
        result's element numbers, shaped as the result), or None when it holds two different
        fills or no pieces fit it. Each source's elements in source order first; a map that
        reads a source element twice (conv2d's im2col: the taps overlap) or is not affine
        that way, in the result's order, block by block along its leading axes (`_blocks`)."""
        sentinels = np.unique(numbers[numbers < 0])
        fills = {self._fills[int(-1 - v)].tobytes() for v in sentinels}
        if len(fills) > 1:
            return None
        fill = self._fills[int(-1 - sentinels[0])] if len(sentinels) else None
        flat = numbers.reshape(-1)
        at = np.flatnonzero(flat >= 0)
        order = np.argsort(flat[at], kind="stable")
        sorted_ids, places = flat[at][order].astype(np.int64), at[order]
        pieces = None if np.any(np.diff(sorted_ids) == 0) else self._pieces(sorted_ids, places)
        if pieces is None:
            pieces = self._blocks(numbers, 0, [])
        return None if pieces is None else (s, fill, pieces)

    def _pieces(self, ids, places):
        """[(source, piece)] moving element numbers `ids` to `places`, a piece per source in
        the given order; None if one is not nested affine loops."""
        starts = sorted(self.origin.values())
        owner = {self.origin[v]: v for v in self.origin}
        group = np.searchsorted(starts, ids, side="right") - 1
        pieces = []
        for g in np.unique(group):
            mine = group == g
            piece = _piece(ids[mine] - starts[g], places[mine])
            if piece is None:
                return None
            pieces.append((owner[starts[g]], piece))
        return pieces

    def _blocks(self, numbers, at, found):
        """`found` + the pieces of a block of the result (its element numbers, `at` its first
        place), in the result's order: the block whole, else each entry of its leading axis
        on its own; None past BLOCKS pieces or when a single row does not fit."""
        flat = numbers.reshape(-1)
        inside = np.flatnonzero(flat >= 0)
        pieces = self._pieces(flat[inside].astype(np.int64), at + inside) if inside.size else []
        if pieces is not None:
            found += pieces
            return found if len(found) <= BLOCKS else None
        if numbers.ndim < 2:
            return None
        step = numbers[0].size
        for i in range(numbers.shape[0]):
            if self._blocks(numbers[i], at + i * step, found) is None:
                return None
        return found

    def runner(self, k, calls, views):
        """Step k's copies (`calls`, no arguments each) as one function of no arguments: behind
        its guards, tested on their inputs' places (`views`) first, where it has some."""
        if k not in self.guards:
            return lambda: [c() for c in calls]
        tests = [functools.partial(guard, ctx, views[s]) for guard, ctx, s in self.guards[k]]

        def guarded():
            if all(test() for test in tests):
                for c in calls:
                    c()
            else:
                self.rerun(k, views)
        return guarded

    def rerun(self, k, views) -> None:
        """Step k's results as its chain's steps make them, by their kernels (the fallback of
        a guard that fails): each chain value held as its step returns it, the sources read
        from their places, the results copied into theirs."""
        exe, value = self.exe, {}
        for j in self.steps[k]:
            step = exe.steps[j]
            args = [None if p is None else tuple(value.get(s, views.get(s)) for s in p)
                    if isinstance(p, tuple) else value.get(p, views.get(p)) for p in step.reads]
            res = step.simulate(step.ctx, *args, **step.attrs)
            value.update(zip(step.outs, (res,) if len(step.outs) == 1 else res))
        for s, _, _ in self.pieces[k]:
            np.copyto(views[s], value[s])

    def rows(self, place) -> dict:
        """step -> [(result's offset, its size, fill or None, pieces as int64 rows over the
        arena)] once the places are known."""
        out = {}
        for k, parts in self.pieces.items():
            out[k] = []
            for s, fill, pieces in parts:
                rows = np.array([[place[src] + p[0], place[s] + p[1], *p[2:]]
                                 for src, p in pieces], np.int64).reshape(-1, WIDTH)
                out[k].append((place[s], math.prod(self.exe.info[s].shape), fill, rows))
        return out


def _piece(src, dst):
    """One piece copying elements src (ascending) to places dst: (source start, destination
    start, sizes, source strides, destination strides), LOOPS each, when the pairs are nested
    affine loops (the innermost run of equal steps, repeated with equal steps, ...); else
    None."""
    loops = []
    while src.size > 1:
        steps = np.flatnonzero((np.diff(src) != src[1] - src[0]) | (np.diff(dst) != dst[1] - dst[0]))
        n = int(steps[0]) + 1 if steps.size else src.size
        if src.size % n or len(loops) == LOOPS:
            return None
        a, b = src.reshape(-1, n), dst.reshape(-1, n)
        ramp = np.arange(n)
        if not (np.array_equal(a, a[:, :1] + ramp * (src[1] - src[0])) and
                np.array_equal(b, b[:, :1] + ramp * (dst[1] - dst[0]))):
            return None
        loops.insert(0, (n, int(src[1] - src[0]), int(dst[1] - dst[0])))
        src, dst = a[:, 0], b[:, 0]
    loops = [(1, 0, 0)] * (LOOPS - len(loops)) + loops
    return (int(src[0]), int(dst[0]), *[n for n, _, _ in loops], *[a for _, a, _ in loops],
            *[b for _, _, b in loops])


def affine(numbers: np.ndarray) -> list | None:
    """Strides (one per axis) with which `numbers[i, j, ...]` is `i * s0 + j * s1 + ...`, or
    None if no strides give it."""
    strides = [int(numbers[(0,) * a + (1,)].flat[0]) if n > 1 else 0
               for a, n in enumerate(numbers.shape)]
    grid = sum([np.arange(n).reshape((-1,) + (1,) * (numbers.ndim - a - 1)) * st
                for a, (n, st) in enumerate(zip(numbers.shape, strides))], np.zeros((), np.int64))
    return strides if np.array_equal(numbers, np.broadcast_to(grid, numbers.shape)) else None


def _slots(reads) -> list:
    return [s for p in reads if p is not None for s in (p if isinstance(p, tuple) else (p,))]


def _computes(step) -> bool:
    """A data-movement step whose result is more than its inputs' elements moved (the op's
    `alters`: a pad that reflects or replicates, a slice through the width crop's gain)."""
    alters = REGISTRY[step.ctx.op_type].alters
    return alters is not None and alters(step.ctx, step.attrs)
