"""What nanoGPT's train.py (github.com/karpathy/nanoGPT) reached, run as one process with the
import swapped: `from torch.distributed import init_process_group, destroy_process_group` and
DDP (a process group of one), `torch.bfloat16` named in a dict, `torch.cuda.is_bf16_supported()`,
`model = torch.compile(model)` with the backward outside it, and `losses['val'] <
best_val_loss` against 1e9. Each against torch."""
import warnings

import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.distributed as dist
import aneforge.nn as nn


@pytest.fixture
def group():
    dist.init_process_group("nccl", world_size=1, rank=0)
    yield
    dist.destroy_process_group()


# ---- torch.distributed: a world of one ---------------------------------------------------------
def test_distributed_before_init_raises_as_torch():
    assert dist.is_available() and not dist.is_initialized()
    for fn in (dist.get_rank, dist.get_world_size, dist.barrier):
        with pytest.raises(ValueError, match="Default process group has not been initialized"):
            fn()
    with pytest.raises(ValueError, match="init_process_group"):
        nn.parallel.DistributedDataParallel(nn.Linear(2, 1))


def test_distributed_group_of_one(group):
    assert dist.is_initialized() and af.distributed is dist
    assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "nccl")
    t = af.tensor([1.5, -2.0, 3.0])
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT):
        assert dist.all_reduce(t, op=op) is None
    assert dist.reduce(t, dst=0) is None and dist.broadcast(t, src=0) is None
    assert t.tolist() == [1.5, -2.0, 3.0]
    slots = [af.zeros(3)]
    work = dist.all_gather(slots, t, async_op=True)
    assert work.wait() and work.is_completed() and slots[0].tolist() == t.tolist()
    with pytest.raises(ValueError, match="one tensor per rank"):
        dist.all_gather([af.zeros(3), af.zeros(3)], t)
    with pytest.raises(ValueError, match="twice"):
        dist.init_process_group("gloo")
    assert dist.barrier() is None


def test_distributed_refuses_a_larger_world(monkeypatch):
    with pytest.raises(af.AneforgeError, match="world_size=4, rank=0.*one plain process"):
        dist.init_process_group("nccl", world_size=4, rank=0)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(af.AneforgeError, match="world_size=2, rank=1"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


def test_ddp_of_one_trains_as_the_module_and_as_torch(group):
    """DDP in the group of one: the module's outputs and gradients, torch's `module.` keys."""
    a = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float16)
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    net.load_state_dict({k: af.tensor(v.detach().numpy()) for k, v in tnet.state_dict().items()})
    ddp = nn.parallel.DistributedDataParallel(net, device_ids=[0])
    assert ddp.module is net and ddp.require_backward_grad_sync
    assert list(ddp.state_dict()) == ["module." + k for k in tnet.state_dict()]
    with ddp.no_sync():
        out = ddp(af.tensor(a))
    tout = tnet(torch.tensor(a.astype(np.float32)))
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), atol=3e-3)
    out.square().sum().backward(), tout.square().sum().backward()
    np.testing.assert_allclose(net[0].weight.grad.numpy(), tnet[0].weight.grad.numpy(),
                               atol=1e-2, rtol=1e-2)


# ---- bfloat16: a name only -------------------------------------------------------------------
def test_bfloat16_is_named_and_refused_as_a_dtype():
    ptdtype = {"float32": af.float32, "bfloat16": af.bfloat16, "float16": af.float16}["float16"]
    assert ptdtype is af.float16 and repr(af.bfloat16) == "aneforge.bfloat16"
    assert af.cuda.is_bf16_supported() is torch.cuda.is_bf16_supported() is False
    for make in (lambda: af.tensor([1.0], dtype=af.bfloat16), lambda: af.ones(2).to(af.bfloat16),
                 lambda: af.zeros(2, dtype="bfloat16"), lambda: af.ones(2).to(torch.bfloat16)):
        with pytest.raises(af.DTypeError, match="bfloat16 is not an ANE type.*use float16"):
            make()
    with pytest.warns(RuntimeWarning, match="no bfloat16; aneforge computes in float16"):
        with af.autocast(device_type="cpu", dtype=af.bfloat16):
            pass


# ---- compile(model) with the backward outside --------------------------------------------------
def _tiny(lib):
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(4, 16), lib.nn.GELU(), lib.nn.Linear(16, 3))


