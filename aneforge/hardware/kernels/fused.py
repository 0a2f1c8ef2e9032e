"""Fused runs: a straight-line sequence of elementwise ops and reductions over one float32
arena, executed by one compiled call (numba; imported only when numba is installed and on).

Each op is a row of `code` (int64), its fields named below (`ROW`):

    opcode, store, R, C, out, a, a_rs, a_cs, b, b_rs, b_cs, local, c, c_rs, c_cs, step

An elementwise op's output is the contiguous R x C block at arena offset `out`; operand a's
element (r, c) is `arena[a + r * a_rs + c * a_cs]` (a stride of 0 broadcasts), likewise b and
c (c: select's third operand). In a blocked run (`run`'s block > 0), bits 0-3 of `local` mark
the output, a, b and c as values that exist one block at a time: their place holds the current
block only. A `lookup` op reads its result from the table of TABLE values at offset `b` of
`tables`, indexed by the fp16 bits of a (the plan fills it with the fp16 bits of the op's own
stored result for every fp16 value: uint16, half the cache of float32 entries, converted
exactly on read). Comparisons write 1.0 or 0.0 (a bool value in the arena), `select` reads a
as its condition (nonzero: true) and picks b or c, `nonzero` is the cast to bool.

A reduction (opcodes from REDUCE on) writes R contiguous values at `out`, value r folding the
C terms a + r * a_rs + c * a_cs in order: `sum16` / `mean16` with a running fp16 accumulator
rounded under mode `b` after each added term (the narrow reduce_sum), `sum` / `mean` as numpy
sums a contiguous float32 row (its pairwise sum, `_pairwise`; a_cs = 1 only), `max` / `min`
as numpy's (NaN wins), `absmax` as abs and its store (mode `b`, or -1: none) followed by max
(the plan's form of max |x|, `RunPlan._peaks`). A zero maximum of a row holding both +0 and
-0 takes its sign from numpy's vector lanes, which this loop does not model: `run` stops
before such a row's op and the plan runs that op's kernel.

`store` is the fp16 rounding mode of the result (`kernels.mode`), or -1 to keep the float32
value (an fp32, int or bool result, or an exact op). Every op computes in IEEE float32 and
rounds once, exactly as the op's numpy kernel followed by the executor's store
(aneforge/runtime/sim.py): the results are bit-identical to the unfused path
(aneforge_tests/test_fused.py), NaN payloads aside (a NaN keeps no payload through the
engine's store, and the model does not define one).
"""
from __future__ import annotations

import sys

import numpy as np
from numba import njit

from .casts import _bits, _float, _from_half_bits, _to_half_bits, _unowned
from .compiled import r16, r16_ieee

# The opcodes, named by what they run: the one table of their numbers. An op's OpDef names
# its opcodes (`fused`, `fold`: aneforge/ops/registry.py) and the run plan maps them here;
# the compiled functions below compare against the named numbers, never a literal. The
# reductions come last (from REDUCE on).
OPCODES = ("add", "sub", "mul", "div", "div_engine", "maximum", "minimum", "abs", "sqrt",
           "sqrt_engine", "relu", "copy", "less", "less_equal", "greater", "greater_equal",
           "equal", "not_equal", "nonzero", "logical_not", "select", "lookup",
           "sum16", "mean16", "sum", "mean", "max", "min", "absmax")
OP = {name: i for i, name in enumerate(OPCODES)}
SELECT, LOOKUP, REDUCE = OP["select"], OP["lookup"], OP["sum16"]
# numba reads module-level ints as constants of the compiled code
_ADD, _SUB, _MUL, _DIV, _DIV_ENGINE = OP["add"], OP["sub"], OP["mul"], OP["div"], OP["div_engine"]
_MAXIMUM, _MINIMUM, _ABS, _SQRT = OP["maximum"], OP["minimum"], OP["abs"], OP["sqrt"]
_SQRT_ENGINE, _RELU = OP["sqrt_engine"], OP["relu"]
_LESS, _LESS_EQUAL, _GREATER = OP["less"], OP["less_equal"], OP["greater"]
_GREATER_EQUAL, _EQUAL, _NOT_EQUAL = OP["greater_equal"], OP["equal"], OP["not_equal"]
_NONZERO, _LOGICAL_NOT, _COPY = OP["nonzero"], OP["logical_not"], OP["copy"]
_SUM16, _MEAN16, _SUM, _MEAN = OP["sum16"], OP["mean16"], OP["sum"], OP["mean"]
_MAX, _MIN, _ABSMAX = OP["max"], OP["min"], OP["absmax"]
ROW = ("opcode", "store", "rows", "cols", "out", "a", "a_rs", "a_cs", "b", "b_rs", "b_cs",
       "local", "c", "c_rs", "c_cs", "step")
