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

import math
import numbers
import operator
import weakref
from collections import namedtuple
from typing import Any, Sequence

import numpy as np

from . import compiler, dtypes, scalar_consts
from .context import CTX
from .dtypes import DType
from .errors import AneforgeError, DTypeError, LimitError, ShapeError
from .ir.types import TensorType
from .trace import SEQ, Node, leaf, record, record_binary

minmax = namedtuple("minmax", ["values", "indices"])
# torch's legacy type strings (Tensor.type()); int64/double name the int32/fp32 we compute in.
TYPE_NAMES = {"fp16": "torch.HalfTensor", "fp32": "torch.FloatTensor", "int32": "torch.IntTensor",
              "int16": "torch.ShortTensor", "int8": "torch.CharTensor", "uint8": "torch.ByteTensor",
              "uint16": "torch.UInt16Tensor", "bool": "torch.BoolTensor"}
TYPE_DTYPES = {**{v: k for k, v in TYPE_NAMES.items()}, "torch.LongTensor": "int32",
               "torch.DoubleTensor": "fp32"}
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
    def tensor_type(self) -> TensorType:
        """The static (shape, dtype) of this value (MIL's tensor type)."""
        return self._node.types[self._idx]

    @property
    def shape(self) -> tuple[int, ...]:
        return self.tensor_type.shape

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[norm_dim(dim, self.ndim, "size")]

    @property
    def dtype(self) -> DType:
        return self.tensor_type.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(self.shape)

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

    def backward(self, gradient=None, retain_graph: bool | None = None) -> None:
        """Accumulate gradients of this tensor into `.grad` of the leaves that require grad.
        A graph is differentiated once, as in torch, unless `retain_graph=True`.

        >>> import aneforge as af
        >>> w = af.tensor([1.0, -2.0], requires_grad=True)
        >>> (w * w).sum().backward()
        >>> w.grad.tolist()
        [2.0, -4.0]
        """
        from .autograd import backward
        backward(self, gradient, retain_graph)

    def detach(self) -> "Tensor":
        """The same value, cut from the gradient graph."""
        if self._node.data is not None:
            return Tensor(leaf(self._node.data[self._idx], self.tensor_type))
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
            array, type = source.value(), source.tensor_type
            if capture is not None:          # af.compile: a replay sets the new value again
                capture.effect(self.set_, source)
        else:
            if capture is not None:
                capture.host_write()
            array = np.asarray(source)
            type = self.tensor_type                 # kept when the shape is (a replayed step)
            if type.shape != array.shape:
                type = TensorType(array.shape, type.dtype)
        return self._adopt(array, type)

    def _adopt(self, array: np.ndarray, type: TensorType) -> "Tensor":
        """`set_` of a host array already of this tensor's dtype, checks done (af.compile's
        replay sets parameters and optimizer state this way each step)."""
        old = self._node
        node = self._node = leaf(array, type, old.requires_grad)
        self._idx = 0
        node.grad = old.grad
        # Both leaves name this handle: a captured program that read the old value reads the
        # handle's current one on replay (aneforge.replay).
        node.owner = owner = weakref.ref(self)
        if old.owner is None and old.op is None:
            old.owner = owner
        return self

    def __deepcopy__(self, memo) -> "Tensor":
        """A new leaf with a copy of the value (and of `.grad`), of the same class: what
        copy.deepcopy of a module needs (torch: only leaves can be deep-copied)."""
        if not self.is_leaf:
            raise AneforgeError("Only Tensors created explicitly by the user (graph leaves) "
                                "support the deepcopy protocol; detach() first")
        new = type(self).__new__(type(self))
        Tensor.__init__(new, leaf(self.value().copy(), self.tensor_type, self.requires_grad))
        if self.grad is not None:
            new._node.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = new
        return new

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
        data = self._node.data
        if data is None:
            self.realize()
            data = self._node.data
        return data[self._idx]

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

    def type(self, dtype=None, non_blocking: bool = False):
        """torch's type string with no argument ('torch.HalfTensor'), else a cast to `dtype`
        (a dtype, or a type string such as 'torch.FloatTensor').

        >>> import aneforge as af
        >>> x = af.tensor([1.5, 2.5])
        >>> x.type(), x.type(af.int32).tolist(), x.type("torch.FloatTensor").dtype
        ('torch.HalfTensor', [1, 2], aneforge.float32)
        """
        if dtype is None:
            return TYPE_NAMES[self.dtype.name]
        if isinstance(dtype, str) and dtype in TYPE_DTYPES:
            dtype = TYPE_DTYPES[dtype]
        return self.to(dtype)

    def type_as(self, other: "Tensor") -> "Tensor":
        return self.to(other.dtype)

    def _floating(self) -> "Tensor":
        return self if self.dtype.is_float else self.to(dtypes.float16)

    # ---- arithmetic ------------------------------------------------------------------
    def _binary(self, op: str, other, reverse: bool = False, floating: bool = False):
        if type(other) is float or type(other) is int:      # a Python number: a const
            if not (_F16_LO <= abs(other) <= 65504.0 or other == 0) \
                    and scalar_consts.needs_split(op, other):
                x = self._floating() if floating else self
                if _scalar_dtype(x, other).is_float:  # fp16 cannot hold it: keep it exact
                    return scalar_consts.apply_split(op, x, other, reverse)
            dt = _number_dtype(self, other, floating)
            a = self if dt is self._node.types[self._idx].dtype else self.to(dt)
            a, b = (a._node, a._idx), (_number_node(other, dt), 0)
        else:
            a, b = operands(self, other, floating)
            a, b = (a._node, a._idx), (b._node, b._idx)
        if reverse:
            a, b = b, a
        return Tensor(record_binary(op, a, b, (a[0].requires_grad or b[0].requires_grad)
                                    and CTX.thread.grad_enabled))   # record_op, unrolled

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
        if isinstance(other, Tensor):
            _same_kind("matmul", self, other)
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

    def softmax(self, dim: int | None = None, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "softmax", required=True)
        dim = norm_dim(dim, self.ndim, "softmax")
        return _need_float(self, "softmax")._unary("softmax", axis=dim)

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

    def var(self, dim=None, keepdim: bool = False, correction: int = 1, unbiased=None, *,
            axis=None) -> "Tensor":
        """Variance with Bessel's correction by default (`correction`, or torch's older
        `unbiased`), as torch. Two passes: the mean, then the mean of squared deviations over
        N - correction, both through the engine's wide matmul accumulator when the reduced
        length would make its fp16 reduce_sum lossy (aneforge.reductions). A variance whose
        magnitude is below 2**-14 reads 0 on M1 (its matmul output port flushes; M5 keeps it).

        >>> import aneforge as af
        >>> af.tensor([1.0, 2.0, 3.0, 4.0]).var().item()
        1.666...
        """
        from . import reductions
        dim = _dim_or_axis(dim, axis, "var")
        correction = int(unbiased) if unbiased is not None else correction
        reductions.axes_of(self, dim, "var")           # torch checks dim before dtype
        return reductions.var_mean(_need_float(self, "var"), dim, keepdim, correction)[0]

    def std(self, dim=None, keepdim: bool = False, correction: int = 1, unbiased=None, *,
            axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "std")
        return self.var(dim, keepdim, correction, unbiased).sqrt()

    def any(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "any")
        return (self != 0).to(dtypes.float16).amax(dim, keepdim) > 0.5

    def all(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "all")
        return (self != 0).to(dtypes.float16).amin(dim, keepdim) > 0.5

    def log_softmax(self, dim: int | None = None, *, axis=None) -> "Tensor":
        """x - max - log(sum(exp(x - max))): stable, built from registered ops. The max is
        detached: its exact gradient is zero, and through fp16 it is a cancellation
        (-sum(g) + sum(g) * sum(softmax)) that lands on the argmax (torch's rule has no such term)."""
        dim = _dim_or_axis(dim, axis, "log_softmax", required=True)
        norm_dim(dim, self.ndim, "log_softmax")
        x = _need_float(self, "log_softmax")
        if x.ndim == 0:
            return x - x
        shifted = (x - x.amax(dim, keepdim=True).detach()).movedim(dim, -1)
        # The sum and its broadcast back are matmuls with ones: the forward sum, and the
        # gradient's sum of the cotangent over the axis, run in the wide accumulator (a narrow
        # fp16 sum of K cotangents is off by ~sqrt(K) ulps of the running sum).
        k = x.shape[dim]
        total = shifted.exp() @ const(np.ones((k, 1)), x.dtype)
        lse = total.log() @ const(np.ones((1, k)), x.dtype)
        return (shifted - lse).movedim(-1, dim)

    # ---- reductions ------------------------------------------------------------------
    def _reduce(self, op: str, dim, keepdim: bool) -> "Tensor":
        axes = tuple(dim) if isinstance(dim, (tuple, list)) else () if dim is None else (dim,)
        axes = tuple(norm_dim(a, self.ndim, op) for a in axes) or None   # none: every axis
        if self.ndim == 0:
            return self
        return record_op(op, {"x": self}, {"axes": axes, "keep_dims": keepdim})

    def sum(self, dim=None, keepdim: bool = False, dtype=None, *, axis=None) -> "Tensor":
        """Sum over `dim` (every axis by default). A float16 sum of more than 16 elements runs
        as a matmul with a column of 0.5 (then doubled): the engine's matmul accumulates wide,
        its reduce_sum in fp16 (aneforge.reductions has the route and its thresholds). Sums up
        to fp16's 65504 are right; beyond, inf as in torch's float16.

        >>> import aneforge as af
        >>> af.ones(4096).sum().item()
        4096.0
        """
        from . import reductions
        dim = _dim_or_axis(dim, axis, "sum")
        x = self.to(dtype) if dtype is not None else self.int() if self.dtype == dtypes.bool_ else self
        return reductions.sum(x, dim, keepdim)

    def mean(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        """Mean over `dim` (every axis by default). A float16 mean of more than 16 elements is a
        matmul with a column of 1/N (the wide accumulator, aneforge.reductions): right while
        the mean is below 32768 (the port's inf); a mean below 2**-14 in magnitude reads 0 on M1.

        >>> import aneforge as af
        >>> (af.ones(4096) * 3).mean().item()
        3.0
        """
        from . import reductions
        dim = _dim_or_axis(dim, axis, "mean")
        reductions.axes_of(self, dim, "mean")          # torch checks dim before dtype
        return reductions.mean(_need_float(self, "mean"), dim, keepdim)

    def amax(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "amax")
        return self._reduce("reduce_max", dim, keepdim)

    def amin(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "amin")
        return self._reduce("reduce_min", dim, keepdim)

    def _extremum(self, reduce, arg, elementwise, dim, keepdim):
        if isinstance(dim, Tensor):
            return elementwise(self, dim)
        if dim is None:
            return reduce(self)
        return minmax(reduce(self, dim, keepdim), arg(self, dim, keepdim))

    def max(self, dim=None, keepdim: bool = False, *, axis=None):
        """max() -> the largest value; max(dim) -> (values, indices); max(tensor) -> elementwise."""
        dim = _dim_or_axis(dim, axis, "max")
        return self._extremum(Tensor.amax, Tensor.argmax, Tensor.maximum, dim, keepdim)

    def min(self, dim=None, keepdim: bool = False, *, axis=None):
        """min() -> the smallest value; min(dim) -> (values, indices); min(tensor) -> elementwise."""
        dim = _dim_or_axis(dim, axis, "min")
        return self._extremum(Tensor.amin, Tensor.argmin, Tensor.minimum, dim, keepdim)

    def _arg(self, op: str, dim, keepdim: bool) -> "Tensor":
        if self.ndim == 0:                  # MIL reduces rank >= 1: argmax of a scalar is 0
            if dim is not None:
                norm_dim(dim, 0, op)
            return record_op(op, {"x": self.reshape(1)}, {"axis": 0, "keep_dims": False})
        if dim is not None:
            dim = norm_dim(dim, self.ndim, op.replace("reduce_", ""))
        if dim is None:           # the index into the flattened tensor
            flat = record_op(op, {"x": self.reshape(-1)}, {"axis": 0, "keep_dims": False})
            return flat.reshape((1,) * self.ndim) if keepdim else flat
        return record_op(op, {"x": self}, {"axis": dim, "keep_dims": keepdim})

    def argmax(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        """Index of the largest value (int32; the first one on ties)."""
        dim = _dim_or_axis(dim, axis, "argmax")
        return self._arg("reduce_argmax", dim, keepdim)

    def argmin(self, dim=None, keepdim: bool = False, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "argmin")
        return self._arg("reduce_argmin", dim, keepdim)

    # ---- shapes ----------------------------------------------------------------------
    def reshape(self, *shape) -> "Tensor":
        shape = _infer_size(_sizes(shape), self.numel(), self.shape)
        return self if shape == self.shape else record_op("reshape", {"x": self}, {"shape": shape})

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        s, e = norm_dim(start_dim, self.ndim, "flatten"), norm_dim(end_dim, self.ndim, "flatten")
        if s > e:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        if self.ndim == 0:
            return self.reshape(1)
        return self.reshape(self.shape[:s] + (-1,) + self.shape[e + 1:])

    def permute(self, *dims) -> "Tensor":
        if not dims:
            raise TypeError('permute() missing 1 required positional arguments: "dims"')
        dims = tuple(norm_dim(d, self.ndim, "permute") for d in _sizes(dims))
        if sorted(dims) != list(range(self.ndim)):
            raise ShapeError(f"permute: {dims} is not a permutation of {self.ndim} dims "
                             f"(shape {self.shape})")
        if dims == tuple(range(self.ndim)):
            return self
        return record_op("transpose", {"x": self}, {"perm": dims})

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        perm = list(range(self.ndim))
        dim0, dim1 = norm_dim(dim0, self.ndim, "transpose"), norm_dim(dim1, self.ndim, "transpose")
        if self.ndim == 0:
            return self
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

    def unsqueeze(self, dim: int | None = None, *, axis=None) -> "Tensor":
        dim = _dim_or_axis(dim, axis, "unsqueeze", required=True)
        return record_op("expand_dims", {"x": self},
                         {"axes": (norm_dim(dim, self.ndim + 1, "unsqueeze"),)})

    def squeeze(self, dim=None, *, axis=None) -> "Tensor":
        """Drop size-1 axes (all, or the given ones; like torch, a given axis of size > 1 stays)."""
        dim = _dim_or_axis(dim, axis, "squeeze")
        dims = range(self.ndim) if dim is None else dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = [norm_dim(d, self.ndim, "squeeze") for d in dims]
        axes = tuple(d for d in dims if self.ndim and self.shape[d] == 1)
        return self if not axes else record_op("squeeze", {"x": self}, {"axes": axes})

    def expand(self, *sizes) -> "Tensor":
        """Broadcast to `sizes` (-1 keeps an axis); MIL has no view, so this tiles."""
        if not sizes:
            raise TypeError('expand() missing 1 required positional arguments: "size"')
        sizes = _sizes(sizes)
        _no_empty("expand", sizes)
        if len(sizes) < self.ndim:
            raise ShapeError(f"expand: {sizes} has fewer dims than the tensor's shape {self.shape}")
        lead = len(sizes) - self.ndim
        if -1 in sizes[:lead]:
            raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                               f"non-existing dimension {sizes.index(-1)}")
        x = self.reshape((1,) * lead + self.shape)
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
        dim = norm_dim(dim, self.ndim, "split")
        n = self.shape[dim]
        if isinstance(split_size_or_sections, int):
            k = split_size_or_sections
            if k <= 0:
                raise ValueError(f"split expects split_size be positive, but got split_size={k}")
            sizes = [k] * (n // k) + ([n % k] if n % k else [])
        else:
            sizes = list(split_size_or_sections)
        if len(sizes) == 1:
            return (self,)
        return record_op("split", {"x": self}, {"split_sizes": tuple(sizes), "axis": dim})

    def chunk(self, chunks: int, dim: int = 0) -> tuple["Tensor", ...]:
        if chunks <= 0:
            raise ValueError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
        dim = norm_dim(dim, self.ndim, "chunk")
        return self.split(-(-self.shape[dim] // chunks), dim)

    def movedim(self, source: int, destination: int) -> "Tensor":
        src, dst = norm_dim(source, self.ndim, "movedim"), norm_dim(destination, self.ndim, "movedim")
        if self.ndim == 0:
            return self
        perm = list(range(self.ndim))
        perm.insert(dst, perm.pop(src))
        return self.permute(perm)

    def narrow(self, dim: int, start: int, length: int) -> "Tensor":
        """`length` entries of axis `dim` from `start` (negative `start` counts from the end).

        >>> import aneforge as af
        >>> af.tensor([1, 2, 3, 4]).narrow(0, -3, 2).tolist()
        [2, 3]
        """
        if self.ndim == 0:
            raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
        dim = norm_dim(dim, self.ndim, "narrow")
        n = self.shape[dim]
        if not -n <= start <= n:
            raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], "
                             f"but got {start})")
        start %= n if start < 0 else n + 1
        if length < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
        if start + length > n:
            raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
        if length == 0:
            raise LimitError("narrow(): length 0 selects nothing; the ANE has no empty tensors")
        from ._indexing import narrow
        return narrow(self, dim, start, start + length)

    def select(self, dim: int, index: int) -> "Tensor":
        """The slice at `index` along `dim`, with that axis removed (``x.select(1, 0)`` is
        ``x[:, 0]``).

        >>> import aneforge as af
        >>> af.tensor([[1, 2], [3, 4]]).select(1, -1).tolist()
        [2, 4]
        """
        if self.ndim == 0:
            raise IndexError("select() cannot be applied to a 0-dim tensor.")
        dim = norm_dim(dim, self.ndim, "select")
        n = self.shape[dim]
        if not -n <= index < n:
            raise IndexError(f"select(): index {index} out of range for tensor of size "
                             f"{list(self.shape)} at dimension {dim}")
        return self[(slice(None),) * dim + (index,)]

    def unbind(self, dim: int = 0) -> tuple["Tensor", ...]:
        return tuple(t.squeeze(dim) for t in self.split(1, dim))

    # ---- torch parity: composites of registered ops --------------------------------------
    @property
    def mT(self) -> "Tensor":
        """The last two axes swapped (a batch of matrices transposed).

        >>> import aneforge as af
        >>> af.zeros(2, 3, 4).mT.shape
        (2, 4, 3)
        """
        return self.transpose(-2, -1)

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

    def _rounded(self, mode: str) -> "Tensor":
        """trunc / floor / ceil of a floating tensor: a cast to int32 truncates (exact below
        2**10 in fp16 and 2**23 in fp32: larger values are integers already). The gradient is
        zero everywhere, as torch's, through an x - x term that stays finite."""
        x = self._floating()
        t = x.to(dtypes.int32).to(x.dtype)
        if mode == "floor":
            t = _where(t > x, t - 1.0, t)
        elif mode == "ceil":
            t = _where(t < x, t + 1.0, t)
        big = 1024.0 if x.dtype == dtypes.float16 else 8388608.0
        return _where(x.abs() < big, t, x.detach()) + x._zero_link()

    def trunc(self) -> "Tensor":
        """Round toward zero.

        >>> import aneforge as af
        >>> af.tensor([-1.5, 2.5]).trunc().tolist()
        [-1.0, 2.0]
        """
        return self if not self.dtype.is_float else self._rounded("trunc")

    def floor(self) -> "Tensor":
        """Round down.

        >>> import aneforge as af
        >>> af.tensor([-1.5, 2.5]).floor().tolist()
        [-2.0, 2.0]
        """
        return self if not self.dtype.is_float else self._rounded("floor")

    def ceil(self) -> "Tensor":
        """Round up.

        >>> import aneforge as af
        >>> af.tensor([-1.5, 2.5]).ceil().tolist()
        [-1.0, 3.0]
        """
        return self if not self.dtype.is_float else self._rounded("ceil")

    def div(self, other, rounding_mode: str | None = None) -> "Tensor":
        """self / other; rounding_mode 'trunc' or 'floor' rounds the quotient (integers stay
        integer). Quotients are formed in fp32, as torch's reference computes them.

        >>> import aneforge as af
        >>> af.div(af.tensor([1.0, 3.0]), 2).tolist()
        [0.5, 1.5]
        >>> af.tensor([-7, 7]).div(2, rounding_mode="floor").tolist()
        [-4, 3]
        """
        if rounding_mode is None:
            return self / other
        if rounding_mode not in ("trunc", "floor"):
            raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got "
                             f"{rounding_mode!r}")
        a, b = operands(self, other)
        q = a.to(dtypes.float32) / b.to(dtypes.float32)
        return q._rounded(rounding_mode).to(a.dtype)

    def floor_divide(self, other) -> "Tensor":
        """floor(self / other), as Python's // (torch.floor_divide).

        >>> import aneforge as af
        >>> (af.tensor([-7, 7]) // 2).tolist()
        [-4, 3]
        """
        return self.div(other, rounding_mode="floor")

    def __floordiv__(self, other):
        return self.floor_divide(other)

    def __rfloordiv__(self, other):
        return operands(self, other)[1].floor_divide(self)

    def _modulo(self, other, mode: str) -> "Tensor":
        a, b = operands(self, other)
        wide = dtypes.float32
        af_, bf = a.to(wide), b.to(wide)
        if not a.dtype.is_float:
            return a - b * (af_ / bf)._rounded(mode).to(a.dtype)
        return (af_ - bf * (af_ / bf)._rounded(mode)).to(a.dtype)

    def remainder(self, other) -> "Tensor":
        """self - other * floor(self / other): the sign of `other`, as Python's %.

        >>> import aneforge as af
        >>> (af.tensor([-3, 5]) % 3).tolist()
        [0, 2]
        """
        return self._modulo(other, "floor")

    def fmod(self, other) -> "Tensor":
        """self - other * trunc(self / other): the sign of `self`, as C's fmod.

        >>> import aneforge as af
        >>> af.fmod(af.tensor([-3, 5]), 3).tolist()
        [0, 2]
        """
        return self._modulo(other, "trunc")

    def __mod__(self, other):
        return self.remainder(other)

    def __rmod__(self, other):
        return operands(self, other)[1].remainder(self)

    def copysign(self, other) -> "Tensor":
        """|self| with the sign of `other`. -0.0 counts as negative, as in torch, under IEEE
        special values; the engine computes 1/(-0) = +inf (sbryngelson/ane-guide, numerics
        chapter), so with its default special values a -0.0 in `other` reads as positive.

        >>> import aneforge as af
        >>> af.tensor([1.0, -2.0]).copysign(af.tensor([-5.0, 3.0])).tolist()
        [-1.0, 2.0]
        >>> with af.numerics(specials="ieee"):
        ...     af.tensor([1.0]).copysign(af.tensor([-0.0])).tolist()
        [-1.0]
        """
        a, b = operands(self, other, floating=True)
        negative = (b < 0) | (b.reciprocal() < 0)       # 1 / -0.0 = -inf
        mag = a.abs()
        out = _where(negative, -mag, mag)
        return out + b._zero_link() if b.requires_grad else out

    def _zero_link(self) -> "Tensor":
        """Zeros that carry a zero gradient back to self (torch's gradient of a value that
        does not depend on it): c - c of self clipped to the finite range (inf - inf is NaN)."""
        big = float(np.finfo(self.dtype.np).max)
        finite = self.clamp(-big, big)
        return finite - finite

    def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> "Tensor":
        """|self - other| <= atol + rtol * |other| elementwise (equal infinities are close),
        compared in fp32 as torch's float reference.

        >>> import aneforge as af
        >>> af.isclose(af.tensor([1.0, 2.0]), af.tensor([1.0, 2.5])).tolist()
        [True, False]
        """
        a, b = operands(self, other)
        if not a.dtype.is_float:
            return a == b
        a, b = a.float(), b.float()
        close = ((a - b).abs() <= (b.abs() * rtol + atol)) | (a == b)
        return close | ((a != a) & (b != b)) if equal_nan else close

    def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08,
                 equal_nan: bool = False) -> bool:
        """True if isclose holds everywhere (computes the values: a Python bool).

        >>> import aneforge as af
        >>> af.allclose(af.tensor([1.0, 2.0]), af.tensor([1.0, 2.0]))
        True
        """
        return bool(self.isclose(other, rtol, atol, equal_nan).all())

    def tril(self, diagonal: int = 0) -> "Tensor":
        """The lower triangle of the last two axes (above `diagonal` zeroed): a select with a
        constant mask.

        >>> import aneforge as af
        >>> af.tril(af.ones(2, 2)).tolist()
        [[1.0, 0.0], [1.0, 1.0]]
        """
        return self._triangle(np.tri(*self.shape[-2:], k=diagonal, dtype=bool))

    def triu(self, diagonal: int = 0) -> "Tensor":
        """The upper triangle of the last two axes (below `diagonal` zeroed).

        >>> import aneforge as af
        >>> af.triu(af.ones(2, 2)).tolist()
        [[1.0, 1.0], [0.0, 1.0]]
        """
        return self._triangle(~np.tri(*self.shape[-2:], k=diagonal - 1, dtype=bool))

    def _triangle(self, mask: np.ndarray) -> "Tensor":
        if self.ndim < 2:
            raise ShapeError(f"tril/triu need at least 2 dims, got shape {self.shape}")
        return _where(const(mask, dtypes.bool_), self, self._zeros())

    def _zeros(self) -> "Tensor":
        """Zeros of this shape and dtype, as x - x (false for bool); never mul by zero."""
        if self.dtype == dtypes.bool_:
            return self & False
        return self - self

    def repeat(self, *sizes) -> "Tensor":
        """Tile the tensor `sizes` times along each axis (MIL tile; new leading axes allowed).

        >>> import aneforge as af
        >>> af.tensor([1, 2]).repeat(2, 2).tolist()
        [[1, 2, 1, 2], [1, 2, 1, 2]]
        """
        if not sizes:
            raise TypeError('repeat() missing 1 required positional arguments: "repeats"')
        sizes = _sizes(sizes)
        _no_empty("repeat", sizes)
        if len(sizes) < self.ndim:
            raise ShapeError(f"repeat: {len(sizes)} sizes for a {self.ndim}-D tensor; give at "
                             f"least one per axis")
        x = self.reshape((1,) * (len(sizes) - self.ndim) + self.shape)
        return x if all(r == 1 for r in sizes) else record_op("tile", {"x": x}, {"reps": sizes})

    def flip(self, dims) -> "Tensor":
        """Reverse the order along `dims` (split into slices, concatenated backwards: exact for
        every dtype).

        >>> import aneforge as af
        >>> af.flip(af.tensor([[1, 2], [3, 4]]), (0, 1)).tolist()
        [[4, 3], [2, 1]]
        """
        x = self
        dims = [norm_dim(d, self.ndim, "flip") for d in ((dims,) if isinstance(dims, int) else dims)]
        for d in dims:
            if dims.count(d) > 1:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        for d in dims if self.ndim else ():
            if x.shape[d] > 1:
                x = from_functions("cat")(list(reversed(x.split(1, d))), d)
        return x

    def roll(self, shifts, dims=None) -> "Tensor":
        """Shift elements along `dims` by `shifts`, wrapping around (slices + concat); with no
        dims the flattened tensor is rolled.

        >>> import aneforge as af
        >>> af.roll(af.tensor([1, 2, 3, 4]), 1).tolist()
        [4, 1, 2, 3]
        """
        if dims is None:
            return self.flatten().roll(shifts, 0).reshape(self.shape)
        shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        x = self
        for s, d in zip(shifts, dims):
            n = x.shape[d]
            s %= n
            if s:
                x = from_functions("cat")([x.narrow(d, n - s, s), x.narrow(d, 0, n - s)], d)
        return x

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> "Tensor":
        """The diagonal of the (dim1, dim2) planes, as the last axis: a strided slice of the
        flattened planes (exact).

        >>> import aneforge as af
        >>> af.diagonal(af.tensor([[1, 2], [3, 4]])).tolist()
        [1, 4]
        """
        d1, d2 = dim1 % self.ndim, dim2 % self.ndim
        x = self.permute([i for i in range(self.ndim) if i not in (d1, d2)] + [d1, d2])
        n, m = x.shape[-2:]
        length = min(n, m - offset) if offset >= 0 else min(n + offset, m)
        if length < 1:
            raise ShapeError(f"diagonal: offset {offset} leaves no diagonal in a {n}x{m} plane "
                             f"(empty tensors are not supported)")
        start = offset if offset >= 0 else -offset * m
        flat = x.reshape(x.shape[:-2] + (n * m,))
        return flat[..., start:start + (length - 1) * (m + 1) + 1:m + 1]

    def prod(self, dim=None, keepdim: bool = False, dtype=None, *, axis=None) -> "Tensor":
        """Product of the elements (all, or along `dim`), as a tree of multiplications of the
        two halves (log2 n roundings, and the exact product gradient even at zeros).

        >>> import aneforge as af
        >>> af.prod(af.tensor([[1.0, 2.0], [3.0, 4.0]]), 1).tolist()
        [2.0, 12.0]
        """
        dim = _dim_or_axis(dim, axis, "prod")
        x = self.to(dtype) if dtype is not None else self.int() if self.dtype == dtypes.bool_ else self
        if x.ndim == 0:
            return x
        d = 0 if dim is None else dim % x.ndim
        x = x.reshape(-1) if dim is None else x
        while x.shape[d] > 1:
            n, half = x.shape[d], x.shape[d] // 2
            pairs = x.narrow(d, 0, half) * x.narrow(d, half, half)
            x = from_functions("cat")([pairs, x.narrow(d, n - 1, 1)], d) if n % 2 else pairs
        if dim is None:
            return x.reshape((1,) * self.ndim) if keepdim else x.reshape(())
        return x if keepdim else x.squeeze(d)

    def _scan(self, dim: int, combine, fill) -> "Tensor":
        """Inclusive scan along `dim` in log2(n) steps (Hillis-Steele): each step combines
        every element with the one 2**k before it (`fill` where there is none)."""
        x, d = self, dim % max(self.ndim, 1)
        n, k = x.shape[d], 1
        while k < n:
            head = x.narrow(d, 0, k)
            x = combine(x, from_functions("cat")([fill(head), x.narrow(d, 0, n - k)], d))
            k *= 2
        return x

    def cumsum(self, dim: int | None = None, dtype=None, *, axis=None) -> "Tensor":
        """Running sum along `dim`. Floating tensors use a matmul with a triangular 0/1 matrix
        (the wide accumulator: one rounding per result); integers a log-step scan (exact).

        >>> import aneforge as af
        >>> af.cumsum(af.tensor([1, 2, 3]), 0).tolist()
        [1, 3, 6]
        """
        dim = _dim_or_axis(dim, axis, "cumsum", required=True)
        x = self.to(dtype) if dtype is not None else self.int() if self.dtype == dtypes.bool_ else self
        dim = norm_dim(dim, x.ndim, "cumsum")
        if x.ndim == 0:
            return x
        if not x.dtype.is_float:
            return x._scan(dim, lambda a, b: a + b, lambda h: h - h)
        n = x.shape[dim]
        upper = const(np.triu(np.ones((n, n))), x.dtype)
        return (x.movedim(dim, -1) @ upper).movedim(-1, dim)

    def cumprod(self, dim: int | None = None, dtype=None, *, axis=None) -> "Tensor":
        """Running product along `dim` (a log-step scan of multiplications).

        >>> import aneforge as af
        >>> af.cumprod(af.tensor([1.0, 2.0, 3.0]), 0).tolist()
        [1.0, 2.0, 6.0]
        """
        dim = _dim_or_axis(dim, axis, "cumprod", required=True)
        x = self.to(dtype) if dtype is not None else self.int() if self.dtype == dtypes.bool_ else self
        return x if x.ndim == 0 else x._scan(dim, lambda a, b: a * b, lambda h: h - h + 1)

    def _cumulative(self, dim: int, pick) -> "minmax":
        """cummax / cummin: each position against all earlier ones ([..., n, n]: O(n^2)),
        the masked-out ones replaced by the first element (always a candidate)."""
        d = dim % max(self.ndim, 1)
        x = self.movedim(d, -1) if self.ndim else self.reshape(1)
        n = x.shape[-1]
        earlier = const(np.tri(n, dtype=bool), dtypes.bool_)         # [i, j]: j <= i
        cand = _where(earlier, x.unsqueeze(-2), x.narrow(-1, 0, 1).unsqueeze(-1))
        values = pick(cand)
        hit = earlier & (x.unsqueeze(-2) == values.unsqueeze(-1))
        index = _where(hit, const(np.arange(n), dtypes.int32), const(0, dtypes.int32)).amax(-1)
        if not self.ndim:
            return minmax(values.reshape(()), index.reshape(()))
        return minmax(values.movedim(-1, d), index.movedim(-1, d))

    def cummax(self, dim: int | None = None, *, axis=None) -> "minmax":
        """(values, indices) of the running maximum along `dim`; on ties the latest index,
        as torch.

        >>> import aneforge as af
        >>> af.cummax(af.tensor([1, 3, 2]), 0).values.tolist()
        [1, 3, 3]
        """
        dim = _dim_or_axis(dim, axis, "cummax", required=True)
        return self._cumulative(dim, lambda c: c.amax(-1))

    def cummin(self, dim: int | None = None, *, axis=None) -> "minmax":
        """(values, indices) of the running minimum along `dim`.

        >>> import aneforge as af
        >>> af.cummin(af.tensor([3, 1, 2]), 0).indices.tolist()
        [0, 1, 1]
        """
        dim = _dim_or_axis(dim, axis, "cummin", required=True)
        return self._cumulative(dim, lambda c: c.amin(-1))

    def logsumexp(self, dim: int | None = None, keepdim: bool = False, *, axis=None) -> "Tensor":
        """log(sum(exp(x))) along `dim`, shifted by the (detached) max for stability.

        >>> import aneforge as af
        >>> af.logsumexp(af.tensor([0.0, 0.0]), 0).item()
        0.69...
        """
        dim = _dim_or_axis(dim, axis, "logsumexp", required=True)
        x = self._floating()
        m = x.amax(dim, keepdim=True).detach()
        out = (x - m).exp().sum(dim, keepdim=True).log() + m
        return out if keepdim else out.squeeze(dim)

    def logcumsumexp(self, dim: int | None = None, *, axis=None) -> "Tensor":
        """log(cumsum(exp(x))) along `dim`: shifted by the max along `dim`, exponentiated and
        summed in fp32 (no underflow of early terms).

        >>> import aneforge as af
        >>> af.logcumsumexp(af.tensor([0.0, 0.0]), 0).tolist()
        [0.0, 0.693359375]
        """
        dim = _dim_or_axis(dim, axis, "logcumsumexp", required=True)
        x = self._floating()
        m = x.amax(dim, keepdim=True).detach()
        return ((x - m).float().exp().cumsum(dim).log() + m.float()).to(x.dtype)

    def sort(self, dim: int | None = None, descending: bool = False, stable: bool = False, *,
             axis=None) -> "minmax":
        """(values, indices) sorted along `dim`, stable. No sort unit exists on the ANE: each
        element's rank comes from comparing all pairs ([..., n, n], O(n^2)), and the values
        are picked by rank with a one-hot select (exact).

        >>> import aneforge as af
        >>> af.sort(af.tensor([3.0, 1.0, 2.0])).indices.tolist()
        [1, 2, 0]
        """
        dim = -1 if dim is None and axis is None else _dim_or_axis(dim, axis, "sort")
        d = dim % max(self.ndim, 1)
        x = self.movedim(d, -1) if self.ndim else self.reshape(1)
        n = x.shape[-1]
        xi, xj = x.unsqueeze(-1), x.unsqueeze(-2)
        first = (xj > xi) if descending else (xj < xi)
        tie = (xj == xi) & const(np.tri(n, k=-1, dtype=bool), dtypes.bool_)
        rank = (first | tie).sum(-1)                                  # [..., n] (int32)
        onehot = rank.unsqueeze(-2) == const(np.arange(n).reshape(n, 1), dtypes.int32)
        values = _where(onehot, xj, xj._zeros()).sum(-1) if x.dtype != dtypes.bool_ else \
            onehot & xj
        values = values.any(-1) if x.dtype == dtypes.bool_ else values
        index = _where(onehot, const(np.arange(n), dtypes.int32), const(0, dtypes.int32)).sum(-1)
        if not self.ndim:
            return minmax(values.reshape(()), index.reshape(()))
        return minmax(values.movedim(-1, d), index.movedim(-1, d))

    def argsort(self, dim: int | None = None, descending: bool = False, stable: bool = False, *,
             axis=None) -> "Tensor":
        """The indices that sort `dim` (see sort).

        >>> import aneforge as af
        >>> af.argsort(af.tensor([3, 1, 2]), descending=True).tolist()
        [0, 2, 1]
        """
        dim = -1 if dim is None and axis is None else _dim_or_axis(dim, axis, "argsort")
        return self.sort(dim, descending, stable).indices

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> "minmax":
        """(values, indices) of the k largest (or smallest) elements along `dim`, in order: the
        first k of `sort` (pairwise ranks and exact one-hot picks; differentiable in values).

        >>> import aneforge as af
        >>> v, i = af.topk(af.tensor([1.0, 5.0, 3.0, 4.0]), 2)
        >>> v.tolist(), i.tolist()
        ([5.0, 4.0], [1, 3])
        """
        n = self.shape[norm_dim(dim, self.ndim, "topk")] if self.ndim else 1
        if not 0 <= k <= n:
            raise ShapeError(f"topk: k={k} is out of range for a dimension of size {n}")
        values, indices = self.sort(dim, descending=largest)
        if not self.ndim:
            return minmax(values, indices)
        return minmax(values.narrow(dim, 0, k), indices.narrow(dim, 0, k))

    def _onehot_along(self, dim: int, index: "Tensor"):
        """self and index with `dim` moved last, and the mask [..., k, n]: index == j."""
        if index.dtype.is_float or index.dtype == dtypes.bool_:
            raise DTypeError(f"index must be an integer tensor, got {index.dtype}")
        if index.ndim != self.ndim:
            raise ShapeError(f"index needs as many dims as the tensor ({self.ndim}), got shape "
                             f"{index.shape}")
        d = dim % self.ndim
        x, idx = self.movedim(d, -1), index.movedim(d, -1)
        mask = idx.unsqueeze(-1) == const(np.arange(x.shape[-1]), idx.dtype)
        return d, x, idx, mask

    def gather(self, dim: int, index: "Tensor") -> "Tensor":
        """out[i][j] = self[i][index[i][j]] along `dim`: a one-hot select and sum over the
        axis (exact; no dynamic gather on the ANE).

        >>> import aneforge as af
        >>> af.gather(af.tensor([[1, 2], [3, 4]]), 1, af.tensor([[1, 1], [0, 1]])).tolist()
        [[2, 2], [3, 4]]
        """
        d, x, idx, mask = self._onehot_along(dim, index)
        x = x[tuple(slice(0, k) for k in idx.shape[:-1])]             # index may be smaller
        x = x.int() if x.dtype == dtypes.bool_ else x
        picked = _where(mask, x.unsqueeze(-2), x.unsqueeze(-2)._zeros()).sum(-1)
        picked = picked.to(self.dtype) if self.dtype == dtypes.bool_ else picked
        return picked.movedim(-1, d)

    def index_select(self, dim: int, index) -> "Tensor":
        """The entries at `index` (a 1-D integer tensor or list) along `dim`: a one-hot select
        and sum (exact; the ANE has no dynamic gather). Indices known on the host are checked.

        >>> import aneforge as af
        >>> af.tensor([[1, 2], [3, 4], [5, 6]]).index_select(0, af.tensor([2, 0])).tolist()
        [[5, 6], [1, 2]]
        """
        from ._indexing import host_values
        if not isinstance(index, Tensor):
            from .creation import tensor
            index = tensor(np.asarray(index, dtype=np.int32))
        if index.ndim > 1:
            raise IndexError("index_select(): Index is supposed to be a vector")
        d = norm_dim(dim, self.ndim, "index_select")
        n = self.shape[d] if self.ndim else 1
        known = host_values(index)
        if known is not None and known.size and (known.min() < 0 or known.max() >= n):
            raise IndexError(f"index_select(): index {int(known[(known < 0) | (known >= n)][0])} "
                             f"is out of range for dimension {d} of size {n}")
        if self.ndim == 0:
            if index.numel() != 1:
                raise IndexError(f"index_select(): Index to scalar can have only 1 value, got "
                                 f"{index.numel()} value(s)")
            return self
        k = index.reshape(-1).shape[0]
        view = tuple(k if a == d else 1 for a in range(self.ndim))
        shape = tuple(k if a == d else s for a, s in enumerate(self.shape))
        return self.gather(d, index.reshape(view).expand(shape))

    def _scattered(self, dim: int, index: "Tensor", src):
        d, x, idx, mask = self._onehot_along(dim, index)
        if idx.shape[:-1] != x.shape[:-1]:
            raise ShapeError(f"scatter: index {index.shape} must match the tensor {self.shape} "
                             f"on every axis but dim {dim}; pad the index or slice the tensor")
        if isinstance(src, Tensor):
            src = src.to(self.dtype).movedim(d, -1)[tuple(slice(0, k) for k in idx.shape)]
        else:
            src = const(src, self.dtype).expand(idx.shape)
        return d, x, mask, src.unsqueeze(-1)                          # src: [..., k, 1]

    def scatter(self, dim: int, index: "Tensor", src=None, value=None, reduce=None) -> "Tensor":
        """A copy with self[index[i][j]][j] = src[i][j] along `dim` (`src` a tensor or a
        number, or `value=`): one-hot selects and a sum over the index axis. Duplicate indices
        add up (torch leaves them undefined).

        >>> import aneforge as af
        >>> af.zeros(4).scatter(0, af.tensor([1, 3]), af.tensor([5.0, 6.0])).tolist()
        [0.0, 5.0, 0.0, 6.0]
        """
        if reduce is not None:
            return self.scatter_reduce(dim, index, src if src is not None else value,
                                       {"add": "sum", "multiply": "prod"}[reduce])
        d, x, mask, src = self._scattered(dim, index, src if src is not None else value)
        hit = mask.any(-2)
        vals = _where(mask, src, src._zeros()).sum(-2).to(self.dtype)
        return _where(hit, vals, x).movedim(-1, d)

    def scatter_add(self, dim: int, index: "Tensor", src: "Tensor") -> "Tensor":
        """self with src added at index along `dim` (duplicates accumulate).

        >>> import aneforge as af
        >>> af.zeros(3).scatter_add(0, af.tensor([1, 1]), af.tensor([1.0, 2.0])).tolist()
        [0.0, 3.0, 0.0]
        """
        return self.scatter_reduce(dim, index, src, "sum")

    def scatter_reduce(self, dim: int, index: "Tensor", src: "Tensor", reduce: str,
                       include_self: bool = True) -> "Tensor":
        """Reduce src into self at index along `dim`: reduce 'sum', 'prod', 'mean', 'amax' or
        'amin', with or without self's own values (include_self), as torch.

        >>> import aneforge as af
        >>> x, i = af.zeros(3), af.tensor([0, 0, 2])
        >>> x.scatter_reduce(0, i, af.tensor([1.0, 4.0, 2.0]), "amax").tolist()
        [4.0, 0.0, 2.0]
        """
        d, x, mask, src = self._scattered(dim, index, src)
        hit = mask.any(-2)
        if reduce in ("sum", "mean"):
            got = _where(mask, src, src._zeros()).sum(-2).to(self.dtype)
            if reduce == "mean":
                count = mask.sum(-2).to(dtypes.float32) + float(include_self)
                got = (((x + got) if include_self else got) / count.maximum(1.0)).to(self.dtype)
                return _where(hit, got, x).movedim(-1, d)
            own = x if include_self else x._zeros()
            return _where(hit, own + got, x).movedim(-1, d)
        if reduce == "prod":
            got = _where(mask, src, src - src + 1).prod(-2)
            return _where(hit, x * got if include_self else got, x).movedim(-1, d)
        if reduce in ("amax", "amin"):
            # masked-out entries take the extreme of the other side: they never win over a hit
            fill = {"amax": Tensor.amin, "amin": Tensor.amax}[reduce](src, -2, keepdim=True)
            got = getattr(_where(mask, src, fill), reduce)(-2)
            got = (x.maximum(got) if reduce == "amax" else x.minimum(got)) if include_self else got
            return _where(hit, got, x).movedim(-1, d)
        raise ValueError(f"scatter_reduce: reduce must be 'sum', 'prod', 'mean', 'amax' or "
                         f"'amin', got {reduce!r}")

    def norm(self, p="fro", dim=None, keepdim: bool = False, dtype=None) -> "Tensor":
        """The vector p-norm over `dim` (all elements by default): p = 'fro' or 2, 1, inf,
        -inf, 0 or any other number; sums of powers run in fp32 (no fp16 overflow of x^2).

        >>> import aneforge as af
        >>> af.tensor([3.0, 4.0]).norm().item()
        5.0
        """
        x = self._floating() if dtype is None else self.to(dtype)
        a = x.abs()
        if p in ("fro", 2, 2.0):
            return (a.float() * a.float()).sum(dim, keepdim=keepdim).sqrt().to(x.dtype)
        if p == float("inf"):
            return a.amax(dim, keepdim)
        if p == float("-inf"):
            return a.amin(dim, keepdim)
        if p == 0:
            return (a != 0).to(x.dtype).sum(dim, keepdim=keepdim)
        if p == 1:
            return a.float().sum(dim, keepdim=keepdim).to(x.dtype)
        if isinstance(p, str):
            raise ValueError(f"norm: p={p!r} is not supported; use 'fro' or a number")
        return (a.float() ** float(p)).sum(dim, keepdim=keepdim).pow(1.0 / p).to(x.dtype)

    def sign(self) -> "Tensor":
        """-1, 0 or 1 by the sign of each element (integers stay integer; zero gradient).

        >>> import aneforge as af
        >>> af.sign(af.tensor([-2.0, 0.0, 3.0])).tolist()
        [-1.0, 0.0, 1.0]
        """
        s = _where(self > 0, 1, _where(self < 0, -1, 0)).to(self.dtype)
        return s + self._zero_link() if self.dtype.is_float and self.requires_grad else s

    def log1p(self) -> "Tensor":
        """log(1 + x) without losing small x to the rounding of 1 + x (Goldberg:
        log(u) * x / (u - 1) with u = 1 + x as stored).

        >>> import aneforge as af
        >>> af.log1p(af.tensor([0.0, 1e-3])).tolist()
        [0.0, 0.00099945068359375]
        """
        x = self._floating()
        u = x + 1.0
        grown = u - 1.0
        safe = _where(grown == 0, grown + 1.0, grown)
        return _where(grown == 0, x, u.log() * (x / safe))

    def expm1(self) -> "Tensor":
        """exp(x) - 1: its Taylor polynomial to x**7 / 7! near zero (no cancellation, and no
        activation table: the engine's tanh table errs by up to 0.0017), the plain difference
        elsewhere.

        >>> import aneforge as af
        >>> af.expm1(af.tensor([0.0, 1e-3])).tolist()
        [0.0, 0.0010013580322265625]
        """
        x = self._floating()
        s = x.clamp(-0.5, 0.5)
        p = s * (1.0 / 5040.0) + 1.0 / 720.0
        for c in (1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0):
            p = p * s + c
        return _where(x.abs() < 0.5, p * s, x.exp() - 1.0)

    def clamp_min(self, min) -> "Tensor":
        """clamp(min=min)."""
        return self.clamp(min=min)

    def clamp_max(self, max) -> "Tensor":
        """clamp(max=max)."""
        return self.clamp(max=max)

    def subtract(self, other, alpha=1) -> "Tensor":
        """torch's alias of sub."""
        return self.sub(other, alpha)

    def multiply(self, other) -> "Tensor":
        """torch's alias of mul."""
        return self * other

    def true_divide(self, other) -> "Tensor":
        """torch's alias of true division (/)."""
        return self / other

    def negative(self) -> "Tensor":
        """torch's alias of neg."""
        return self.neg()

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

    def tile(self, *dims) -> "Tensor":
        """repeat(), with ones prepended when fewer dims than axes are given (torch.tile).

        >>> import aneforge as af
        >>> af.tile(af.tensor([[1, 2]]), (2,)).tolist()
        [[1, 2, 1, 2]]
        """
        dims = _sizes(dims)
        return self.repeat((1,) * (self.ndim - len(dims)) + dims)

    def unflatten(self, dim: int, sizes) -> "Tensor":
        """Split axis `dim` into `sizes` (one may be -1): a reshape.

        >>> import aneforge as af
        >>> af.zeros(2, 6).unflatten(1, (2, -1)).shape
        (2, 2, 3)
        """
        d = dim % self.ndim
        inner = _infer_size(tuple(sizes), self.shape[d], self.shape)
        return self.reshape(self.shape[:d] + inner + self.shape[d + 1:])

    def count_nonzero(self, dim=None) -> "Tensor":
        """The number of non-zero elements (all, or along `dim`), int32.

        >>> import aneforge as af
        >>> af.count_nonzero(af.tensor([[0, 1], [2, 3]]), 1).tolist()
        [1, 2]
        """
        return (self != 0).sum(dim)

    def lerp(self, end, weight) -> "Tensor":
        """self + weight * (end - self).

        >>> import aneforge as af
        >>> af.lerp(af.tensor([0.0, 2.0]), af.tensor([4.0, 4.0]), 0.5).tolist()
        [2.0, 3.0]
        """
        return self + (end - self) * weight

    def addcmul(self, tensor1, tensor2, *, value=1) -> "Tensor":
        """self + value * tensor1 * tensor2.

        >>> import aneforge as af
        >>> af.addcmul(af.ones(2), af.tensor([1.0, 2.0]), af.tensor([3.0, 4.0]), value=0.5).tolist()
        [2.5, 5.0]
        """
        prod = tensor1 * tensor2
        return self + (prod if value == 1 else prod * value)

    def addcdiv(self, tensor1, tensor2, *, value=1) -> "Tensor":
        """self + value * tensor1 / tensor2.

        >>> import aneforge as af
        >>> af.addcdiv(af.ones(2), af.tensor([1.0, 2.0]), af.tensor([2.0, 4.0])).tolist()
        [1.5, 1.5]
        """
        quot = tensor1 / tensor2
        return self + (quot if value == 1 else quot * value)

    def diag(self, diagonal: int = 0) -> "Tensor":
        """A 1-D tensor -> the square matrix with it on the `diagonal`-th diagonal (a select
        with a constant mask); a 2-D tensor -> that diagonal.

        >>> import aneforge as af
        >>> af.diag(af.tensor([1, 2])).tolist()
        [[1, 0], [0, 2]]
        """
        if self.ndim == 2:
            return self.diagonal(diagonal)
        if self.ndim != 1:
            raise ShapeError(f"diag: expects a 1-D or 2-D tensor, got shape {self.shape}")
        m, k = self.shape[0], abs(diagonal)
        n = m + k
        # k >= 0: row i holds v[i] (rows past m are zeros); k < 0: column j holds v[j]
        axis = 0 if diagonal >= 0 else 1
        grid = self.unsqueeze(1 - axis).expand((m, n) if axis == 0 else (n, m))
        if k:
            edge = grid.narrow(axis, 0, 1)._zeros()
            zeros = edge.expand((k, n) if axis == 0 else (n, k))
            grid = from_functions("cat")([grid, zeros], axis)
        return _where(const(np.eye(n, k=diagonal, dtype=bool), dtypes.bool_), grid, grid._zeros())

    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None,
                   neginf: float | None = None) -> "Tensor":
        """NaN -> nan, +inf -> posinf, -inf -> neginf (the dtype's extremes by default). The
        engine coerces a NaN entering it to +inf (sbryngelson/ane-guide, numerics chapter), so
        with its default special values a NaN input becomes posinf, not `nan`.

        >>> import aneforge as af
        >>> af.tensor([float("nan"), float("inf"), 1.0]).nan_to_num().tolist()
        [65504.0, 65504.0, 1.0]
        >>> with af.numerics(specials="ieee"):
        ...     af.tensor([float("nan"), float("inf"), 1.0]).nan_to_num().tolist()
        [0.0, 65504.0, 1.0]
        """
        if not self.dtype.is_float:
            return self
        big = float(np.finfo(self.dtype.np).max)
        x = _where(self != self, nan, self)
        x = _where(x == float("inf"), big if posinf is None else posinf, x)
        return _where(x == float("-inf"), -big if neginf is None else neginf, x)

    # ---- in place: the handle takes the new value (programs are SSA) ----------------------
    def _inplace(self, compute) -> "Tensor":
        """torch's in-place methods: this handle now holds `compute()` (cast to its dtype). A leaf
        that requires grad may only change under no_grad (as in torch); it stays a leaf. The
        value it held is marked overwritten as of before `compute` ran: the ops computing the
        new value may read it, ops recorded earlier may not (see _bump_version)."""
        stamp = next(SEQ)
        result = compute()
        if not isinstance(result, Tensor):
            result = const(result, self.dtype)
        result = result.to(self.dtype)
        if result.shape != self.shape:
            result = result.expand(self.shape)
        if self.is_leaf and self.requires_grad:
            if _grad_enabled():
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

    @property
    def data(self) -> "Tensor":
        """The value without gradient tracking, as torch's `.data`: in-place ops on it change
        this tensor (untracked by autograd), and assigning `x.data = value` replaces the value.
        One difference from torch: a graph recorded before the write keeps the value it read
        (programs are SSA), where torch's backward would see the overwritten storage.

        >>> import aneforge as af
        >>> w = af.nn.Parameter(af.ones(2))
        >>> w.data.mul_(3).tolist(), w.tolist(), w.requires_grad
        ([3.0, 3.0], [3.0, 3.0], True)
        """
        return _Data(self)

    @data.setter
    def data(self, value) -> None:
        self.set_(value if isinstance(value, Tensor) else tensor_like(value, self))

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
        return self._inplace(lambda: self._zeros())

    def fill_(self, value) -> "Tensor":
        """In-place fill with a number (or a one-element tensor).

        >>> import aneforge as af
        >>> af.zeros(2).fill_(3).tolist()
        [3.0, 3.0]
        """
        return self._inplace(lambda: self._zeros() + value if self.dtype != dtypes.bool_ else
                             self._zeros() | bool(value))

    def copy_(self, src, non_blocking: bool = False) -> "Tensor":
        """In-place copy of `src` (a Tensor, numpy array or number), broadcast to this shape.

        >>> import aneforge as af
        >>> af.zeros(2).copy_(af.tensor([1.0, 2.0])).tolist()
        [1.0, 2.0]
        """
        return self._inplace(lambda: src if isinstance(src, Tensor) else tensor_like(src, self))

    def __getattr__(self, name: str):
        hint = ""
        if name.endswith("_") and not name.startswith("_") and hasattr(Tensor, name[:-1]):
            hint = (f"; in-place ops other than add_/sub_/mul_/div_/clamp_/zero_/fill_/copy_ "
                    f"are not supported: write x = x.{name[:-1]}(...)")
        raise AttributeError(f"'Tensor' object has no attribute {name!r}{hint}")

    def __getitem__(self, index) -> "Tensor":
        from ._indexing import getitem
        return getitem(self, index)

    def __setitem__(self, index, value):
        raise AneforgeError("in-place assignment is not supported: programs are static SSA. "
                            "Build the new value with af.where(mask, value, x) or af.cat.")


