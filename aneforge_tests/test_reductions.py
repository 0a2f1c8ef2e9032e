"""Torch-level reductions give torch's answers at long reduced lengths (aneforge.tensor.reduce).

The engine's reduce_sum keeps an fp16 running sum, so a long torch-level sum goes through the
matmul's wide accumulator instead. Each case runs forward AND backward against torch in float64
on the same fp16 inputs; the op-count tests pin which route each length takes, through the
default pass pipeline too; hand-written MIL reduce_sum stays narrow.
"""
import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn.functional as F
import aneforge.passes as P
from aneforge.tensor import reduce as reductions
from aneforge.tensor import record_op

FWD_RTOL = 2.0 ** -9     # four fp16 roundings of the result: the narrow sums miss by 1e-2..0.5
GRAD_RTOL = 2.0 ** -7    # elementwise gradients, measured against 1/8 of their largest entry


def f16(shape, seed=0, loc=0.0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale + loc).astype(np.float16)


def labels(n, classes, seed=1):
    return np.random.default_rng(seed).integers(0, classes, n)


def close(got, want, rtol, what, scale=None):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    scale = np.abs(want).max() / 8 if scale is None else scale
    err = np.abs(got - want)
    bound = rtol * np.maximum(np.abs(want), scale) + 2.0 ** -24
    assert (err <= bound).all(), f"{what}: worst error {err.max():.3g} (value {want.flat[err.argmax()]:.6g})"


# name: (input shape, aneforge fn, torch fn, extra args (numpy) shared by both)
CASES = {
    "var_all_15x25x35": ((15, 25, 35), lambda x: x.var(), lambda x: x.var()),
    "var_dim_4096": ((4, 4096), lambda x: x.var(-1), lambda x: x.var(-1)),
    "var_dims_correction0": ((8, 64, 32), lambda x: x.var((0, 2), correction=0),
                             lambda x: x.var((0, 2), correction=0)),
    "var_unbiased_false_keepdim": ((16, 512), lambda x: x.var(1, keepdim=True, unbiased=False),
                                   lambda x: x.var(1, keepdim=True, unbiased=False)),
    "std_all_15x25x35": ((15, 25, 35), lambda x: x.std(), lambda x: x.std()),
    "std_dim0_512": ((512, 6), lambda x: x.std(0), lambda x: x.std(0)),
    "mean_all_64x512": ((64, 512), lambda x: (x + 3).mean(), lambda x: (x + 3).mean()),
    "mean_middle_axis": ((4, 1000, 3), lambda x: x.mean(1), lambda x: x.mean(1)),
    "mean_staged_128x256": ((128, 256), lambda x: (x + 2).mean(), lambda x: (x + 2).mean()),
    "sum_4096_positive": ((4096,), lambda x: (x * x).sum(), lambda x: (x * x).sum()),
    "sum_dim_keepdim": ((8, 2048), lambda x: x.abs().sum(1, keepdim=True),
                        lambda x: x.abs().sum(1, keepdim=True)),
    "sum_staged_32768": ((64, 512), lambda x: x.abs().sum() / 64.0,
                         lambda x: x.abs().sum() / 64.0),
    "norm_4096": ((4096,), lambda x: x.norm(), lambda x: x.norm()),
    "norm_p1_dim": ((4, 2048), lambda x: x.norm(1, dim=1), lambda x: x.norm(1, dim=1)),
    "normalize_512": ((4, 512), lambda x: F.normalize(x, dim=1),
                      lambda x: torch.nn.functional.normalize(x, dim=1)),
    "logsumexp_4096": ((2, 4096), lambda x: x.logsumexp(1), lambda x: x.logsumexp(1)),
    "log_softmax_4096": ((2, 4096), lambda x: F.log_softmax(x, 1),
                         lambda x: torch.log_softmax(x, 1)),
    "mse_64x512": ((64, 512), lambda x: F.mse_loss(x, x * 0.5 + 0.25),
                   lambda x: torch.nn.functional.mse_loss(x, x * 0.5 + 0.25)),
    "l1_64x512": ((64, 512), lambda x: F.l1_loss(x, x * 0.5 + 0.25),
                  lambda x: torch.nn.functional.l1_loss(x, x * 0.5 + 0.25)),
    "smooth_l1_64x512": ((64, 512), lambda x: F.smooth_l1_loss(x * 2, x),
                         lambda x: torch.nn.functional.smooth_l1_loss(x * 2, x)),
    "bce_logits_64x512": ((64, 512), lambda x: F.binary_cross_entropy_with_logits(x, x * 0 + 0.3),
                          lambda x: torch.nn.functional.binary_cross_entropy_with_logits(
                              x, x * 0 + 0.3)),
    "layer_norm_512": ((8, 512), lambda x: F.layer_norm(x * 3 + 1, (512,)),
                       lambda x: torch.nn.functional.layer_norm(x * 3 + 1, (512,))),
    "layer_norm_4096": ((2, 4096), lambda x: F.layer_norm(x, (4096,)),
                        lambda x: torch.nn.functional.layer_norm(x, (4096,))),
    "group_norm_1024": ((2, 4, 32, 32), lambda x: F.group_norm(x, 2),
                        lambda x: torch.nn.functional.group_norm(x, 2)),
}