WIDTH = len(ROW)    # int64 fields per op; `step`: the plan's step the row runs
TABLE = 1 << 16     # a lookup's table: the op's stored result for each fp16 bit pattern
NARROW = 16         # an op over rows shorter than this (and 4x as many rows) runs by columns
_SUMS = 1024        # running sums `_narrow_leading` keeps side by side (4 KB)
_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)
_INF = np.float32(np.inf)
# the opcodes `_lean_line` gives a loop of their own under the default store, which `_op` sends
# there instead of through `_each`'s per-element switch (~3x slower: AdamW's division, sqrt
# and clamps); calling the lean VM's loop adds no specialisation to compile
_LEAN_LOOP = np.zeros(len(OPCODES), np.bool_)
_LEAN_LOOP[[OP[name] for name in ("div_engine", "maximum", "minimum", "abs", "sqrt_engine")]] = True
_self = sys.modules[__name__]   # functions passed by attribute: numba caches those calls
# A function only compiled code calls (all but `run_full` and `run_lean`) is compiled
# `no_cpython_wrapper=True`: without the wrapper that unboxes Python arguments and boxes the
# result, which LLVM would compile for every such function and compiled callers never run
# (~10% of the lean VM's fresh-install compile). The callers' machine code is the same
# (run_lean's and run_full's disassembly compared: equal but for symbol names), so are the bits.


@njit(cache=True, inline="always")
def _truth(t):
    return _ONE if t else _ZERO


# One small compiled function per elementwise opcode. `_grid` takes
# the function as an argument: numba compiles one specialisation of `_grid` per function, each
# small, with the function inlined (a single `_apply(op, x, y)` chain inlined into one loop per
# opcode made `_op` take ~40 s to compile). The others are called by name only, and numba
# inlines them (`inline="always"`): each compiled on its own cost ~0.05 s of every fresh
# install's compile.
@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _add(x, y):
    return x + y


@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _sub(x, y):
    return x - y


@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _mul(x, y):
    return x * y


@njit(cache=True, error_model="numpy", inline="always")
def _div(x, y):
    return x / y


@njit(cache=True, error_model="numpy", inline="always")
def _div_engine(x, y):
    return x / (y + _ZERO)               # the engine divides by -0 as by +0


@njit(cache=True, error_model="numpy", inline="always")
def _maximum(x, y):
    return x if (x > y or x != x) else y     # np.maximum: NaN wins, ties give y


@njit(cache=True, error_model="numpy", inline="always")
def _minimum(x, y):
    return x if (x < y or x != x) else y


@njit(cache=True, error_model="numpy", inline="always")
def _abs(x, y):
    return abs(x)


@njit(cache=True, error_model="numpy", inline="always")
def _sqrt(x, y):
    return np.sqrt(x)


@njit(cache=True, error_model="numpy", inline="always")
def _sqrt_engine(x, y):
    return np.sqrt(x) + _ZERO            # the engine's sqrt(-0) = +0


@njit(cache=True, error_model="numpy", inline="always")
def _relu(x, y):
    return x if (x > _ZERO or x != x) else _ZERO     # np.maximum(x, 0)


@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _copy(x, y):
    return x


@njit(cache=True, error_model="numpy", inline="always")
def _less(x, y):
    return _truth(x < y)


@njit(cache=True, error_model="numpy", inline="always")
def _less_equal(x, y):
    return _truth(x <= y)


@njit(cache=True, error_model="numpy", inline="always")
def _greater(x, y):
    return _truth(x > y)


@njit(cache=True, error_model="numpy", inline="always")
def _greater_equal(x, y):
    return _truth(x >= y)


@njit(cache=True, error_model="numpy", inline="always")
def _equal(x, y):
    return _truth(x == y)


@njit(cache=True, error_model="numpy", inline="always")
def _not_equal(x, y):
    return _truth(x != y)


@njit(cache=True, error_model="numpy", inline="always")
def _nonzero(x, y):
    return _truth(x != _ZERO)            # astype(bool): NaN is true, -0 false


@njit(cache=True, error_model="numpy", inline="always")
def _logical_not(x, y):
    return _truth(x == _ZERO)


@njit(cache=True, no_cpython_wrapper=True)
def _store(out, store):
    """The fp16 store of one row in place, under any mode (a loop of its own: compiled once,
    not once per opcode)."""
    for c in range(out.size):
        out[c] = r16(out[c], store)


@njit(cache=True, no_cpython_wrapper=True)
def _lookup_line(out, x, tables, at):
    """out[c] = the table at `at`'s entry for the fp16 bits of x[c], as float32 (x holds fp16
    values, the table fp16 bits: both conversions are exact)."""
    table = tables[at:at + TABLE]           # indexed by the bits alone: no sign check
    for c in range(out.size):
        out[c] = _from_half_bits(table[_to_half_bits(x[c])])


@njit(cache=True, no_cpython_wrapper=True)
def _select_line(out, cond, x, y):
    """np.where(cond, x, y) over one row (cond: 1.0 / 0.0); exact, no store."""
    for c in range(out.size):
        out[c] = x[c] if cond[c] != _ZERO else y[c]


@njit(cache=True, no_cpython_wrapper=True)
def _fill(row, v):
    for c in range(row.size):
        row[c] = v


# One compiled `_op` for all its callers. numba compiles a function once per argument types,
# and a literal int (the 1 row of a blocked op, a column's offset 0) is a type of its own:
# `_rows`, `_columns` and `_blocked` passing literals made three specializations of `_op`,
# each ~10 s of a fresh install's compile (43 s for `run_full`). Every caller passes `_op`
# its ints through `_int` and its operands through `_operand_at` (plain int64), so there is
# one; aneforge_tests/test_fused.py counts them. Both are inlined: each compiled on its own (one
# specialization per operand array type) cost ~0.2 s of a fresh install's lean VM compile.
@njit(cache=True, inline="always")
def _int(v):
    """v as a plain int64 (not a literal: see above)."""
    return np.int64(v)


