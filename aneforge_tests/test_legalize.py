"""Legalization: what aneforge's own lowering builds always fits the engine's limits.

Each case runs forward AND backward against torch (float64 on the same fp16 data), and each
shows the form it replaced breaking a limit: the flat (rows, K) a staged sum used to reshape
to, the Ho*Wo axis of an unbanded im2col matmul, the flattened tensor an argmax searched, the
int16 an int32 used to cross the program boundary as. Where the shape or value the user asked
for has no legal form, the error names it.
"""
import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F
from aneforge import dtypes
from aneforge.core import boundary
from aneforge.core.realization import recording
from aneforge.errors import DTypeError, LimitError
from aneforge.hardware import limits
from aneforge.ir import TensorType

FWD_RTOL, GRAD_RTOL = 2.0 ** -8, 2.0 ** -6


def f16(shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float16)


def close(got, want, rtol, what):
    """Max-abs error relative to the largest magnitude of torch's value."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs {want.shape}"
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    assert err <= rtol, f"{what}: relative max-abs error {err:.3g}"


def widest_axis(program) -> int:
    return max(max(v.shape, default=1) for op in program.main.block.operations
               for v in op.outputs)


def both(arrays, fn_af, fn_torch):
    """(aneforge value, torch value, aneforge grads, torch grads) of fn over fp16 inputs."""
    xs = [af.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    y, ty = fn_af(*xs), fn_torch(*ts)
    y.backward()
    ty.backward()
    return y.item(), ty.item(), [x.grad.numpy() for x in xs], [t.grad.numpy() for t in ts]


# ---- wide sums: staged without a flat axis ---------------------------------------------
def test_autoencoder_mse_loss_sums_128x784_in_stages():
    """F.mse_loss over 100352 elements: a mean staged as (1, 7, 14336) @ column, where the old
    route reshaped to (1, 100352), over the 65536 axis limit."""
    x, w1, w2 = f16((128, 784), 0), f16((32, 784), 1, 0.05), f16((784, 32), 2, 0.1)
    with pytest.raises(LimitError, match="100352"):
        af.tensor(x).tanh().reshape(1, 128 * 784)      # the old route's first op, on a computed value
    # scaled as fp16 training scales a loss: its gradients (~1e-5 each) would sit under fp16's
    # normal range, where the engine flushes (a fact of fp16, not of the sum's route); tanh, not
    # relu: a pre-activation within fp16 rounding of 0 would flip a row's gradient
    got, want, grads, tgrads = both(
        [x, w1, w2], lambda x, a, b: F.mse_loss(F.linear(F.linear(x, a).tanh(), b), x) * 1024,
        lambda x, a, b: torch.nn.functional.mse_loss(
            torch.nn.functional.linear(torch.nn.functional.linear(x, a).tanh(), b), x) * 1024)
    close(got, want, FWD_RTOL, "mse_loss")
    for g, t, name in zip(grads, tgrads, ("x", "w1", "w2")):
        close(g, t, GRAD_RTOL, f"grad {name}")


def test_cat_of_three_then_sum_backward():
    x = f16((45, 195, 9), 3)
    with pytest.raises(LimitError, match="236925"):
        af.cat([af.tensor(x).tanh()] * 3, 0).reshape(1, -1)  # the flat sum the old route built
    got, want, grads, tgrads = both(
        [x * np.float16(0.25)], lambda x: (af.cat([x] * 3, 0) * af.cat([x] * 3, 0)).sum(),
        lambda x: (torch.cat([x] * 3, 0) ** 2).sum())
    close(got, want, FWD_RTOL, "sum of cat")
    close(grads[0], tgrads[0], GRAD_RTOL, "grad of cat")


def test_conv2d_backward_sums_113216_outputs():
    x, w = f16((4, 6, 60, 63), 4), f16((8, 6, 3, 3), 5, 0.2)
    y = F.conv2d(af.tensor(x), af.tensor(w))
    assert y.numel() == 113216 > limits.MAX_AXIS
    got, want, grads, tgrads = both(
        [x, w], lambda x, w: F.conv2d(x, w).sum(),
        lambda x, w: torch.nn.functional.conv2d(x, w).sum())
    close(got, want, FWD_RTOL, "conv sum")
    close(grads[0], tgrads[0], GRAD_RTOL, "grad x")
    close(grads[1], tgrads[1], GRAD_RTOL, "grad w")


def test_staged_sums_never_build_an_axis_past_the_limit():
    x = af.tensor(f16((45 * 3, 195, 9), 6), requires_grad=True)
    loss = (x * x).mean()
    assert x.numel() > limits.MAX_AXIS
    assert widest_axis(af.program(loss)) <= limits.MAX_AXIS
    loss.backward()
    assert widest_axis(af.program(x.grad)) <= limits.MAX_AXIS


def test_wide_sums_respect_an_enforced_targets_cap():
    """M1 caps every axis but a rank-4 tensor's axis 1 at 16384 when enforced."""
    x = f16((128, 784), 7)
    with af.target("M1"):
        a = af.tensor(x, requires_grad=True)
        loss = (a * a).mean()
        assert widest_axis(af.program(loss)) <= 16384
        loss.backward()
        got, g = loss.item(), a.grad.numpy()
    t = torch.tensor(x.astype(np.float64), requires_grad=True)
    (t * t).mean().backward()
    close(got, (t * t).mean().item(), FWD_RTOL, "mean under M1")
    close(g, t.grad.numpy(), GRAD_RTOL, "grad under M1")


