"""Creating tensors from host data. Host data always enters a program as an input, never as a
baked constant, so new values of the same shape reuse the compiled program."""
from __future__ import annotations

import numbers

import numpy as np

from . import dtypes, kernels
from .context import CTX
from .ir.types import TensorType
from .tensor import Tensor, _sizes
from .trace import leaf

def manual_seed(seed: int) -> None:
    """Seed aneforge's random generator (rand, randn, nn.init, dropout masks)."""
    CTX.rng = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    return CTX.rng


def tensor(data, dtype=None, requires_grad: bool = False) -> Tensor:
    """A tensor holding a copy of `data` (nested lists, numbers, numpy arrays, torch tensors).

    Floating data becomes float16, the ANE's type (values are rounded to fp16 now); integers
    become int32 and booleans bool.

    >>> import aneforge as af
    >>> af.tensor([[1.0, 2.0], [3.0, 4.0]]).dtype
    aneforge.float16
    """
    source = data
    arr = _host_array(data)
    _check_int_range(arr)
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.from_numpy(arr.dtype)
    return _leaf(arr, dt, requires_grad, source=source,
                 remake=lambda new: _stored(_host_array(new), dt))


def _check_int_range(arr: np.ndarray) -> None:
    """Integer data becomes int32 (the widest integer a program holds): refuse values it would
    wrap, where torch keeps int64."""
    if arr.dtype.kind in "iu" and arr.dtype.itemsize > 4 and arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -2 ** 31 or hi >= 2 ** 31:
            raise OverflowError(f"integer data in [{lo}, {hi}] does not fit int32, aneforge's "
                                f"widest integer; scale it, or pass it as floating point")


def _host_array(data) -> np.ndarray:
    if isinstance(data, Tensor):
        data = data.numpy()
    if hasattr(data, "detach") and hasattr(data, "cpu"):      # a torch tensor, without importing torch
        data = data.detach().cpu().numpy()
    return np.asarray(data)            # `_stored` copies


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor from a numpy array (copied: the program reads it as an input)."""
    return tensor(np.asarray(array))


def _leaf(arr: np.ndarray, dt, requires_grad: bool = False, source=None, remake=None) -> Tensor:
    """A new leaf holding `arr` stored as `dt`. Inside af.compile's capture it is reported with
    how to make it again: from a new argument (`source` is the host object it came from,
    `remake(new_object)` converts one), by a new draw (`remake()` alone), or as a constant."""
    arr = _stored(arr, dt)
    from .limits import check_shape
    check_shape("tensor", arr.shape)
    t = Tensor(leaf(arr, TensorType(arr.shape, dt), requires_grad))
    capture = CTX.thread.capture
    if capture is not None:
        capture.created_leaf(t.ref[0], source, remake)
    return t


def _stored(arr: np.ndarray, dt) -> np.ndarray:
    """A new array (never `arr` itself: a tensor holds a copy) of `arr`'s values stored as
    `dt`: floating values rounded to fp16 at the boundary, by the compiled cast from float32
    (numpy's takes ~3 ns an element: 12 us for a 64 x 64 batch, every step)."""
    if dt.is_float:
        half = kernels.astype(arr, np.float16)
        return half.astype(dt.np, copy=half is arr)
    return arr.astype(dt.np)


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


def zeros_like(t: Tensor, dtype=None) -> Tensor:
    return zeros(t.shape, dtype=dtype or t.dtype)


def ones_like(t: Tensor, dtype=None) -> Tensor:
    return ones(t.shape, dtype=dtype or t.dtype)


def full_like(t: Tensor, fill_value, dtype=None) -> Tensor:
    return full(t.shape, fill_value, dtype=dtype or t.dtype)


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
    vals = np.where(i < steps // 2, np.float32(start) + i * step,
                    np.float32(end) - (steps - 1 - i) * step)
    return tensor(vals, dtype=_dtype(dtype), requires_grad=requires_grad)
