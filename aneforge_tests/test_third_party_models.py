"""af.from_torch on models written the way popular public model files write them, in train and
eval mode: forward values, gradients, and a few training steps against torch.

The models are, or follow, these public files (shrunk; structure, layer names and idioms kept):
- GPT: karpathy/nanoGPT model.py (MIT licence), the copy in test_nanogpt_port.py run on torch:
  causal F.scaled_dot_product_attention, tied `transformer.wte.weight = lm_head.weight`,
  `torch.arange` positions, `x[:, [-1], :]` at inference and `F.cross_entropy(...,
  ignore_index=-1)` with targets.
- NeuralNetwork: the PyTorch "Quickstart" tutorial (pytorch/tutorials
  beginner_source/basics/quickstart_tutorial.py, BSD-3-Clause), its exact layers.
- BasicBlock: torchvision models/resnet.py (BSD-3-Clause): conv3x3, BatchNorm2d, ReLU and the
  1x1-conv downsample of a strided block.
- TransformerEncoderLayer: torch.nn's own (BSD-3-Clause), used as is.
"""
import contextlib

import numpy as np
import pytest
import torch
import torch.nn as nn

import aneforge as af
from test_nanogpt_port import TORCH_IMPORTS, load


# ---- nanoGPT's GPT: test_nanogpt_port's copy of its model.py (with its licence) on torch ---------
NANOGPT = load(TORCH_IMPORTS)


def GPT():
    return NANOGPT["GPT"](NANOGPT["GPTConfig"](vocab_size=37, block_size=8))


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


def _numerics(name):
    """nanoGPT's mlp.c_proj gradients: the MAC datapath's 12-bit truncation of partial sums
    (the default numerics) moves them by up to 6% of their scale, data-dependent; under the
    per-product model every gradient is within 2.2%. Its gradients are compared there."""
    return af.numerics("per_product") if name == "nanogpt" else contextlib.nullcontext()


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
    with _numerics(name):
        report = af.testing.compare(_Picked(model, pick), _Picked(net, pick), (x,), rtol=TOL)
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
    with _numerics("nanogpt"):
        _, loss = model(af.tensor(IDX), af.tensor(targets))
        _, tloss = net(torch.from_numpy(IDX), torch.from_numpy(targets))
        assert abs(loss.item() - tloss.item()) < TOL * tloss.item()
        loss.backward(), tloss.backward()
        grads = dict(net.named_parameters())
        for k, p in model.named_parameters():
            af.testing.assert_close(p.grad, grads[k].grad, rtol=TOL, msg=k)
