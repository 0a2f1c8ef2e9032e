"""Integer index arithmetic on host values runs on the host at once (aneforge/core/hostints.py):
nanoGPT's batch sampler runs no program, the values are the simulator's, and what must stay
recorded (float results, af.compile's captured arguments, gradients) still is."""
import numpy as np
import pytest
import torch

import aneforge as af
from aneforge.core.realization import recording


@pytest.mark.parametrize("n", [1000, 200_000])     # a small corpus, and one past 65536 (host data)
def test_nanogpt_batch_sampler_runs_no_program(n):
    """`torch.stack([data[i:i + block] for i in ix])`: every `i` is a 0-d tensor and every
    slice bound an int(tensor); recorded, each bound would be a program run (128 per batch)."""
    text = np.random.default_rng(0).integers(0, 65, n)
    data, ix = af.tensor(text), af.randint(n - 9, (16,))
    with recording() as runs:
        x = af.stack([data[i:i + 8] for i in ix])
        y = af.stack([data[i + 1:i + 8 + 1] for i in ix])
        got_x, got_y = x.numpy(), y.numpy()
    assert runs == []
    want = ix.numpy()[:, None] + np.arange(8)
    np.testing.assert_array_equal(got_x, text[want])
    np.testing.assert_array_equal(got_y, text[want + 1])
    assert got_x.dtype == np.int32 and x.dtype == af.int32


def _pending(values):
    """An int32 tensor with the same values whose value is still to be computed (a float
    round trip is recorded, so every op on it goes into a program)."""
    return af.tensor(values).float().int()


_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - 3, "rsub": lambda a, b: 5 - a,
    "mul": lambda a, b: a * b,
    "neg": lambda a, b: -a, "abs": lambda a, b: a.abs(), "eq": lambda a, b: a == b,
    "lt": lambda a, b: a < b, "max": lambda a, b: a.max(), "sum": lambda a, b: a.sum(0),
    "cumsum": lambda a, b: a.cumsum(1), "clamp": lambda a, b: a.clamp(-2, 3),
    "flip": lambda a, b: a.flip(0), "reshape": lambda a, b: a.reshape(-1),
    "transpose": lambda a, b: a.t(), "cat": lambda a, b: af.cat([a, b], 1),
    "stack": lambda a, b: af.stack([a, b]), "where": lambda a, b: af.where(a > b, a, b),
    "index": lambda a, b: a[1, 2:], "unsqueeze": lambda a, b: a.unsqueeze(0),
}


# integer division goes through the fp16 datapath (no integer divide on the ANE): a float
# step in between, so it stays recorded; its value must still match
_VIA_FLOAT = {"floordiv": lambda a, b: a // 3, "mod": lambda a, b: a % 4}


@pytest.mark.parametrize("name", sorted(_OPS) + sorted(_VIA_FLOAT))
def test_host_integer_ops_give_the_simulators_values(name):
    """Each op on host integers equals the same op run in a program, value and dtype; the
    integer ops run no program themselves."""
    rng = np.random.default_rng(1)
    a, b = rng.integers(-9, 9, (3, 4)), rng.integers(-9, 9, (3, 4))
    fn = _OPS.get(name) or _VIA_FLOAT[name]
    program = fn(_pending(a), _pending(b))
    with recording() as runs:
        host = fn(af.tensor(a), af.tensor(b))
        assert (host._node.data is not None) == (name in _OPS)     # computed when recorded
    assert runs == []
    assert host.dtype == program.dtype
    np.testing.assert_array_equal(host.numpy(), program.numpy())


def test_float_results_are_still_recorded():
    """A float result keeps the program's fp16 rounding: it is recorded, not computed here."""
    ix = af.tensor([1, 2049, 3])
    f = ix.float()
    assert f._node.data is None and f._node.op is not None
    assert f.tolist() == [1.0, 2048.0, 3.0]         # 2049 rounds to fp16's 2048


def test_a_result_larger_than_its_operands_is_still_recorded():
    """A one-hot mask from an index is made in the program from the small index, which is
    all the program loads."""
    ix = af.tensor([[1, 4], [2, 0]])
    mask = ix.unsqueeze(-1) == af.arange(6)
    assert mask._node.data is None
    np.testing.assert_array_equal(mask.numpy(), ix.numpy()[..., None] == np.arange(6))


def test_compiled_functions_keep_index_arithmetic_on_their_arguments():
    """Under af.compile an integer argument is the value of the captured call only: its
    arithmetic is recorded, so the next call with another index reads its own."""
    x = af.arange(10).float()

    @af.compile
    def pick(i):
        return (x[i + 1] * 2).sum()

    assert [pick(af.tensor([k])).item() for k in (0, 3, 5)] == [2.0, 8.0, 12.0]


def test_gradients_flow_through_a_host_index():
    """Host index arithmetic feeding an embedding: the weights get torch's gradient."""
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
        ints = [int(i) for i in x[0]]
    assert runs == [] and ints == [0, 1, 2, 3]
    assert [r.shape for r in rows] == [(4,)] * 3 and rows[0].dtype == af.int32
    for k, r in enumerate(rows):
        np.testing.assert_array_equal(r.numpy(), m[k])
