"""fp16 training matches fp32 torch with unmodified torch code: automatic gradient scaling.

Models of each family (a nanoGPT-style LM, a BatchNorm CNN, an MLP; torch_style_models.py) run
the same training code in both libraries from the same weights, under M1's numerics (matmul
outputs below 2**-14 flush) and M4's (kept). Each numeric claim is also shown to fail with the
scaling switched off.
"""
from __future__ import annotations

import warnings
import weakref

import numpy as np
import pytest
import torch

import aneforge as af
from aneforge.core.autoscale import AutoScaler
from torch_style_models import MODELS

TARGETS = ("M1", "M4")


def _pair(name):
    torch.manual_seed(0)
    tm, data = MODELS[name](torch)
    am, _ = MODELS[name](af)
    am.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return tm, am, data


def _t(x):
    return torch.from_numpy(x)


def _a(x):
    return af.tensor(x.astype(np.int32) if x.dtype == np.int64 else x)


def _grad_errors(name) -> dict:
    """Per parameter: max|af .grad - torch .grad| / max|torch .grad| after one backward."""
    tm, am, data = _pair(name)
    x, y = data(np.random.default_rng(1))
    tm(_t(x), _t(y)).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        am(_a(x), _a(y)).backward()
    want = dict(tm.named_parameters())
    return {n: float(np.abs(p.grad.numpy().astype(np.float32) - want[n].grad.numpy()).max()
                     / np.abs(want[n].grad.numpy()).max()) for n, p in am.named_parameters()}


def _losses(name, update: str, lr: float, steps: int = 30):
    """Final losses of `steps` steps of the same training code in torch and in aneforge."""
    tm, am, data = _pair(name)
    rng = np.random.default_rng(1)
    batches = [data(rng) for _ in range(steps)]
    out = []
    for lib, m, conv in ((torch, tm, _t), (af, am, _a)):
        opt = lib.optim.AdamW(m.parameters(), lr=lr) if update == "adamw" else None
        for x, y in batches:
            if opt is not None:
                opt.zero_grad()
            else:
                for p in m.parameters():
                    p.grad = None
            loss = m(conv(x), conv(y))
            loss.backward()
            if opt is not None:
                opt.step()
            elif update == "data":
                for p in m.parameters():
                    p.data += -lr * p.grad
            else:
                with lib.no_grad():
                    for p in m.parameters():
                        p -= lr * p.grad
        out.append(float(loss.item()))
    return out


# The one gradient that misses 5e-2, and not by underflow nor by the backward's arithmetic: the
# fp16 forward puts 3 of bn2's 32768 outputs on the other side of a kink (a relu input torch has
# at +0.0012, a 2x2 max-pool window whose top two differ by 3.5e-4), so the cotangent reaching
# bn2 sends those 3 elements' gradient (0.5-1.4e-3 each) elsewhere. Behind BatchNorm conv2's
# weight gradient is small (its terms cancel), so that is 5.8% of it under M4 (2.7% under M1,
# which flips other elements). Fed torch's cotangent at bn2 instead, the same fp16 backward is
# within 0.2% (test below); torch's own float16 model misses by 5.4% on this batch.
ENGINE_LIMITED = {("cnn", "M4", "conv2.weight"): 7e-2}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", ["gpt", "cnn", "mlp"])
def test_every_gradient_at_step_0_is_torchs(name, target):
    with af.target(target):
        errors = _grad_errors(name)
    over = {k: round(v, 3) for k, v in errors.items()
            if v > ENGINE_LIMITED.get((name, target, k), 5e-2)}
    assert not over, over


def _cnn_to_bn2(lib, m, x, y):
    """The cnn model's forward, keeping bn2's output: (bn2 output, loss)."""
    F = lib.nn.functional
    b2 = m.bn2(m.conv2(F.max_pool2d(m.bn1(F.relu(m.conv1(x))), 2)))
    return b2, F.cross_entropy(m.fc(lib.flatten(F.max_pool2d(F.relu(b2), 2), 1)), y)


