"""torch's top-level spellings of nn.functional names whose signature differs from F's:
torch.embedding(weight, indices) against F.embedding(input, weight), torch's integer
`reduction` codes, ... (the rows marked `torch*` in aneforge/_api.py's table). af.X is bound
here; F.X is the implementation."""
from __future__ import annotations

from .nn import functional as F
from .tensor import Tensor


def embedding(weight: Tensor, indices: Tensor) -> Tensor:
    """torch.embedding(weight, indices): rows of `weight` picked by `indices`; the arguments
    are F.embedding(input, weight)'s, swapped.

    >>> import aneforge as af
    >>> af.embedding(af.tensor([[1.0, 2.0], [3.0, 4.0]]), af.tensor([1, 0])).tolist()
    [[3.0, 4.0], [1.0, 2.0]]
    """
    return F.embedding(indices, weight)


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.dropout(input, p, train): F.dropout(input, p, training=train).

    >>> import aneforge as af
    >>> af.dropout(af.ones(3), 0.5, False).tolist()
    [1.0, 1.0, 1.0]
    """
    return F.dropout(input, p, train)


_REDUCTIONS = ("none", "mean", "sum")       # torch's top-level reduction codes 0, 1, 2


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight=None, pos_weight=None,
                                     reduction: int = 1) -> Tensor:
    """torch.binary_cross_entropy_with_logits: F.binary_cross_entropy_with_logits with torch's
    top-level integer `reduction` (0 none, 1 mean, 2 sum).

    >>> import aneforge as af
    >>> af.binary_cross_entropy_with_logits(af.zeros(2), af.ones(2), reduction=2).item()
    1.38...
    >>> af.binary_cross_entropy_with_logits(af.zeros(2), af.ones(2), None, af.tensor([2.0]), 2).item()
    2.77...
    """
    return F.binary_cross_entropy_with_logits(input, target, weight, reduction=_REDUCTIONS[reduction],
                                              pos_weight=pos_weight)


def kl_div(input: Tensor, target: Tensor, reduction: int = 1, log_target: bool = False) -> Tensor:
    """torch.kl_div: F.kl_div with torch's top-level integer `reduction` (0 none, 1 mean, 2 sum).

    >>> import aneforge as af
    >>> af.kl_div(af.zeros(2), af.ones(2), reduction=2).item()
    0.0
    """
    return F.kl_div(input, target, reduction=_REDUCTIONS[reduction], log_target=log_target)


def batch_norm(input: Tensor, weight, bias, running_mean, running_var, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool = True) -> Tensor:
    """torch.batch_norm: F.batch_norm with torch's top-level argument order.

    >>> import aneforge as af
    >>> af.batch_norm(af.tensor([[1.0], [3.0]]), None, None, None, None, True, 0.1, 1e-5).tolist()
    [[-1.0], [1.0]]
    """
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
