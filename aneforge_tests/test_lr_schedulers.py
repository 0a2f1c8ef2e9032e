"""Every lr scheduler against torch's lr sequence (and OneCycleLR's momentum / beta1 sequence),
and a scheduled training loop that compiles once."""
import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn
from aneforge.optim import lr_scheduler as AS
from torch.optim import lr_scheduler as TS


class Warmup:
    """A callable object: its attributes are saved in state_dict, as torch does."""

    def __init__(self, n):
        self.n = n

    def __call__(self, epoch):
        return min(1.0, (epoch + 1) / self.n)


# name -> (optimizer kwargs, how to build the scheduler from (module, optimizer))
SCHEDULES = {
    "StepLR": lambda S, o: S.StepLR(o, step_size=3, gamma=0.5),
    "MultiStepLR": lambda S, o: S.MultiStepLR(o, milestones=[5, 2, 9], gamma=0.3),
    "ExponentialLR": lambda S, o: S.ExponentialLR(o, gamma=0.9),
    "ConstantLR": lambda S, o: S.ConstantLR(o, factor=0.25, total_iters=4),
    "LinearLR": lambda S, o: S.LinearLR(o, start_factor=0.1, end_factor=0.8, total_iters=6),
    "LinearLR_default": lambda S, o: S.LinearLR(o),
    "PolynomialLR": lambda S, o: S.PolynomialLR(o, total_iters=8, power=2.0),
    "LambdaLR": lambda S, o: S.LambdaLR(o, lambda e: 0.95 ** e),
    "LambdaLR_object": lambda S, o: S.LambdaLR(o, Warmup(4)),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, lambda e: 0.9),
    "CosineAnnealingLR": lambda S, o: S.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
    "CosineAnnealingWarmRestarts": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3),
    "CosineAnnealingWarmRestarts_mult": lambda S, o: S.CosineAnnealingWarmRestarts(
        o, T_0=2, T_mult=2, eta_min=0.05),
    "OneCycleLR": lambda S, o: S.OneCycleLR(o, max_lr=1.0, total_steps=20),
    "OneCycleLR_three_linear": lambda S, o: S.OneCycleLR(
        o, max_lr=[0.5, 2.0], epochs=4, steps_per_epoch=5, pct_start=0.25,
        anneal_strategy="linear", three_phase=True, div_factor=10.0),
    "SequentialLR": lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.2, total_iters=3), S.ExponentialLR(o, gamma=0.8),
            S.StepLR(o, 2)], milestones=[4, 10]),
    "CyclicLR": lambda S, o: S.CyclicLR(o, base_lr=0.1, max_lr=[0.5, 1.0], step_size_up=3),
    "CyclicLR_triangular2_down": lambda S, o: S.CyclicLR(
        o, 0.05, 0.4, step_size_up=2, step_size_down=5, mode="triangular2"),
    "CyclicLR_exp_range": lambda S, o: S.CyclicLR(
        o, [0.1, 0.2], 0.6, 4, mode="exp_range", gamma=0.9, base_momentum=0.7,
        max_momentum=[0.95, 0.9]),
    "CyclicLR_scale_fn": lambda S, o: S.CyclicLR(
        o, 0.1, 0.6, 3, scale_fn=lambda x: 0.5 ** x, scale_mode="iterations",
        cycle_momentum=False),
    "ChainedScheduler": lambda S, o: S.ChainedScheduler(
        [S.ConstantLR(o, factor=0.1, total_iters=4), S.ExponentialLR(o, gamma=0.9)]),
    "ChainedScheduler_three": lambda S, o: S.ChainedScheduler(
        [S.LinearLR(o, start_factor=0.2, total_iters=5), S.StepLR(o, 3, gamma=0.5),
         S.CosineAnnealingLR(o, T_max=30)], optimizer=o),
}
STEPS = 19


def _groups(lib, opt_name="SGD"):
    p1 = (nn.Parameter(af.ones(2)) if lib is af else torch.ones(2, requires_grad=True))
    p2 = (nn.Parameter(af.ones(3)) if lib is af else torch.ones(3, requires_grad=True))
    kw = dict(lr=0.5, momentum=0.9) if opt_name == "SGD" else dict(lr=0.5, betas=(0.9, 0.99))
    return getattr(lib.optim, opt_name)([{"params": [p1]}, {"params": [p2], "lr": 0.2}], **kw)


