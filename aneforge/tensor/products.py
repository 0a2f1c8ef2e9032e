"""Matrix products: matmul (@), bmm, outer, addmm (MIL matmul)."""
from __future__ import annotations

from ..errors import ShapeError
from .args import _same_kind
from .base import TensorBase


class ProductsMixin(TensorBase):
    """Matrix products with torch's rules for 1-D, 2-D and batched operands."""
    __slots__ = ()

    def __matmul__(self, o):
        return self.matmul(o)

    def __rmatmul__(self, o):
        return self._as_tensor(o).matmul(self)

    def matmul(self, other) -> "Tensor":
        """Matrix product with torch's rules for 1-D, 2-D and batched operands (MIL matmul)."""
        if isinstance(other, TensorBase):
            _same_kind("matmul", self, other)
        a, b = self._operands(other, floating=True)
        if a.ndim == 0 or b.ndim == 0:
            raise ShapeError(f"matmul: both operands need at least 1 dimension, got shapes "
                             f"{a.shape} and {b.shape}")
        # MIL matmul with a rank-1 operand is typed inconsistently by Core ML: lift to rank 2.
        x = a.unsqueeze(0) if a.ndim == 1 else a
        y = b.unsqueeze(-1) if b.ndim == 1 else b
        out = self._record("matmul", {"x": x, "y": y}, {})
        if b.ndim == 1:
            out = out.squeeze(-1)
        return out.squeeze(-2 if b.ndim > 1 else -1) if a.ndim == 1 else out

    def bmm(self, mat2: "Tensor") -> "Tensor":
        """Batched matrix product of [B, n, m] and [B, m, p] (MIL matmul).

        >>> import aneforge as af
        >>> af.bmm(af.ones(2, 3, 4), af.ones(2, 4, 5)).shape
        (2, 3, 5)
        """
        if self.ndim != 3 or mat2.ndim != 3:
            raise ShapeError(f"bmm: both operands must be 3-D, got {self.shape} and {mat2.shape}; "
                             f"use matmul for other ranks")
        if mat2.shape[:2] != (self.shape[0], self.shape[2]):
            raise ShapeError(f"bmm: expected size for first two dimensions of batch2 tensor to be: "
                             f"{[self.shape[0], self.shape[2]]} but got: {list(mat2.shape[:2])} "
                             f"(bmm does not broadcast; matmul does)")
        return self.matmul(mat2)

    def mm(self, mat2: "Tensor") -> "Tensor":
        """Matrix product of [n, m] and [m, p] (MIL matmul); no broadcasting, as torch.mm.

        >>> import aneforge as af
        >>> af.mm(af.ones(3, 4), af.ones(4, 5)).shape
        (3, 5)
        """
        if self.ndim != 2 or mat2.ndim != 2:
            raise ShapeError(f"mm: both operands must be 2-D, got {self.shape} and {mat2.shape}; "
                             f"use matmul for other ranks")
        if self.shape[1] != mat2.shape[0]:
            raise ShapeError(f"mm: mat1 and mat2 shapes cannot be multiplied ({self.shape[0]}x"
                             f"{self.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})")
        return self.matmul(mat2)

    def outer(self, vec2: "Tensor") -> "Tensor":
        """The outer product of two vectors, as a broadcast multiply.

        >>> import aneforge as af
        >>> af.outer(af.tensor([1, 2]), af.tensor([3, 4, 5])).tolist()
        [[3, 4, 5], [6, 8, 10]]
        """
        if self.ndim != 1 or vec2.ndim != 1:
            raise ShapeError(f"outer: both operands must be 1-D, got {self.shape} and "
                             f"{vec2.shape}")
        return self.unsqueeze(-1) * vec2

    def addmm(self, mat1: "Tensor", mat2: "Tensor", *, beta=1, alpha=1) -> "Tensor":
        """beta * self + alpha * (mat1 @ mat2).

        >>> import aneforge as af
        >>> af.addmm(af.ones(2, 2), af.ones(2, 3), af.ones(3, 2)).tolist()
        [[4.0, 4.0], [4.0, 4.0]]
        """
        prod = mat1 @ mat2
        prod = prod if alpha == 1 else prod * alpha
        return (self if beta == 1 else self * beta) + prod