@pytest.mark.parametrize("target", TARGETS)
def test_behind_batchnorm_the_miss_is_the_forwards_routing(target):
    """conv2.weight's miss (ENGINE_LIMITED) is where the fp16 forward routes the cotangent,
    not the backward's fp16 arithmetic: aneforge's cotangent at bn2's output is torch's (0.2%)
    but at the few elements a relu / max-pool kink sends elsewhere; fed torch's cotangent there,
    aneforge's BatchNorm backward and conv weight gradient (2048 cancelling terms) are torch's."""
    tm, am, data = _pair("cnn")
    x, y = data(np.random.default_rng(1))
    tb2, tloss = _cnn_to_bn2(torch, tm, _t(x), _t(y))
    tg, twant = torch.autograd.grad(tloss, [tb2, tm.conv2.weight])
    tg, twant = tg.numpy(), twant.numpy()
    with af.target(target), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ab2, aloss = _cnn_to_bn2(af, am, _a(x), _a(y))
        g, w = (r.numpy().astype(np.float32) / 1024 for r in          # at backward's S = 1024
                af.grad(aloss * 1024.0, [ab2, am.conv2.weight], retain_graph=True))
        (fed,) = af.grad(ab2, am.conv2.weight, grad_outputs=af.tensor(tg * 1024))
    rerouted = (g != 0) != (tg != 0)
    assert 0 < rerouted.sum() <= 6
    assert np.abs(g - tg)[~rerouted].max() <= 2e-3 * np.abs(tg).max()
    assert np.abs(w - twant).max() > 2e-2 * np.abs(twant).max()      # what the reroute costs
    fed = fed.numpy().astype(np.float32) / 1024
    assert np.abs(fed - twant).max() <= 5e-3 * np.abs(twant).max()


@pytest.mark.parametrize("name", ["gpt", "cnn"])
def test_without_the_scaling_m1_gradients_underflow(name):
    af.amp.set_auto_scale(False)
    with af.target("M1"):
        errors = _grad_errors(name)
    assert sum(v > 5e-2 for v in errors.values()) >= 3, errors


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name, lr", [("gpt", 3e-3), ("cnn", 1e-3)])
def test_thirty_adamw_steps_end_where_torchs_do(name, lr, target):
    with af.target(target):
        want, got = _losses(name, "adamw", lr)
    assert abs(got - want) <= 0.01 * want, (got, want)


def test_without_the_scaling_the_lm_trains_off_torch():
    af.amp.set_auto_scale(False)
    with af.target("M1"):
        want, got = _losses("gpt", "adamw", 3e-3)
    assert abs(got - want) > 0.03 * want, (got, want)


@pytest.mark.parametrize("update", ["data", "no_grad"])
def test_hand_written_updates_follow_torch(update):
    """`p.data += -lr * p.grad` and `with no_grad(): p -= lr * p.grad` (in place, as torch)."""
    with af.target("M1"):
        want, got = _losses("gpt", update, 0.1, steps=12)
    assert abs(got - want) <= 0.01 * want, (got, want)


@pytest.mark.parametrize("update", ["data", "no_grad", "sub_"])
def test_hand_written_steps_below_half_an_fp16_spacing_add_up(update):
    """A step of 2e-4 on a weight of 1 is under half fp16's spacing there (4.9e-4 below 1):
    plain fp16 keeps 1.0 forever; the remainder makes two of them move the weight, and a
    hundred land where float32 does (torch's polynomial tutorial trains at lr 1e-6 this way)."""
    w = af.nn.Parameter(af.tensor([1.0, 0.5, -0.25]))
    step = af.tensor([2e-4, 2e-4, -2e-4])
    values = []
    for _ in range(100):
        if update == "data":
            w.data += -step
        else:
            with af.no_grad():
                if update == "sub_":
                    w.sub_(step)
                else:
                    w -= step
        values.append(w.numpy().copy())
    assert values[0][0] == 1.0 and values[1][0] == np.float16(1 - 2 ** -11)
    want = np.float32([1.0, 0.5, -0.25]) - 100 * step.numpy().astype(np.float32)
    np.testing.assert_allclose(values[-1], want, atol=2 ** -12)


