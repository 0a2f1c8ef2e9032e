"""The compile cache: one compile per shape signature; data never enters the key."""
import numpy as np
import pytest

import aneforge as af


def step(x, w):
    return ((x @ w).relu().sum(dim=1, keepdim=True) / 3).numpy()


def fresh(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_same_shapes_compile_once():
    af.clear_cache()
    w = af.tensor(fresh((8, 3), 0))
    outs = [step(af.tensor(fresh((4, 8), i)), w) for i in range(5)]
    info = af.cache_info()
    assert (info.misses, info.hits, info.entries) == (1, 4, 1)
    assert not np.array_equal(outs[0], outs[1])          # it did run on the new data


def test_new_shape_compiles_again():
    af.clear_cache()
    w = af.tensor(fresh((8, 3), 0))
    step(af.tensor(fresh((4, 8), 1)), w)
    step(af.tensor(fresh((5, 8), 1)), w)
    step(af.tensor(fresh((5, 8), 2)), w)
    assert (af.cache_info().misses, af.cache_info().hits) == (2, 1)


def test_data_never_in_the_key():
    af.clear_cache()
    for fill in (0.0, 1.0, -7.5, np.nan):
        (af.full((2, 2), fill) * 2.0).numpy()
    assert af.cache_info().misses == 1
    for maker in (af.zeros, af.ones, af.randn, af.rand):    # host data is always an input
        (maker(2, 2) * 2.0).numpy()
    assert af.cache_info().misses == 1


def test_literals_are_structure():
    af.clear_cache()
    x = af.ones(2)
    (x * 2.0).numpy()
    (x * 3.0).numpy()
    assert af.cache_info().misses == 2


def test_signature_ignores_names_and_data():
    a = af.program(af.ones(3, 2) + 1.0)
    b = af.program(af.randn(3, 2) + 1.0)
    assert a.signature() == b.signature()
    b.main.inputs[0].name = "renamed"
    assert a.signature() == b.signature()
    assert a.signature() != af.program(af.ones(3, 2) + 2.0).signature()
    assert a.signature() != af.program(af.ones(3, 3) + 1.0).signature()


def test_realized_values_become_leaves():
    af.clear_cache()
    x = af.randn(4, 4)
    for _ in range(20):                    # a loop whose state feeds the next iteration
        x = (x * 0.5 + 1.0).realize()
        assert x.is_leaf
    assert af.cache_info().misses == 1
    assert len(af.program(x * 2.0).operations) == 2      # the trace did not grow


def test_realize_several_at_once_is_one_program():
    af.clear_cache()
    x = af.randn(3)
    a, b = x + 1.0, x * 2.0
    af.realize(a, b)
    assert af.cache_info().misses == 1 and a.is_leaf and b.is_leaf
    np.testing.assert_array_equal(b.numpy(), (x.numpy().astype(np.float32) * 2).astype(np.float16))


def test_compile_time_is_reported():
    af.clear_cache()
    (af.ones(2) + 1.0).numpy()
    assert af.cache_info().compile_seconds > 0


def test_the_cache_keeps_the_most_recently_used_programs_up_to_its_limit():
    af.clear_cache()
    old = af.set_cache_limit(3)
    try:
        for n in (1, 2, 3, 4, 1):                 # 1 is evicted by 4, then compiled again
            (af.ones(n) * 2.0).numpy()
        info = af.cache_info()
        assert (info.entries, info.misses, info.evictions) == (3, 5, 2)
        (af.ones(4) * 2.0).numpy()                # still cached: 2 and 3 went first
        assert af.cache_info().misses == 5
        with pytest.raises(ValueError, match="at least one"):
            af.set_cache_limit(0)
    finally:
        af.set_cache_limit(old)


def test_a_program_first_walked_then_prekeyed_compiles_once():
    """A new recording's first realization walks the trace (its structural key); the same
    recording next time is known by its prekey, which must find the program compiled under
    the walked key instead of compiling it again (conv1d's composite came back that way)."""
    af.clear_cache()
    w, b = af.tensor(fresh((5, 3, 3), 0)), af.tensor(fresh((5,), 1))
    outs = [af.nn.functional.conv1d(af.tensor(fresh((2, 3, 11), i)), w, b, stride=2,
                                    padding=1).numpy() for i in range(4)]
    info = af.cache_info()
    assert (info.misses, info.hits, info.entries) == (1, 3, 1)
    assert not np.array_equal(outs[0], outs[1])
