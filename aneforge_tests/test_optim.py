"""Optimizers against torch on identical parameters and losses; one compile per training loop;
loss scaling; the compensated (hi, lo) weights."""
import warnings

import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn

RTOL = 2.0 ** -7


def f16(a):
    return np.asarray(a, np.float32).astype(np.float16)


P0 = f16(np.random.default_rng(0).standard_normal((4, 5)))
TARGET = f16(np.random.default_rng(1).standard_normal((4, 5)))


def run(make_af, make_torch, steps=6, loss_scale=None):
    pa = nn.Parameter(P0)
    pt = torch.tensor(P0.astype(np.float32), requires_grad=True)
    oa, ot = make_af([pa]), make_torch([pt])
    ta, tt = af.tensor(TARGET), torch.tensor(TARGET.astype(np.float32))
    for _ in range(steps):
        la = ((pa - ta) * (pa - ta)).sum() * 0.5
        oa.zero_grad()
        la.backward()
        oa.step()
        lt = ((pt - tt) ** 2).sum() * 0.5
        ot.zero_grad()
        lt.backward()
        ot.step()
    return pa.numpy().astype(np.float64), pt.detach().numpy().astype(np.float64)


def close(got, want):
    scale = np.abs(want).max()
    err = np.abs(got - want)
    assert (err <= RTOL * (np.abs(want) + scale)).all(), f"worst error {err.max():.3g}"


OPTIMIZERS = {
    "sgd": dict(lr=0.1),
    "sgd_momentum": dict(lr=0.05, momentum=0.9),
    "sgd_nesterov": dict(lr=0.05, momentum=0.9, nesterov=True),
    "sgd_dampening_decay": dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.1),
    "sgd_maximize": dict(lr=0.01, maximize=True),
    "adam": dict(lr=0.05),
    "adam_decay": dict(lr=0.05, betas=(0.8, 0.99), weight_decay=0.1),
    "adamw": dict(lr=0.05, weight_decay=0.5),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_matches_torch(name):
    kind = {"sgd": "SGD", "ada": "Adam"}[name[:3]]
    kind = "AdamW" if name.startswith("adamw") else kind
    kw = OPTIMIZERS[name]
    got, want = run(lambda p: getattr(af.optim, kind)(p, **kw),
                    lambda p: getattr(torch.optim, kind)(p, **kw))
    close(got, want)


def test_a_training_loop_compiles_once():
    af.clear_cache()
    run(lambda p: af.optim.AdamW(p, lr=0.01), lambda p: torch.optim.AdamW(p, lr=0.01), steps=10)
    info = af.cache_info()
    assert info.misses == 1 and info.hits == 9


def test_lr_schedulers_match_torch_and_do_not_recompile():
    pa, pt = nn.Parameter(P0), torch.tensor(P0.astype(np.float32), requires_grad=True)
    oa, ot = af.optim.SGD([pa], lr=0.5), torch.optim.SGD([pt], lr=0.5)
    sa = af.optim.lr_scheduler.CosineAnnealingLR(oa, T_max=7)
    st = torch.optim.lr_scheduler.CosineAnnealingLR(ot, T_max=7)
    steps = af.optim.lr_scheduler.StepLR(af.optim.SGD([nn.Parameter(P0)], lr=1.0), 2, gamma=0.5)
    af.clear_cache()
    for i in range(5):
        (pa * pa).sum().backward()
        oa.step()
        oa.zero_grad()
        sa.step()
        ot.step()
        st.step()
        steps.step()
        assert sa.get_last_lr() == pytest.approx(st.get_last_lr())
    assert steps.get_last_lr() == [0.25]
    assert af.cache_info().misses == 1


def test_state_dict_reports_torch_names():
    p = nn.Parameter(P0)
    opt = af.optim.Adam([p], lr=0.1)
    (p * p).sum().backward()
    opt.step()
    sd = opt.state_dict()
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq", "exp_avg_sqrt", "lo"}
    g = 2 * P0.astype(np.float32)
    np.testing.assert_allclose(np.asarray(sd["state"][0]["exp_avg_sq"], np.float32),
                               0.001 * g * g, rtol=1e-2, atol=1e-6)
    assert sd["param_groups"][0]["lr"] == 0.1


