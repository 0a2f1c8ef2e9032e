"""Cheap recording and cache-hit realization: the plan a pending node carries (its structure
id and leaf reads, built while recording) must key and feed exactly the program the walked
cut builds; the cache key tells apart programs that differ in anything but host data."""
import copy
import pickle
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import aneforge as af
from aneforge import dtypes
from aneforge.core import realization
from aneforge.context import CTX

trace = sys.modules["aneforge.core.trace"]


def planned(t):
    """The plan-made cut of `t` (None if its plan is missing or stale)."""
    return realization._prekeyed([t.ref])


def walked(t):
    return realization.Cut([t.ref])


def fresh(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float16)


def misses(fn):
    before = af.cache_info().misses
    fn()
    return af.cache_info().misses - before


# ---- the plan agrees with the walk ----------------------------------------------------------
OPS = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b, lambda a, b: af.maximum(a, b),
       lambda a, b: (a * 0.5).exp() + b, lambda a, b: af.cat([a, b, a], dim=0)[:2]]


@st.composite
def graphs(draw):
    """A random DAG over 1-3 leaves: each step applies an op to two earlier values (any, so
    values are shared) or to a value and a Python number."""
    steps = draw(st.lists(st.tuples(st.integers(0, len(OPS) - 1), st.integers(0, 99),
                                    st.integers(0, 99), st.sampled_from([None, 0.5, 2.0])),
                          min_size=1, max_size=12))
    return draw(st.integers(1, 3)), steps


def build(n_leaves, steps, seed=0):
    values = [af.tensor(fresh((2, 3), seed + k)) for k in range(n_leaves)]
    for op, i, j, number in steps:
        a = values[i % len(values)]
        b = number if number is not None and op < 3 else values[j % len(values)]
        values.append(OPS[op](a, b))
    return values[-1]


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_a_plan_reads_the_leaves_the_walk_finds_in_the_same_order(graph):
    out = build(*graph)
    plan, cut = planned(out), walked(out)
    assert plan is not None
    assert plan.leaves == cut.leaves
    assert plan.outputs == cut.outputs


@settings(max_examples=25, deadline=None)
@given(graphs())
def test_a_planned_realization_equals_the_walked_one(graph):
    a = build(*graph, seed=10)
    b = build(*graph, seed=10)
    b.ref[0].sid = None                       # this one walks the trace
    assert planned(a) is not None and planned(b) is None
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_chain_hits_the_cache_without_a_walk(monkeypatch):
    def chain(seed):
        y = af.tensor(fresh((1, 8), seed))
        for i in range(50):
            y = y * 1.01 if i % 2 else y + 0.5
        return y
    af.clear_cache()
    expected = chain(1).numpy()
    monkeypatch.setattr(realization, "Cut", None)          # a hit must not need the walk
    assert planned(chain(1)) is not None
    np.testing.assert_array_equal(chain(1).numpy(), expected)
    assert af.cache_info().misses == 1 and af.cache_info().hits == 1


def test_a_long_chain_keys_without_recursion():
    y = af.ones(4)
    for _ in range(5000):
        y = y + 1.0
    assert planned(y) is not None
    assert y.numpy().tolist() == [2048.0] * 4       # fp16: 2048 + 1 rounds back to 2048


# ---- what the key tells apart ----------------------------------------------------------------
DIFFERENT = {
    "an attribute": (lambda x, y: x.sum(dim=0), lambda x, y: x.sum(dim=1)),
    "a dtype": (lambda x, y: x.float() + 1.0, lambda x, y: x + 1.0),
    "a constant": (lambda x, y: x + 1.0, lambda x, y: x + 2.0),
    "a negative zero": (lambda x, y: x + 0.0, lambda x, y: x + -0.0),
    "a shape": (lambda x, y: x.reshape(3, 2) * 2.0, lambda x, y: x.reshape(6) * 2.0),
    "the wiring": (lambda x, y: x * 2.0 - y, lambda x, y: y - x * 2.0),
    "a repeated leaf": (lambda x, y: x * x, lambda x, y: x * y),
    "an output index": (lambda x, y: x.split(1, dim=0)[0] * 2.0,
                        lambda x, y: x.split(1, dim=0)[1] * 2.0),
    "a variadic argument": (lambda x, y: af.cat([x * 2.0, y], dim=0),
                            lambda x, y: af.cat([x, y * 2.0], dim=0)),
    "a variadic repeat": (lambda x, y: af.cat([x, x], dim=0), lambda x, y: af.cat([x, y], dim=0)),
}


def test_leaves_are_numbered_by_first_use_not_by_name():
    x, y = fresh((2, 3), 1), fresh((2, 3), 2)
    af.clear_cache()
    a = (af.tensor(x) - af.tensor(y)).numpy()
    assert misses(lambda: np.testing.assert_array_equal((af.tensor(y) - af.tensor(x)).numpy(),
                                                        -a)) == 0


@pytest.mark.parametrize("what", DIFFERENT)
def test_the_key_tells_apart_programs_differing_only_in(what):
    first, second = DIFFERENT[what]
    x, y = fresh((2, 3), 1), fresh((2, 3), 2)
    af.clear_cache()
    a = first(af.tensor(x), af.tensor(y)).numpy()
    assert misses(lambda: second(af.tensor(x), af.tensor(y)).numpy()) == 1
    b = second(af.tensor(x), af.tensor(y)).numpy()
    # each program keeps its own compiled form: a hit of one gives its own result again
    np.testing.assert_array_equal(first(af.tensor(x), af.tensor(y)).numpy(), a)
    np.testing.assert_array_equal(second(af.tensor(x), af.tensor(y)).numpy(), b)


