"""af.from_torch on torch's Core ATen opset: each routed core op, lowered by torch's own
`run_decompositions()` (from_torch(..., core_aten=True)), runs with torch's values and gradients;
the list of unrouted core ops is torch's, kept in aneforge/_api.py."""
import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import aneforge as af
from aneforge import _api, torch_import
from aneforge.docgen.torch_coverage import core_aten_ops

RNG = np.random.default_rng(0)


def floats(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, shape).astype(np.float16).astype(np.float32)


def ints(high, *shape):
    return RNG.integers(0, high, shape).astype(np.int64)


X = floats(2, 3, 4, 4)
M = floats(3, 4)
IMG = floats(1, 2, 6, 6)
IDX = np.array([[0, 2, 1, 0], [1, 1, 0, 2], [2, 0, 0, 1]])

# name -> (function of torch tensors, inputs); float inputs get gradients on both sides
CASES = {
    "arith": (lambda a, b: (a + b) * 2 - a / (b.abs() + 1) + 3.0 * a - 1.5, (M, M)),
    "unary": (lambda a: a.sin() + a.cos() + a.exp() + (a.abs() + 1).log() + a.tanh()
              + a.sigmoid() + a.expm1() + (a.abs() + 1).log1p() + (a.abs() + 1).rsqrt()
              + (a.abs() + 1).sqrt() + (a.abs() + 1).reciprocal() + a.neg() + a.erf(), (M,)),
    "unary2": (lambda a: (a / 3).asin() + (a / 3).acos() + a.atan() + (a / 3).atanh()
               + a.asinh() + (a.abs() + 1).acosh() + (a / 2).tan() + a.sinh() + a.cosh()
               + (a.abs() + 1).log2() + (a.abs() + 1).log10(), (M,)),
    "rounding": (lambda a: a * (a.floor() + a.ceil() + a.round() + a.trunc() + a.sign()), (M,)),
    "pow": (lambda a, b: (a.abs() + 1) ** b + a ** 2 + 2.0 ** a, (M, M)),
    "remainder_fmod": (lambda a: a * (torch.remainder(a, 1.5) + torch.fmod(a, 1.5)
                                      + torch.div(a, 0.7, rounding_mode="floor")), (M,)),
    "compare": (lambda a, b: torch.where((a > b) | (a <= 0.5) & ~(a == b) ^ (a != 1.0),
                                         a, b * (a >= b).float() + (a < 0).float()), (M, M)),
    "clamp": (lambda a, b: a.clamp(-1, 1) + a.clamp(min=b) + TF.hardtanh(a)
              + torch.maximum(a, b) + torch.minimum(a, b), (M, M)),
    "activations": (lambda a: TF.relu(a) + TF.gelu(a) + TF.leaky_relu(a, 0.1) + TF.elu(a)
                    + TF.selu(a) + TF.silu(a), (M,)),
    "reductions": (lambda a: a.sum(1, keepdim=True) * a.mean() + a.amax(0) - a.amin(1, True)
                   + a.var(1, keepdim=True) + a.var(0, correction=0) + a.prod(1, True)
                   + a.prod(), (M,)),
    "max_min_dim": (lambda a: a.max(1).values.unsqueeze(1) * a + a.min(0).values, (M,)),
    "arg_sort_topk": (lambda a: a.sort(1).values + a.topk(4, 1).values
                      + a.argmax(1, True).float() + a.argmin().float(), (M,)),
    "any": (lambda a: a * (a > 1).any(1, keepdim=True).float() + (a > 1).any().float(), (M,)),
    "cumsum": (lambda a: a.cumsum(1) + a.cumsum(0), (M,)),
    "softmax": (lambda a: a.softmax(1) + a.log_softmax(0), (M,)),
    "movement": (lambda a: a.permute(1, 0).reshape(2, 6).t().flip(0).expand(2, 6, 2)
                 .unsqueeze(0).squeeze(0).repeat(1, 1, 2)[:, 1:5:2].transpose(0, 1), (M,)),
    "select_split": (lambda a: torch.cat([a[1], a[:, 2], *a.split([1, 3], 1)[1].unbind(1)]),
                     (M,)),
    "diagonal": (lambda a: a.diagonal(0) + a.diagonal(1), (M,)),
    "gather_index": (lambda a, i: a.gather(1, i) + a.index_select(0, i[0, :3].clamp(0, 2))
                     .sum() + a[:, [-1, 0]].sum(), (M, IDX)),
    "scatter": (lambda a, i: a.scatter(1, i, 1.5) + a.scatter(1, i, a)
                + a.scatter_add(1, i, a) + a.scatter_reduce(1, i, a, "amax"), (M, IDX)),
    "slice_scatter": (lambda a, b: torch.slice_scatter(a, b[:, :2], 1, 1, 4, 2)
                      + torch.select_scatter(a, b[1], 0, 2), (M, M)),
    "creation": (lambda a: a + torch.arange(4) + torch.full((3, 4), 2.0) + torch.zeros_like(a)
                 + torch.ones(3, 4) + torch.empty(3, 4).fill_(0.5) + torch.tensor(1.5)
                 + torch.full_like(a, 0.25), (M,)),
    "copy_cast": (lambda a: a * a.to(torch.int64).to(torch.float32)
                  + torch.zeros(3, 4).copy_(a), (M,)),
    "matmuls": (lambda a, b: a @ b.t() + torch.addmm(a[:, :3], a, b.t()[:, :3]).sum()
                + torch.bmm(a[None], b.t()[None])[0], (M, M)),
    "logical": (lambda a, b: a * torch.logical_and(a > 0, b > 0).float()
                + torch.logical_or(a > 0, b > 0).float() + torch.logical_xor(a > 0, b > 0)
                .float() + torch.logical_not(a > 0).float() + a.isnan().float()
                + a.isinf().float(), (M, M)),
    "bitwise": (lambda i: (i & 3) + (i | 4) + (i ^ 1) + (~i), (IDX,)),
    "pad": (lambda x: TF.pad(x, (1, 2, 0, 1), value=0.5).sum() + TF.pad(x, (1, 1, 1, 1),
            "reflect") [..., 1:-1, 1:-1] + TF.pad(x, (2, 1, 1, 2), "replicate")[..., 1:-2, 2:-1],
            (IMG,)),
    "conv": (tnn.Conv2d(2, 3, 3, padding=1), (IMG,)),
    "conv1d": (tnn.Conv1d(3, 2, 2, stride=2), (floats(2, 3, 8),)),
    "conv_transpose": (tnn.ConvTranspose2d(2, 3, 2, stride=2), (IMG,)),
    "pools": (lambda x: TF.max_pool2d(x, 2) + TF.avg_pool2d(x, 2)
              + TF.adaptive_avg_pool2d(x, 3), (IMG,)),
    "avg_pool3d": (lambda x: TF.avg_pool3d(x, 2), (X,)),
    "upsample": (lambda x: TF.interpolate(x, scale_factor=2, mode="bilinear") +
                 TF.interpolate(x, scale_factor=2), (IMG,)),
    "layer_norm": (tnn.LayerNorm(4), (M,)),
    "group_norm": (tnn.GroupNorm(2, 2), (IMG,)),
    "batch_norm_eval": (tnn.BatchNorm2d(2).eval(), (IMG,)),
    "embedding": (tnn.Embedding(5, 3), (IDX,)),
}


