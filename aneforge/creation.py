"""Creating tensors: af.zeros, af.rand, af.arange, af.randperm, ... (af.tensor itself is
aneforge.tensor.core's). Host data always enters a program as an input, never as a baked
constant, so new values of the same shape reuse the compiled program.

Every function takes torch's `device=` ("cpu", "mps" and "ane" name the one device; "cuda"
raises, saying what to use) and `requires_grad=`; the random ones take `generator=`
(aneforge.random: the default generator, which `af.manual_seed` seeds, when None).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import dtypes
from .errors import OutOfMemoryError
from .hardware.limits import MAX_RANK, check_leaf_shape
from .runtime.memory import budget
from .devices import use
from .random import engine
from .random import manual_seed  # noqa: F401  (af.manual_seed's home)
from .tensor import Tensor
from .tensor.args import _sizes
from .tensor.highrank import merged
from .tensor.core import _leaf, _stored, host_draw, tensor


def generator(gen=None):
    """The engine draws come from: `gen`'s, else the default generator's (torch's CPU kernels:
    `uniform`, `normal`, `random_from_to`, `randperm`, `bernoulli`, ...; aneforge.random)."""
    return engine(gen)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor from a numpy array (copied: the program reads it as an input)."""
    return tensor(np.asarray(array))


def host_random(draw, dtype) -> Tensor:
    """A leaf holding `draw()` (a host random draw from `generator()`); af.compile draws again
    on each replay, as an eager call would."""
    return host_draw(draw, dtype)


def _dtype(dtype, default=dtypes.float16):
    return default if dtype is None else dtypes.as_dtype(dtype)


def _make(array, dt, device, requires_grad: bool, what: str, remake=None) -> Tensor:
    """A new leaf holding `array` as `dt`, after torch's checks of `device` and `requires_grad`."""
    use(device, what)
    if requires_grad and not dt.is_float:
        raise RuntimeError(f"{what}: only tensors of floating point dtype can require gradients "
                           f"(got {dt}); pass a float dtype, or requires_grad=False")
    return _leaf(array, dt, requires_grad, remake=remake)


def _random(draw, dt, device, requires_grad: bool, what: str) -> Tensor:
    """A leaf of the host draw `draw()`: af.compile draws again on each replay."""
    return _make(draw(), dt, device, requires_grad, what, remake=lambda: _stored(draw(), dt))