@njit(cache=True, inline="always")
def _operand_at(arena, start, row_stride, col_stride):
    """`_op`'s operand (array, start, row stride, column stride), every int a plain int64."""
    return arena, np.int64(start), np.int64(row_stride), np.int64(col_stride)


@njit(cache=True, inline="always")
def _operand(arena, start, stride, cols, scratch, filled):
    """A row of an operand: a view of the arena when contiguous, else gathered into
    `scratch` (a strided row, or one value broadcast; `filled`: scratch already holds it)."""
    if stride == 1:
        return arena[start:start + cols]
    row = scratch[:cols]
    if stride == 0:
        if not filled:
            _fill(row, arena[start])
        return row
    for c in range(cols):
        row[c] = arena[start + c * stride]
    return row


@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _op(out, o, rows, cols, x, y, z, op, store, tables, at, sx, sy, sz):
    """out[o:o + rows * cols] = op(x, y) (select: x ? y : z; lookup: the table at `at`, at x),
    stored. x, y, z: operands as (array, start, row stride, column stride) (`_operand`; sx,
    sy, sz their scratch rows). add, sub, mul and copy get a specialised loop nest each, the
    opcode chosen once per op, not once per row (a call per row of 64 cost ~200 ns, 30x its
    work); the rarer opcodes share one loop that switches per element (`_each`)."""
    if op == _ADD:
        _grid(out, o, rows, cols, x, y, sx, sy, _self._add, store)
    elif op == _SUB:
        _grid(out, o, rows, cols, x, y, sx, sy, _self._sub, store)
    elif op == _MUL:
        _grid(out, o, rows, cols, x, y, sx, sy, _self._mul, store)
    elif store == 4 and _LEAN_LOOP[op]:     # the lean VM's loop of its own (it vectorizes)
        for r in range(rows):
            a = _row_of(x, r, cols, sx)
            _lean_line(out[o + r * cols:o + (r + 1) * cols], a, _row_of(y, r, cols, sy), a,
                       op, store, tables, at)
    elif op != SELECT and op != LOOKUP and op != _COPY:
        _each(out, o, rows, cols, x, y, sx, sy, op, store if op < _LESS else -1)
    elif op == SELECT:
        for r in range(rows):
            _select_line(out[o + r * cols:o + (r + 1) * cols], _row_of(x, r, cols, sx),
                         _row_of(y, r, cols, sy), _row_of(z, r, cols, sz))
    elif op == LOOKUP:              # stored results: no rounding after
        for r in range(rows):
            _lookup_line(out[o + r * cols:o + (r + 1) * cols], _row_of(x, r, cols, sx),
                         tables, at)
    else:                           # copy
        _grid(out, o, rows, cols, x, y, sx, sy, _self._copy, store)


@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _grid(out, o, rows, cols, x, y, sx, sy, fn, store):
    """out[o + r * cols + c] = fn(x's (r, c), y's (r, c)) stored, row by row. Operands whose
    rows are contiguous or one value each (nearly every op of a step: a bias or a row's mean
    broadcast) run loops of their own, the column stride and a broadcast value known to the
    compiler; other strides gather rows (`_operand`). The default store (nearest-even, NaN to
    +0) rounds inside the loops, which vectorize with its mode constant; other modes round
    the whole result in a second pass (a call inside the row loop stopped its vector code:
    4x slower)."""
    xa, a, ars, acs = x
    ya, b, brs, bcs = y
    if acs == 1 and bcs == 1:
        for r in range(rows):
            xo, yo = a + r * ars, b + r * brs
            _pair(out[o + r * cols:o + (r + 1) * cols], xa[xo:xo + cols], ya[yo:yo + cols],
                  fn, store)
    elif acs == 1 and bcs == 0:
        for r in range(rows):
            xo = a + r * ars
            _pair_by(out[o + r * cols:o + (r + 1) * cols], xa[xo:xo + cols], ya[b + r * brs],
                     fn, store)
    elif acs == 0 and bcs == 1:
        for r in range(rows):
            yo = b + r * brs
            _by_pair(out[o + r * cols:o + (r + 1) * cols], xa[a + r * ars], ya[yo:yo + cols],
                     fn, store)
    elif acs == 0 and bcs == 0:          # one value a row: computed once
        for r in range(rows):
            v = fn(xa[a + r * ars], ya[b + r * brs])
            _fill(out[o + r * cols:o + (r + 1) * cols], r16_ieee(v, 4) if store == 4 else v)
    else:
        for r in range(rows):
            _pair(out[o + r * cols:o + (r + 1) * cols], _row_of(x, r, cols, sx),
                  _row_of(y, r, cols, sy), fn, store)
    if store >= 0 and store != 4:
        _store(out[o:o + rows * cols], store)


@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _apply(op, a, b):
    """One element of opcode `op` (the ops `_op` does not give a loop nest of their own)."""
    if op == _DIV:
        return _div(a, b)
    if op == _DIV_ENGINE:
        return _div_engine(a, b)
    if op == _MAXIMUM:
        return _maximum(a, b)
    if op == _MINIMUM:
        return _minimum(a, b)
    if op == _ABS:
        return _abs(a, b)
    if op == _SQRT:
        return _sqrt(a, b)
    if op == _SQRT_ENGINE:
        return _sqrt_engine(a, b)
    if op == _RELU:
        return _relu(a, b)
    if op == _LESS:
        return _less(a, b)
    if op == _LESS_EQUAL:
        return _less_equal(a, b)
    if op == _GREATER:
        return _greater(a, b)
    if op == _GREATER_EQUAL:
        return _greater_equal(a, b)
    if op == _EQUAL:
        return _equal(a, b)
    if op == _NOT_EQUAL:
        return _not_equal(a, b)
    if op == _NONZERO:
        return _nonzero(a, b)
    return _logical_not(a, b)


