"""Execution plans: host segments (data-dependent shapes on numpy between ANE segments), their
replay under af.compile, partitioning a program over the budget into ANE segments, the plan's
value table and memory plan, plan caching and af.explain."""
import warnings

import numpy as np
import pytest
import torch

import aneforge as af
from aneforge.context import CTX
from aneforge.core import plan
from aneforge.runtime.sim import SimBackend

X = (np.arange(24, dtype=np.float16).reshape(4, 6) / 4 - 2.5)


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", af.HostSegmentNotice)
        yield


def pair(array=X):
    return (torch.tensor(array.astype(np.float32), requires_grad=True),
            af.tensor(array, requires_grad=True))


def close(got, want, tol=2e-2):
    np.testing.assert_allclose(np.asarray(got.numpy(), np.float32),
                               want.detach().numpy().astype(np.float32), rtol=tol, atol=tol)


# ---- host segments: values and gradients against torch -------------------------------------
GRADED = {
    "masked_select": lambda z, m: z.masked_select(m(z) > 0.3),
    "masked_select_broadcast": lambda z, m: z.masked_select(m(z[0]) < 0),
    "bool_mask_index": lambda z, m: z[m(z) > 0.3] * 3,
    "bool_mask_rows": lambda z, m: z[m(z).sum(1) > 0],
    "masked_scatter": lambda z, m: z.masked_scatter(m(z) < 0, (z * 2).flip(0)),
}


@pytest.mark.parametrize("name", sorted(GRADED))
def test_host_segment_values_and_gradients_match_torch(name):
    t, a = pair()
    want = GRADED[name](t, lambda v: v.detach() if isinstance(v, torch.Tensor) else v)
    got = GRADED[name](a, lambda v: v.detach())     # a computed mask: a host segment
    assert got.shape == tuple(want.shape)
    close(got, want)
    cot = np.linspace(-1, 1, want.numel(), dtype=np.float32).reshape(tuple(want.shape))
    (want * torch.tensor(cot)).sum().backward()
    (got * af.tensor(cot.astype(np.float16))).sum().backward()
    close(a.grad, t.grad)


INT = np.array([[3, 0, 3], [1, 0, 2]], dtype=np.int32)
UNGRADED = {
    "nonzero": lambda z: z.nonzero(),
    "nonzero_tuple": lambda z: z.nonzero(as_tuple=True),
    "argwhere": lambda z: z.argwhere(),
    "unique": lambda z: z.unique(),
    "unique_all": lambda z: z.unique(return_inverse=True, return_counts=True),
    "unique_dim": lambda z: z.unique(dim=1, return_inverse=True),
    "unique_counts": lambda z: z.unique(sorted=True, return_counts=True),
}


@pytest.mark.parametrize("name", sorted(UNGRADED))
def test_data_dependent_results_match_torch(name):
    fn = UNGRADED[name]
    want = fn(torch.tensor(INT) * 2 - 2)
    got = fn(af.tensor(INT) * 2 - 2)                # computed: the host segment reads it
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.tolist() == w.tolist()
        assert not g.requires_grad


def test_the_functions_match_the_methods():
    x = af.tensor([[0.0, 1.0], [2.0, 0.0]])
    assert af.nonzero(x).tolist() == x.nonzero().tolist() == af.argwhere(x).tolist()
    assert af.masked_select(x, x > 0).tolist() == [1.0, 2.0]
    assert af.unique(x).tolist() == [0.0, 1.0, 2.0]


def test_a_host_segment_says_once_which_op_left_the_ane_and_why():
    CTX.host_notices.discard("nonzero")
    x = af.tensor([1.0, 0.0, 2.0]) * 2
    with pytest.warns(af.HostSegmentNotice, match="nonzero runs on the host.*shape depends"):
        x.nonzero()
    with warnings.catch_warnings():
        warnings.simplefilter("error", af.HostSegmentNotice)
        (x + 1).nonzero()                          # said once: no second notice


@pytest.mark.parametrize("fn, error, match", [
    (lambda x: x.masked_select(x), af.DTypeError, "bool mask"),
    (lambda x: x.masked_select(af.tensor([True, False])), af.ShapeError, "does not broadcast"),
    (lambda x: x.masked_scatter(x > -10, af.ones(2)), af.ShapeError, "has only 2 elements"),
])
def test_bad_host_segment_input_says_what_to_do(fn, error, match):
    with pytest.raises(error, match=match):
        fn(af.tensor(X)).numpy()


