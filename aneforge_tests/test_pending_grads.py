"""Pending gradients realize together: reading N parameters' `.grad` one by one after
backward() runs one program, not N."""
import numpy as np
import torch

import aneforge as af
import aneforge.nn as nn


def _chain(n):
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((4, 4)).astype(np.float32) * 0.5 for _ in range(n)]
    x = rng.standard_normal((2, 4)).astype(np.float32)
    return ws, x


def test_reading_sixteen_grads_runs_one_program():
    ws, x = _chain(16)
    ps = [nn.Parameter(af.tensor(w)) for w in ws]
    y = af.tensor(x)
    for p in ps:
        y = (y @ p).tanh()
    y.sum().backward()
    af.clear_cache()
    grads = [p.grad.numpy() for p in ps]
    info = af.cache_info()
    assert info.hits + info.misses == 1, info
    tps = [torch.tensor(w, requires_grad=True) for w in ws]
    ty = torch.tensor(x)
    for p in tps:
        ty = (ty @ p).tanh()
    ty.sum().backward()
    for g, p in zip(grads, tps):
        np.testing.assert_allclose(g.astype(np.float32), p.grad.numpy(), atol=2e-2, rtol=2e-2)


def test_a_second_backward_keeps_its_own_program():
    """Only the record whose gradient is read joins: another backward's grads stay pending."""
    a = nn.Parameter(af.ones(3))
    b = nn.Parameter(af.ones(3))
    (a * 2).sum().backward()
    (b * 3).sum().backward()
    assert a.grad.tolist() == [2.0, 2.0, 2.0]
    assert b.grad.ref[0].data is None
    assert b.grad.tolist() == [3.0, 3.0, 3.0]
