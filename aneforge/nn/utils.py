"""torch.nn.utils: gradient clipping."""
from __future__ import annotations

from ..autograd import no_grad
from ..tensor.reduce import reduce
from ..tensor import Tensor
from ..creation import tensor


def _norm(g: Tensor) -> Tensor:
    """||g||_2 without overflowing fp16: scale by the largest |g| first (sum of squares of raw
    fp16 gradients passes 65504 quickly)."""
    peak = g.abs().amax().maximum(2.0 ** -24)
    s = g / peak
    return reduce(s * s).sqrt() * peak


@no_grad()
def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0) -> Tensor:
    """Scale gradients so their global 2-norm is at most `max_norm`; returns the norm (lazy).

    >>> import aneforge as af
    >>> w = af.nn.Parameter(af.ones(4))
    >>> (w * 3).sum().backward()
    >>> round(af.nn.utils.clip_grad_norm_([w], 1.0).item(), 2)
    6.0
    >>> [round(v, 2) for v in w.grad.tolist()]
    [0.5, 0.5, 0.5, 0.5]
    """
    if norm_type != 2.0:
        raise NotImplementedError("only norm_type=2 is supported")
    params = [p for p in ([parameters] if isinstance(parameters, Tensor) else parameters)
              if p.grad is not None]
    if not params:
        return tensor(0.0)
    norms = [_norm(p.grad) for p in params]
    total = norms[0]
    for n in norms[1:]:
        peak = total.maximum(n).maximum(2.0 ** -24)
        a, b = total / peak, n / peak
        total = (a * a + b * b).sqrt() * peak
    coef = (total + 1e-6).reciprocal() * max_norm
    coef = coef.minimum(1.0)
    for p in params:
        p.grad = p.grad * coef
    return total