# ---- im2col in bands of output rows -------------------------------------------------------
def test_conv2d_with_more_output_pixels_than_an_axis_holds_runs_in_bands():
    x, w, b = f16((1, 2, 260, 262), 8), f16((3, 2, 3, 3), 9, 0.3), f16((3,), 10)
    with pytest.raises(LimitError, match="68120"):      # the unbanded matmul's Ho*Wo axis
        af.tensor(x).tanh().reshape(1, 2, 260 * 262)
    xs = [af.tensor(a, requires_grad=True) for a in (x, w)]
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w)]
    y = F.conv2d(xs[0], xs[1], af.tensor(b), padding=1)
    ty = torch.nn.functional.conv2d(ts[0], ts[1], torch.tensor(b.astype(np.float64)), padding=1)
    (y * y).mean().backward()
    (ty * ty).mean().backward()
    close(y.numpy(), ty.detach().numpy(), FWD_RTOL, "banded conv")
    for a, t, name in zip(xs, ts, ("x", "w")):
        close(a.grad.numpy(), t.grad.numpy(), GRAD_RTOL, f"banded conv grad {name}")


# ---- flat searches and products ------------------------------------------------------------
@pytest.mark.parametrize("shape", [(300, 400), (7, 90, 150), (3, 4, 100, 100)])
def test_argmax_argmin_over_everything_past_the_axis_limit(shape):
    x = f16(shape, 11)
    x.flat[[70001, 90000]] = 9.0              # ties: the first one wins, as torch's
    x.flat[[5000, 80000]] = -9.0
    a, t = af.tensor(x), torch.tensor(x.astype(np.float32))
    with pytest.raises(LimitError):
        a.tanh().reshape(-1)                  # the flattened tensor the old search read
    assert a.argmax().item() == t.argmax().item() == 70001
    assert a.argmin().item() == t.argmin().item() == 5000
    assert a.argmax(keepdim=True).shape == (1,) * len(shape)


def test_prod_over_everything_past_the_axis_limit():
    """Values whose every partial product is exact in fp16, so torch's answer is the bar."""
    rng = np.random.default_rng(12)
    x = rng.choice(np.array([1.0, -1.0], np.float16), (300, 400))
    x[[3, 7, 250], [1, 2, 399]] = [2.0, 0.5, 4.0]
    got, want, grads, tgrads = both([x], lambda x: x.prod(), lambda x: x.prod())
    assert got == want == 4.0 * np.prod(np.sign(x.astype(np.float64)))
    np.testing.assert_array_equal(grads[0], tgrads[0])


