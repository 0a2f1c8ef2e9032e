"""nn layers and functional losses against torch with identical weights: forward and backward."""
import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F

RTOL = 2.0 ** -7       # same rule as test_grad.py: ~8 fp16 ulps of the value plus of the scale


def close(got, want, what=""):
    got = np.asarray(got, np.float64)
    want = want.detach().numpy().astype(np.float64) if isinstance(want, torch.Tensor) else want
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    scale = np.abs(want).max() if want.size else 0.0
    err = np.abs(got - want)
    assert (err <= RTOL * (np.abs(want) + scale) + 2.0 ** -24).all(), \
        f"{what}: worst error {err.max():.3g} at scale {scale:.3g}"


def f16(a):
    return np.asarray(a, np.float32).astype(np.float16)


def twin(af_layer, torch_layer):
    """Give the aneforge layer the torch layer's weights (rounded to fp16 on both sides)."""
    with torch.no_grad():
        for p in torch_layer.parameters():
            p.copy_(torch.from_numpy(f16(p.numpy()).astype(np.float32)))
    af_layer.load_state_dict(torch_layer.state_dict())
    return af_layer, torch_layer


def compare(af_layer, torch_layer, x, int_input=False):
    xa = af.tensor(x, requires_grad=not int_input)
    xt = torch.tensor(x if int_input else x.astype(np.float32), requires_grad=not int_input)
    ya, yt = af_layer(xa), torch_layer(xt)
    close(ya.numpy(), yt, "forward")
    c = np.random.default_rng(1).standard_normal(tuple(yt.shape)).astype(np.float16)
    (ya * af.tensor(c)).sum().backward()
    (yt * torch.tensor(c.astype(np.float32))).sum().backward()
    if not int_input:
        close(xa.grad.numpy(), xt.grad, "input grad")
    tparams = dict(torch_layer.named_parameters())
    for name, p in af_layer.named_parameters():
        close(p.grad.numpy(), tparams[name].grad, f"grad of {name}")


def data(*shape, seed=0):
    return f16(np.random.default_rng(seed).standard_normal(shape))


