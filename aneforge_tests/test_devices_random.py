"""torch's devices, generators and creation keywords: af.device, Tensor.device, device=,
Module.to / .cpu / .cuda / .half / .float, af.cuda, af.backends.mps, af.Generator and
generator= on every draw."""
import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn

CREATION = [
    lambda **k: af.tensor([1.0, 2.0], **k), lambda **k: af.zeros(2, 3, **k),
    lambda **k: af.ones(2, **k), lambda **k: af.full((2,), 3.0, **k),
    lambda **k: af.arange(4, **k), lambda **k: af.linspace(0, 1, 3, **k),
    lambda **k: af.eye(2, **k), lambda **k: af.rand(2, **k), lambda **k: af.randn(2, **k),
    lambda **k: af.randint(0, 5, (3,), **k), lambda **k: af.randperm(4, **k),
    lambda **k: af.empty(2, **k), lambda **k: af.zeros_like(af.ones(2), **k),
    lambda **k: af.ones_like(af.ones(2), **k), lambda **k: af.full_like(af.ones(2), 2.0, **k),
    lambda **k: af.rand_like(af.ones(2), **k), lambda **k: af.randn_like(af.ones(2), **k),
    lambda **k: af.randint_like(af.ones(2), 5, **k), lambda **k: af.empty_like(af.ones(2), **k),
]


def test_device_objects_as_torch():
    for spec in ["cpu", "cuda", "cuda:1", "mps", "meta"]:
        assert str(af.device(spec)) == str(torch.device(spec))
        assert repr(af.device(spec)) == repr(torch.device(spec))
        assert af.device(spec).type == torch.device(spec).type
        assert af.device(spec).index == torch.device(spec).index
    assert af.device("cuda", 2) == "cuda:2" and af.device("cuda:0") != "cuda:1"
    assert af.device("cpu") == "mps" == af.device("ane")          # the one device
    assert len({af.device("cpu"), af.device("mps"), af.device("ane")}) == 1
    with pytest.raises(ValueError, match="Expected one of"):
        af.device("gpu")


@pytest.mark.parametrize("make", CREATION)
def test_every_creation_op_takes_device(make):
    for d in ("cpu", "mps", "ane", af.device("cpu"), None):
        assert make(device=d).device == "cpu"
    with pytest.raises(af.DeviceError, match='Use "cpu", "mps" or "ane"'):
        make(device="cuda")


def test_cuda_is_a_clear_error_where_used():
    x = af.ones(2)
    assert x.to("cpu") is x and x.to(af.device("mps")) is x and x.to(x.device) is x
    for use in (lambda: x.to("cuda"), lambda: x.to("cuda:0", af.float32), lambda: x.cuda(),
                lambda: x.to(device="cuda"), lambda: nn.Linear(2, 2).to("cuda"),
                lambda: nn.Linear(2, 2).cuda()):
        with pytest.raises(RuntimeError, match="not available in aneforge"):
            use()
    assert af.cuda.is_available() is False and af.cuda.device_count() == 0
    assert af.backends.mps.is_available() and not af.backends.cudnn.is_available()
    assert af.backends()["sim"][0]
    af.backends.cudnn.benchmark = True          # torch scripts set these (nanoGPT); accepted
    af.backends.cuda.matmul.allow_tf32 = True
    af.backends.cudnn.allow_tf32 = True
    assert af.backends.cuda.matmul.allow_tf32 and not af.backends.cuda.is_available()


def test_tensor_to_signatures():
    x = af.tensor([1.5, 2.5])
    assert x.to("cpu", af.float32).dtype == af.float32
    assert x.to(af.int32).tolist() == [1, 2]
    assert x.to(af.ones(1, dtype=af.float32)).dtype == af.float32
    assert x.to(device="mps", dtype=af.float32).dtype == af.float32
    assert x.to(copy=True) is not x


def test_module_to_and_casts_return_self_and_cast_floats():
    m = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    assert m.to("cpu") is m and m.cpu() is m and m.to(torch_device := af.device("mps")) is m
    assert m.float() is m and all(p.dtype == af.float32 for p in m.parameters())
    assert m[1].num_batches_tracked.dtype == af.int32          # integer buffers keep theirs
    assert m.half() is m and all(p.dtype == af.float16 for p in m.parameters())
    assert m.type(af.float32) is m and m[0].weight.dtype == af.float32
    assert m.to("mps", af.float16)[0].weight.dtype == af.float16
    assert str(torch_device) == "mps"
    with pytest.raises(TypeError, match="floating point"):
        m.to(af.int32)
    # a model cast to fp32 still trains: forward, backward and an optimizer step
    m = nn.Linear(3, 1).float()
    opt = af.optim.SGD(m.parameters(), lr=0.1)
    before = m.weight.numpy().copy()
    m(af.ones(4, 3, dtype=af.float32)).sum().backward()
    opt.step()
    assert m.weight.dtype == af.float32 and not np.allclose(before, m.weight.numpy())