def _sequence(lib, S, make, opt_name="SGD"):
    opt = _groups(lib, opt_name)
    sched = make(S, opt)
    out = []
    for _ in range(STEPS):
        key = "betas" if opt_name == "Adam" else "momentum"
        out.append((sched.get_last_lr(), [g[key] for g in opt.param_groups]))
        opt.step()
        sched.step()
    return out


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_lr_sequence_matches_torch(name):
    ours = _sequence(af, AS, SCHEDULES[name])
    theirs = _sequence(torch, TS, SCHEDULES[name])
    for (lr_a, m_a), (lr_t, m_t) in zip(ours, theirs):
        assert lr_a == pytest.approx(lr_t, rel=1e-9, abs=1e-12)
        assert m_a == pytest.approx(m_t, rel=1e-9)


def test_one_cycle_cycles_adam_beta1_as_torch():
    ours = _sequence(af, AS, SCHEDULES["OneCycleLR"], "Adam")
    theirs = _sequence(torch, TS, SCHEDULES["OneCycleLR"], "Adam")
    for (lr_a, b_a), (lr_t, b_t) in zip(ours, theirs):
        assert lr_a == pytest.approx(lr_t)
        assert [b[0] for b in b_a] == pytest.approx([b[0] for b in b_t])
        assert [b[1] for b in b_a] == [b[1] for b in b_t]


@pytest.mark.parametrize("name", ["CyclicLR", "CyclicLR_exp_range"])
def test_cyclic_lr_over_many_cycles_cycles_lr_and_adam_beta1_as_torch(name):
    """200 steps: 33 (exp_range: 25) whole cycles, the lr and beta1 of each step."""
    runs = []
    for lib, S in ((af, AS), (torch, TS)):
        opt = _groups(lib, "Adam")
        sched = SCHEDULES[name](S, opt)
        runs.append([])
        for _ in range(200):
            runs[-1].append(sched.get_last_lr() + [g["betas"][0] for g in opt.param_groups])
            sched.step()
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-12)


def test_warm_restarts_take_fractional_epochs_as_torch():
    got, want = [], []
    for lib, S, out in ((af, AS, got), (torch, TS, want)):
        opt = _groups(lib)
        sched = S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
        for epoch in range(5):
            for i in range(4):
                sched.step(epoch + i / 4)
                out.append(sched.get_last_lr())
    for a, t in zip(got, want):
        assert a == pytest.approx(t)


def test_reduce_on_plateau_matches_torch():
    metrics = [1.0, 0.9, 0.95, 0.91, 0.92, 0.93, 0.5, 0.6, 0.61, 0.7, 0.8, 0.9, 0.4, 0.41]
    for kw in (dict(patience=2), dict(mode="max", factor=0.5, patience=1, cooldown=2),
               dict(threshold=0.1, threshold_mode="abs", patience=0, min_lr=[0.3, 0.01])):
        got, want = [], []
        for lib, S, out in ((af, AS, got), (torch, TS, want)):
            opt = _groups(lib)
            sched = S.ReduceLROnPlateau(opt, **kw)
            for m in metrics:
                sched.step(m)
                out.append(sched.get_last_lr())
        np.testing.assert_allclose(got, want, rtol=1e-12)
    opt = _groups(af)
    AS.ReduceLROnPlateau(opt).step(af.tensor([3.0]))          # a one-element tensor metric


@pytest.mark.parametrize("name", ["LambdaLR_object", "SequentialLR", "OneCycleLR", "CyclicLR",
                                  "ChainedScheduler_three"])
def test_state_dict_resumes_the_schedule(name):
    make = SCHEDULES[name]
    opt = _groups(af)
    sched = make(AS, opt)
    for _ in range(5):
        sched.step()
    saved = sched.state_dict()
    opt2 = _groups(af)
    again = make(AS, opt2)
    again.load_state_dict(saved)
    for g2, g in zip(opt2.param_groups, opt.param_groups):
        g2["lr"] = g["lr"]
    for _ in range(4):
        sched.step()
        again.step()
        assert again.get_last_lr() == sched.get_last_lr()


