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
    perm = af.randperm(1000, generator=af.Generator().manual_seed(1337)) * 1    # pending
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
    assert runs == [] and i._node.data is None     # (the slice of data in hand: numpy's)


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


def test_integer_data_in_hand_indexed_by_numbers_is_a_leaf():
    """`self.ixes[idx]` of integer data already computed: numpy picks it (exact), nothing is
    recorded; any basic index gives numpy's result."""
    data = np.arange(60).reshape(3, 4, 5)
    x = af.tensor(data)
    for index in [(1,), (-1, 2), (slice(None), 1, slice(2, None)), (Ellipsis, 3),
                  (None, 0, slice(None, None, 2)), (slice(5, 1),)]:
        with recording() as runs:
            got = x[index]
        assert got._node.op is None and runs == []
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got.numpy(), data[index])


def _steps(loader_reads: bool, steps: int = 6) -> tuple[int, list]:
    """A minGPT-adder-like loop: each batch made of samples read as `ixes[i]` of a dataset's
    index tensor (made before the loop), a tiny model trained on it. (tape hits, losses)"""
    from aneforge.core import realization
    af.manual_seed(0)
    model = af.nn.Sequential(af.nn.Embedding(10, 8), af.nn.Flatten(), af.nn.Linear(32, 10))
    opt = af.optim.AdamW(model.parameters(), lr=1e-2)
    ixes = af.randperm(100, generator=af.Generator().manual_seed(3))[20:]
    rng = np.random.default_rng(0)
    hits, losses, real = [0], [], realization._taped

    def taped(*args):
        cut = real(*args)
        hits[0] += cut is not None
        return cut
    realization._taped = taped
    try:
        for _ in range(steps):
            rows = [[int(ixes[int(i)]) % 10 for _ in range(4)] for i in rng.integers(0, 80, 16)]
            x, y = af.tensor(np.array(rows)), af.tensor(rng.integers(0, 10, 16))
            loss = af.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    finally:
        realization._taped = real
    return hits[0], losses


def test_a_step_fed_by_per_sample_index_reads_keeps_its_tape():
    """Each sample's `ixes[i]` was a slice recorded on the step's tape with its own bounds:
    no two steps' tapes matched, and every step walked its trace. Now the steps after the
    first ones are found by their tape."""
    hits, losses = _steps(True)
    assert hits >= 3
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_compiled_indexing_of_integer_inputs_follows_each_call():
    """Under af.compile the index is recorded (the replay reads each call's data)."""
    @af.compile
    def f(x):
        return x[1:3] * 2
    assert f(af.tensor([1, 2, 3, 4])).tolist() == [4, 6]
    assert f(af.tensor([5, 6, 7, 8])).tolist() == [12, 14]


def test_a_float_dataset_indexed_per_sample_runs_no_program():
    """A Dataset holding tensors (`return self.X[i], self.y[i]`), batched by the DataLoader:
    each sample's slice was a program of its own (192 for 6 batches of 32)."""
    X = np.random.default_rng(0).standard_normal((100, 8)).astype(np.float16)
    y = np.random.default_rng(1).integers(0, 3, 100)

    class Samples(af.utils.data.Dataset):
        def __init__(self):
            self.X, self.y = af.tensor(X), af.tensor(y)

        def __len__(self):
            return 100

        def __getitem__(self, i):
            return self.X[i], self.y[i]
    order = np.random.default_rng(2).permutation(100)[:32]
    with recording() as runs:
        xb, yb = af.utils.data.default_collate([Samples()[int(i)] for i in order])
    assert runs == []
    np.testing.assert_array_equal(xb.numpy(), X[order])
    np.testing.assert_array_equal(yb.numpy(), y[order])


@pytest.mark.parametrize("index", [(slice(None), slice(1, None)), (Ellipsis, slice(1, None)),
                                   (slice(None), slice(-2, None)), (0, slice(1, 3))])
def test_float_slices_through_the_width_crop_are_still_recorded(index):
    """A nonzero begin on the last axis of fp16 data goes through the crop's x16 gain on M1/M2:
    recorded and run, so |x| > 4094 reads back as inf as the engine gives it."""
    x = af.tensor(np.full((2, 3), 5000.0, np.float32))
    y = x[index]
    assert y._node.op == "slice_by_index"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", af.ANEHazardWarning)
        assert np.isinf(y.numpy()).all()


@pytest.mark.parametrize("index", [(1,), (0, 1), (slice(None), slice(0, 2)), (Ellipsis, 0),
                                   (None, 1, Ellipsis), (slice(None, None, 2),)])
def test_float_data_indexed_without_a_crop_is_numpys_leaf(index):
    """Any other basic index of fp16 data in hand: numpy's elements, exactly, as a leaf."""
    data = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float16) * 5000
    got = af.tensor(data)[index]
    assert got._node.op is None
    np.testing.assert_array_equal(got.numpy(), data[index])


def test_indexing_a_parameter_still_records_its_gradient():
    w = af.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    w[1, :2].sum().backward()
    assert w.grad.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]]


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_an_exported_function_indexing_its_argument_keeps_it_an_input(dtype, tmp_path):
    """af.export traces the call with its example arguments in hand: indexing them must stay
    recorded, or the program would hold the example's values as constants."""
    from aneforge.exported import program_of_call
    fn = lambda x: x[1:, :2] * 3                                       # noqa: E731
    program = program_of_call(fn, (af.tensor(np.arange(12, dtype=dtype).reshape(3, 4)),))
    assert "slice_by_index" in program.op_counts() and len(program.main.inputs) == 1