# ---- integers across the program boundary --------------------------------------------------
EXTREMES = np.array([0, 1, -1, 32767, 32768, -32768, -32769, 40000, 50256, 65535, 65536,
                     -65536, -65537, 2 ** 24 + 1, -(2 ** 24) - 1, 123456789, -987654321,
                     2 ** 31 - 65536, 2 ** 31 - 65537, 2 ** 31 - 1, -2 ** 31], np.int64)


def test_int32_values_outside_int16_cross_both_ways_exactly():
    """In through a program and out again; the old int16 transport wraps them."""
    assert not np.array_equal(EXTREMES.astype(np.int16), EXTREMES)
    x = af.tensor(EXTREMES)
    np.testing.assert_array_equal((x + 0).numpy(), EXTREMES)
    np.testing.assert_array_equal((x - 1).numpy() + 1, EXTREMES)
    rng = np.random.default_rng(13)
    many = rng.integers(-2 ** 31, 2 ** 31, (64, 500))
    np.testing.assert_array_equal((af.tensor(many) * 1).numpy(), many)
    assert (af.tensor(70000) + 1).item() == 70001            # a scalar crosses as (1,)


def test_int32_inputs_take_parts_when_their_data_need_them_outputs_always():
    t = TensorType((2, 3), dtypes.int32)
    assert boundary.transport_type(t) == TensorType((2, 2, 3), dtypes.uint16)
    assert boundary.transport_type(t, wide=False) == TensorType((2, 3), dtypes.int16)
    assert boundary.transport_type(TensorType((), dtypes.int32)).shape == (2, 1)
    for ids, form in (([[1, 40000, 50256]], (dtypes.uint16, (2, 1, 3))),
                      ([[1, 4, 30000]], (dtypes.int16, (1, 3)))):
        program = af.program(af.tensor(ids) + 0)
        assert [(v.dtype, v.shape) for v in program.main.inputs] == [form]
        assert program.main.outputs[0].dtype == dtypes.uint16      # the result may not fit
    af.clear_cache()
    small, big = np.array([[1, 4, 30000]]), np.array([[1, 40000, 50256]])
    for ids in (small, big, small, big):                # one program per form, each reused
        np.testing.assert_array_equal((af.tensor(ids) + 1).numpy(), ids + 1)
    assert af.cache_info().misses == 2


def test_int32_of_rank_five_doubles_axis_zero_or_names_the_shape():
    x = np.arange(2 * 3 * 2 * 2 * 2).reshape(2, 3, 2, 2, 2) + 40000
    assert boundary.transport_type(TensorType(x.shape, dtypes.int32)).shape == (4, 3, 2, 2, 2)
    np.testing.assert_array_equal((af.tensor(x) + 0).numpy(), x)
    with pytest.raises(DTypeError, match=r"shape \(40000, 1, 1, 1, 2\).*axis 0 of 80000"):
        boundary.transport_type(TensorType((40000, 1, 1, 1, 2), dtypes.int32))


def test_embedding_with_ids_past_32767_matches_torch():
    w = f16((50257, 16), 14, 0.5)
    ids = np.array([[1, 40000, 50256]])
    g = f16((1, 3, 16), 15)
    emb = nn.Embedding(50257, 16)
    emb.weight = nn.Parameter(af.tensor(w))
    y = emb(af.tensor(ids))
    (y * af.tensor(g)).sum().backward()
    tw = torch.tensor(w.astype(np.float64), requires_grad=True)
    ty = torch.nn.functional.embedding(torch.tensor(ids), tw)
    (ty * torch.tensor(g.astype(np.float64))).sum().backward()
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    close(emb.weight.grad.numpy(), tw.grad.numpy(), GRAD_RTOL, "embedding grad")


def test_argmax_over_a_50257_vocabulary_leaves_the_program_exactly():
    logits = f16((4, 50257), 16)
    logits[np.arange(4), [3, 32768, 40000, 50256]] = 20.0
    np.testing.assert_array_equal(af.tensor(logits).argmax(-1).numpy(), [3, 32768, 40000, 50256])


# ---- the tied-head LM over GPT-2's vocabulary -----------------------------------------------
V, D = 50257, 16


