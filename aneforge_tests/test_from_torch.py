"""af.from_torch: torch modules through torch.export run, train and export like aneforge's own."""
import inspect

import numpy as np
import pytest
import torch
import torch.nn as tnn

import aneforge as af
import aneforge.nn.functional as F
from aneforge import _api, torch_import


class Block(tnn.Module):
    """A pre-norm transformer block with hand-written causal attention."""

    def __init__(self, d=16, t=6):
        super().__init__()
        self.ln1, self.ln2 = tnn.LayerNorm(d), tnn.LayerNorm(d)
        self.qkv, self.proj = tnn.Linear(d, 3 * d), tnn.Linear(d, d)
        self.mlp = tnn.Sequential(tnn.Linear(d, 4 * d), tnn.GELU(), tnn.Linear(4 * d, d))
        self.register_buffer("mask", torch.triu(torch.full((t, t), -1e4), diagonal=1))

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        a = torch.softmax(q @ k.transpose(-2, -1) / 4.0 + self.mask, dim=-1) @ v
        x = x + self.proj(a)
        return x + self.mlp(self.ln2(x))


class SmallCNN(tnn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = tnn.Conv2d(1, 4, 3, padding=1), tnn.Conv2d(4, 8, 3, stride=2)
        self.fc = tnn.Linear(8 * 3 * 3, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        return self.fc(x.flatten(1))


def mlp():
    return tnn.Sequential(tnn.Linear(8, 32), tnn.ReLU(), tnn.Linear(32, 4))


MODELS = {"mlp": (mlp, (4, 8)), "transformer_block": (Block, (2, 6, 16)),
          "cnn": (SmallCNN, (3, 1, 8, 8))}


def pair(name):
    torch.manual_seed(0)
    make, shape = MODELS[name]
    net = make()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float16).astype(np.float32)
    return net, af.from_torch(net, (torch.from_numpy(x),)), x


@pytest.mark.parametrize("name", list(MODELS))
def test_forward_and_gradients_match_torch(name):
    net, model, x = pair(name)
    y = model(af.tensor(x))
    ty = net(torch.from_numpy(x))
    np.testing.assert_allclose(y.numpy().astype(np.float32), ty.detach().numpy(), atol=2e-2, rtol=2e-2)
    (y * y).mean().backward()
    (ty * ty).mean().backward()
    grads = dict(net.named_parameters())
    for k, p in model.named_parameters():
        ref = grads[k].grad.numpy()
        np.testing.assert_allclose(p.grad.numpy().astype(np.float32), ref,
                                   atol=2e-2 * max(1.0, np.abs(ref).max()), rtol=5e-2, err_msg=k)


def test_an_imported_module_trains_like_torch_and_exports(tmp_path):
    net, model, x = pair("mlp")
    target = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)
    opt = af.optim.SGD(model.parameters(), lr=0.1)
    topt = torch.optim.SGD(net.parameters(), lr=0.1)
    af.clear_cache()
    for _ in range(20):
        opt.zero_grad()
        loss = F.mse_loss(model(af.tensor(x)), af.tensor(target))
        loss.backward()
        opt.step()
        topt.zero_grad()
        tl = torch.nn.functional.mse_loss(net(torch.from_numpy(x)), torch.from_numpy(target))
        tl.backward()
        topt.step()
    assert abs(loss.item() - tl.item()) < 0.02 * tl.item() + 1e-3
    assert af.cache_info().misses == 1                       # one program per step
    path = af.export(model(af.tensor(x)), str(tmp_path / "m.mlpackage"))
    assert path.endswith("m.mlpackage")


def test_state_dict_keys_and_buffers_follow_torch():
    net, model, _ = pair("transformer_block")
    assert sorted(model.state_dict()) == sorted(net.state_dict())
    assert [tuple(b.shape) for b in model.buffers()] == [(6, 6)]


def test_an_op_without_a_route_is_named_with_its_node():
    class Odd(tnn.Module):
        def forward(self, x):
            return torch.atan2(x, x + 1)
    with pytest.raises(af.AneforgeError, match=r"aten\.atan2\.default \(node 'atan2'.*torch\.atan2"):
        af.from_torch(Odd(), (torch.ones(3),))


def test_an_op_of_the_export_graph_without_a_route_runs_through_core_aten():
    class Cumulative(tnn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim=0).unflatten(0, (2, 3))
    x = torch.arange(6.0)
    model = af.from_torch(Cumulative(), (x,))
    np.testing.assert_allclose(model(af.tensor(x.numpy())).numpy(), Cumulative()(x).numpy())


