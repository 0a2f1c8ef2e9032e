"""The lean fused VM (kernels/fused.py `run_lean`, a fresh install's VM while `run_full`
compiles): row by row against the full VM, the same bits, and which reductions it folds."""
from __future__ import annotations

import numpy as np
import pytest

from aneforge.hardware import kernels
from bits import assert_same_bits

pytestmark = pytest.mark.skipif(not kernels.available(), reason="the fused VMs need numba")

# values through every rounding path: signed zeros, subnormals, the overflow edge, infinities
VALUES = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 6e-8, -6e-8, 3e-5, 65504.0, -65520.0,
                   70000.0, 2049.0, 1e-4, 1 / 3, -7.5, 2.0 ** -14, 2.0 ** -25], np.float32)
STORES = (-1, 4, 0, 1, 2, 3, 5, 6, 7)     # none, the default, and every other mode


def _fused():
    kernels.wait()
    from aneforge.hardware.kernels import fused
    return fused


def _rows(fused, rows: list[list[int]]) -> np.ndarray:
    code = np.zeros((len(rows), fused.WIDTH), np.int64)
    for k, row in enumerate(rows):
        code[k, :len(row)] = row
    return code


def _both(fused, arena, code, block=0, tables=None):
    """Each VM's arena after running `code` from row 0, and what each returned."""
    tables = np.zeros(1, np.uint16) if tables is None else tables
    out = []
    for run in (fused.run_full, fused.run_lean):
        a = arena.copy()
        scratch = [np.zeros(512, np.float32) for _ in range(3)]
        out.append((a, run(a, code, *scratch, block, tables, 0)))
    return out


@pytest.mark.parametrize("store", STORES)
def test_absmax_rows_are_folded_as_the_full_vm_folds_them(store):
    """Rows without NaN: `run_lean` folds the absmax (max |x|, under the row's rounding mode
    `b` and its store) and returns -1, writing the bits `run_full` writes, rows read
    contiguously and strided (a leading axis)."""
    fused = _fused()
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((6, 40)) * np.exp(rng.standard_normal((6, 40)) * 4)).astype(np.float32)
    x.reshape(-1)[:len(VALUES)] = VALUES
    x[4] = -0.0                                         # a row of zeros
    x[5] = rng.choice(VALUES[6:9], 40)                  # subnormals only
    arena = np.concatenate([x.reshape(-1), np.zeros(6 + 40, np.float32)])
    for mode in (-1, store if store >= 0 else 4):
        code = _rows(fused, [[fused.OP["absmax"], store, 6, 40, 240, 0, 40, 1, mode],
                             [fused.OP["absmax"], store, 40, 6, 246, 0, 1, 40, mode]])
        (full, k_full), (lean, k_lean) = _both(fused, arena, code)
        assert k_full == k_lean == -1
        assert_same_bits(lean, full)
        assert (lean[240:] != 0).any()


def test_a_row_with_nan_is_left_to_the_kernel_unwritten():
    """An absmax over a row holding NaN, and every other reduction: `run_lean` returns the
    row's index with nothing of it written (the plan runs the op's kernel, then resumes)."""
    fused = _fused()
    x = np.array([1.0, np.nan, -3.0, 2.0, 5.0, -6.0, 0.5, 0.25], np.float32)
    arena = np.concatenate([x, np.full(2, 7.0, np.float32)])
    code = _rows(fused, [[fused.OP["absmax"], 4, 2, 4, 8, 0, 4, 1, 4]])
    scratch = [np.zeros(8, np.float32) for _ in range(3)]
    for op in ("absmax", "sum16", "mean", "max", "min"):
        code[0, 0] = fused.OP[op]
        a = arena.copy()
        assert fused.run_lean(a, code, *scratch, 0, np.zeros(1, np.uint16), 0) == 0
        assert (a[8:] == 7.0).all()


@pytest.mark.parametrize("store", STORES)
def test_every_elementwise_opcode_in_every_layout_is_the_full_vms(store):
    """Each elementwise opcode over rows read contiguously, broadcast (stride 0) and strided,
    tall and narrow (run by columns) and blocked: the full VM's bits."""
    fused = _fused()
    rng = np.random.default_rng(7)
    n = 64 * 8
    x = rng.choice(VALUES, n).astype(np.float32) * rng.choice([1.0, 3.0, 0.3], n).astype(
        np.float32)
    y = np.concatenate([rng.choice(VALUES, n // 2), rng.standard_normal(n // 2)]).astype(
        np.float32)
    z = (rng.random(n) < 0.5).astype(np.float32)
    tables = rng.integers(0, 1 << 16, fused.TABLE).astype(np.uint16)
    arena = np.concatenate([x, y, z, np.zeros(n, np.float32)])
    out = 3 * n
    for name in fused.OPCODES[:fused.REDUCE]:
        op = fused.OP[name]
        cond = 2 * n if name != "select" else 0           # select's condition: z, or x
        a, b = (2 * n, 0) if name == "select" else (0, n)
        layouts = [  # rows, cols, a (start, rs, cs), b (start, rs, cs), c (start, rs, cs)
            (8, 64, (a, 64, 1), (b, 64, 1), (n, 64, 1)),          # contiguous
            (8, 64, (a, 64, 1), (b + 5, 1, 0), (n + 3, 0, 0)),    # a value a row, one value
            (8, 64, (a, 1, 8), (b, 64, 1), (n, 1, 8)),            # strided (a transpose)
            (128, 4, (a, 4, 1), (b, 1, 128), (cond, 0, 1)),       # tall, narrow: by columns
        ]
        for rows, cols, (ao, ars, acs), (bo, brs, bcs), (co, crs, ccs) in layouts:
            if name == "lookup":
                bo, brs, bcs = 0, 0, 0                             # b: the table's offset
            code = _rows(fused, [[op, store, rows, cols, out, ao, ars, acs, bo, brs, bcs, 0,
                                  co, crs, ccs]])
            (full, _), (lean, _) = _both(fused, arena, code, tables=tables)
            assert_same_bits(lean, full)
        # blocked: one row of n values, blocks of 96 (the last one short), b broadcast
        bb = (0, 0, 0) if name == "lookup" else (b + 1, 0, 0)
        code = _rows(fused, [[op, store, 1, n, out, a, 0, 1, *bb, 0, cond, 0, 1]])
        (full, _), (lean, _) = _both(fused, arena, code, block=96, tables=tables)
        assert_same_bits(lean, full)
