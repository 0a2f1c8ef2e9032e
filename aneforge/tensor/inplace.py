"""torch's in-place methods on a handle: add_, mul_, zero_, copy_, ... Programs are SSA, so
the handle takes the new value; the value it held is marked overwritten."""
from __future__ import annotations

from .. import dtypes
from ..context import CTX
from ..errors import AneforgeError
from ..ops._grad import zeros
from ..core.trace import SEQ
from .base import TensorBase


class InplaceMixin(TensorBase):
    """In-place updates of the handle."""
    __slots__ = ()

    def _inplace(self, compute) -> "Tensor":
        """torch's in-place methods: this handle now holds `compute()` (cast to its dtype). A leaf
        that requires grad may only change under no_grad (as in torch); it stays a leaf. The
        value it held is marked overwritten as of before `compute` ran: the ops computing the
        new value may read it, ops recorded earlier may not (see _bump_version)."""
        stamp = next(SEQ)
        result = compute()
        if not isinstance(result, TensorBase):
            result = self._const(result, self.dtype)
        result = result.to(self.dtype)
        if result.shape != self.shape:
            result = result.expand(self.shape)
        if self.is_leaf and self.requires_grad:
            if CTX.thread.grad_enabled:
                raise AneforgeError("a leaf tensor that requires grad cannot change in place "
                                    "while gradients are recorded; wrap it in `with af.no_grad():`")
            self._bump_version(stamp)
            return self.set_(result)
        if result.ref != self.ref:
            self._bump_version(stamp)
        self._node, self._idx = result._node, result._idx
        return self

    def _bump_version(self, stamp: int) -> None:
        """torch's version counter: the value this handle held is marked overwritten, so a
        backward whose gradient rule needs it raises (aneforge.autograd) as torch's does."""
        node = self._node
        node.overwritten = {**(node.overwritten or {}), self._idx: stamp}

    def add_(self, other, alpha=1) -> "Tensor":
        """In-place add: this handle holds self + alpha * other.

        >>> import aneforge as af
        >>> x = af.zeros(2)
        >>> x.add_(1).tolist()
        [1.0, 1.0]
        """
        return self._inplace(lambda: self.add(other, alpha))

    def sub_(self, other, alpha=1) -> "Tensor":
        """In-place sub (see add_)."""
        return self._inplace(lambda: self.sub(other, alpha))

    def mul_(self, other) -> "Tensor":
        """In-place mul (see add_)."""
        return self._inplace(lambda: self * other)

    def div_(self, other, rounding_mode: str | None = None) -> "Tensor":
        """In-place div (see add_)."""
        return self._inplace(lambda: self.div(other, rounding_mode))

    def clamp_(self, min=None, max=None) -> "Tensor":
        """In-place clamp (see add_).

        >>> import aneforge as af
        >>> af.tensor([-2.0, 2.0]).clamp_(-1, 1).tolist()
        [-1.0, 1.0]
        """
        return self._inplace(lambda: self.clamp(min, max))

    def zero_(self) -> "Tensor":
        """In-place zeros (x - x).

        >>> import aneforge as af
        >>> af.ones(2).zero_().tolist()
        [0.0, 0.0]
        """
        return self._inplace(lambda: zeros(self))

    def fill_(self, value) -> "Tensor":
        """In-place fill with a number (or a one-element tensor).

        >>> import aneforge as af
        >>> af.zeros(2).fill_(3).tolist()
        [3.0, 3.0]
        """
        return self._inplace(lambda: zeros(self) + value if self.dtype != dtypes.bool_ else
                             zeros(self) | bool(value))

    def copy_(self, src, non_blocking: bool = False) -> "Tensor":
        """In-place copy of `src` (a Tensor, numpy array or number), broadcast to this shape.

        >>> import aneforge as af
        >>> af.zeros(2).copy_(af.tensor([1.0, 2.0])).tolist()
        [1.0, 2.0]
        """
        return self._inplace(lambda: src if isinstance(src, TensorBase) else self._as_tensor(src))

    # Python's augmented assignment on a tensor is in place, as in torch (`p -= lr * p.grad`
    # under no_grad updates the parameter; without these Python would rebind the name only).
    def __iadd__(self, other) -> "Tensor":
        return self.add_(other)

    def __isub__(self, other) -> "Tensor":
        return self.sub_(other)

    def __imul__(self, other) -> "Tensor":
        return self.mul_(other)

    def __itruediv__(self, other) -> "Tensor":
        return self.div_(other)
