"""af.from_torch on models written the way popular public model files write them, in train and
eval mode: forward values, gradients, and a few training steps against torch.

The models follow these public files (shrunk; structure, layer names and idioms kept, the code
written here):
- GPT: karpathy/nanoGPT model.py (MIT licence, Copyright (c) 2022 Andrej Karpathy): LayerNorm
  with an optional bias through F.layer_norm, causal F.scaled_dot_product_attention, tied
  `transformer.wte.weight = lm_head.weight`, `torch.arange` positions, `x[:, [-1], :]` at
  inference and `F.cross_entropy(..., ignore_index=-1)` with targets.
- NeuralNetwork: the PyTorch "Quickstart" tutorial (pytorch/tutorials
  beginner_source/basics/quickstart_tutorial.py, BSD-3-Clause), its exact layers.
- BasicBlock: torchvision models/resnet.py (BSD-3-Clause): conv3x3, BatchNorm2d, ReLU and the
  1x1-conv downsample of a strided block.
- TransformerEncoderLayer: torch.nn's own (BSD-3-Clause), used as is.
"""
import math

import numpy as np
import pytest
import torch
import torch.nn as nn
from torch.nn import functional as TF

import aneforge as af


# ---- nanoGPT-style GPT ------------------------------------------------------------------------
class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return TF.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, bias):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.resid_dropout = nn.Dropout(0.0)
        self.n_head, self.n_embd = n_head, n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = TF.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd, bias):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, bias):
        super().__init__()
        self.ln_1, self.ln_2 = LayerNorm(n_embd, bias), LayerNorm(n_embd, bias)
        self.attn = CausalSelfAttention(n_embd, n_head, bias)
        self.mlp = MLP(n_embd, bias)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size=37, block_size=8, n_layer=2, n_head=2, n_embd=16, bias=True):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            drop=nn.Dropout(0.0),
            h=nn.ModuleList([Block(n_embd, n_head, bias) for _ in range(n_layer)]),
            ln_f=LayerNorm(n_embd, bias),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = TF.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                    ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss


# ---- the PyTorch quickstart network ------------------------------------------------------------
class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28 * 28, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


# ---- a torchvision-style ResNet BasicBlock --------------------------------------------------------
def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes=4, planes=8, stride=2):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = nn.Sequential(
            nn.Conv2d(inplanes, planes, kernel_size=1, stride=stride, bias=False),
            nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


def encoder_layer():
    return nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                      batch_first=True)


RNG = np.random.default_rng(0)
IDX = RNG.integers(0, 37, (2, 8))
# name -> (model, example input, loss of the output)
MODELS = {
    "nanogpt": (GPT, IDX, lambda out: out[0]),
    "quickstart": (NeuralNetwork, RNG.random((4, 1, 28, 28)).astype(np.float32),
                   lambda out: out),
    "resnet_basic_block": (BasicBlock, RNG.standard_normal((4, 4, 8, 8)).astype(np.float32),
                           lambda out: out),
    "transformer_encoder_layer": (encoder_layer, RNG.standard_normal((2, 6, 16))
                                  .astype(np.float32), lambda out: out),
}
TOL = 2 ** -5       # the ANE's MAC datapath (see test_from_torch's compare test)
# nanoGPT's mlp.c_proj gradients: the MAC datapath's 12-bit truncation of partial sums moves
# them by up to 5.4% of their scale (the per-product model, af.numerics("per_product"): 2**-5)
GRAD_TOL = {"nanogpt": 2 ** -4}


def _pair(name, train):
    make, x, pick = MODELS[name]
    torch.manual_seed(0)
    net = make().train(train)
    with torch.no_grad():     # the weights from_torch holds (fp16): one set of weights, so a
        for p in net.parameters():          # ReLU input within fp16's rounding of zero does
            p.copy_(p.half().float())       # not flip between the two (quickstart: 3 did)
    return net, af.from_torch(net, (torch.from_numpy(x),)), x, pick


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name", list(MODELS))
def test_forward_and_gradients_match_torch(name, train):
    net, model, x, pick = _pair(name, train)
    assert model.training == train
    assert len(list(model.parameters())) == len(list(net.parameters()))
    report = af.testing.compare(_Picked(model, pick), _Picked(net, pick), (x,),
                                rtol=GRAD_TOL.get(name, TOL))
    kinks = _kinks(net, x) if name == "quickstart" else {}
    for r in report:
        assert r.ok or r.name in kinks, str(report)
    for grad_name, rows in kinks.items():           # the rows of units away from the kink
        key = grad_name.removeprefix("grad ")
        mine = dict(model.named_parameters())[key].grad.numpy()
        ref = dict(net.named_parameters())[key].grad.numpy()
        af.testing.assert_close(mine[~rows], ref[~rows], rtol=TOL)
        assert rows.mean() < 0.05, rows.sum()           # 12 of 512 here


