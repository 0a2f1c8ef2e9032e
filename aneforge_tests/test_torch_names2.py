"""torch names a new-user trial of public torch programs reached (issue 23): Tensor.grad_fn,
Tensor.__format__, Tensor.new_*, torch.backends.cudnn / mps as modules, torch.nn.parallel, and
strided slice assignment of a computed value (the sinusoidal positional encoding). Each
against torch."""
import re

import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F


def _pair(shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float16)
    return af.tensor(a, requires_grad=True), torch.tensor(a.astype(np.float32), requires_grad=True)


def _walk(fn, depth=3):
    """grad_fn names reached along next_functions[0] (torch's tutorial walk)."""
    names = []
    while fn is not None and len(names) < depth:
        names.append(fn.name())
        fn = fn.next_functions[0][0] if fn.next_functions else None
    return names


# ---- grad_fn ---------------------------------------------------------------------------------
@pytest.mark.parametrize("build", [
    lambda lib, x, w: x * w,
    lambda lib, x, w: x + w,
    lambda lib, x, w: (x - w).exp(),
    lambda lib, x, w: (x * w).sum(),
    lambda lib, x, w: (x / w).relu().mean(),
    lambda lib, x, w: lib.sigmoid(x).tanh(),
], ids=["mul", "add", "exp", "sum", "mean", "tanh"])
def test_grad_fn_names_as_torch(build):
    x, tx = _pair((3, 4))
    w, tw = _pair((3, 4), 1)
    ours, theirs = build(af, x, w), build(torch, tx, tw)
    assert ours.grad_fn.name() == theirs.grad_fn.name()
    assert re.fullmatch(rf"<{theirs.grad_fn.name()} object at 0x[0-9a-f]+>", repr(ours.grad_fn))
    assert _walk(ours.grad_fn) == _walk(theirs.grad_fn)


def test_grad_fn_is_none_for_leaves_and_values_without_grad():
    x, tx = _pair((2,))
    assert x.grad_fn is None and tx.grad_fn is None
    assert (af.ones(2) * 2).grad_fn is None and (torch.ones(2) * 2).grad_fn is None
    with af.no_grad():
        assert (x * 2).grad_fn is None
    assert (x * 2).detach().grad_fn is None


def test_next_functions_pair_inputs_with_their_nodes():
    w = nn.Parameter(af.ones(3))
    tw = torch.nn.Parameter(torch.ones(3))
    y, ty = w * af.ones(3), tw * torch.ones(3)
    (acc, i), (none, j) = y.grad_fn.next_functions
    (tacc, _), (tnone, _) = ty.grad_fn.next_functions
    assert (i, j) == (0, 0) and none is None and tnone is None
    assert type(acc).__name__ == type(tacc).__name__ == "AccumulateGrad"
    assert acc.variable is w and tacc.variable is tw
    assert acc.next_functions == () == tacc.next_functions
    z = (y * 2).sum()
    assert z.grad_fn.next_functions[0][0].next_functions[0][0] == y.grad_fn   # one node


def test_accumulate_grad_of_a_plain_leaf_holds_its_gradient():
    x = af.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    variable = (x * 3).grad_fn.next_functions[0][0].variable
    assert variable.grad.tolist() == x.grad.tolist() == [2.0, 4.0]


