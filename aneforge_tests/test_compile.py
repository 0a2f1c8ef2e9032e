"""af.compile: a captured call replays bit for bit like the eager one, without running Python."""
import warnings

import numpy as np
import pytest

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F
from aneforge.replay import NotReplayable

RNG = np.random.default_rng(0)
X = RNG.random((40, 16, 64)).astype(np.float32)
Y = X[..., :10].argmax(-1)


def make(seed=0, dropout=0.0, **opt_kw):
    af.manual_seed(seed)
    layers = [nn.Linear(64, 32), nn.ReLU()] + ([nn.Dropout(dropout)] if dropout else [])
    model = nn.Sequential(*layers, nn.Linear(32, 10))
    return model, af.optim.AdamW(model.parameters(), lr=3e-3, **opt_kw)


def step_fn(model, opt, scaler=None, clip=None, sched=None, calls=None):
    def step(x, y):
        if calls is not None:
            calls.append(1)
        opt.zero_grad()
        loss = F.cross_entropy(model(af.tensor(x)), af.tensor(y))
        if scaler is not None:
            scaler.scale(loss).backward()
            if clip:
                scaler.unscale_(opt)
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
        if sched is not None:
            sched.step()
        return loss
    return step


def train(compiled, steps=20, scaler=None, clip=None, sched=False, dropout=0.0):
    model, opt = make(dropout=dropout)
    sc = af.amp.GradScaler(init_scale=scaler) if scaler else None
    sch = af.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5) if sched else None
    calls = []
    fn = step_fn(model, opt, sc, clip, sch, calls)
    fn = af.compile(fn, fullgraph=True) if compiled else fn
    af.clear_cache()
    af.manual_seed(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)       # GradScaler's skipped steps
        losses = [fn(X[i], Y[i]).item() for i in range(steps)]
    return dict(losses=losses, weights=[p.numpy().copy() for p in model.parameters()],
                info=af.cache_info(), calls=len(calls), steps=opt._steps,
                lr=opt.param_groups[0]["lr"], scale=sc.get_scale() if sc else None,
                grads=[p.grad.numpy().copy() for p in model.parameters()])


CASES = {"plain": {}, "grad_scaler": dict(scaler=256.0), "clip": dict(clip=0.5),
         "scaler_unscale_clip": dict(scaler=256.0, clip=0.5), "lr_scheduler": dict(sched=True),
         "dropout": dict(dropout=0.2),
         # a scale so large the first steps overflow: skipped steps, a falling scale
         "scaler_skipping": dict(scaler=2.0 ** 24)}


@pytest.mark.parametrize("case", list(CASES))
def test_replayed_training_matches_eager_bit_for_bit(case):
    eager, compiled = train(False, **CASES[case]), train(True, **CASES[case])
    assert compiled["losses"] == eager["losses"]
    for a, b in zip(compiled["weights"] + compiled["grads"], eager["weights"] + eager["grads"]):
        np.testing.assert_array_equal(a, b)
    for k in ("steps", "lr", "scale"):
        assert compiled[k] == eager[k], k
    assert compiled["calls"] == 1                      # the Python ran once: then replays
    info = compiled["info"]
    assert (info.misses, info.hits, info.entries) == (1, 19, 1)


def test_a_skipping_scaler_really_skips():
    out = train(True, scaler=2.0 ** 24)
    assert out["scale"] < 2.0 ** 24


def test_a_compiled_forward_sees_weights_trained_elsewhere():
    model, opt = make()
    forward = af.compile(model)
    x = af.tensor(X[0])
    with af.no_grad():                  # (replayed: its result needs no graph)
        before = forward(x).numpy().copy()
    for i in range(3):
        opt.zero_grad()
        F.cross_entropy(model(af.tensor(X[i])), af.tensor(Y[i])).backward()
        opt.step()
    with af.no_grad():
        np.testing.assert_array_equal(forward(x).numpy(), model(x).numpy())
        assert not np.array_equal(forward(x).numpy(), before)
        assert len(forward._replays) == 1
    assert forward.training is True                   # a compiled module keeps its attributes


