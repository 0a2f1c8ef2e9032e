"""torch.linalg's vector norm (`af.linalg.vector_norm`)."""
from __future__ import annotations

from .tensor import Tensor


def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """The vector `ord`-norm over `dim` (every element by default), as torch.linalg.vector_norm:
    ord 2 (default), 1, inf, -inf, 0 or any other number. Powers are summed in fp32, so x**2
    does not overflow fp16; a long sum runs wide (Tensor.norm).

    >>> import aneforge as af
    >>> af.linalg.vector_norm(af.tensor([3.0, 4.0])).item()
    5.0
    >>> af.linalg.vector_norm(af.ones(4096), ord=1).item()
    4096.0
    """
    if isinstance(ord, str):
        raise ValueError(f"linalg.vector_norm: ord must be a number, got {ord!r} "
                         f"(torch.linalg.matrix_norm takes 'fro' and 'nuc')")
    return x.norm(ord, dim, keepdim, dtype)