class _Data(Tensor):
    """`x.data`: a detached handle whose in-place ops write their result back to `x` (x keeps
    requires_grad and becomes a leaf holding the new value; no version bump, as in torch)."""
    __slots__ = ("_base",)

    def __init__(self, base: Tensor):
        d = base.detach()
        super().__init__(d._node, d._idx)
        self._base = base

    def _inplace(self, compute) -> Tensor:
        Tensor._inplace(self, compute)
        self._base.set_(Tensor(self._node, self._idx))
        return self


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
        if type(v) is Tensor or isinstance(v, Tensor):
            node = v._node
            refs[k] = (node, v._idx)
            grad = grad or node.requires_grad
        elif v is None:
            refs[k] = None
        else:                            # a tuple or list of Tensors (variadic)
            refs[k] = [(t._node, t._idx) for t in v]
            grad = grad or any(t._node.requires_grad for t in v)
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
        return Tensor(_number_node(value, dtype))
    return record_op("const", {}, {"val": np.asarray(value, dtype=dtype.np)})


def _number_node(value, dtype: DType) -> Node:
    """The const node of a Python number, checked once per (number, dtype): then a new node
    with the same literal (every use is its own node, as recorded)."""
    # -0.0 == 0.0 (and hashes alike): a zero is keyed by its spelling, keeping its sign
    key = (type(value), value if value else repr(value), dtype)
    made = _CONSTS.get(key)
    if made is not None:
        return Node("const", {}, made[0], made[1], None, False, made[2], (), made[3])
    if len(_CONSTS) >= 4096:
        _CONSTS.clear()
    node = record_op("const", {}, {"val": np.asarray(value, dtype=dtype.np)})._node
    _CONSTS[key] = (node.attrs, node.types, node.key, (node.sid, ()))
    return node


