"""The benchmarked workloads: small training steps (MLP, CNN, char-LM) and a matmul, each
built the same way for aneforge and for torch so one run can time both."""
from __future__ import annotations

import itertools

import numpy as np


BATCHES = 16    # distinct batches a step function cycles through


def train_step(make_model, make_batch, loss_fn, lib, compiled=False, numerics=None):
    """A step function: forward, loss, backward, AdamW update, loss read back; `compiled`:
    aneforge's step under af.compile (captured once, then replayed; torch stays eager);
    `numerics`: switches of aneforge's numerics model for the step.

    Each call takes the next of BATCHES batches, in a cycle. One batch repeated is memorized
    within a few dozen steps: its gradients then shrink to fp16 zeros, and the simulator's
    matmuls skip tiles of zeros (torch's do not), so the char-LM step read 1.6x faster after
    20 steps on one batch than in real training."""
    if lib == "torch":
        import torch
        torch.manual_seed(0)
        model = make_model(torch.nn)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        batches = [[torch.from_numpy(a) for a in make_batch()] for _ in range(BATCHES)]
        loss = lambda x, y: loss_fn(torch.nn.functional, model(x), y)   # noqa: E731
    else:
        import aneforge as af
        import aneforge.nn as nn
        af.manual_seed(0)
        model = make_model(nn)
        opt = af.optim.AdamW(model.parameters(), lr=1e-3)
        batches = [make_batch() for _ in range(BATCHES)]
        loss = lambda x, y: loss_fn(af.nn.functional, model(af.tensor(x)), af.tensor(y))  # noqa: E731

    def train_step(x, y):
        opt.zero_grad()
        value = loss(x, y)
        value.backward()
        opt.step()
        return value
    if compiled and lib != "torch":
        train_step = af.compile(train_step)
    batch = itertools.cycle(batches).__next__
    if numerics and lib != "torch":
        def run():
            with af.numerics(**numerics):
                return train_step(*batch()).item()
        return run
    return lambda: train_step(*batch()).item()


def mlp(batch):
    rng = np.random.default_rng(0)
    data = lambda: (rng.random((batch, 64)).astype(np.float32), rng.integers(0, 10, batch))  # noqa: E731
    model = lambda nn: nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10))  # noqa: E731
    return model, data, lambda F, out, y: F.cross_entropy(out, y)


def cnn(batch):
    rng = np.random.default_rng(0)
    data = lambda: (rng.random((batch, 1, 16, 16)).astype(np.float32),  # noqa: E731
                    rng.integers(0, 10, batch))

    def model(nn):
        return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                             nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
                             nn.Flatten(), nn.Linear(16 * 8 * 8, 10))
    return model, data, lambda F, out, y: F.cross_entropy(out, y)


def char_lm(batch, context=32, vocab=65, width=64):
    """Embedding -> MLP over a context window -> next-character logits."""
    rng = np.random.default_rng(0)
    data = lambda: (rng.integers(0, vocab, (batch, context)), rng.integers(0, vocab, batch))  # noqa: E731

    def model(nn):
        return nn.Sequential(nn.Embedding(vocab, width), nn.Flatten(),
                             nn.Linear(context * width, 256), nn.GELU(), nn.Linear(256, vocab))
    return model, data, lambda F, out, y: F.cross_entropy(out, y)


def matmul(n):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))

    def make(lib):
        if lib == "torch":
            import torch
            ta, tb = torch.from_numpy(a.astype(np.float32)), torch.from_numpy(b.astype(np.float32))
            return lambda: ta @ tb
        import aneforge as af
        return lambda: (af.tensor(a) @ af.tensor(b)).numpy()
    return make


def mlp_deep(batch):
    """The 64-128-128-10 network of the eager-speed goal (issue 25)."""
    rng = np.random.default_rng(0)
    data = lambda: (rng.random((batch, 64)).astype(np.float32), rng.integers(0, 10, batch))  # noqa: E731

    def model(nn):
        return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(),
                             nn.Linear(128, 10))
    return model, data, lambda F, out, y: F.cross_entropy(out, y)


