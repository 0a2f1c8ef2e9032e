"""The simulator's run plan (aneforge/runtime/plan.py): an arena placed by lifetime and runs of
elementwise ops fused into one compiled call must change no bit of any result."""
from __future__ import annotations

import functools
import threading
import tracemalloc
import warnings
import weakref

import numpy as np
import pytest

import aneforge as af
from aneforge.hardware import kernels
from aneforge.core.realization import clear_cache
from aneforge.hardware.numerics import FAMILY
from aneforge.runtime import fusing, layout, plan as plan_mod
from aneforge.runtime.sim import SimExecutable

needs_numba = pytest.mark.skipif(not kernels.available(), reason="the run plan needs numba")
pytestmark = needs_numba

# fp16 values that exercise every rounding path: signed zeros, subnormals, the overflow edge,
# infinities, NaN, ties
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 6e-8, -6e-8, 3e-5, 65504.0,
                    -65504.0, 2049.0, 1e-4, 3.140625, 1 / 3, 0.1, -7.5, 4096.0, 2.0 ** -14],
                   np.float32).astype(np.float16)


def both(monkeypatch, fn):
    """fn() run by the plain interpreter and by the run plan."""
    out = []
    for choice in ("never", "always"):
        monkeypatch.setenv("ANEFORGE_SIM_PLAN", choice)
        out.append(fn())
    return out


@pytest.fixture(params=["full", "lean"])
def vm(request):
    """The fused VM (and tile matmul) the run plan calls: the full forms, or the lean ones a
    fresh install runs while those compile (`kernels.SWAPS`): the same bits."""
    kernels.wait()
    with kernels.forms(request.param):
        yield request.param


def _executables(monkeypatch) -> list:
    """The SimExecutables made from now on (in the order they are made; the compile cache is
    cleared, so every program is compiled again)."""
    clear_cache()
    made = []
    original = SimExecutable.__init__

    def spy(self, program, numerics):
        original(self, program, numerics)
        made.append(self)
    monkeypatch.setattr(SimExecutable, "__init__", spy)
    return made


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    nan = np.isnan(a) if a.dtype.kind == "f" else np.zeros(a.shape, bool)
    assert (np.isnan(b) == nan).all() if a.dtype.kind == "f" else True
    if a.dtype.kind == "f":       # NaN payloads are not modelled; everything else bit for bit
        ai, bi = a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}")
        bad = (ai != bi) & ~nan
        assert not bad.any(), f"{bad.sum()} values differ, first at {np.argwhere(bad)[0]}: " \
                              f"{a[bad][0]!r} vs {b[bad][0]!r}"
    else:
        np.testing.assert_array_equal(a, b)


BINARY = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y, "maximum": af.maximum, "minimum": af.minimum}
UNARY = {"abs": lambda x: x.abs(), "sqrt": lambda x: x.sqrt(), "neg": lambda x: -x,
         "relu": lambda x: x.relu(),
         "reshape": lambda x: x.reshape(-1) * 1.0, "unsqueeze": lambda x: x.unsqueeze(0) + 0.0,
         "to32": lambda x: x.to(af.float32) * 3.0,
         "to16": lambda x: (x.to(af.float32) * 3.0).to(af.float16)}
MODELS = {"default": {}, "ieee": {"specials": "ieee"}, "half_away": {"rounding": "half_away"},
          "flush": {"subnormals": "flush"}}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_binary_special_values_every_pair(monkeypatch, vm, model, name, dtype):
    """Every pair of special values, as a column against a row (a broadcast on each side),
    and both sides full."""
    col = SPECIAL.reshape(-1, 1).astype(dtype)
    row = SPECIAL.reshape(1, -1).astype(dtype)
    full = np.broadcast_to(row, (len(SPECIAL), len(SPECIAL))).copy()

    def run():
        with af.numerics(**MODELS[model]):
            x, y, f = af.tensor(col), af.tensor(row), af.tensor(full)
            return [BINARY[name](x, y).numpy(), BINARY[name](f, x).numpy(),
                    BINARY[name](f, 2.5).numpy(), BINARY[name](f.t(), f).numpy()]
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_and_casts_special_values(monkeypatch, vm, model, name):
    rng = np.random.default_rng(1)
    data = np.concatenate([SPECIAL, (rng.standard_normal(300) * 300).astype(np.float16)])

    def run():
        with af.numerics(**MODELS[model]):
            return UNARY[name](af.tensor(data.reshape(-1, 8))).numpy()
    same_bits(*both(monkeypatch, run))


def test_a_chain_of_ops_random_data(monkeypatch, vm):
    """A long elementwise chain with broadcasts of every kind (scalar, row, column)."""
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((33, 70)) * 4).astype(np.float16)
    r = (rng.standard_normal(70)).astype(np.float16)
    c = (rng.standard_normal((33, 1)) + 3).astype(np.float16)

    def run():
        x, row, col = af.tensor(a), af.tensor(r), af.tensor(c)
        y = (x * row + col) / (col.abs() + 0.5)
        y = af.maximum(y, x * 0.25).sqrt() - af.minimum(x, row)
        return (y.reshape(70, 33) * 1.5 + 2.0).numpy()
    same_bits(*both(monkeypatch, run))


def test_a_long_flat_chain_runs_blocked_and_identical(monkeypatch, vm):
    """Values and scalars over 10000 elements: the run is blocked (1024 at a time), and values
    that die inside it must not be overwritten before every block has read them."""
    rng = np.random.default_rng(4)
    a, b = ((rng.standard_normal(10000) * 8).astype(np.float16) for _ in range(2))

    def run():
        x, y = af.tensor(a), af.tensor(b)
        s = (x * 0.0 + 3.0)[:1]                    # a one-element value that dies early
        z = x * y + s
        w = (z - x).abs().sqrt() / (y.abs() + 1.0)
        v = af.maximum(w, z * 0.125) - af.minimum(x, 2.0 - y)
        return (v * 0.5 + w).numpy()
    same_bits(*both(monkeypatch, run))
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "always")
    made = _executables(monkeypatch)
    clear_cache()
    run()
    blocks = [block for e in made for step, _, block in e.run_plan.entries if step is None]
    assert fusing.BLOCK in blocks


def _train(steps, seed=0, width=32):
    af.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = af.nn.Sequential(af.nn.Linear(16, width), af.nn.GELU(), af.nn.Linear(width, 4))
    opt = af.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        x = af.tensor(rng.random((8, 16)).astype(np.float32))
        y = af.tensor(rng.integers(0, 4, 8))
        opt.zero_grad()
        loss = af.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.numpy() for p in model.parameters()]


@pytest.mark.parametrize("width", [32, 160])
def test_training_is_bit_identical(monkeypatch, vm, width):
    (l1, p1), (l2, p2) = both(monkeypatch, lambda: _train(6, width=width))
    assert l1 == l2
    for a, b in zip(p1, p2):
        same_bits(a, b)


def test_auto_plans_from_the_second_run(monkeypatch):
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "auto")
    seen = []
    original = SimExecutable.run

    def spy(self, inputs):
        out = original(self, inputs)
        seen.append((id(self), self.runs, self.run_plan is not None))
        return out
    monkeypatch.setattr(SimExecutable, "run", spy)
    x = np.arange(12, dtype=np.float16).reshape(3, 4) + 0.125
    for _ in range(3):
        (af.tensor(x) * 0.5 + 7.0).numpy()
    mine = [(runs, planned) for key, runs, planned in seen if key == seen[-1][0]]
    assert mine[-1][0] >= 2 and mine[-1][1], "planned by the second run"
    assert all(not planned for runs, planned in mine if runs == 1), "not on the first"