@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _each(out, o, rows, cols, x, y, sx, sy, op, store):
    """The other opcodes: one loop for all, the opcode chosen per element. Every opcode given
    a loop nest of its own (`_grid`) costs numba ~2-4 s of the fused kernel's one-time compile
    (all of them: 90 s against 11 s); add, sub, mul and copy, nearly every op of a training
    step, keep theirs."""
    for r in range(rows):
        row = out[o + r * cols:o + (r + 1) * cols]
        a, b = _row_of(x, r, cols, sx), _row_of(y, r, cols, sy)
        for c in range(cols):
            v = _apply(op, a[c], b[c])
            row[c] = r16_ieee(v, 4) if store == 4 else v
    if store >= 0 and store != 4:
        _store(out[o:o + rows * cols], store)


@njit(cache=True, error_model="numpy", inline="always")
def _pair(out, x, y, fn, store):
    """out[c] = fn(x[c], y[c]), rounded in the loop under the default store (`_grid`)."""
    if store == 4:
        for c in range(out.size):
            out[c] = r16_ieee(fn(x[c], y[c]), 4)
    else:
        for c in range(out.size):
            out[c] = fn(x[c], y[c])


@njit(cache=True, error_model="numpy", inline="always")
def _pair_by(out, x, v, fn, store):
    """`_pair` with y one value."""
    if store == 4:
        for c in range(out.size):
            out[c] = r16_ieee(fn(x[c], v), 4)
    else:
        for c in range(out.size):
            out[c] = fn(x[c], v)


@njit(cache=True, error_model="numpy", inline="always")
def _by_pair(out, v, y, fn, store):
    """`_pair` with x one value."""
    if store == 4:
        for c in range(out.size):
            out[c] = r16_ieee(fn(v, y[c]), 4)
    else:
        for c in range(out.size):
            out[c] = fn(v, y[c])


@njit(cache=True, inline="always")
def _row_of(operand, r, cols, scratch):
    """Row r of an operand (array, start, row stride, column stride): `_operand`'s view or
    gathered row (a value broadcast over every row is filled into its scratch once)."""
    array, start, rs, cs = operand
    return _operand(array, start + r * rs, cs, cols, scratch, r > 0 and rs == 0)


