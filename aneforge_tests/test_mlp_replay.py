"""A replayed training step (`af.compile`) of the benchmark's MLPs: what speeds its host work and
its run plan up (merged fused segments, int16 label arguments, the replay's precomputed boundary,
the one-call load beside int16 inputs) changes no bit of any loss or parameter."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import aneforge as af
from aneforge.errors import ANEHazardWarning
from aneforge.hardware import kernels
from aneforge.core.realization import clear_cache
from aneforge.runtime import fusing, plan as plan_mod

from test_fused import _executables, same_bits

needs_numba = pytest.mark.skipif(not kernels.available(), reason="the run plan needs numba")


def _deep_train(compiled: bool, steps: int = 4, batch: int = 64):
    """The bench's 64-128-128-10 AdamW network: (losses, parameters) after `steps` steps of
    new batches (a 128-wide layer at batch 64 has 2 BLOCK elements: AdamW's updates and the
    GELUs run blocked)."""
    af.manual_seed(0)
    rng = np.random.default_rng(0)
    nn = af.nn
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(),
                          nn.Linear(128, 10))
    opt = af.optim.AdamW(model.parameters(), lr=1e-3)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    step = af.compile(step) if compiled else step
    losses = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ANEHazardWarning)
        for _ in range(steps):
            x = af.tensor(rng.random((batch, 64)).astype(np.float32))
            y = af.tensor(rng.integers(0, 10, batch))
            losses.append(step(x, y).item())
    return losses, [p.numpy() for p in model.parameters()]


@needs_numba
@pytest.mark.parametrize("forms", ["full", "lean"])
def test_replayed_deep_mlp_step_is_bit_identical_to_the_interpreter(monkeypatch, forms):
    kernels.wait()
    runs = []
    with kernels.forms(forms):
        for choice in ("never", "always"):
            monkeypatch.setenv("ANEFORGE_SIM_PLAN", choice)
            clear_cache()
            runs.append(_deep_train(True))
    (l1, p1), (l2, p2) = runs
    assert l1 == l2
    for a, b in zip(p1, p2):
        same_bits(a, b)


@needs_numba
def test_replay_matches_the_eager_step_bit_for_bit(monkeypatch):
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "auto")
    kernels.wait()
    (l1, p1), (l2, p2) = _deep_train(False), _deep_train(True)
    assert l1 == l2
    for a, b in zip(p1, p2):
        same_bits(a, b)


def _loops(rows, cols):
    return rows, cols, [(cols, 1)], [0]


def test_short_blocked_runs_join_their_unblocked_neighbours():
    big, small = 2 * fusing.BLOCK, 64
    names = ["add"] * 9
    shapes = [_loops(64, 128), _loops(1, big), _loops(4, 16),      # unblocked, 1 blocked, unbl.
              None,                                                  # a kernel's step
              _loops(1, big), _loops(1, big), _loops(1, big),       # a long blocked run stays
              _loops(1, small), None]
    seg = fusing.segments(shapes, names, {})
    assert seg[0] == seg[1] == seg[2] and not seg[0][1]
    assert seg[3] is None and seg[8] is None
    assert seg[4] == seg[5] == seg[6] and seg[4][1]
    assert seg[7] != seg[6] and not seg[7][1]
    # a short blocked run with no unblocked fusable neighbour keeps its blocking
    alone = fusing.segments([None, _loops(1, big), None], ["add"] * 3, {})
    assert alone[1][1]


@needs_numba
def test_the_deep_step_runs_few_fused_segments(monkeypatch):
    """No short blocked segment is left beside an unblocked one (each would be a call)."""
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "always")
    made = _executables(monkeypatch)
    _deep_train(True, steps=3)
    entries = max(made, key=lambda e: len(e.steps)).run_plan.entries
    # consecutive entries both fused: a segment boundary the plan kept
    pairs = [((len(c1), b1), (len(c2), b2)) for (s1, c1, b1), (s2, c2, b2)
             in zip(entries, entries[1:]) if s1 is None and s2 is None]
    for (n1, b1), (n2, b2) in pairs:
        assert not (b1 and not b2 and n1 <= fusing.SHORT)
        assert not (b2 and not b1 and n2 <= fusing.SHORT)
    assert any(block for step, _, block in entries if step is None)   # AdamW's stay blocked


def test_int32_parts_encode_as_the_documented_formula():
    """`encode`'s parts written in place: hi = (v >> 16) + 32768 and lo = v & 0xFFFF of every
    int32, the extremes included, stacked on axis 0; decoding gives v back."""
    from aneforge import dtypes
    from aneforge.core import boundary
    from aneforge.ir.types import TensorType
    rng = np.random.default_rng(1)
    v = np.concatenate([[0, -1, 1, 2 ** 31 - 1, -2 ** 31, 65535, 65536, -65536, 32767, -32768],
                        rng.integers(-2 ** 31, 2 ** 31, 54)]).astype(np.int32).reshape(8, 8)
    t = TensorType((8, 8), dtypes.int32)
    parts = boundary.encode(v, t, wide=True)
    w = v.astype(np.int64).reshape(1, 8, 8)
    expect = np.concatenate([(w >> 16) + 32768, w & 0xFFFF]).astype(np.uint16)
    assert parts.dtype == np.uint16
    np.testing.assert_array_equal(parts, expect)
    np.testing.assert_array_equal(boundary.decode(parts, t), v)


@needs_numba
def test_an_int16_label_input_leaves_the_fp16_inputs_one_load(monkeypatch):
    """An eager step takes its labels as int16 (placed: the plan bounds them): they are copied
    on their own, the fp16 inputs still load in one call over their spans, not one by one."""
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "always")
    made = _executables(monkeypatch)
    _deep_train(False, steps=2)
    exe = max(made, key=lambda e: len(e.steps))
    plan = exe.run_plan
    labels = [i for i, (s, carrier) in enumerate(exe.inputs) if carrier == np.int16]
    assert labels and [i for i, *_ in plan.other_ins] == labels
    fp16 = [i for i, (s, _) in enumerate(exe.inputs)
            if s in plan.views and exe.info[s].dtype == af.float16]
    assert plan.placed_ins == fp16 and len(fp16) > 10
    calls = []
    monkeypatch.setattr(plan_mod.np, "copyto", lambda *a, **k: calls.append(a[0].shape))
    env = list(plan.start)
    plan._load(env, [np.zeros(plan.views[s].shape if s in plan.views else (1,), np.float16)
                     if c is np.float32 else np.zeros(plan.views[s].shape, np.int16)
                     for s, c in exe.inputs])
    assert len(calls) == len(labels)                 # the labels alone are copied


@pytest.mark.parametrize("as_tensor", [False, True])
def test_int_arguments_cross_as_int16_and_wider_values_capture_again(monkeypatch, as_tensor):
    """A captured program takes an int argument whose values fit int16 as one int16 (its
    labels fuse, as eager); a replay whose argument leaves int16 is captured again (in two
    parts), never wrapped, and values that fit replay again."""
    from aneforge import replay as replay_mod
    captures = []
    original = replay_mod.Compiled._capture

    def spy(self, *a):
        captures.append(1)
        return original(self, *a)
    monkeypatch.setattr(replay_mod.Compiled, "_capture", spy)

    @af.compile(fullgraph=True)
    def f(x, idx):
        i = idx if as_tensor else af.tensor(idx)
        return x + i.to(af.float32) * 0.5

    x = af.zeros(6)
    small = [np.array([1, -2, 300, 32767, -32768, 7]), np.array([5, 4, 3, 2, 1, 0])]
    wide = np.array([40000, -40000, 70000, 2 ** 31 - 1, -2 ** 31, 9])
    for idx in [small[0], small[1], wide, small[0], wide]:
        arg = af.tensor(idx.astype(np.int32)) if as_tensor else idx.astype(np.int32)
        with np.errstate(over="ignore"):
            expect = (idx.astype(np.float32) * np.float32(0.5)).astype(np.float16)
        same_bits(f(x, arg).numpy(), expect.astype(np.float32))
    # captured with narrow values, replayed, captured again in parts for the wide ones; the
    # parts program then takes any values (no capture after)
    assert len(captures) == 2