def test_tutorial_network_walk_matches_torch():
    """pytorch/tutorials blitz/neural_networks_tutorial.py: loss.grad_fn, then
    next_functions[0][0] twice (MSELoss, Linear, ReLU in torch's graph)."""
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    net.load_state_dict({k: af.tensor(v.detach().numpy()) for k, v in tnet.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((1, 4)).astype(np.float32)
    loss = F.mse_loss(net(af.tensor(x)), af.zeros(1, 2))
    tloss = torch.nn.functional.mse_loss(tnet(torch.tensor(x)), torch.zeros(1, 2))
    for fn in (loss.grad_fn, loss.grad_fn.next_functions[0][0],
               loss.grad_fn.next_functions[0][0].next_functions[0][0]):
        assert re.fullmatch(r"<\w+ object at 0x[0-9a-f]+>", repr(fn))
    assert loss.item() == pytest.approx(tloss.item(), rel=2e-3)


# ---- __format__ --------------------------------------------------------------------------------
def test_format_as_torch():
    for spec in (".4f", "8.2e", "", ">10.3g"):
        assert f"{af.tensor(2.71875):{spec}}"[:6] == f"{torch.tensor(2.71875):{spec}}"[:6]
    assert f"{af.tensor(3)}" == f"{torch.tensor(3)}" == "3"       # 0-d: the value, even unspecified
    assert f"{af.tensor([1, 2])}" == str(af.tensor([1, 2]))        # others: str
    for lib in (af, torch):
        with pytest.raises(TypeError, match="unsupported format string"):
            f"{lib.tensor([1.0, 2.0]):.4f}"
        with pytest.raises(TypeError, match="unsupported format string"):
            f"{lib.tensor([1.0]):.4f}"            # torch formats 0-d tensors only


def test_format_of_a_loss_is_its_value():
    """karpathy's estimate_loss printout: f"train loss {losses['train']:.4f}"."""
    x, tx = _pair((8,))
    loss, tloss = (x * x).mean(), (tx * tx).mean()
    assert float(f"{loss:.4f}") == pytest.approx(float(f"{tloss:.4f}"), abs=2e-3)


# ---- new_* ---------------------------------------------------------------------------------------
NEW = [
    ("new_zeros", (2, 3), {}), ("new_zeros", ((2, 3),), {}), ("new_ones", (4,), {}),
    ("new_full", ((2, 2), 7), {}), ("new_full", ((3,), 1.5), {}),
    ("new_empty", ((2,),), {}), ("new_tensor", ([1, 2, 3],), {}),
    ("new_tensor", ([[0.5, 1.5]],), {}), ("new_zeros", (2,), {"dtype": "int32"}),
    ("new_ones", ((1, 2),), {"dtype": "float32", "requires_grad": True}),
    ("new_full", ((2,), 3), {"dtype": "bool"}),
]


@pytest.mark.parametrize("base", [[1.0, 2.0], [1, 2], [True]], ids=["float", "int", "bool"])
@pytest.mark.parametrize("name,args,kwargs", NEW)
def test_new_as_torch(base, name, args, kwargs):
    ours_kw = {k: getattr(af, v) if k == "dtype" else v for k, v in kwargs.items()}
    theirs_kw = {k: getattr(torch, v) if k == "dtype" else v for k, v in kwargs.items()}
    ours = getattr(af.tensor(base), name)(*args, **ours_kw, device="cpu")
    theirs = getattr(torch.tensor(base), name)(*args, **theirs_kw, device="cpu")
    assert ours.shape == tuple(theirs.shape) and ours.is_leaf and theirs.is_leaf
    assert str(ours.dtype).split(".")[-1] == {torch.float32: "float16", torch.int64: "int32"}.get(
        theirs.dtype, str(theirs.dtype).split(".")[-1]) or "dtype" in kwargs
    assert ours.requires_grad == theirs.requires_grad
    if name != "new_empty":
        np.testing.assert_allclose(ours.numpy().astype(np.float32),
                                   theirs.detach().numpy().astype(np.float32))


def test_new_leaf_takes_gradients():
    x = af.ones(3)
    w = x.new_full((3,), 2.0, requires_grad=True)
    (w * w).sum().backward()
    tw = torch.ones(3).new_full((3,), 2.0, requires_grad=True)
    (tw * tw).sum().backward()
    assert w.grad.tolist() == tw.grad.tolist()


def test_new_refuses_what_torch_refuses():
    with pytest.raises(af.DTypeError, match="floating point"):
        af.ones(2).new_zeros(2, dtype=af.int32, requires_grad=True)
    with pytest.raises(RuntimeError):
        torch.ones(2).new_zeros(2, dtype=torch.int32, requires_grad=True)
    with pytest.raises(af.DeviceError, match="cuda"):
        af.ones(2).new_ones(2, device="cuda")
    with pytest.raises(TypeError, match="size must be a tuple of ints"):
        af.ones(2).new_zeros(2.5)


# ---- torch.backends, torch.nn.parallel -----------------------------------------------------------
def test_backends_are_modules_at_torch_paths():
    import aneforge.backends.cudnn as cudnn
    import aneforge.backends.mps as mps
    import torch.backends.cudnn as tcudnn
    assert cudnn is af.backends.cudnn and mps is af.backends.mps
    for flag in ("benchmark", "deterministic", "enabled"):
        assert isinstance(getattr(cudnn, flag), bool) and hasattr(tcudnn, flag)
    assert cudnn.is_available() is False and mps.is_available() is True
    before = cudnn.benchmark, cudnn.deterministic
    try:
        cudnn.benchmark, cudnn.deterministic = True, True         # accepted and read back
        assert af.backends.cudnn.benchmark and af.backends.cudnn.deterministic
    finally:
        cudnn.benchmark, cudnn.deterministic = before
    assert af.backends()["sim"][0] and "sim" in repr(af.backends)


def _nets():
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    net = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    net.load_state_dict({k: af.tensor(v.detach().numpy()) for k, v in tnet.state_dict().items()})
    return net, tnet


def test_data_parallel_runs_the_module_as_torch():
    net, tnet = _nets()
    x, tx = _pair((5, 3))
    out = af.nn.parallel.data_parallel(net, x, range(2))
    tout = tnet(tx)           # torch's own raises without a GPU; on one device it is module(x)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), atol=3e-3)
    out.sum().backward(), tout.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=3e-3)
    np.testing.assert_allclose(net[0].weight.grad.numpy(), tnet[0].weight.grad.numpy(), atol=3e-3)


def test_data_parallel_module_wraps_as_torch():
    net, tnet = _nets()
    dp, tdp = nn.DataParallel(net), torch.nn.DataParallel(tnet)
    assert dp.module is net and list(dp.state_dict()) == list(tdp.state_dict())
    assert dp.device_ids == tdp.device_ids == []
    x, tx = _pair((2, 3))
    np.testing.assert_allclose(dp(x).numpy(), tdp(tx).detach().numpy(), atol=3e-3)
    assert af.nn.parallel.DataParallel is nn.DataParallel


def test_distributed_data_parallel_needs_the_process_group_of_one():
    """(the group of one itself: test_train_script_names.py)"""
    with pytest.raises(ValueError, match="has not been initialized.*world_size=1, rank=0"):
        af.nn.parallel.DistributedDataParallel(nn.ReLU())


# ---- strided slice assignment ------------------------------------------------------------------
STEPPED = [
    ((7, 5), (slice(1, None, 3), slice(None, None, 2))),
    ((6, 8), (slice(None), slice(0, None, 2))),
    ((6, 8), (slice(None), slice(1, None, 2))),
    ((5, 9), (Ellipsis, slice(2, 8, 3))),              # 9 by 3, from 2: the last run is cut
    ((4, 7), (2, slice(None, None, 4))),               # 7 is no multiple of 4: padded, then cut
    ((3, 4, 10), (slice(None), slice(0, 4, 2), slice(1, 10, 5))),
    ((2, 2, 2, 4, 6), (0, slice(None), 1, slice(None, None, 2), slice(None, None, 3))),  # rank 5+2
]


@pytest.mark.parametrize("shape,index", STEPPED, ids=[str(i) for i in range(len(STEPPED))])
def test_stepped_slice_assignment_forward_and_backward_as_torch(shape, index):
    x, tx = _pair(shape)
    picked_shape = tuple(torch.zeros(shape)[index].shape)
    v, tv = _pair(picked_shape, 1)
    y, ty = x * 1, tx * 1                      # a computed base, as `pe = zeros(...)` then writes
    y[index] = v.sin()
    ty[index] = tv.sin()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), atol=2e-3)
    g = np.random.default_rng(2).standard_normal(shape).astype(np.float16)
    (y * af.tensor(g)).sum().backward()
    (ty * torch.tensor(g.astype(np.float32))).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), atol=2e-3)
    np.testing.assert_allclose(v.grad.numpy(), tv.grad.numpy(), atol=4e-3)


