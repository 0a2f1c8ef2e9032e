"""Torch behaviours the op table's random data does not reach: special values, duplicate
indices, dtypes kept, torch's refusals (issue 23's silent wrong answers), checked against torch."""
import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn.functional as F
from aneforge import _api
from aneforge.errors import DTypeError

INF, NAN = float("inf"), float("nan")


def _both(fn, *values, dtype=None):
    """fn on aneforge and on torch, as numpy arrays."""
    a = fn(af, *[af.tensor(v, dtype=dtype) for v in values])
    t = fn(torch, *[torch.tensor(v) for v in values])
    return a.numpy(), t.numpy()


def test_copysign_of_negative_zero_under_ieee_specials():
    with af.numerics(specials="ieee"):
        a, t = _both(lambda m, x, y: m.copysign(x, y), [INF, 1.0, -INF, 2.0], [-0.0, -0.0, 0.0, -3.0])
    np.testing.assert_array_equal(a, t)


def test_copysign_engine_rule_reads_negative_zero_as_positive():
    """The engine computes 1 / -0 = +inf (ane-guide numerics chapter): -0.0 has no sign there."""
    got = af.tensor([INF, 1.0]).copysign(af.tensor([-0.0, -0.0])).tolist()
    assert got == [INF, 1.0]


@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose_special_values_match_torch(equal_nan):
    x = [INF, -INF, INF, 1.0, NAN, 1.0, NAN, 3.0]
    y = [INF, -INF, -INF, INF, NAN, 1.0 + 1e-6, 1.0, 3.001]
    with af.numerics(specials="ieee"):
        a, t = _both(lambda m, p, q: m.isclose(p, q, equal_nan=equal_nan), x, y)
    np.testing.assert_array_equal(a, t)


def test_linspace_of_one_step_is_start():
    assert af.linspace(2.0, 5.0, 1).tolist() == torch.linspace(2.0, 5.0, 1).tolist() == [2.0]
    assert af.linspace(2.0, 5.0, 2).tolist() == [2.0, 5.0]


def test_scatter_duplicates_write_the_last_value():
    index = [[0, 1, 0, 2], [1, 1, 2, 2]]
    src = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = af.zeros(3, 4).scatter(0, af.tensor(index), af.tensor(src))
    want = torch.zeros(3, 4).scatter(0, torch.tensor(index), torch.tensor(src))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    along = af.zeros(2, 3).scatter(1, af.tensor([[0, 0, 2], [1, 1, 1]]), af.tensor(src[:, :3]))
    assert along.tolist() == [[1.0, 0.0, 2.0], [0.0, 6.0, 0.0]]


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_reduce_argument_follows_torch(reduce):
    index, src = [0, 0, 2, 0], [2.0, 3.0, 0.5, -1.0]
    got = af.full((3,), 1.5).scatter(0, af.tensor(index), af.tensor(src), reduce=reduce)
    want = torch.full((3,), 1.5).scatter(0, torch.tensor(index), torch.tensor(src), reduce=reduce)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    value = af.ones(3).scatter(0, af.tensor([1, 1]), value=2.0, reduce=reduce)
    assert value.tolist() == torch.ones(3).scatter(0, torch.tensor([1, 1]), 2.0,
                                                   reduce=reduce).tolist()


def test_scatter_reduce_names_its_choices():
    with pytest.raises(ValueError, match="'add' or 'multiply'"):
        af.ones(3).scatter(0, af.tensor([1]), af.ones(1), reduce="sum")


@pytest.mark.parametrize("mode,size", [("nearest", (4, 6)), ("bilinear", (3, 5))])
def test_interpolate_keeps_uint8(mode, size):
    x = np.random.default_rng(0).integers(0, 256, (1, 2, 2, 3)).astype(np.uint8)
    got = F.interpolate(af.tensor(x, dtype=af.uint8), size=size, mode=mode)
    want = torch.nn.functional.interpolate(torch.tensor(x), size=size, mode=mode)
    assert got.dtype == af.uint8 and want.dtype == torch.uint8
    # torch's uint8 linear path rounds fixed-point weights per axis: within 1 of it
    assert np.abs(got.numpy().astype(int) - want.numpy().astype(int)).max() <= (mode != "nearest")


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(RuntimeError, match="floating point"):
        torch.tensor([1, 2, 3], requires_grad=True)
    with pytest.raises(DTypeError, match="Only Tensors of floating point"):
        af.tensor([1, 2, 3], requires_grad=True)
    assert af.tensor([1.0, 2.0], requires_grad=True).requires_grad


# ---- a missing name says so, and what to use instead ------------------------------------------
def _message(get) -> str:
    with pytest.raises(AttributeError) as info:
        get()
    return str(info.value)


HOOKED = {"torch": af, "Tensor": af.ones(1), "F": F, "nn": af.nn}    # surfaces with the hook


@pytest.mark.parametrize("surface,name,why", [r for r in _api.ABSENT if r[0] in HOOKED],
                         ids=lambda v: str(v)[:20])
