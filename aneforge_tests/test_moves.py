"""The run plan's moves (aneforge/runtime/moves.py): chains of data-movement steps composed
into strided copies must place exactly the bits the steps would."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import aneforge as af
import aneforge.nn.functional as F
from aneforge.hardware import kernels
from aneforge.runtime import moves, plan as plan_mod

from test_fused import SPECIAL, _executables, both, same_bits, vm  # noqa: F401  (a fixture)

pytestmark = pytest.mark.skipif(not kernels.available(), reason="the run plan needs numba")


def _apply(arena, rows, out, n, fill):
    """The moves of `rows` in Python, element by element: what `compiled.move` must do."""
    arena = arena.copy()
    if fill is not None:
        arena[out:out + n] = fill
    for src, dst, *rest in rows.tolist():
        sizes, ss, ds = rest[:4], rest[4:8], rest[8:]
        for idx in np.ndindex(*sizes):
            arena[dst + sum(i * d for i, d in zip(idx, ds))] = \
                arena[src + sum(i * s for i, s in zip(idx, ss))]
    return arena


def test_pieces_are_the_nested_affine_runs_of_a_map():
    """A tap's gradient interleaved into a padded grid (every other place of every other
    row) is one piece of three loops; places with no nested affine order are none."""
    grid = np.arange(4 * 10 * 10).reshape(4, 10, 10)
    dst = grid[:, 1:9:2, 1:9:2].reshape(-1)              # the tap's places, source order
    piece = moves._piece(np.arange(dst.size), dst)
    assert piece[2:6] == (1, 4, 4, 4) and piece[6:10] == (0, 16, 4, 1)
    assert piece[10:] == (0, 100, 20, 2) and piece[:2] == (0, 11)
    assert moves._piece(np.arange(6), np.array([0, 1, 2, 4, 5, 7])) is None
    assert moves._piece(np.arange(5), np.array([9, 7, 5, 3, 1]))[-1] == -2   # reversed
    many = np.arange(10)
    assert moves._piece(many, many * 0 + np.arange(10) ** 2) is None


@pytest.mark.parametrize("fill", [None, -0.0, 2.5])
def test_the_move_kernel_copies_bits_as_the_reference(fill):
    """`compiled.move` against `_apply`: contiguous, strided, reversed and broadcast pieces
    over special values (signed zeros, NaN, infinities, subnormals) and a fill."""
    from aneforge.hardware.kernels import compiled
    kernels.wait()
    rng = np.random.default_rng(2)
    arena = np.resize(SPECIAL.astype(np.float32), 4000)
    rng.shuffle(arena)
    rows = np.array([
        [0, 2000, 1, 3, 4, 5, 0, 40, 5, 1, 0, 60, 6, 1],            # contiguous rows
        [300, 2200, 1, 1, 6, 7, 0, 0, 9, 2, 0, 0, 20, 3],           # strided both ways
        [900, 2400, 1, 1, 2, 8, 0, 0, 10, -1, 0, 0, 1, 16],         # a reversed axis
        [1200, 2600, 2, 2, 3, 4, 100, 30, 9, 2, 400, 90, 30, 7],    # four loops
    ], np.int64)
    out, n = 1990, 1200
    want = _apply(arena, rows, out, n, fill)
    got = arena.copy()
    compiled.move(got, rows, out, n, np.float32(0.0 if fill is None else fill),
                  fill is not None)
    same_bits(got, want)


def _moved(made) -> list:
    return [k for e in made if e.run_plan for k in e.run_plan.moved]


def test_a_chain_of_data_movement_over_special_values(monkeypatch, vm):
    """stack, permute, slice, pad and split between two computing ops, over every special
    value: one move, the interpreter's bits. A chain of pads with two constants moves up to
    the second (a move fills with one constant); that pad runs its kernel, same bits."""
    x = np.resize(SPECIAL, (3, 4, 5))
    made = _executables(monkeypatch)

    def run():
        y = af.tensor(x) * 1.0
        t = af.stack([y, y * 2.0], 1).permute(0, 2, 3, 1)[:, 1:, ::2]
        a, b = F.pad(t, (0, 0, 1, 2)).split(2, dim=1)
        one = af.cat([b, a], 1) * 1.0
        two = F.pad(F.pad(y.permute(2, 0, 1), (1, 1), value=3.0), (0, 0, 2, 0), value=-1.0)
        return [one.numpy(), (two * 1.0).numpy()]
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    plans = [e.run_plan for e in made if e.run_plan]
    moved = {(p.exe.ops[k].type, p.exe.ops[k].attrs.get("constant_val")) for p in plans
             for k in p.moved}
    assert ("concat", None) in moved and ("pad", 3.0) in moved, moved
    dead = [p.exe.ops[k].type for p in plans for k in p.moves.dead]
    assert {"transpose", "slice_by_index", "pad", "split"} <= set(dead), dead
    kernel = [(step.ctx.op_type, step.attrs.get("constant_val")) for p in plans
              for step, _, _ in p.entries if step is not None and step.store is not None]
    assert ("pad", -1.0) not in moved and ("pad", -1.0) in kernel, kernel


@pytest.mark.parametrize("stride", [1, 2])
def test_conv_and_pool_gradients_move_identically(monkeypatch, vm, stride):
    """conv2d's column gradient (split parts reshaped, interleaved with zeros for a stride,
    sliced, padded) and max pool's gradient run as moves: the interpreter's bits, values
    past the width crop and an inf gradient included (its zeros x - x are NaN)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 10, 10)).astype(np.float16)
    x[0, 1, 4, 5] = 5000.0
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float16)
    made = _executables(monkeypatch)

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", af.ANEHazardWarning)
            xt, wt = af.tensor(x, requires_grad=True), af.tensor(w, requires_grad=True)
            y = F.max_pool2d(F.conv2d(xt, wt, padding=1, stride=stride).relu(), 2)
            gx, gw = af.grad((y * y * 1e3).sum(), [xt, wt])
            return [y.numpy(), gx.numpy(), gw.numpy()]
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    plan = max((e.run_plan for e in made if e.run_plan), key=lambda p: len(p.exe.steps))
    assert len(plan.moved) >= 9, "a move per tap at least"
    left = [step.ctx.op_type for step, _, _ in plan.entries
            if step is not None and step.store is not plan_mod._MOVED]
    program = [op.type for op in plan.exe.ops]
    assert program.count("concat") + program.count("pad") >= 18
    assert left.count("concat") + left.count("pad") <= 2, left        # im2col's, the input's
    assert "split" in program and "split" not in left     # the taps' split: moved or composed