def test_a_remainder_is_dropped_when_the_parameter_is_set_otherwise():
    w = af.nn.Parameter(af.tensor([1.0]))
    with af.no_grad():
        w -= 2e-4                                  # 1.0 kept, -2e-4 remembered
        w.copy_(af.tensor([1.0]))                  # a new value: nothing to remember
        w -= 2e-4
    assert w.tolist() == [1.0]                     # 0.99951 if the stale remainder joined


def test_a_replayed_hand_written_update_matches_the_eager_loop():
    def run(compiled: bool):
        w = af.nn.Parameter(af.tensor([1.0, 0.5]))
        params = [w]

        def step(x):
            loss = (w * af.tensor(x)).sum()
            loss.backward()
            with af.no_grad():
                for p in params:
                    p -= 1e-4 * p.grad
                    p.grad = None
            return loss
        step = af.compile(step) if compiled else step
        for k in range(12):
            step(np.float32([2.0, 3.0]))
        return w.tolist()
    eager = run(False)
    assert eager != [1.0, 0.5] and eager == run(True)


def test_augmented_assignment_is_in_place():
    w = af.nn.Parameter(af.tensor([1.0, 2.0]))
    alias = w
    with af.no_grad():
        w -= 0.5
        w *= 2.0
    assert alias is w and w.tolist() == [1.0, 3.0] and w.is_leaf and w.requires_grad
    with pytest.raises(af.AneforgeError, match="no_grad"):
        w += 1.0                                   # a leaf that requires grad, grad mode on


# ---- the scale itself: overflow, growth, visibility --------------------------------------------
def test_an_overflowing_pass_runs_again_unscaled():
    """Gradients past fp16 / 1024 overflow at the default scale: the program runs again at
    scale 1 (same program, one more call), .grad is torch's, and the scale drops."""
    w = af.nn.Parameter(af.tensor([0.5, -2.0, 3.0]))
    opt = af.optim.SGD([w], lr=1e-4)
    ((w * 30.0) * (w * 30.0)).sum().backward()             # d/dw = 1800 w: 5400 * 1024 > 65504
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # no overflow warning: rescued
        g = w.grad.numpy()
    np.testing.assert_allclose(g, 1800 * np.array([0.5, -2.0, 3.0]), rtol=2e-3)
    scaler = af.amp.auto_scaler()
    assert scaler.rescued_passes == 1 and scaler.scale < 1024
    opt.step()
    assert np.isfinite(w.numpy()).all()