# ---- af.compile replays host segments ------------------------------------------------------
def test_compile_replays_a_host_segment_without_recompiling():
    @af.compile(fullgraph=True)
    def positive_mean(x):
        return (x[x > 0] * 2).mean()

    eager = [(af.tensor(X + k)[af.tensor(X + k) > 0] * 2).mean().item() for k in range(3)]
    x0 = af.tensor(X)
    assert positive_mean(x0).item() == eager[0]
    misses = af.cache_info().misses
    assert positive_mean(af.tensor(X)).item() == eager[0]          # replayed
    assert af.cache_info().misses == misses
    # a mask with another count: the function is captured again, the values still right
    assert positive_mean(af.tensor(X + 1)).item() == eager[1]
    assert positive_mean(af.tensor(X + 2)).item() == eager[2]


def test_a_replayed_host_segment_trains_like_eager():
    def step(model, opt, x):
        opt.zero_grad()
        h = model(x)
        loss = h.masked_select(x[:, :2] > 0).square().mean()
        loss.backward()
        opt.step()
        return loss
    losses = []
    for compiled in (False, True):
        af.manual_seed(0)
        model = af.nn.Linear(6, 2)
        opt = af.optim.SGD(model.parameters(), lr=0.02)
        fn = af.compile(step, fullgraph=True) if compiled else step
        losses.append([fn(model, opt, af.tensor(X)).item() for _ in range(3)])
    assert losses[0] == losses[1]
    assert losses[0][0] > losses[0][2]


# ---- partitioning ----------------------------------------------------------------------------
def chain(x):
    for k in range(12):
        x = (x * 1.25 - 0.5).sin() if k % 2 else x.exp().clamp(max=4.0) - 1.0
    return x


def run_entry(fn, *args):
    """fn's value and the cache entry that computed it."""
    y = fn(*args)
    y.numpy()
    return y, CTX.cache.entries[next(reversed(CTX.cache.entries))]


def test_a_program_over_the_op_budget_splits_with_results_unchanged():
    whole, entry = run_entry(chain, af.tensor(X))
    n = sum(op.type != "const" for op in entry.program.operations)
    with af.plan_budget(ops=5):
        split, entry = run_entry(chain, af.tensor(X))
    exe = entry.executable
    assert isinstance(exe, plan.Plan)
    counts = [s.ops for s in exe.segments]
    assert all(c <= 5 for c in counts) and sum(counts) == n
    assert len(counts) == -(-n // 5)
    assert [s.cut for s in exe.segments[:-1]] == ["the ops budget (5) is reached"] * (len(counts) - 1)
    np.testing.assert_array_equal(split.numpy(), whole.numpy())       # bit for bit


def test_gradients_through_a_partitioned_program_are_unchanged():
    def grads():
        t, a = pair()
        chain(a).sum().backward()
        return a.grad.numpy()
    whole = grads()
    with af.plan_budget(ops=7):
        np.testing.assert_array_equal(grads(), whole)


def test_the_weight_budget_splits_too():
    w = af.tensor(np.linspace(-1, 1, 24, dtype=np.float16).reshape(4, 6))
    fn = lambda x: ((x * 3.0).exp() + w.detach() * 2.0)    # noqa: E731  (consts: 3.0, 2.0)
    whole, _ = run_entry(fn, af.tensor(X))
    with af.plan_budget(weight_bytes=2):
        split, entry = run_entry(fn, af.tensor(X))
    segs = entry.executable.segments
    assert len(segs) >= 2 and all(s.weight_bytes <= 2 for s in segs)
    assert "weight_bytes budget (2)" in segs[0].cut
    np.testing.assert_array_equal(split.numpy(), whole.numpy())


def test_a_cut_avoids_float32_crossings_where_it_can():
    fn = lambda v: (v.float() * 3 + 1).half().exp() * 2   # noqa: E731  fp32 inside, then fp16
    whole, _ = run_entry(fn, af.tensor(X))
    with af.plan_budget(ops=4):               # cast, mul, add, cast | exp, mul: no fp32 crosses
        y, entry = run_entry(fn, af.tensor(X))
    segs = entry.executable.segments
    assert len(segs) > 1 and not any("crosses" in s.cut for s in segs)
    np.testing.assert_array_equal(y.numpy(), whole.numpy())


def test_a_float32_value_that_must_cross_is_said():
    fn = lambda v: (v.float() * 3 + 1) * 0.5 - 2          # noqa: E731  fp32 throughout
    with af.plan_budget(ops=2), pytest.warns(af.ANEHazardWarning, match="float32 value crosses"):
        y, entry = run_entry(fn, af.tensor(X))
    assert any("a float32 value crosses as float16" in s.cut for s in entry.executable.segments)
    np.testing.assert_allclose(y.numpy(), (X.astype(np.float32) * 3 + 1) * 0.5 - 2, rtol=1e-3)


def test_plan_budget_rejects_nonsense():
    with pytest.raises(ValueError, match="positive int or None"):
        with af.plan_budget(ops=0):
            pass


# ---- the plan: caching, value table, memory, backends ---------------------------------------
def test_a_plan_is_cached_per_signature():
    x = X[:3, :5]                                   # a shape no other test runs
    with af.plan_budget(ops=4):
        run_entry(chain, af.tensor(x))
        info = af.cache_info()
        _, entry = run_entry(chain, af.tensor(x + 1))
        assert (af.cache_info().hits, af.cache_info().misses) == (info.hits + 1, info.misses)
        assert isinstance(entry.executable, plan.Plan)
    run_entry(chain, af.tensor(x))                  # another budget: another entry
    assert af.cache_info().misses == info.misses + 1


def test_compile_replays_a_partitioned_plan_as_one_run():
    step = af.compile(chain, fullgraph=True)
    with af.plan_budget(ops=6):
        first = step(af.tensor(X)).numpy()
        misses = af.cache_info().misses
        again = step(af.tensor(X)).numpy()
    assert af.cache_info().misses == misses
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, chain(af.tensor(X)).numpy())


