"""An eager training loop re-records its optimizer update from the first step's kept
recording (optim/optimizer.py `_updated`): nothing a step reads may break the step's tape."""
import numpy as np

import aneforge as af
import aneforge.nn as nn
from aneforge.optim.optimizer import Optimizer


class _Head(nn.Module):
    """nanoGPT's attention head: its causal mask a buffer made by `tril(ones)`."""

    def __init__(self, width=8, block=4):
        super().__init__()
        self.q, self.k = nn.Linear(width, width, bias=False), nn.Linear(width, width, bias=False)
        self.register_buffer("tril", af.tril(af.ones(block, block)))

    def forward(self, x):
        T = x.shape[1]
        wei = self.q(x) @ self.k(x).transpose(-2, -1)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return af.nn.functional.softmax(wei, dim=-1).sum()


def test_a_buffer_made_by_an_op_holds_its_value():
    m = _Head()
    assert m.tril._node.data is not None
    assert m.tril.tolist() == np.tril(np.ones((4, 4))).tolist()


def test_an_eager_step_reading_a_computed_buffer_keeps_its_update(monkeypatch):
    """Left pending, the mask was recomputed by every step's program and, read from an older
    tape, broke each step's: the optimizer ran its Python update for every parameter each step."""
    calls = []
    real = Optimizer._recorded
    monkeypatch.setattr(Optimizer, "_recorded", lambda *a: calls.append(1) or real(*a))
    m = _Head()
    opt = af.optim.AdamW(m.parameters(), lr=1e-2)
    x = af.tensor(np.random.default_rng(0).standard_normal((2, 4, 8)).astype(np.float32))
    per_step = []
    for _ in range(4):
        opt.zero_grad(set_to_none=True)
        m(x).backward()
        opt.step()
        per_step.append(len(calls))
        calls.clear()
    assert per_step[0] == 2 and per_step[2:] == [0, 0]


def test_a_step_on_a_batch_sampled_by_index_reads_keeps_its_update(monkeypatch):
    """nanoGPT's sampler reads each slice bound as an index (core/hostints.py); those reads
    must leave the step's tape whole (a batch recorded before them is read by the step after)."""
    calls = []
    real = Optimizer._recorded
    monkeypatch.setattr(Optimizer, "_recorded", lambda *a: calls.append(1) or real(*a))
    data = af.tensor(np.random.default_rng(0).integers(0, 11, 500))
    model = nn.Sequential(nn.Embedding(11, 8), nn.Linear(8, 11))
    opt = af.optim.AdamW(model.parameters(), lr=1e-2)
    per_step = []
    for _ in range(4):
        ix = af.randint(len(data) - 5, (4,))
        x = af.stack([data[i:i + 4] for i in ix])
        y = af.stack([data[i + 1:i + 4 + 1] for i in ix])
        loss = af.nn.functional.cross_entropy(model(x).view(-1, 11), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        per_step.append(len(calls))
        calls.clear()
    assert per_step[0] == 3 and per_step[2:] == [0, 0]       # embedding, weight, bias
