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
