"""Fused elementwise runs: a straight-line sequence of elementwise ops over one float32 arena,
executed by one compiled call (numba; imported only when numba is installed and on).

Each op is a row of `code` (int64):

    opcode, store, R, C, out, a, a_rs, a_cs, b, b_rs, b_cs, local

The op's output is the contiguous R x C block at arena offset `out`; operand a's element
(r, c) is `arena[a + r * a_rs + c * a_cs]` (a stride of 0 broadcasts), likewise b. In a
blocked run (`run`'s block > 0), bits 0, 1, 2 of `local` mark the output, a and b as values
that exist one block at a time: their place holds the current block only. A `lookup` op reads
its result from the table of TABLE values at offset `b` of `tables`, indexed by the fp16 bits
of a (the plan fills it with the fp16 bits of the op's own stored result for every fp16
value: uint16, half the cache of float32 entries, converted exactly on read). `store` is
the fp16 rounding mode of the result (`kernels.mode`), or -1 to keep the float32 value (an
fp32 op). Every op computes in IEEE float32 and rounds once, exactly as the op's numpy kernel
followed by the executor's store (aneforge/runtime/sim.py): the results are bit-identical to
the unfused path (aneforge_tests/test_fused.py), NaN payloads aside (a NaN keeps no payload
through the engine's store, and the model does not define one).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .compiled import _from_half_bits, _to_half_bits, r16, r16_ieee

# opcodes, named by the ops they run (runtime/plan.py maps MIL ops to them)
OPCODES = ("add", "sub", "mul", "div", "div_engine", "maximum", "minimum", "abs", "sqrt",
           "sqrt_engine", "relu", "copy", "lookup")
OP = {name: i for i, name in enumerate(OPCODES)}
LOOKUP = OP["lookup"]
TABLE = 1 << 16     # a lookup's table: the op's stored result for each fp16 bit pattern
WIDTH = 12          # int64 fields per op
NARROW = 16         # an op over rows shorter than this (and 4x as many rows) runs by columns
_ZERO = np.float32(0.0)
_INF = np.float32(np.inf)


@njit(cache=True, inline="always")
def _apply(op, x, y):
    if op == 0:
        return x + y
    if op == 1:
        return x - y
    if op == 2:
        return x * y
    if op == 3:
        return x / y
    if op == 4:
        return x / (y + _ZERO)               # the engine divides by -0 as by +0
    if op == 5:
        return x if (x > y or x != x) else y     # np.maximum: NaN wins, ties give y
    if op == 6:
        return x if (x < y or x != x) else y
    if op == 7:
        return abs(x)
    if op == 8:
        return np.sqrt(x)
    if op == 9:
        return np.sqrt(x) + _ZERO            # the engine's sqrt(-0) = +0
    if op == 10:
        return x if (x > _ZERO or x != x) else _ZERO     # np.maximum(x, 0)
    return x


@njit(cache=True, inline="always")
def _line(out, x, y, op):
    """out[c] = op(x[c], y[c]) over one row (contiguous 1-D views: the loop vectorizes)."""
    for c in range(out.size):
        out[c] = _apply(op, x[c], y[c])


@njit(cache=True)
def _lookup_line(out, x, table):
    """out[c] = table[the fp16 bits of x[c]] as float32 (x holds fp16 values, the table fp16
    bits: both conversions are exact)."""
    for c in range(out.size):
        out[c] = _from_half_bits(table[_to_half_bits(x[c])])


@njit(cache=True)
def _store(out, store):
    """The fp16 store of one row in place (-1: an fp32 result, kept). The default modes get
    loops with the mode constant, so they vectorize."""
    if store < 0:
        return
    if store == 0:
        for c in range(out.size):
            out[c] = r16_ieee(out[c], 0)
    elif store == 4:
        for c in range(out.size):
            out[c] = r16_ieee(out[c], 4)
    else:
        for c in range(out.size):
            out[c] = r16(out[c], store)


@njit(cache=True)
def _fill(row, v):
    for c in range(row.size):
        row[c] = v


@njit(cache=True)
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


@njit(cache=True, error_model="numpy")
def _op(out, x, y, op, store):
    """out = op(x, y), then the store's rounding: one specialised loop per opcode (the opcode
    is constant over the loop)."""
    if op == 0:
        _line(out, x, y, 0)
    elif op == 1:
        _line(out, x, y, 1)
    elif op == 2:
        _line(out, x, y, 2)
    elif op == 3:
        _line(out, x, y, 3)
    elif op == 4:
        _line(out, x, y, 4)
    elif op == 5:
        _line(out, x, y, 5)
    elif op == 6:
        _line(out, x, y, 6)
    elif op == 7:
        _line(out, x, y, 7)
    elif op == 8:
        _line(out, x, y, 8)
    elif op == 9:
        _line(out, x, y, 9)
    elif op == 10:
        _line(out, x, y, 10)
    else:
        _line(out, x, y, 11)
    _store(out, store)


@njit(cache=True)
def run(arena, code, sx, sy, block, tables):
    """Run every op of `code` (rows as in the module docstring) in order over `arena`; sx, sy:
    float32 scratch rows at least as long as the longest row C, as `block`, and as R where
    C < NARROW; `tables`: the lookup tables.

    `block` > 0: every op is one row of the same length C whose operands are contiguous or one
    value (the plan checks it), and the ops run block by block: all of them over elements
    [0, block), then [block, 2 block), ..., so the values stay in the level-1 cache. Each
    element still sees the ops in order; the plan keeps the places of values that die inside
    the run reserved until its end, so no block overwrites what a later block reads."""
    if block > 0:
        n = code[0, 3]
        for c0 in range(0, n, block):
            m = min(block, n - c0)
            for k in range(code.shape[0]):
                o, a, acs, b, bcs, local = (code[k, 4], code[k, 5], code[k, 7], code[k, 8],
                                            code[k, 10], code[k, 11])
                # a block-local value lives in a place of one block: no offset
                o += 0 if local & 1 else c0
                a += 0 if local & 2 or acs == 0 else c0
                b += 0 if local & 4 or bcs == 0 else c0
                x = arena[a:a + m] if acs == 1 else _operand(arena, a, 0, m, sx, False)
                if code[k, 0] == LOOKUP:        # stored results: no rounding after
                    _lookup_line(arena[o:o + m], x, tables[b:b + TABLE])
                    continue
                y = arena[b:b + m] if bcs == 1 else _operand(arena, b, 0, m, sy, False)
                _op(arena[o:o + m], x, y, code[k, 0], code[k, 1])
        return
    for k in range(code.shape[0]):
        op, store, rows, cols = code[k, 0], code[k, 1], code[k, 2], code[k, 3]
        o, a, ars, acs, b, brs, bcs = (code[k, 4], code[k, 5], code[k, 6], code[k, 7],
                                       code[k, 8], code[k, 9], code[k, 10])
        if cols < NARROW and rows >= 4 * cols:
            _columns(arena, k, code, sx, sy, tables)
            continue
        for r in range(rows):
            # a value broadcast over the whole op is filled into its scratch row once
            x = _operand(arena, a + r * ars, acs, cols, sx, r > 0 and ars == 0)
            if op == LOOKUP:
                _lookup_line(arena[o + r * cols:o + (r + 1) * cols], x, tables[b:b + TABLE])
                continue
            y = _operand(arena, b + r * brs, bcs, cols, sy, r > 0 and brs == 0)
            _op(arena[o + r * cols:o + (r + 1) * cols], x, y, op, store)


@njit(cache=True)
def _columns(arena, k, code, sx, sy, tables):
    """Op k of `code` over a tall, narrow block (rows >> cols, as a [batch, classes] value):
    column by column, each gathered into the scratch rows, computed and scattered back, so the
    loops run over the long axis (row by row, a row of 10 costs more in calls than in work)."""
    op, store, rows, cols = code[k, 0], code[k, 1], code[k, 2], code[k, 3]
    o, a, ars, acs, b, brs, bcs = (code[k, 4], code[k, 5], code[k, 6], code[k, 7],
                                   code[k, 8], code[k, 9], code[k, 10])
    x, y = sx[:rows], sy[:rows]
    for c in range(cols):
        for r in range(rows):
            x[r] = arena[a + c * acs + r * ars]
        if op == LOOKUP:
            _lookup_line(x, x, tables[b:b + TABLE])
        else:
            for r in range(rows):
                y[r] = arena[b + c * bcs + r * brs]
            _op(x, x, y, op, store)
        for r in range(rows):
            arena[o + r * cols + c] = x[r]


@njit(cache=True)
def load16(bits, out, coerce):
    """fp16 input values (their uint16 bits, 1-D) into the float32 arena row `out`; NaN read
    as +inf when `coerce` (the engine's input rule). Returns how many NaN there were."""
    nan = 0
    for i in range(bits.size):
        v = _from_half_bits(bits[i])
        if v != v:
            nan += 1
            v = _INF if coerce else v
        out[i] = v
    return nan