@pytest.mark.parametrize("make,match", [
    (lambda o: AS.OneCycleLR(o, max_lr=1.0), "total_steps OR"),
    (lambda o: AS.OneCycleLR(o, max_lr=1.0, total_steps=5, pct_start=2.0), "pct_start"),
    (lambda o: AS.OneCycleLR(o, max_lr=1.0, total_steps=5, anneal_strategy="exp"),
     "anneal_strategy"),
    (lambda o: AS.SequentialLR(o, [AS.StepLR(o, 2)], milestones=[3]), "one more"),
    (lambda o: AS.ReduceLROnPlateau(o, factor=2.0), "Factor"),
    (lambda o: AS.LinearLR(o, start_factor=0.0), "Starting multiplicative factor"),
    (lambda o: AS.CyclicLR(o, 0.1, 1.0, mode="triangle"), "mode is invalid"),
    (lambda o: AS.CyclicLR(o, [0.1], 1.0), "expected 2 values for base_lr"),
    (lambda o: AS.ChainedScheduler([]), "at least one scheduler"),
    (lambda o: AS.ChainedScheduler([AS.StepLR(o, 2), AS.ReduceLROnPlateau(o)]),
     "does not support `ReduceLROnPlateau`"),
    (lambda o: AS.ChainedScheduler([AS.StepLR(o, 2), AS.StepLR(_groups(af), 2)]),
     "same optimizer"),
    (lambda o: AS.CyclicLR(af.optim.Adagrad(o.param_groups[0]["params"]), 0.1, 1.0),
     "must support momentum"),
])
def test_bad_arguments_raise_as_torch(make, match):
    with pytest.raises(ValueError, match=match):
        make(_groups(af))


def test_one_cycle_past_total_steps_raises():
    opt = _groups(af)
    sched = AS.OneCycleLR(opt, max_lr=1.0, total_steps=3)
    sched.step()
    sched.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 4 times"):
        sched.step()


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "RMSprop"])
def test_one_cycle_training_compiles_once_and_matches_torch(opt_name):
    """lr and momentum (beta1) change every step: both are program inputs."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((4, 3)).astype(np.float16)
    x = rng.standard_normal((8, 4)).astype(np.float16)
    pa = nn.Parameter(w0)
    pt = torch.tensor(w0.astype(np.float32), requires_grad=True)
    kw = dict(lr=0.01) if opt_name == "Adam" else dict(lr=0.01, momentum=0.9)
    oa, ot = getattr(af.optim, opt_name)([pa], **kw), getattr(torch.optim, opt_name)([pt], **kw)
    sa = AS.OneCycleLR(oa, max_lr=0.05, total_steps=8, final_div_factor=100.0)
    st = TS.OneCycleLR(ot, max_lr=0.05, total_steps=8, final_div_factor=100.0)
    xa, xt = af.tensor(x), torch.tensor(x.astype(np.float32))
    af.clear_cache()
    for _ in range(8):
        ((xa @ pa).tanh() ** 2).mean().backward()
        oa.step()
        oa.zero_grad()
        sa.step()
        ((xt @ pt).tanh() ** 2).mean().backward()
        ot.step()
        ot.zero_grad()
        st.step()
    assert af.cache_info().misses == 1
    want = pt.detach().numpy()
    np.testing.assert_allclose(pa.numpy().astype(np.float32), want,
                               atol=2 ** -7 * np.abs(want).max())


@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
def test_one_cycle_under_af_compile_replays_and_matches_eager(opt_name):
    """A captured step replays with the cycled lr and momentum (beta1) as inputs: the function
    runs in Python once or twice (capture), not once per step, and gives the eager losses."""
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((4, 3)).astype(np.float16)
    xs = rng.standard_normal((10, 8, 4)).astype(np.float16)

    def train(compiled):
        p = nn.Parameter(w0)
        kw = dict(lr=0.01) if opt_name == "Adam" else dict(lr=0.01, momentum=0.9)
        opt = getattr(af.optim, opt_name)([p], **kw)
        sched = AS.OneCycleLR(opt, max_lr=0.05, total_steps=10, final_div_factor=100.0)
        calls = []

        def step(x):
            calls.append(1)
            opt.zero_grad()
            loss = ((af.tensor(x) @ p).tanh() ** 2).mean()
            loss.backward()
            opt.step()
            sched.step()
            return loss
        fn = af.compile(step) if compiled else step
        losses = [fn(x).item() for x in xs]
        return losses, p.numpy(), len(calls), opt.param_groups[0]
    eager, w_eager, _, g_eager = train(False)
    replayed, w_replayed, calls, g_replayed = train(True)
    assert calls <= 2
    assert replayed == eager and np.array_equal(w_replayed, w_eager)
    assert g_replayed["lr"] == g_eager["lr"]
