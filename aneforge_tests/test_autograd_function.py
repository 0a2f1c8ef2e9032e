"""Custom gradients as torch.autograd.Function: the same class body runs in both libraries
(forward values and gradients compared), in ctx-style and torch 2's setup_context style."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import aneforge as af


def _functions(lib):
    class ClampGrad(lib.autograd.Function):       # identity forward, clipped gradient
        @staticmethod
        def forward(ctx, x, limit):
            ctx.limit = limit
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g.clamp(-ctx.limit, ctx.limit), None

    class MulAdd(lib.autograd.Function):          # two outputs, saved tensors
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w, x + w

        @staticmethod
        def backward(ctx, ga, gb):
            x, w = ctx.saved_tensors
            return ga * w + gb, (ga * x + gb).sum(0)

    class Reverse(lib.autograd.Function):         # torch 2 style: a gradient reversal layer
        @staticmethod
        def forward(x, lam):
            return x * 1.0

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.lam = inputs[1]

        @staticmethod
        def backward(ctx, g):
            return -ctx.lam * g, None

    class StraightThrough(lib.autograd.Function):  # round forward, identity backward
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, g):
            return g

    return ClampGrad, MulAdd, Reverse, StraightThrough


X = [[1.0, 2.0, -3.0], [0.5, 0.25, 4.0]]
W = [2.0, -1.0, 0.5]


def _run(lib):
    clamp, muladd, reverse, st = _functions(lib)
    x = lib.tensor(X, requires_grad=True)
    w = lib.tensor(W, requires_grad=True)
    a, b = muladd.apply(x, w)
    y = (clamp.apply(a, 1.5) * lib.tensor([0.5, 3.0, -4.0])).sum() \
        + (reverse.apply(b, 0.3) ** 2).sum() + (st.apply(x * 1.7) * w).sum()
    y.backward()
    return float(y.item()), x.grad.numpy(), w.grad.numpy()


def test_forward_and_gradients_are_torchs():
    want, got = _run(torch), _run(af)
    assert got[0] == pytest.approx(want[0], rel=2e-3)
    for g, t in zip(got[1:], want[1:]):
        np.testing.assert_allclose(np.asarray(g, np.float32), t, rtol=2e-3, atol=2e-3)


def test_a_nonlinear_backward_sees_torch_scale_gradients():
    """Automatic scaling multiplies the walk's cotangents by S: a backward that clips them must
    see torch's values, or it would clip S times too much."""
    clamp = _functions(af)[0]
    x = af.tensor([1.0, 2.0], requires_grad=True)
    (clamp.apply(x, 1.0) * af.tensor([0.5, 3.0])).sum().backward()
    assert af.amp.auto_scaler().scale > 1
    assert x.grad.tolist() == [0.5, 1.0]


def test_unused_outputs_get_zeros_or_none():
    seen = []

    class Two(af.autograd.Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 2.0, x * 3.0

        @staticmethod
        def backward(ctx, ga, gb):
            seen.append(gb)
            return ga * 2.0, None

    for materialize in (True, False):
        x = af.tensor([1.0, 2.0], requires_grad=True)
        a, _ = Two.apply(x, materialize)
        a.sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]
    assert seen[0].tolist() == [0.0, 0.0] and seen[1] is None


def test_non_differentiable_outputs_and_no_grad():
    class ArgMaxToo(af.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax()
            ctx.mark_non_differentiable(idx)
            return x * 2.0, idx

        @staticmethod
        def backward(ctx, g, _):
            return g * 2.0

    x = af.tensor([1.0, 5.0, 2.0], requires_grad=True)
    y, idx = ArgMaxToo.apply(x)
    assert not idx.requires_grad and y.requires_grad and idx.item() == 1
    with af.no_grad():
        assert not ArgMaxToo.apply(x)[0].requires_grad


def test_wrong_number_of_gradients_is_torchs_error():
    class Bad(af.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    x = af.tensor([1.0], requires_grad=True)
    with pytest.raises(af.AneforgeError, match="incorrect number of gradients"):
        Bad.apply(x, af.tensor([2.0])).sum().backward()
    with pytest.raises(TypeError, match="can only save variables"):
        class Saves(af.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x, 3)
                return x
        Saves.apply(x)


def test_a_training_step_with_a_custom_function_replays():
    reverse = _functions(af)[2]
    w = af.nn.Parameter(af.tensor([0.5, -1.0]))
    opt = af.optim.SGD([w], lr=0.1)

    @af.compile
    def step(x):
        opt.zero_grad()
        loss = (reverse.apply(w * x, 0.5) ** 2).sum()
        loss.backward()
        opt.step()
        return loss

    eager = af.tensor([0.5, -1.0])
    for _ in range(3):
        step(af.tensor([1.0, 2.0]))
        g = -0.5 * 2 * (eager * af.tensor([1.0, 2.0])) * af.tensor([1.0, 2.0])
        eager = eager - 0.1 * g
    np.testing.assert_allclose(w.numpy(), eager.numpy(), rtol=1e-3)
