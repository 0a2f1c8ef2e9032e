"""Tensor: a torch-named handle on one value of the lazy trace.

Every method records MIL ops (checked for shapes, dtypes and ANE limits at once) and returns
new Tensors; nothing runs until a value is needed (`.numpy()`, `.item()`, `.tolist()`,
`repr`, `bool`), when the live subgraph is compiled once per shape signature and run.

>>> import numpy as np, aneforge as af
>>> x = af.tensor(np.arange(6.0).reshape(2, 3))
>>> y = (x * 2 + 1).relu().sum(dim=1)
>>> y.shape, y.dtype
((2,), aneforge.float16)
>>> y.tolist()
[9.0, 27.0]
"""
from __future__ import annotations

import numbers
import weakref
from collections import namedtuple
from typing import Any, Sequence

import numpy as np

from . import compiler, dtypes
from .context import CTX
from .dtypes import DType
from .errors import AneforgeError, DTypeError, ShapeError
from .ir.types import TensorType
from .trace import Node, leaf, record

minmax = namedtuple("minmax", ["values", "indices"])
DEVICES = ("cpu", "ane", "mps", "cuda", "meta")     # all mean "wherever the backend runs"


def _grad_enabled() -> bool:
    return CTX.thread.grad_enabled


class Tensor:
    __slots__ = ("_node", "_idx", "__weakref__")
    __array_priority__ = 1000       # numpy defers `ndarray * Tensor` to Tensor.__rmul__
    __hash__ = object.__hash__      # == builds an op, so hash by identity as torch does

    def __init__(self, node: Node, idx: int = 0):
        self._node, self._idx = node, idx

    # ---- static facts, known at record time ------------------------------------------
    @property
    def type(self) -> TensorType:
        return self._node.types[self._idx]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def requires_grad(self) -> bool:
        return self._node.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Make a leaf track gradients (torch: only leaves can change this)."""
        if not self.is_leaf:
            raise AneforgeError("requires_grad can only be changed on a leaf; use detach() on "
                                "a computed tensor")
        if requires_grad and not self.dtype.is_float:
            raise AneforgeError(f"only floating tensors can require grad, got {self.dtype}")
        self._node.requires_grad = requires_grad
        return self

    @property
    def grad(self) -> "Tensor | None":
        """The gradient accumulated by backward() (a leaf's), or None."""
        return self._node.grad

    @grad.setter
    def grad(self, value: "Tensor | None") -> None:
        self._node.grad = value
        capture = CTX.thread.capture
        if capture is not None:
            capture.grad_set(self._node)

    def backward(self, gradient=None) -> None:
        """Accumulate gradients of this tensor into `.grad` of the leaves that require grad.

        >>> import aneforge as af
        >>> w = af.tensor([1.0, -2.0], requires_grad=True)
        >>> (w * w).sum().backward()
        >>> w.grad.tolist()
        [2.0, -4.0]
        """
        from .autograd import backward
        backward(self, gradient)

    def detach(self) -> "Tensor":
        """The same value, cut from the gradient graph."""
        if self._node.data is not None:
            return Tensor(leaf(self._node.data[self._idx], self.type))
        from .autograd import no_grad
        with no_grad():
            return record_op("identity", {"x": self}, {})

    def set_(self, source) -> "Tensor":
        """Make this handle hold `source`'s value, as torch's `Tensor.set_`: it becomes a leaf
        (computing `source` if needed), keeping `requires_grad` and `.grad`. A numpy source must
        already have this tensor's dtype. Optimizers and `load_state_dict` update this way.

        >>> import aneforge as af
        >>> w = af.nn.Parameter(af.zeros(2))
        >>> w.set_(w + 1).tolist(), w.is_leaf, w.requires_grad
        ([1.0, 1.0], True, True)
        """
        capture = CTX.thread.capture
        if isinstance(source, Tensor):
            array, type = source.value(), source.type
            if capture is not None:          # af.compile: a replay sets the new value again
                capture.effect(self.set_, source)
        else:
            if capture is not None:
                capture.host_write()
            array = np.asarray(source)
            type = TensorType(array.shape, self.dtype)
        old = self._node
        self._node, self._idx = leaf(array, type, old.requires_grad), 0
        self._node.grad = old.grad
        # Both leaves name this handle: a captured program that read the old value reads the
        # handle's current one on replay (aneforge.replay).
        self._node.owner = owner = weakref.ref(self)
        if old.owner is None and old.op is None:
            old.owner = owner
        return self

    @property
    def is_leaf(self) -> bool:
        return self._node.op is None

    @property
    def ref(self) -> tuple:
        return self._node, self._idx

    # ---- realization -----------------------------------------------------------------
    def realize(self) -> "Tensor":
        compiler.realize([self.ref])
        return self

    def numpy(self) -> np.ndarray:
        """The value as a numpy array (float16 tensors give float16 arrays), computing it if needed."""
        capture = CTX.thread.capture
        if capture is not None:
            capture.host_read(f"a {self.dtype.name}{list(self.shape)} tensor")
        return self.value()

    def value(self) -> np.ndarray:
        """numpy() for the package's own bookkeeping: not a read by user code (af.compile
        replays functions whose only host reads are these)."""
        self.realize()
        return self._node.data[self._idx]

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def item(self):
        if self.numel() != 1:
            raise AneforgeError(f"item() needs a tensor with one element, this one has shape "
                                f"{self.shape}")
        return self.numpy().reshape(()).item()

    def tolist(self):
        return self.numpy().tolist()

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", prefix="tensor(")
        return f"tensor({body}, dtype={self.dtype!r})"

    def __bool__(self) -> bool:
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    # ---- recording -------------------------------------------------------------------
    def _record(self, op: str, inputs: dict[str, Any], attrs: dict[str, Any]):
        """Record registered op `op` on `inputs`: how the gradient rules in aneforge/ops/,
        which sit below this module, build Tensors from the ones they are given."""
        return record_op(op, inputs, attrs)

    # ---- dtype -----------------------------------------------------------------------
    def to(self, *args, dtype=None, **kwargs) -> "Tensor":
        """Cast to a dtype (MIL cast). Devices are accepted and ignored, as in
        `x.to("cpu")` or `x.to(device, dtype)`: the backend decides where programs run."""
        for a in args:
            if isinstance(a, str) and a.split(":")[0] in DEVICES:
                continue
            dtype = a
        if dtype is None:
            return self
        dtype = dtypes.as_dtype(dtype)
        return self if dtype == self.dtype else \
            record_op("cast", {"x": self}, {"dtype": dtype.name})

    def cpu(self) -> "Tensor":
        return self

    def contiguous(self) -> "Tensor":
        return self

    def clone(self) -> "Tensor":
        """A copy that keeps the gradient connection (an identity op)."""
        return record_op("identity", {"x": self}, {})

    def float(self) -> "Tensor":
        return self.to(dtypes.float32)

    def half(self) -> "Tensor":
        return self.to(dtypes.float16)

    def int(self) -> "Tensor":
        return self.to(dtypes.int32)

    long = int

    def bool(self) -> "Tensor":
        return self.to(dtypes.bool_)

    def type_as(self, other: "Tensor") -> "Tensor":
        return self.to(other.dtype)

    def _floating(self) -> "Tensor":
        return self if self.dtype.is_float else self.to(dtypes.float16)

    # ---- arithmetic ------------------------------------------------------------------
    def _binary(self, op: str, other, reverse: bool = False, floating: bool = False):
        a, b = operands(self, other, floating)
        return record_op(op, {"x": b, "y": a} if reverse else {"x": a, "y": b}, {})

    def __add__(self, o):
        return self._binary("add", o)

    def __radd__(self, o):
        return self._binary("add", o, reverse=True)

    def __sub__(self, o):
        return self._binary("sub", o)

    def __rsub__(self, o):
        return self._binary("sub", o, reverse=True)

    def __mul__(self, o):
        return self._binary("mul", o)

    def __rmul__(self, o):
        return self._binary("mul", o, reverse=True)

    def __truediv__(self, o):
        return self._binary("real_div", o, floating=True)

    def __rtruediv__(self, o):
        return self._binary("real_div", o, reverse=True, floating=True)

    def __pow__(self, exponent):
        return self.pow(exponent)

    def __rpow__(self, base):
        if isinstance(base, numbers.Integral) and not self.dtype.is_float:
            return _int_pow_tensor(const(int(base), self.dtype), self)
        return self._binary("pow", base, reverse=True, floating=True)

    def __matmul__(self, o):
        return self.matmul(o)

    def __rmatmul__(self, o):
        return tensor_like(o, self).matmul(self)

    def __neg__(self):
        return self.neg()

    def __pos__(self):
        return self

    def __abs__(self):
        return self.abs()

    def add(self, other, alpha=1):
        return self + (other * alpha if alpha != 1 else other)

    def sub(self, other, alpha=1):
        return self - (other * alpha if alpha != 1 else other)

    def mul(self, other):
        return self * other

    def div(self, other):
        return self / other

    def neg(self) -> "Tensor":
        """-x, recorded as sub(0, x) (MIL has no neg)."""
        return self._binary("sub", 0, reverse=True)

    def pow(self, exponent) -> "Tensor":
        """x ** exponent; 2 becomes mul(x, x) and 0.5 sqrt (the ANE never emits square).
        An integer tensor to a non-negative integer power stays integer, as in torch."""
        if isinstance(exponent, numbers.Integral) and not self.dtype.is_float:
            return _int_power(self, int(exponent))
        if isinstance(exponent, Tensor) and not (self.dtype.is_float or exponent.dtype.is_float):
            return _int_pow_tensor(*operands(self, exponent))
        if isinstance(exponent, numbers.Real) and not isinstance(exponent, Tensor):
            special = {1: lambda x: x, 2: lambda x: x * x, 0.5: Tensor.sqrt, -0.5: Tensor.rsqrt,
                       -1: lambda x: 1 / x}
            if exponent in special:
                return special[exponent](self._floating() if exponent != 1 else self)
        return self._binary("pow", exponent, floating=True)

    def maximum(self, other):
        return self._binary("maximum", other)

    def minimum(self, other):
        return self._binary("minimum", other)

    def matmul(self, other) -> "Tensor":
        """Matrix product with torch's rules for 1-D, 2-D and batched operands (MIL matmul)."""
        a, b = operands(self, other, floating=True)
        if a.ndim == 0 or b.ndim == 0:
            raise ShapeError(f"matmul: both operands need at least 1 dimension, got shapes "
                             f"{a.shape} and {b.shape}")
        # MIL matmul with a rank-1 operand is typed inconsistently by Core ML: lift to rank 2.
        x = a.unsqueeze(0) if a.ndim == 1 else a
        y = b.unsqueeze(-1) if b.ndim == 1 else b
        out = record_op("matmul", {"x": x, "y": y}, {})
        if b.ndim == 1:
            out = out.squeeze(-1)
        return out.squeeze(-2 if b.ndim > 1 else -1) if a.ndim == 1 else out

    # ---- comparisons -----------------------------------------------------------------
    def _compare(self, op: str, other):
        a, b = operands(self, other)
        if a.dtype == dtypes.bool_:       # MIL compares numbers: bools compare as 0/1 in fp16
            a, b = a.half(), b.half()
        return record_op(op, {"x": a, "y": b}, {})

    def __lt__(self, other):
        return self._compare("less", other)

    def __le__(self, other):
        return self._compare("less_equal", other)

    def __gt__(self, other):
        return self._compare("greater", other)

    def __ge__(self, other):
        return self._compare("greater_equal", other)

    def __eq__(self, other):
        return self._compare("equal", other)

    def __ne__(self, other):
        return self._compare("not_equal", other)

    lt, le, gt, ge, eq, ne = __lt__, __le__, __gt__, __ge__, __eq__, __ne__

    def __and__(self, o):
        a, b = _bools(self, o)
        return _select(a, b, a)        # logical_and/or/xor have no ANE path (op_catalog.csv)

    def __or__(self, o):
        a, b = _bools(self, o)
        return _select(a, a, b)

    def __xor__(self, o):
        a, b = _bools(self, o)
        return _select(a, ~b, b)

    def __invert__(self):
        return record_op("logical_not", {"x": self}, {})

    def logical_not(self):
        return ~self

    # ---- unary math and activations --------------------------------------------------
    def _unary(self, op: str, **attrs) -> "Tensor":
        return record_op(op, {"x": self._floating()}, attrs)

    def exp(self):
        return self._unary("exp")

    def log(self):
        return self._unary("log", epsilon=0.0)

    def sqrt(self):
        return self._unary("sqrt")

    def rsqrt(self):
        return self._unary("rsqrt", epsilon=0.0)

    def abs(self):
        return record_op("abs", {"x": self}, {})

    def relu(self):
        """max(x, 0); integer tensors stay integer, as in torch (MIL relu is floating-only)."""
        return self._unary("relu") if self.dtype.is_float else self.maximum(0)

    def sigmoid(self):
        return self._unary("sigmoid")

    def tanh(self):
        return self._unary("tanh")

    def erf(self):
        return self._unary("erf")

    def sin(self):
        return self._unary("sin")

    def cos(self):
        return self._unary("cos")

    def reciprocal(self):
        return 1 / self

    def square(self):
        return self * self

    def clamp(self, min=None, max=None) -> "Tensor":
        """Clamp into [min, max]; numbers for both give one MIL clip, otherwise maximum/minimum."""
        if min is None and max is None:
            raise AneforgeError("clamp: give at least one of min and max")
        scalar = all(v is None or isinstance(v, numbers.Real) for v in (min, max))
        if scalar and min is not None and max is not None and min < max and self.dtype.is_float:
            return record_op("clip", {"x": self}, {"alpha": float(min), "beta": float(max)})
        out = self if min is None else self.maximum(min)
        return out if max is None else out.minimum(max)

    clip = clamp

    def softmax(self, dim: int) -> "Tensor":
        return self._unary("softmax", axis=dim)

    def masked_fill(self, mask: "Tensor", value) -> "Tensor":
        """`value` where `mask` is true, else self (MIL select)."""
        from .functions import where
        return where(mask, value, self)

    def where(self, condition: "Tensor", other) -> "Tensor":
        """`self` where `condition` is true, else `other`: torch.where(condition, self, other).

        >>> import aneforge as af
        >>> x = af.tensor([-1.0, 2.0])
        >>> x.where(x > 0, 0.0).tolist()
        [0.0, 2.0]
        """
        from .functions import where
        return where(condition, self, other)

    def var(self, dim=None, keepdim: bool = False, correction: int = 1, unbiased=None) -> "Tensor":
        """Variance with Bessel's correction by default, as torch."""
        if unbiased is not None:
            correction = int(unbiased)
        x = self._floating()
        dims = range(x.ndim) if dim is None else dim if isinstance(dim, (tuple, list)) else (dim,)
        n = int(np.prod([x.shape[d] for d in dims]))
        centered = x - x.mean(dim, keepdim=True)
        return (centered * centered).sum(dim, keepdim=keepdim) / float(max(n - correction, 1))

    def std(self, dim=None, keepdim: bool = False, correction: int = 1, unbiased=None) -> "Tensor":
        return self.var(dim, keepdim, correction, unbiased).sqrt()

    def any(self, dim=None, keepdim: bool = False) -> "Tensor":
        return (self != 0).to(dtypes.float16).amax(dim, keepdim) > 0.5

    def all(self, dim=None, keepdim: bool = False) -> "Tensor":
        return (self != 0).to(dtypes.float16).amin(dim, keepdim) > 0.5

    def log_softmax(self, dim: int) -> "Tensor":
        """x - max - log(sum(exp(x - max))): stable, built from registered ops. The max is
        detached: its exact gradient is zero, and through fp16 it is a cancellation
        (-sum(g) + sum(g) * sum(softmax)) that lands on the argmax (torch's rule has no such term)."""
        x = self._floating()
        shifted = x - x.amax(dim, keepdim=True).detach()
        return shifted - shifted.exp().sum(dim, keepdim=True).log()

    # ---- reductions ------------------------------------------------------------------
    def _reduce(self, op: str, dim, keepdim: bool) -> "Tensor":
        axes = tuple(dim) if isinstance(dim, (tuple, list)) else () if dim is None else (dim,)
        axes = axes or None       # torch: no dim, or an empty one, reduces every axis
        if self.ndim == 0:
            return self
        return record_op(op, {"x": self}, {"axes": axes, "keep_dims": keepdim})

    def sum(self, dim=None, keepdim: bool = False, dtype=None) -> "Tensor":
        x = self.to(dtype) if dtype is not None else self.int() if self.dtype == dtypes.bool_ else self
        return x._reduce("reduce_sum", dim, keepdim)

    def mean(self, dim=None, keepdim: bool = False) -> "Tensor":
        if not self.dtype.is_float:
            raise AneforgeError(f"mean() needs a floating tensor, got {self.dtype}; use .float() "
                                f"or .half() first")
        return self._reduce("reduce_mean", dim, keepdim)

    def amax(self, dim=None, keepdim: bool = False) -> "Tensor":
        return self._reduce("reduce_max", dim, keepdim)

    def amin(self, dim=None, keepdim: bool = False) -> "Tensor":
        return self._reduce("reduce_min", dim, keepdim)

    def _extremum(self, reduce, arg, elementwise, dim, keepdim):
        if isinstance(dim, Tensor):
            return elementwise(self, dim)
        if dim is None:
            return reduce(self)
        return minmax(reduce(self, dim, keepdim), arg(self, dim, keepdim))

    def max(self, dim=None, keepdim: bool = False):
        """max() -> the largest value; max(dim) -> (values, indices); max(tensor) -> elementwise."""
        return self._extremum(Tensor.amax, Tensor.argmax, Tensor.maximum, dim, keepdim)

    def min(self, dim=None, keepdim: bool = False):
        """min() -> the smallest value; min(dim) -> (values, indices); min(tensor) -> elementwise."""
        return self._extremum(Tensor.amin, Tensor.argmin, Tensor.minimum, dim, keepdim)

    def _arg(self, op: str, dim, keepdim: bool) -> "Tensor":
        if self.ndim == 0:                  # MIL reduces rank >= 1: argmax of a scalar is 0
            return record_op(op, {"x": self.reshape(1)}, {"axis": 0, "keep_dims": False})
        if dim is None:           # the index into the flattened tensor
            flat = record_op(op, {"x": self.reshape(-1)}, {"axis": 0, "keep_dims": False})
            return flat.reshape((1,) * self.ndim) if keepdim else flat
        return record_op(op, {"x": self}, {"axis": dim, "keep_dims": keepdim})

    def argmax(self, dim=None, keepdim: bool = False) -> "Tensor":
        """Index of the largest value (int32; the first one on ties)."""
        return self._arg("reduce_argmax", dim, keepdim)

    def argmin(self, dim=None, keepdim: bool = False) -> "Tensor":
        return self._arg("reduce_argmin", dim, keepdim)

    # ---- shapes ----------------------------------------------------------------------
    def reshape(self, *shape) -> "Tensor":
        shape = _infer_size(_sizes(shape), self.numel(), self.shape)
        return self if shape == self.shape else record_op("reshape", {"x": self}, {"shape": shape})

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        if self.ndim == 0:
            return self.reshape(1)
        s, e = start_dim % self.ndim, end_dim % self.ndim
        return self.reshape(self.shape[:s] + (-1,) + self.shape[e + 1:])

    def permute(self, *dims) -> "Tensor":
        dims = tuple(d % max(self.ndim, 1) for d in _sizes(dims))
        if sorted(dims) != list(range(self.ndim)):
            raise ShapeError(f"permute: {dims} is not a permutation of {self.ndim} dims "
                             f"(shape {self.shape})")
        if dims == tuple(range(self.ndim)):
            return self
        return record_op("transpose", {"x": self}, {"perm": dims})

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        perm = list(range(self.ndim))
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        return self.permute(perm)

    def swapaxes(self, axis0: int, axis1: int) -> "Tensor":
        return self.transpose(axis0, axis1)

    def t(self) -> "Tensor":
        if self.ndim > 2:
            raise ShapeError(f"t() expects a tensor with <= 2 dims, got shape {self.shape}; "
                             f"use transpose(dim0, dim1)")
        return self if self.ndim < 2 else self.transpose(0, 1)

    @property
    def T(self) -> "Tensor":
        return self.permute(tuple(reversed(range(self.ndim))))

    def unsqueeze(self, dim: int) -> "Tensor":
        return record_op("expand_dims", {"x": self}, {"axes": (dim % (self.ndim + 1),)})

    def squeeze(self, dim=None) -> "Tensor":
        """Drop size-1 axes (all, or the given ones; like torch, a given axis of size > 1 stays)."""
        dims = range(self.ndim) if dim is None else dim if isinstance(dim, (tuple, list)) else (dim,)
        axes = tuple(d % self.ndim for d in dims if self.shape[d] == 1) if self.ndim else ()
        return self if not axes else record_op("squeeze", {"x": self}, {"axes": axes})

    def expand(self, *sizes) -> "Tensor":
        """Broadcast to `sizes` (-1 keeps an axis); MIL has no view, so this tiles."""
        sizes = _sizes(sizes)
        if len(sizes) < self.ndim:
            raise ShapeError(f"expand: {sizes} has fewer dims than the tensor's shape {self.shape}")
        x = self.reshape((1,) * (len(sizes) - self.ndim) + self.shape)
        target = tuple(n if s == -1 else s for n, s in zip(x.shape, sizes))
        reps = []
        for n, s in zip(x.shape, target):
            if n != s and n != 1:
                raise ShapeError(f"expand: cannot expand shape {self.shape} to {sizes}: an axis "
                                 f"of size {n} can only stay or grow from 1")
            reps.append(s if n == 1 else 1)
        return x if all(r == 1 for r in reps) else \
            record_op("tile", {"x": x}, {"reps": tuple(reps)})

    def expand_as(self, other: "Tensor") -> "Tensor":
        return self.expand(other.shape)

    def split(self, split_size_or_sections, dim: int = 0) -> tuple["Tensor", ...]:
        n = self.shape[dim]
        if isinstance(split_size_or_sections, int):
            k = split_size_or_sections
            sizes = [k] * (n // k) + ([n % k] if n % k else [])
        else:
            sizes = list(split_size_or_sections)
        if len(sizes) == 1:
            return (self,)
        return record_op("split", {"x": self}, {"split_sizes": tuple(sizes), "axis": dim})

    def chunk(self, chunks: int, dim: int = 0) -> tuple["Tensor", ...]:
        return self.split(-(-self.shape[dim] // chunks), dim)

    def movedim(self, source: int, destination: int) -> "Tensor":
        perm = list(range(self.ndim))
        perm.insert(destination % self.ndim, perm.pop(source % self.ndim))
        return self.permute(perm)

    def narrow(self, dim: int, start: int, length: int) -> "Tensor":
        index = [slice(None)] * self.ndim
        index[dim] = slice(start, start + length)
        return self[tuple(index)]

    def unbind(self, dim: int = 0) -> tuple["Tensor", ...]:
        return tuple(t.squeeze(dim) for t in self.split(1, dim))

    def __getitem__(self, index) -> "Tensor":
        from ._indexing import getitem
        return getitem(self, index)

    def __setitem__(self, index, value):
        raise AneforgeError("in-place assignment is not supported: programs are static SSA. "
                            "Build the new value with af.where(mask, value, x) or af.cat.")


def record_op(op: str, inputs: dict[str, Any], attrs: dict[str, Any]):
    """Record one registered MIL op on Tensors and return its output Tensor (a tuple if it has
    several): the package's one way to build an op outside Tensor's methods. `inputs` maps MIL
    argument names to Tensors (or tuples of them), `attrs` the op's literal arguments; the op's
    `infer` checks shapes, dtypes and ANE limits now.

    >>> import aneforge as af
    >>> from aneforge.tensor import record_op
    >>> record_op("exp", {"x": af.zeros(2)}, {}).tolist()
    [1.0, 1.0]
    """
    refs, grad = {}, False
    for k, v in inputs.items():          # one pass: references, and whether any needs grad
        if v is None:
            refs[k] = None
        elif type(v) is tuple or type(v) is list:
            refs[k] = [(t._node, t._idx) for t in v]
            grad = grad or any(t._node.requires_grad for t in v)
        else:
            refs[k] = (v._node, v._idx)
            grad = grad or v._node.requires_grad
    node = record(op, refs, attrs, grad and CTX.thread.grad_enabled)
    if len(node.types) == 1:
        return Tensor(node)
    return tuple(Tensor(node, i) for i in range(len(node.types)))


def _bools(x: Tensor, other) -> tuple[Tensor, Tensor]:
    if not isinstance(other, Tensor):
        other = const(bool(other), dtypes.bool_)
    if x.dtype != dtypes.bool_ or other.dtype != dtypes.bool_:
        raise DTypeError(f"&, | and ^ need bool tensors, got {x.dtype} and {other.dtype}; "
                         f"compare first (x > 0) or cast with .bool()")
    return x, other


def _select(cond: Tensor, a: Tensor, b: Tensor) -> Tensor:
    return record_op("select", {"cond": cond, "a": a, "b": b}, {})


def const(value, dtype: DType) -> Tensor:
    """A literal baked into the program (Python numbers in expressions: part of the structure)."""
    if type(value) in (int, float, bool) and value == value:     # a Python number (not NaN)
        key = (type(value), value, dtype)
        made = _CONSTS.get(key)
        if made is not None:                 # checked once: a new node with the same literal
            return Tensor(Node("const", {}, made[0], made[1], None, False, made[2]))
        if len(_CONSTS) >= 4096:
            _CONSTS.clear()
        t = record_op("const", {}, {"val": np.asarray(value, dtype=dtype.np)})
        _CONSTS[key] = (t._node.attrs, t._node.types, t._node.key)
        return t
    return record_op("const", {}, {"val": np.asarray(value, dtype=dtype.np)})


_CONSTS: dict = {}      # a pure cache: a Python number's checked const (attrs, types, key)


def tensor_like(value, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        return value
    from .creation import tensor
    return tensor(value)


def _scalar_dtype(x: Tensor, value) -> DType:
    if isinstance(value, bool):
        return x.dtype
    if isinstance(value, numbers.Integral):
        return x.dtype if x.dtype != dtypes.bool_ else dtypes.int32
    if x.dtype.is_float:
        return x.dtype
    return dtypes.float16


def operands(x: Tensor, other, floating: bool = False) -> tuple[Tensor, Tensor]:
    """Both operands as Tensors of one dtype, by torch's promotion rules (a Python number takes
    the tensor's dtype unless it is a float meeting an integer tensor); `floating` promotes an
    integer result to float16. The package's way to prepare a binary op's inputs.

    >>> import aneforge as af
    >>> from aneforge.tensor import operands
    >>> [t.dtype for t in operands(af.tensor([1, 2]), 0.5)]
    [aneforge.float16, aneforge.float16]
    """
    if isinstance(other, Tensor):
        a, b = x._node.types[x._idx].dtype, other._node.types[other._idx].dtype
        if a is b and (a.is_float or not floating):          # the common case: nothing to cast
            return x, other
    elif isinstance(other, np.ndarray):
        other = tensor_like(other, x)
    if not isinstance(other, Tensor):
        if not isinstance(other, numbers.Number):
            raise TypeError(f"unsupported operand type {type(other).__name__} with a Tensor")
        dt = _scalar_dtype(x, other)
        if floating and not dt.is_float:
            dt = dtypes.float16
        return x.to(dt), const(other, dt)
    dt = dtypes.promote(x.dtype, other.dtype)
    if floating and not dt.is_float:
        dt = dtypes.float16
    return x.to(dt), other.to(dt)


def _int_power(x: Tensor, n: int) -> Tensor:
    """x ** n by repeated squaring: exact, where MIL pow is floating-only."""
    if n < 0:
        raise AneforgeError(f"integer tensors cannot be raised to a negative integer power ({n}); "
                            f"use x.float() ** {n}")
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else result * base
        n >>= 1
        if n:
            base = base * base
    return (x - x) + 1 if result is None else result      # x ** 0: ones without mul by 0


def _int_pow_tensor(x: Tensor, y: Tensor) -> Tensor:
    """int ** int tensors stay integer, as in torch: |x| ** y in fp32 (exact below 2**24),
    rounded to the nearest integer (a fraction, from a negative exponent, truncates to 0 as
    torch's integer pow does), with the sign of x for odd y."""
    q = x.abs().float() ** y.float()
    q = record_op("select", {"cond": q >= 1.0, "a": q + 0.5, "b": q}, {}).to(x.dtype)
    odd = (y - (y.float() * 0.5).to(y.dtype) * 2) != 0
    return record_op("select", {"cond": (x < 0) & odd, "a": -q, "b": q}, {})


def _sizes(args) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    return tuple(int(a) for a in args)


def _infer_size(shape: Sequence[int], numel: int, old) -> tuple[int, ...]:
    if list(shape).count(-1) > 1:
        raise ShapeError(f"reshape: only one dimension can be -1, got {tuple(shape)}")
    known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
    if -1 in shape:
        if known == 0 or numel % known:
            raise ShapeError(f"reshape: shape {tuple(shape)} is invalid for input of size {numel} "
                             f"(shape {old})")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if int(np.prod(shape, dtype=np.int64)) != numel:
        raise ShapeError(f"reshape: shape {tuple(shape)} is invalid for input of size {numel} "
                         f"(shape {old})")
    return tuple(shape)
