"""Gradients of every differentiable op against torch autograd, over the op table.

Each case's outputs are contracted with a random cotangent c (fp16 values):
L = sum_i <out_i, c_i>, and dL/d(input) is compared for every float input.

Tolerance: gradients chain several fp16 roundings (forward values the rule reuses, the rule's
own ops, broadcast sums), so a per-element relative bound is too tight near zero crossings.
The check is |g - g_torch| <= 2**-7 * (|g_torch| + max|g_torch|): about 8 fp16 ulps of the
element plus 8 ulps of the tensor's scale. A wrong rule misses by O(1) of the scale.
"""
import numpy as np
import pytest
import torch

import aneforge as af
from aneforge.ops.walls import check_walls
from optable import CASES, af_inputs, arrays, call, torch_inputs

RTOL = 2.0 ** -7

# Cases whose torch gradient differs by definition, not by precision.
SKIP = {
    # torch sends max(dim)'s gradient to the returned index only; amax splits ties: same here
    # without ties, but integer-valued inputs tie
}


def _gelu_tanh_table_error(xs):
    """gelu(approximate="tanh")'s rule d = (1 + t) / 2 + x (1 - t**2) k (1 + 3 c x**2) / 2 reads
    t = tanh(k (x + c x**3)) from M1's tanh table, whose published worst error is 0.0017
    (sbryngelson/ane-guide): d moves by up to 0.0017 |dd/dt|, and
    |dd/dt| <= 1/2 + |x| k (1 + 3 c x**2)."""
    x = np.minimum(np.abs(xs[0].astype(np.float64)), 10.0)       # the rule clamps x to +-10
    return 0.0017 * (0.5 + x * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x))


# Elementwise cases whose gradient rule reads an activation table: the table's error in the
# derivative, per element (times |cotangent|), on top of RTOL.
TABLE_ERROR = {"gelu_tanh": _gelu_tanh_table_error}


def differentiable(case) -> bool:
    xs = arrays(case)
    if not any(x.dtype.kind == "f" for x in xs):
        return False
    outs = call(case, torch, torch_inputs(xs, requires_grad=True))
    return any(o.dtype.is_floating_point and o.requires_grad for o in outs)


GRAD_CASES = [c for c in CASES if not c.bakes_inputs and c.grad and differentiable(c)]


def cotangents(outs, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(tuple(o.shape)).astype(np.float16) for o in outs]


def floats(outs):
    return [o for o in outs if o.dtype.is_floating_point]


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.name)
def test_gradients_match_torch(case):
    xs = arrays(case)
    t_in = torch_inputs(xs, requires_grad=True)
    t_out = [o for o in floats(call(case, torch, t_in)) if o.requires_grad]
    cs = cotangents(t_out, 1)
    t_loss = sum((o * torch.tensor(c.astype(np.float32))).sum() for o, c in zip(t_out, cs))
    t_grads = torch.autograd.grad(t_loss, [t for t in t_in if t.requires_grad], allow_unused=True)

    a_in = af_inputs(xs, requires_grad=True)
    a_out = [o for o in call(case, af, a_in) if o.dtype.is_float and o.requires_grad]
    assert len(a_out) == len(t_out), f"{case.name}: {len(a_out)} differentiable outputs"
    a_loss = None
    for o, c in zip(a_out, cs):
        term = (o * af.tensor(c)).sum()
        a_loss = term if a_loss is None else a_loss + term
    leaves = [t for t in a_in if t.requires_grad]
    a_grads = af.grad(a_loss, leaves, allow_unused=True)
    check_walls(af.program(*[g for g in a_grads if g is not None]))   # no ANE compile wall
    for i, (g, tg) in enumerate(zip(a_grads, t_grads)):
        if tg is None:
            assert g is None, f"{case.name}: input {i} has a gradient torch does not"
            continue
        want = tg.numpy().astype(np.float64)
        assert g is not None, f"{case.name}: input {i} got no gradient"
        assert g.shape == tuple(want.shape), f"{case.name}: grad shape {g.shape} vs {want.shape}"
        got = g.numpy().astype(np.float64)
        finite = np.isfinite(want)
        np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=f"{case.name} input {i}")
        scale = np.abs(want[finite]).max() if finite.any() else 0.0
        err = np.abs(got - want)[finite]
        tol = RTOL * (np.abs(want[finite]) + scale) + 2.0 ** -24
        if case.name in TABLE_ERROR:
            tol = tol + (TABLE_ERROR[case.name](xs) * np.abs(cs[0]))[finite]
        assert (err <= tol).all(), (f"{case.name} input {i}: worst error {err.max():.3g}, "
                                    f"scale {scale:.3g}\naneforge {got.ravel()[:6]}\n"
                                    f"torch    {want.ravel()[:6]}")