_CONSTS: dict = {}      # a pure cache: a Python number's checked const (attrs, types, key, plan)


def tensor_like(value, like: Tensor) -> Tensor:
    if isinstance(value, Tensor):
        return value
    from .creation import tensor
    return tensor(value)


def _scalar_dtype(x: Tensor, value) -> DType:
    dt = x._node.types[x._idx].dtype
    if type(value) is float:                                # the common case first
        return dt if dt.is_float else dtypes.float16
    if isinstance(value, bool):
        return dt
    if type(value) is int or isinstance(value, numbers.Integral):
        return dt if dt is not dtypes.bool_ else dtypes.int32
    return dt if dt.is_float else dtypes.float16


def operands(x: Tensor, other, floating: bool = False) -> tuple[Tensor, Tensor]:
    """Both operands as Tensors of one dtype, by torch's promotion rules (a Python number takes
    the tensor's dtype unless it is a float meeting an integer tensor); `floating` promotes an
    integer result to float16. The package's way to prepare a binary op's inputs.

    >>> import aneforge as af
    >>> from aneforge.tensor import operands
    >>> [t.dtype for t in operands(af.tensor([1, 2]), 0.5)]
    [aneforge.float16, aneforge.float16]
    """
    kind = type(other)
    if kind is float or kind is int:                         # the common cases first
        return _with_number(x, other, floating)
    if isinstance(other, Tensor):
        a, b = x._node.types[x._idx].dtype, other._node.types[other._idx].dtype
        if a is b and (a.is_float or not floating):          # nothing to cast
            return x, other
    elif isinstance(other, np.ndarray):
        other = tensor_like(other, x)
    if not isinstance(other, Tensor):
        if not isinstance(other, numbers.Number):
            raise TypeError(f"unsupported operand type {type(other).__name__} with a Tensor")
        return _with_number(x, other, floating)
    dt = dtypes.promote(x.dtype, other.dtype)
    if floating and not dt.is_float:
        dt = dtypes.float16
    return x.to(dt), other.to(dt)


