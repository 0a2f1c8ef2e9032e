"""The simulator's run plan for an executable that runs again and again (a training step):
every float value gets a fixed place in one float32 arena, assigned by lifetime (a place is
reused once its value is dead, as ExecuTorch's memory planning does), and each run of
consecutive elementwise ops and last-axis reductions becomes one compiled call over that arena
(aneforge/hardware/kernels/fused.py) instead of one numpy call and one rounding call per op. A pointwise
op from fp16 to fp16 (exp, erf, gelu, ...) joins such a run as a lookup in a table of its own
stored results for all 65536 fp16 inputs, and so does a chain of elementwise ops fed by one
fp16 value (`_composites`: a table of the chain's result); concat and pad write straight into
their places, reading their inputs through the slices and reshapes that make them
(runtime/layout.py), and chains of data movement are one strided copy (runtime/moves.py:
conv2d's column gradient); a reshape shares its input's place instead of copying it (`_aliases`);
matmul and linear run bound to their places (`OpDef.bind`: the kernel and its operands' layout
found once, the bias, the output port and the fp16 store one compiled pass where the result lies).

Int and bool values live in the arena too where float32 holds them exactly and every op that
makes or reads them runs fused: a bool as 1.0 / 0.0, an int when the plan bounds it within
+-2**24 and its dtype's range (`BOUNDS`: int16 labels, their casts and compares, small
constants; an int32 of unknown range stays with its kernels). So a loss's label handling
(cast, compare, select) fuses with the float ops around it.

The plan changes no value: each fused op computes in IEEE float32 and rounds once, as its
numpy kernel and the executor's store do (aneforge_tests/test_fused.py runs programs both
ways and compares the bits). A steady-state run writes into the same arena every time, so its
float values allocate nothing new and peak memory stays flat over a training loop.

`SimExecutable` builds the plan on its second run when the compiled kernels are on
(`ANEFORGE_SIM_PLAN`: "auto", the default; "always": from the first run; "never").
"""
from __future__ import annotations

import bisect
import functools
import math
import os
import sys
import threading
import weakref

import numpy as np

from .. import dtypes
from ..hardware import kernels
from ..ops import REGISTRY
from ..ops.registry import layout_ops
from . import layout, moves
from .fusing import BLOCK, BOUNDS, CHAINED, FUSED, REDUCE, exact, reduction, segments
from .steps import gather, nan_hazard

# ops whose result holds its input's elements in the same order: one flat loop over them
_SAME_ORDER = layout_ops("same_order")
_REORDER = layout_ops("reorder")
_FLOAT = (dtypes.float16, dtypes.float32)
_ALIGN = 16                 # elements (64 bytes): each value starts on a cache line
MODES = ("auto", "always", "never")
_TABLE = 1 << 16            # entries of a lookup table: one per fp16 bit pattern
_INTO = object()            # a step's store: its kernel writes into the result's place
_BOUND = object()           # a step's store: its bound kernel writes and stores it there
_MOVED = object()           # a step's store: its moves copy its results into their places
_F16 = np.dtype(np.float16)
_BOOL = (0, 1)
_OWN = 256                  # outputs this small are copied out of the shared buffer
_ENV, _STORE, _ROUND, _COPY = range(4)     # where a step's result goes (`RunPlan._stores`)
# what an element of a fused op costs against a multiply, where the VMs give the opcode a
# vectorized loop (others: a lookup's or more), and a lookup's own: its table is 128 KB, read
# at random by each element's bits (~6x a multiply over AdamW's 524k values), so a chain of a
# few of these runs as computed, not as a lookup (`_compose`)
_COST = {"add": 1, "sub": 1, "mul": 1, "copy": 1, "div_engine": 2, "maximum": 2, "minimum": 2,
         "abs": 1, "sqrt_engine": 2}
_LOOKUP_COST = 6



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


