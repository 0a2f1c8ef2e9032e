"""Checkpoints: af.save/af.load in torch's format (both directions), load_state_dict's checks,
and optimizer state that resumes training bit-equal."""
import io
import pickle
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn


def roundtrip(obj):
    buf = io.BytesIO()
    af.save(obj, buf)
    return af.load(io.BytesIO(buf.getvalue()))


def test_nested_objects_round_trip(tmp_path):
    obj = {"w": af.tensor([[1.5, -2.0]]), "ints": af.tensor([1, 2, 3]), "mask": af.tensor([True]),
           "meta": [1, 2 ** 40, -0.25, "name", None, False, (np.arange(2), "t")],
           "od": OrderedDict(b=np.float32(3.0), a=np.ones(2, np.float32))}
    path = tmp_path / "ckpt.pt"
    af.save(obj, path)
    back = af.load(str(path), map_location="cpu")
    assert back["w"].dtype == af.float16 and back["w"].tolist() == [[1.5, -2.0]]
    assert back["ints"].dtype == af.int32 and back["ints"].tolist() == [1, 2, 3]
    assert back["mask"].dtype == af.bool and back["mask"].tolist() == [True]
    assert back["meta"][:6] == [1, 2 ** 40, -0.25, "name", None, False]
    assert back["meta"][6][0].tolist() == [0, 1] and back["meta"][6][1] == "t"
    assert isinstance(back["od"], OrderedDict) and list(back["od"]) == ["b", "a"]


def test_torch_loads_an_aneforge_checkpoint(tmp_path):
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    path = tmp_path / "net.pt"
    af.save(net.state_dict(), path)
    sd = torch.load(path, weights_only=True)
    assert list(sd) == list(net.state_dict())
    twin = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    twin.load_state_dict(sd)                       # float16 values copy into float32 params
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float16)
    want = twin(torch.tensor(x.astype(np.float32))).detach().numpy()
    np.testing.assert_allclose(net(af.tensor(x)).numpy().astype(np.float32), want,
                               rtol=2 ** -7, atol=2 ** -8)


def test_aneforge_loads_a_torch_checkpoint(tmp_path):
    tm = torch.nn.Linear(3, 2)
    path = tmp_path / "t.pt"
    torch.save({"model": tm.state_dict(), "strided": torch.arange(6).reshape(2, 3).t(),
                "bf16": torch.tensor([1.5, -2.0], dtype=torch.bfloat16), "epoch": 4}, path)
    ck = af.load(path)
    am = nn.Linear(3, 2)
    am.load_state_dict(ck["model"])
    np.testing.assert_array_equal(am.weight.numpy(),
                                  tm.weight.detach().numpy().astype(np.float16))
    assert ck["strided"].tolist() == [[0, 3], [1, 4], [2, 5]]
    assert ck["bf16"].tolist() == [1.5, -2.0] and ck["epoch"] == 4


def test_load_refuses_code(tmp_path):
    path = tmp_path / "evil.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps(print))
    with pytest.raises(pickle.UnpicklingError, match="builtins.print.*refusing"):
        af.load(path)
    with pytest.raises(ValueError, match="not a checkpoint"):
        af.load(io.BytesIO(b"plain bytes"))
    buf = io.BytesIO()                 # any object saves (pickled whole, as torch.save does)
    af.save({"x": object(), "t": af.ones(2)}, buf)
    with pytest.raises(pickle.UnpicklingError, match="builtin__.object.*weights_only=False"):
        af.load(io.BytesIO(buf.getvalue()))
    loaded = af.load(io.BytesIO(buf.getvalue()), weights_only=False)
    assert type(loaded["x"]) is object and loaded["t"].tolist() == [1.0, 1.0]


def test_load_state_dict_checks_everything_first():
    m = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    bad = {k: np.ones(v.shape) for k, v in before.items()}
    bad["1.bias"] = np.ones(2)                   # the LAST key is wrong
    with pytest.raises(af.AneforgeError, match="1.bias.*shape \\(2,\\).*nothing was loaded"):
        m.load_state_dict(bad)
    with pytest.raises(af.AneforgeError, match="1.bias"):
        m.load_state_dict(bad, strict=False)     # shapes are checked whatever strict says
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])
    keys = m.load_state_dict({"0.weight": np.zeros((3, 2)), "extra": 1}, strict=False)
    assert keys == (["0.bias", "1.weight", "1.bias"], ["extra"])
    assert m[0].weight.tolist() == [[0.0, 0.0]] * 3


def test_buffers_follow_the_persistent_flag():
    m = nn.Linear(2, 2)
    m.register_buffer("scale", af.ones(2))
    m.register_buffer("cache", af.zeros(2), persistent=False)
    assert list(m.state_dict()) == ["weight", "bias", "scale"]
    assert [n for n, _ in m.named_buffers()] == ["scale", "cache"]
    back = nn.Linear(2, 2)
    back.register_buffer("scale", af.zeros(2))
    back.load_state_dict(roundtrip(m.state_dict()))
    assert back.scale.tolist() == [1.0, 1.0]