def test_the_memory_plan_never_overlaps_live_values():
    with af.plan_budget(ops=3):
        _, entry = run_entry(lambda x: chain(x) + chain(x * 0.5), af.tensor(X))
    size, places = entry.executable.memory
    assert len(places) > 3
    for p in places:
        assert p.offset + p.nbytes <= size
        for q in places:
            live_together = p is not q and p.first <= q.last and q.first <= p.last
            assert not (live_together and p.offset < q.offset + q.nbytes
                        and q.offset < p.offset + p.nbytes), (p, q)
    assert size < sum(p.nbytes for p in places)       # lifetimes let values share bytes


def test_each_segment_is_compiled_for_the_backend():
    class Counting(SimBackend):
        compiled = []

        def compile(self, program, numerics):
            self.compiled.append(program)
            return super().compile(program, numerics)
    with af.plan_budget(ops=5):
        y = chain(af.tensor(X))
        program = af.program(y)
        af.passes.run(program, af.passes.get_pipeline(), af.get_numerics())
        exe = plan.compile_plan(program, Counting(), af.get_numerics())
    assert len(Counting.compiled) == len(exe.segments) > 1
    assert [p for p in Counting.compiled] == [s.program for s in exe.segments]


def test_segment_programs_are_core_ml_programs(ct):
    from aneforge.mil import proto
    from conftest import coremltools_types, load_in_coremltools
    with af.plan_budget(ops=4):
        _, entry = run_entry(chain, af.tensor(X))
    for seg in entry.executable.segments:
        theirs = coremltools_types(load_in_coremltools(proto.to_proto_bytes(seg.program)))
        for op in seg.program.operations:
            for v in op.outputs:
                assert theirs[v.name] == (v.shape, v.dtype.name)


# ---- af.explain ------------------------------------------------------------------------------
def test_explain_lists_segments_where_they_run_sizes_and_cuts():
    def fn(x):
        kept = x[x > 0]
        return chain(kept).sum()
    with af.plan_budget(ops=8):
        report = af.explain(fn, af.tensor(X))
    kinds = [s.kind for s in report]
    assert kinds[:2] == ["ane", "host"] and set(kinds[2:]) == {"ane"} and len(kinds) > 3
    assert report.segments[0].cut == "x[mask] reads its values on the host"
    assert report.segments[1].name == "x[mask]" and "depends on the values" in report.segments[1].cut
    assert report.segments[2].cut == "the ops budget (8) is reached"
    assert report.segments[-1].cut == "the call returns"
    assert all(s.ops <= 8 for s in report if s.kind == "ane")
    assert "host x[mask]" in str(report)


@pytest.mark.parametrize("ops", [20, 40])
def test_int32_past_int16_crosses_a_cut_in_two_parts(ops):
    """An int32 value a later segment reads crosses as two uint16 parts (the program
    boundary's form), exact over int32's range; as one int16 it raised past +-32767."""
    v = np.array([40000, 5, -70000, 2 ** 20, -2 ** 20])
    x = af.tensor(v.astype(np.int32))
    with af.plan_budget(ops=ops):
        z = (((x + 1) * 2 - 3) * 3 + 7) // 2
        assert z.tolist() == ((((v + 1) * 2 - 3) * 3 + 7) // 2).tolist()


def test_a_float32_crossing_a_cut_is_a_warning():
    x = af.tensor(np.array([40000, 5], np.int32))
    with af.plan_budget(ops=2), pytest.warns(af.ANEHazardWarning, match="float32 value crosses"):
        (((x + 1) * 2 - 3) // 2).tolist()