def _step_executable(monkeypatch):
    """A training step's executable after it has run enough to be planned."""
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "always")
    made = _executables(monkeypatch)
    clear_cache()
    # a [width, 16] weight of more than 2 BLOCK elements: its AdamW update runs blocked
    _train(3, width=2 * fusing.BLOCK // 16 + 16)
    return max(made, key=lambda e: len(e.steps))


def test_the_plan_fuses_runs_and_reuses_places(monkeypatch):
    exe = _step_executable(monkeypatch)
    plan = exe.run_plan
    fused = [code for step, code, _ in plan.entries if step is None]
    fused_ops = sum(len(c) for c in fused)
    assert fused_ops >= len(exe.steps) // 2          # most of an AdamW step is elementwise
    assert len(fused) < fused_ops / 3                # ... in long runs
    total = sum(v.size for v in plan.views.values())
    assert plan.arena.size < total                   # places are reused by lifetime


def test_places_of_live_values_never_overlap(monkeypatch):
    """Two values share arena elements only if their lives do not overlap. Inside a blocked
    segment a value lives to the segment's end, and a block-local value's BLOCK elements are
    its own for the whole segment, except to a later block-local value of the segment made
    after its last reader (each block runs the ops in order)."""
    exe = _step_executable(monkeypatch)
    plan = exe.run_plan
    seg, n = plan.segment, len(exe.steps)

    def segment_end(k):
        while seg[k] is not None and seg[k][1] and k + 1 < n and seg[k + 1] == seg[k]:
            k += 1
        return k

    def segment_start(k):
        while seg[k] is not None and seg[k][1] and k and seg[k - 1] == seg[k]:
            k -= 1
        return k
    born, dead = {}, {}
    for s, _ in exe.constants + exe.inputs:
        born[s] = -1
    for k, (step, frees) in enumerate(zip(exe.steps, plan.frees)):    # as the plan keeps them
        for s in step.outs:
            born.setdefault(s, segment_start(k) if s in plan.local else k)
        for s in frees:
            dead[s] = segment_end(k)
    # a block-local value among its segment's others: from the step making it to its last
    # reader
    made = {s: k for k, step in enumerate(exe.steps) for s in step.outs}
    last = {s: k for k, frees in enumerate(plan.frees) for s in frees}
    keep = {s for s, _ in exe.outputs} | {s for s, _ in exe.constants}
    # a reshape sharing its input's place (`plan.alias`), a new parameter or state written
    # over the old one's (`plan.carry`): one life from the first's birth to the last one's death
    groups = {}
    for s, o in plan.place.items():
        size = fusing.BLOCK if s in plan.local else int(np.prod(exe.info[s].shape))
        end = n if s in keep else dead.get(s, n)
        root = plan.alias.get(s, s)
        root = plan.carry.get(root, root)
        _, _, _, b, d = groups.get(root, (root, o, size, born[s], end))
        groups[root] = (root, o, size, min(b, born[s]), max(d, end))
    spans = list(groups.values())
    assert plan.local, "an AdamW step has values that exist one block at a time"
    assert plan.alias, "its reshapes share their inputs' places"
    for i, (s, o, size, b, d) in enumerate(spans):
        for t, o2, size2, b2, d2 in spans[i + 1:]:
            if o < o2 + size2 and o2 < o + size:                # share arena elements
                if s in plan.local and t in plan.local and seg[made[s]] == seg[made[t]]:
                    b, d, b2, d2 = made[s], last[s], made[t], last[t]
                assert d < b2 or d2 < b, f"slots {s} and {t} overlap while both are live"


def test_steady_state_memory_is_flat(monkeypatch):
    """A replayed training step holds none of its values afterwards: 300 more steps of a
    model whose activations are 32 KB each grow the traced memory by far less than one
    activation per step (what does grow is CPython's free lists, which stop at their caps)."""
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "auto")
    rng = np.random.default_rng(0)
    model = af.nn.Sequential(af.nn.Linear(64, 128), af.nn.ReLU(), af.nn.Linear(128, 10))
    opt = af.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    x = rng.random((64, 64)).astype(np.float32)
    y = rng.integers(0, 10, 64)
    made, runs = _executables(monkeypatch), {}
    original_run = SimExecutable.run

    def spy_run(self, inputs):
        runs[id(self)] = list(inputs)
        return original_run(self, inputs)
    monkeypatch.setattr(SimExecutable, "run", spy_run)
    clear_cache()

    @af.compile
    def step(x, y):
        opt.zero_grad()
        loss = af.nn.functional.cross_entropy(model(af.tensor(x)), af.tensor(y))
        loss.backward()
        opt.step()
        return loss
    for _ in range(100):
        step(x, y).item()
    tracemalloc.start()
    first, _ = tracemalloc.get_traced_memory()
    for _ in range(300):
        step(x, y).item()
    second, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # one leaked activation a step would be 300 x 32 KB; CPython's and numpy's caches of small
    # objects grow about 0.6-1 KB a step here until they are full (after ~2000 steps)
    assert second - first < 300 * 4096, f"grew by {second - first} bytes over 300 steps"

    exe = max(made, key=lambda e: len(e.steps))
    arena = exe.run_plan.arena
    monkeypatch.setattr(SimExecutable, "run", original_run)
    inputs = runs[id(exe)]
    exe.run(inputs)     # this loop's steady state: the outputs' buffer pool (`RunPlan._buffer`)
    tracemalloc.start()
    first, _ = tracemalloc.get_traced_memory()
    for _ in range(300):
        exe.run(inputs)
    second, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # what remains is CPython's free lists filling (bounded: flat after ~2000 steps)
    assert second - first < 64 * 1024, f"the executable grew by {second - first} bytes"
    assert exe.run_plan.arena is arena                   # the same memory, every run


def test_concurrent_runs_are_right(monkeypatch):
    """One executable run from two threads: one uses the arena, the other interprets."""
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "always")
    rng = np.random.default_rng(3)
    data = [(rng.standard_normal((64, 64)) * 2).astype(np.float16) for _ in range(8)]
    want = [((d * d + 1.0) / (np.abs(d) + 2.0)) for d in data]

    def f(d):
        t = af.tensor(d)
        return ((t * t + 1.0) / (t.abs() + 2.0)).numpy()
    results = {}

    def work(i):
        results[i] = [f(d) for d in data]
    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "never")
    for i in range(2):
        for d, got, w in zip(data, results[i], want):
            same_bits(got, f(d))
            np.testing.assert_allclose(got.astype(np.float32), w.astype(np.float32), rtol=2e-3)


def test_numpy_kernels_bypass_the_plan(monkeypatch):
    """With the numpy reference chosen, a planned executable interprets again."""
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "always")
    d = np.linspace(-3, 3, 40, dtype=np.float16)
    f = lambda: (af.tensor(d) * 3.0 + 1.0).numpy()     # noqa: E731
    planned = f()
    with kernels.using("numpy"):
        same_bits(f(), planned)


def test_bad_plan_mode_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "sometimes")
    with pytest.raises(ValueError, match="ANEFORGE_SIM_PLAN must be one of"):
        plan_mod.mode()


def test_collapse_merges_loops():
    # a (4, 5, 6) output with a full operand and a row operand: one loop for the full, two
    # for the row broadcast
    full = plan_mod._strides((4, 5, 6), (4, 5, 6))
    row = plan_mod._strides((6,), (4, 5, 6))
    assert plan_mod._collapse((4, 5, 6), [full]) == (1, 120, [(0, 1)])
    assert plan_mod._collapse((4, 5, 6), [full, row]) == (20, 6, [(6, 1), (0, 1)])
    col = plan_mod._strides((4, 1, 6), (4, 5, 6))        # needs three loops
    assert plan_mod._collapse((4, 5, 6), [full, col]) is None


def test_arena_first_fit_reuses_and_coalesces():
    arena = plan_mod.Arena()
    a, b, c = arena.take(16), arena.take(32), arena.take(16)
    assert (a, b, c) == (0, 16, 48)
    arena.give(b, 32)
    assert arena.take(16) == 16                     # first fit inside the freed extent
    arena.give(a, 16)
    arena.give(16, 16)
    assert arena.free == [[0, 48]]                  # coalesced
    assert arena.take(40) == 0 and arena.size == 64