def _kinks(net, x):
    """The quickstart's first-layer units whose input is within 2**-9 of the largest of zero for
    a sample: a 784-term fp16 sum rounds by about that much, and ReLU's gradient jumps there (a
    flipped unit's whole row of the weight gradient differs). Gradient name -> row mask."""
    h = net.linear_relu_stack[0](net.flatten(torch.from_numpy(x))).detach().numpy()
    rows = (np.abs(h) < 2 ** -9 * np.abs(h).max()).any(0)
    return {"grad linear_relu_stack.0.weight": rows, "grad linear_relu_stack.0.bias": rows}


class _Picked:
    """A model's output as compare reads it (nanoGPT returns (logits, loss))."""

    def __init__(self, model, pick):
        self.model, self.pick = model, pick

    def __call__(self, *args):
        return self.pick(self.model(*args))

    def __getattr__(self, name):
        return getattr(self.model, name)


@pytest.mark.parametrize("name", list(MODELS))
def test_training_steps_match_torch(name):
    """Five SGD-with-momentum steps on a mean squared error to a fixed target: the losses
    follow torch's within 2**-5, each parameter's total update points the way torch's does
    (cosine; fp16 steps drift apart elementwise: up to 14% of a tensor's scale after five
    steps, at ReLU kinks and through batch statistics), and batch norm's running statistics
    follow torch's."""
    net, model, x, pick = _pair(name, True)
    start = {k: p.detach().numpy().copy() for k, p in net.named_parameters()}
    opt = af.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    topt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    target = None
    for _ in range(5):
        out, tout = pick(model(af.tensor(x))), pick(net(torch.from_numpy(x)))
        if target is None:
            target = RNG.standard_normal(tuple(tout.shape)).astype(np.float32)
        loss = ((out - af.tensor(target)) ** 2).mean()
        tloss = ((tout - torch.from_numpy(target)) ** 2).mean()
        loss.backward(), tloss.backward()
        opt.step(), topt.step()
        opt.zero_grad(), topt.zero_grad()
        assert abs(loss.item() - tloss.item()) <= TOL * tloss.item()
    params = dict(net.named_parameters())
    for k, p in model.named_parameters():
        theirs = params[k].detach().numpy() - start[k]
        if np.abs(theirs).max() < 2 ** -11 * np.abs(start[k]).max():
            continue        # below fp16's resolution at the weights (LayerNorm's ~1.0): held
        moved = af.testing.agreement(p.numpy().astype(np.float32) - start[k], theirs, k)
        assert moved.cosine > 0.99, moved
    for k, b in net.named_buffers():              # batch norm's running statistics
        af.testing.assert_close(model.state_dict()[k], b, rtol=TOL, msg=k)


def test_nanogpt_keeps_its_tied_embedding_one_parameter():
    net, model, _, _ = _pair("nanogpt", True)
    names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    assert "transformer.wte.weight" in names and "lm_head.weight" in names
    assert len(list(model.parameters())) == len(list(net.parameters()))
    assert len(names) == len(list(net.named_parameters(remove_duplicate=False)))


def test_nanogpt_with_targets_imports_its_loss():
    torch.manual_seed(0)
    net = GPT()
    targets = RNG.integers(0, 37, (2, 8))
    targets[0, :3] = -1                                     # ignore_index=-1
    model = af.from_torch(net, (torch.from_numpy(IDX), torch.from_numpy(targets)))
    _, loss = model(af.tensor(IDX), af.tensor(targets))
    _, tloss = net(torch.from_numpy(IDX), torch.from_numpy(targets))
    assert abs(loss.item() - tloss.item()) < TOL * tloss.item()
    loss.backward(), tloss.backward()
    grads = dict(net.named_parameters())
    for k, p in model.named_parameters():
        af.testing.assert_close(p.grad, grads[k].grad, rtol=GRAD_TOL["nanogpt"], msg=k)