def _host(fill, size, what: str) -> np.ndarray:
    """np.full(size, fill) after the ANE's shape limits and a size check against the memory the
    simulator may use: a shape too large is refused with what to do, before numpy allocates
    (its MemoryError would name neither the call nor the limit)."""
    shape = _sizes(size)
    # the same check (and message) as any host leaf; rank > 5 is stored merged (tensor/highrank.py)
    check_leaf_shape(shape if len(shape) <= MAX_RANK else merged(shape))
    need = math.prod(shape) * 8                       # numpy builds it in float64 first
    if need > 1 << 28 and need > budget():            # (reading the budget costs a file read)
        raise OutOfMemoryError(f"{what}: shape {shape} needs {need / 2 ** 30:.1f} GiB on the "
                               f"host, over the {budget() / 2 ** 30:.1f} GiB the simulator may use "
                               f"(ANEFORGE_SIM_MAX_BYTES sets it); use a smaller shape")
    return np.full(shape, fill)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of `size` filled with `fill_value` (its dtype follows the value, as torch's).

    >>> import aneforge as af
    >>> af.full((2,), 7).tolist(), af.full((1,), 0.5).dtype
    ([7, 7], aneforge.float16)
    """
    default = (dtypes.bool_ if isinstance(fill_value, bool) else
               dtypes.int32 if isinstance(fill_value, numbers.Integral) else dtypes.float16)
    return _make(_host(fill_value, (size,), "af.full"), _dtype(dtype, default), device,
                 requires_grad, "af.full")


def zeros(*size, dtype=None, device=None, requires_grad: bool = False,
          pin_memory: bool = False) -> Tensor:
    """A tensor of zeros; `af.zeros(2, 3)` or `af.zeros((2, 3))`."""
    return _make(_host(0.0, size, "af.zeros"), _dtype(dtype), device, requires_grad, "af.zeros")


def ones(*size, dtype=None, device=None, requires_grad: bool = False,
         pin_memory: bool = False) -> Tensor:
    """A tensor of ones; `af.ones(2, 3)` or `af.ones((2, 3))`."""
    return _make(_host(1.0, size, "af.ones"), _dtype(dtype), device, requires_grad, "af.ones")


def empty(*size, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False,
          memory_format=None) -> Tensor:
    """A tensor whose values are unspecified in torch: zeros here (host memory is never
    uninitialized in a program input)."""
    return _make(_host(0.0, size, "af.empty"), _dtype(dtype), device, requires_grad, "af.empty")


def _like(t: Tensor, dtype) -> dtypes.DType:
    return t.dtype if dtype is None else dtypes.as_dtype(dtype)


def zeros_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False,
               memory_format=None) -> Tensor:
    return zeros(input.shape, dtype=_like(input, dtype), device=device,
                 requires_grad=requires_grad)


def ones_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False,
              memory_format=None) -> Tensor:
    return ones(input.shape, dtype=_like(input, dtype), device=device, requires_grad=requires_grad)


def empty_like(input: Tensor, *, dtype=None, device=None, requires_grad: bool = False,
               memory_format=None) -> Tensor:
    return empty(input.shape, dtype=_like(input, dtype), device=device,
                 requires_grad=requires_grad)


def full_like(input: Tensor, fill_value, *, dtype=None, device=None,
              requires_grad: bool = False, memory_format=None) -> Tensor:
    return full(input.shape, fill_value, dtype=_like(input, dtype), device=device,
                requires_grad=requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Values from `start` to `end` (exclusive) by `step`; integers give int32, like torch's int64.

    >>> import aneforge as af
    >>> af.arange(4).tolist()
    [0, 1, 2, 3]
    """
    if end is None:
        start, end = 0, start
    ints = all(isinstance(v, numbers.Integral) for v in (start, end, step))
    return _make(np.arange(start, end, step), _dtype(dtype, dtypes.int32 if ints else dtypes.float16),
                 device, requires_grad, "af.arange")


def eye(n: int, m: int | None = None, *, dtype=None, device=None,
        requires_grad: bool = False) -> Tensor:
    return _make(np.eye(n, m), _dtype(dtype), device, requires_grad, "af.eye")


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False,
         pin_memory: bool = False) -> Tensor:
    """Uniform samples from [0, 1), drawn on the host from `generator` (default: the one
    `af.manual_seed` seeds): torch.rand's float32 values after the same seed, then stored as
    `dtype` (docs/random.md).

    >>> import aneforge as af
    >>> _ = af.manual_seed(0)
    >>> af.rand(3).tolist()      # torch.manual_seed(0); torch.rand(3).half(): the same values
    [0.496337890625, 0.76806640625, 0.0885009765625]
    """
    eng, shape = engine(generator), _sizes(size)
    return _random(lambda: eng.uniform(shape), _dtype(dtype), device, requires_grad, "af.rand")


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False,
          pin_memory: bool = False) -> Tensor:
    """Standard normal samples, drawn on the host from `generator` (default: the one
    `af.manual_seed` seeds): torch.randn's float32 values after the same seed, then stored as
    `dtype` (docs/random.md)."""
    eng, shape = engine(generator), _sizes(size)
    return _random(lambda: eng.normal(shape), _dtype(dtype), device, requires_grad, "af.randn")