def _with_number(x: Tensor, value, floating: bool) -> tuple[Tensor, Tensor]:
    dt = _number_dtype(x, value, floating)
    return x if dt is x._node.types[x._idx].dtype else x.to(dt), const(value, dt)


def _number_dtype(x: Tensor, value, floating: bool) -> DType:
    """The dtype x and a Python number meet in (torch's promotion; `floating`: at least fp16)."""
    dt = _scalar_dtype(x, value)
    return dtypes.float16 if floating and not dt.is_float else dt


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


def _where(cond: Tensor, a, b) -> Tensor:
    """af.where (broadcasting the branches as Core ML needs)."""
    return from_functions("where")(cond, a, b)


def from_functions(name: str):
    """A torch-level function of functions.py (cat, where), which imports this module."""
    from . import functions
    return getattr(functions, name)


def _dim_or_axis(dim, axis, name: str, required: bool = False):
    """torch's `axis=` alias of `dim` (numpy's spelling)."""
    if axis is not None:
        if dim is not None:
            raise TypeError(f"{name}(): give dim or axis, not both")
        return axis
    if required and dim is None:
        raise TypeError(f"{name}() missing required argument 'dim'")
    return dim


def _sizes(args) -> tuple[int, ...]:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    out = []
    for pos, a in enumerate(args):
        try:
            out.append(operator.index(a))
        except TypeError:
            raise TypeError(f"size must be a tuple of ints, but found element of type "
                            f"{type(a).__name__} at pos {pos}") from None
    return tuple(out)


