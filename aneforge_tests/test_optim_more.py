"""RMSprop, Adagrad and Adadelta against torch over several steps, one compile per loop, and
torch's state names both ways."""
import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn
from test_optim import P0, close, run

OPTIMIZERS = {
    "RMSprop": [dict(lr=0.01), dict(lr=0.01, alpha=0.9, momentum=0.5),
                dict(lr=0.005, centered=True, weight_decay=0.1),
                dict(lr=0.01, centered=True, momentum=0.9, maximize=True)],
    "Adagrad": [dict(lr=0.1), dict(lr=0.1, lr_decay=0.1, weight_decay=0.05),
                dict(lr=0.1, initial_accumulator_value=0.5, maximize=True)],
    "Adadelta": [dict(), dict(lr=0.5, rho=0.8, weight_decay=0.1),
                 dict(lr=2.0, eps=1e-4, maximize=True)],
}
CASES = [(k, i) for k, v in OPTIMIZERS.items() for i in range(len(v))]


@pytest.mark.parametrize("kind,i", CASES, ids=[f"{k}{i}" for k, i in CASES])
def test_matches_torch(kind, i):
    kw = OPTIMIZERS[kind][i]
    got, want = run(lambda p: getattr(af.optim, kind)(p, **kw),
                    lambda p: getattr(torch.optim, kind)(p, **kw), steps=8)
    close(got, want)
    assert not np.allclose(want, P0.astype(np.float64))         # the steps moved the weights


@pytest.mark.parametrize("kind", OPTIMIZERS)
def test_a_training_loop_compiles_once(kind):
    af.clear_cache()
    run(lambda p: getattr(af.optim, kind)(p, **OPTIMIZERS[kind][-1]),
        lambda p: getattr(torch.optim, kind)(p, **OPTIMIZERS[kind][-1]), steps=6)
    info = af.cache_info()
    assert info.misses == 1 and info.hits == 5


def _trained(opt_af, opt_torch, steps=3):
    pa = nn.Parameter(P0)
    pt = torch.tensor(P0.astype(np.float32), requires_grad=True)
    oa, ot = opt_af([pa]), opt_torch([pt])
    for _ in range(steps):
        (pa * pa * 0.5).sum().backward()
        oa.step()
        oa.zero_grad()
        (pt * pt * 0.5).sum().backward()
        ot.step()
        ot.zero_grad()
    return pa, oa, pt, ot


@pytest.mark.parametrize("kind,keys", [("RMSprop", {"square_avg", "momentum_buffer", "grad_avg"}),
                                       ("Adagrad", {"sum"}),
                                       ("Adadelta", {"square_avg", "acc_delta"})])
def test_state_dict_has_torch_names_and_loads_torch_state(kind, keys):
    kw = OPTIMIZERS[kind][-1] if kind != "RMSprop" else dict(lr=0.01, momentum=0.5, centered=True)
    pa, oa, pt, ot = _trained(lambda p: getattr(af.optim, kind)(p, **kw),
                              lambda p: getattr(torch.optim, kind)(p, **kw))
    ours, theirs = oa.state_dict()["state"][0], ot.state_dict()["state"][0]
    assert keys <= set(ours) and keys <= set(theirs)
    for k in keys:
        want = theirs[k].numpy()
        np.testing.assert_allclose(ours[k].numpy().astype(np.float32), want, rtol=2e-2,
                                   atol=2e-3 * np.abs(want).max())
    fresh = getattr(af.optim, kind)([nn.Parameter(P0)], **kw)
    fresh.load_state_dict(ot.state_dict())          # torch's state (squares) loads
    for k in keys:
        got = fresh.state_dict()["state"][0][k].numpy().astype(np.float32)
        np.testing.assert_allclose(got, theirs[k].numpy(), rtol=2e-2,
                                   atol=2e-3 * np.abs(theirs[k].numpy()).max())


def test_small_gradients_stay_in_range():
    """Squares of gradients near 1e-4 underflow fp16; their roots do not, so the first steps
    match torch (RMSprop's first step is lr / sqrt(1 - alpha) for any gradient size)."""
    for kind in ("RMSprop", "Adagrad"):
        pa = nn.Parameter(af.ones(3))
        pt = torch.ones(3, requires_grad=True)
        oa, ot = getattr(af.optim, kind)([pa], lr=0.01), getattr(torch.optim, kind)([pt], lr=0.01)
        (pa * 1e-4).sum().backward()
        oa.step()
        (pt * 1e-4).sum().backward()
        ot.step()
        np.testing.assert_allclose(1 - pa.numpy().astype(np.float64), 1 - pt.detach().numpy(),
                                   rtol=0.05)


@pytest.mark.parametrize("make,match", [
    (lambda p: af.optim.RMSprop(p, lr=-1.0), "Invalid lr"),
    (lambda p: af.optim.RMSprop(p, alpha=-0.5), "Invalid alpha"),
    (lambda p: af.optim.Adagrad(p, lr_decay=-1.0), "Invalid lr_decay"),
    (lambda p: af.optim.Adadelta(p, rho=1.5), "Invalid rho"),
])
def test_bad_arguments_raise_as_torch_does(make, match):
    with pytest.raises(ValueError, match=match):
        make([nn.Parameter(af.ones(2))])


def test_torch_only_keywords_are_accepted_and_amsgrad_refused():
    """nanoGPT passes fused=... when torch's signature has it; foreach etc. pick torch kernels."""
    import inspect
    for name in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta"):
        ours = set(inspect.signature(getattr(af.optim, name)).parameters) - {"master_weights"}
        theirs = set(inspect.signature(getattr(torch.optim, name)).parameters)
        assert theirs - ours <= {"decoupled_weight_decay"}, name
    af.optim.AdamW([nn.Parameter(af.ones(2))], lr=1e-3, betas=(0.9, 0.95), fused=False,
                   foreach=None)
    with pytest.raises(NotImplementedError, match="amsgrad"):
        af.optim.Adam([nn.Parameter(af.ones(2))], amsgrad=True)