def test_gradient_table_reaches_every_rule():
    """Every op with a vjp rule is differentiated by some case above (or by a case below)."""
    from aneforge.ops import REGISTRY
    seen = set()
    for case in GRAD_CASES:
        visited = set()
        outs = call(case, af, af_inputs(arrays(case), requires_grad=True))
        stack = [o._node for o in outs if o.requires_grad]
        while stack:
            n = stack.pop()
            if id(n) in visited or not n.requires_grad:
                continue
            visited.add(id(n))
            if n.op is not None:
                seen.add(n.op)
                stack.extend(s for s, _ in n.refs())
    seen.add("linear")                  # const weights: covered in test_linear_rule
    seen.add("identity")                # only detach() records it, with gradients off
    missing = sorted(k for k, v in REGISTRY.items() if v.vjp is not None and k not in seen)
    assert not missing, f"no gradient case reaches {missing}"


def test_linear_rule():
    """MIL linear (constant weight) still passes gradients to x."""
    from aneforge.tensor import const, record_op
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(np.float16)
    w = rng.standard_normal((5, 4)).astype(np.float16)
    xa = af.tensor(x, requires_grad=True)
    y = record_op("linear", {"x": xa, "weight": const(w, af.float16)}, {})
    (gx,) = af.grad(y.sum(), xa)
    np.testing.assert_allclose(gx.numpy(), np.ones((3, 5)) @ w.astype(np.float32), rtol=2e-3)


@pytest.mark.parametrize("transpose", [True, False])
def test_a_matrix_shared_by_a_batch_gets_one_matmul_over_all_rows(transpose):
    """x [B, T, K] @ W (a linear layer's weight, or a plain matrix): W's gradient is one matmul
    over the B*T rows, as torch folds the batch into the rows; not B matmuls of T rows each
    whose fp16 results are then summed (less exact, and B kernel calls)."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 32, 16)).astype(np.float16)
    w = rng.standard_normal((24, 16) if transpose else (16, 24)).astype(np.float16)
    c = rng.standard_normal((8, 32, 24)).astype(np.float16)
    tw = torch.tensor(w.astype(np.float64), requires_grad=True)
    tx = torch.tensor(x.astype(np.float64))
    ty = tx @ tw.T if transpose else tx @ tw
    (want,) = torch.autograd.grad((ty * torch.tensor(c.astype(np.float64))).sum(), tw)
    aw = af.tensor(w, requires_grad=True)
    ay = af.nn.functional.linear(af.tensor(x), aw) if transpose else af.tensor(x) @ aw
    (gw,) = af.grad((ay * af.tensor(c)).sum(), aw)
    shapes = [tuple(op.inputs["x"].type.shape) for op in af.program(gw).operations
              if op.type == "matmul"]
    assert shapes == [(256, 24) if transpose else (256, 16)]
    want = want.numpy()
    np.testing.assert_allclose(gw.numpy(), want, rtol=2.0 ** -10, atol=2.0 ** -10 * np.abs(want).max())


MIL_ONLY = {"softplus": torch.nn.functional.softplus, "softsign": torch.nn.functional.softsign}


@pytest.mark.parametrize("op", sorted(MIL_ONLY))
def test_softplus_and_softsign_rules(op):
    """The MIL softplus and softsign ops (F.softplus / F.softsign are compositions) against torch:
    values and gradients, over both tails and past F.softplus's threshold 20."""
    from aneforge.tensor import record_op
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(0, 4, 60), [-30.0, -12.0, 0.0, 12.0, 25.0, 300.0]])
    x = x.astype(np.float16).reshape(6, 11)
    c = rng.standard_normal(x.shape).astype(np.float16)
    tx = torch.tensor(x.astype(np.float32), requires_grad=True)
    ty = MIL_ONLY[op](tx)
    (tg,) = torch.autograd.grad((ty * torch.tensor(c.astype(np.float32))).sum(), tx)
    ax = af.tensor(x, requires_grad=True)
    ay = record_op(op, {"x": ax}, {})
    (ag,) = af.grad((ay * af.tensor(c)).sum(), ax)
    want = ty.detach().numpy().astype(np.float64)
    np.testing.assert_allclose(ay.numpy(), want, rtol=2.0 ** -10, atol=2.0 ** -24)
    want_g = tg.numpy().astype(np.float64)   # softplus' rule reads M1's sigmoid table: 0.0034
    atol = 0.0034 * np.abs(c) if op == "softplus" else 2.0 ** -24
    err = np.abs(ag.numpy() - want_g)
    assert (err <= RTOL * (np.abs(want_g) + np.abs(want_g).max()) + atol).all(), err.max()