def makemore(lib, batch=32, block=3, vocab=27, embed=10, hidden=200, lr=0.1, words=2000):
    """A step of Karpathy's makemore MLP as its notebook writes it, eagerly on raw tensors:
    a minibatch `ix` drawn each step, `emb = C[X[ix]]`, a tanh layer, `F.cross_entropy`,
    `p.grad = None` for each parameter, `loss.backward()`, `p.data += -lr * p.grad` for each
    parameter and `loss.item()`. Returns the step function (it returns the loss) and the
    parameters."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, vocab, (words, block))
    Y = rng.integers(0, vocab, words)
    shapes = [(vocab, embed), (block * embed, hidden), (hidden,), (hidden, vocab), (vocab,)]
    init = [rng.standard_normal(s).astype(np.float32) * 0.2 for s in shapes]
    draws = np.random.default_rng(1)
    if lib == "torch":
        import torch as lib_
        import torch.nn.functional as F
    else:
        import aneforge as lib_
        import aneforge.nn.functional as F
    tensor = lib_.tensor
    Xt, Yt = tensor(X), tensor(Y)
    params = [tensor(a) for a in init]
    for p in params:
        p.requires_grad = True
    C, W1, b1, W2, b2 = params

    def step():
        ix = tensor(draws.integers(0, words, batch))
        emb = C[Xt[ix]]
        h = lib_.tanh(emb.view(-1, block * embed) @ W1 + b1)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Yt[ix])
        for p in params:
            p.grad = None
        loss.backward()
        for p in params:
            p.data += -lr * p.grad
        return loss.item()
    return step, params


def eager_loop(lib):
    """The makemore step as a bench function."""
    return makemore(lib)[0]


def _library(nn):
    """The library a model maker was handed `nn` of (torch or aneforge): a model written once
    against the torch namespace needs its functions too (tril, arange)."""
    import importlib
    return importlib.import_module(nn.__name__.rpartition(".")[0])


def gpt(batch=8, block=32, vocab=65, width=64, heads=2, layers=2):
    """A nanoGPT-style LM: token and position embeddings, pre-LayerNorm blocks of causal
    self-attention (masked_fill, softmax) and a GELU MLP, a tied-free head, cross-entropy over
    every position."""
    rng = np.random.default_rng(0)
    data = lambda: (rng.integers(0, vocab, (batch, block)),  # noqa: E731
                    rng.integers(0, vocab, (batch, block)))

    def model(nn):
        torch, F = _library(nn), nn.functional

        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.c_attn, self.c_proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
                causal = torch.tril(torch.ones(block, block)).view(1, 1, block, block)
                self.register_buffer("mask", causal)

            def forward(self, x):
                B, T, C = x.size()
                q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2)
                           for t in self.c_attn(x).split(width, dim=2))
                att = (q @ k.transpose(-2, -1)) * (1.0 / (C // heads) ** 0.5)
                att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
                att = F.softmax(att, dim=-1)
                return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
                self.attn = Attention()
                self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                         nn.Linear(4 * width, width))

            def forward(self, x):           # pre-LayerNorm residual blocks
                h = x + self.attn(self.ln_1(x))
                return h + self.mlp(self.ln_2(h))

        class GPT(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(block, width)
                self.h = nn.ModuleList([Block() for _ in range(layers)])
                self.ln_f, self.lm_head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)

            def forward(self, idx):
                x = self.wte(idx) + self.wpe(torch.arange(0, idx.size(1)))
                for blk in self.h:
                    x = blk(x)
                return self.lm_head(self.ln_f(x))
        return GPT()
    return model, data, lambda F, out, y: F.cross_entropy(out.view(-1, out.size(-1)), y.view(-1))


def bn_cnn(batch=32):
    """conv-BatchNorm-relu-pool twice and a linear head, written as an nn.Module."""
    rng = np.random.default_rng(0)
    data = lambda: (rng.standard_normal((batch, 1, 16, 16)).astype(np.float32),  # noqa: E731
                    rng.integers(0, 10, batch))

    def model(nn):
        torch, F = _library(nn), nn.functional

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8)
                self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
                self.bn2 = nn.BatchNorm2d(16)
                self.fc = nn.Linear(16 * 4 * 4, 10)

            def forward(self, x):
                x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
                x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
                return self.fc(torch.flatten(x, 1))
        return Net()
    return model, data, lambda F, out, y: F.cross_entropy(out, y)