class TiedLM(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.emb.weight = nn.Parameter(af.tensor(w))
        self.head = nn.Linear(D, V, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(self.emb(ids))


def lm_batches(steps, seed=17):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        ids = rng.integers(0, V, (2, 9))
        ids[0, :3] = [40000, 50256, 32768]
        out.append(ids)
    return out


def test_tied_head_lm_over_50257_tokens_trains_one_compile_per_step():
    w = f16((V, D), 18, 0.02)
    model = TiedLM(w)
    opt = af.optim.AdamW(model.parameters(), lr=1e-2)
    batches = lm_batches(3)
    af.clear_cache()
    for step, ids in enumerate(batches):
        with recording() as runs:
            loss = F.cross_entropy(model(af.tensor(ids[:, :-1])).reshape(-1, V),
                                   af.tensor(ids[:, 1:]).reshape(-1))
            opt.zero_grad()
            loss.backward()
            grad = model.emb.weight.grad.numpy()
            opt.step()
            loss.item()
        assert len(runs) == 1, f"step {step} ran {len(runs)} programs"
        if step == 0:
            tw = torch.tensor(w.astype(np.float32), requires_grad=True)
            tids = torch.tensor(ids)
            tl = torch.nn.functional.cross_entropy((tw[tids[:, :-1]] @ tw.t()).reshape(-1, V),
                                                   tids[:, 1:].reshape(-1))
            tl.backward()
            close(loss.item(), tl.item(), FWD_RTOL, "LM loss")
            close(grad, tw.grad.numpy(), 5e-2, "tied embedding grad")
    assert af.cache_info().misses == 1
    assert not np.array_equal(model.emb.weight.numpy(), w)


def test_tied_head_lm_replays_under_compile_like_eager():
    w = f16((V, D), 19, 0.02)

    def run(compiled):
        model = TiedLM(w)
        opt = af.optim.AdamW(model.parameters(), lr=1e-2)

        def step(x, y):
            loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss
        fn = af.compile(step, fullgraph=True) if compiled else step
        losses = [fn(af.tensor(ids[:, :-1]), af.tensor(ids[:, 1:])).item()
                  for ids in lm_batches(3, seed=20)]
        return losses, model.emb.weight.numpy()

    eager, compiled = run(False), run(True)
    assert eager[0] == compiled[0]
    np.testing.assert_array_equal(eager[1], compiled[1])


def test_a_vocabulary_over_an_enforced_targets_cap_is_named():
    with af.target("M1"), pytest.raises(LimitError, match="axis 0 of size 50257.*16384"):
        nn.Embedding(V, D)


# ---- negative padding crops ----------------------------------------------------------------
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(-1, -1), (-1, 2), (2, -3), (1, -2, -1, 0), (-2, -1, 1, 1)])
def test_negative_pad_crops_as_torch(pad, mode):
    x = f16((2, 3, 5, 6)[2 - len(pad) // 2:], 21)     # torch's non-constant modes: (N, C) + padded
    g = f16(torch.nn.functional.pad(torch.zeros(x.shape), pad).shape, 22)
    kw = {"value": 0.5} if mode == "constant" else {}
    a = af.tensor(x, requires_grad=True)
    t = torch.tensor(x.astype(np.float64), requires_grad=True)
    y, ty = F.pad(a, pad, mode=mode, **kw), torch.nn.functional.pad(t, pad, mode=mode, **kw)
    (y * af.tensor(g)).sum().backward()
    (ty * torch.tensor(g.astype(np.float64))).sum().backward()
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    close(a.grad.numpy(), t.grad.numpy(), GRAD_RTOL, "pad grad")


def test_a_crop_to_nothing_is_empty_as_in_torch():
    """torch returns an empty tensor; so does aneforge (a host value: core/empty.py)."""
    assert torch.nn.functional.pad(torch.zeros(1, 3, 4), (-2, -2)).shape == (1, 3, 0)
    assert F.pad(af.zeros(1, 3, 4), (-2, -2)).shape == (1, 3, 0)