@pytest.mark.parametrize("tables", [True, False])
def test_the_arena_holds_a_few_values_of_a_long_chain(monkeypatch, tables):
    """36 intermediate (128, 128) values, a handful alive at once: the arena is that handful,
    whether the chain becomes lookups or (no table free) runs op by op, blocked, its values
    sharing block places by lifetime."""
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "always")
    if not tables:
        plan_mod.TABLES.clear()
        monkeypatch.setattr(plan_mod._Tables, "LIMIT", 0)
    made = _executables(monkeypatch)
    x = af.tensor(np.random.default_rng(0).random((128, 128)).astype(np.float32) + 0.25)
    y = x
    for _ in range(12):
        y = (y * 1.001).relu() + 0.5
    y.sum().numpy()
    exe = max(made, key=lambda e: len(e.steps))
    one = 128 * 128 * 4
    assert exe.run_plan.arena.nbytes < 8 * one, exe.run_plan.arena.nbytes / one


def test_planned_inputs_coerce_nan_and_warn(monkeypatch):
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "always")
    d = np.array([1.0, np.nan, -2.0, np.nan], np.float16)
    for _ in range(2):                         # the first run plans, the second reuses it
        with pytest.warns(af.ANEHazardWarning, match="2 NaN value"):
            got = (af.tensor(d) * 2.0).numpy()
        assert got.tolist() == [2.0, np.inf, -4.0, np.inf]


# ---- pointwise ops as lookups --------------------------------------------------------------
# attributes to run each pointwise op with (every registered pointwise op must be listed)
POINTWISE_ATTRS = {
    "log": [{}, {"epsilon": 1e-3}], "rsqrt": [{}, {"epsilon": 1e-4}],
    "gelu": [{"mode": m} for m in ("EXACT", "TANH_APPROXIMATION", "SIGMOID_APPROXIMATION")],
    "clip": [{"alpha": -1.0, "beta": 2.5}], "leaky_relu": [{"alpha": 0.1}],
}
EVERY_FP16 = np.random.default_rng(5).permutation(
    np.arange(1 << 16, dtype=np.uint16)).view(np.float16).reshape(256, 256)
LOOKUP_MODELS = dict(MODELS, exact={"activations": "exact"}, m5=dict(FAMILY["A16"]),
                     per_product={"model": "per_product"})


def _pointwise_ops():
    from aneforge.ops import REGISTRY
    return sorted(name for name, d in REGISTRY.items() if d.pointwise)


def test_every_pointwise_op_has_lookup_cases():
    assert {"exp", "erf", "gelu", "tanh", "sigmoid", "log"} <= set(_pointwise_ops())
    for name in _pointwise_ops():
        assert name in POINTWISE_ATTRS or not __import__("aneforge").ops.REGISTRY[name].attrs


@pytest.mark.parametrize("model", LOOKUP_MODELS)
@pytest.mark.parametrize("name", _pointwise_ops())
def test_pointwise_lookup_every_fp16_value(monkeypatch, vm, model, name):
    """A pointwise op from fp16 to fp16 runs in the plan as a lookup in a table of its own
    results: over all 65536 fp16 inputs (in a shuffled order, and read transposed) its bits
    equal the interpreter's, under every numerics model."""
    plan_mod.TABLES.clear()             # the suite before may have made LIMIT tables
    clear_cache()
    made = _executables(monkeypatch)

    def run():
        out = []
        with af.numerics(**LOOKUP_MODELS[model]):
            x = af.tensor(EVERY_FP16)
            for attrs in POINTWISE_ATTRS.get(name, [{}]):
                y = (x * 1.0)._unary(name, **attrs)
                out += [y.numpy(), ((x.t() * 1.0)._unary(name, **attrs) + 0.0).numpy()]
        return out
    plain, planned = both(monkeypatch, run)
    for a, b in zip(plain, planned):
        same_bits(a, b)
    lookups = [row for e in made if e.run_plan for step, code, _ in e.run_plan.entries
               if step is None for row in code if row[0] == kernels_fused().LOOKUP]
    assert lookups or name in fusing.FUSED


def kernels_fused():
    from aneforge.hardware.kernels import fused
    return fused


def test_a_lookup_table_is_built_once_and_shared(monkeypatch):
    """Two programs with the same pointwise op, attributes and numerics share one table; other
    attributes or numerics get their own."""
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "always")
    plan_mod.TABLES.clear()
    clear_cache()                       # no executable planned before the tables were cleared
    x, y = af.tensor(SPECIAL.reshape(4, 5)), af.tensor(SPECIAL[::-1].reshape(4, 5))
    x.erf().numpy(), (x * y).erf().numpy()
    assert len(plan_mod.TABLES.offset) == 1
    x.clamp(-1.0, 2.0).numpy(), x.clamp(-1.0, 3.0).numpy()
    with af.numerics(rounding="half_away"):
        x.erf().numpy()
    assert len(plan_mod.TABLES.offset) == 4
    assert sorted(plan_mod.TABLES.offset.values()) == [0, 1 << 16, 2 << 16, 3 << 16]
    before = plan_mod.TABLES.array
    x.exp().numpy()
    assert plan_mod.TABLES.array is before         # a new table never moves the others


# ---- exact ops writing into their places -----------------------------------------------------
INTO_CASES = {
    "concat": lambda x, y: af.cat([x * 1.0, y * 2.0, x - 1.0], 1),
    "concat_negative_axis": lambda x, y: af.cat([x * 1.0, y * 2.0], -1),
    "stack": lambda x, y: af.stack([x * 1.0, y + 1.0, x * y], 0),
    "pad_constant": lambda x, y: af.nn.functional.pad(x * 1.0, (1, 2, 0, 3), value=-2.5),
    "pad_reflect": lambda x, y: af.nn.functional.pad((x * 1.0)[None], (2, 1, 1, 0), "reflect"),
    "pad_replicate": lambda x, y: af.nn.functional.pad((x * 1.0)[None], (0, 3, 2, 2),
                                                       "replicate"),
    # a strided slice's gradient: an interleaving concat with zeros, then a zero pad
    "slice_grad": lambda x, y: af.grad(((x * 1.0)[1:, 1::3] * y[1:, 1::3]).sum(), [x])[0],
}


@pytest.mark.parametrize("name", INTO_CASES)
def test_exact_ops_written_into_their_places_are_identical(monkeypatch, vm, name):
    made = _executables(monkeypatch)
    rng = np.random.default_rng(7)
    a = np.concatenate([SPECIAL, rng.standard_normal(28).astype(np.float16)]).reshape(6, 8)
    b = (rng.standard_normal((6, 8)) * 9).astype(np.float16)

    def run():
        x, y = af.tensor(a, requires_grad=name == "slice_grad"), af.tensor(b)
        return INTO_CASES[name](x, y).numpy()
    same_bits(*both(monkeypatch, run))
    # (or moved there: slice_grad's interleave with zeros and pad compose into one move)
    direct = [step for e in made if e.run_plan for step, _, _ in e.run_plan.entries
              if step is not None and step.store in (plan_mod._INTO, plan_mod._MOVED)]
    assert direct, "no step wrote into its place"


@pytest.mark.parametrize("model", MODELS)
def test_tall_narrow_ops_run_by_columns_identically(monkeypatch, vm, model):
    """Ops over [rows, few columns] (a batch of class scores) run column by column: every
    broadcast shape, special values, a lookup among them."""
    rng = np.random.default_rng(3)
    tall = np.concatenate([np.tile(SPECIAL, 4), rng.standard_normal(40).astype(np.float16)])
    tall = tall.reshape(60, 2)[:, :1] * np.float16(1) + rng.standard_normal((60, 5)).astype(
        np.float16)
    col = np.concatenate([SPECIAL, SPECIAL * np.float16(-3), SPECIAL[::-1]]).reshape(60, 1)
    row = SPECIAL[:5].reshape(1, 5)

    def run():
        with af.numerics(**MODELS[model]):
            t, c, r = af.tensor(tall), af.tensor(col), af.tensor(row)
            y = (t - c) * r + t / c
            return [y.numpy(), (y.exp() + c).numpy(), af.maximum(t, r).numpy()]
    made = _executables(monkeypatch)
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    narrow = [row for e in made if e.run_plan for step, code, _ in e.run_plan.entries
              if step is None
              for row in code if row[3] < kernels_fused().NARROW and row[2] >= 4 * row[3]]
    assert narrow