def _run(shape, af_fn, torch_fn, seed=0):
    x = f16(shape, seed)
    c = None
    xa = af.tensor(x, requires_grad=True)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    ya, yt = af_fn(xa), torch_fn(xt)
    c = f16(tuple(yt.shape), seed + 7) if yt.ndim else np.float16(1.0)
    (ya * af.tensor(c)).sum().backward() if yt.ndim else ya.backward()
    (yt * torch.tensor(c.astype(np.float64))).sum().backward()
    return ya.numpy(), yt.detach().numpy(), xa.grad.numpy(), xt.grad.numpy()


@pytest.mark.parametrize("name", CASES)
def test_long_reductions_match_torch(name):
    shape, af_fn, torch_fn = CASES[name]
    got, want, gx, gt = _run(shape, af_fn, torch_fn)
    close(got, want, FWD_RTOL if want.size == 1 or "norm" not in name else GRAD_RTOL, name)
    close(gx, gt, GRAD_RTOL, f"{name} gradient")


CE = {"ce_64x512_classes": (64, 512), "ce_512_tokens": (512, 100),
      "ce_4096_tokens": (4096, 65)}


@pytest.mark.parametrize("name", CE)
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_class_losses_match_torch(name, loss):
    n, classes = CE[name]
    logits, y = f16((n, classes)), labels(n, classes)
    xa = af.tensor(logits, requires_grad=True)
    xt = torch.tensor(logits.astype(np.float64), requires_grad=True)
    prep_a = (lambda v: F.log_softmax(v, 1)) if loss == "nll_loss" else (lambda v: v)
    prep_t = (lambda v: torch.log_softmax(v, 1)) if loss == "nll_loss" else (lambda v: v)
    la = getattr(F, loss)(prep_a(xa), af.tensor(y))
    lt = getattr(torch.nn.functional, loss)(prep_t(xt), torch.tensor(y))
    la.backward()
    lt.backward()
    close(la.item(), lt.item(), FWD_RTOL, f"{loss} {name}")
    close(xa.grad.numpy(), xt.grad.numpy(), GRAD_RTOL, f"{loss} {name} gradient")


def test_probability_target_cross_entropy_mean_over_32768_rows():
    """Row losses summing past 32752 (the matmul port's inf): the mean's 1/N column keeps it."""
    logits = f16((32768, 4), scale=3.0)
    target = np.full((32768, 4), 0.25, np.float16)
    got = F.cross_entropy(af.tensor(logits), af.tensor(target)).item()
    want = torch.nn.functional.cross_entropy(torch.tensor(logits.astype(np.float64)),
                                             torch.tensor(target.astype(np.float64))).item()
    close(got, want, FWD_RTOL, "cross_entropy over 32768 rows")


# ---- the narrow route really is wrong there (so the cases above can fail) -----------------
def _narrow_var(x):
    mu = record_op("reduce_mean", {"x": x}, {"axes": None, "keep_dims": True})
    c = x - mu
    return record_op("reduce_sum", {"x": c * c}, {"axes": None, "keep_dims": False}) / (x.numel() - 1.0)


def test_the_narrow_sum_misses_what_the_wide_route_gets():
    x = f16((15, 25, 35))
    want = x.astype(np.float64).var(ddof=1)
    assert abs(_narrow_var(af.tensor(x)).item() - want) > 0.2 * want
    assert abs(af.tensor(x).var().item() - want) < 2.0 ** -9 * want


def test_sums_up_to_fp16_max_and_means_of_large_values():
    assert af.full((4096,), 10.0).sum().item() == 40960.0            # past the port's 32752
    assert af.full((4096,), 20.0).sum().item() == float("inf")       # past 65504, as torch fp16
    assert af.full((5000,), 30000.0).mean().item() == 30000.0
    assert af.ones(4096).sum().item() == 4096.0
    assert af.ones(13125).mean().item() == 1.0
    assert af.ones(128, 256).sum().item() == 32768.0                 # staged, past the port


def test_a_prime_length_above_the_cap_stays_narrow():
    assert reductions._stages(16411) is None                         # 16411 is prime
    x = af.tensor(f16((16411,)))
    assert "matmul" not in counts(x.sum()) and "reduce_sum" in counts(x.sum())


# ---- which route each length takes -------------------------------------------------------
def counts(*values) -> dict:
    return af.program(*values).op_counts()


def optimized_counts(*values) -> dict:
    program = af.program(*values)
    P.run(program)
    return program.op_counts()


@pytest.mark.parametrize("make", [lambda x: x.sum(), lambda x: x.mean(1), lambda x: x.var(),
                                  lambda x: x.std(0), lambda x: F.layer_norm(x, (512,)),
                                  lambda x: F.mse_loss(x, x * 0.5)])
