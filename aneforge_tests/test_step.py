"""A training step is ONE program, whatever order the loop reads things in.

Each loop shape below is a common way to write a torch training loop: the loss read before or
after `opt.step()`, a closure, GradScaler, gradient clipping, a `.grad` read for logging. Every
one must run exactly one program per step (no part of the forward or backward recomputed) and
compile it once; shapes that record the same ops must give bit-equal weights.
"""
import functools
import threading
import traceback

import numpy as np
import pytest

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F

STEPS = 200


@functools.lru_cache(maxsize=1)
def digits_batches(batch=32):
    """STEPS batches of the digits images and labels, loaded at the first test that trains
    (not at collection: scikit-learn's import costs each pytest-xdist worker seconds of CPU,
    also the one that runs none of these tests)."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    order = np.random.default_rng(0).permutation(len(digits.target))
    idx = np.resize(order, STEPS * batch).reshape(STEPS, batch)
    return (digits.data[idx] / 16).astype(np.float32), digits.target[idx]


def make(seed=0, opt=af.optim.AdamW, **kw):
    af.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    return model, opt(model.parameters(), lr=3e-3, **kw)


def loss_of(model, i):
    x, y = digits_batches()
    return F.cross_entropy(model(af.tensor(x[i])), af.tensor(y[i]))


def zero_grad_forward_backward(model, opt, i):
    """The part every loop shape shares; they differ in what they read, and when."""
    opt.zero_grad()
    loss = loss_of(model, i)
    loss.backward()
    return loss


def item_after_step(model, opt, i):
    loss = zero_grad_forward_backward(model, opt, i)
    opt.step()
    return loss.item()


def item_before_step(model, opt, i):
    loss = zero_grad_forward_backward(model, opt, i)
    value = loss.item()
    opt.step()
    return value


def item_before_and_after(model, opt, i):
    loss = zero_grad_forward_backward(model, opt, i)
    first = loss.item()
    opt.step()
    assert loss.item() == first
    return first


def closure_step(model, opt, i):
    def closure():
        opt.zero_grad()
        loss = loss_of(model, i)
        loss.backward()
        return loss
    return opt.step(closure).item()


def grad_read_before_step(model, opt, i):
    loss = zero_grad_forward_backward(model, opt, i)
    w = model[0].weight
    assert np.isfinite(float(w.grad.abs().amax().item()))
    opt.step()
    return loss.item()


def grad_read_after_step(model, opt, i):
    value = item_after_step(model, opt, i)
    assert model[0].weight.grad.numpy().shape == (32, 64)      # an output of the step
    return value


def clip_then_step(model, opt, i):
    loss = zero_grad_forward_backward(model, opt, i)
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def clip_read_norm_then_step(model, opt, i):
    loss = zero_grad_forward_backward(model, opt, i)
    norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    assert norm.item() > 0
    opt.step()
    return loss.item()


def scaler_loop(read_before: bool, unscale_and_clip: bool = False):
    def loop(model, opt, i, scalers={}):
        scaler = scalers.setdefault(id(opt), af.amp.GradScaler(init_scale=256.0))
        opt.zero_grad()
        loss = loss_of(model, i)
        scaler.scale(loss).backward()
        if unscale_and_clip:
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        value = loss.item() if read_before else None
        scaler.step(opt)
        scaler.update()
        return loss.item() if value is None else value
    return loop


LOOPS = {
    "item_after_step": item_after_step,
    "item_before_step": item_before_step,
    "item_before_and_after": item_before_and_after,
    "closure": closure_step,
    "grad_read_before_step": grad_read_before_step,
    "grad_read_after_step": grad_read_after_step,
    "clip_then_step": clip_then_step,
    "clip_read_norm_then_step": clip_read_norm_then_step,
    "scaler_item_after": scaler_loop(read_before=False),
    "scaler_item_before": scaler_loop(read_before=True),
    "scaler_unscale_clip_item_before": scaler_loop(read_before=True, unscale_and_clip=True),
}
# Loops that record the same step must end with bit-equal weights.
SAME_AS = {"item_before_step": "item_after_step", "item_before_and_after": "item_after_step",
           "closure": "item_after_step", "grad_read_before_step": "item_after_step",
           "grad_read_after_step": "item_after_step",
           "clip_read_norm_then_step": "clip_then_step",
           "scaler_item_before": "scaler_item_after"}


def train(loop, steps=STEPS, **kw):
    model, opt = make(**kw)
    af.clear_cache()
    losses = [loop(model, opt, i) for i in range(steps)]
    info = af.cache_info()
    return model, losses, info


@pytest.fixture(scope="module")
def results():
    return {}


@pytest.mark.parametrize("name", list(LOOPS))
def test_every_loop_shape_runs_one_program_per_step(name, results):
    model, losses, info = train(LOOPS[name])
    assert info.hits + info.misses == STEPS, info         # one program run per step
    assert info.entries == 1 and info.misses == 1, info   # compiled once
    assert np.mean(losses[-20:]) < np.mean(losses[:20]) - 0.1
    results[name] = [p.numpy().copy() for p in model.parameters()], losses


@pytest.mark.parametrize("name", sorted(SAME_AS))
def test_loop_shapes_recording_the_same_step_agree_bit_for_bit(name, results):
    for n in (name, SAME_AS[name]):
        if n not in results:
            model, losses, _ = train(LOOPS[n])
            results[n] = [p.numpy().copy() for p in model.parameters()], losses
    (wa, la), (wb, lb) = results[name], results[SAME_AS[name]]
    assert la == lb
    for a, b in zip(wa, wb):
        np.testing.assert_array_equal(a, b)


def test_a_read_the_step_did_not_plan_for_still_gives_the_right_update():
    """The loss read first, then the gradients clipped: the planned update is discarded (the
    gradients changed) and the step updates from the clipped ones, without recomputing them."""
    def late_clip(model, opt, i):
        opt.zero_grad()
        loss = loss_of(model, i)
        loss.backward()
        value = loss.item()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return value
    a_model, a_losses, info = train(late_clip, steps=20)
    b_model, b_losses, _ = train(clip_then_step, steps=20)
    assert a_losses == b_losses
    for a, b in zip(a_model.parameters(), b_model.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert info.hits + info.misses == 2 * 20 and info.entries == 2


def test_reading_without_stepping_changes_nothing():
    """A planned update is only adopted by step(): reading gradients for analysis never moves
    the weights."""
    model, opt = make()
    before = [p.numpy().copy() for p in model.parameters()]
    loss = loss_of(model, 0)
    loss.backward()
    loss.item()
    model[0].weight.grad.numpy()
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)
    opt.zero_grad()
    opt.step()                                # no gradients: nothing to do
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)


def test_two_optimizers_step_in_one_program():
    af.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt_a = af.optim.SGD(model[0].parameters(), lr=0.1)
    opt_b = af.optim.AdamW(model[2].parameters(), lr=1e-3)
    af.clear_cache()
    for i in range(5):
        opt_a.zero_grad(), opt_b.zero_grad()
        loss = loss_of(model, i)
        loss.backward()
        opt_a.step()
        opt_b.step()
        loss.item()
    info = af.cache_info()
    assert (info.hits + info.misses, info.entries) == (5, 1)


def test_two_models_in_two_threads_match_sequential_training():
    """Grad mode and pending gradients are per thread: each optimizer's step runs in its own
    thread's programs and the results are bit-equal to training one model after the other."""
    steps = 40

    def run(model, opt, losses, barrier=None):
        for i in range(steps):
            if barrier is not None:
                barrier.wait()               # interleave the two threads step by step
            losses.append(item_before_step(model, opt, i))

    sequential = []
    for seed in (1, 2):
        model, opt = make(seed)
        losses = []
        run(model, opt, losses)
        sequential.append(([p.numpy().copy() for p in model.parameters()], losses))

    pairs = [make(seed) for seed in (1, 2)]
    outs = [[], []]
    barrier = threading.Barrier(2)
    errors = []

    def target(k):
        try:
            run(*pairs[k], outs[k], barrier)
        except threading.BrokenBarrierError:   # the other thread failed: its error says why
            pass
        except BaseException:                # surfaced below, with the thread's traceback
            errors.append(traceback.format_exc())
            barrier.abort()
    threads = [threading.Thread(target=target, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, "\n".join(errors)
    for k in (0, 1):
        weights, losses = sequential[k]
        assert outs[k] == losses
        for p, w in zip(pairs[k][0].parameters(), weights):
            np.testing.assert_array_equal(p.numpy(), w)


def test_grad_mode_is_per_thread():
    seen = {}
    inside, leave = threading.Event(), threading.Event()

    def other():
        with af.no_grad():
            inside.set()
            leave.wait(5)
    t = threading.Thread(target=other)
    t.start()
    inside.wait(5)
    w = af.ones(2, requires_grad=True)
    seen["main"] = (w * 2).requires_grad
    leave.set()
    t.join()
    assert seen["main"] is True and af.is_grad_enabled()


def test_a_threads_written_values_are_landed_by_its_own_realizations_only():
    """`p.data += ...` leaves p written (its value pending) until this thread realizes: another
    thread's realization must not compute and land it, since this thread's cut may be reading
    p at that moment (that race broke the two-thread training above, once in a few dozen runs)."""
    from aneforge.core.trace import is_written
    p = af.ones(4)
    g = af.ones(4) * 0.5
    p.data += -0.1 * g
    assert is_written(p._node)
    done = []
    worker = threading.Thread(target=lambda: done.append((af.ones(3) * 2.0).sum().item()))
    worker.start()
    worker.join()
    assert done == [6.0] and is_written(p._node)
    assert p.tolist() == [0.9501953125] * 4 and not is_written(p._node)


def test_kept_recordings_are_per_thread():
    """A kept recording (F.cross_entropy's, an optimizer update, a backward walk, autoscale's
    scaling: recorded once, then re-recorded) holds its literals' nodes, which a realization
    turns into leaves: each thread keeps its own, so one thread's realization never changes a
    node another thread's cut is reading."""
    from aneforge import autograd
    from aneforge.core import autoscale
    from aneforge.core.trace import KeptStretches
    from aneforge.optim import optimizer
    from aneforge.tensor import core
    stores = [core._KEPT, autoscale._SCALINGS, autograd._WALKS, optimizer._UPDATES]
    assert all(isinstance(k, KeptStretches) for k in stores)
    for k in stores:
        k.by_key["made here"] = None
    seen = []
    worker = threading.Thread(target=lambda: seen.extend("made here" in k.by_key for k in stores))
    worker.start()
    worker.join()
    assert seen == [False] * 4 and all("made here" in k.by_key for k in stores)
    for k in stores:
        del k.by_key["made here"]