def randint(low, high=None, size=(), *, generator=None, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """Integers from [low, high) (int32, torch's int64), as `af.randint(high, size)` or
    `af.randint(low, high, size)`.

    >>> import aneforge as af
    >>> x = af.randint(3, 7, (100,))
    >>> x.dtype, 3 <= x.min().item() and x.max().item() < 7
    (aneforge.int32, True)
    """
    if high is None:
        low, high = 0, low
    elif not isinstance(high, numbers.Integral) and size == ():     # randint(high, size)
        low, high, size = 0, low, high
    eng, shape = engine(generator), _sizes((size,))
    return _random(lambda: eng.random_from_to(shape, low, high), _dtype(dtype, dtypes.int32),
                   device, requires_grad, "af.randint")


def randperm(n: int, *, generator=None, dtype=None, device=None,
             requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A random permutation of 0 .. n-1 (int32, torch's int64).

    >>> import aneforge as af
    >>> sorted(af.randperm(5).tolist())
    [0, 1, 2, 3, 4]
    """
    eng = engine(generator)
    return _random(lambda: eng.randperm(n), _dtype(dtype, dtypes.int32), device,
                   requires_grad, "af.randperm")


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """torch.normal: samples of N(mean, std^2). With numbers and `size`, torch's
    `empty(size).normal_(mean, std)` values. With a tensor mean or std, torch's draw of
    standard normals z of their broadcast shape, then `z * std + mean` in float32, on the host
    (mean and std are read): a new leaf. torch's gradients through normal are zeros; this
    result carries none.

    >>> import aneforge as af
    >>> _ = af.manual_seed(0)
    >>> af.normal(2.0, 0.5, (3,)).tolist()   # torch.manual_seed(0); torch.normal(2., .5, (3,))
    [2.76953125, 1.853515625, 0.91064453125]
    >>> af.normal(af.zeros(2), af.ones(2)).shape
    (2,)
    """
    tensors = [v for v in (mean, std) if isinstance(v, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError("normal: with a number mean and std, pass size= (torch's "
                            "normal(mean, std, size)), or give mean or std as a tensor")
        eng, shape = engine(generator), _sizes((size,))
        return _random(lambda: eng.normal(shape, mean, std), _dtype(dtype), device,
                       requires_grad, "af.normal")
    if size is not None:
        raise TypeError("normal: size= goes with a number mean and std; with a tensor mean or "
                        "std the shape is theirs (broadcast)")
    m, s = (np.asarray(v.numpy() if isinstance(v, Tensor) else v, np.float32) for v in (mean, std))
    eng, shape = engine(generator), np.broadcast_shapes(m.shape, s.shape)
    # torch: output.normal_(0, 1), then output.mul_(std).add_(mean): two float32 roundings
    draw = lambda: (eng.normal(shape) * s).astype(np.float32) + m          # noqa: E731
    return _random(draw, _dtype(dtype, tensors[0].dtype), device, requires_grad, "af.normal")


def rand_like(input: Tensor, *, generator=None, dtype=None, device=None,
              requires_grad: bool = False, memory_format=None) -> Tensor:
    return rand(input.shape, generator=generator, dtype=_like(input, dtype), device=device,
                requires_grad=requires_grad)


def randn_like(input: Tensor, *, generator=None, dtype=None, device=None,
               requires_grad: bool = False, memory_format=None) -> Tensor:
    return randn(input.shape, generator=generator, dtype=_like(input, dtype), device=device,
                 requires_grad=requires_grad)


def randint_like(input: Tensor, low: int = 0, high: int | None = None, *, generator=None,
                 dtype=None, device=None, requires_grad: bool = False,
                 memory_format=None) -> Tensor:
    if high is None:
        low, high = 0, low
    return randint(low, high, input.shape, generator=generator, dtype=_like(input, dtype),
                   device=device, requires_grad=requires_grad)


def linspace(start, end, steps: int, *, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """`steps` evenly spaced values from start to end inclusive (computed on the host in
    fp32 as torch: the first half from start, the second from end; one step is `start`).

    >>> import aneforge as af
    >>> af.linspace(0, 1, 5).tolist(), af.linspace(2, 3, 1).tolist()
    ([0.0, 0.25, 0.5, 0.75, 1.0], [2.0])
    """
    i = np.arange(steps, dtype=np.float32)
    step = np.float32((end - start) / (steps - 1)) if steps > 1 else np.float32(0)
    vals = np.where(i < max(steps // 2, 1), np.float32(start) + i * step,     # steps=1: start
                    np.float32(end) - (steps - 1 - i) * step)
    use(device, "af.linspace")
    return tensor(vals, dtype=_dtype(dtype), requires_grad=requires_grad)
