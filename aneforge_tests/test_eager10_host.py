"""The host side of an eager step, trimmed (issue 25, eager10): what a realization lands
without calls, a tape-keyed cut's outputs, the boundary's inputs in one pass, backward's
checks in one pass and a kept recording re-made from its recipe must all give what the
plain paths give."""
import numpy as np
import pytest

import aneforge as af
from aneforge import autograd
from aneforge.bench.workloads import makemore
from aneforge.core import autoscale
from aneforge.core.realization import realize, recording
from aneforge.errors import AneforgeError
from aneforge.optim import optimizer
from aneforge.tensor import core

KEPT = [core._KEPT, autograd._ORDERS, autograd._WALKS, autograd._FOUND, autoscale._SCALINGS,
        optimizer._UPDATES]


def test_a_tape_keyed_cut_lands_every_output_of_a_multi_output_node():
    """`split` is one node of two outputs: a repeated step's cut known from its tape key
    (from the second step on) must still land both, and the other value read with it, in
    the one run (taking the pending values as the outputs would leave `y` pending)."""
    rng = np.random.default_rng(0)
    for _ in range(4):
        data = rng.standard_normal((3, 4)).astype(np.float16)
        x = af.tensor(data)
        a, b = x.split(2, dim=1)
        y = x * 2.0
        with recording() as runs:
            realize([a.ref, y.ref])
        assert len(runs) == 1
        assert y._node.data is not None and b._node.data is not None
        assert a.numpy().tolist() == data[:, :2].tolist()
        assert b.numpy().tolist() == data[:, 2:].tolist()
        assert y.numpy().tolist() == (data * np.float16(2)).tolist()


@pytest.mark.parametrize("values", [[40000, -70000, 3], [7, -8, 32767]])
def test_int32_leaves_cross_wide_or_narrow_as_their_values_need(values):
    """An int32 leaf outside int16's range crosses in two parts, one inside it as one int16:
    decided per run by the values (a step's realization, repeated, keeps deciding)."""
    for k in range(3):
        data = np.array(values, np.int32) + k
        assert (af.tensor(data) + 1).tolist() == (data + 1).tolist()


def test_results_that_need_decoding_still_get_it():
    """Landing without a call is for fp16 results of their own shape: a 0-d value comes out
    of the program as shape (1,), an int32 in parts, a bool as fp16 bits; each must be
    decoded to its type."""
    for _ in range(3):
        x = af.tensor(np.array([1.5, 2.5, -4.0], np.float16))
        total, ints, big = x.sum(), x.int() * 1000, x > 2.0
        assert total.numpy().shape == () and total.item() == 0.0
        assert ints.numpy().dtype == np.int32 and ints.tolist() == [1000, 2000, -4000]
        assert big.numpy().dtype == np.bool_ and big.tolist() == [False, True, False]


def test_backward_twice_raises_when_the_graph_also_read_an_overwritten_value():
    """Both of backward's checks in one pass: a graph that was freed and that reads a value
    overwritten in place raises torch's second-backward error, as before."""
    w = af.tensor([1.0, 2.0], requires_grad=True)
    y = w * 1.0
    loss = (y * y).sum()
    loss.backward()
    with af.no_grad():
        y.add_(1.0)
    with pytest.raises(AneforgeError, match="backward through the graph a second time"):
        loss.backward()


def test_an_overwritten_input_of_a_gradient_rule_raises():
    w = af.tensor([1.0, 2.0], requires_grad=True)
    y = w * 1.0
    loss = (y * y).sum()
    y.add_(1.0)
    with pytest.raises(AneforgeError, match="modified by an inplace operation"):
        loss.backward()


def _makemore():
    """A small makemore step as its notebook writes it: the bench's workload, small."""
    return makemore("af", batch=8, vocab=11, embed=4, hidden=16, words=40)


def test_a_step_remade_from_kept_recordings_equals_the_step_recorded_afresh():
    """Two identical models, stepped in turn: before each step of the second every kept
    recording is forgotten, so it records its forward pieces, backward walk, scaling and
    updates afresh (and keeps them); the first then re-makes each from those recipes. Every
    loss and every parameter bit must agree."""
    remade, remade_params = _makemore()
    fresh, fresh_params = _makemore()
    for _ in range(6):
        for kept in KEPT:
            kept.by_key.clear()
        a = fresh()
        b = remade()
        assert a == b
        for p, q in zip(fresh_params, remade_params):
            assert p.numpy().tobytes() == q.numpy().tobytes()
