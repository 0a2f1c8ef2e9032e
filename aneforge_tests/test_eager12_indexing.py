"""`x[t]` with one integer tensor known on the host takes a short route (tensor/indexing.py
`_one_tensor`): the values, errors and recorded programs must be the general route's, which
the same index spelled `x[t, ...]` takes, so each case compares the
two spellings, and numpy."""
import numpy as np
import pytest

import aneforge as af
from aneforge.bench.workloads import makemore


def _both(x, t):
    """x[t] by the short route and by the general one (`x[t, ...]` goes through the index
    dispatch), as numpy arrays."""
    return x[t].numpy(), x[t, ...].numpy()


@pytest.mark.parametrize("index", [[3, 0, 3, 1], [[0, 2], [-1, -4]], 2])
def test_a_host_integer_tensor_picks_as_the_general_route_and_numpy(index):
    data = np.arange(20, dtype=np.int64).reshape(4, 5)
    x, t = af.tensor(data), af.tensor(np.array(index))
    short, general = _both(x, t)
    np.testing.assert_array_equal(short, general)
    np.testing.assert_array_equal(short, data[np.array(index)])


def test_a_float_table_gathers_as_the_general_route():
    """`C[X[ix]]`: the embedding lookup of the makemore step, with its gradient."""
    rng = np.random.default_rng(0)
    table = rng.standard_normal((27, 10)).astype(np.float32)
    idx = rng.integers(0, 27, (32, 3))
    grads = []
    for spell in (lambda c, i: c[i], lambda c, i: c[i, ...]):
        c = af.tensor(table, requires_grad=True)
        out = spell(c, af.tensor(idx))
        (out * out).sum().backward()
        grads.append((out.numpy(), c.grad.numpy()))
    np.testing.assert_array_equal(grads[0][0], grads[1][0])
    np.testing.assert_array_equal(grads[0][1], grads[1][1])
    np.testing.assert_array_equal(grads[0][0], table.astype(np.float16)[idx])


def test_an_index_out_of_range_raises_as_torch():
    x = af.tensor(np.arange(6))
    with pytest.raises(IndexError, match="out of bounds"):
        x[af.tensor([1, 6])]
    with pytest.raises(IndexError, match="out of bounds"):
        x[af.tensor([-7])]


def test_a_bool_mask_and_a_0d_tensor_keep_their_routes():
    x = af.tensor(np.arange(5))
    assert x[af.tensor(np.array([True, False, True, False, True]))].tolist() == [0, 2, 4]
    with pytest.raises(IndexError, match="too many indices"):
        af.tensor(7)[af.tensor(0)]


def test_a_computed_index_is_recorded():
    """An index not in hand (computed) goes the recorded route: the same values."""
    x = af.tensor(np.arange(10) * 3)
    t = af.tensor([4, 1]) + 1
    assert x[t].tolist() == [15, 6]


def test_the_makemore_step_stays_one_program_and_matches_torch():
    """Eight makemore steps: one program run a step after the first two, no compile after
    warm-up, and losses within fp16 training noise of torch's float32 ones."""
    pytest.importorskip("torch")
    step, _ = makemore("aneforge")
    ref, _ = makemore("torch")
    ours, theirs = [step(), step()], [ref(), ref()]
    info = af.cache_info()
    runs, misses = info.hits + info.misses, info.misses
    for _ in range(6):
        ours.append(step())
        theirs.append(ref())
    info = af.cache_info()
    assert info.hits + info.misses == runs + 6 and info.misses == misses
    np.testing.assert_allclose(ours, theirs, rtol=2e-2)