def test_compensated_weights_keep_small_updates():
    """lr * grad below half an fp16 ulp of the weight: plain fp16 weights never move."""
    def train(master):
        p = nn.Parameter(np.full(4, 1.0))
        opt = af.optim.SGD([p], lr=1e-4, master_weights=master)
        for _ in range(100):
            opt.zero_grad()
            (p * 1.0).sum().backward()      # gradient 1: each step subtracts 1e-4
            opt.step()
        return p.numpy().astype(np.float64) + opt.state[p].get("lo", af.zeros(4)).numpy()
    assert train("fp16").tolist() == [1.0] * 4            # ulp(1) / 2 = 4.9e-4 > 1e-4
    np.testing.assert_allclose(train("compensated"), 1.0 - 100 * 1e-4, rtol=1e-4)


def test_grad_scaler_skips_non_finite_steps_without_corrupting_weights():
    p = nn.Parameter(np.array([1.0, 2.0]))
    opt = af.optim.SGD([p], lr=0.1)
    scaler = af.amp.GradScaler(init_scale=1024.0)
    huge = af.tensor([30000.0, 30000.0])
    scaler.scale((p * huge).sum()).backward()                  # 30000 * 1024 -> inf gradients
    with pytest.warns(RuntimeWarning, match="not finite"):
        scaler.step(opt)
        scaler.update()
    assert p.tolist() == [1.0, 2.0]
    assert scaler.get_scale() == 512.0
    opt.zero_grad()
    scaler.scale((p * p).sum()).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaler.step(opt)
        scaler.update()
    np.testing.assert_allclose(p.numpy().astype(np.float32), [0.8, 1.6], rtol=1e-3)


def test_grad_scaler_grows_after_clean_steps():
    p = nn.Parameter(np.ones(3))
    opt = af.optim.SGD([p], lr=0.01)
    scaler = af.amp.GradScaler(init_scale=128.0, growth_interval=3)
    for _ in range(3):
        opt.zero_grad()
        scaler.scale((p * p).sum()).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 256.0


def test_empty_parameter_list_is_an_error():
    with pytest.raises(af.AneforgeError, match="empty"):
        af.optim.SGD([], lr=0.1)


@pytest.mark.parametrize("make, match", [
    (lambda w: af.optim.SGD([w], lr=-0.1), "Invalid lr"),
    (lambda w: af.optim.SGD([w], lr=float("nan")), "Invalid lr"),
    (lambda w: af.optim.SGD([w], lr=0.1, momentum=-0.9), "Invalid momentum"),
    (lambda w: af.optim.Adam([w], betas=(0.9, 1.0)), "beta parameter at index 1"),
    (lambda w: af.optim.Adam([w], eps=-1e-8), "Invalid eps"),
    (lambda w: af.optim.AdamW([w], weight_decay=-0.1), "Invalid weight decay"),
    (lambda w: af.optim.SGD([w * 2], lr=0.1), "non-leaf"),
])
def test_bad_optimizer_arguments_raise_as_torch_does(make, match):
    w = af.nn.Parameter(af.ones(2))
    with pytest.raises(ValueError, match=match):
        make(w)


def test_a_learning_rate_fp16_cannot_carry_warns():
    w = af.nn.Parameter(af.ones(2))
    opt = af.optim.SGD([w], lr=1e-8)
    (w * w).sum().backward()
    with pytest.warns(RuntimeWarning, match="lr=1e-08 is 0 as an fp16 program input"):
        opt.step()


def test_a_skipped_step_is_not_counted_as_in_torch():
    w = af.nn.Parameter(af.ones(2))
    opt, scaler = af.optim.Adam([w], lr=0.1), af.amp.GradScaler(init_scale=2.0 ** 15)
    (w * 1e4).sum().backward()                     # scaled gradients overflow fp16: skipped
    scaler.scale((w * 1e4).sum()).backward()
    with pytest.warns(RuntimeWarning, match="skipped"):
        scaler.step(opt)
        scaler.update()
    assert opt.last_step_skipped and opt._steps == 0
    assert w.tolist() == [1.0, 1.0]


def test_backward_twice_raises_unless_the_graph_is_retained():
    w = af.nn.Parameter(af.ones(2))
    loss = (w * w).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    assert w.grad.tolist() == [4.0, 4.0]
    with pytest.raises(af.AneforgeError, match="backward through the graph a second time"):
        loss.backward()