def test_compiled_module_backward_outside_matches_eager_and_torch():
    """`model = torch.compile(model)` with loss.backward() after it: every call gives the
    eager gradients (a replay would give values without a graph); one warning says why."""
    rng = np.random.default_rng(1)
    model, ref, tmodel = _tiny(af), _tiny(af), _tiny(torch)
    ref.load_state_dict(model.state_dict())
    tmodel.load_state_dict({k: torch.tensor(v.numpy().astype(np.float32))
                            for k, v in model.state_dict().items()})
    compiled = af.compile(model)
    with pytest.warns(RuntimeWarning, match="backward runs outside it.*whole training step"):
        compiled(af.ones(6, 4)).sum().backward()
    model.zero_grad()
    for _ in range(3):
        a = rng.standard_normal((6, 4)).astype(np.float16)
        with warnings.catch_warnings():
            warnings.simplefilter("error")          # warned once per signature, not per call
            out = compiled(af.tensor(a))
        assert out.requires_grad
        out.square().mean().backward()
        ref(af.tensor(a)).square().mean().backward()
        tmodel(torch.tensor(a.astype(np.float32))).square().mean().backward()
        for p, q, tp in zip(model.parameters(), ref.parameters(), tmodel.parameters()):
            np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())
            np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), atol=2e-3, rtol=1e-2)


def test_compiled_module_replays_in_eval_and_keys_on_train_mode():
    """Under no_grad the compiled module replays; model.train() / model.eval() are separate
    captures (dropout on and off), as torch.compile guards on `training`."""
    af.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 32), nn.Dropout(0.5), nn.Linear(32, 1))
    compiled, x = af.compile(model), af.ones(8, 4)
    with af.no_grad():
        model.eval()
        evals = [compiled(x).numpy() for _ in range(3)]
        plain = model(x).numpy()
        model.train()
        trains = [compiled(x).numpy() for _ in range(3)]
    for e in evals:
        np.testing.assert_array_equal(e, plain)
    assert len(compiled._replays) == 2
    assert not np.array_equal(trains[0], plain) and not np.array_equal(trains[1], trains[2])


# ---- comparisons with numbers past float16's range --------------------------------------------
@pytest.mark.parametrize("c", [1e9, -1e9, 70000.0, -65520.0, 10 ** 12])
def test_comparison_with_a_huge_number_is_torchs_without_a_warning(c):
    """`losses['val'] < best_val_loss` with best_val_loss = 1e9: torch rounds the number to
    inf against a float16 tensor; so does aneforge, and for every finite x the answer is the
    exact one, so no range warning."""
    vals = np.array([-np.inf, -65504, -1000, -1, 0, 1.5, 65504, np.inf], np.float16)
    x, tx = af.tensor(vals), torch.tensor(vals)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for op in ("lt", "le", "gt", "ge", "eq", "ne"):
            np.testing.assert_array_equal(getattr(x, op)(c).numpy(), getattr(tx, op)(c).numpy(),
                                          err_msg=op)
        assert bool(af.zeros(4).mean() < 1e9)


# ---- scaled_dot_product_attention with dropout (nanoGPT's training default, dropout 0.2) ------
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_sdpa_dropout_is_torchs_after_the_same_seed(causal):
    """torch's math route: softmax, dropout (its mask after the same seed), then @ V."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((2, 2, 8, 16)).astype(np.float16) for _ in range(3)]
    torch.manual_seed(3), af.manual_seed(3)
    ts = [torch.tensor(a.astype(np.float32), requires_grad=True) for a in arrays]
    xs = [af.tensor(a, requires_grad=True) for a in arrays]
    tout = torch.nn.functional.scaled_dot_product_attention(*ts, dropout_p=0.3, is_causal=causal)
    out = af.nn.functional.scaled_dot_product_attention(*xs, dropout_p=0.3, is_causal=causal)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), atol=5e-3)
    kept = af.nn.functional.scaled_dot_product_attention(*xs, is_causal=causal)
    assert not np.allclose(out.numpy(), kept.numpy(), atol=1e-2)      # something was dropped
    (out * out).sum().backward(), (tout * tout).sum().backward()
    for x, t in zip(xs, ts):
        scale = np.abs(t.grad.numpy()).max()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), atol=1e-2 * scale)