def test_requires_grad_needs_a_float_dtype_as_torch():
    with pytest.raises(RuntimeError, match="floating point"):
        af.zeros(2, dtype=af.int32, requires_grad=True)
    assert af.zeros_like(af.ones(2), requires_grad=True).requires_grad


def test_linspace_one_step_is_start():
    assert af.linspace(2.0, 5.0, 1).tolist() == torch.linspace(2.0, 5.0, 1).tolist()


DRAWS = {
    "rand": lambda g: af.rand(3, 4, generator=g),
    "randn": lambda g: af.randn(3, 4, generator=g),
    "randint": lambda g: af.randint(0, 10, (5,), generator=g),
    "randperm": lambda g: af.randperm(7, generator=g),
    "normal_": lambda g: af.zeros(6).normal_(2.0, 3.0, generator=g),
    "uniform_": lambda g: af.zeros(6).uniform_(-1.0, 1.0, generator=g),
    "bernoulli": lambda g: af.full((20,), 0.5).bernoulli(generator=g),
    "bernoulli_": lambda g: af.zeros(20).bernoulli_(0.3, generator=g),
    "multinomial": lambda g: af.multinomial(af.tensor([1.0, 2.0, 3.0, 4.0]), 3, generator=g),
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_generator_streams_repeat_and_differ(name):
    draw = DRAWS[name]
    g = af.Generator().manual_seed(5)
    a = draw(g).tolist()
    state = g.get_state()
    b = draw(g).tolist()
    g.set_state(state)
    assert draw(g).tolist() == b                       # get_state / set_state resume exactly
    assert draw(af.Generator().manual_seed(5)).tolist() == a
    af.manual_seed(5)
    assert draw(None).tolist() == a                    # the default generator, seeded the same
    assert af.initial_seed() == 5 and g.initial_seed() == 5


def test_generator_seed_and_type_checks():
    g = af.Generator()
    s = g.seed()
    assert g.initial_seed() == s and isinstance(s, int)
    assert af.Generator().manual_seed(-1).initial_seed() == 2 ** 64 - 1
    with pytest.raises(TypeError, match="af.Generator"):
        af.rand(2, generator=np.random.default_rng(0))


def test_draw_distributions():
    g = af.Generator().manual_seed(0)
    x = af.zeros(20000).normal_(1.0, 2.0, generator=g).numpy().astype(np.float64)
    assert abs(x.mean() - 1.0) < 0.05 and abs(x.std() - 2.0) < 0.05
    u = af.zeros(20000).uniform_(2.0, 4.0, generator=g).numpy()
    assert u.min() >= 2.0 and u.max() <= 4.0 and abs(u.mean() - 3.0) < 0.03
    b = af.tensor([0.0, 1.0, 0.25]).expand(4000, 3).bernoulli(generator=g).numpy()
    assert b[:, 0].sum() == 0 and b[:, 1].sum() == 4000 and abs(b[:, 2].mean() - 0.25) < 0.03
    assert sorted(af.randperm(50, generator=g).tolist()) == list(range(50))


def test_multinomial_as_torch():
    w = af.tensor([[0.0, 1.0, 0.0, 3.0], [2.0, 0.0, 2.0, 0.0]])
    s = w.multinomial(2, generator=af.Generator().manual_seed(0))
    assert s.shape == (2, 2) and s.dtype == af.int32
    assert sorted(s.tolist()[0]) == [1, 3] and sorted(s.tolist()[1]) == [0, 2]
    counts = np.bincount(w[0].multinomial(4000, replacement=True).numpy(), minlength=4)
    assert counts[0] == counts[2] == 0 and abs(counts[3] / 4000 - 0.75) < 0.03
    with pytest.raises(af.AneforgeError, match="replacement=True"):
        w.multinomial(3)
    with pytest.raises(af.AneforgeError, match=">= 0"):
        af.tensor([-1.0, 1.0]).multinomial(1)
    with pytest.raises(af.AneforgeError, match="sums to 0"):
        af.tensor([0.0, 0.0]).multinomial(1, replacement=True)
    # torch's shapes
    assert torch.multinomial(torch.tensor([[0.0, 1.0, 0.0, 3.0]] * 2), 2).shape == s.shape


def test_bernoulli_checks_probabilities():
    with pytest.raises(af.AneforgeError, match=r"\[0, 1\]"):
        af.tensor([1.5]).bernoulli()
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        af.zeros(2).bernoulli_(2.0)


def test_random_fill_of_a_parameter_needs_no_grad_as_torch():
    w = nn.Parameter(af.zeros(3))
    with pytest.raises(af.AneforgeError, match="no_grad"):
        w.normal_()
    with af.no_grad():
        w.uniform_(-1, 1)
    assert w.is_leaf and w.requires_grad and np.abs(w.numpy()).max() <= 1


def test_default_generator_is_what_manual_seed_seeds():
    assert af.manual_seed(9) is af.default_generator
    a = af.rand(3, generator=af.default_generator).tolist()
    af.manual_seed(9)
    assert af.rand(3).tolist() == a and af.default_generator.initial_seed() == 9
