"""The simulator's run plan for an executable that runs again and again (a training step):
every float value gets a fixed place in one float32 arena, assigned by lifetime (a place is
reused once its value is dead, as ExecuTorch's memory planning does), and each run of
consecutive elementwise ops becomes one compiled call over that arena
(aneforge/kernels/fused.py) instead of one numpy call and one rounding call per op. A pointwise
op from fp16 to fp16 (exp, erf, gelu, ...) joins such a run as a lookup in a table of its own
stored results for all 65536 fp16 inputs; concat and pad write straight into their places.

The plan changes no value: each fused op computes in IEEE float32 and rounds once, as its
numpy kernel and the executor's store do (aneforge_tests/test_fused.py runs programs both
ways and compares the bits). A steady-state run writes into the same arena every time, so its
float values allocate nothing new and peak memory stays flat over a training loop.

`SimExecutable` builds the plan on its second run when the compiled kernels are on
(`ANEFORGE_SIM_PLAN`: "auto", the default; "always": from the first run; "never").
"""
from __future__ import annotations

import bisect
import math
import os
import threading

import numpy as np

from .. import dtypes, kernels
from ..ops import REGISTRY
from .steps import gather, nan_hazard

# MIL op -> (opcode under IEEE specials, opcode under the engine's specials): the ops whose
# numpy kernel is one IEEE float32 operation per element (aneforge/ops/elementwise.py,
# relu in activations.py).
FUSED = {
    "add": ("add", "add"), "sub": ("sub", "sub"), "mul": ("mul", "mul"),
    "real_div": ("div", "div_engine"), "maximum": ("maximum", "maximum"),
    "minimum": ("minimum", "minimum"), "abs": ("abs", "abs"),
    "sqrt": ("sqrt", "sqrt_engine"), "relu": ("relu", "relu"),
    # data movement and float casts: a copy, rounded when the result is fp16
    "reshape": ("copy", "copy"), "expand_dims": ("copy", "copy"), "squeeze": ("copy", "copy"),
    "identity": ("copy", "copy"), "cast": ("copy", "copy"),
}
_FLOAT = (dtypes.float16, dtypes.float32)
_ALIGN = 16                 # elements (64 bytes): each value starts on a cache line
BLOCK = 1024                # elements per block of a blocked run (a few fit in the level-1 cache)
MODES = ("auto", "always", "never")
_TABLE = 1 << 16            # entries of a lookup table: one per fp16 bit pattern
_INTO = object()            # a step's store: its kernel writes into the result's place
_F16 = np.dtype(np.float16)
_ENV, _STORE, _ROUND, _COPY = range(4)     # where a step's result goes (`Plan._stores`)


class _Tables:
    """Every lookup table this process has built, each once per (op, attributes, numerics) and
    shared by every plan, in one array reserved for LIMIT tables at the first (its pages are
    only backed as tables are written): the array never moves, so every plan reads the same
    one and offsets stay valid. Entries are the fp16 bits of the stored results (each is an
    fp16 value), 128 KB a table: half a float32 table's share of the cache between steps."""

    LIMIT = 128     # tables (16 MB): past it, pointwise ops of new kinds are computed

    def __init__(self):
        self.array, self.offset, self.lock = _NO_TABLES, {}, threading.Lock()

    def find(self, key, build) -> int | None:
        """The offset of key's table, built now if new; None once LIMIT tables exist."""
        with self.lock:
            if key not in self.offset:
                if self.array is _NO_TABLES:
                    self.array = np.empty(self.LIMIT * _TABLE, np.uint16)
                at = len(self.offset) * _TABLE
                if at >= self.array.size:
                    return None
                self.array[at:at + _TABLE] = build()
                self.offset[key] = at
            return self.offset[key]

    def clear(self) -> None:
        """Forget every table (plans built before keep reading the array they hold)."""
        with self.lock:
            self.array, self.offset = _NO_TABLES, {}


_NO_TABLES = np.zeros(1, np.uint16)
TABLES = _Tables()


