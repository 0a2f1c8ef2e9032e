"""torch conveniences beyond the op table: var/std, any/all, masked_fill, clone, devices."""
import numpy as np
import pytest
import torch

import aneforge as af

X = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float16)


def pair():
    return af.tensor(X), torch.tensor(X.astype(np.float32))


@pytest.mark.parametrize("fn", [
    lambda t: t.var(1), lambda t: t.var(), lambda t: t.var(0, keepdim=True, correction=0),
    lambda t: t.std(1), lambda t: t.std(unbiased=False),
    lambda t: t.masked_fill(t > 0, -1.0),
])
def test_float_conveniences_match_torch(fn):
    a, t = pair()
    np.testing.assert_allclose(fn(a).numpy().astype(np.float32), fn(t).numpy(), rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("fn", [lambda t: (t > 0).any(1), lambda t: (t > -5).all(),
                                lambda t: (t > 1).any(), lambda t: (t > 0).all(0, keepdim=True)])
def test_any_all_match_torch(fn):
    a, t = pair()
    assert fn(a).tolist() == fn(t).tolist()


def test_clone_keeps_gradients_and_devices_are_accepted():
    w = af.tensor(X, requires_grad=True)
    (g,) = af.grad((w.clone() * 2.0).sum(), w)
    assert g.tolist() == np.full(X.shape, 2.0).tolist()
    assert w.to("cpu") is w and w.cpu() is w and w.contiguous() is w
    assert w.to("cpu", af.float32).dtype == af.float32
    assert w.to(device="ane", dtype="float32").dtype == af.float32


def test_inference_mode_is_no_grad():
    from aneforge.autograd import inference_mode
    w = af.tensor(X, requires_grad=True)
    with inference_mode():
        assert not (w * 2.0).requires_grad