def test_names_left_out_on_purpose_say_why(surface, name, why):
    assert f"{name} is not in aneforge: {why}" in _message(lambda: getattr(HOOKED[surface], name))


@pytest.mark.parametrize("owner,name,advice", [
    (af, "gelu", "aneforge has aneforge.nn.functional.gelu"),
    (af, "sigmoidd", "similar: sigmoid"),
    (F, "exp", "aneforge has aneforge.exp and Tensor.exp"),
    (af.nn, "Bilinear", "torch.nn.Bilinear is not in aneforge (yet)"),
    (af.ones(1), "foo", "torch.Tensor.foo is not in aneforge (yet)"),
    (af.ones(1), "sin_", "write x = x.sin(...)"),
])
def test_missing_names_give_advice(owner, name, advice):
    assert advice in _message(lambda: getattr(owner, name))


def test_missing_names_keep_hasattr_and_real_attributes():
    assert not hasattr(af, "fft") and not hasattr(F, "grid_sample") and not hasattr(af.optim, "LBFGS")
    assert not hasattr(af.ones(1), "exp_")
    assert hasattr(af, "exp") and hasattr(F, "gelu") and hasattr(af.nn, "Linear")
    assert af.ones(2).exp().shape == (2,)
    # probes of private and special names get Python's plain message, not torch advice
    assert "torch" not in _message(lambda: af.ones(1).__array_foo__)
    assert "torch" not in _message(lambda: af._no_such_thing)


@pytest.mark.parametrize("name,at", [("log1p", 1.0), ("sinh", 1.0), ("sinh", -1.0), ("asinh", 1.0),
                                     ("asinh", -1.0), ("acosh", 2.0), ("atan", 1.0),
                                     ("atan", 0.4140625), ("cosh", 1.0)])
def test_composites_keep_the_whole_gradient_on_their_branch_bounds(name, at):
    """Where a composite switches formulas, the value on the switch point gets its whole
    gradient (a maximum/minimum clamp would halve it there)."""
    x = af.tensor([at], requires_grad=True)
    got = af.grad(getattr(x, name)().sum(), [x])[0].numpy()
    t = torch.tensor([at], requires_grad=True)
    getattr(t, name)().sum().backward()
    np.testing.assert_allclose(got, t.grad.numpy(), rtol=2.0 ** -9)


@pytest.mark.parametrize("name", ["asin", "acos", "atan", "atanh", "asinh", "sinh", "tan"])
def test_odd_composites_keep_their_gradient_at_zero(name):
    """Built as t(|x|) with x's sign put back: abs's gradient at 0 is 0, which once made
    asin's and atanh's gradient at 0 read 0 (torch: 1)."""
    x = af.tensor([0.0, -0.0], requires_grad=True)
    got = af.grad(getattr(x, name)().sum(), [x])[0].numpy()
    t = torch.tensor([0.0, -0.0], requires_grad=True)
    getattr(t, name)().sum().backward()
    np.testing.assert_array_equal(got, t.grad.numpy())


@pytest.mark.parametrize("name", ["asin", "acos", "atanh"])
def test_inverse_trig_at_the_domain_ends_matches_torch(name):
    """Value and gradient at -1, 1 and next to them, under the default numerics: the gradient
    at +-1 is inf as in torch (it read 0: atan's far branch met sqrt's inf as 0 * inf), and the
    finite gradients beside it keep their precision (an inf at every loss scale keeps the run
    at torch's scale, not the lowest rung)."""
    ends = np.array([-1.0, -0.99951171875, -1e-3, 6.1e-4, 0.5, 0.99951171875, 1.0], np.float32)
    x = af.tensor(ends, requires_grad=True)
    y = getattr(x, name)()
    y.sum().backward()
    t = torch.tensor(ends, requires_grad=True)
    ty = getattr(t, name)()
    ty.sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=4e-3)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=4e-3)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_of_a_constant_cotangent_has_a_zero_gradient(dim):
    """softmax(x).sum() is 1 whatever x: torch's gradient is 0 to 1e-9; the fp16 y's sum is 1
    only to its roundings, which once showed through as 2.4e-4."""
    x = af.tensor(np.random.default_rng(0).uniform(-2, 2, (6, 7, 9)).astype(np.float32),
                  requires_grad=True)
    x.softmax(dim).sum().backward()
    assert np.abs(x.grad.numpy()).max() == 0