@njit(cache=True, no_cpython_wrapper=True)
def _leaf(x, lo, n):
    """numpy's float32 pairwise_sum of x[lo:lo + n], n <= 128: in order below 8 terms, else
    eight running sums combined as a tree, then the rest in order."""
    if n < 8:
        res = _ZERO
        for i in range(lo, lo + n):
            res += x[i]
        return res
    r0, r1, r2, r3 = x[lo], x[lo + 1], x[lo + 2], x[lo + 3]
    r4, r5, r6, r7 = x[lo + 4], x[lo + 5], x[lo + 6], x[lo + 7]
    i, end = lo + 8, lo + n - n % 8
    while i < end:
        r0 += x[i]
        r1 += x[i + 1]
        r2 += x[i + 2]
        r3 += x[i + 3]
        r4 += x[i + 4]
        r5 += x[i + 5]
        r6 += x[i + 6]
        r7 += x[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < lo + n:
        res += x[i]
        i += 1
    return res


@njit(cache=True, no_cpython_wrapper=True)
def _pairwise(x, n):
    """numpy's float32 sum of x[:n], bit for bit: its pairwise_sum, which halves a range longer
    than 128 (the first half a multiple of 8) and adds the halves' sums. The recursion runs on
    an explicit stack (numba's disk cache does not keep recursive functions)."""
    if n <= 128:
        return _leaf(x, 0, n)
    start, length = np.zeros(64, np.int64), np.zeros(64, np.int64)
    half, stage, left = np.zeros(64, np.int64), np.zeros(64, np.int64), np.zeros(64, np.float32)
    d, length[0] = 0, n
    while True:
        if stage[d] == 0 and length[d] > 128:        # split: the first half next
            h = length[d] // 2
            h -= h % 8
            half[d], stage[d] = h, 1
            d += 1
            start[d], length[d], stage[d] = start[d - 1], h, 0
            continue
        ret = _leaf(x, start[d], length[d])
        d -= 1
        while d >= 0 and stage[d] == 2:              # both halves done: their sum goes up
            ret = left[d] + ret
            d -= 1
        if d < 0:
            return ret
        left[d], stage[d] = ret, 2                   # the first half done: the second next
        d += 1
        start[d], length[d], stage[d] = (start[d - 1] + half[d - 1],
                                         length[d - 1] - half[d - 1], 0)


# The folds of a row without NaN (`_extremum`, `_absmax` look first) compare the values'
# bits as unsigned ints, ordered as the floats are (`_key`): integer maxima vectorize, where a
# float fold ran one element a cycle (~0.8 ns an element, 30x numpy's). -0 orders below +0;
# `_extremum` sets a zero's sign after.
_SIGN = np.uint32(0x80000000)
_MAGNITUDE = np.uint32(0x7FFFFFFF)
_INF_BITS = np.uint32(0x7F800000)


@njit(cache=True, inline="always")
def _key(v):
    """float32 v's bits, flipped so that unsigned order is float order (NaN aside)."""
    b = _bits(v)
    return np.uint32(b ^ (np.uint32((b >> np.uint32(31)) * _MAGNITUDE) | _SIGN))


@njit(cache=True, inline="always")
def _unkey(k):
    return _float(np.uint32(k ^ _SIGN if k & _SIGN else k ^ np.uint32(0xFFFFFFFF)))


@njit(cache=True, no_cpython_wrapper=True)
def _largest(x):
    acc = _key(x[0])
    for c in range(1, x.size):
        k = _key(x[c])
        acc = k if k > acc else acc
    return _unkey(acc)


@njit(cache=True, no_cpython_wrapper=True)
def _smallest(x):
    acc = _key(x[0])
    for c in range(1, x.size):
        k = _key(x[c])
        acc = k if k < acc else acc
    return _unkey(acc)


@njit(cache=True, no_cpython_wrapper=True)
def _largest_abs(x):
    """The bits of the largest |x| of a row; above +inf's when the row holds a NaN."""
    acc = np.uint32(0)
    for c in range(x.size):
        k = np.uint32(_bits(x[c]) & _MAGNITUDE)
        acc = k if k > acc else acc
    return acc


@njit(cache=True, inline="always")
def _absmax(x, store):
    """np.max of abs(x) stored under `store` (-1: not stored), one pass and nothing written:
    without NaN (the bits' maximum shows one), the largest |x| stored once (a store rounds
    monotonically, and every |x| is >= +0, so no zero's sign is in question); with NaN, each
    |x| stored, then np.max's fold (a store may turn NaN into +0)."""
    top = _largest_abs(x)
    if top <= _INF_BITS:
        acc = _float(top)
        return acc if store < 0 else r16(acc, store)
    acc = _ZERO
    for c in range(x.size):
        v = abs(x[c]) if store < 0 else r16(abs(x[c]), store)
        if v != v:
            return v
        acc = v if v > acc else acc
    return acc


@njit(cache=True, inline="always")
def _extremum(x, op):
    """np.max (op "max") or np.min of a row: NaN wins (the first, as a sequential scan finds
    it); 2 when the result is a zero and the row holds zeros of both signs (numpy's sign
    there is its lanes', not modelled), else a zero takes the sign of the row's zeros. The
    scans vectorize: the NaN test is an OR, and without NaN the fold's order and zero signs
    are all that could differ, neither of which changes the value."""
    bad = False
    for c in range(x.size):
        bad |= x[c] != x[c]
    if bad:
        for c in range(x.size):
            if x[c] != x[c]:
                return x[c], True
    acc = _largest(x) if op == _MAX else _smallest(x)
    if acc == _ZERO:
        signs = 0
        for c in range(x.size):
            if x[c] == _ZERO:
                signs |= 2 if np.signbit(x[c]) else 1
        if signs == 3:
            return np.float32(2.0), False
        acc = -_ZERO if signs == 2 else _ZERO
    return acc, True


@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _fold(x, op, mode):
    """One row's reduction (the opcodes from REDUCE: sum16, mean16, sum, mean, max, min,
    absmax); returns (value, settled)."""
    if op == _MAX or op == _MIN:
        return _extremum(x, op)
    if op == _ABSMAX:
        return _absmax(x, mode), True
    if op == _SUM16 or op == _MEAN16:
        acc = x[0]
        for c in range(1, x.size):
            acc = r16(acc + x[c], mode)
    else:
        acc = _ZERO + _pairwise(x, x.size)     # numpy's sum starts from its identity
    if op == _MEAN16 or op == _MEAN:
        acc = acc / np.float32(x.size)
    return acc, True


@njit(cache=True, no_cpython_wrapper=True)
def _reduce(arena, code, k, sx) -> bool:
    """Reduction row k: one stored value per row of terms. False (nothing written) when a row
    is unsettled (`_extremum`)."""
    op, store, rows, cols, o = code[k, 0], code[k, 1], code[k, 2], code[k, 3], code[k, 4]
    a, ars, acs, mode = code[k, 5], code[k, 6], code[k, 7], code[k, 8]
    if (op == _SUM16 or op == _MEAN16) and ars == 1 and acs != 1 and rows > 1:
        _narrow_leading(arena, a, acs, rows, cols, o, op, store, mode, sx[:rows])
        return True
    for r in range(rows):
        v, settled = _fold(_operand(arena, a + r * ars, acs, cols, sx, False), op, mode)
        if not settled:
            return False
        arena[o + r] = v if store < 0 else r16(v, store)
    return True


@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _narrow_leading(arena, a, acs, rows, cols, o, op, store, mode, acc):
    """The narrow fp16 sum (or mean) over leading axes (a weight gradient's sum over the
    batch: result r folds the terms a + r + c * acs): all R running sums side by side, one
    term of each at a time, so the loops run along contiguous memory and vectorize (a row
    gathered per result cost ~7 ns a term). Each result still adds its terms in order c = 0,
    1, ... with the rounding after each add, as `_fold` does: the same bits."""
    for r0 in range(0, rows, _SUMS):      # a chunk of sums stays in the level-1 cache
        sums = acc[r0:min(r0 + _SUMS, rows)]    # (loops from 0: a loop from r0 stays scalar)
        n = sums.size
        first = arena[a + r0:a + r0 + n]
        for r in range(n):
            sums[r] = first[r]
        for c in range(1, cols):
            term = arena[a + r0 + c * acs:a + r0 + c * acs + n]
            if mode & 3 == 0:             # the default rounding: a loop LLVM vectorizes
                for r in range(n):
                    sums[r] = r16_ieee(sums[r] + term[r], mode)
            else:
                for r in range(n):
                    sums[r] = r16(sums[r] + term[r], mode)
    for r in range(rows):
        v = acc[r] / np.float32(cols) if op == _MEAN16 else acc[r]
        arena[o + r] = v if store < 0 else r16(v, store)


@njit(cache=True, no_cpython_wrapper=True)
def _blocked(arena, code, sx, sy, sz, block, tables):
    """Every op over elements [0, block), then [block, 2 block), ...: see `run`."""
    n = code[0, 3]
    for c0 in range(0, n, block):
        m = min(block, n - c0)
        for k in range(code.shape[0]):
            op, local = code[k, 0], code[k, 11]
            # a block-local value lives in a place of one block: no offset
            o = code[k, 4] + (0 if local & 1 else c0)
            x = _block_operand(arena, code[k, 5], code[k, 7], local & 2, c0)
            y = _block_operand(arena, code[k, 8], code[k, 10], local & 4, c0)
            z = _block_operand(arena, code[k, 12], code[k, 14], local & 8, c0)
            _op(arena, o, _int(1), m, x, y, z, op, code[k, 1], tables, code[k, 8], sx, sy, sz)


@njit(cache=True, inline="always")
def _block_operand(arena, start, stride, local, c0):
    """One block of an operand of a blocked run (`_op`'s form): contiguous, or one value
    broadcast."""
    if stride == 1:
        return _operand_at(arena, start + (0 if local else c0), 0, 1)
    return _operand_at(arena, start, 0, 0)


@njit(cache=True)
def run_full(arena, code, sx, sy, sz, block, tables, start):
    """Run the ops of `code` (rows as in the module docstring) from row `start` in order over
    `arena`; sx, sy, sz: float32 scratch rows at least as long as the longest row C, as
    `block`, and as R where C < NARROW; `tables`: the lookup tables. Returns -1 when done,
    else the row of an unsettled reduction, not run: the caller runs that op itself and
    resumes after it.

    `block` > 0: every op is one row of the same length C whose operands are contiguous or one
    value (the plan checks it), and the ops run block by block: all of them over elements
    [0, block), then [block, 2 block), ..., so the values stay in the level-1 cache. Each
    element still sees the ops in order; the plan keeps the places of values that die inside
    the run reserved until its end, so no block overwrites what a later block reads.

    The arrays are used through views that own nothing (`_unowned`): every row or block
    slice of an owned array counts a reference up and down, two atomic instructions, and
    a blocked run of a few dozen ops spent most of its time on them."""
    arena, sx, sy, sz = _unowned(arena), _unowned(sx), _unowned(sy), _unowned(sz)
    tables = _unowned(tables)
    if block > 0:
        _blocked(arena, code, sx, sy, sz, block, tables)
        return -1
    for k in range(start, code.shape[0]):
        if code[k, 0] >= REDUCE:
            if not _reduce(arena, code, k, sx):
                return k
        elif code[k, 3] < NARROW and code[k, 2] >= 4 * code[k, 3]:
            _columns(arena, code, k, sx, sy, sz, tables)
        else:
            _rows(arena, code, k, sx, sy, sz, tables)
    return -1


@njit(cache=True, no_cpython_wrapper=True)
def _rows(arena, code, k, sx, sy, sz, tables):
    """Elementwise row k, row by row (a value broadcast over the whole op is filled into its
    scratch row once; a lookup's b is its table's offset, read as an operand by no opcode)."""
    _op(arena, code[k, 4], code[k, 2], code[k, 3], _operand_at(arena, code[k, 5], code[k, 6],
        code[k, 7]), _operand_at(arena, code[k, 8], code[k, 9], code[k, 10]),
        _operand_at(arena, code[k, 12], code[k, 13], code[k, 14]), code[k, 0], code[k, 1],
        tables, code[k, 8], sx, sy, sz)


@njit(cache=True, no_cpython_wrapper=True)
def _columns(arena, code, k, sx, sy, sz, tables):
    """Elementwise row k over a tall, narrow block (rows >> cols, as a [batch, classes]
    value): column by column, each gathered into the scratch rows, computed and scattered
    back, so the loops run over the long axis (row by row, a row of 10 costs more in calls
    than in work)."""
    op, store, rows, cols, o = code[k, 0], code[k, 1], code[k, 2], code[k, 3], code[k, 4]
    x, y, z = sx[:rows], sy[:rows], sz[:rows]
    for c in range(cols):
        _gather(arena, code[k, 5] + c * code[k, 7], code[k, 6], x)
        if op != LOOKUP:
            _gather(arena, code[k, 8] + c * code[k, 10], code[k, 9], y)
        if op == SELECT:
            _gather(arena, code[k, 12] + c * code[k, 14], code[k, 13], z)
        _op(x, _int(0), _int(1), rows, _operand_at(x, 0, 0, 1), _operand_at(y, 0, 0, 1),
            _operand_at(z, 0, 0, 1), op, store, tables, code[k, 8], sx, sy, sz)
        for r in range(rows):
            arena[o + r * cols + c] = x[r]


@njit(cache=True, inline="always")
def _gather(arena, start, stride, out):
    for r in range(out.size):
        out[r] = arena[start + r * stride]


# ---- the lean VM: `run_full`'s contract and bits in a fraction of its compile --------------
# `run_full` gives the common opcodes and operand shapes loop nests of their own, each
# specialised per operand layout (~57 s of numba compile on a fresh install); `run_lean` runs
# every elementwise op line by line in one function: each line's operands read by `_line` (a
# view, or a strided or broadcast operand gathered), a loop of its own for add, sub and mul
# under the default store (most of a training step's ops), every other element through one
# switch written out in place, then the line's store; it folds the absmax rows (the plan's
# peaks) and leaves every other reduction to its kernel. A fresh process has compiled fused
# runs within seconds while `run_full` compiles in the background. numba compiles every
# function a kernel calls on its own and again into the kernel's machine code, and a function
# it inlines (`inline="always"`) is typed again at each call site: so the VM's steps are
# written in its body, not called (the elements through `_apply` and its 19 inlined
# functions, a loop per common opcode in `_lean_line` and the absmax in a function of its
# own took ~5.7 CPU-s to compile against ~3.5). Each element is computed and stored as
# `run_full` does it: the same bits (aneforge_tests/test_start9_lean.py runs both). A new
# opcode: its element in `_apply` (the full VM; its function `inline="always"` unless `_grid`
# takes it as an argument) and in `run_lean`'s switch, or, for a reduction, in `_fold`.
@njit(cache=True, no_cpython_wrapper=True)
def _line(arena, start, stride, cols, scratch):
    """A line of `cols` values of an operand from `start`: a view of the arena when
    contiguous, else gathered into `scratch` (stride 0: one value broadcast)."""
    if stride == 1:
        return arena[start:start + cols]
    row = scratch[:cols]
    for c in range(cols):
        row[c] = arena[start + c * stride]
    return row


@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _value(op, x, y, z, tables, at):
    """One element of any elementwise opcode (`_lean_line`'s loops aside, or not under the
    default store)."""
    if op == _ADD:
        return x + y
    if op == _SUB:
        return x - y
    if op == _MUL:
        return x * y
    if op == _COPY:
        return x
    if op == SELECT:
        return y if x != _ZERO else z
    if op == LOOKUP:
        return _from_half_bits(tables[at + _to_half_bits(x)])
    return _apply(op, x, y)


@njit(cache=True, error_model="numpy", no_cpython_wrapper=True)
def _lean_line(out, a, b, c, op, store, tables, at):
    """out = op(a, b) (select: a ? b : c; lookup: the table at `at`, at a) stored, over one
    line of equal length (out may be a itself). The opcodes of nearly every op of a training
    step under the default store (add, sub, mul, the engine's division, maximum, minimum,
    abs, the engine's sqrt) get a loop each, which LLVM vectorizes (the full VM's `_op` runs
    its rows of the last five here too); every other element goes through `_value`, then the
    line's store (comparisons, select and lookup: not stored, as in `_op`)."""
    n = out.size
    if store == 4:
        if op == _ADD:
            for i in range(n):
                out[i] = r16_ieee(a[i] + b[i], 4)
            return
        if op == _SUB:
            for i in range(n):
                out[i] = r16_ieee(a[i] - b[i], 4)
            return
        if op == _MUL:
            for i in range(n):
                out[i] = r16_ieee(a[i] * b[i], 4)
            return
        if op == _DIV_ENGINE:
            for i in range(n):
                out[i] = r16_ieee(_div_engine(a[i], b[i]), 4)
            return
        if op == _MAXIMUM:
            for i in range(n):
                out[i] = r16_ieee(_maximum(a[i], b[i]), 4)
            return
        if op == _MINIMUM:
            for i in range(n):
                out[i] = r16_ieee(_minimum(a[i], b[i]), 4)
            return
        if op == _ABS:
            for i in range(n):
                out[i] = r16_ieee(abs(a[i]), 4)
            return
        if op == _SQRT_ENGINE:
            for i in range(n):
                out[i] = r16_ieee(_sqrt_engine(a[i], b[i]), 4)
            return
    if op == LOOKUP:                # indexed by the bits alone: no sign check; not stored
        table = tables[at:at + TABLE]
        for i in range(n):
            out[i] = _from_half_bits(table[_to_half_bits(a[i])])
        return
    for i in range(n):
        out[i] = _value(op, a[i], b[i], c[i], tables, at)
    if op >= _LESS or store < 0:
        return
    if store == 4:                  # the default store: a loop that vectorizes
        for i in range(n):
            out[i] = r16_ieee(out[i], 4)
    else:
        _store(out, store)


@njit(cache=True, error_model="numpy")
def run_lean(arena, code, sx, sy, sz, block, tables, start):
    """`run_full` by fewer loops: every elementwise op line by line, a line a row of the op (a
    blocked run: its one row, one block at a time, as `_blocked`; a tall, narrow op too, row
    by row, where `run_full` goes by columns); an absmax row folded when none of its rows
    holds a NaN (the bits' maximum shows one: the largest magnitude's bits, under the row's
    mode `b` and its store), as `_fold` computes it; every other reduction, and an absmax
    over a NaN, returned unwritten, as `run_full` returns an unsettled one: the run plan runs
    its kernel, then resumes after it (folding them all here, `_reduce`, doubled this form's
    compile)."""
    arena, sx, sy, sz = _unowned(arena), _unowned(sx), _unowned(sy), _unowned(sz)
    tables, code = _unowned(tables), _unowned(code)
    n = code[0, 3] if block > 0 else 1
    for c0 in range(0, n, max(block, 1)):   # c0 = 0 unless blocked
        for k in range(start, code.shape[0]):
            row = code[k]
            op, store, rows, cols, local = row[0], row[1], row[2], row[3], row[11]
            if op >= REDUCE:
                if block > 0 or op != _ABSMAX:
                    return k
                for write in range(2):      # every row checked before any is written
                    for r in range(rows):
                        x = _line(arena, row[5] + r * row[6], row[7], cols, sx)
                        top = np.uint32(0)
                        for i in range(cols):
                            m = np.uint32(_bits(x[i]) & _MAGNITUDE)
                            top = m if m > top else top
                        if not write and top > _INF_BITS:
                            return k
                        v = _float(top)
                        for mode in (row[8], store):    # the abs's rounding, the store
                            v = v if mode < 0 else r16(v, mode)
                        if write:
                            arena[row[4] + r] = v
                continue
            if block > 0:                   # one row: this block of it
                rows, cols = 1, min(block, n - c0)
            # a block-local value lives in a place of one block: no offset
            o = row[4] + (0 if local & 1 else c0)
            a = row[5] + (0 if row[7] != 1 or local & 2 else c0)
            b = row[8] + (0 if row[10] != 1 or local & 4 else c0)
            c = row[12] + (0 if row[14] != 1 or local & 8 else c0)
            at = row[8]                     # a lookup's table (b: read as no operand)
            for r in range(rows):
                x = _line(arena, a + r * row[6], row[7], cols, sx)
                y = x if op == LOOKUP else _line(arena, b + r * row[9], row[10], cols, sy)
                z = x if op != SELECT else _line(arena, c + r * row[13], row[14], cols, sz)
                out = arena[o + r * cols:o + (r + 1) * cols]
                if store == 4 and op <= _MUL:   # add, sub, mul: loops that vectorize
                    if op == _ADD:
                        for i in range(cols):
                            out[i] = r16_ieee(x[i] + y[i], 4)
                    elif op == _SUB:
                        for i in range(cols):
                            out[i] = r16_ieee(x[i] - y[i], 4)
                    else:
                        for i in range(cols):
                            out[i] = r16_ieee(x[i] * y[i], 4)
                    continue
                for i in range(cols):       # the elements of every opcode, as `_apply`'s
                    u, v = x[i], y[i]
                    if op == _ADD:
                        w = u + v
                    elif op == _SUB:
                        w = u - v
                    elif op == _MUL:
                        w = u * v
                    elif op == _DIV:
                        w = u / v
                    elif op == _DIV_ENGINE:
                        w = u / (v + _ZERO)             # the engine divides by -0 as by +0
                    elif op == _MAXIMUM:
                        w = u if (u > v or u != u) else v   # NaN wins, ties give y
                    elif op == _MINIMUM:
                        w = u if (u < v or u != u) else v
                    elif op == _ABS:
                        w = abs(u)
                    elif op == _SQRT:
                        w = np.sqrt(u)
                    elif op == _SQRT_ENGINE:
                        w = np.sqrt(u) + _ZERO          # the engine's sqrt(-0) = +0
                    elif op == _RELU:
                        w = u if (u > _ZERO or u != u) else _ZERO
                    elif op == _COPY:
                        w = u
                    elif op == _LESS:
                        w = _ONE if u < v else _ZERO
                    elif op == _LESS_EQUAL:
                        w = _ONE if u <= v else _ZERO
                    elif op == _GREATER:
                        w = _ONE if u > v else _ZERO
                    elif op == _GREATER_EQUAL:
                        w = _ONE if u >= v else _ZERO
                    elif op == _EQUAL:
                        w = _ONE if u == v else _ZERO
                    elif op == _NOT_EQUAL:
                        w = _ONE if u != v else _ZERO
                    elif op == _NONZERO:
                        w = _ONE if u != _ZERO else _ZERO   # astype(bool): NaN true, -0 false
                    elif op == _LOGICAL_NOT:
                        w = _ONE if u == _ZERO else _ZERO
                    elif op == SELECT:
                        w = v if u != _ZERO else z[i]
                    else:                   # lookup: indexed by the bits alone
                        w = _from_half_bits(tables[at + _to_half_bits(u)])
                    out[i] = w
                if op >= _LESS or store < 0:    # comparisons, select, lookup: not stored
                    continue
                if store == 4:              # the default store: a loop that vectorizes
                    for i in range(cols):
                        out[i] = r16_ieee(out[i], 4)
                else:
                    for i in range(cols):
                        out[i] = r16(out[i], store)
    return -1


# The VM the run plan calls (`fused.run`): `run_full`, or `run_lean` while `run_full` compiles
# on a fresh install (aneforge/hardware/kernels/__init__.py rebinds it; same bits either way).
run = run_full