LAYERS = {
    "linear": (lambda m: m.Linear(6, 4), (3, 6)),
    "linear_3d_no_bias": (lambda m: m.Linear(6, 4, bias=False), (2, 3, 6)),
    "conv2d": (lambda m: m.Conv2d(3, 4, 3, padding=1), (2, 3, 6, 5)),
    "conv2d_stride_groups": (lambda m: m.Conv2d(4, 6, (3, 2), stride=2, padding=(1, 0), groups=2),
                             (2, 4, 7, 6)),
    "conv2d_dilation": (lambda m: m.Conv2d(2, 3, 2, dilation=2), (1, 2, 6, 6)),
    "layer_norm": (lambda m: m.LayerNorm(8), (4, 8)),
    "layer_norm_2d": (lambda m: m.LayerNorm((3, 8)), (2, 3, 8)),
    "rms_norm": (lambda m: m.RMSNorm(8, eps=1e-5), (4, 8)),
    "gelu": (lambda m: m.GELU(), (4, 8)),
    "gelu_tanh": (lambda m: m.GELU(approximate="tanh"), (4, 8)),
    "silu": (lambda m: m.SiLU(), (4, 8)),
    "relu": (lambda m: m.ReLU(), (4, 8)),
    "tanh": (lambda m: m.Tanh(), (4, 8)),
    "sigmoid": (lambda m: m.Sigmoid(), (4, 8)),
    "softmax": (lambda m: m.Softmax(dim=1), (4, 8)),
    "log_softmax": (lambda m: m.LogSoftmax(dim=-1), (4, 8)),
    "flatten": (lambda m: m.Flatten(), (2, 3, 4)),
    "mlp": (lambda m: m.Sequential(m.Linear(8, 16), m.GELU(), m.Linear(16, 3)), (5, 8)),
    "conv1d": (lambda m: m.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
    "conv_transpose2d": (lambda m: m.ConvTranspose2d(3, 4, 3, stride=2, padding=1,
                                                     output_padding=1), (2, 3, 4, 5)),
    "conv_transpose2d_groups": (lambda m: m.ConvTranspose2d(4, 6, 2, stride=2, groups=2,
                                                            bias=False), (1, 4, 3, 3)),
    "group_norm": (lambda m: m.GroupNorm(2, 6), (2, 6, 5)),
    "max_pool2d": (lambda m: m.MaxPool2d(3, stride=2, padding=1), (2, 3, 7, 6)),
    "max_pool1d": (lambda m: m.MaxPool1d(2), (2, 3, 8)),
    "avg_pool2d": (lambda m: m.AvgPool2d(2), (2, 3, 6, 6)),
    "avg_pool1d": (lambda m: m.AvgPool1d(3, stride=2, padding=1), (2, 3, 8)),
    "adaptive_avg_pool2d": (lambda m: m.AdaptiveAvgPool2d((2, 3)), (1, 2, 6, 6)),
    "upsample_bilinear": (lambda m: m.Upsample(scale_factor=2, mode="bilinear"), (1, 2, 3, 4)),
    "leaky_relu": (lambda m: m.LeakyReLU(0.1), (4, 8)),
    "elu": (lambda m: m.ELU(alpha=0.5), (4, 8)),
    "softplus": (lambda m: m.Softplus(beta=2.0), (4, 8)),
    "hardtanh": (lambda m: m.Hardtanh(-0.5, 0.5), (4, 8)),
    "mish": (lambda m: m.Mish(), (4, 8)),
    "cnn": (lambda m: m.Sequential(m.Conv2d(2, 4, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
                                   m.Conv2d(4, 4, 3, padding=1), m.AdaptiveAvgPool2d(1),
                                   m.Flatten(), m.Linear(4, 3)), (2, 2, 8, 8)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_matches_torch(name):
    make, shape = LAYERS[name]
    af.manual_seed(0)
    torch.manual_seed(0)
    compare(*twin(make(nn), make(torch.nn)), data(*shape))


def test_embedding_matches_torch():
    torch.manual_seed(0)
    a, t = twin(nn.Embedding(10, 4), torch.nn.Embedding(10, 4))
    compare(a, t, np.array([[1, 3, 9], [0, 3, 3]]), int_input=True)


LOSSES = {
    "cross_entropy": lambda m, x, y, p: m.nn.functional.cross_entropy(x, y),
    "cross_entropy_smooth": lambda m, x, y, p: m.nn.functional.cross_entropy(x, y, label_smoothing=0.1),
    "cross_entropy_sum": lambda m, x, y, p: m.nn.functional.cross_entropy(x, y, reduction="sum"),
    "cross_entropy_probs": lambda m, x, y, p: m.nn.functional.cross_entropy(x, p),
    "nll_loss": lambda m, x, y, p: m.nn.functional.nll_loss(m.nn.functional.log_softmax(x, 1), y),
    "mse_loss": lambda m, x, y, p: m.nn.functional.mse_loss(x, p),
    "l1_loss": lambda m, x, y, p: m.nn.functional.l1_loss(x, p, reduction="none"),
    "bce_with_logits": lambda m, x, y, p: m.nn.functional.binary_cross_entropy_with_logits(x, p),
    "CrossEntropyLoss": lambda m, x, y, p: m.nn.CrossEntropyLoss(label_smoothing=0.1)(x, y),
    "CrossEntropyLoss_ignore": lambda m, x, y, p: m.nn.CrossEntropyLoss(ignore_index=2)(x, y),
    "CrossEntropyLoss_weight": lambda m, x, y, p: m.nn.CrossEntropyLoss(
        weight=m.tensor([1.0, 2.0, 0.5, 1.0, 3.0]), reduction="sum")(x, y),
    "NLLLoss": lambda m, x, y, p: m.nn.NLLLoss()(m.nn.functional.log_softmax(x, 1), y),
    "MSELoss": lambda m, x, y, p: m.nn.MSELoss()(x, p),
    "L1Loss": lambda m, x, y, p: m.nn.L1Loss(reduction="sum")(x, p),
    "SmoothL1Loss": lambda m, x, y, p: m.nn.SmoothL1Loss(beta=0.5)(x, p),
    "HuberLoss": lambda m, x, y, p: m.nn.HuberLoss(delta=2.0)(x, p),
    "BCEWithLogitsLoss": lambda m, x, y, p: m.nn.BCEWithLogitsLoss()(x, p),
}


@pytest.mark.parametrize("name", LOSSES)
def test_loss_matches_torch(name):
    x = data(6, 5) * 3
    y = np.array([0, 4, 2, 2, 1, 3])
    p = f16(np.random.default_rng(2).dirichlet(np.ones(5), 6))
    xa, xt = af.tensor(x, requires_grad=True), torch.tensor(x.astype(np.float32), requires_grad=True)
    la = LOSSES[name](af, xa, af.tensor(y), af.tensor(p))
    lt = LOSSES[name](torch, xt, torch.tensor(y), torch.tensor(p.astype(np.float32)))
    close(la.numpy(), lt, "loss")
    la.sum().backward() if la.ndim else la.backward()
    lt.sum().backward()
    close(xa.grad.numpy(), xt.grad, "grad")


def test_cross_entropy_4d_classes_on_axis_1():
    x, y = data(2, 3, 4, 5), np.random.default_rng(0).integers(0, 3, (2, 4, 5))
    got = F.cross_entropy(af.tensor(x), af.tensor(y)).item()
    want = torch.nn.functional.cross_entropy(torch.tensor(x.astype(np.float32)), torch.tensor(y))
    close(got, want.detach().numpy())


def test_one_hot_and_embedding_functional():
    assert F.one_hot(af.tensor([2, 0]), 3).tolist() == [[0, 0, 1], [1, 0, 0]]
    w = af.tensor(np.arange(6.0).reshape(3, 2))
    assert F.embedding(af.tensor([2, 2, 0]), w).tolist() == [[4, 5], [4, 5], [0, 1]]
    with pytest.raises(af.AneforgeError, match="num_classes"):
        F.one_hot(af.tensor([1]), 0)
    assert F.one_hot(af.tensor([1])).tolist() == [[0, 1]]       # -1: the largest class + 1


def test_dropout_mask_is_an_input_and_scales():
    af.clear_cache()
    drop = nn.Dropout(0.25)
    x = af.ones(64, 64)
    outs = [drop(x).numpy() for _ in range(3)]
    assert af.cache_info().misses == 1                          # new masks, same program
    assert not np.array_equal(outs[0], outs[1])
    kept = outs[0][outs[0] != 0]
    assert np.allclose(kept, 1 / 0.75, rtol=1e-3)
    assert abs((outs[0] == 0).mean() - 0.25) < 0.05
    drop.eval()
    assert drop(x) is x


def test_state_dict_round_trip_with_torch():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    am = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    am.load_state_dict(tm.state_dict())
    assert list(am.state_dict()) == list(tm.state_dict())
    back = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    back.load_state_dict({k: torch.as_tensor(np.asarray(v, np.float32))
                          for k, v in am.state_dict().items()})
    x = data(3, 4)
    close(am(af.tensor(x)).numpy(), back(torch.tensor(x.astype(np.float32))), "reloaded")
    for k, v in am.state_dict().items():                         # numpy arrays load too
        np.testing.assert_array_equal(np.asarray(v), f16(tm.state_dict()[k].numpy()))


def test_load_state_dict_errors():
    m = nn.Linear(2, 3)
    with pytest.raises(af.AneforgeError, match="missing keys \\['bias'\\]"):
        m.load_state_dict({"weight": np.zeros((3, 2))})
    with pytest.raises(af.AneforgeError, match="weight.*shape"):
        m.load_state_dict({"weight": np.zeros((2, 3)), "bias": np.zeros(3)})
    keys = m.load_state_dict({"weight": np.zeros((3, 2)), "extra": 1}, strict=False)
    assert keys.missing_keys == ["bias"] and keys.unexpected_keys == ["extra"]


def test_module_api():
    m = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.1), nn.ModuleList([nn.Linear(8, 8)]))
    assert [n for n, _ in m.named_parameters()] == ["0.weight", "0.bias", "2.0.weight", "2.0.bias"]
    assert len(list(m.modules())) == 5 and len(list(m.children())) == 3
    m.eval()
    assert not m[1].training
    m.train()
    assert m[1].training
    assert "Linear(in_features=4, out_features=8, bias=True)" in repr(m)


def test_default_init_follows_torch_and_the_seed():
    af.manual_seed(3)
    a = nn.Linear(100, 50)
    af.manual_seed(3)
    b = nn.Linear(100, 50)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())
    w = a.weight.numpy().astype(np.float32)
    bound = 1 / np.sqrt(100)                   # kaiming_uniform(a=sqrt(5)) on fan_in 100
    assert np.abs(w).max() <= bound * 1.001 and np.abs(w).max() > bound * 0.9
    assert abs(w.std() - bound / np.sqrt(3)) < 0.01


def test_clip_grad_norm_matches_torch():
    g1, g2 = data(5, 3) * 40, data(7, seed=1) * 40
    pa = [nn.Parameter(np.zeros_like(g1)), nn.Parameter(np.zeros_like(g2))]
    pt = [torch.zeros(g1.shape, requires_grad=True), torch.zeros(g2.shape, requires_grad=True)]
    for p, g in zip(pa, (g1, g2)):
        p.grad = af.tensor(g)
    for p, g in zip(pt, (g1, g2)):
        p.grad = torch.tensor(g.astype(np.float32))
    na = nn.utils.clip_grad_norm_(pa, 1.0)
    nt = torch.nn.utils.clip_grad_norm_(pt, 1.0)
    close(na.item(), nt.numpy())
    for a, t in zip(pa, pt):
        close(a.grad.numpy(), t.grad)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_matches_torch(need_weights, batch_first):
    torch.manual_seed(0)
    a, t = twin(nn.MultiheadAttention(8, 2, batch_first=batch_first),
                torch.nn.MultiheadAttention(8, 2, batch_first=batch_first))
    shape = (2, 4, 8) if batch_first else (4, 2, 8)
    q, k = data(*shape, seed=1), data(*shape, seed=2)
    mask = np.triu(np.ones((4, 4), bool), 1)              # True: not allowed (torch's meaning)
    qa, qt = af.tensor(q, requires_grad=True), torch.tensor(q.astype(np.float32), requires_grad=True)
    oa, wa = a(qa, af.tensor(k), af.tensor(k), attn_mask=af.tensor(mask), need_weights=need_weights)
    ot, wt = t(qt, torch.tensor(k.astype(np.float32)), torch.tensor(k.astype(np.float32)),
               attn_mask=torch.tensor(mask), need_weights=need_weights)
    close(oa.numpy(), ot, "output")
    if need_weights:
        close(wa.numpy(), wt, "weights")
    else:
        assert wa is None and wt is None
    oa.sum().backward()
    ot.sum().backward()
    close(qa.grad.numpy(), qt.grad, "query grad")
    tparams = dict(t.named_parameters())
    for name, p in a.named_parameters():
        close(p.grad.numpy(), tparams[name].grad, f"grad of {name}")


def test_register_buffer_and_module_dict():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"a": nn.Linear(3, 2), "b": nn.Linear(3, 1)})
            self.register_buffer("scale", af.tensor([2.0, 3.0]))
            self.register_buffer("cache", af.zeros(1), persistent=False)

        def forward(self, x):
            return self.heads["a"](x) * self.scale

    torch_net = torch.nn.Module()
    torch_net.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 2), "b": torch.nn.Linear(3, 1)})
    torch_net.register_buffer("scale", torch.tensor([2.0, 3.0]))
    torch_net.register_buffer("cache", torch.zeros(1), persistent=False)
    net = Net()
    assert list(net.state_dict()) == list(torch_net.state_dict())
    assert [n for n, _ in net.named_buffers()] == [n for n, _ in torch_net.named_buffers()]
    assert [n for n, _ in net.named_parameters()] == [n for n, _ in torch_net.named_parameters()]
    assert list(net.heads) == ["a", "b"] and "b" in net.heads and len(net.heads) == 2
    state = torch_net.state_dict()
    state["scale"] = torch.tensor([0.5, 4.0])
    net.load_state_dict(state)
    assert net.scale.tolist() == [0.5, 4.0]
    assert not net.scale.requires_grad
    net.scale = af.tensor([1.0, 1.0])                  # assigning a tensor updates the buffer
    assert "scale" in net.state_dict() and net.scale.tolist() == [1.0, 1.0]
    assert net(af.ones(1, 3)).shape == (1, 2)