def _bn_net():
    torch.manual_seed(0)
    return tnn.Sequential(tnn.Conv2d(2, 4, 3), tnn.BatchNorm2d(4), tnn.ReLU(), tnn.Flatten(),
                          tnn.Linear(16, 3), tnn.BatchNorm1d(3))


def test_batch_norm_in_training_mode_updates_running_statistics_like_torch():
    net = _bn_net()
    x = np.random.default_rng(0).standard_normal((5, 2, 4, 4)).astype(np.float32)
    model = af.from_torch(net, (torch.from_numpy(x),))
    assert model.training
    opt, topt = af.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(net.parameters(), lr=0.1)
    for step in range(3):
        xs = x + step
        y, ty = model(af.tensor(xs)), net(torch.from_numpy(xs))
        af.testing.assert_close(y, ty.detach(), rtol=2 ** -5)
        (y * y).mean().backward()
        (ty * ty).mean().backward()
        opt.step(), topt.step()
        opt.zero_grad(), topt.zero_grad()
    for name, buf in net.named_buffers():
        mine = model.state_dict()[name]
        if name.endswith("num_batches_tracked"):
            assert int(mine.item()) == int(buf) == 3
        else:
            af.testing.assert_close(mine, buf, rtol=2 ** -6, msg=name)
    model.eval()                         # eval: the running statistics, a graph of that mode
    y = model(af.tensor(x))
    # normalised by fp16 running variances (each within 2**-6 above) after three fp16 steps:
    # 0.6% of the output's scale apart at most
    af.testing.assert_close(y, net.eval()(torch.from_numpy(x)).detach(), rtol=2 ** -4)
    assert int(model.state_dict()["1.num_batches_tracked"].item()) == 3    # eval updates nothing


def test_batch_norm_exported_in_eval_mode_uses_running_statistics():
    net = tnn.Sequential(tnn.Linear(4, 4), tnn.BatchNorm1d(4))
    model = af.from_torch(net.eval(), (torch.ones(2, 4),))     # eval: running statistics
    x = np.random.default_rng(0).random((2, 4)).astype(np.float32)
    np.testing.assert_allclose(model(af.tensor(x)).numpy(), net(torch.from_numpy(x)).detach().numpy(),
                               atol=1e-2)
    assert not model.training


def test_tied_weights_stay_one_parameter_and_train_together():
    class Tied(tnn.Module):                  # nanoGPT's tying: lm_head.weight = wte.weight
        def __init__(self):
            super().__init__()
            self.wte, self.lm_head = tnn.Embedding(7, 4), tnn.Linear(4, 7, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx):
            return self.lm_head(torch.tanh(self.wte(idx)))
    torch.manual_seed(0)
    net, idx = Tied(), np.array([[1, 2, 3], [4, 5, 6]])
    model = af.from_torch(net, (torch.from_numpy(idx),))
    assert len(list(model.parameters())) == len(list(net.parameters())) == 1
    assert model.get_parameter("wte.weight") is model.get_parameter("lm_head.weight") \
        if hasattr(model, "get_parameter") else \
        model._parameters["wte.weight"] is model._parameters["lm_head.weight"]
    opt, topt = af.optim.SGD(model.parameters(), lr=0.5), torch.optim.SGD(net.parameters(), lr=0.5)
    for _ in range(3):
        loss = F.cross_entropy(model(af.tensor(idx)).reshape(-1, 7), af.tensor(idx.reshape(-1)))
        tloss = tnn.functional.cross_entropy(net(torch.from_numpy(idx)).reshape(-1, 7),
                                             torch.from_numpy(idx.reshape(-1)))
        loss.backward(), tloss.backward()
        opt.step(), topt.step()
        opt.zero_grad(), topt.zero_grad()
    af.testing.assert_close(model._parameters["wte.weight"], net.wte.weight.detach(), rtol=2 ** -5)
    assert abs(loss.item() - tloss.item()) < 1e-2 * tloss.item()


def test_an_error_while_running_names_the_users_line():
    class Wide(tnn.Module):
        def forward(self, x):
            return x.expand(-1, 70000) + 1           # an axis over the ANE's 65536
    model = af.from_torch(Wide(), (torch.ones(2, 1),))
    with pytest.raises(af.AneforgeError, match="65536") as e:
        model(af.ones(2, 1) * 2)                    # computed: a program would hold the result
    note = "\n".join(getattr(e.value, "__notes__", []))
    assert "test_from_torch.py:" in note and "return x.expand(-1, 70000) + 1" in note, note
    assert "site-packages/torch" not in note