def test_negative_zero_is_its_own_constant():
    x = af.tensor([-0.0, 1.0])
    assert np.signbit((x + -0.0).numpy()[0])             # -0 + -0 = -0, as in torch
    assert not np.signbit((x + 0.0).numpy()[0])
    assert np.signbit((x + -0.0).numpy()[0])


def test_host_data_and_names_stay_out_of_the_key():
    af.clear_cache()
    (af.tensor(fresh((2, 3), 1)) * 2.0 + 1.0).numpy()
    assert misses(lambda: (af.tensor(fresh((2, 3), 2)) * 2.0 + 1.0).numpy()) == 0


def test_shared_and_repeated_pending_values_give_one_program():
    x = fresh((2, 3), 3)
    af.clear_cache()
    t = af.tensor(x)
    y = t * 2.0
    shared = (y + y).numpy()                             # one mul node read twice
    t = af.tensor(x)
    assert misses(lambda: np.testing.assert_array_equal((t * 2.0 + t * 2.0).numpy(), shared)) == 0


# ---- staleness: realizations and in-place updates --------------------------------------------
def test_realizing_part_of_a_graph_makes_later_plans_walk():
    x = af.tensor(fresh((2, 3), 4))
    y = x * 2.0
    z = y + 1.0
    y.numpy()                                            # y holds data now: z reads it as a leaf
    assert planned(z) is None
    assert walked(z).leaves == [y.ref]
    np.testing.assert_allclose(z.numpy(), x.numpy() * 2 + 1, rtol=1e-3)
    w = z * 3.0                                          # recorded after: planned again
    assert planned(w) is not None and planned(w).leaves == [z.ref]


def test_an_unrelated_realization_is_safe():
    x = af.tensor(fresh((2, 3), 5))
    y = x + 1.0
    (af.ones(2) * 3.0).numpy()
    assert planned(y) is None
    np.testing.assert_allclose(y.numpy(), x.numpy() + 1, rtol=1e-3)


def test_in_place_updates_read_the_value_they_replaced():
    a = af.ones(3)
    b = a * 2.0
    a.add_(1.0)
    c = b + a
    assert c.tolist() == [4.0, 4.0, 4.0]
    a.mul_(a)                                            # a = 4, from the realized 2
    assert (a + b).tolist() == [6.0, 6.0, 6.0]


def test_a_cleared_structure_table_never_aliases(monkeypatch):
    x = fresh((2, 2), 6)
    programs = [lambda t, k=k: t * float(k + 1) + 1.0 for k in range(6)]
    expected = [p(af.tensor(x)).numpy() for p in programs]
    monkeypatch.setattr(trace, "_SIDS_MAX", 3)          # the table clears every few ops
    af.clear_cache()
    for _ in range(2):
        for p, want in zip(programs, expected):
            np.testing.assert_array_equal(p(af.tensor(x)).numpy(), want)


def test_a_plan_with_too_many_reads_falls_back_to_the_walk(monkeypatch):
    monkeypatch.setattr(trace, "_PREKEY_READS_MAX", 8)
    y = af.ones(2)
    for _ in range(5):
        y = y + y                                        # 32 reads of one leaf, as a tree
    assert planned(y) is None
    assert y.tolist() == [32.0, 32.0]


# ---- dtypes are one object each ---------------------------------------------------------------
@pytest.mark.parametrize("dt", dtypes.ALL)
def test_a_dtype_stays_one_object_through_copies_and_pickles(dt):
    assert copy.copy(dt) is dt and copy.deepcopy(dt) is dt
    assert pickle.loads(pickle.dumps(dt)) is dt
    assert dt == dtypes.as_dtype(dt.torch_name) and hash(dt) == hash(dtypes.as_dtype(dt.name))


def test_a_realization_stamps_the_trace():
    before = CTX.realized_seq
    (af.ones(2) + 1.0).numpy()
    assert CTX.realized_seq > before


def test_a_realized_value_keeps_neither_its_sources_nor_their_leaves():
    import gc
    import weakref
    x = af.tensor(fresh((64, 64), 7))
    y = ((x * 2.0) + 1.0).sum()
    held = weakref.ref(x.ref[0])
    y.numpy()
    del x
    gc.collect()
    assert held() is None                     # y's node no longer reaches the input's array


def test_operators_record_as_record_op_does():
    from aneforge.tensor import record_op
    x, y = af.tensor(fresh((2, 3), 8)), af.tensor(fresh((2, 3), 9))
    a, b = x * y, record_op("mul", {"x": x, "y": y}, {})
    assert (a.ref[0].key, a.ref[0].sid, a.ref[0].types) == (b.ref[0].key, b.ref[0].sid,
                                                            b.ref[0].types)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_several_targets_walk_into_one_program():
    x = af.tensor(fresh((2, 3), 10))
    a, b = x * 2.0, (x + 1.0).exp()
    assert realization._prekeyed([a.ref, b.ref]) is None        # two target nodes: the walk
    af.clear_cache()
    realization.realize([a.ref, b.ref])
    assert af.cache_info().misses == 1
    import torch
    t = torch.from_numpy(x.numpy().astype(np.float32))
    np.testing.assert_allclose(a.numpy(), (t * 2).numpy(), rtol=1e-3)
    np.testing.assert_allclose(b.numpy(), (t + 1).exp().numpy(), rtol=2e-3)