def test_past_the_table_limit_pointwise_ops_are_computed(monkeypatch):
    """The tables are bounded: once LIMIT exist, a new kind of pointwise op runs its kernel,
    with the same bits."""
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "always")
    plan_mod.TABLES.clear()
    clear_cache()
    monkeypatch.setattr(plan_mod._Tables, "LIMIT", 2)
    made = _executables(monkeypatch)
    x = af.tensor(SPECIAL.reshape(4, 5))
    got = [x.clamp(-1.0, b).numpy() for b in (2.0, 3.0, 4.0)]
    assert len(plan_mod.TABLES.offset) == 2
    lookups = [sum(row[0] == kernels_fused().LOOKUP for step, code, _ in e.run_plan.entries
                   if step is None for row in code) for e in made]
    assert lookups == [1, 1, 0]
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "never")
    for b, planned in zip((2.0, 3.0, 4.0), got):
        same_bits(x.clamp(-1.0, b).numpy(), planned)


def test_tiles_of_size_one_axes_run_as_broadcast_copies(monkeypatch, vm):
    """expand / repeat along size-1 axes (a tile that only broadcasts) joins the fused runs;
    a tile repeating a longer axis does not; both give the interpreter's bits."""
    made = _executables(monkeypatch)
    col = np.concatenate([SPECIAL, SPECIAL[:4]]).reshape(24, 1)
    one = SPECIAL[2:3]

    def run():
        c, o = af.tensor(col), af.tensor(one)
        return [(c * 1.5).expand(24, 10).numpy(), (o + 0.5).expand(7).numpy(),
                ((c * 1.5).repeat(2, 3) + 1.0).numpy()]
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    kinds = [[(step.ctx.op_type if step is not None else "fused")
              for step, _, _ in e.run_plan.entries] for e in made if e.run_plan]
    tiles = [k for ks in kinds for k in ks if k == "tile"]
    assert len(tiles) == 1                      # the repeat of a 24-long axis only


def test_transposes_run_as_strided_copies(monkeypatch, vm):
    """A transpose between computing ops joins the fused runs as a copy reading its input with
    the permutation's strides: 2-D, one needing an outer loop, and an int label's (so the
    compares after it fuse too); one needing four loops keeps its kernel. The interpreter's
    bits."""
    made = _executables(monkeypatch)
    x = np.resize(SPECIAL, (3, 4, 5, 2))
    labels = np.arange(-6, 6, dtype=np.int16).reshape(4, 3)

    def run():
        t, n = af.tensor(x) * 1.0, af.tensor(labels).to(af.int32)
        return [(t[0, 0].T * 1.5).numpy(), (t.permute(1, 0, 2, 3) * 2.0).numpy(),
                ((n.T == 3).to(af.float16) + 1.0).numpy(), (t.permute(3, 2, 1, 0) + 1.0).numpy()]
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    assert _kernel_ops(made).count("transpose") == 1          # the four-loop one
    assert {"equal", "copy"} <= set(_opcodes(made))


# ---- compares, select, casts and int / bool values in the arena ------------------------------
def _opcodes(made) -> list:
    """The opcode names of every fused row the planned executables in `made` run."""
    return [kernels_fused().OPCODES[row[0]] for e in made if e.run_plan
            for step, code, _ in e.run_plan.entries if step is None for row in code]


def _kernel_ops(made) -> list:
    return [step.ctx.op_type for e in made if e.run_plan for step, _, _ in e.run_plan.entries
            if step is not None]


COMPARES = {"less": lambda x, y: x < y, "less_equal": lambda x, y: x <= y,
            "greater": lambda x, y: x > y, "greater_equal": lambda x, y: x >= y,
            "equal": lambda x, y: x == y, "not_equal": lambda x, y: x != y}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", COMPARES)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_compares_and_selects_special_values(monkeypatch, vm, model, name, dtype):
    """Every pair of special values compared (a column against a row), the bool selecting
    between values, cast to float, negated: fused, with the interpreter's bits."""
    col = SPECIAL.reshape(-1, 1).astype(dtype)
    row = SPECIAL.reshape(1, -1).astype(dtype)
    made = _executables(monkeypatch)

    def run():
        with af.numerics(**MODELS[model]):
            x, y = af.tensor(col, dtype=dtype) * 1.0, af.tensor(row, dtype=dtype) * 1.0
            c = COMPARES[name](x, y)
            return [af.where(c, x, y * 2.0).numpy(), (c.to(af.float16) * 3.0).numpy(),
                    af.where(~c, x - y, x).numpy(), (c.to(af.float32) + x).numpy()]
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    ran = _opcodes(made)
    assert {name, "select", "logical_not"} <= set(ran)
    assert not {"select", name, "cast", "logical_not"} & set(_kernel_ops(made))


def test_casts_to_bool_and_between_ints_fuse(monkeypatch, vm):
    """float -> bool (NaN true, -0 false), int16 -> int32 -> bool, bool -> int16 -> fp16."""
    made = _executables(monkeypatch)
    rng = np.random.default_rng(8)
    labels = rng.integers(-300, 300, (40, 6)).astype(np.int16)
    data = np.concatenate([SPECIAL, SPECIAL[::-1]]).reshape(40, 1)

    def run():
        x, n = af.tensor(data) * 1.0, af.tensor(labels)
        wide = n.to(af.int32)
        as_bool = x.to(af.bool)
        picked = af.where(as_bool, wide.to(af.float16), x * 2.0)
        flags = (wide > 7).to(af.int16).to(af.float16) + wide.to(af.bool).to(af.float32)
        return [picked.numpy(), flags.numpy()]
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    assert {"nonzero", "greater", "select"} <= set(_opcodes(made))
    assert "cast" not in _kernel_ops(made)


def test_ints_the_plan_cannot_bound_keep_their_kernels(monkeypatch):
    """int32 products past 2**24 (float32 would round them: their difference shows it), one
    that wraps around int32, an int32 from argmax (no bound the plan derives): their ops run
    their kernels, with the same results, wrap included; bounded int32 arithmetic fuses."""
    made = _executables(monkeypatch)
    labels = np.array([-32768, -32767, -1, 0, 1, 33, 32767, 7], np.int16).reshape(2, 4)
    data = np.concatenate([SPECIAL[:8]]).reshape(2, 4)

    def run():
        n, x = af.tensor(labels).to(af.int32), af.tensor(data) * 1.0
        past = ((n * 1001) - (n * 1000)).to(af.float32) * 1.0            # exactly n
        wraps = (n * 100000 * 1000).to(af.float32) * 1.0                  # int32 wraps
        safe = ((n + 7) * 3).to(af.float32) * 1.0                         # bounded: fused
        best = (x.argmax(-1) == 2).to(af.float16) + 1.0
        return [past.numpy(), wraps.numpy(), safe.numpy(), best.numpy()]
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    kernel = _kernel_ops(made)
    assert kernel.count("mul") >= 3 and "sub" in kernel and "equal" in kernel
    assert {"add", "mul"} <= set(_opcodes(made))          # the bounded int32 arithmetic


def test_the_label_chain_of_a_training_step_fuses(monkeypatch):
    """cross_entropy's int16 labels (cast, expand_dims, compares, selects, casts to float)
    run in the fused VM: a training step's kernel steps are its matmuls."""
    plan_mod.TABLES.clear()             # the suite before may have made LIMIT tables
    exe = _step_executable(monkeypatch)
    kernel = [step.ctx.op_type for step, _, _ in exe.run_plan.entries if step is not None]
    # automatic gradient scaling gathers the pass's per-parameter peaks with one concat
    assert set(kernel) - {"concat"} <= {"matmul", "linear"} and kernel.count("concat") <= 1, kernel
    bounded = [s for s in exe.run_plan.views if exe.info[s].dtype not in plan_mod._FLOAT]
    assert bounded, "int and bool values live in the arena"


def test_bounds_of_int_values():
    """The ranges the plan derives for int results, and which it accepts as exact."""
    b = fusing.BOUNDS
    assert b["add"]((-3, 5), (10, 20)) == (7, 25)
    assert b["sub"]((-3, 5), (10, 20)) == (-23, -5)
    assert b["mul"]((-3, 5), (-2, 4)) == (-12, 20)
    assert b["abs"]((-3, 5),) == (0, 5) and b["abs"]((-9, -4),) == (4, 9)
    assert b["maximum"]((-3, 5), (0, 2)) == (0, 5) and b["minimum"]((-3, 5), (0, 2)) == (-3, 2)
    assert b["select"]((0, 1), (-3, 5), (4, 9)) == (-3, 9)
    from aneforge import dtypes
    assert fusing.exact(dtypes.int32, (-2 ** 24, 2 ** 24))
    assert not fusing.exact(dtypes.int32, (0, 2 ** 24 + 1))        # float32 rounds it
    assert not fusing.exact(dtypes.int16, (0, 40000))               # int16 wraps it
    assert fusing.exact(dtypes.bool_, (0, 1))