def test_compare_reports_agreement_and_catches_a_difference():
    net, model, x = pair("transformer_block")
    # The ANE's MAC datapath cuts each 4-lane tile's partial sums toward zero at 12 bits
    # (sbryngelson/ane-guide part-6-silicon/20-datapath-mac.md): gradients through the block's
    # matmuls agree with torch to ~2.6% of their scale (2**-5), not the default 2**-7, which the
    # earlier per-product model (every product rounded to nearest) met.
    report = af.testing.compare(model, net, (x,), rtol=2.0 ** -5)
    assert report.ok, str(report)
    with af.numerics("per_product"):
        # 2**-7 held unscaled; automatic gradient scaling moves where the backward pass rounds
        # (qkv.bias: 0.6% -> 0.9% of its scale): still well inside the datapath's 2**-5 above
        assert af.testing.compare(model, net, (x,), rtol=2.0 ** -6).ok
    assert [r.name for r in report][:2] == ["output 0", "grad ln1.weight"]
    with af.no_grad():
        w = model.state_dict()["proj.bias"]
    model.load_state_dict({**model.state_dict(), "proj.bias": w.numpy() + 0.5})
    bad = af.testing.compare(model, net, (x,))
    assert not bad.ok and not bad[0].ok
    assert "DIFF" in str(bad)


def test_compare_keeps_token_ids_integer():
    class Tokens(tnn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.head = tnn.Embedding(11, 8), tnn.Linear(8, 11)

        def forward(self, idx):
            return self.head(self.emb(idx))
    torch.manual_seed(0)
    net, idx = Tokens(), np.array([[1, 5, 10], [0, 3, 7]])
    report = af.testing.compare(af.from_torch(net, (torch.from_numpy(idx),)), net, (idx,))
    assert report.ok, str(report)
    assert [r.name for r in report] == ["output 0", "grad emb.weight", "grad head.weight",
                                        "grad head.bias"]


def test_compare_default_loss_reaches_through_a_final_layer_norm():
    """A mean of squares of a LayerNorm's output (weight 1, bias 0) is ~1 whatever comes
    before: the earlier layer's gradients are rounding noise, which compared as a difference.
    The default projection's gradient there is of the order of the weights'."""
    torch.manual_seed(0)
    net = tnn.Sequential(tnn.Linear(8, 16), tnn.GELU(), tnn.LayerNorm(16))
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    squares = net(torch.from_numpy(x)).pow(2).mean()
    squares.backward()
    assert net[0].weight.grad.abs().max() < 1e-3       # the old default loss: ~eps only
    net.zero_grad()
    testing_loss = af.testing.projection_loss([net(torch.from_numpy(x))])
    testing_loss.backward()
    assert net[0].weight.grad.abs().max() > 1e-2
    # rtol 2**-5: the MAC datapath's tolerance (see the test above)
    report = af.testing.compare(af.from_torch(net, (torch.from_numpy(x),)), net, (x,),
                                rtol=2 ** -5)
    assert report.ok, str(report)


def test_assert_close_uses_fp16_aware_tolerances():
    x = np.linspace(-4, 4, 101)
    af.testing.assert_close(af.tensor(x).tanh(), np.tanh(x))            # fp16 roundings pass
    af.testing.assert_close(af.tensor(x) - af.tensor(x) + 1e-9, np.zeros(101) + 1e-9, atol=1e-8)
    with pytest.raises(AssertionError, match="not close"):
        af.testing.assert_close(af.tensor(x) * 1.05, x)
    with pytest.raises(AssertionError, match="shape"):
        af.testing.assert_close(af.tensor(x), x[:3])


# ---- the routes come from aneforge/_api.py's table ---------------------------------------------
ROUTES = _api.aten_routes()


@pytest.mark.parametrize("op,implementation,adapter", ROUTES, ids=[r[0] for r in ROUTES])
def test_each_route_is_an_aten_op_whose_arguments_its_function_takes(op, implementation, adapter):
    """A table row's ATen overload exists in torch, and the function it runs (the row's own, or
    the adapter the row names) accepts the overload's arguments as torch.export passes them:
    positional ones by position, keyword-only ones by name."""
    _, name, overload = op.split(".")
    schema = getattr(getattr(torch.ops.aten, name), overload)._schema
    fn = torch_import.routes()[op]
    assert (fn is None) == (adapter == "skip")
    if fn is not None:
        args = [a.name for a in schema.arguments if not a.kwarg_only]
        inspect.signature(fn).bind(*args, **{a.name: a for a in schema.arguments if a.kwarg_only})
