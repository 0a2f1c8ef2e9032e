"""Loops that read nothing each step: torch's "Learning PyTorch with Examples" tutorials train
with hand-written updates (`with torch.no_grad(): p -= lr * p.grad`) and print the loss every
100 steps. Each step's update must still run as one program of one step's size, the same
program every step (compiled once), not one program of 100 chained steps at the print."""
import math

import numpy as np
import pytest

import aneforge as af


def _polynomial(steps, read_every, update="no_grad"):
    """torch's polynomial_nn tutorial (y = sin x fitted by a cubic), shortened; the loss is
    read every `read_every` steps. Returns the losses read, the weights, the cache stats."""
    af.manual_seed(0)
    x = af.linspace(-math.pi, math.pi, 200)
    y = af.sin(x)
    xx = x.unsqueeze(-1).pow(af.tensor([1, 2, 3]))
    model = af.nn.Sequential(af.nn.Linear(3, 1), af.nn.Flatten(0, 1))
    loss_fn = af.nn.MSELoss(reduction="mean")
    af.clear_cache()
    losses = []
    for t in range(steps):
        loss = loss_fn(model(xx), y)
        if t % read_every == read_every - 1:
            losses.append(loss.item())
        model.zero_grad()
        loss.backward()
        if update == "data":
            for p in model.parameters():
                p.data += -2e-3 * p.grad
        else:
            with af.no_grad():
                for p in model.parameters():
                    p -= 2e-3 * p.grad
    weights = [p.detach().numpy().copy() for p in model.parameters()]
    return losses, weights, af.cache_info()


@pytest.mark.parametrize("update", ["no_grad", "data"])
def test_an_unread_loop_runs_one_program_a_step_compiled_once(update):
    losses, weights, info = _polynomial(40, 20, update)
    every_step, every_weights, _ = _polynomial(40, 1, update)
    assert losses == every_step[19::20]                 # the same bits as reading every step
    for a, b in zip(weights, every_weights):
        np.testing.assert_array_equal(a, b)
    assert 40 <= info.hits + info.misses <= 42          # a program a step, not 20 chained
    assert info.misses <= 5                             # compiled once, not once a step


def test_two_writes_in_one_step_run_in_the_same_program():
    """Writing a handle twice with no backward between (weight decay, then the update) is one
    step's work: no program runs between the two writes."""
    w = af.nn.Parameter(af.tensor([1.0, 2.0]))
    (w * w).sum().backward()
    af.clear_cache()
    with af.no_grad():
        w -= 0.1 * w
        w -= 0.5 * w.grad
    assert af.cache_info().misses == 0
    np.testing.assert_allclose(w.tolist(), [0.9 - 1.0, 1.8 - 2.0], atol=1e-3)
    assert af.cache_info().misses == 1
