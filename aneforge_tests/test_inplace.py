"""In-place ops and torch's version check: a value a gradient rule needs, changed in place after
it was used, makes backward raise exactly where torch's does; `.data` and `requires_grad_`."""
import numpy as np
import pytest
import torch

import aneforge as af


def a_mul_saves_its_inputs(lib):
    x = lib.ones(3, requires_grad=True)
    y = x * 2
    z = y * y
    y.add_(1)
    z.sum().backward()


def an_add_saves_nothing(lib):
    x = lib.ones(3, requires_grad=True)
    y = x * 2
    z = y + 1
    y.add_(1)
    z.sum().backward()


def exp_saves_its_output(lib):
    x = lib.ones(3, requires_grad=True)
    y = x.exp()
    y.mul_(2)
    y.sum().backward()


def a_leaf_changed_under_no_grad(lib):
    w = lib.ones(3, requires_grad=True)
    z = (w * w).sum()
    with lib.no_grad():
        w.mul_(2)
    z.backward()


def a_constant_changed(lib):
    w = lib.ones(3, requires_grad=True)
    c = lib.ones(3)
    z = (w * c).sum()
    c.fill_(2)
    z.backward()


def the_source_of_a_saved_value_changed(lib):
    w = lib.ones(3, requires_grad=True)
    c = lib.ones(3)
    c2 = c * 2                      # mul saves c2, not c
    z = (w * c2).sum()
    c.zero_()
    z.backward()


def tanh_input_changed_after(lib):
    x = lib.ones(3, requires_grad=True)
    y = x.exp()
    z = y.tanh()                    # tanh saves its output: y changing does not matter...
    y.sub_(1)                       # ...but exp saved y as its output
    z.sum().backward()


def changed_after_a_clone(lib):
    x = lib.ones(3, requires_grad=True)
    y = x * 2
    z = y * y
    y = y.clone()
    y.add_(1)
    z.sum().backward()


def modified_then_used(lib):
    x = lib.ones(3, requires_grad=True)
    y = x * 2
    y.mul_(3)
    (y * y).sum().backward()


def chained_inplace_ops(lib):
    x = lib.ones(3, requires_grad=True)
    y = lib.tensor([0.5, 2.0, -3.0], requires_grad=True)
    z = x.clone().sub_(y).mul_(y).clamp_(-1, 1)   # each op's own rule may read what it replaces
    z.sum().backward()


def a_view_of_the_old_value_used_later(lib):
    x = lib.ones(3, requires_grad=True)
    y = x * 2
    w = y.sigmoid()
    y.zero_()
    (w * w).sum().backward()                       # sigmoid saved its output w, unchanged


CASES = [chained_inplace_ops, a_view_of_the_old_value_used_later, a_mul_saves_its_inputs,
         an_add_saves_nothing, exp_saves_its_output,
         a_leaf_changed_under_no_grad, a_constant_changed, the_source_of_a_saved_value_changed,
         tanh_input_changed_after, changed_after_a_clone, modified_then_used]


def outcome(fn, lib):
    try:
        fn(lib)
        return "ok"
    except (RuntimeError, af.AneforgeError) as e:
        assert "modified by an inplace operation" in str(e), e
        return "raises"


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_backward_after_inplace_matches_torch(fn):
    assert outcome(fn, af) == outcome(fn, torch)


def test_gradient_after_allowed_inplace_matches_torch():
    for lib in (af, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        y.mul_(3)
        (y * y).sum().backward()
        grad = np.asarray(x.grad.tolist())
        np.testing.assert_allclose(grad, [72.0, 144.0])


def test_data_writes_through_without_tracking():
    w = af.nn.Parameter(af.tensor([1.0, 2.0]))
    wt = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    for p in (w, wt):
        loss = (p * p).sum()
        p.data.mul_(2)                  # untracked: no version error, the grad uses the old value
        loss.backward()
        assert p.requires_grad and p.is_leaf
    assert w.tolist() == wt.tolist() == [2.0, 4.0]
    # The documented difference: aneforge's recorded graph keeps the value it read (SSA), torch's
    # saved tensor is the storage .data overwrote. Both put the gradient in the handle's .grad.
    assert w.grad.tolist() == [2.0, 4.0] and wt.grad.tolist() == [4.0, 8.0]
    w.data = af.tensor([5.0, 6.0])
    assert w.tolist() == [5.0, 6.0] and w.requires_grad and w.grad is not None
    w.data.copy_(np.zeros(2))
    assert w.tolist() == [0.0, 0.0]
    assert not w.data.requires_grad


def test_requires_grad_rules_follow_torch():
    x = af.ones(2)
    assert x.requires_grad_() is x and x.requires_grad
    with pytest.raises(af.AneforgeError, match="only be changed on a leaf"):
        (x * 2).requires_grad_(False)
    with pytest.raises(af.AneforgeError, match="only floating tensors"):
        af.tensor([1, 2]).requires_grad_()
    w = af.ones(2, requires_grad=True)
    with pytest.raises(af.AneforgeError, match="leaf tensor that requires grad"):
        w.add_(1)
    with af.no_grad():
        w.add_(1)
    assert w.tolist() == [2.0, 2.0] and w.requires_grad and w.is_leaf
