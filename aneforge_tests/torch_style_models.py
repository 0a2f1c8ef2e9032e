"""Torch-style model files for the fp16-training tests (test_autoscale.py), written the way
third-party code is: once, against a module namespace `torch` (torch itself, or aneforge
imported as torch), so the aneforge side differs from the torch side only by the import."""
import math

import numpy as np


def gpt(torch, vocab=65, width=64, heads=2, layers=2, block=32):
    nn, F = torch.nn, torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(width, 3 * width)
            self.c_proj = nn.Linear(width, width)
            self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(width, dim=2)
            k = k.view(B, T, heads, C // heads).transpose(1, 2)
            q = q.view(B, T, heads, C // heads).transpose(1, 2)
            v = v.view(B, T, heads, C // heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.c_proj(y)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(width, 4 * width)
            self.c_proj = nn.Linear(4 * width, width)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = nn.LayerNorm(width)
            self.attn = CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(width)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(vocab, width)
            self.wpe = nn.Embedding(block, width)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(width)
            self.lm_head = nn.Linear(width, vocab, bias=False)

        def forward(self, idx, targets):
            b, t = idx.size()
            pos = torch.arange(0, t)
            x = self.wte(idx) + self.wpe(pos)
            for blk in self.h:
                x = blk(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def data(rng, batch=8):
        """A learnable stream: each token follows from the last by a fixed rule, 10% noise."""
        seq = np.empty((batch, block + 1), np.int64)
        seq[:, 0] = rng.integers(0, vocab, batch)
        for t in range(1, block + 1):
            nxt = (seq[:, t - 1] * 7 + 3) % vocab
            noise = rng.random(batch) < 0.1
            seq[:, t] = np.where(noise, rng.integers(0, vocab, batch), nxt)
        return seq[:, :-1].copy(), seq[:, 1:].copy()
    return GPT(), data


def cnn(torch):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(8)
            self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(16)
            self.fc = nn.Linear(16 * 4 * 4, 10)

        def forward(self, x, y):
            x = F.max_pool2d(self.bn1(F.relu(self.conv1(x))), 2)
            x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
            return F.cross_entropy(self.fc(torch.flatten(x, 1)), y)

    def data(rng, batch=32):
        """Digits-like: the class sets a bright row; noise elsewhere."""
        y = rng.integers(0, 10, batch)
        x = rng.standard_normal((batch, 1, 16, 16)).astype(np.float32) * 0.5
        x[np.arange(batch), 0, y + 3, :] += 2.0
        return x, y
    return Net(), data


def mlp(torch):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = nn.Linear(64, 128), nn.Linear(128, 128), nn.Linear(128, 10)

        def forward(self, x, y):
            return F.cross_entropy(self.l3(F.relu(self.l2(F.relu(self.l1(x))))), y)

    def data(rng, batch=64):
        return rng.random((batch, 64)).astype(np.float32), rng.integers(0, 10, batch)
    return Net(), data


MODELS = {"gpt": gpt, "cnn": cnn, "mlp": mlp}