def test_new_shapes_and_modes_capture_again():
    model, _ = make(dropout=0.5)
    calls = []

    def fwd(x):
        calls.append(1)
        return model(x)
    f = af.compile(fwd)
    with af.no_grad():          # (with grad, a forward's backward runs outside: not replayed)
        f(af.ones(4, 64)), f(af.ones(4, 64))
        assert len(calls) == 1
        f(af.ones(8, 64))                               # new shape
        assert len(calls) == 2
        model.eval()                                    # dropout off: another program
        out = f(af.ones(4, 64))
        assert len(calls) == 3
        np.testing.assert_array_equal(out.numpy(), model(af.ones(4, 64)).numpy())
        af.clear_cache()                                # compiled programs dropped
        f(af.ones(4, 64))
        assert len(calls) == 4


def test_python_number_arguments_are_part_of_the_signature():
    f = af.compile(lambda x, k: x * k)
    assert f(af.ones(2), 2.0).tolist() == [2.0, 2.0]
    assert f(af.ones(2), 3.0).tolist() == [3.0, 3.0]
    assert f(af.ones(2), 2.0).tolist() == [2.0, 2.0]


GLOBAL = [1.0, 2.0]


@pytest.mark.parametrize("fn, why", [
    (lambda x: x * (x.sum().item()), "reads a value on the host"),
    (lambda x: x * af.tensor(GLOBAL), "host data that is not an argument"),
    (lambda x: float((x * 2).sum()), "reads a value on the host"),
    (lambda x: (x * 2, 3), "returns a int"),
])
def test_what_cannot_be_replayed_is_refused_with_a_reason(fn, why):
    strict = af.compile(fn, fullgraph=True)
    with pytest.raises(NotReplayable, match=why):
        strict(af.ones(2))
    lenient = af.compile(fn)
    with pytest.warns(RuntimeWarning, match=why):
        first = lenient(af.ones(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")                  # warned once; runs as usual after
        again = lenient(af.ones(2))
    assert str(first) == str(again)


def test_accumulating_gradients_across_calls_is_refused():
    model, opt = make()

    def accumulate(x, y):
        F.cross_entropy(model(af.tensor(x)), af.tensor(y)).backward()
        return model[0].weight.grad
    f = af.compile(accumulate, fullgraph=True)
    f(X[0], Y[0])                                       # the first call creates the gradients
    with pytest.raises(NotReplayable, match="accumulate"):
        f(X[1], Y[1])


def test_compile_as_decorator_with_options_and_disable():
    def double(x):
        return x * 2
    assert af.compile(double, disable=True) is double
    assert af.compile(fullgraph=True)(double)(af.ones(2)).tolist() == [2.0, 2.0]


def test_replayed_updates_leave_parameters_leaves_and_old_values_alone():
    """A replay sets each parameter and state tensor to its new value as `Tensor.set_` does:
    the parameter stays a leaf with requires_grad and its .grad; values taken before the step
    (a detached copy, an op recorded but not yet computed) keep reading the old value."""
    model, opt = make()
    step = af.compile(step_fn(model, opt), fullgraph=True)
    for i in range(2):
        step(X[i], Y[i])
    w = model[0].weight
    old = w.detach()
    pending = w * 2                                   # recorded, not computed yet
    before = w.numpy().copy()
    step(X[2], Y[2])
    assert w.is_leaf and w.requires_grad and w.grad is not None
    assert not np.array_equal(w.numpy(), before)
    np.testing.assert_array_equal(old.numpy(), before)
    np.testing.assert_array_equal(pending.numpy(), (before * 2).astype(np.float16))
    assert model[0].weight is w and opt.param_groups[0]["params"][0] is w


def _bn_train(compiled, steps=4):
    af.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
    opt = af.optim.SGD(model.parameters(), lr=0.1)
    step = step_fn(model, opt)
    fn = af.compile(step, fullgraph=True) if compiled else step
    af.clear_cache()
    x = np.random.default_rng(1).standard_normal((steps, 8, 2, 6, 6)).astype(np.float32)
    losses = [fn(x[i], Y[i, :8]).item() for i in range(steps)]
    bn = model[1]
    return losses, [bn.running_mean.numpy().copy(), bn.running_var.numpy().copy()], \
        af.cache_info()


def test_a_replayed_batchnorm_step_updates_running_statistics_in_its_one_program():
    """BatchNorm's running statistics (set_ of values the step computes) are set by the
    step's own program on replay: one program per call, not one more per buffer recomputing
    the forward pass up to it, and the same bits as the eager steps."""
    eager_losses, eager_stats, _ = _bn_train(False)
    losses, stats, info = _bn_train(True)
    assert losses == eager_losses
    for a, b in zip(stats, eager_stats):
        np.testing.assert_array_equal(a, b)
    assert (info.misses, info.hits, info.entries) == (1, 3, 1)
