"""torch's in-place methods on a handle: add_, mul_, zero_, copy_, ... Programs are SSA, so
the handle takes the new value; the value it held is marked overwritten."""
from __future__ import annotations

import numbers
import warnings
import weakref

import numpy as np

from .. import dtypes
from ..context import CTX
from ..errors import AneforgeError
from ..ops._grad import zeros
from ..core.trace import SEQ
from .base import TensorBase


# Hand-written parameter updates (`p -= lr * p.grad`, `p.add_(d)`, `p.data += d`): fp16 drops a
# step smaller than half the weight's spacing (lr 1e-6 times a gradient of 100 on a weight of
# 0.8: 1e-4 against 2.4e-4), so the weight would stop where torch's float32 one moves on. As the
# optimizers' compensated master weights (optim/optimizer.py), what the rounding dropped is kept
# in a remainder and added to the next update (Fast2Sum), so small steps add up. Per parameter
# handle, by id (a Tensor's == is elementwise): (a weak reference to the handle, the value node
# the last update left it holding, the remainder's handle); an entry leaves with its handle.
_REMAINDERS: dict = {}



def _number_first(other, alpha, name: str):
    """torch's deprecated overload `x.add_(Number alpha, Tensor other)` (old scripts'
    `p.data.add_(-lr, p.grad.data)`), which torch still runs with a warning: as (other, alpha)."""
    if isinstance(alpha, TensorBase) and isinstance(other, numbers.Number):
        warnings.warn(f"This overload of {name} is deprecated:\n\t{name}(Number alpha, "
                      f"Tensor other)\nConsider using one of the following signatures "
                      f"instead:\n\t{name}(Tensor other, *, Number alpha = 1)", UserWarning,
                      stacklevel=3)
        return alpha, other
    return other, alpha


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
        if result.dtype != self.dtype:        # (`to` parses its arguments: a step's updates)
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
        other, alpha = _number_first(other, alpha, "add_")
        return self._update(other, alpha, "add")

    def sub_(self, other, alpha=1) -> "Tensor":
        """In-place sub (see add_)."""
        other, alpha = _number_first(other, alpha, "sub_")
        return self._update(other, alpha, "sub")

    def _update_owner(self):
        """The parameter a hand-written in-place add/sub updates: this handle when it is a
        floating leaf that requires grad (changed under no_grad), else None."""
        return self if self.is_leaf and self.requires_grad and self.dtype.is_float else None

    def _update(self, other, alpha, op: str) -> "Tensor":
        """add_ / sub_ (`op`): on a parameter, compensated (see _REMAINDERS)."""
        owner = self._update_owner()
        if owner is None:
            return self._inplace(lambda: getattr(self, op)(other, alpha))
        step = other * alpha if alpha != 1 else other
        _, node, holder = _REMAINDERS.get(id(owner), (None, None, None))
        if holder is None or node() is not owner._node:    # first update, or set otherwise
            # read even when zero: af.compile captures this step's program for every replay
            holder = self._as_tensor(np.zeros(self.shape, self.dtype.np))

        base = self._at(*self.ref)
        shared = _shared_leaf(self, owner, step)
        if shared is not None:
            base = shared

        def compensated():
            s = self._as_tensor(getattr(holder, op)(step)).to(self.dtype)
            new = (base + s).expand(self.shape)                   # Fast2Sum: |base| >= |s|
            return new, (s - (new - base)).expand(self.shape)
        # one kept recording per kind (a training loop's `p.data += -lr * p.grad` each step)
        thread, grad = CTX.thread, CTX.thread.grad_enabled
        thread.grad_enabled = grad and shared is None      # (the parameter's own leaf: untracked)
        try:
            new, remainder = self._kept(("compensated", op), [base, holder, step], compensated,
                                        many=True)
        finally:
            thread.grad_enabled = grad
        self._inplace(lambda: new)
        holder.set_(remainder)
        key = id(owner)
        held = _REMAINDERS.get(key)
        alive = held[0] if held is not None and held[0]() is owner else \
            weakref.ref(owner, lambda _: _REMAINDERS.pop(key, None))
        _REMAINDERS[key] = (alive, weakref.ref(owner._node), holder)
        return self

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


def _shared_leaf(handle, owner, step):
    """A handle on `owner`'s own leaf where `handle` (its `.data`) is a leaf of the very same
    array and `step` carries no gradient, else None. The update then reads the array the
    forward read, through the same leaf: one program input, which the next step's program is
    given back and holds in place, not a second copy loaded every step. Read under no_grad: the
    values are the `.data` handle's, untracked as it is. (Not inside af.compile's capture,
    which tracks the `.data` leaf as recorded.)"""
    node, own = handle._node, owner._node
    if handle is owner or CTX.thread.capture is not None or node.data is None or \
            own.data is None or \
            node.data[handle._idx] is not own.data[owner._idx] or \
            getattr(step, "requires_grad", False):
        return None
    return handle._at(own, owner._idx)