def test_broadcast_gradients_sum_back():
    x = af.tensor(np.ones((4, 1, 3)), requires_grad=True)
    b = af.tensor(np.ones(3), requires_grad=True)
    gx, gb = af.grad((x * b * 2.0).sum(), [x, b])
    assert gx.tolist() == np.full((4, 1, 3), 2.0).tolist()
    assert gb.tolist() == [8.0, 8.0, 8.0]


def test_backward_accumulates_and_zero_grad_resets():
    w = af.tensor([1.0, 2.0], requires_grad=True)
    (w * 3.0).sum().backward()
    (w * w).sum().backward()
    assert w.grad.tolist() == [5.0, 7.0]
    w.grad = None
    (w * 3.0).sum().backward()
    assert w.grad.tolist() == [3.0, 3.0]


def test_backward_needs_a_gradient_for_non_scalars():
    w = af.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(af.AneforgeError, match="gradient"):
        (w * 2.0).backward()
    (w * 2.0).backward(af.tensor([1.0, 0.5]))
    assert w.grad.tolist() == [2.0, 1.0]


def test_no_grad_and_detach():
    w = af.tensor([1.0], requires_grad=True)
    with af.no_grad():
        assert not (w * 2.0).requires_grad
    assert not (w * 2.0).detach().requires_grad
    assert not w.detach().requires_grad
    assert (w > 0).requires_grad is False           # bool results never carry gradients
    with pytest.raises(af.AneforgeError, match="does not require grad"):
        (w.detach() * 2.0).sum().backward()


def test_backward_graphs_never_multiply_a_reduce_by_zero():
    """The walls check runs on every compiled program; here a rule set that produces zeros
    after reductions (max, mean, sum, where) is realized end to end."""
    x = af.tensor(np.random.default_rng(0).standard_normal((4, 6)), requires_grad=True)
    y = af.where(x.amax(1, keepdim=True) > 0.5, x.mean(1, keepdim=True), x.sum(1, keepdim=True))
    loss = (y * x).relu().sum()
    (g,) = af.grad(loss, x)
    g.numpy()


@pytest.mark.parametrize("layer", ["matmul", "linear"])
def test_a_shared_matrix_gradient_past_the_axis_bound(layer):
    """A matrix shared by a batch whose rows (batch x tokens) pass the ANE's 65536 per axis:
    its gradient is one matmul per batch entry, summed, since the rows cannot fold into one
    axis; values are torch's."""
    rng = np.random.default_rng(5)
    xn = rng.uniform(-1, 1, (2, 33000, 4)).astype(np.float16).astype(np.float32)
    wn = rng.uniform(-1, 1, (3, 4)).astype(np.float16).astype(np.float32)
    gn = rng.uniform(-1, 1, (2, 33000, 3)).astype(np.float16).astype(np.float32) / 256
    grads = []
    for lib in (torch, af):
        x, w = lib.tensor(xn), lib.tensor(wn, requires_grad=True)
        y = x @ w.T if layer == "matmul" else lib.nn.functional.linear(x, w)
        (g,) = (af.autograd.grad if lib is af else torch.autograd.grad)(
            (y * lib.tensor(gn)).sum(), [w])
        grads.append(g.detach().numpy() if lib is torch else g.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=4e-3, atol=2e-3)