class RunPlan:
    """An executable's steps over an arena, with runs of fusable ops grouped into one call."""

    def __init__(self, exe, pairs=()):
        from ..hardware.kernels import compiled, fused
        self.exe, self._compiled, self._fused = exe, compiled, fused
        self.lock = threading.Lock()     # one run at a time uses the arena
        self.tables = {}                 # step -> its lookup table's offset (`_lookup`)
        self.opcode = {}                 # fused step -> its opcode's name (kernels/fused.py)
        self.repeat = {}                 # fused step -> its outer loop (`_outer`)
        self.reorders = {}               # reorder step -> the strides it reads x with, or None
        shapes = self._placement()
        # outputs and constants keep their places (a constant is written once, here)
        self.keep = {s for s, _ in exe.outputs} | {s for s, _ in exe.constants}
        self.segment = segments(shapes, [self.opcode.get(k) for k in range(len(shapes))],
                                 self.repeat)
        self.frees = [list(f) for f in exe.frees]     # `_composites` may keep values longer
        self.dead = self._composites(shapes)
        self.local = self._locals()
        self.peak = self._peaks(shapes)
        self.moves = self._moves(shapes)
        self.absorbed = self._absorb()
        self.alias = self._aliases()
        self.pairs = list(pairs)
        self.carry = self._carried(shapes)
        self.place, size = self._places()
        self.moved = self.moves.rows(self.place)
        self.views = {s: self.arena[o:o + size(s)].reshape(exe.info[s].shape)
                      for s, o in self.place.items() if s not in self.local}
        self.fp16 = {s for s in self.views if exe.info[s].dtype == dtypes.float16}
        self.start = list(exe.blank)       # each run's environment before its inputs
        for s, value in exe.constants:
            if s in self.views:
                self.views[s][...] = value
            else:
                self.start[s] = value           # int and bool constants stay as they are
        for s, v in self.views.items():
            self.start[s] = v
        self.entries = self._group(shapes)
        # reductions the fused run may leave to their kernel (`fused.run`: an unsettled max or
        # min; any but absmax, under the lean VM `fused.run_lean`): step -> (step as run, its
        # stores)
        self.unsettled = {k: (self._folded(k), self._stores(self.exe.steps[k]))
                          for k, name in self.opcode.items()
                          if self._fused.OP[name] >= self._fused.REDUCE}
        self.lookup = TABLES.array         # holds every table this plan's steps read
        self.ins = [(s, carrier, name, self.views.get(s),
                     self.views[s].reshape(-1) if s in self.views else None)
                    for (s, carrier), name in zip(exe.inputs, exe.input_names)]
        # the fp16 inputs with places, loaded in one call when of their places' shapes; the
        # other placed ones (int16 labels, bool masks: exact in float32) one by one
        self.placed_ins = [i for i, (s, carrier) in enumerate(exe.inputs)
                           if s in self.views and carrier is np.float32
                           and exe.info[s].dtype == dtypes.float16]
        fp16_ins = set(self.placed_ins)
        self.other_ins = [(i, carrier, name, view) for i, (s, carrier, name, view, _)
                          in enumerate(self.ins) if view is not None and i not in fp16_ins]
        self.in_shapes = [self.views[exe.inputs[i][0]].shape for i in self.placed_ins]
        self.in_spans = _spans([self.place[exe.inputs[i][0]] for i in self.placed_ins],
                               self.in_shapes)
        self.in_sizes = [math.prod(shape) for shape in self.in_shapes]
        # inputs whose place holds, after a run, the output they are fed back as (`_carried`):
        # (input index, output index); `held`: input index -> a weak reference to the array
        # the last run returned for it, which the next run need not load if given again
        self.resident = [(n, m) for n, m in self.pairs
                         if self.carry.get(exe.outputs[m][0]) == exe.inputs[n][0]]
        self.held: dict = {}
        self.env_ins = [(s, carrier, name, i) for i, (s, carrier, name, view, _)
                        in enumerate(self.ins) if view is None]
        # the program's outputs: (slot, its arena place flat and its shape, or None; dtype;
        # for an fp16 one with a place, its elements in the one buffer `outputs` fills)
        self.outs, at, spans = [], 0, []
        for s, dtype in exe.outputs:
            part = None
            if s in self.views and dtype == np.float16:
                spans.append(s)
                part, at = slice(at, at + self.views[s].size), at + self.views[s].size
            self.outs.append((s, self.views[s].reshape(-1) if s in self.views else None,
                              exe.info[s].shape, dtype, part))
        self.out_spans = _spans([self.place[s] for s in spans],
                                [self.views[s].shape for s in spans])
        self.buffers: list = []          # `outputs`' buffers, reused once no output is alive
        longest = max([int(code[:, 2:4].max()) for step, code, _ in self.entries
                       if step is None] + [BLOCK])
        self.scratch = [np.empty(longest, np.float32) for _ in range(3)]
        mode = exe.numerics.store_mode
        self.round16 = compiled._round16_ieee if mode & 3 == 0 else compiled._round16_any

    # -- building ----------------------------------------------------------------------------
    def _placement(self) -> list:
        """Which values get arena places (`self.placed`) and each step's loops (`_loops`).
        Float values of static shape are placed; an int or bool one only where float32 holds
        it exactly (`_bounds`) and the ops making and reading it all run fused (kernels read
        their own dtypes), found by dropping values until nothing changes."""
        exe = self.exe
        made = {s: k for k, step in enumerate(exe.steps) for s in step.outs}
        ends = {s for s, _ in exe.outputs} | {s for s, _, _ in exe.narrowed}
        bounded = set(self._bounds()) - ends
        self.placed = {s for s, slot in enumerate(exe.info) if slot.shape is not None
                       and (slot.dtype in _FLOAT or s in bounded)}
        while True:
            self.opcode, self.repeat = {}, {}
            shapes = [self._loops(k, op) for k, op in enumerate(exe.ops)]
            fused = {k for k, loops in enumerate(shapes) if loops is not None} | {None}
            # a bool a kernel makes is stored (0 / 1) into its place like any result (a
            # label's one-hot compare): only its readers must run fused
            drop = {s for s in self.placed & bounded
                    if (made.get(s) not in fused and exe.info[s].dtype != dtypes.bool_)
                    or not fused.issuperset(exe.readers.get(s, ()))}
            if not drop:
                return shapes
            self.placed -= drop

    def _bounds(self) -> dict:
        """slot -> (lo, hi) for the int and bool values float32 holds exactly: bools, int
        inputs of at most 16 bits, int constants, and what `BOUNDS` derives from them, each
        within +-2**24 and its dtype's range."""
        exe, bound = self.exe, {}
        for s, _ in exe.inputs:
            dtype = exe.info[s].dtype.np
            if dtype.kind in "iu" and dtype.itemsize <= 2:
                bound[s] = (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
        for s, value in exe.constants:
            if value.dtype.kind in "iub" and value.size:
                bound[s] = (int(value.min()), int(value.max()))
        for k, op in enumerate(exe.ops):
            ins, outs = [p for p in exe.steps[k].reads if p is not None], exe.steps[k].outs
            rule = BOUNDS.get(op.type)
            if len(outs) == 1 and rule is not None and not any(isinstance(p, tuple) for p in ins):
                got = [bound.get(p, _BOOL if exe.info[p].dtype == dtypes.bool_ else None)
                       for p in ins]
                bound[outs[0]] = None if None in got else rule(*got)
        for s, slot in enumerate(exe.info):
            if slot.dtype == dtypes.bool_:
                bound[s] = _BOOL
        return {s: b for s, b in bound.items() if b is not None and exact(exe.info[s].dtype, b)}

    def _loops(self, k, op):
        """(rows, cols, [(rs, cs) per operand], operand slots) when step k can run fused (its
        opcode's name noted in `self.opcode`), else None."""
        exe = self.exe
        step = exe.steps[k]
        outs = step.outs
        if len(outs) != 1 or outs[0] not in self.placed:
            return None
        ins = [p for p in step.reads if p is not None]
        if not ins or any(isinstance(p, tuple) or p not in self.placed for p in ins):
            return None
        name = self._opcode(k, op, ins)
        if name is None:
            return None
        if op.type in REDUCE:
            # a sequential fold may run over leading axes too (numpy's pairwise sum only
            # along a contiguous row)
            loops = reduction(exe.info[ins[0]].shape, step.attrs["axes"],
                               name not in ("sum", "mean"))
        else:
            out_shape = exe.info[outs[0]].shape
            if op.type in _SAME_ORDER:      # same elements, same order
                shape, strides = (math.prod(out_shape),), [[1]]
            elif op.type in _REORDER:       # x's elements read with strides of their own
                shape, strides = out_shape, [self._reordered(k)]
            else:
                shape, strides = out_shape, [_strides(exe.info[p].shape, out_shape) for p in ins]
            loops = _collapse(shape, strides)
            if loops is None and (REGISTRY[op.type].elementwise or name == "copy") and \
                    name != "lookup":
                loops = self._outer(k, shape, strides)
        if loops is None:
            return None
        self.opcode[k] = name
        return loops + (ins,)

    def _outer(self, k, shape, strides):
        """The loops of an elementwise op needing three (a per-channel operand of [N, C, H,
        W] values, as BatchNorm's): two for each entry of the leading axis, repeated as one
        row each (`self.repeat[k]`: count, the output's and each operand's step), or None."""
        loops = _collapse(shape[1:], [s[1:] for s in strides])
        if loops is not None:
            self.repeat[k] = (shape[0], math.prod(shape[1:]), [s[0] for s in strides])
        return loops

    def _opcode(self, k, op, ins) -> str | None:
        """The fused opcode's name step k runs as, or None (it runs its kernel)."""
        exe = self.exe
        x, out = exe.info[ins[0]], exe.info[exe.steps[k].outs[0]]
        if op.type in FUSED:
            return FUSED[op.type][exe.numerics.specials == "engine"]
        if op.type in _REORDER:         # a transpose: a copy reading x with strides
            return None if self._reordered(k) is None else "copy"
        if op.type == "tile":           # a tile of size-1 axes only is a broadcast copy
            reps = exe.steps[k].attrs["reps"]
            return None if any(r != 1 and n != 1 for n, r in zip(x.shape, reps)) else "copy"
        if op.type == "cast":           # float to int truncates: its kernel
            return "nonzero" if out.dtype == dtypes.bool_ else \
                None if out.dtype not in _FLOAT and x.dtype in _FLOAT else "copy"
        if op.type in REDUCE:
            if x.dtype not in _FLOAT or out.dtype not in _FLOAT:
                return None
            narrow = x.dtype == dtypes.float16 and exe.numerics.reduce_accumulate == "fp16"
            return REDUCE[op.type][narrow]
        return "lookup" if self._lookup(k, op, ins[0]) else None

    def _reordered(self, k) -> list | None:
        """The element strides, one per result axis, with which step k (a reorder: x's
        elements once each, in another order) reads its input x from x's start; None if no
        such strides give its map. Found once, by running its kernel on x's element numbers
        (exact in float64, as runtime/moves.py finds a chain's map): whatever the op."""
        if k not in self.reorders:
            step = self.exe.steps[k]
            x = self.exe.info[next(p for p in step.reads if p is not None)].shape
            ids = np.arange(math.prod(x), dtype=np.float64).reshape(x)
            self.reorders[k] = moves.affine(np.asarray(step.simulate(step.ctx, ids, **step.attrs)))
        return self.reorders[k]

    def _lookup(self, k, op, x) -> bool:
        """Whether step k runs as a lookup: a pointwise op from fp16 to fp16 whose result is
        rounded by the store. Its table (the step's own kernel and store over all 65536 fp16
        values, so the bits are the same by construction) is noted in `self.tables`."""
        exe = self.exe
        step = exe.steps[k]
        if not (REGISTRY[op.type].pointwise and step.store is not None
                and exe.info[x].dtype == dtypes.float16 == exe.info[step.outs[0]].dtype):
            return False
        key = (step.ctx.op_type, repr(sorted(step.attrs.items())), exe.numerics)
        at = TABLES.find(key, lambda: self._table(step))
        if at is None:
            return False
        self.tables[k] = at
        return True

    def _table(self, step):
        """A pointwise step's stored result for every fp16 bit pattern, as fp16 bits: its
        kernel, then the rounding a planned step's result gets (`run`); each rounded value is
        an fp16 value, so its bits hold it exactly (a NaN keeps no payload, as in the store)."""
        with np.errstate(all="ignore"):
            r = np.ascontiguousarray(step.simulate(step.ctx, _every_fp16(), **step.attrs),
                                     dtype=np.float32)
        stored = np.empty(_TABLE, np.float32)
        self._compiled.round16(np.broadcast_to(r, (_TABLE,)).copy(), stored,
                               self.exe.numerics.store_mode)
        return self._bits(stored)

    def _bits(self, values) -> np.ndarray:
        """A table's entries (fp16 values in float32) as fp16 bits."""
        table = np.empty(_TABLE, np.uint16)
        self._compiled.to_float16(np.ascontiguousarray(values, dtype=np.float32), table)
        return table

    def _composites(self, shapes) -> set:
        """Chains of elementwise fp16 ops fed by one fp16 value x (and scalar constants), as
        gelu's gradient is: each value such a chain makes that is read elsewhere becomes one
        lookup of x in a table of that value for every fp16 x (the chain's own kernels and
        stores evaluated on all 65536, so the bits are the same by construction), in the
        chain's fused segment. Returns the chain's steps no longer needed (their values are
        read only inside it); x lives until the last lookup reading it."""
        exe, root, members = self.exe, {}, {}
        self.constant = dict(exe.constants)
        for k, op in enumerate(exe.ops):
            x = self._chained(k, op, shapes, root)
            if x is not None:
                root[exe.steps[k].outs[0]] = x
                members.setdefault(x, []).append(k)
        made, composite = {exe.steps[k].outs[0]: k for k in range(len(exe.steps))}, {}
        for x, steps in members.items():
            inside = set(steps)
            for k in steps:
                v = exe.steps[k].outs[0]
                if v in self.keep or not inside.issuperset(exe.readers.get(v, ())):
                    chain = self._chain(k, root, made)
                    if len(chain) > 1 and self._compose(k, x, chain, shapes):
                        composite[k] = x
        return self._unneeded(composite, root)

    def _chained(self, k, op, shapes, root):
        """The one fp16 value step k's result is an elementwise function of (its inputs are
        it, values chained from it, or scalar constants), or None."""
        exe, constants = self.exe, self.constant
        out = exe.steps[k].outs[0]
        if shapes[k] is None or k in self.repeat or exe.info[out].dtype != dtypes.float16 or not (
                op.type in CHAINED or self.opcode[k] == "lookup"):
            return None
        ins = [p for p in exe.steps[k].reads if p is not None]
        if any(p in constants and constants[p].size != 1 for p in ins):
            return None
        sources = {root.get(p, p) for p in ins if p not in constants}
        x = sources.pop() if len(sources) == 1 else None
        ok = x is not None and exe.info[x] == exe.info[out]
        return x if ok else None

    def _chain(self, k, root, made) -> list:
        """The steps (in program order) making step k's result from its chain's value."""
        exe, todo, chain = self.exe, [k], set()
        while todo:
            j = todo.pop()
            chain.add(j)
            todo += [made[p] for p in exe.steps[j].reads if p in root and made[p] not in chain]
        return sorted(chain)

    def _compose(self, k, x, chain, shapes) -> bool:
        """Step k as a lookup of x in its chain's table, when every chain step runs in k's
        fused segment and a table is free."""
        exe = self.exe
        if any(self.segment[j] != self.segment[k] for j in chain):
            return False
        if sum(_COST.get(self.opcode[j], _LOOKUP_COST) for j in chain) <= _LOOKUP_COST:
            return False                # computing the chain is cheaper than looking it up
        key = ("chain", self._chain_key(x, chain), exe.numerics)
        at = TABLES.find(key, lambda: self._chain_table(x, chain))
        if at is None:
            return False
        self.tables[k], self.opcode[k] = at, "lookup"
        n = math.prod(exe.info[x].shape)
        shapes[k] = (1, n, [(0, 1)], [x])
        self._live_until(x, k)
        return True

    def _peaks(self, shapes) -> dict:
        """reduce_max over abs's result read by nothing else (automatic scaling's max |g| of
        every gradient): one `absmax` row reading abs's input, abs's step no longer runs and
        its result is never made (one pass over the gradient, not three). reduce_max step ->
        the abs step it took in."""
        exe, peak = self.exe, {}
        made = {step.outs[0]: k for k, step in enumerate(exe.steps) if len(step.outs) == 1}
        for j, name in list(self.opcode.items()):
            x = shapes[j][3][0] if name == "max" else None
            k = made.get(x)
            if k is None or self.opcode.get(k) != "abs" or k in self.dead or \
                    k in self.repeat or exe.readers.get(x) != [j] or x in self.keep:
                continue
            src = shapes[k][3][0]
            if src in self.local or exe.info[src].shape != exe.info[x].shape:
                continue
            shapes[j] = shapes[j][:3] + ([src],)
            self.opcode[j], peak[j] = "absmax", k
            self.dead.add(k)
            self._live_until(src, j)
        return peak

    def _folded(self, k):
        """Step k as its kernel runs it when the fused run leaves it unsettled: an `absmax`
        row as abs's kernel and store, then reduce_max's kernel."""
        step = self.exe.steps[k]
        if k not in self.peak:
            return step
        a = self.exe.steps[self.peak[k]]

        def simulate(ctx, x, **attrs):
            y = a.simulate(a.ctx, x, **a.attrs)
            return step.simulate(ctx, y if a.store is None else a.store[0](y), **attrs)
        return step._replace(simulate=simulate, reads=a.reads)

    def _carried(self, shapes) -> dict:
        """Outputs written over the inputs they replace: `pairs` (input index, output index)
        name an output the caller feeds back as that input on the next run (a parameter, an
        optimizer's state: sim.SimExecutable finds them); such an output takes its input's
        place when its fused elementwise row is the input's last reader or comes after it,
        reading it, if at all, element by element where it writes (a blocked run reads each
        block before writing it; an unblocked one reads the whole value first). The input's
        place is then never given to another value. New value's slot -> old value's slot."""
        exe, carry = self.exe, {}
        self.late = {}                  # new value -> its step, made in a block place first
        made = {step.outs[0]: k for k, step in enumerate(exe.steps) if len(step.outs) == 1}
        freed = {s: k for k, f in enumerate(self.frees) for s in f}
        shared = set(self.alias) | set(self.alias.values())
        for n, m in self.pairs:
            i, o = exe.inputs[n][0], exe.outputs[m][0]
            k = made.get(o)
            if k is None or k in self.dead or shapes[k] is None or o in carry or \
                    i in carry.values() or self._fused.OP[self.opcode[k]] >= self._fused.REDUCE:
                continue
            rows, cols, strides, ins = shapes[k]
            aligned = all(cs == 1 and (rows == 1 or rs == cols)
                          for p, (rs, cs) in zip(ins, strides) if p == i)
            if aligned and exe.info[i] == exe.info[o] and exe.info[o].dtype == dtypes.float16 \
                    and exe.inputs[n][1] is np.float32 and {i, o} <= self.placed and \
                    not {i, o} & (shared | self.local | self.keep - {o} | self.moves.unwritten) \
                    and k not in self.repeat and (freed.get(i, -1) <= k or self._late(i, o, k)):
                carry[o] = i
                if freed.get(i, -1) > k:
                    self.late[o] = k
        return carry

    def _late(self, i, o, k) -> bool:
        """Whether new value o, made by step k of a fused segment that reads the old value i
        after it (a compensated update: p' = p + u, then (p' - p) - u), can be made in a place
        of its own (one block's, in a blocked segment) and copied over i at the segment's end
        (`_late_copies`): every later reader of i and every reader of o runs in that segment
        (a blocked one runs each block through all its ops before the next block), o's as
        elementwise rows (a reduction the run leaves to its kernel would read o's own place,
        not yet written)."""
        seg, readers, fold = self.segment, self.exe.readers, self._fused.REDUCE
        return seg[k] is not None and \
            all(seg[r] == seg[k] for r in readers.get(i, ()) if r > k) and \
            all(seg[r] == seg[k] and self._fused.OP[self.opcode[r]] < fold
                for r in readers.get(o, ()))

    def _aliases(self) -> dict:
        """Reshapes (same-order ops the fused runs would copy) whose result shares its
        input's place: the same elements in the same order, and neither is ever written again.
        Result slot -> the value whose place it takes; their steps no longer run."""
        exe, alias = self.exe, {}
        for k, step in enumerate(exe.steps):
            if k in self.dead or self.opcode.get(k) != "copy" or exe.ops[k].type not in \
                    _SAME_ORDER:
                continue
            x, out = next(p for p in step.reads if p is not None), step.outs[0]
            if {x, out} & self.local or not {x, out} <= self.placed:
                continue
            alias[out] = alias.get(x, x)
            self.dead.add(k)
        return alias

    def _moves(self, shapes):
        """Chains of data-movement steps composed into strided copies (runtime/moves.py):
        their inner steps no longer run, the values the copies read live until them."""
        found = moves.Moves(self.exe, shapes, self.placed, self.local, self.keep, self.dead)
        self.dead |= found.dead
        for k, read in found.sources.items():
            for s in read:
                self._live_until(s, k)
        return found

    def _live_until(self, s, k) -> None:
        """Value s lives at least until step k (freed after it, not before)."""
        last = next((j for j in range(len(self.frees) - 1, -1, -1) if s in self.frees[j]), None)
        if last is not None and last < k:
            self.frees[last].remove(s)
            self.frees[k].append(s)

    def _absorb(self) -> dict:
        """Steps writing into their places that read inputs through view steps
        (runtime/layout.py): step -> (its reads, the chains of view steps). The chains' steps
        no longer run (`self.dead`); the values they start from live until the step."""
        exe, found = self.exe, {}
        made = {s: k for k, step in enumerate(exe.steps) for s in step.outs}
        for k, (reads, chains) in layout.absorptions(exe, self.keep, made).items():
            inner = [j for c in layout.each(chains) for j in c]
            starts = [s for p in reads for s in (p if isinstance(p, tuple) else (p,))
                      if s is not None]
            out = exe.steps[k].outs[0]
            # a moved step (runtime/moves.py) no longer reads what its chain started from
            if out not in self.placed or out in self.local or k in self.dead or \
                    self.dead.intersection(inner) or self.local.intersection(starts) or \
                    self.moves.pieces.keys() & {k, *inner} or \
                    self.moves.unwritten.intersection(starts):
                continue
            found[k] = (reads, chains)
            self.dead.update(inner)
            for j in inner:                       # what the chain's steps freed, freed now
                self.frees[k] += self.frees[j]
                self.frees[j] = []
            for s in starts:
                self._live_until(s, k)
        return found

    def _chain_key(self, x, chain) -> tuple:
        """A chain's structure: its ops, attributes, wiring and constants' values."""
        exe, constants, index, parts = self.exe, self.constant, {x: 0}, []
        for j in chain:
            step = exe.steps[j]
            refs = tuple(None if p is None else index[p] if p in index else
                         ("const", repr(constants[p].reshape(-1).tolist())) for p in step.reads)
            parts.append((step.ctx.op_type, repr(sorted(step.attrs.items())), refs))
            index[step.outs[0]] = len(index)
        return tuple(parts)

    def _chain_table(self, x, chain):
        """The chain's last value for every fp16 x, as fp16 bits: each step's kernel and
        store, as the interpreter runs them, on all 65536 values at once."""
        exe, constants = self.exe, self.constant
        value = {x: _every_fp16()}
        with np.errstate(all="ignore"):
            for j in chain:
                step = exe.steps[j]
                args = [None if p is None else value[p] if p in value else
                        constants[p].reshape(()) for p in step.reads]
                r = step.simulate(step.ctx, *args, **step.attrs)
                stored = r if step.store is None else step.store[0](r)
                value[step.outs[0]] = np.broadcast_to(stored, (_TABLE,))
        return self._bits(value[exe.steps[chain[-1]].outs[0]])

    def _unneeded(self, composite, root) -> set:
        """Chain steps whose results no step still reads (composites read only x)."""
        exe, dead = self.exe, set()
        for k in reversed(range(len(exe.steps))):
            v = exe.steps[k].outs[0] if len(exe.steps[k].outs) == 1 else None
            if v not in root or k in composite or v in self.keep:
                continue
            if all(r in dead or r in composite for r in exe.readers.get(v, ())):
                dead.add(k)
        return dead

    def _locals(self) -> set:
        """Values made and used only inside one blocked segment: they never exist whole, just
        one block at a time (a place of BLOCK elements)."""
        exe, seg, readers = self.exe, self.segment, self.exe.readers
        local = set()
        for k, step in enumerate(exe.steps):
            if seg[k] is None or not seg[k][1]:
                continue
            for s in step.outs:
                inside = readers.get(s) and all(seg[r] == seg[k] for r in readers[s])
                if inside and s not in self.keep:
                    local.add(s)
        return local

    def _places(self):
        """Arena places by lifetime. Inside a blocked segment, values that die keep their
        place until the segment ends (its blocks read every value block by block); its local
        values take BLOCK-element places, each passed on to a later local once its value is
        dead (each block runs the ops in order), all given back when the segment ends (a
        whole value made inside it must not get one: the next block rewrites it)."""
        exe, arena, place, seg = self.exe, Arena(), {}, self.segment

        def size(s):
            return math.prod(exe.info[s].shape)
        # a value made late (`_late`): its place (a block's in a blocked segment) for good
        self.late_at = {o: arena.take(BLOCK if seg[k][1] else size(o))
                        for o, k in self.late.items()}
        for s, _ in exe.constants + exe.inputs:
            if s in self.placed and s not in place:
                place[s] = arena.take(size(s))
        pending, blocks, spare = [], [], []     # blocks: the segment's local places
        taken, carried = set(self.peak.values()), set(self.carry.values())
        sharing = {}                     # a place shared by aliases: how many still alive
        for s, root in self.alias.items():
            sharing[root] = sharing.get(root, 1) + 1
        for k, (step, frees) in enumerate(zip(exe.steps, self.frees)):
            for s in step.outs:
                if s in self.alias:
                    place[s] = place[self.alias[s]]
                elif s in self.carry:
                    place[s] = place[self.carry[s]]
                elif (s in self.local and k in self.dead) or k in taken:
                    continue            # a chain step a lookup replaced, an abs an absmax
                                        # took in: no row writes it
                elif s in self.local and spare:
                    place[s] = spare.pop()
                elif s in self.local:
                    place[s] = arena.take(BLOCK)
                    blocks.append(place[s])
                elif s in self.placed and s not in place and s not in self.moves.unwritten:
                    place[s] = arena.take(size(s))
            pending += [s for s in frees if s in place and s not in self.keep
                        and s not in self.local and s not in carried]
            spare += [place[s] for s in frees if s in self.local and s in place]
            blocked = seg[k] is not None and seg[k][1]
            if not blocked or k + 1 == len(seg) or seg[k + 1] != seg[k]:
                for s in pending:
                    root = self.alias.get(s, s)
                    sharing[root] = sharing.get(root, 1) - 1
                    if not sharing[root]:
                        arena.give(place[s], size(s))
                for at in blocks:
                    arena.give(at, BLOCK)
                pending, blocks, spare = [], [], []
        self.arena = np.zeros(max(arena.size, 1), np.float32)
        return place, size

    def _row(self, k, loops):
        """Step k's row of fused code (kernels/fused.py)."""
        exe, p, name = self.exe, self.row_place, self.opcode[k]
        outs = exe.steps[k].outs
        rows, cols, st, ins = loops
        st, ins = st + st[:1] * (3 - len(st)), ins + ins[:1] * (3 - len(ins))
        blocked = self.segment[k][1]
        flags = sum(1 << i for i, s in enumerate((outs[0], *ins))
                    if s in self.local or (blocked and s in self.late))
        # exact ops (data movement, select) store their values as they are, as the executor
        # does; a lookup's table holds stored results
        rnd = self._rounding(k) if name != "lookup" else -1
        b = (self.tables[k] if name == "lookup" else self._rounding(self.peak[k])
             if name == "absmax" else exe.numerics.mode if exe.ops[k].type in REDUCE
             else p[ins[1]])
        row = [self._fused.OP[name], rnd, rows, cols, p[outs[0]], p[ins[0]], *st[0], b,
               *st[1], flags, p[ins[2]], *st[2], k]
        if k not in self.repeat:
            return [row]
        count, out_step, steps = self.repeat[k]
        steps = steps + steps[:1] * (3 - len(steps))
        at = self._fused.ROW.index
        shift = {at("out"): out_step, at("a"): steps[0], at("b"): steps[1], at("c"): steps[2]}
        return [[v + i * shift.get(j, 0) for j, v in enumerate(row)] for i in range(count)]

    def _rounding(self, k) -> int:
        """The fp16 store mode step k's result is rounded with, or -1 (kept as computed: an
        exact op, an fp32, int or bool result)."""
        exe = self.exe
        fp16 = exe.info[exe.steps[k].outs[0]].dtype == dtypes.float16
        return exe.numerics.store_mode if fp16 and exe.steps[k].store is not None else -1

    def _group(self, shapes):
        """The entries a run executes: (step, the values it frees off the arena, `_stores`) for
        an op run by its kernel, and (None, code, block) for each segment of fused ops (blocked
        or not)."""
        entries, code = [], []
        self.row_place = {**self.place, **self.late_at}    # rows make a late value in its block
        for k, loops in enumerate(shapes):
            if loops is None:
                if k in self.dead:                # absorbed into a later step
                    continue
                step = self._gather(k) if k in self.moved else self._direct(k)
                entries.append((step, [s for s in self.frees[k] if s not in self.views],
                                self._stores(step)))
                continue
            if k not in self.dead:
                code += self._row(k, loops)
            if code and (k + 1 == len(shapes) or self.segment[k + 1] != self.segment[k]):
                code += self._late_copies(self.segment[k])
                block = BLOCK if self.segment[k][1] else 0
                entries.append((None, np.array(code, np.int64), block))
                code = []
        return entries

    def _late_copies(self, segment) -> list:
        """The rows ending a segment that made values late (`_late`): each copied from its
        place of its own (a block's, in a blocked segment) into its input's, after every op of
        the segment has read the input (in a blocked one: the input's block)."""
        at, rows = self._fused.ROW.index, []
        for o, k in self.late.items():
            if self.segment[k] == segment:
                row = [0] * self._fused.WIDTH
                for field, v in (("opcode", self._fused.OP["copy"]), ("store", -1), ("rows", 1),
                                 ("cols", math.prod(self.exe.info[o].shape)),
                                 ("out", self.place[o]), ("a_cs", 1), ("b_cs", 1), ("c_cs", 1),
                                 ("local", 14 if segment[1] else 0), ("step", k)):
                    row[at(field)] = v
                row[at("a")] = row[at("b")] = row[at("c")] = self.late_at[o]
                rows.append(row)
        return rows

    def _stores(self, step) -> list:
        """How a step's results reach their places: (slot, kind, view, flat view, store fn)
        each, kind _ENV (kept as is, off the arena), _STORE (its store, off the arena),
        _ROUND (rounded to fp16 into its place) or _COPY (copied into its place)."""
        store, out = step.store, []
        for i, s in enumerate(step.outs):
            view = self.views.get(s)
            if view is None:
                kind = _ENV if store is None or store is _INTO else _STORE
            else:
                kind = _ROUND if store is not None and s in self.fp16 else _COPY
            # a copy into a place goes through the store too (a bool's 0 / 1, as held)
            put = store[i] if kind in (_STORE, _COPY) and isinstance(store, list) else None
            out.append((s, kind, view, None if view is None else view.reshape(-1), put))
        return out

    def _gather(self, k):
        """Step k as its moves (runtime/moves.py): each result copied in strided pieces."""
        calls = [functools.partial(self._compiled.move, self.arena, rows, out, n,
                                   np.float32(0.0 if fill is None else fill), fill is not None)
                 for out, n, fill, rows in self.moved[k]]
        return self.exe.steps[k]._replace(simulate=self.moves.runner(k, calls, self.views),
                                          store=_MOVED)

    def _direct(self, k):
        """Step k as the run executes it: an exact op that can write its one result straight
        into the result's arena place (`OpDef.into`) does; an fp16 op with a bound form over
        places (`OpDef.bind`: matmul) whose operands all have places runs that, its result
        stored in its place (the store folded into the bound kernel's last pass); others
        return it."""
        step = self.exe.steps[k]
        opdef = REGISTRY[step.ctx.op_type]
        if k in self.absorbed:                    # its inputs read through views
            reads, chains = self.absorbed[k]
            return step._replace(simulate=functools.partial(
                layout.inline, opdef.into, layout.steps_of(self.exe, chains)), reads=reads,
                store=_INTO)
        if len(step.outs) != 1 or step.outs[0] not in self.views:
            return step
        if opdef.into is not None and step.store is None:
            return step._replace(simulate=opdef.into, store=_INTO)
        if opdef.bind is None or step.outs[0] not in self.fp16 or \
                any(p is not None and p not in self.views for p in step.reads):
            return step
        bound = opdef.bind(step.ctx, self.views[step.outs[0]],
                           *[None if p is None else self.views[p] for p in step.reads],
                           **step.attrs)
        return step if bound is None else step._replace(simulate=bound, store=_BOUND)

    # -- running -----------------------------------------------------------------------------
    def _load(self, env, inputs) -> None:
        """The program's inputs into their arena places: the fp16 inputs of the planned sizes
        in one compiled pass over their bits side by side (cast, NaN check and coercion:
        `from_float16_spans`; a call per input cost ~1 us), others as the interpreter carries
        them."""
        exe = self.exe
        for s, carrier, name, i in self.env_ins:
            env[s] = exe.carried(inputs[i], carrier, name)
        for i, carrier, name, view in self.other_ins:
            np.copyto(view, exe.carried(inputs[i], carrier, name).reshape(view.shape),
                      casting="unsafe")
        held, self.held = self.held, {}       # (a run that fails leaves nothing trusted)
        order, spans, sizes = self.placed_ins, self.in_spans, self.in_sizes
        if held:                              # what the last run left in place: not loaded
            take = [k for k, i in enumerate(order) if i not in held or
                    held[i]() is not inputs[i] or inputs[i].flags.writeable]
            order, spans = [order[k] for k in take], spans[take]
            sizes = [sizes[k] for k in take]
        arrays = [inputs[i] for i in order]
        if not arrays:
            return
        bits = np.concatenate(arrays, axis=None)
        if bits.dtype != _F16 or [a.size for a in arrays] != sizes:
            for i, a in zip(order, arrays):
                s, carrier, name, view, _ = self.ins[i]
                np.copyto(view, exe.carried(a, carrier, name).reshape(view.shape),
                          casting="unsafe")
            return
        coerce = exe.numerics.specials == "engine"
        nans = np.zeros(len(arrays), np.int64)
        self._compiled.from_float16_spans(bits.view(np.uint16), spans, self.arena, coerce, nans)
        if coerce and nans.any():
            for i, nan in zip(order, nans):
                if nan:
                    nan_hazard(exe.input_names[i], int(nan))

    def outputs(self, env) -> list:
        """The program's outputs after a run: new arrays (the arena is rewritten next run). The
        fp16 ones read from their places by one compiled cast into one buffer (numpy's cast
        takes ~10 ns an element, a call per output ~1 us); an output of at most `_OWN`
        elements gets its own copy, so a kept loss does not keep the buffer alive."""
        bits = self._buffer()
        self._compiled.to_float16_spans(self.arena, self.out_spans, bits)
        half, out = bits.view(np.float16), []
        for s, flat, shape, dtype, part in self.outs:
            if part is not None:
                value = half[part].reshape(shape)
                out.append(value.copy() if value.size <= _OWN else value)
            elif flat is None:
                out.append(kernels.astype(env[s], dtype))
            else:
                out.append(np.array(flat, dtype).reshape(shape))
        self._hold(out)
        return out

    def _buffer(self) -> np.ndarray:
        """A buffer for the fp16 outputs: one that no array handed out still views (its only
        references: the pool's, this loop's and the count's), else a new one. A training
        step's outputs are fed back and dropped a step later, so two buffers alternate: no
        new megabytes to fault in each step (~60 ns a page)."""
        for bits in self.buffers:
            if sys.getrefcount(bits) == 3:
                return bits
        bits = np.empty(self.out_spans[:, 1].sum(), np.uint16)
        self.buffers = [bits] + self.buffers[:1]       # a buffer still viewed is let go
        return bits

    def _hold(self, out) -> None:
        """The outputs fed back as inputs whose places hold them (`resident`): the next run
        given these very arrays skips loading them (their values are in place, bit for bit:
        fp16 values, NaN-free under the engine's specials, as loading would leave them). The
        arrays become read-only, so no write into them in place can go unseen: one made
        writeable again (`Tensor.numpy()` hands the user a writeable array, as torch's shares
        its storage) is loaded again; a new value (`p.data.copy_`, `load_state_dict`) is a new
        array, loaded."""
        for n, m in self.resident:              # weakly: the caller decides what lives
            out[m].flags.writeable = False
            self.held[n] = weakref.ref(out[m])

    def run(self, inputs):
        env = list(self.start)
        self._load(env, inputs)
        with np.errstate(all="ignore"):
            for step, frees, stores in self.entries:
                if step is None:              # a fused segment: `frees` holds its code
                    self._fused_run(env, frees, stores)
                    continue
                self._call(env, step, stores)
                for s in frees:
                    env[s] = None
        return env

    def _fused_run(self, env, code, block) -> None:
        """One fused segment; a reduction it leaves unsettled runs its kernel, then the rest."""
        k = self._fused.run(self.arena, code, *self.scratch, block, self.lookup, 0)
        while k >= 0:
            self._call(env, *self.unsettled[int(code[k, -1])])
            k = self._fused.run(self.arena, code, *self.scratch, block, self.lookup, k + 1)

    def _call(self, env, step, stores) -> None:
        """A step run by its kernel, its results put as `_stores` says."""
        simulate, ctx, reads, attrs, outs, store = step
        if store is _INTO:
            simulate(ctx, stores[0][2], *gather(env, reads), **attrs)
            return
        if store is _MOVED:
            simulate()
            return
        if store is _BOUND:               # its result finished in place, stored too
            simulate()
            return
        res = simulate(ctx, *gather(env, reads), **attrs)
        for (s, kind, view, flat, put), r in zip(stores, (res,) if len(outs) == 1 else res):
            if kind == _ROUND:
                src = np.ascontiguousarray(r, dtype=np.float32)
                if src.size != flat.size:
                    src = np.ascontiguousarray(np.broadcast_to(src, view.shape))
                self.round16(src.reshape(-1), flat, self.exe.numerics.store_mode)
            elif kind == _COPY:
                np.copyto(view, r if put is None else put(r), casting="unsafe")
            else:
                env[s] = r if kind == _ENV else put(r)


def _spans(places, shapes) -> np.ndarray:
    """[(arena offset, elements)] of values, as the span kernels read them."""
    return np.array([(at, math.prod(shape)) for at, shape in zip(places, shapes)],
                    np.int64).reshape(-1, 2)


def _every_fp16() -> np.ndarray:
    """Every fp16 bit pattern's value, in bit order, as float32 (a lookup table's inputs)."""
    return np.arange(_TABLE, dtype=np.uint16).view(np.float16).astype(np.float32)
