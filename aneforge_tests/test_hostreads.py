"""One-element reads of elements picked out of a larger value (aneforge/core/hostints.py
`read`): the value is realized once and kept, and each read picks its element on the host,
with the bits its own program gives. minGPT's adder (karpathy/minGPT projects/adder) scores
`int(correct[i])` for 500 problems and its dataset reads `self.ixes[idx].item()` per sample:
a program per element was a compile per distinct index."""
import warnings

import numpy as np
import pytest

import aneforge as af
from aneforge.core.realization import recording


def _scores(seed: int = 0):
    rng = np.random.default_rng(seed)
    logits = af.tensor(rng.standard_normal((40, 7)).astype(np.float32))
    labels = af.tensor(rng.integers(0, 7, 40))
    return (logits * 2.0).softmax(-1), labels


def test_reading_each_element_of_a_computed_value_runs_one_program():
    """float(p[i, j]) and int(correct[i]) over a computed value: one program for all the
    reads (a program per element before), each read equal to the value's own element."""
    probs, labels = _scores()
    want_p = _scores()[0].numpy()
    with recording() as runs:
        got_p = [[float(probs[i, j]) for j in range(7)] for i in range(40)]
    assert len(runs) == 1
    np.testing.assert_array_equal(np.array(got_p, np.float16), want_p)

    correct = probs.argmax(1) == labels
    want_c = (_scores()[0].argmax(1) == labels).numpy()
    with recording() as runs:
        got_c = [int(correct[i]) for i in range(40)] + [bool(correct[i]) for i in range(40)]
    assert len(runs) == 1
    assert got_c == want_c.astype(int).tolist() + want_c.tolist()


def test_a_value_made_before_the_step_is_kept_once_read_through():
    """minGPT's `self.ixes = perm[num_test:]` is pending when the dataset is made; the first
    read after a realization keeps it, so the reads after it run nothing and a step's tape
    does not read a pending value from before it."""
    perm = af.randperm(1000, generator=af.Generator().manual_seed(1337))
    ixes = perm[500:]
    (af.ones(2) * 3).numpy()                          # a step: a realization since ixes
    assert ixes._node.data is None
    with recording() as runs:
        got = [ixes[i].item() for i in range(0, 500, 7)]
    assert len(runs) <= 1 and ixes._node.data is not None
    assert got == perm.numpy()[500::7].tolist()


def test_index_arithmetic_on_the_current_step_still_runs_no_program():
    """What hostints.value did stays as it was: a read of integer ops recorded on this step's
    tape runs nothing and keeps nothing (realizing would start a new tape mid-step)."""
    data = af.tensor(np.arange(100))
    i = af.tensor(5) + 2
    with recording() as runs:
        assert data[i:i + 3].tolist() == [7, 8, 9] and int(i * 3) == 21
    assert len(runs) == 1 and i._node.data is None        # (.tolist(): the slice's program)


def test_a_slice_through_the_width_crop_reads_the_engines_value():
    """A float slice with a nonzero begin on the last axis goes through the crop's x16 gain
    on M1/M2 (|x| > 4094 reads back as inf): a read of it gives the program's value, not the
    moved element."""
    x = af.tensor(np.full((2, 3), 5000.0, np.float32)) * 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", af.ANEHazardWarning)
        assert x[:, 1:][0, 0].item() == float("inf")
        assert x[0, 1].item() == 5000.0                     # a squeezed last axis: no crop


def test_a_read_of_a_value_that_needs_a_gradient_leaves_autograd_as_it_was():
    """An element of a value on the way to a loss: read through its own program (nothing
    kept mid-graph), and backward gives torch's gradient."""
    w = af.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = w * w
    assert y[1].item() == 4.0
    y.sum().backward()
    assert w.grad.tolist() == [2.0, 4.0, 6.0]


def test_reads_under_compile_are_host_reads_as_before():
    """Inside af.compile's capture a read is the capture's host read (the function then runs
    as usual, and says why), not a shortcut the replay would not see."""
    @af.compile
    def f(x):
        return (x * 2)[0].item()
    with pytest.warns(RuntimeWarning, match="reads a value on the host"):
        assert f(af.tensor([1.0, 2.0])) == 2.0