def mode() -> str:
    value = os.environ.get("ANEFORGE_SIM_PLAN", "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(f"ANEFORGE_SIM_PLAN must be one of {MODES}, got {value!r}")
    return value


def _collapse(shape, operands):
    """The output `shape` and each operand's element strides (0 where it broadcasts) merged
    into at most two loops (R, C); None if they need more."""
    dims = [[n] + [s[i] for s in operands] for i, n in enumerate(shape) if n != 1]
    merged = []
    for d in dims:
        if merged:
            last = merged[-1]
            if all(last[j + 1] == d[j + 1] * d[0] for j in range(len(operands))):
                merged[-1] = [last[0] * d[0]] + d[1:]
                continue
        merged.append(d)
    if len(merged) > 2:
        return None
    while len(merged) < 2:
        merged.insert(0, [1] + [0] * len(operands))
    (rows, *rs), (cols, *cs) = merged
    return rows, cols, list(zip(rs, cs))


def _strides(shape, out_shape):
    """C-order element strides of an operand of `shape` broadcast to `out_shape`."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(0 if n == 1 else step)
        step *= n
    strides.reverse()
    return [0] * (len(out_shape) - len(shape)) + strides


class Arena:
    """Places for values by lifetime: first fit in a list of free extents."""

    def __init__(self):
        self.size, self.free = 0, []          # free: sorted [start, length]

    def take(self, n: int) -> int:
        n = -(-max(n, 1) // _ALIGN) * _ALIGN
        for k, (start, length) in enumerate(self.free):
            if length >= n:
                if length == n:
                    del self.free[k]
                else:
                    self.free[k] = [start + n, length - n]
                return start
        if self.free and self.free[-1][0] + self.free[-1][1] == self.size:
            start = self.free.pop()[0]        # grow the free tail
        else:
            start = self.size
        self.size = start + n
        return start

    def give(self, start: int, n: int) -> None:
        n = -(-max(n, 1) // _ALIGN) * _ALIGN
        k = bisect.bisect(self.free, [start, n])
        self.free.insert(k, [start, n])
        if k + 1 < len(self.free) and start + n == self.free[k + 1][0]:    # join the next
            self.free[k][1] += self.free.pop(k + 1)[1]
        if k and self.free[k - 1][0] + self.free[k - 1][1] == start:        # and the previous
            self.free[k - 1][1] += self.free.pop(k)[1]


class Plan:
    """An executable's steps over an arena, with runs of fusable ops grouped into one call."""

    def __init__(self, exe):
        from ..kernels import compiled, fused
        self.exe, self._compiled, self._fused = exe, compiled, fused
        self.lock = threading.Lock()     # one run at a time uses the arena
        self.tables = {}                 # step -> its lookup table's offset (`_lookup`)
        shapes = [self._loops(k, op) for k, op in enumerate(exe.ops)]
        # outputs and constants keep their places (a constant is written once, here)
        self.keep = {s for s, _ in exe.outputs} | {s for s, _ in exe.constants}
        self.segment = _segments(shapes)
        self.local = self._locals()
        self.place, size = self._places()
        self.views = {s: self.arena[o:o + size(s)].reshape(exe.info[s][0])
                      for s, o in self.place.items() if s not in self.local}
        self.fp16 = {s for s in self.views if exe.info[s][1] == dtypes.float16}
        self.start = list(exe.blank)       # each run's environment before its inputs
        for s, value in exe.constants:
            if s in self.views:
                self.views[s][...] = value
            else:
                self.start[s] = value           # int and bool constants stay as they are
        for s, v in self.views.items():
            self.start[s] = v
        self.entries = self._group(shapes)
        self.lookup = TABLES.array         # holds every table this plan's steps read
        self.ins = [(s, carrier, name, self.views.get(s),
                     self.views[s].reshape(-1) if s in self.views else None)
                    for (s, carrier), name in zip(exe.inputs, exe.input_names)]
        # the program's outputs: (slot, its arena place flat and its shape, or None; dtype)
        self.outs = [(s, self.views[s].reshape(-1) if s in self.views else None,
                      exe.info[s][0], dtype) for s, dtype in exe.outputs]
        longest = max([int(code[:, 2:4].max()) for step, code, _ in self.entries
                       if step is None] + [BLOCK])
        self.sx, self.sy = np.empty(longest, np.float32), np.empty(longest, np.float32)

    # -- building ----------------------------------------------------------------------------
    def _floating(self, s) -> bool:
        shape, dtype = self.exe.info[s]
        return dtype in _FLOAT and shape is not None

    def _loops(self, k, op):
        """(rows, cols, [(rs, cs) per operand], operand slots) when step k can run fused, else
        None."""
        exe = self.exe
        fn, ctx, plan, attrs, outs, store = exe.steps[k]
        if len(outs) != 1 or not self._floating(outs[0]):
            return None
        ins = [p for p in plan if p is not None]
        if not ins or any(isinstance(p, tuple) or not self._floating(p) for p in ins):
            return None
        if op.type == "tile":           # a tile of size-1 axes only is a broadcast copy
            if any(r != 1 and n != 1 for n, r in zip(exe.info[ins[0]][0], attrs["reps"])):
                return None
        elif op.type not in FUSED:
            if not self._lookup(k, op, ins[0]):
                return None
        out_shape = exe.info[outs[0]][0]
        if op.type in FUSED and FUSED[op.type][0] == "copy":    # same elements, same order
            shape, strides = (math.prod(out_shape),), [[1]]
        else:
            shape, strides = out_shape, [_strides(exe.info[p][0], out_shape) for p in ins]
        loops = _collapse(shape, strides)
        return None if loops is None else loops + (ins,)

    def _lookup(self, k, op, x) -> bool:
        """Whether step k runs as a lookup: a pointwise op from fp16 to fp16 whose result is
        rounded by the store. Its table (the step's own kernel and store over all 65536 fp16
        values, so the bits are the same by construction) is noted in `self.tables`."""
        exe = self.exe
        step = exe.steps[k]
        if not (REGISTRY[op.type].pointwise and step[5] is not None
                and exe.info[x][1] == dtypes.float16 == exe.info[step[4][0]][1]):
            return False
        fn, ctx, _, attrs, _, _ = step
        key = (ctx.op_type, repr(sorted(attrs.items())), exe.numerics)
        at = TABLES.find(key, lambda: self._table(step))
        if at is None:
            return False
        self.tables[k] = at
        return True

    def _table(self, step):
        """A pointwise step's stored result for every fp16 bit pattern, as fp16 bits: its
        kernel, then the rounding a planned step's result gets (`run`); each rounded value is
        an fp16 value, so its bits hold it exactly (a NaN keeps no payload, as in the store)."""
        fn, ctx, _, attrs, _, _ = step
        every = np.arange(_TABLE, dtype=np.uint16).view(np.float16).astype(np.float32)
        with np.errstate(all="ignore"):
            r = np.ascontiguousarray(fn(ctx, every, **attrs), dtype=np.float32)
        stored = np.empty(_TABLE, np.float32)
        self._compiled.round16(np.broadcast_to(r, every.shape).copy(), stored,
                               self.exe.numerics.store_mode)
        table = np.empty(_TABLE, np.uint16)
        self._compiled.to_float16(stored, table)
        return table

    def _locals(self) -> set:
        """Values made and used only inside one blocked segment: they never exist whole, just
        one block at a time (a place of BLOCK elements)."""
        exe, seg, readers = self.exe, self.segment, self.exe.readers
        local = set()
        for k, step in enumerate(exe.steps):
            if seg[k] is None or not seg[k][1]:
                continue
            for s in step[4]:
                inside = readers.get(s) and all(seg[r] == seg[k] for r in readers[s])
                if inside and s not in self.keep:
                    local.add(s)
        return local

    def _places(self):
        """Arena places by lifetime. Inside a blocked segment, values that die keep their
        place until the segment ends (its blocks read every value block by block), and its
        local values share BLOCK-element places for the segment's duration."""
        exe, arena, place, seg = self.exe, Arena(), {}, self.segment

        def size(s):
            return math.prod(exe.info[s][0])
        for s, _ in exe.constants + exe.inputs:
            if self._floating(s) and s not in place:
                place[s] = arena.take(size(s))
        pending, local = [], []
        for k, (step, frees) in enumerate(zip(exe.steps, exe.frees)):
            for s in step[4]:
                if s in self.local:
                    place[s] = arena.take(BLOCK)
                    local.append(s)
                elif self._floating(s) and s not in place:
                    place[s] = arena.take(size(s))
            pending += [s for s in frees if s in place and s not in self.keep
                        and s not in self.local]
            blocked = seg[k] is not None and seg[k][1]
            if not blocked or k + 1 == len(seg) or seg[k + 1] != seg[k]:
                for s in pending:
                    arena.give(place[s], size(s))
                for s in local:
                    arena.give(place[s], BLOCK)
                pending, local = [], []
        self.arena = np.zeros(max(arena.size, 1), np.float32)
        return place, size

    def _row(self, k, loops):
        """Step k's row of fused code (kernels/fused.py)."""
        exe, p = self.exe, self.place
        op, outs, store = exe.ops[k], exe.steps[k][4], exe.steps[k][5]
        rows, cols, st, ins = loops
        st = st + st[:1] if len(st) == 1 else st
        ins = ins + ins[:1] if len(ins) == 1 else ins
        local = [s in self.local for s in (outs[0], ins[0], ins[1])]
        if k in self.tables:            # the table holds stored results: no rounding after
            return [self._fused.LOOKUP, -1, rows, cols, p[outs[0]], p[ins[0]], st[0][0],
                    st[0][1], self.tables[k], 0, 0, local[0] | local[1] << 1]
        name = "copy" if op.type == "tile" else FUSED[op.type][exe.numerics.specials == "engine"]
        opcode = self._fused.OP[name]
        # exact ops (data movement) store their values as they are, as the executor does
        fp16 = exe.info[outs[0]][1] == dtypes.float16
        rnd = exe.numerics.store_mode if fp16 and store is not None else -1
        flags = local[0] | local[1] << 1 | local[2] << 2
        return [opcode, rnd, rows, cols, p[outs[0]], p[ins[0]], st[0][0], st[0][1],
                p[ins[1]], st[1][0], st[1][1], flags]

    def _group(self, shapes):
        """The entries a run executes: (step, the values it frees off the arena, `_stores`) for
        an op run by its kernel, and (None, code, block) for each segment of fused ops (blocked
        or not)."""
        exe, entries, code = self.exe, [], []
        for k, loops in enumerate(shapes):
            if loops is None:
                step = self._direct(k)
                entries.append((step, [s for s in exe.frees[k] if s not in self.views],
                                self._stores(step)))
                continue
            code.append(self._row(k, loops))
            if k + 1 == len(shapes) or self.segment[k + 1] != self.segment[k]:
                block = BLOCK if self.segment[k][1] else 0
                entries.append((None, np.array(code, np.int64), block))
                code = []
        return entries

    def _stores(self, step) -> list:
        """How a step's results reach their places: (slot, kind, view, flat view, store fn)
        each, kind _ENV (kept as is, off the arena), _STORE (its store, off the arena),
        _ROUND (rounded to fp16 into its place) or _COPY (copied into its place)."""
        _, _, _, _, outs, store = step
        out = []
        for i, s in enumerate(outs):
            view = self.views.get(s)
            if view is None:
                kind = _ENV if store is None or store is _INTO else _STORE
            else:
                kind = _ROUND if store is not None and s in self.fp16 else _COPY
            put = store[i] if kind == _STORE else None
            out.append((s, kind, view, None if view is None else view.reshape(-1), put))
        return out

    def _direct(self, k):
        """Step k as the run executes it: an exact op that can write its one result straight
        into the result's arena place (`OpDef.into`) does; others return it."""
        fn, ctx, plan, attrs, outs, store = step = self.exe.steps[k]
        into = REGISTRY[ctx.op_type].into
        if into is None or store is not None or len(outs) != 1 or outs[0] not in self.views:
            return step
        return into, ctx, plan, attrs, outs, _INTO

    # -- running -----------------------------------------------------------------------------
    def _load(self, env, inputs) -> None:
        """The program's inputs into their arena places: an fp16 input of the planned shape in
        one compiled pass (cast, NaN check and coercion), others as the interpreter carries
        them."""
        exe, load16 = self.exe, self._fused.load16
        coerce = exe.numerics.specials == "engine"
        for (s, carrier, name, view, flat), a in zip(self.ins, inputs):
            if view is None:
                env[s] = exe.carried(a, carrier, name)
            elif a.dtype == _F16 and a.shape == view.shape:
                nan = load16(a.reshape(-1).view(np.uint16), flat, coerce)
                if nan and coerce:
                    nan_hazard(name, nan)
            else:
                np.copyto(view, exe.carried(a, carrier, name), casting="unsafe")

    def outputs(self, env) -> list:
        """The program's outputs after a run: new arrays (the arena is rewritten next run), an
        fp16 one read from its place by the compiled cast (numpy's takes ~10 ns an element)."""
        out, to16 = [], self._compiled.to_float16
        for s, flat, shape, dtype in self.outs:
            if flat is None:
                out.append(kernels.astype(env[s], dtype))
            elif dtype == np.float16:
                bits = np.empty(flat.size, np.uint16)
                to16(flat, bits)
                out.append(bits.view(np.float16).reshape(shape))
            else:
                out.append(np.array(flat, dtype).reshape(shape))
        return out

    def run(self, inputs):
        env = list(self.start)
        self._load(env, inputs)
        compiled, mode = self._compiled, self.exe.numerics.store_mode
        round16 = compiled._round16_ieee if mode & 3 == 0 else compiled._round16_any
        with np.errstate(all="ignore"):
            for step, frees, stores in self.entries:
                if step is None:              # a fused segment: `frees` holds its code
                    self._fused.run(self.arena, frees, self.sx, self.sy, stores, self.lookup)
                    continue
                fn, ctx, plan, attrs, outs, store = step
                if store is _INTO:
                    fn(ctx, stores[0][2], *gather(env, plan), **attrs)
                else:
                    res = fn(ctx, *gather(env, plan), **attrs)
                    for (s, kind, view, flat, put), r in zip(stores, (res,) if len(outs) == 1
                                                             else res):
                        if kind == _ROUND:
                            src = np.ascontiguousarray(r, dtype=np.float32)
                            if src.size != flat.size:
                                src = np.ascontiguousarray(np.broadcast_to(src, view.shape))
                            round16(src.reshape(-1), flat, mode)
                        elif kind == _COPY:
                            np.copyto(view, r, casting="unsafe")
                        else:
                            env[s] = r if kind == _ENV else put(r)
                for s in frees:
                    env[s] = None
        return env


def _segments(shapes) -> list:
    """For each step: None (runs its own kernel), or (segment number, blocked). A segment is
    a maximal run of consecutive fusable steps; it is blocked when every op in it is one flat
    range of the same length (operands contiguous or one value) of at least 2 BLOCK."""
    def key(loops):
        rows, cols, st, _ = loops
        flat = rows == 1 and all(cs in (0, 1) for _, cs in st)
        return cols if flat and cols >= 2 * BLOCK else None
    out, number = [], 0
    for k, loops in enumerate(shapes):
        if loops is None:
            out.append(None)
            continue
        blocked = key(loops) is not None
        prev = shapes[k - 1] if k else None
        if not (prev is not None and key(prev) == key(loops)):
            number += 1
        out.append((number, blocked))
    return out
