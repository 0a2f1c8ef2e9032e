"""Index arithmetic read as a Python index is computed on the host (aneforge/core/hostints.py):
nanoGPT's batch sampler runs one program a batch, not one per slice bound, with the values a
program gives; what is recorded and run otherwise is unchanged."""
import numpy as np
import pytest
import torch

import aneforge as af
from aneforge.core.realization import recording


@pytest.mark.parametrize("n", [1000, 200_000])     # a small corpus, and one past 65536 (host data)
def test_nanogpt_batch_sampler_reads_its_bounds_without_a_program(n):
    """`torch.stack([data[i:i + block] for i in ix])`: every `i` is a 0-d tensor and every
    slice bound an int(tensor); as programs, each bound was a run (128 per batch)."""
    text = np.random.default_rng(0).integers(0, 65, n)
    data, ix = af.tensor(text), af.randint(n - 9, (16,))
    with recording() as runs:
        x = af.stack([data[i:i + 8] for i in ix])
        y = af.stack([data[i + 1:i + 8 + 1] for i in ix])
    assert runs == []
    want = ix.numpy()[:, None] + np.arange(8)
    np.testing.assert_array_equal(x.numpy(), text[want])
    np.testing.assert_array_equal(y.numpy(), text[want + 1])
    assert x.dtype == af.int32


_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - 3, "rsub": lambda a, b: 5 - a,
    "mul": lambda a, b: a * b, "neg": lambda a, b: -a, "abs": lambda a, b: a.abs(),
    "max": lambda a, b: a.max(), "sum": lambda a, b: a.sum(0), "cumsum": lambda a, b: a.cumsum(1),
    "clamp": lambda a, b: a.clamp(-2, 3), "flip": lambda a, b: a.flip(0),
    "transpose": lambda a, b: a.t(), "cat": lambda a, b: af.cat([a, b], 1),
    "where": lambda a, b: af.where(a > b, a, b), "index": lambda a, b: a[1, 2:],
}
# integer division goes through the fp16 datapath (no integer divide on the ANE): a float
# step in between, so reading it as an index runs its program; the value is the same
_VIA_FLOAT = {"floordiv": lambda a, b: a // 3, "mod": lambda a, b: a % 4}


@pytest.mark.parametrize("name", sorted(_OPS) + sorted(_VIA_FLOAT))
def test_an_index_computed_on_the_host_is_the_programs_value(name):
    """Every element of each op's result, read as an index, equals the program's value; the
    integer ops' reads run no program."""
    rng = np.random.default_rng(1)
    a, b = rng.integers(-9, 9, (3, 4)), rng.integers(-9, 9, (3, 4))
    fn = _OPS.get(name) or _VIA_FLOAT[name]
    want = fn(af.tensor(a), af.tensor(b)).numpy().reshape(-1)       # run as a program
    got = []
    with recording() as runs:
        for k in range(want.size):
            got.append(fn(af.tensor(a), af.tensor(b)).reshape(-1)[k].__index__())
    assert (runs == []) == (name in _OPS)
    assert got == want.tolist()


def test_a_value_read_otherwise_still_runs_its_program():
    """Only an index read changes route: `.numpy()` of the same arithmetic runs a program."""
    with recording() as runs:
        (af.tensor([3, 4]) + 1).numpy()
    assert len(runs) == 1


def test_compiled_functions_keep_index_arithmetic_on_their_arguments():
    """Under af.compile an integer argument is the value of the captured call only: its
    arithmetic is recorded, so the next call with another index reads its own."""
    x = af.arange(10).float()

    @af.compile
    def pick(i):
        return (x[i + 1] * 2).sum()

    assert [pick(af.tensor([k])).item() for k in (0, 3, 5)] == [2.0, 8.0, 12.0]


def test_gradients_flow_through_a_host_index():
    """Index arithmetic on host integers feeding an embedding: torch's gradient."""
    w0 = np.random.default_rng(2).standard_normal((10, 4)).astype(np.float32)
    grads = []
    for lib in (torch, af):
        w = lib.tensor(w0, requires_grad=True)
        ix = lib.tensor([1, 4, 4, 7])
        (w[(ix + 1) % 10] * 3).sum().backward()
        grads.append(np.asarray(w.grad.tolist()))
    np.testing.assert_array_equal(grads[1], grads[0])


def test_iterating_a_host_integer_tensor_gives_its_rows():
    """`for row in x` over host integers yields the rows as `x[k]` gives them, no program."""
    m = np.arange(12).reshape(3, 4)
    x = af.tensor(m)
    with recording() as runs:
        rows = list(x)
        ints = [list(range(10, 20))[i] for i in x[0]]      # x[0] is pending: its rows too
    assert runs == [] and ints == [10, 11, 12, 13]
    assert [r.shape for r in rows] == [(4,)] * 3 and rows[0].dtype == af.int32
    for k, r in enumerate(rows):
        np.testing.assert_array_equal(r.numpy(), m[k])


def test_a_slice_of_host_data_keeps_its_values_when_the_data_changes():
    """`data[a:b]` of a corpus past 65536 is a host leaf of its own values: a later write into
    the data does not reach a batch already taken (a program may read it later)."""
    data = af.tensor(np.arange(70_000) % 7)
    batch = data[10:14]
    data[10:14] = 0
    assert batch.tolist() == [3, 4, 5, 6] and data[10:14].tolist() == [0, 0, 0, 0]
