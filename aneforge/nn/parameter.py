"""Parameter: a leaf Tensor that requires grad and that modules register."""
from __future__ import annotations

import weakref

import numpy as np

from ..tensor import Tensor
from ..core.trace import leaf
from ..creation import tensor


def host_array(value) -> np.ndarray:
    """numpy data from an aneforge Tensor, a numpy array, a torch tensor or nested lists."""
    if isinstance(value, Tensor):
        return value.numpy()
    if hasattr(value, "detach") and hasattr(value, "cpu"):   # torch, without importing it
        return value.detach().cpu().float().numpy()
    return np.asarray(value)


def assign(t: Tensor, value) -> Tensor:
    """Give leaf `t` a new value of the same shape (a new trace leaf; the handle stays)."""
    arr = host_array(value)
    if arr.shape != t.shape:
        raise ValueError(f"cannot assign a value of shape {arr.shape} to a tensor of shape "
                         f"{t.shape}")
    arr = arr.astype(np.float16).astype(t.dtype.np) if t.dtype.is_float else arr.astype(t.dtype.np)
    return t.set_(arr)


class Parameter(Tensor):
    """A Tensor that is a module parameter: a leaf requiring grad by default.

    >>> import aneforge as af
    >>> p = af.nn.Parameter(af.zeros(3))
    >>> p.requires_grad, p.shape
    (True, (3,))
    """

    __slots__ = ()

    def __init__(self, data=None, requires_grad: bool = True):
        src = tensor(np.zeros(0) if data is None else host_array(data))
        node = leaf(src.numpy(), src.tensor_type, requires_grad)
        super().__init__(node)
        node.owner = weakref.ref(self)      # the leaf is this parameter's value (Tensor.set_)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()