def test_torch_state_dict_loads_with_torch_buffers():
    tm = torch.nn.Sequential(torch.nn.Linear(2, 2))
    tm.register_buffer("steps", torch.tensor([3, 4]))
    am = nn.Sequential(nn.Linear(2, 2))
    am.register_buffer("steps", af.tensor([0, 0]))
    am.load_state_dict(tm.state_dict())
    assert am.steps.dtype == af.int32 and am.steps.tolist() == [3, 4]


OPTIMIZERS = {
    "sgd_momentum": lambda ps: af.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda ps: af.optim.Adam(ps, lr=0.01, weight_decay=0.01),
    "adamw": lambda ps: af.optim.AdamW(ps, lr=0.01),
    "adam_fp16": lambda ps: af.optim.Adam(ps, lr=0.01, master_weights="fp16"),
}
RNG = np.random.default_rng(0)
X = RNG.standard_normal((16, 4)).astype(np.float16)
Y = RNG.standard_normal((16, 1)).astype(np.float16)


def make(name):
    af.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    return model, OPTIMIZERS[name](list(model.parameters()))


def train(model, opt, steps):
    for _ in range(steps):
        loss = ((model(af.tensor(X)) - af.tensor(Y)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_resumed_training_is_bit_equal(name, tmp_path):
    model, opt = make(name)
    train(model, opt, 6)
    want = {k: v.numpy() for k, v in model.state_dict().items()}

    model, opt = make(name)
    train(model, opt, 3)
    af.save({"model": model.state_dict(), "optim": opt.state_dict()}, tmp_path / "c.pt")
    model, opt = make(name)                       # fresh: different weights, empty state
    ck = af.load(tmp_path / "c.pt")
    model.load_state_dict(ck["model"])
    opt.load_state_dict(ck["optim"])
    train(model, opt, 3)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), want[k], err_msg=k)


def test_optimizer_load_checks_first():
    model, opt = make("adam")
    train(model, opt, 1)
    sd = opt.state_dict()
    other = af.optim.Adam(list(nn.Linear(4, 8).parameters()), lr=0.5)
    with pytest.raises(ValueError, match="groups of \\[4\\] parameters.*\\[2\\]"):
        other.load_state_dict(sd)
    bad = {"state": {**sd["state"], 3: {**sd["state"][3], "exp_avg": np.zeros(5)}},
           "param_groups": sd["param_groups"]}
    fresh = af.optim.Adam(list(model.parameters()), lr=0.5)
    with pytest.raises(ValueError, match="state\\[3\\]\\['exp_avg'\\] has shape \\(5,\\)"):
        fresh.load_state_dict(bad)
    assert fresh.state == {} and fresh.param_groups[0]["lr"] == 0.5


def test_adam_loads_torch_optimizer_state():
    """torch's Adam state (exp_avg_sq, step) continues as torch would, to fp16 tolerance."""
    p0 = RNG.standard_normal(5).astype(np.float16)
    pt = torch.tensor(p0.astype(np.float32), requires_grad=True)
    ot = torch.optim.Adam([pt], lr=0.01)
    for _ in range(3):
        ot.zero_grad()
        (pt ** 2).sum().backward()
        ot.step()
    pa = nn.Parameter(pt.detach().numpy())
    oa = af.optim.Adam([pa], lr=0.5)
    oa.load_state_dict(ot.state_dict())
    assert oa.param_groups[0]["lr"] == 0.01 and oa._steps == 3
    for o, p in ((ot, pt), (oa, pa)):
        o.zero_grad()
        (p ** 2).sum().backward()
        o.step()
    np.testing.assert_allclose(pa.numpy().astype(np.float32), pt.detach().numpy(),
                               rtol=2 ** -9, atol=2 ** -10)


def test_scheduler_and_scaler_state_round_trip():
    w = nn.Parameter(af.ones(2))
    opt = af.optim.SGD([w], lr=1.0)
    sched = af.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(3):
        sched.step()
    scaler = af.amp.GradScaler(init_scale=512.0, growth_interval=7)
    ck = roundtrip({"sched": sched.state_dict(), "scaler": scaler.state_dict()})
    opt2 = af.optim.SGD([nn.Parameter(af.ones(2))], lr=1.0)
    sched2 = af.optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    sched2.load_state_dict(ck["sched"])
    sched.step()
    sched2.step()
    assert sched2.last_epoch == sched.last_epoch == 4 and sched2.get_last_lr() == [0.25]
    tscaler = torch.amp.GradScaler("cpu", init_scale=512.0, growth_interval=7)
    assert set(ck["scaler"]) == set(tscaler.state_dict())
    back = af.amp.GradScaler()
    back.load_state_dict(ck["scaler"])
    assert back.get_scale() == 512.0 and back.growth_interval == 7


def test_torch_reads_a_whole_training_checkpoint(tmp_path):
    """Optimizer state (ints, floats, bools, tuples, nested dicts) is within what torch's
    weights_only loader accepts."""
    model, opt = make("adamw")
    train(model, opt, 1)
    af.save({"model": model.state_dict(), "optim": opt.state_dict()}, tmp_path / "c.pt")
    ck = torch.load(tmp_path / "c.pt", weights_only=True)
    group = ck["optim"]["param_groups"][0]
    assert group["betas"] == (0.9, 0.999) and group["params"] == [0, 1, 2, 3]
    assert ck["optim"]["state"][0]["step"] == 1.0
    assert ck["optim"]["state"][0]["exp_avg"].dtype == torch.float16