def test_long_reductions_take_the_matmul_route(make):
    x = af.tensor(f16((64, 512)), requires_grad=True)
    y = make(x)
    (gx,) = af.grad(y.sum() if y.ndim else y, x)
    for c in (counts(y, gx), optimized_counts(y, gx)):
        assert c.get("matmul", 0) + c.get("linear", 0) >= 1
        assert not {"reduce_sum", "reduce_mean", "layer_norm"} & set(c), c


@pytest.mark.parametrize("make", [lambda x: x.sum(-1), lambda x: x.mean(-1), lambda x: x.var(-1),
                                  lambda x: F.layer_norm(x, (16,))])
def test_short_reductions_stay_on_reduce_sum(make):
    c = counts(make(af.tensor(f16((4, 16)))))
    assert "matmul" not in c and c.get("reduce_sum", 0) + c.get("reduce_mean", 0) >= 1


def test_the_threshold_is_the_reduced_length():
    x = af.tensor(f16((4, 16, 2)))
    assert "matmul" not in counts(x.sum(1))                     # 16 terms: narrow
    assert counts(x.sum((1, 2)))["matmul"] == 1                 # 32 terms: wide
    assert reductions.is_wide(x, (1, 2)) and not reductions.is_wide(x, (1,))


def test_leading_axes_need_no_transpose_and_staging_splits_the_cap():
    assert "transpose" not in counts(af.tensor(f16((512, 8))).sum(0))
    c = counts(af.tensor(f16((128, 256))).mean())              # 32768 > the 16384 cap
    assert c["matmul"] == 2 and "reduce_sum" not in c and "reduce_mean" not in c


def test_integer_and_fp32_sums_keep_reduce_sum():
    assert "matmul" not in counts(af.ones(4096).int().sum())
    assert "matmul" not in counts(af.ones(4096).float().sum())
    assert af.ones(4096).float().sum().item() == 4096.0          # fp32 inside a program is wide


def test_hand_written_reduce_sum_stays_narrow():
    fn = af.load_mil('''program(1.3) {
      func main<ios18>(tensor<fp16, [1, 4096]> x) {
        tensor<int32, [1]> ax = const()[name = string("ax"), val = tensor<int32, [1]>([1])];
        bool kd = const()[name = string("kd"), val = bool(false)];
        tensor<fp16, [1]> s = reduce_sum(x = x, axes = ax, keep_dims = kd)[name = string("s")];
      } -> (s);
    }''')
    assert fn(np.ones((1, 4096))).tolist() == [2048.0]      # the fp16 running sum stalls
    assert _narrow_var(af.tensor(f16((4096,)))).item() != pytest.approx(
        f16((4096,)).astype(np.float64).var(ddof=1), rel=0.05)


@pytest.mark.parametrize("fn", ["var_mean", "std_mean"])
@pytest.mark.parametrize("args", [((), {}), ((1,), {"correction": 0}), ((1, False, True), {}),
                                  ((None,), {"keepdim": True}), ((False,), {})])
def test_var_mean_and_std_mean_match_torch(fn, args):
    pos, kw = args
    x = f16((16, 512))
    xa = af.tensor(x, requires_grad=True)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    (va, ma), (vt, mt) = getattr(af, fn)(xa, *pos, **kw), getattr(torch, fn)(xt, *pos, **kw)
    close(va.numpy(), vt.detach().numpy(), FWD_RTOL, fn)
    # a mean of signed data cancels: the M1 accumulator's 12-bit in-tile truncation errs at the
    # magnitude of the terms (mean |x|), not of the result (ane-guide datapath chapter)
    close(ma.numpy(), mt.detach().numpy(), FWD_RTOL, f"{fn} mean", scale=2.0 ** -4 * np.abs(x).mean())
    ca, cb = f16(tuple(vt.shape), 3), f16(tuple(mt.shape), 4)
    (va * af.tensor(ca) + ma * af.tensor(cb)).sum().backward()
    (vt * torch.tensor(ca.astype(np.float64)) + mt * torch.tensor(cb.astype(np.float64))).sum().backward()
    close(xa.grad.numpy(), xt.grad.numpy(), GRAD_RTOL, f"{fn} gradient")


def test_var_mean_rejects_both_unbiased_and_correction():
    with pytest.raises(af.AneforgeError, match="either unbiased or correction"):
        af.var_mean(af.ones(4), 0, True, correction=0)


@pytest.mark.parametrize("ord_", [2, 1, float("inf"), 3.0])
def test_linalg_vector_norm_matches_torch(ord_):
    x = f16((4, 4096))
    xa = af.tensor(x, requires_grad=True)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    ya, yt = af.linalg.vector_norm(xa, ord_, dim=1), torch.linalg.vector_norm(xt, ord_, dim=1)
    close(ya.numpy(), yt.detach().numpy(), FWD_RTOL, f"vector_norm ord={ord_}")
    ya.sum().backward()
    yt.sum().backward()
    close(xa.grad.numpy(), xt.grad.numpy(), GRAD_RTOL, f"vector_norm ord={ord_} gradient")
    with pytest.raises(ValueError, match="ord must be a number"):
        af.linalg.vector_norm(xa, "fro")