class Fn(tnn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _leaf(x):
    """An aneforge input and its torch twin; floats get gradients."""
    grad = x.dtype == np.float32
    return af.tensor(x, requires_grad=grad), torch.tensor(x, requires_grad=grad)


class AllCases(tnn.Module):
    """Every case side by side in one module: one export and one decomposition (each of
    torch's is per op, so the ops are those of the cases exported one by one, in ~1/10 of
    the time)."""
    def __init__(self):
        super().__init__()
        self.nets = tnn.ModuleList(fn if isinstance(fn, tnn.Module) else Fn(fn)
                                   for fn, _ in CASES.values())
        self.arity = [len(inputs) for _, inputs in CASES.values()]

    def forward(self, *args):
        out, at = [], 0
        for net, n in zip(self.nets, self.arity):
            out.append(net(*args[at:at + n]))
            at += n
        return tuple(out)


@pytest.fixture(scope="module")
def all_cases():
    """Every case through one from_torch of `AllCases` (one export and one decomposition, not
    one per case: ~1 s of CPU each) and one backward of the sum of each case's fixed random
    projection: each case has its own inputs and parameters, so the gradients a case gets are
    those of its own projection alone (the sum's gradient is exactly 1 on each term).
    {name: (aneforge output, torch output, [(aneforge input, torch input)],
    [(aneforge parameter, torch parameter)])}."""
    torch.manual_seed(0)
    net = AllCases()
    inputs = [x for _, case in CASES.values() for x in case]
    model = af.from_torch(net, tuple(torch.tensor(x) for x in inputs), core_aten=True)
    pairs = [_leaf(x) for x in inputs]
    ys, tys = model(*[a for a, _ in pairs]), net(*[t for _, t in pairs])
    loss, tloss = 0, 0
    for y, ty in zip(ys, tys):
        if ty.is_floating_point():
            w = RNG.standard_normal(ty.shape).astype(np.float32)   # a fixed random projection
            loss, tloss = loss + (y * af.tensor(w)).sum(), tloss + (ty * torch.from_numpy(w)).sum()
    loss.backward()
    tloss.backward()
    params, tparams = dict(model.named_parameters()), dict(net.named_parameters())
    got, at = {}, 0
    for i, (name, (_, case)) in enumerate(CASES.items()):
        mine = [k for k in tparams if k.startswith(f"nets.{i}.")]
        got[name] = (ys[i], tys[i], pairs[at:at + len(case)],
                     [(params[k], tparams[k]) for k in mine])
        at += len(case)
    return got


@pytest.mark.parametrize("name", list(CASES))
def test_core_aten_routes_match_torch_forward_and_gradients(name, all_cases):
    y, ty, pairs, params = all_cases[name]
    af.testing.assert_close(y, ty.detach(), rtol=2 ** -5, atol=2 ** -8)
    if not ty.is_floating_point():
        return
    for a, t in pairs:
        if t.grad is not None:
            af.testing.assert_close(a.grad, t.grad, rtol=2 ** -5, atol=2 ** -8)
    for p, tp in params:
        af.testing.assert_close(p.grad, tp.grad, rtol=2 ** -5, atol=2 ** -8)


def test_the_cases_run_most_of_the_routed_core_ops():
    """The routed Core ATen ops the cases above lower to (torch's own decomposition)."""
    inputs = tuple(torch.tensor(x) for _, case in CASES.values() for x in case)
    ep = torch.export.export(AllCases(), inputs)
    seen = {str(n.target) for n in ep.run_decompositions().graph.nodes
            if n.op == "call_function"}
    routed = {op for op, *_ in _api.aten_routes()} & set(core_aten_ops())
    assert len(routed & seen) >= 0.75 * len(routed), sorted(routed - seen)


def test_every_core_aten_op_is_routed_or_listed_with_why():
    core = set(core_aten_ops())
    routed = set(torch_import.routes())
    listed = {op for op, _, _ in _api.core_aten_unrouted()}
    assert core - routed - listed == set(), "route these or list them in CORE_ATEN_UNROUTED"
    assert listed - core == set() and listed & routed == set(), "stale CORE_ATEN_UNROUTED rows"
    kinds = {kind for _, kind, _ in _api.core_aten_unrouted()}
    assert kinds <= set(_api.CORE_ATEN_KINDS)
    has = len(core) - sum(k != "todo" for _, k, _ in _api.core_aten_unrouted())
    assert len(core & routed) >= 0.95 * has


def test_an_unrouted_op_names_the_users_line():
    class Angle(tnn.Module):
        def forward(self, x):
            return torch.atan2(x, x + 1)            # no aneforge atan2
    with pytest.raises(af.AneforgeError, match=r"aten\.atan2\.default .*test_from_torch_core"
                                               r"\.py:\d+ in forward: return torch\.atan2"):
        af.from_torch(Angle(), (torch.ones(3),))