_F16_LO = 2.0 ** -14          # fp16's smallest normal: numbers in [_F16_LO, 65504] are one constant


def _need_float(x: Tensor, op: str) -> Tensor:
    """torch computes these only in floating point (softmax of an int tensor is an error)."""
    if not x.dtype.is_float:
        raise DTypeError(f"{op}() needs a floating tensor, got {x.dtype}; use .float() or "
                         f".half() first")
    return x


def _same_kind(op: str, a: Tensor, b: Tensor) -> None:
    """torch's matmul takes one dtype: int @ float and bool operands are errors there."""
    if a.dtype == dtypes.bool_ or b.dtype == dtypes.bool_ or a.dtype.is_float != b.dtype.is_float:
        raise DTypeError(f"{op}: expected both operands to be floating (or both integer), got "
                         f"{a.dtype} and {b.dtype}; cast with .half() first")


def _no_empty(op: str, sizes) -> None:
    """torch allows size-0 axes; the ANE has no empty tensors (every axis is 1..65536)."""
    if 0 in sizes:
        from .errors import LimitError
        raise LimitError(f"{op}: sizes {tuple(sizes)} make an empty tensor; the ANE has no empty "
                         f"tensors (every axis must be 1..65536). Skip the empty case on the host.")


def norm_dim(dim, ndim: int, op: str = "") -> int:
    """`dim` as an axis in [0, ndim), checked as torch checks it (a 0-d tensor takes 0 or -1).

    >>> norm_dim(-1, 3), norm_dim(2, 3)
    (2, 2)
    >>> norm_dim(3, 2)
    Traceback (most recent call last):
    ...
    IndexError: Dimension out of range (expected to be in range of [-2, 1], but got 3)
    """
    try:
        d = operator.index(dim)
    except TypeError:
        raise TypeError(f"{op + '(): ' if op else ''}argument 'dim' must be int, not "
                        f"{type(dim).__name__}") from None
    n = max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {d})")
    return d % n if ndim else 0


def _infer_size(shape: Sequence[int], numel: int, old) -> tuple[int, ...]:
    if list(shape).count(-1) > 1:
        raise ShapeError(f"reshape: only one dimension can be -1, got {tuple(shape)}")
    known = math.prod([s for s in shape if s != -1])
    if -1 in shape:
        if known == 0 or numel % known:
            raise ShapeError(f"reshape: shape {tuple(shape)} is invalid for input of size {numel} "
                             f"(shape {old})")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if math.prod(shape) != numel:
        raise ShapeError(f"reshape: shape {tuple(shape)} is invalid for input of size {numel} "
                         f"(shape {old})")
    return tuple(shape)
