"""Guarded moves (aneforge/runtime/moves.py `GUARDS`): slices through the width crop's gain
(conv2d's im2col taps, max pool's strided slices) run as compiled copies after one test of
their input, and by their kernels when the test fails: the interpreter's bits either way."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import aneforge as af
import aneforge.nn.functional as F
from aneforge.hardware import kernels
from aneforge.runtime import moves, plan as plan_mod

from test_fused import _executables, both, same_bits, vm  # noqa: F401  (a fixture)
from test_moves import _apply

pytestmark = pytest.mark.skipif(not kernels.available(), reason="the run plan needs numba")


def _conv_pool(x, w):
    """A conv (its im2col: nine cropping slices of the padded input), relu, max pool (two
    cropping slices of four), forward and gradients."""
    def run():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", af.ANEHazardWarning)
            xt, wt = af.tensor(x, requires_grad=True), af.tensor(w, requires_grad=True)
            y = F.max_pool2d(F.conv2d(xt, wt, padding=1).relu(), 2)
            gx, gw = af.grad((y * y).sum(), [xt, wt])
            out = [y.numpy(), gx.numpy(), gw.numpy()]
        return out, any("width-slice crop" in str(s.message) for s in seen)
    return run


def _plan(made):
    return max((e.run_plan for e in made if e.run_plan), key=lambda p: len(p.exe.steps))


@pytest.mark.parametrize("big", [False, True])
def test_im2col_and_pool_slices_move_behind_the_crop_guard(monkeypatch, vm, big):
    """Values within the crop's range: im2col's concat and max pool's cropping slices run as
    guarded moves, no cropping slice or concat left to its kernel. A value past 4094 (x16 overflows
    the store) fails the guard: the chain's kernels run, the crop makes its inf and reports
    it, as in the interpreter."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float16)
    if big:
        x[1, 2, 3, 5] = 5000.0
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float16)
    made = _executables(monkeypatch)
    (want, warned_never), (got, warned_plan) = both(monkeypatch, _conv_pool(x, w))
    for a, b in zip(want, got):
        same_bits(a, b)
    assert warned_never == warned_plan == big
    plan = _plan(made)
    guarded = {plan.exe.ops[k].type for k in plan.moves.guards}
    assert {"concat", "slice_by_index"} <= guarded, guarded
    left = [step for step, _, _ in plan.entries
            if step is not None and step.store is not plan_mod._MOVED]
    assert "concat" not in [step.ctx.op_type for step in left]
    assert not [step.attrs for step in left if moves._computes(step)], "a cropping slice left"


def test_the_guard_is_the_crops_first_test():
    """`_no_crop` passes exactly where max |x| * 16 stays under 65520 (x16: M1's gain), fails
    on a NaN, and always passes without a gain (M4)."""
    class Ctx:
        def __init__(self, gain):
            self.numerics = type("N", (), {"width_slice_gain": gain})()
    m1 = Ctx(16.0)
    assert moves._no_crop(m1, np.array([4094.0, -4094.5], np.float32))
    assert not moves._no_crop(m1, np.array([1.0, -4095.0], np.float32))
    assert not moves._no_crop(m1, np.array([1.0, np.nan], np.float32))
    assert moves._no_crop(Ctx(None), np.array([1e6], np.float32))
    assert moves._no_crop(m1, np.zeros(0, np.float32))


def test_a_map_reading_elements_twice_cuts_into_blocks_of_the_result():
    """An im2col map (each source element in up to nine taps) cuts block by block of the
    result, and `compiled.move` of the pieces places every element as the map says."""
    from aneforge.hardware.kernels import compiled
    kernels.wait()
    src = np.arange(2 * 3 * 6 * 6, dtype=np.float64).reshape(2, 3, 6, 6)
    taps = np.stack([src[:, :, i:i + 4, j:j + 4] for i in range(3) for j in range(3)], 2)
    cut = moves.Moves.__new__(moves.Moves)
    cut.origin, cut._fills = {7: 0}, []
    slot, fill, pieces = cut._cut(9, taps)
    assert slot == 9 and fill is None and 1 < len(pieces) <= moves.BLOCKS
    n = src.size
    rows = np.array([[p[0], n + p[1], *p[2:]] for _, p in pieces], np.int64)
    arena = np.concatenate([src.reshape(-1), np.full(taps.size, -1.0)]).astype(np.float32)
    want = _apply(arena, rows, n, taps.size, None)
    np.testing.assert_array_equal(want[n:], taps.reshape(-1))
    compiled.move(arena, rows, n, taps.size, np.float32(0.0), False)
    np.testing.assert_array_equal(arena[n:], taps.reshape(-1))