def test_scatter_duplicates_get_torchs_gradient():
    index, src = [0, 0, 2, 0], np.array([2.0, 3.0, 0.5, -1.0], np.float32)
    a = af.tensor(src, requires_grad=True)
    got = af.grad((af.zeros(3).scatter(0, af.tensor(index), a) * af.tensor([1.0, 2.0, 3.0])).sum(),
                  [a])[0]
    t = torch.tensor(src, requires_grad=True)
    (torch.zeros(3).scatter(0, torch.tensor(index), t) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(got.numpy(), t.grad.numpy())


def test_bitwise_ops_are_exact_beyond_int16_inside_a_program():
    """int32 operands up to 2**23 (results are read back divided, to cross the boundary)."""
    a, b = [3000, -7000, 8388, -8000], [-1, 4095, 9999, -8191]       # times 1000 and 511
    for op in ("__and__", "__or__", "__xor__"):
        got = getattr(af.tensor(a) * 1000, op)(af.tensor(b) * 511) // 512
        want = getattr(torch.tensor(a, dtype=torch.int32) * 1000, op)(
            torch.tensor(b, dtype=torch.int32) * 511)
        assert got.tolist() == (want // 512).tolist(), op


@pytest.mark.parametrize("name,extra", [("zeros_like", ()), ("ones_like", ()),
                                        ("full_like", (2.5,)), ("rand_like", ()),
                                        ("randn_like", ())])
def test_like_creators_take_dtype_and_requires_grad(name, extra):
    x = af.ones(2, 3, dtype=af.float32)
    made = getattr(af, name)(x, *extra, dtype=af.float16, requires_grad=True)
    want = getattr(torch, name)(torch.ones(2, 3), *extra, dtype=torch.float16, requires_grad=True)
    assert made.shape == tuple(want.shape) and made.dtype == af.float16 and made.requires_grad
    assert made.is_leaf and getattr(af, name)(x, *extra).dtype == af.float32
    if name != "rand_like" and name != "randn_like":
        np.testing.assert_array_equal(made.numpy(), want.detach().numpy())


def test_conv3d_module_matches_torch_with_its_weights():
    torch.manual_seed(0)
    theirs = torch.nn.Conv3d(2, 4, (2, 3, 3), stride=(1, 2, 1), padding=1)
    ours = af.nn.Conv3d(2, 4, (2, 3, 3), stride=(1, 2, 1), padding=1)
    assert ours.weight.shape == tuple(theirs.weight.shape)
    ours.weight = af.nn.Parameter(af.tensor(theirs.weight.detach().numpy()))
    ours.bias = af.nn.Parameter(af.tensor(theirs.bias.detach().numpy()))
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 5, 4)).astype(np.float16)
    want = theirs(torch.tensor(x.astype(np.float32))).detach().numpy()
    np.testing.assert_allclose(ours(af.tensor(x)).numpy(), want, atol=0.02, rtol=0.01)


def test_avg_pool3d_refuses_what_it_cannot_do():
    with pytest.raises(af.AneforgeError, match="ceil_mode"):
        F.avg_pool3d(af.ones(1, 1, 3, 3, 3), 2, ceil_mode=True)


@pytest.mark.parametrize("kw", [dict(min=0.0), dict(max=1.0), dict(min=0.5, max=0.5),
                                dict(min=2.0, max=1.0)])
def test_clamp_keeps_the_whole_gradient_on_a_bound(kw):
    """torch passes a value's gradient through when it equals a bound; maximum/minimum split it."""
    x0 = np.array([-2.0, 0.0, 0.5, 3.0, 1.0], np.float32)
    xt = torch.tensor(x0, requires_grad=True)
    xt.clamp(**kw).sum().backward()
    xa = af.tensor(x0, requires_grad=True)
    y = xa.clamp(**kw)
    y.sum().backward()
    assert y.tolist() == xt.clamp(**kw).tolist() and xa.grad.tolist() == xt.grad.tolist()


def test_clamp_with_a_tensor_bound_sends_the_gradient_to_the_winner():
    x0, m0 = np.array([-2.0, 0.0, 0.5], np.float32), np.array([0.0, 1.0, 0.0], np.float32)
    xa, ma = af.tensor(x0, requires_grad=True), af.tensor(m0, requires_grad=True)
    xa.clamp(min=ma).sum().backward()
    xt, mt = torch.tensor(x0, requires_grad=True), torch.tensor(m0, requires_grad=True)
    xt.clamp(min=mt).sum().backward()
    assert xa.grad.tolist() == xt.grad.tolist() and ma.grad.tolist() == mt.grad.tolist()


def test_attention_takes_a_float_mask_of_another_float_dtype():
    """torch's word_language_model builds its causal mask in float32 (`masked_fill(...,
    float('-inf'))`) for an fp16/fp32-agnostic model: the mask is added as the query's dtype."""
    rng = np.random.default_rng(0)
    q, k, v = [rng.standard_normal((2, 4, 5, 8)).astype(np.float32) for _ in range(3)]
    tmask = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
    amask = af.tensor(tmask.numpy(), dtype=af.float32)
    a = [af.tensor(x, requires_grad=True) for x in (q, k, v)]
    t = [torch.tensor(x, requires_grad=True) for x in (q, k, v)]
    ya = F.scaled_dot_product_attention(*a, attn_mask=amask)
    yt = torch.nn.functional.scaled_dot_product_attention(*t, attn_mask=tmask)
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), atol=4e-3)
    (ya * ya).sum().backward()
    (yt * yt).sum().backward()
    for x, y in zip(a, t):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), atol=2e-2, rtol=1e-2)
