"""cross_entropy / nll_loss with host labels none of which is ignore_index, recorded for
gradients, record no mask and no count (`losses._class_loss(every=True)`): the same bits as
the masked route, which a computed target (data the program reads), a call without gradients
(an export's) and af.compile's capture still take, and torch's values either way."""
import contextlib

import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn.functional as F
from aneforge.core.realization import recording


def _logits(seed=0, shape=(8, 5)):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float16)


def _loss_and_grad(logits, target, computed: bool, **kw):
    x = af.tensor(logits, requires_grad=True)
    t = af.tensor(target)
    t = t + 0 if computed else t              # a computed target: the program reads its values
    with recording() as runs:
        loss = F.cross_entropy(x, t, **kw)
        loss.sum().backward()
        got = loss.numpy(), x.grad.numpy()
    return got, [op.type for op in runs[0].traced.operations]


@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"reduction": "none"},
                                {"label_smoothing": 0.1}])
def test_host_labels_none_ignored_skip_the_mask_with_the_same_bits(kw):
    logits, target = _logits(), np.array([0, 4, 2, 2, 1, 3, 0, 4])
    (loss, grad), ops = _loss_and_grad(logits, target, computed=False, **kw)
    (loss2, grad2), ops2 = _loss_and_grad(logits, target, computed=True, **kw)
    assert "not_equal" not in ops and "not_equal" in ops2           # the mask: only when read
    assert len(ops) < len(ops2)
    assert loss.tobytes() == loss2.tobytes() and grad.tobytes() == grad2.tobytes()
    tx = torch.tensor(logits.astype(np.float32), requires_grad=True)
    want = torch.nn.functional.cross_entropy(tx, torch.tensor(target), **kw)
    want.sum().backward()
    np.testing.assert_allclose(loss.astype(np.float32), want.detach().numpy(), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(grad.astype(np.float32), tx.grad.numpy(), rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("target, ignore_index", [([0, -100, 2, -100, 1, 3, 0, 4], -100),
                                                  ([0, 2, 2, 2, 1, 3, 0, 4], 2),
                                                  ([0, 1, 1, 4, 1, 3, 0, 4], 2)])
def test_ignored_or_ignorable_labels_keep_the_mask_and_torchs_values(target, ignore_index):
    """A label equal to ignore_index is dropped (the mean over the others); an ignore_index
    inside the classes keeps the mask even when no label equals it (not checked per value)."""
    logits, target = _logits(1), np.array(target)
    (loss, grad), ops = _loss_and_grad(logits, target, computed=False, ignore_index=ignore_index)
    assert "not_equal" in ops
    tx = torch.tensor(logits.astype(np.float32), requires_grad=True)
    want = torch.nn.functional.cross_entropy(tx, torch.tensor(target), ignore_index=ignore_index)
    want.backward()
    np.testing.assert_allclose(loss.astype(np.float32), want.detach().numpy(), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(grad.astype(np.float32), tx.grad.numpy(), rtol=2e-2, atol=2e-3)


def test_a_kept_cross_entropy_tells_labels_with_and_without_ignored_ones_apart():
    """The kept recording is keyed by whether any label is ignored: alternating batches of one
    shape, with and without ignored labels, each get their own loss."""
    logits = _logits(2)
    batches = [np.array([0, 4, 2, 2, 1, 3, 0, 4]), np.array([0, -100, -100, -100, 1, 3, 0, 4])]
    for _ in range(2):
        for target in batches:
            x = af.tensor(logits, requires_grad=True)
            loss = F.cross_entropy(x, af.tensor(target))
            loss.backward()
            want = torch.nn.functional.cross_entropy(
                torch.tensor(logits.astype(np.float32)), torch.tensor(target))
            np.testing.assert_allclose(loss.item(), want.item(), rtol=2e-3, atol=2e-3)


def test_nll_loss_with_host_labels_skips_the_mask_with_the_same_bits():
    logp = np.log(np.random.default_rng(3).dirichlet(np.ones(5), 6)).astype(np.float16)
    target = np.array([1, 0, 4, 4, 2, 3])
    results = []
    for computed in (False, True):
        x = af.tensor(logp, requires_grad=True)
        t = af.tensor(target)
        loss = F.nll_loss(x, t + 0 if computed else t)
        loss.backward()
        results.append((loss.numpy().tobytes(), x.grad.numpy().tobytes()))
    assert results[0] == results[1]
    want = torch.nn.functional.nll_loss(torch.tensor(logp.astype(np.float32)), torch.tensor(target))
    np.testing.assert_allclose(np.frombuffer(results[0][0], np.float16).astype(np.float32),
                               want.numpy(), rtol=2e-3)


def test_a_compiled_loss_captured_on_clean_labels_still_drops_ignored_ones_on_replay():
    """af.compile replays the captured program with new labels: the labels of the call it
    captured cannot decide that nothing will be ignored."""
    logits = _logits(4)
    step = af.compile(lambda x, y: F.cross_entropy(x, y))
    batches = [np.array([0, 4, 2, 2, 1, 3, 0, 4]), np.array([0, -100, -100, 2, 1, 3, 0, 4])]
    for target in batches + batches:
        got = step(af.tensor(logits), af.tensor(target)).item()
        want = torch.nn.functional.cross_entropy(torch.tensor(logits.astype(np.float32)),
                                                 torch.tensor(target))
        np.testing.assert_allclose(got, want.item(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("how", ["no_grad", "constant logits"])
def test_a_loss_recorded_without_gradients_keeps_the_mask(how):
    """What an export records (no gradients): a program others may run on other labels."""
    logits, target = _logits(5), np.array([0, 4, 2, 2, 1, 3, 0, 4])
    x = af.tensor(logits, requires_grad=how == "no_grad")
    with recording() as runs, af.no_grad() if how == "no_grad" else contextlib.nullcontext():
        loss = F.cross_entropy(x, af.tensor(target)).numpy()
    assert "not_equal" in [op.type for op in runs[0].traced.operations]
    want = torch.nn.functional.cross_entropy(torch.tensor(logits.astype(np.float32)),
                                             torch.tensor(target))
    np.testing.assert_allclose(loss.astype(np.float32), want.numpy(), rtol=2e-3, atol=2e-3)