def test_positional_encoding_as_torch():
    """torch's word_language_model / transformer tutorial PositionalEncoding, max_len 5000:
    each half of the columns written with a step-2 slice (a gather of 160000 elements before)."""
    import math
    position = af.arange(0, 5000, dtype=af.float32).unsqueeze(1)
    div_term = af.exp(af.arange(0, 64, 2).float() * (-math.log(10000.0) / 64))
    sin, cos = af.sin(position * div_term), af.cos(position * div_term)
    pe = af.zeros(5000, 64)
    pe[:, 0::2] = sin
    pe[:, 1::2] = cos
    tpe = torch.zeros(5000, 64)            # the same values written by torch
    tpe[:, 0::2] = torch.tensor(sin.numpy().astype(np.float32))
    tpe[:, 1::2] = torch.tensor(cos.numpy().astype(np.float32))
    np.testing.assert_array_equal(pe.numpy(), tpe.numpy())


def test_stepped_slice_assignment_of_integers():
    x, tx = af.zeros(6, 4, dtype=af.int32), torch.zeros(6, 4, dtype=torch.int32)
    x[::2] = af.arange(8).reshape(2, 4)[:1] + 7
    tx[::2] = torch.arange(8, dtype=torch.int32).reshape(2, 4)[:1] + 7
    assert x.dtype == af.int32 and x.tolist() == tx.tolist()


def test_what_still_gathers_past_the_axis_limit_says_why_and_what_to_do():
    x = af.zeros(300, 300)
    mask = np.zeros((300, 300), bool)
    mask[::2] = True
    with pytest.raises(af.LimitError, match=r"a boolean mask places the value by a gather over "
                                            r"x's 90000 elements .* past the ANE's 65536.*in parts"):
        x[af.tensor(mask)] = af.ones(45000) * 2
    y = af.where(af.tensor(mask), af.ones(300, 300) * 2, x)           # what it says to do
    np.testing.assert_array_equal(y.numpy(), mask * 2.0)
    # or in parts (each part's placement is a one-hot over its positions and values, so its
    # cost grows with the square of the part: 10 parts of 30 rows, not 2 of 150, ~5x cheaper)
    for i in range(0, 300, 30):
        part = x[i:i + 30]
        part[af.tensor(mask[i:i + 30])] = af.ones(4500) * 2
        x[i:i + 30] = part
    np.testing.assert_array_equal(x.numpy(), mask * 2.0)