def test_a_pass_past_the_port_at_scale_1_runs_scaled_down():
    """A sum-reduced loss over many samples (torch's polynomial tutorial: MSELoss(reduction=
    'sum') over 2000 points): gradients between the matmul port's 2**15 and fp16's 65504
    overflow even unscaled; the rescue goes on below S = 1 and .grad is torch's."""
    x = np.linspace(-3, 3, 2000, dtype=np.float32)
    w0 = np.float32([[0.2, -0.1, 0.1]])
    tw = torch.tensor(w0, requires_grad=True)
    xx = torch.from_numpy(x).unsqueeze(-1).pow(torch.tensor([1, 2, 3]))
    ((xx @ tw.T).squeeze(1) - torch.from_numpy(np.sin(x))).pow(2).sum().backward()
    w = af.nn.Parameter(af.tensor(w0))
    axx = af.tensor(x).unsqueeze(-1).pow(af.tensor([1, 2, 3]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # rescued: nothing to warn about
        ((axx @ w.T).squeeze(1) - af.tensor(np.sin(x))).pow(2).sum().backward()
        g = w.grad.numpy().astype(np.float32)
    want = tw.grad.numpy()
    assert 32768 < np.abs(want).max() < 65504
    np.testing.assert_allclose(g, want, rtol=5e-3)
    assert af.amp.auto_scaler().scale < 1


def test_a_saturation_a_later_matmul_hides_is_rescued():
    """At S = 1024 a position embedding's gradient (a sum over a batch of 64) passes the matmul
    port's 2**15 and saturates; the embedding's one-hot matmul then reads 0 * inf as 0, so the
    gradient came back all zeros with finite peaks. The port's hazard makes the pass run a rung
    lower, where nothing saturates."""
    w0 = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    tw = torch.nn.Embedding(4, 8)
    with torch.no_grad():
        tw.weight.copy_(torch.from_numpy(w0))
    ((torch.ones(64, 4, 8) * 0.5 + tw(torch.arange(4).unsqueeze(0))) * 1.5).sum().backward()
    aw = af.nn.Embedding(4, 8)
    aw.load_state_dict({"weight": w0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")                    # rescued: no hazard left to report
        ((af.ones(64, 4, 8) * 0.5 + aw(af.arange(4).unsqueeze(0))) * 1.5).sum().backward()
        g = aw.weight.grad.numpy()
    np.testing.assert_array_equal(g, tw.weight.grad.numpy())


def test_a_gradient_past_fp16_is_named_and_saturates():
    """120000 does not fit fp16: .grad reads 65504 (inf would write inf into the weight, and a
    hand-written update would never recover), with a warning naming the parameter."""
    w = af.nn.Parameter(af.tensor([300.0, 1.0]))
    with pytest.warns(af.ANEHazardWarning, match="past fp16's range.*holds \\+-65504.*"
                                                 "reduction='mean'") as seen:
        (w * w * 200.0).sum().backward()                    # d/dw[0] = 400 * 300 = 120000
        g = w.grad.numpy()
    assert seen[0].filename == __file__
    assert g[0] == 65504 and g[1] == 400.0                # the in-range gradient is exact
    with af.no_grad():
        w -= 1e-3 * w.grad
    assert np.isfinite(w.numpy()).all()


def test_a_gradient_inf_at_scale_1_stays_inf_as_in_torch():
    x = af.tensor([0.0, 4.0], requires_grad=True)
    with pytest.warns(RuntimeWarning, match="inf or NaN"):
        x.sqrt().sum().backward()
        g = x.grad.numpy()
    tx = torch.tensor([0.0, 4.0], requires_grad=True)
    tx.sqrt().sum().backward()
    assert g[0] == tx.grad[0] == float("inf") and g[1] == 0.25


def test_the_scale_grows_only_while_gradients_leave_headroom():
    af.amp.set_auto_scale(True, init_scale=256.0, growth_interval=2)
    w = af.nn.Parameter(af.tensor([1e-3, 2e-3]))
    for _ in range(4):
        w.grad = None
        (w * w).sum().backward()
        w.grad.numpy()
    assert af.amp.auto_scaler().scale > 256.0
    big = af.nn.Parameter(af.tensor([50.0]))
    af.amp.set_auto_scale(True, init_scale=256.0)
    (big * big).sum().backward()
    big.grad.numpy()                                     # peak 100: 100 * 256 > 4 * 2**12
    assert af.amp.auto_scaler().scale <= 2.0 ** 12 / 100


def test_state_is_visible_and_it_can_be_turned_off():
    scaler = af.amp.auto_scaler()
    assert scaler.enabled and scaler.scale == 1024.0
    assert set(scaler.state_dict()) >= {"scale", "skipped_steps", "rescued_passes"}
    assert af.amp.set_auto_scale(False) is None and not af.amp.auto_scaler().enabled
    w = af.nn.Parameter(af.ones(2))
    (w * w).sum().backward()
    assert CTX_records()[-1].auto is None


def CTX_records():
    from aneforge.context import CTX
    return CTX.thread.backward_records


def test_per_model_setting():
    a, b = af.nn.Linear(2, 2), af.nn.Linear(2, 2)
    af.amp.set_auto_scale(False, model=a)
    mine = af.amp.set_auto_scale(True, model=b, init_scale=64.0)
    assert af.amp.auto_scaler(b) is mine and af.amp.auto_scaler(a) is None
    x = af.ones(1, 2)
    a(x).sum().backward()
    assert CTX_records()[-1].auto is None
    b(x).sum().backward()
    assert CTX_records()[-1].auto.scaler is mine and mine.scale == 64.0


def test_an_underflowing_parameter_is_named_once():
    model = af.nn.Linear(4, 1)
    x = af.tensor(np.full((2, 4), 1e-7, np.float32))        # weight grad 2e-7: fp16 holds ~3 bits
    with pytest.warns(af.ANEHazardWarning, match="'weight' of Linear"):
        for _ in range(2):
            model.zero_grad()
            model(x).sum().backward()
            model.weight.grad.numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", af.ANEHazardWarning)
        model.zero_grad()
        model(x).sum().backward()
        model.weight.grad.numpy()                          # warned once, not every step


def test_a_loop_that_keeps_underflowing_is_not_scanned_every_pass(monkeypatch):
    """The underflow scan reads every gradient on the host: once nobody new is named it backs
    off (1, 2, 4, ... passes up to QUIET_PASSES), and a parameter that starts underflowing
    later is still named within QUIET_PASSES passes."""
    from aneforge.core import autoscale
    scans = []
    scan = autoscale.AutoScaler._scan_underflow
    monkeypatch.setattr(autoscale.AutoScaler, "_scan_underflow",
                        lambda self, handles: scans.append(1) or scan(self, handles))
    model = af.nn.Linear(4, 1)
    small = af.tensor(np.full((2, 4), 1e-7, np.float32))    # the weight's gradient underflows
    large = af.tensor(np.full((2, 4), 1e3, np.float32))     # then (loss * 1e-7) the bias's
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", af.ANEHazardWarning)
        for step in range(200):
            model.zero_grad()
            if step < 100:
                model(small).sum().backward()
            else:
                (model(large).sum() * 1e-7).backward()
            model.weight.grad.numpy()
    named = [str(w.message) for w in seen if "automatic gradient scaling" in str(w.message)]
    assert len(named) == 2 and "'weight'" in named[0] and "'bias'" in named[1]
    assert len(scans) <= 2 * (7 + 2)                # log-many, not 200


# ---- composition: GradScaler, autocast, af.compile ---------------------------------------------
def test_an_explicit_grad_scaler_is_not_scaled_twice():
    w = af.nn.Parameter(af.tensor([1.0, 2.0]))
    opt = af.optim.SGD([w], lr=0.1)
    scaler = af.amp.GradScaler("cuda", init_scale=512.0)
    scaler.scale((w * w).sum()).backward()
    assert CTX_records()[-1].auto is None
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == [0.7998046875, 1.599609375]


def test_grad_scaler_follows_torchs_signature():
    s = af.amp.GradScaler("cuda", init_scale=256.0, growth_factor=2.0, backoff_factor=0.5,
                          growth_interval=100, enabled=True)
    assert s.get_scale() == 256.0 and s.device == "cuda"
    with pytest.raises(TypeError, match="first argument is the device"):
        af.amp.GradScaler(256.0)
    with pytest.raises(ValueError, match="device must be one of"):
        af.amp.GradScaler("tpu")


def test_autocast_is_accepted_and_changes_nothing():
    x = af.tensor([1.5, 2.5])
    with af.autocast("cuda", dtype=af.float16):
        y = x * 2
    assert y.dtype == af.float16 and y.tolist() == [3.0, 5.0]

    @af.amp.autocast(device_type="cpu")
    def double(t):
        return t * 2
    assert double(x).tolist() == [3.0, 5.0]
    with pytest.warns(RuntimeWarning, match="bfloat16"):
        af.autocast("cuda", dtype="bfloat16")
    with pytest.raises(ValueError, match="device_type"):
        af.autocast("tpu")


def test_a_replayed_step_matches_the_eager_loop_through_a_rescue():
    """af.compile: one compile, the same losses as eager, and a pass that overflows at the
    current scale is rescued in the replay as in the eager call."""
    def run(compiled: bool):
        af.manual_seed(0)
        af.amp.set_auto_scale(True, init_scale=1024.0)
        model = af.nn.Linear(8, 1)
        opt = af.optim.SGD(model.parameters(), lr=1e-4)

        def step(x):
            opt.zero_grad()
            loss = (model(af.tensor(x)) ** 2).sum()
            loss.backward()
            opt.step()
            return loss
        step = af.compile(step) if compiled else step
        rng = np.random.default_rng(0)
        xs = [rng.standard_normal((4, 8)).astype(np.float32) * (30.0 if i == 3 else 1.0)
              for i in range(6)]
        before = af.amp.auto_scaler().rescued_passes
        losses = [float(step(x).item()) for x in xs]
        return losses, af.amp.auto_scaler().rescued_passes - before
    eager, eager_rescues = run(False)
    af.clear_cache()
    replayed, replay_rescues = run(True)
    assert replayed == eager and eager_rescues == replay_rescues >= 1
    assert af.cache_info().misses <= 2


def test_each_model_keeps_its_own_scale():
    """A notebook trains one model, then another: the second starts from the initial scale,
    not from what the first model's large gradients left."""
    big = af.nn.Linear(4, 1)
    for _ in range(3):
        big.zero_grad()
        (big(af.ones(2, 4) * 30) ** 2).sum().backward()
        big.weight.grad.numpy()
    first = af.amp.auto_scaler().scale
    assert first < 1024
    small = af.nn.Linear(3, 2)
    (small(af.ones(1, 3)) * 1e-3).sum().backward()
    small.weight.grad.numpy()
    assert af.amp.auto_scaler().scale >= 1024           # its own state, fitted to its gradients
    big.zero_grad()
    (big(af.ones(2, 4) * 30) ** 2).sum().backward()
    big.weight.grad.numpy()
    assert af.amp.auto_scaler().scale <= first * 2      # and the first model's comes back


# ---- an overflow the engine hides: inf - inf and 0 * inf store +0 ------------------------------
def test_an_overflow_a_later_matmul_cancels_is_rescued():
    """At S = 1024 an intermediate cotangent (1000 * 100 at torch's scale) is past 65504: +inf in
    one row, -inf in the next. The matmul that makes w's gradient adds them, and the engine
    stores inf - inf as +0: w.grad came back all zeros with finite peaks, and the warning said
    it underflowed. The cotangents entering sums are peaks too: the pass runs a rung lower."""
    x0 = np.array([[1.0, 2.0, 1.0], [1.0, 1.0, 2.0]], np.float32)
    c = np.array([[0.1, 0.07], [-0.08, -0.09]], np.float32)
    w0 = np.array([[0.5, -0.25], [0.75, 0.5], [-0.5, 0.25]], np.float32)
    tw = torch.tensor(w0, requires_grad=True)
    ((torch.from_numpy(x0) @ tw) * 1000.0 * torch.from_numpy(c)).sum().backward()
    w = af.nn.Parameter(af.tensor(w0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                    # rescued: nothing to warn about
        ((af.tensor(x0) @ w) * 1000.0 * af.tensor(c)).sum().backward()
        g = w.grad.numpy().astype(np.float32)
    want = tw.grad.numpy()
    assert np.abs(want).min() > 10                         # torch's gradient is not small
    np.testing.assert_allclose(g, want, rtol=2e-3)
    assert af.amp.auto_scaler().rescued_passes == 1


def _gan_discriminator_grads(lib, tensor):
    """The DCGAN discriminator's pattern (pytorch/examples dcgan/main.py) at a small size:
    conv, LeakyReLU, conv, BatchNorm (training) over a near-constant batch, LeakyReLU, conv,
    sigmoid, BCELoss against a label tensor of ones; the three conv weights' gradients."""
    rs = np.random.RandomState(0)
    x = rs.uniform(-1, 1, (8, 3, 16, 16)).astype(np.float32)
    ws = [(rs.randn(*s) * k).astype(np.float32)
          for s, k in (((8, 3, 4, 4), 0.02), ((16, 8, 4, 4), 0.003), ((1, 16, 4, 4), 0.02))]
    F = lib.nn.functional
    w0, w1, w2 = (tensor(w) for w in ws)
    h = F.leaky_relu(F.conv2d(tensor(x), w0, stride=2, padding=1), 0.2)
    h = F.leaky_relu(F.batch_norm(F.conv2d(h, w1, stride=2, padding=1), None, None,
                                  training=True), 0.2)
    out = lib.sigmoid(F.conv2d(h, w2)).view(-1)
    label = lib.full((out.shape[0],), 1, dtype=out.dtype)
    F.binary_cross_entropy(out, label).backward()
    return [w.grad.numpy().astype(np.float32) for w in (w0, w1, w2)]


def test_a_gan_discriminators_first_conv_gets_its_gradient():
    """The discriminator's BatchNorm over a small-variance batch makes its variance term about
    1e3 at torch's scale: at S = 1024 it overflowed, the conv before it summed +inf and -inf to
    0, and the first conv's weight gradient (and, in a GAN, every generator gradient behind it)
    read 0.0 where torch's reads 0.17. Now the pass is rescued, and .grad is torch's within
    the error fp16's forward pass over this near-constant BatchNorm input leaves (12-17% of the
    largest value; the same with the scaling off, which the scaled pass must not exceed)."""
    want = _gan_discriminator_grads(torch, lambda w: torch.tensor(w, requires_grad=True))
    got = _gan_discriminator_grads(af, af.nn.Parameter)
    assert af.amp.auto_scaler().rescued_passes == 1
    af.amp.set_auto_scale(False)
    try:
        unscaled = _gan_discriminator_grads(af, af.nn.Parameter)
    finally:
        af.amp.set_auto_scale(True)
    for g, u, t in zip(got, unscaled, want):
        err, err_unscaled = (np.abs(v - t).max() / np.abs(t).max() for v in (g, u))
        assert err < 0.2 and err < err_unscaled + 0.02, (err, err_unscaled)


def test_a_gradient_an_overflow_zeroed_is_not_called_an_underflow():
    """A pass whose watched cotangents overflowed at every scale (the values' own inf, that a
    sum turned into zeros): an all-zero gradient is not an underflow, and raising the scale
    (the underflow's advice) would make it worse: the warning says what happened instead."""
    zeroed, other = af.nn.Parameter(af.ones(3)), af.nn.Parameter(af.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                   # the pass's own (underflow) warning
        (zeroed * 0.0 + other).sum().backward()
        zeroed.grad.numpy()
    handles = (weakref.ref(zeroed.ref[0]), weakref.ref(other.ref[0]))
    hidden, small = AutoScaler(), AutoScaler()             # each warns once per parameter
    hidden._rescued = True                                 # it ran down the whole ladder
    with pytest.warns(af.ANEHazardWarning, match="overflowed fp16.*Do not raise the scale"):
        hidden.observe(handles, np.array([1.0, 0.0, 1.0, np.inf]))
    assert hidden.rescued_passes == 1 and 1.0 <= hidden.scale < 1024
    with pytest.warns(af.ANEHazardWarning, match="underflowed fp16.*Raise the scale"):
        small.observe(handles, np.array([1.0, 0.0, 1.0, 0.0]))