# ---- reductions over the last axes -----------------------------------------------------------
def _every_bit(y) -> list:
    """y's values as a program returns them, and for fp32 the bits its fp16 output drops:
    (y - fp16(y)) * 2**11, twice over (a program's outputs are fp16), each realized before
    what it is computed from (a realized value is read back as fp16)."""
    ys = [y]
    for _ in range(2 if y.dtype == af.float32 else 0):
        ys.append((ys[-1] - ys[-1].to(af.float16).to(af.float32)) * 2048.0)
    return [t.numpy() for t in ys[::-1]]


REDUCTIONS = ("reduce_sum", "reduce_mean", "reduce_max", "reduce_min")
REDUCE_MODELS = dict(MODELS, wide={"reduce_accumulate": "wide"})


@pytest.mark.parametrize("model", REDUCE_MODELS)
@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_last_axis_reductions_are_identical(monkeypatch, vm, model, name, dtype):
    """Sums (narrow fp16, numpy's pairwise fp32), means, maxima and minima over the last axes,
    rows short and long (past numpy's 128-term blocks), special values among them. The values
    span a wide range and (fp32) use every mantissa bit, so the order of the adds shows."""
    rng = np.random.default_rng(9)
    data = {shape: (rng.standard_normal(shape) * np.exp(rng.standard_normal(shape) * 2) * 40
                    ).astype(np.float16)
            for shape in [(64, 10), (3, 1000), (5, 4, 7), (700,)]}
    data[(64, 10)].reshape(-1)[:len(SPECIAL)] = SPECIAL
    data[(3, 1000)][1, ::7] = SPECIAL[np.arange(143) % len(SPECIAL)]
    made = _executables(monkeypatch)

    def run():
        out = []
        with af.numerics(**REDUCE_MODELS[model]):
            for shape, d in data.items():
                x = af.tensor(d, dtype=dtype) / 3.0
                for axes, keep in [((-1,), True), ((-1,), False), (None, False)]:
                    out += _every_bit(x._reduce(name, axes, keep) * 1.0)
            x = af.tensor(data[(5, 4, 7)], dtype=dtype) / 3.0
            out += _every_bit(x._reduce(name, (1, 2), False) * 1.0)
        return out
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    assert name not in _kernel_ops(made)


@pytest.mark.parametrize("model", REDUCE_MODELS)
def test_reductions_over_leading_axes(monkeypatch, vm, model):
    """Over leading axes (a bias gradient's sum over the batch) the sequential folds fuse:
    the narrow fp16 sum and mean, max, min. numpy's fp32 sum over a leading axis is not its
    pairwise row sum, and a middle axis needs a third loop: those keep their kernels."""
    rng = np.random.default_rng(10)
    d = (rng.standard_normal((12, 9)) * 50).astype(np.float16)
    d.reshape(-1)[::5] = SPECIAL[np.arange(22) % len(SPECIAL)]
    made = _executables(monkeypatch)

    def run():
        with af.numerics(**REDUCE_MODELS[model]):
            x, w = af.tensor(d) * 1.0, af.tensor(d, dtype=af.float32) * 1.0
            out = [(x._reduce(name, (0,), keep) * 1.0).numpy() for name in REDUCTIONS
                   for keep in (True, False)]
            out += _every_bit(w._reduce("reduce_sum", (0,), False) / 3.0)
            out.append((x.reshape(3, 4, 9)._reduce("reduce_max", (1,), False) * 1.0).numpy())
            return out
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    assert {"max", "min"} <= set(_opcodes(made))
    kernel = _kernel_ops(made)
    assert "reduce_max" in kernel                     # the middle axis
    wide = model == "wide"                # an fp16 sum or mean then sums pairwise too
    assert kernel.count("reduce_sum") == (5 if wide else 3)     # the fp32 one in 3 programs
    assert kernel.count("reduce_mean") == (2 if wide else 0)


@pytest.mark.parametrize("model", MODELS)
def test_narrow_sums_over_a_batch_run_side_by_side(monkeypatch, vm, model):
    """A weight gradient's narrow fp16 sum (and mean) over the batch axis, many results wide:
    the fused loop keeps every result's running sum side by side (`_narrow_leading`, in chunks
    of 1024) and must give each one's in-order, rounded-per-add bits; the widths leave vector
    and chunk remainders and the terms grow past fp16's spacing, so a dropped or misplaced
    rounding shows."""
    rng = np.random.default_rng(11)
    data = [(rng.standard_normal(shape) * np.exp(rng.standard_normal(shape) * 3) * 30
             ).astype(np.float16) for shape in [(8, 1000), (3, 5, 37), (16, 2, 300), (4, 2500)]]
    data[0].reshape(-1)[::13] = SPECIAL[np.arange(616) % len(SPECIAL)]
    made = _executables(monkeypatch)

    def run():
        with af.numerics(**MODELS[model]):
            out = []
            for d in data:
                x = af.tensor(d) * 1.0
                out += [(x.sum(0) * 1.0).numpy(), (x.mean(0, keepdim=True) * 1.0).numpy()]
            out.append((af.tensor(data[2]) * 1.0).sum((0, 1)).numpy())
            return out
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    assert "reduce_sum" not in _kernel_ops(made) and "sum16" in _opcodes(made)


@pytest.mark.parametrize("width", [20, 300])
def test_a_zero_maximum_of_both_signs_runs_its_kernel(monkeypatch, vm, width):
    """A row whose largest value is 0 and holds +0 and -0: numpy's sign depends on its vector
    lanes, so the fused run stops there and the op's kernel computes it; the run resumes
    after it. Every other row is fused (its scans vectorized over rows of 300) by the full VM;
    the lean VM leaves every reduction but absmax to its kernel. Bits equal the
    interpreter's either way."""
    rows = np.full((48, width), -1.0, np.float16)
    rows[::2, 3], rows[::2, 17] = 0.0, -0.0         # both zeros: unsettled
    rows[1::4, 5] = -0.0                            # -0 only: settled, -0
    rows[3::4, :] = np.float16(-0.0)
    rows[5, 9] = np.nan
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "always")
    made = _executables(monkeypatch)
    settled = []
    original = plan_mod.RunPlan._call

    def spy(self, env, step, stores):
        settled.append(step.ctx.op_type)
        return original(self, env, step, stores)
    monkeypatch.setattr(plan_mod.RunPlan, "_call", spy)

    def run():
        x = af.tensor(rows) * 1.0
        return [(x.amax(-1, keepdim=True) - x).numpy(), ((x * -1.0).amin(-1) * 2.0).numpy(),
                ((x[1::2] * 1.0).amax(-1) + 1.0).numpy()]
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    # the full VM leaves the two ops with unsettled rows to their kernels; the lean VM leaves
    # every reduction (the third program's max too: its rows are settled)
    assert settled.count("reduce_max") == (1 if vm == "full" else 2)
    assert settled.count("reduce_min") == 1
    assert {"max", "min"} <= set(_opcodes(made))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_the_largest_magnitude_runs_as_one_absmax_row(monkeypatch, vm, model, dtype):
    """abs followed by a max over its result, read by nothing else (automatic scaling's max |g|
    of every gradient): one `absmax` row over abs's input, abs's result never made. Rows with
    NaN (a store may turn abs's NaN into +0: the max is then the others'), with zeros of both
    signs only, subnormals (flushed under "flush"), infinities, rows short and long, over the
    whole value, the last axis and the leading one: the bits of abs, its store, then max."""
    rng = np.random.default_rng(12)
    data = [(rng.standard_normal(shape) * np.exp(rng.standard_normal(shape) * 3) * 30
             ).astype(np.float16) for shape in [(64, 10), (3, 1000), (5, 4, 7), (700,)]]
    data[0].reshape(-1)[:len(SPECIAL)] = SPECIAL
    data[0][20], data[0][21, ::2] = np.float16(-0.0), 0.0       # a zero row, both signs
    data[0][22] = SPECIAL[7]                                     # subnormals only
    data[1][1, ::7] = SPECIAL[np.arange(143) % len(SPECIAL)]
    made = _executables(monkeypatch)

    def run():
        out = []
        with af.numerics(**MODELS[model]):
            for d in data:
                x = af.tensor(d, dtype=dtype) * 1.0
                out += [(x.abs().amax() * 1.0).numpy(), (x.abs().amax(-1) * 1.0).numpy(),
                        (x.abs().amax(0, keepdim=True) * 1.0).numpy(),
                        # inf * 0: NaN inside, and a max read as it is (a store after it
                        # would turn NaN into +0 under the engine's specials)
                        (x * af.tensor(np.isfinite(d) * 1.0, dtype=dtype)).abs().amax(-1)
                        .numpy()]
        return out
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    codes = _opcodes(made)
    assert codes.count("absmax") == 4 * len(data) and "abs" not in codes


