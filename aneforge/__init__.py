"""aneforge: PyTorch-style tensors whose programs run on the Apple Neural Engine.

Tensors record MIL ops lazily; realizing a value compiles its program once per shape
signature and runs it on the current backend (the fp16-faithful simulator off macOS).

>>> import numpy as np, aneforge as af
>>> x = af.tensor(np.ones((4, 8), np.float32))
>>> w = af.ones(8, 3)
>>> y = (x @ w).relu().sum(dim=1, keepdim=True) / 3
>>> y.shape, y.dtype
((4, 1), aneforge.float16)
>>> y.numpy().ravel().tolist()
[8.0, 8.0, 8.0, 8.0]
"""
from __future__ import annotations

from . import dtypes
from .compiler import cache_info, clear_cache
from .creation import (arange, eye, from_numpy, full, full_like, manual_seed, ones, ones_like,
                       rand, randint, randn, tensor, zeros, zeros_like)
from .dtypes import bool_ as bool  # noqa: A001  (torch spells it af.bool)
from .dtypes import float16, float32, half, int8, int16, int32, uint8, uint16
from .errors import (AneforgeError, BackendUnavailable, CompileWallError, DTypeError, LimitError,
                     ShapeError)
from .functions import *  # noqa: F401,F403
from .functions import __all__ as _functions
from .numerics import Numerics, get_numerics, numerics, set_numerics
from .runtime import backends, get_backend, set_backend
from .tensor import Tensor
from .autograd import enable_grad, grad, is_grad_enabled, no_grad, set_grad_enabled
from . import amp, nn, optim, passes  # noqa: E402  (they build on everything above)

float = float32  # noqa: A001
long = int32


def realize(*tensors: Tensor) -> None:
    """Compute several tensors with one program run (one compile per signature)."""
    from .compiler import realize as _realize
    _realize([t.ref for t in tensors])


def program(*tensors: Tensor):
    """The traced IR Program that realizing `tensors` would compile (nothing is compiled or
    run), before the pass pipeline: `aneforge.passes.run(af.program(t))` gives the optimized
    one. For a realized tensor, the (optimized) program that computed it."""
    from .compiler import program_for
    return program_for([t.ref for t in tensors])


def to_mil(obj) -> str:
    """MIL text of a Program, or of the program that would compute a tensor (or tensors).

    >>> import aneforge as af
    >>> print(af.to_mil(af.ones(1, 4).relu()).splitlines()[0])
    program(1.3)
    """
    from .ir import Program
    from .mil.text import emit
    if isinstance(obj, Program):
        return emit(obj)
    tensors = obj if isinstance(obj, (tuple, list)) else (obj,)
    return emit(program(*tensors))


def load_mil(text_or_path, weights_dir=None):
    """MIL text (the MIL primer's format), or a file of it, as a callable on numpy arrays.

    >>> import numpy as np, aneforge as af
    >>> fn = af.load_mil('''program(1.3) {
    ...   func main<ios18>(tensor<fp16, [2]> x) {
    ...     tensor<fp16, [2]> y = exp(x = x)[name = string("y")];
    ...   } -> (y);
    ... }''')
    >>> fn(np.zeros(2))
    array([1., 1.], dtype=float16)
    """
    from .mil.load import load_mil as _load_mil
    return _load_mil(text_or_path, weights_dir)


def export(obj, path: str) -> str:
    """Write a Program, tensor(s) or `load_mil` function as a Core ML `.mlpackage` (iOS18).

    Needs coremltools (`pip install "aneforge[coreml]"`); see aneforge.mil.package.
    """
    from .mil.package import export as _export
    tensors = obj if isinstance(obj, (tuple, list)) else (obj,)
    if tensors and all(isinstance(t, Tensor) for t in tensors):
        obj = program(*tensors)
    return _export(obj, path)


__all__ = ["Tensor", "tensor", "from_numpy", "zeros", "ones", "full", "zeros_like", "ones_like",
           "full_like", "arange", "eye", "rand", "randn", "randint", "manual_seed", "realize",
           "program", "to_mil", "load_mil", "export", "cache_info", "clear_cache", "backends",
           "get_backend", "set_backend", "Numerics", "numerics", "get_numerics", "set_numerics",
           "dtypes",
           "float16", "float32", "half", "int8", "int16", "int32", "uint8", "uint16", "bool",
           "AneforgeError", "ShapeError", "LimitError", "DTypeError", "CompileWallError",
           "BackendUnavailable", "no_grad", "enable_grad", "set_grad_enabled",
           "is_grad_enabled", "grad", "nn", "optim", "amp", "passes", *_functions]
