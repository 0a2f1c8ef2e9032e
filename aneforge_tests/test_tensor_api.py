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


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int16, np.int64])
def test_tensor_holds_a_copy_of_its_data(dtype):
    """af.tensor copies: writing into the source array (or reading the tensor's own array
    into a new tensor) leaves the tensor as it was, whether or not its dtype needed a cast."""
    data = np.arange(6, dtype=dtype).reshape(2, 3)
    t = af.tensor(data)
    data[0, 0] = 5
    assert t.numpy()[0, 0] == 0
    again = af.tensor(t)
    assert not np.shares_memory(again.numpy(), t.numpy())


def test_float32_data_is_rounded_as_numpy_rounds_it_to_float16():
    """The compiled float32 -> float16 cast af.tensor uses gives numpy's values: ties to
    even, overflow to inf, subnormals, signed zeros, NaN."""
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32)
    special = np.array([65504, 65519.99, 65520, -65520, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -24,
                        1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, -0.0, np.nan, np.inf], np.float32)
    data = np.concatenate([bits.view(np.float32), special]).reshape(-1, 4)   # axes <= 65536
    with np.errstate(over="ignore"):
        want = data.astype(np.float16)
    got = af.tensor(data).numpy()
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.view(np.uint16)[~np.isnan(want)],
                                  want.view(np.uint16)[~np.isnan(want)])
    assert np.isnan(got[np.isnan(want)]).all()