@pytest.mark.parametrize("model", MODELS)
def test_an_absmax_row_with_nan_stores_each_magnitude_first(vm, model):
    """Rows holding NaN (which a program's stores keep out of abs's input under the
    engine's specials, so only a row written here reaches it): each |x| is stored, and the
    store's NaN-to-+0 comes before the max, as abs's step then reduce_max's would run."""
    from aneforge.hardware.numerics import get_numerics
    with af.numerics(**MODELS[model]):
        numerics = get_numerics()
    rows = np.array([[np.nan, 1.0, -3.0, 2.0], [-0.0, np.nan, 0.0, np.nan],
                     [6e-8, -6e-8, np.nan, 1e-4]], np.float32)
    for store in (-1, numerics.store_mode):
        stored = np.abs(rows) if store < 0 else numerics.round16(np.abs(rows))
        want = np.max(stored, axis=-1)
        arena = np.concatenate([rows.reshape(-1), np.zeros(3, np.float32)])
        fused = kernels_fused()
        row = [0] * fused.WIDTH
        row[:9] = [fused.OP["absmax"], -1, 3, 4, 12, 0, 4, 1, store]
        scratch = [np.zeros(8, np.float32) for _ in range(3)]
        assert fused.run(arena, np.array([row], np.int64), *scratch, 0, np.zeros(1, np.uint16),
                         0) in (-1, 0)
        if fused.run is fused.run_full:             # the lean VM leaves it to the kernels
            same_bits(arena[12:], want)


# ---- state fed back: outputs written over the inputs they replace ---------------------------
def _train_compiled(steps=8, write=lambda i, model, opt: None, width=32):
    """An AdamW step under af.compile; after each, the loss and every parameter read (the
    values a user sees between steps), then `write(i, model, opt)`; at the end the state.
    Programs are compiled anew (each executable learns what comes back in its first runs)."""
    clear_cache()
    af.manual_seed(0)
    model = af.nn.Sequential(af.nn.Linear(64, width), af.nn.GELU(), af.nn.Linear(width, 10))
    opt = af.optim.AdamW(model.parameters(), lr=3e-3)

    @af.compile(fullgraph=True)
    def step(x, y):
        opt.zero_grad()
        loss = af.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    rng, out = np.random.default_rng(5), []
    for i in range(steps):
        x = af.tensor(rng.standard_normal((16, 64)).astype(np.float32))
        out.append(step(x, af.tensor(rng.integers(0, 10, 16))).numpy())
        out += [p.numpy().copy() for p in model.parameters()]
        write(i, model, opt)
    return out + [v.numpy().copy() for st in opt.state.values() for v in st.values()]


def _user_writes(i, model, opt):
    """Writes between steps a replay must see: a parameter, an optimizer state, the lr."""
    with af.no_grad():
        if i == 2:
            model[0].weight.copy_(model[0].weight * 0.5)
        if i == 3:
            opt.state[model[2].bias]["exp_avg"].mul_(-2.0)
    if i == 4:
        opt.param_groups[0]["lr"] = 1e-2


def _numpy_writes(i, model, opt):
    """Writes into the arrays .numpy() hands out (torch's share the tensor's storage)."""
    if i == 3:
        opt.state[model[0].weight]["exp_avg"].numpy()[0, :4] = 0.5
    if i == 5:
        model[2].weight.numpy()[1] *= -1.0


@pytest.mark.parametrize("write", [None, _user_writes, _numpy_writes])
def test_state_fed_back_stays_in_place_bit_identical(monkeypatch, write):
    """The parameters and AdamW's state a step returns come back as its next inputs: the run
    plan writes each new value over the old one's place and does not load it again when
    given the very array it returned. The bits are the interpreter's, step after step, with
    the parameters read between steps and with a parameter, an optimizer state and the lr
    written between them (new arrays: loaded)."""
    skipped = []
    original = plan_mod.RunPlan._load

    def spy(self, env, inputs):
        skipped.append(sum(self.held[n]() is inputs[n] for n in self.held))
        return original(self, env, inputs)
    monkeypatch.setattr(plan_mod.RunPlan, "_load", spy)
    made = _executables(monkeypatch)
    run = functools.partial(_train_compiled, write=write or (lambda *a: None))
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    step = max((e for e in made if e.run_plan), key=lambda e: len(e.inputs))
    assert len(step.run_plan.resident) >= 4          # weights' moments, biases...
    assert max(skipped) == len(step.run_plan.resident)


def test_output_buffers_alternate_and_a_kept_output_is_never_written(monkeypatch):
    """A step's fp16 outputs are views of one buffer; the next steps reuse a buffer only once
    no output viewing it is alive (a training step's come back as inputs and are dropped a
    step later: two buffers alternate). An output the user keeps (`.numpy()`, which hands out
    the array itself) pins its buffer: it keeps its bits while later steps run."""
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "auto")
    used, original = [], plan_mod.RunPlan._buffer

    def spy(self):
        bits = original(self)
        used.append(weakref.ref(bits))     # (a reference would keep it from being reused)
        return bits
    monkeypatch.setattr(plan_mod.RunPlan, "_buffer", spy)
    kept = []

    def keep(i, model, opt):
        if i in (3, 4):
            a = model[0].weight.numpy()
            kept.append((a, a.copy()))
    _train_compiled(steps=12, write=keep, width=128)
    for a, bits in kept:
        same_bits(a, bits)
    last = [w() for w in used[-6:]]
    assert all(b is not None for b in last) and len({id(b) for b in last}) == 2
    assert last[0] is last[2] is last[4] and last[1] is last[3] is last[5]


@pytest.mark.parametrize("width", [32, 128])
def test_compensated_parameters_stay_in_place(monkeypatch, width):
    """AdamW's compensated update reads the old parameter after making the new one (p' = p +
    u, then the remainder from p' - p): the new value is made in a place of its own (a
    block's, where its segment runs block by block: a 64 x 128 weight) and copied over the
    old at its segment's end, so every parameter stays in place too, not loaded each step;
    the bits are the interpreter's."""
    made = _executables(monkeypatch)
    for a, b in zip(*both(monkeypatch, functools.partial(_train_compiled, width=width))):
        same_bits(a, b)
    plan = max((e for e in made if e.run_plan), key=lambda e: len(e.inputs)).run_plan
    assert len(plan.late) == 4 and len(plan.resident) == len(plan.pairs)
    blocked = {plan.segment[k][1] for k in plan.late.values()}
    assert blocked == ({True, False} if width == 128 else {False})


def test_an_array_a_step_left_in_place_is_read_only_until_handed_to_the_user(monkeypatch):
    """The plan keeps the arrays of values it holds in place read-only (a write into one
    would go unseen); .numpy() hands the user a writeable one (as torch's shares storage),
    which the next run loads again."""
    monkeypatch.setenv("ANEFORGE_SIM_PLAN", "auto")
    held = []

    def keep(i, model, opt):
        t = opt.state[model[0].weight]["exp_avg"]
        held.append((t, t._node.data[t._idx].flags.writeable))
    _train_compiled(steps=4, write=keep)
    assert not held[-1][1]
    held[-1][0].numpy()[0, 0] = 1.0
    assert held[-1][0].numpy()[0, 0] == 1.0


