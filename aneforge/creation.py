"""Creating tensors: af.zeros, af.rand, af.arange, ... (af.tensor itself is aneforge.tensor.core's).
Host data always enters a program as an input, never as a baked constant, so new values of the
same shape reuse the compiled program."""
from __future__ import annotations

import numbers

import numpy as np

from . import dtypes
from .context import CTX
from .tensor import Tensor
from .tensor.args import _sizes
from .tensor.core import _leaf, _stored, tensor


def manual_seed(seed: int) -> None:
    """Seed aneforge's random generator (rand, randn, nn.init, dropout masks)."""
    CTX.rng = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    return CTX.rng


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor from a numpy array (copied: the program reads it as an input)."""
    return tensor(np.asarray(array))


def host_random(draw, dtype) -> Tensor:
    """A leaf holding `draw()` (a host random draw from `generator()`); af.compile draws again
    on each replay, as an eager call would."""
    dt = dtypes.as_dtype(dtype)
    return _leaf(draw(), dt, remake=lambda: _stored(draw(), dt))


def _random(draw, dt, requires_grad=False) -> Tensor:
    return _leaf(draw(), dt, requires_grad, remake=lambda: _stored(draw(), dt))


def _dtype(dtype, default=dtypes.float16):
    return default if dtype is None else dtypes.as_dtype(dtype)


def full(size, fill_value, dtype=None, requires_grad: bool = False) -> Tensor:
    """A tensor of `size` filled with `fill_value`."""
    default = (dtypes.bool_ if isinstance(fill_value, bool) else
               dtypes.int32 if isinstance(fill_value, numbers.Integral) else dtypes.float16)
    dt = _dtype(dtype, default)
    return _leaf(np.full(_sizes((size,)), fill_value), dt, requires_grad)


def zeros(*size, dtype=None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros; `af.zeros(2, 3)` or `af.zeros((2, 3))`."""
    return _leaf(np.zeros(_sizes(size)), _dtype(dtype), requires_grad)


def ones(*size, dtype=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones; `af.ones(2, 3)` or `af.ones((2, 3))`."""
    return _leaf(np.ones(_sizes(size)), _dtype(dtype), requires_grad)


def zeros_like(input: Tensor, dtype=None, *, requires_grad: bool = False) -> Tensor:
    """Zeros of input's shape (and dtype, unless `dtype`).

    >>> import aneforge as af
    >>> af.zeros_like(af.ones(2), requires_grad=True).requires_grad
    True
    """
    return zeros(input.shape, dtype=dtype or input.dtype, requires_grad=requires_grad)


def ones_like(input: Tensor, dtype=None, *, requires_grad: bool = False) -> Tensor:
    return ones(input.shape, dtype=dtype or input.dtype, requires_grad=requires_grad)


def full_like(input: Tensor, fill_value, dtype=None, *, requires_grad: bool = False) -> Tensor:
    return full(input.shape, fill_value, dtype=dtype or input.dtype, requires_grad=requires_grad)


def rand_like(input: Tensor, dtype=None, *, requires_grad: bool = False) -> Tensor:
    """Uniform [0, 1) draws of input's shape (and dtype, unless `dtype`).

    >>> import aneforge as af
    >>> af.rand_like(af.ones(2, 3), dtype=af.float32).shape
    (2, 3)
    """
    return rand(input.shape, dtype=dtype or input.dtype, requires_grad=requires_grad)


def randn_like(input: Tensor, dtype=None, *, requires_grad: bool = False) -> Tensor:
    return randn(input.shape, dtype=dtype or input.dtype, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None) -> Tensor:
    """Values from `start` to `end` (exclusive) by `step`; integers give int32, like torch's int64.

    >>> import aneforge as af
    >>> af.arange(4).tolist()
    [0, 1, 2, 3]
    """
    if end is None:
        start, end = 0, start
    ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
    return _leaf(np.arange(start, end, step), _dtype(dtype, dtypes.int32 if ints else dtypes.float16))


def eye(n: int, m: int | None = None, dtype=None) -> Tensor:
    return _leaf(np.eye(n, m), _dtype(dtype))


def rand(*size, dtype=None, requires_grad: bool = False) -> Tensor:
    """Uniform samples from [0, 1), drawn on the host from the generator `manual_seed` seeds."""
    shape = _sizes(size)
    return _random(lambda: generator().random(shape), _dtype(dtype), requires_grad)


def randn(*size, dtype=None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples, drawn on the host from the generator `manual_seed` seeds."""
    shape = _sizes(size)
    return _random(lambda: generator().standard_normal(shape), _dtype(dtype), requires_grad)


def randint(low, high=None, size=(), dtype=None) -> Tensor:
    if high is None:
        low, high = 0, low
    shape = _sizes((size,))
    return _random(lambda: generator().integers(low, high, shape), _dtype(dtype, dtypes.int32))


def linspace(start, end, steps: int, dtype=None, requires_grad: bool = False) -> Tensor:
    """`steps` evenly spaced values from start to end inclusive (computed on the host in
    fp32 as torch: the first half from start, the second from end).

    >>> import aneforge as af
    >>> af.linspace(0, 1, 5).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    i = np.arange(steps, dtype=np.float32)
    step = np.float32((end - start) / (steps - 1)) if steps > 1 else np.float32(0)
    vals = np.where(i < max(steps // 2, 1), np.float32(start) + i * step,     # steps=1: start
                    np.float32(end) - (steps - 1 - i) * step)
    return tensor(vals, dtype=_dtype(dtype), requires_grad=requires_grad)