# ---- chains of one value's functions as one lookup -------------------------------------------
CHAINS = {
    "gelu_grad": lambda x: af.grad((af.nn.functional.gelu(x * 1.0) * (x + 1.0)).sum(), [x])[0],
    "affine_exp": lambda x: ((x * 0.5 + 1.0).exp() - x) / (x.abs() + 2.0) * x,
    "adam_like": lambda x: x / ((x * x * 0.001).sqrt() + 1e-3),
    # an intermediate read outside the chain too: it keeps its own row
    "escaping": lambda x: af.cat([((x * 3.0).exp() + 1.0).sqrt(), (x * 3.0).exp() * x], 0),
}


@pytest.mark.parametrize("model", ["default", "ieee", "flush", "half_away", "exact", "m5"])
@pytest.mark.parametrize("name", CHAINS)
def test_chains_of_one_value_run_as_one_lookup(monkeypatch, vm, model, name):
    """Elementwise fp16 ops fed by one value (and scalar constants), as gelu's gradient is,
    run as one lookup in a table of the chain's result for every fp16 input: over all 65536
    inputs the bits equal the interpreter's, under every numerics model."""
    plan_mod.TABLES.clear()
    made = _executables(monkeypatch)

    def run():
        with af.numerics(**LOOKUP_MODELS[model]):
            x = af.tensor(EVERY_FP16, requires_grad=name == "gelu_grad")
            return CHAINS[name](x).numpy()
    same_bits(*both(monkeypatch, run))
    chains = [key for key in plan_mod.TABLES.offset if key[0] == "chain"]
    assert chains, "no chain ran as a lookup"
    dead = sum(len(e.run_plan.dead) for e in made if e.run_plan)
    assert dead >= 1


@pytest.mark.parametrize("model", ["default", "half_away", "flush"])
def test_a_chain_cheaper_than_its_lookup_is_computed(monkeypatch, vm, model):
    """A chain of a few multiplies and adds (AdamW's g * g * (1 - beta2)) computes faster than
    its table is read at random (128 KB, ~6x a multiply over a large value): it keeps its
    rows, no table is built, and the bits are the interpreter's."""
    plan_mod.TABLES.clear()
    made = _executables(monkeypatch)

    def run():
        with af.numerics(**LOOKUP_MODELS[model]):
            x = af.tensor(EVERY_FP16)
            return ((x * x * 0.001).sqrt() + 1e-3).numpy()
    same_bits(*both(monkeypatch, run))
    assert not [key for key in plan_mod.TABLES.offset if key[0] == "chain"]
    assert any(e.run_plan for e in made)
    assert not any(e.run_plan.dead for e in made if e.run_plan)


def test_a_chains_value_lives_until_its_lookup(monkeypatch):
    """x's last reader in the program is the chain's first op; the lookup that replaces the
    chain reads x later, after unrelated values were made: x's place must not be given to
    them in between."""
    rng = np.random.default_rng(11)
    a = np.concatenate([SPECIAL, rng.standard_normal(1980).astype(np.float16)]).reshape(40, 50)
    b = rng.standard_normal((40, 50)).astype(np.float16)
    made = _executables(monkeypatch)

    def run():
        x, y = af.tensor(a), af.tensor(b)
        h = x * 0.5                              # x's only reader
        u = (y * 2.0 + 1.0) * y                  # made (after h * u's h) while x is dead
        return (h * u + (h.exp() + 1.0)).numpy()  # h -> exp -> + 1: a lookup of x, last
    same_bits(*both(monkeypatch, run))
    assert any(e.run_plan.dead for e in made if e.run_plan)


# ---- ops written into their places through views (runtime/layout.py) -------------------------
@pytest.mark.parametrize("target", ["M1", "M4"])
def test_views_read_inline_by_concat_and_pad_are_identical(monkeypatch, target):
    """conv2d's im2col (kh*kw slices, each given an axis, one concat) and its gradients (max
    pool's interleaving concats and pads, the column gradient's pads of split parts) run as
    steps reading their inputs through the slices and reshapes, with the interpreter's bits:
    values past the M1 width-slice crop's range included (they read back as inf there)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 9, 10)).astype(np.float16)
    x[0, 1, 4, 5], x[1, 2, 0, 7] = 5000.0, -4500.0
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float16)
    made = _executables(monkeypatch)

    def run():
        with af.target(target), warnings.catch_warnings():
            warnings.simplefilter("ignore", af.ANEHazardWarning)
            xt, wt = af.tensor(x, requires_grad=True), af.tensor(w, requires_grad=True)
            y = af.nn.functional.conv2d(xt, wt, padding=1, stride=(1, 2), dilation=(2, 1))
            z = af.nn.functional.max_pool2d(y.relu(), 2)
            gx, gw = af.grad((z * z).sum(), [xt, wt])
            return [z.numpy(), gx.numpy(), gw.numpy()]
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    plans = [e.run_plan for e in made if e.run_plan]
    inline = [step for p in plans for step, _, _ in p.entries
              if step is not None and getattr(step.simulate, "func", None) is layout.inline]
    slices = [step for p in plans for step, _, _ in p.entries
              if step is not None and step.ctx.op_type == "slice_by_index"]
    program = [op for p in plans for op in p.exe.ops if op.type == "slice_by_index"]
    # (or as moves: im2col's concat, behind the width crop's guard, runtime/moves.py)
    moved = [k for p in plans for k in p.moved]
    assert (inline or moved) and len(slices) < len(program) - 9    # the 9 im2col slices at least


@pytest.mark.parametrize("model", MODELS)
def test_per_channel_operands_fuse_with_an_outer_loop(monkeypatch, model):
    """Elementwise ops of [N, C, H, W] values with [C, 1, 1] or [1, C, 1, 1] operands (the
    three loops of BatchNorm's scale and shift) run fused, one row per entry of N, with the
    interpreter's bits: special values in the activations and in the per-channel operand."""
    rng = np.random.default_rng(5)
    x = np.concatenate([SPECIAL, rng.standard_normal(3 * 4 * 5 * 6 - 20).astype(np.float16)])
    x = x.reshape(3, 4, 5, 6)
    c = SPECIAL[[2, 6, 4, 8]].reshape(4, 1, 1)
    made = _executables(monkeypatch)

    def run():
        with af.numerics(**MODELS[model]):
            xt, ct = af.tensor(x), af.tensor(c)
            y = (xt - ct.reshape(1, 4, 1, 1)) * ct + xt
            return [y.numpy(), af.where(xt > ct, xt, ct * 2.0).numpy()]
    for a, b in zip(*both(monkeypatch, run)):
        same_bits(a, b)
    repeated = [k for e in made if e.run_plan for k in e.run_plan.repeat]
    assert repeated and not [op for op in _kernel_ops(made) if op in ("sub", "mul", "add")]


# matmul and linear run bound to their places (`OpDef.bind`): operands laid out once, the
# result written into its place and rounded there; transposed operands copied at each run
BOUND_CASES = {
    "attention": lambda q, k: (q @ k.transpose(-2, -1)).softmax(-1) @ k,
    "batch_against_one": lambda q, k: q @ k[0, 0, :4].transpose(0, 1),
    "gradients": lambda q, k: af.grad(((q @ k.transpose(-2, -1)) * 0.5).exp().sum(), [q, k]),
    "saturating": lambda q, k: (q * 900.0) @ (k * 900.0).transpose(-2, -1),
}


@pytest.mark.parametrize("name", BOUND_CASES)
def test_bound_matmuls_are_identical_run_after_run(monkeypatch, name):
    made = _executables(monkeypatch)
    rng = np.random.default_rng(9)
    qs = [rng.standard_normal((2, 2, 8, 16)).astype(np.float16) for _ in range(3)]
    qs[0].reshape(-1)[:SPECIAL.size] = SPECIAL
    ks = [(rng.standard_normal((2, 2, 8, 16)) * 2).astype(np.float16) for _ in range(3)]

    def run():                    # new values in the same places: each run must see its own
        out = []
        for q, k in zip(qs, ks):
            x, y = af.tensor(q, requires_grad=True), af.tensor(k, requires_grad=True)
            r = BOUND_CASES[name](x, y)
            out += [t.numpy() for t in (r if isinstance(r, (list, tuple)) else [r])]
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", af.ANEHazardWarning)
        for a, b in zip(*both(monkeypatch, run)):
            same_bits(a, b)
    bound = [step for e in made if e.run_plan for step, _, _ in e.run_plan.entries
             if step is not None and step.store is plan_mod._BOUND]
    assert bound, "no matmul ran bound to its places"
    if name == "saturating":      # the port's hazard is still reported
        with pytest.warns(af.ANEHazardWarning, match="matmul output port saturates"):
            run()


def test_bound_linear_is_identical(monkeypatch):
    """MIL linear (a constant weight, with and without a bias) bound to its places."""
    from test_mil_proto import Builder
    from aneforge.hardware.numerics import get_numerics
    from aneforge.runtime.sim import SimBackend
    b = Builder()
    x = b.input(2, 8, 12)
    rng = np.random.default_rng(3)
    w, bias = b.const(rng.standard_normal((20, 12))), b.const(rng.standard_normal(20))
    program = b.program(b("linear", x=x, weight=w, bias=bias), b("linear", x=x, weight=w))
    data = [rng.standard_normal((2, 8, 12)).astype(np.float16) for _ in range(3)]
    results = []
    for choice in ("never", "always"):
        monkeypatch.setenv("ANEFORGE_SIM_PLAN", choice)
        exe = SimBackend().compile(program, get_numerics())
        results.append([out for d in data for out in exe.run([d])])
    for a, b_ in zip(*results):
        same_bits(a, b_)
    assert sum(step.store is plan_mod._BOUND for step, _, _ in exe.run_plan.entries
               if step is not None) == 2


# ---- the plan's inputs and outputs in one call each -----------------------------------------
def _spans(sizes) -> np.ndarray:
    """Spans of `sizes` elements laid out with gaps (an arena's places are not adjacent)."""
    at, out = 3, []
    for n in sizes:
        out.append((at, n))
        at += n + 5
    return np.array(out, np.int64)


def test_output_spans_cast_as_numpy_does():
    """`to_float16_spans`: each span's float32 values to fp16 bits, side by side, as numpy's
    astype(float16) rounds them (every fp16 value, plus float32 values between them)."""
    from aneforge.hardware.kernels import compiled
    kernels.wait()
    rng = np.random.default_rng(3)
    values = np.concatenate([EVERY_FP16.reshape(-1).astype(np.float32),
                             rng.standard_normal(999).astype(np.float32) * 300])
    sizes = [1, 7, 65536, 991]
    spans = _spans(sizes)
    arena = np.full(spans[-1].sum() + 2, np.float32(np.nan))
    at = 0
    for (start, n) in spans:
        arena[start:start + n] = values[at:at + n]
        at += n
    bits = np.zeros(sum(sizes), np.uint16)
    compiled.to_float16_spans(arena, spans, bits)
    same_bits(bits.view(np.float16), values.astype(np.float16))


@pytest.mark.parametrize("coerce", [True, False])
def test_input_spans_load_as_the_interpreter_does(coerce):
    """`from_float16_spans`: fp16 bits side by side into their spans as float32, NaN read as
    +inf under the engine's input rule and counted per span; nothing outside the spans
    written."""
    from aneforge.hardware.kernels import compiled
    kernels.wait()
    pieces = [SPECIAL, EVERY_FP16.reshape(-1), np.array([np.nan, 1.5], np.float16)]
    spans = _spans([p.size for p in pieces])
    arena = np.full(spans[-1].sum() + 2, np.float32(-7.0))
    nans = np.zeros(len(pieces), np.int64)
    compiled.from_float16_spans(np.concatenate(pieces).view(np.uint16), spans, arena,
                                coerce, nans)
    written = np.zeros(arena.size, bool)
    for p, (start, n) in zip(pieces, spans):
        want = p.astype(np.float32)
        if coerce:
            want = np.where(np.isnan(want), np.float32(np.inf), want)
        same_bits(arena[start:start + n], want)
        written[start:start + n] = True
    assert nans.tolist() == [int(np.isnan(p).sum()) for p in pieces]
    assert (arena[~written] == -7.0).all()


def test_outputs_share_one_buffer_and_small_ones_own_theirs(monkeypatch):
    """A planned run's fp16 outputs are cut from one buffer filled by one call; an output of
    at most `_OWN` elements (a loss) is a copy, so keeping it keeps nothing else alive."""
    seen = {}
    original = plan_mod.RunPlan.run

    def spy(self, inputs):
        seen[id(self)] = inputs
        return original(self, inputs)
    monkeypatch.setattr(plan_mod.RunPlan, "run", spy)
    plan = _step_executable(monkeypatch).run_plan
    outs = plan.outputs(plan.run(seen[id(plan)]))
    big = [o for o in outs if o.dtype == np.float16 and o.size > plan_mod._OWN]
    small = [o for o in outs if o.dtype == np.float16 and o.size <= plan_mod._OWN]
    assert len(big) >= 2 and small
    assert len({id(o.base) for o in big}) == 1 and big[0].base is not None
    assert all(o.base is None for o in small)
    for (s, flat, shape, dtype, _), o in zip(plan.outs, outs):
        if flat is not None:
            same_bits(o, flat.reshape(shape).astype(dtype))


def _compiled_train(steps):
    """`_train` under af.compile, its labels held by a tensor set before each call: a value
    the replay does not check (an argument's int16 values it would), so they enter as int32
    in two uint16 parts, a range the plan cannot bound, and their compare runs its kernel."""
    af.manual_seed(0)
    rng = np.random.default_rng(0)
    model = af.nn.Sequential(af.nn.Linear(16, 32), af.nn.GELU(), af.nn.Linear(32, 4))
    opt = af.optim.AdamW(model.parameters(), lr=1e-2)
    labels = af.tensor(rng.integers(0, 4, 8))

    @af.compile
    def step(x):
        opt.zero_grad()
        loss = af.nn.functional.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        return loss
    losses = []
    for _ in range(steps):
        x = af.tensor(rng.random((8, 16)).astype(np.float32))
        labels.set_(af.tensor(rng.integers(0, 4, 8)))
        losses.append(step(x).item())
    return losses, [p.numpy() for p in model.parameters()]


def test_a_bool_a_kernel_makes_is_placed_for_fused_readers(monkeypatch, vm):
    """The one-hot compare of int32 labels runs its kernel; its bool result is stored into
    the arena (0 / 1) and the selects reading it run fused, with the interpreter's bits."""
    made = _executables(monkeypatch)
    (l1, p1), (l2, p2) = both(monkeypatch, lambda: _compiled_train(4))
    assert l1 == l2
    for a, b in zip(p1, p2):
        same_bits(a, b)
    exe = max((e for e in made if e.run_plan), key=lambda e: len(e.steps))
    kernel = _kernel_ops([exe])
    assert "equal" in kernel and "select" not in kernel, kernel
    assert "select" in _opcodes([exe])
    compares = [s for k, step in enumerate(exe.steps) if exe.ops[k].type == "equal"
                for s in step.outs]
    assert compares and all(s in exe.run_plan.views for s in compares)


def test_the_elementwise_op_compiles_once():
    """Every call of the fused VM's `_op` passes its ints as plain int64 (`_int`,
    `_operand_at`), never as a literal or a tuple display of literals: numba compiles a
    function once per argument types and a literal int is a type of its own. Three callers
    passing literals made three specializations of `_op`, ~10 s each of a fresh install's
    compile (run_full: 43 s, 22 s with one)."""
    import ast
    import inspect
    from aneforge.hardware.kernels import fused
    tree = ast.parse(inspect.getsource(fused))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "_op"]
    assert len(calls) == 3                       # _rows, _columns, _blocked
    for call in calls:
        for arg in call.args:
            assert not isinstance(arg, (ast.Constant, ast.Tuple)), ast.unparse(call)
    assert fused._operand_at(np.zeros(2, np.float32), 1, 0, 1)[1:] == (1, 0, 1)
