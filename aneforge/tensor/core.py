"""The Tensor class: a torch-named handle `(node, output index)` on one value of the lazy trace.

This module owns what every method stands on: the handle and its static facts, gradients and
`backward`, realization (`.numpy()`, `.item()`, ...), recording (`record_op`), operands by
torch's promotion rules, constants, and leaves of host data (`af.tensor`). The torch methods
themselves come from the family modules beside it (see `aneforge.tensor`).

>>> import aneforge as af
>>> w = af.tensor([1.0, -2.0], requires_grad=True)
>>> (w * w).sum().backward()
>>> w.grad.tolist(), w.is_leaf
([2.0, -4.0], True)
"""
from __future__ import annotations

import contextlib

import numbers
import sys
import weakref
from typing import Any

import numpy as np

from ..core import empty, hostints, plan, realization, scalar_consts
from .. import absent, dtypes
from ..hardware import kernels
from ..autograd import backward, no_grad
from ..context import CTX
from ..devices import THE_DEVICE, device, use
from ..dtypes import DType
from ..errors import AneforgeError, DTypeError, LimitError
from ..ir.types import TensorType
from ..hardware.limits import MAX_RANK, check_leaf_shape
from ..core.trace import (KeptStretches, Node, host_read, kept_stretch, leaf, record,
                          record_binary, stale_write, taped, written_leaf)
from ..ops.registry import is_literal
from . import grad_fn, highrank
from .args import Shaped, _sizes
from .casts import CastsMixin
from .composites import CompositesMixin
from .elementwise import ElementwiseMixin
from .indexing import IndexingMixin
from .inplace import InplaceMixin
from .movement import MovementMixin
from .products import ProductsMixin
from .random import RandomMixin
from .reduce import ReduceMixin
from .scan import ScanMixin

_F16_LO = 2.0 ** -14          # fp16's smallest normal: numbers in [_F16_LO, 65504] are one constant


class Tensor(ElementwiseMixin, CompositesMixin, ProductsMixin, ReduceMixin, MovementMixin,
             ScanMixin, IndexingMixin, InplaceMixin, CastsMixin, RandomMixin, Shaped):
    """A torch-named handle on one value of the lazy trace: `(node, output index)`. This class
    holds the handle, its static facts, gradients, realization and recording; the torch methods
    come from the families it is composed of (aneforge/tensor/*.py)."""
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
        return self._node.types[self._idx].shape      # (not via tensor_type: a call less)

    @property
    def dtype(self) -> DType:
        return self._node.types[self._idx].dtype

    @property
    def device(self) -> device:
        """The one device aneforge has, `device(type='ane')` (equal to "cpu" and "mps" too:
        see aneforge.devices)."""
        return THE_DEVICE

    @property
    def requires_grad(self) -> bool:
        return self._node.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Make a leaf track gradients (torch: only leaves can change this). A computed value
        that does not require grad is a leaf to torch (`w = af.randn(3, 4) * 0.1` then
        `w.requires_grad = True`): it is computed and this handle becomes a leaf holding it.

        >>> import aneforge as af
        >>> w = af.ones(2) * 0.5
        >>> w.requires_grad_().is_leaf, w.tolist()
        (True, [0.5, 0.5])
        """
        if not self.is_leaf and not self.requires_grad:
            self.set_(self)
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
        backward(self, gradient, retain_graph)

    def detach(self) -> "Tensor":
        """The same value, cut from the gradient graph."""
        node = self._node
        if node.data is not None:
            return Tensor(leaf(node.data[self._idx], self.tensor_type))
        if node.op is None:            # a written leaf: another leaf for the value it will hold
            return Tensor(written_leaf(node.args[0], self.tensor_type, False))
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
            node = source._node
            if node.data is None and not node.requires_grad and (
                    capture is None or capture.set_when_computed(self, source)):
                if capture is None and stale_write(self._node):
                    realization.realize_writes()     # the last step's: one step a program
                # computed with the next realization, in the same program as everything else
                # pending (one program for all of a step's `p.data += ...`, not one each;
                # under af.compile, BatchNorm's running statistics join the step's program)
                return self._hold(written_leaf(source.ref, source.tensor_type,
                                               self._node.requires_grad))
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
        return self._hold(leaf(array, type, self._node.requires_grad))

    def _hold_computed(self, source: "Tensor") -> "Tensor":
        """`set_(source)` for a computed value no other handle holds (an optimizer's new
        parameter or state): this handle holds `source`'s leaf itself, not a new leaf with
        its array (the same value, requires_grad and `.grad` as `set_` gives)."""
        node = source._node
        if node.data is None or node.op is not None or source._idx or len(node.data) != 1 \
                or node.owner is not None or CTX.thread.capture is not None:
            return self.set_(source)
        node.requires_grad, node.origin = self._node.requires_grad, None     # as `leaf` makes it
        return self._hold(node)

    def _hold(self, node: Node) -> "Tensor":
        """This handle now holds leaf `node` (the same requires_grad, `.grad` kept)."""
        old = self._node
        self._node, self._idx = node, 0
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
        realization.realize([self.ref])
        return self

    def numpy(self) -> np.ndarray:
        """The value as a numpy array (float16 tensors give float16 arrays), computing it if needed."""
        capture = CTX.thread.capture
        if capture is not None:
            capture.host_read(f"a {self.dtype.name}{list(self.shape)} tensor")
        a = self.value()
        if not a.flags.writeable:       # kept in a run plan's place: the user may write into
            with contextlib.suppress(ValueError):      # it, as into torch's shared storage
                a.flags.writeable = True               # (the plan then loads it again)
        return a

    def value(self) -> np.ndarray:
        """numpy() for the package's own bookkeeping: not a read by user code (af.compile
        replays functions whose only host reads are these)."""
        host_read()                     # (a recorded Stretch must not depend on values)
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
        return self._one().item()

    def _one(self) -> np.ndarray:
        """A one-element value as a 0-d array: an element picked out of a larger value, or
        index arithmetic, read on the host where it can be (core/hostints.py)."""
        if self._node.data is None:
            v = hostints.read(self._node, self._idx)
            if v is not None:
                host_read()
                return np.asarray(v).reshape(())
        return self.numpy().reshape(())

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

    def __index__(self) -> int:
        """A one-element integer tensor as a Python index (`data[i:i + 8]` for `i` in
        `af.randint(...)`), as torch allows.

        >>> import aneforge as af
        >>> list(range(10))[af.tensor(3):af.tensor([5])]
        [3, 4]
        """
        if self.dtype.is_float or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self._one())

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        node = self._node
        if node.data is not None and type(self) is Tensor and not node.requires_grad and \
                CTX.thread.capture is None and not self.dtype.is_float:
            data, t = node.data[self._idx], node.types[self._idx]    # the rows of a host
            row = TensorType(t.shape[1:], t.dtype)                  # integer value, as views
            return (Tensor(empty.hold(leaf(data[i, ...], row))) for i in range(len(self)))
        return (self[i] for i in range(len(self)))

    # ---- recording -------------------------------------------------------------------
    def _record(self, op: str, inputs: dict[str, Any], attrs: dict[str, Any]):
        """Record registered op `op` on `inputs`: how the gradient rules in aneforge/ops/,
        which sit below this module, build Tensors from the ones they are given."""
        return record_op(op, inputs, attrs)

    def _const(self, value, dtype) -> "Tensor":
        return const(value, dtype)

    def _operands(self, other, floating: bool = False) -> tuple["Tensor", "Tensor"]:
        return operands(self, other, floating)

    def _host_data(self):
        node = self._node
        return node.data[self._idx] if empty.MAYBE and empty.is_oversized(node) else None

    def _kept(self, key: tuple, inputs: list, build, many: bool = False):
        refs = []
        for t in inputs:
            if type(t) is not Tensor:                       # a subclass may record otherwise
                return build()
            refs.append((t._node, t._idx))
        if not many:
            return Tensor(*kept_stretch(_KEPT, key, refs, lambda: [build().ref])[0])
        return tuple([Tensor(*ref) for ref in
                      kept_stretch(_KEPT, key, refs, lambda: [t.ref for t in build()])])

    def _at(self, node: Node, idx: int = 0) -> "Tensor":
        return Tensor(node, idx)

    def _as_tensor(self, value) -> "Tensor":
        return value if isinstance(value, Tensor) else tensor(value)

    def _held(self, array, dtype) -> "Tensor":
        if array.ndim > MAX_RANK or array.dtype != dtype.np or CTX.thread.capture is not None:
            return _leaf(array, dtype)              # (af.compile's capture is told of it)
        check_leaf_shape(array.shape)             # an empty one: a host value (core/empty)
        return Tensor(empty.hold(leaf(array, TensorType(array.shape, dtype))))

    def _draw(self, draw, dtype) -> "Tensor":
        return host_draw(draw, dtype)

    def _host(self, name: str, reason: str, fn, reads: tuple, out_dtypes: tuple) -> tuple:
        return host_segment(name, reason, fn, reads, out_dtypes)

    # ---- arithmetic ------------------------------------------------------------------
    def _binary(self, op: str, other, reverse: bool = False, floating: bool = False):
        if type(other) is float or type(other) is int:      # a Python number: a const
            if not (_F16_LO <= abs(other) <= 65504.0 or other == 0) \
                    and scalar_consts.needs_split(op, other):
                x = self._floating() if floating else self
                if _scalar_dtype(x, other).is_float:  # fp16 cannot hold it: keep it exact
                    return scalar_consts.apply_split(op, x, other, reverse)
            if scalar_consts.overflows(other) and \
                    _number_dtype(self, other, floating) is dtypes.float16:
                scalar_consts.warn_constant(other)    # pow, maximum, minimum: no exact route
            dt = _number_dtype(self, other, floating)
            a = self if dt is self._node.types[self._idx].dtype else self.to(dt)
            a, b = (a._node, a._idx), (_number_node(other, dt), 0)
        else:
            a, b = operands(self, other, floating)
            a, b = (a._node, a._idx), (b._node, b._idx)
        if reverse:
            a, b = b, a
        if empty.MAYBE and empty.reads_oversized((a, b)):       # host data past 65536
            return Tensor(_host_op(op, {"x": a, "y": b}, {},
                                   a[0].requires_grad or b[0].requires_grad))
        try:
            return Tensor(record_binary(op, a, b, (a[0].requires_grad or b[0].requires_grad)
                                        and CTX.thread.grad_enabled))   # record_op, unrolled
        except LimitError:
            node = empty.evaluate(op, {"x": a, "y": b}, {}, (a[0].requires_grad or
                                  b[0].requires_grad) and CTX.thread.grad_enabled)
            if node is None:
                raise
            return Tensor(node)

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
        if isinstance(value, _Data) and value._base is self:
            return                      # `x.data += d`: the in-place op already wrote it back
        self.set_(self._as_tensor(value))

    @property
    def grad_fn(self):
        """torch's autograd node of a computed tensor that requires grad (None for a leaf or a
        value without gradient): the recorded op, named as torch names its backward, with
        `next_functions` (aneforge/tensor/grad_fn.py).

        >>> import aneforge as af
        >>> x = af.ones(3, requires_grad=True)
        >>> z = (x * 2).sum()
        >>> z.grad_fn
        <SumBackward0 object at 0x...>
        >>> z.grad_fn.next_functions[0][0].name(), x.grad_fn
        ('MulBackward0', None)
        """
        return grad_fn.of(self._node, self._idx, Tensor)

    def __format__(self, format_spec: str) -> str:
        """`f"{loss:.4f}"`: a 0-d tensor formats its value, as torch's; another tensor takes
        only the empty spec (its str).

        >>> import aneforge as af
        >>> f"{af.tensor(2.5):.2f} {af.tensor([1, 2])}"
        '2.50 tensor([1, 2], dtype=aneforge.int32)'
        """
        if self.ndim == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    # ---- torch's new_*: a new leaf with this tensor's dtype unless told ------------------
    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad: bool = False,
                 layout=None, pin_memory: bool = False) -> "Tensor":
        """A tensor of `size` filled with `fill_value`, of this tensor's dtype unless `dtype`.

        >>> import aneforge as af
        >>> af.tensor([1, 2]).new_full((2, 2), 3).tolist()
        [[3, 3], [3, 3]]
        """
        return _new(self, (size,), fill_value, dtype, device, requires_grad, "Tensor.new_full")

    def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False,
                  layout=None, pin_memory: bool = False) -> "Tensor":
        """Zeros of `size` (`x.new_zeros(2, 3)` or `x.new_zeros((2, 3))`), of x's dtype unless
        `dtype`.

        >>> import aneforge as af
        >>> af.ones(4).new_zeros(2, 3).shape, af.ones(1).new_zeros(2).dtype
        ((2, 3), aneforge.float16)
        """
        return _new(self, size, 0, dtype, device, requires_grad, "Tensor.new_zeros")

    def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False,
                 layout=None, pin_memory: bool = False) -> "Tensor":
        """Ones of `size`, of this tensor's dtype unless `dtype`.

        >>> import aneforge as af
        >>> af.tensor([7]).new_ones(3).tolist()
        [1, 1, 1]
        """
        return _new(self, size, 1, dtype, device, requires_grad, "Tensor.new_ones")

    def new_empty(self, *size, dtype=None, device=None, requires_grad: bool = False,
                  layout=None, pin_memory: bool = False) -> "Tensor":
        """A tensor of `size` whose values torch leaves unspecified: zeros here (a program input
        is never uninitialized memory), of this tensor's dtype unless `dtype`.

        >>> import aneforge as af
        >>> af.ones(1).new_empty((2,)).shape
        (2,)
        """
        return _new(self, size, 0, dtype, device, requires_grad, "Tensor.new_empty")

    def new_tensor(self, data, *, dtype=None, device=None, requires_grad: bool = False,
                   layout=None, pin_memory: bool = False) -> "Tensor":
        """A new leaf holding a copy of `data`, of this tensor's dtype unless `dtype` (torch's
        rule: not the data's own dtype).

        >>> import aneforge as af
        >>> af.ones(1).new_tensor([1, 2]).dtype
        aneforge.float16
        """
        return tensor(data, self.dtype if dtype is None else dtype, device=device,
                      requires_grad=requires_grad)

    def __getattr__(self, name: str):
        hint = ""
        if name.endswith("_") and not name.startswith("_") and hasattr(Tensor, name[:-1]):
            hint = (f"in-place ops other than add_/sub_/mul_/div_/clamp_/zero_/fill_/copy_ "
                    f"are not supported: write x = x.{name[:-1]}(...)")
        raise absent.error("Tensor", name, Tensor, hint=hint)


class _Data(Tensor):
    """`x.data`: a detached handle whose in-place ops write their result back to `x` (x keeps
    requires_grad and becomes a leaf holding the new value; no version bump, as in torch)."""
    __slots__ = ("_base",)

    def __init__(self, base: Tensor):
        node = base._node
        if node.data is not None:         # `detach`, without its handle (each step's updates)
            super().__init__(leaf(node.data[base._idx], node.types[base._idx]))
        else:
            d = base.detach()
            super().__init__(d._node, d._idx)
        self._base = base

    def _inplace(self, compute) -> Tensor:
        Tensor._inplace(self, compute)
        self._base.set_(Tensor(self._node, self._idx))
        return self

    def _update_owner(self):
        return self._base._update_owner()


def _new(x: Tensor, size: tuple, fill, dtype, device, requires_grad: bool, what: str) -> Tensor:
    """A new leaf of `size` (torch's size arguments) filled with `fill`, of x's dtype unless
    `dtype`, after torch's checks of `device` and `requires_grad`."""
    use(device, what)
    dt = x.dtype if dtype is None else dtypes.as_dtype(dtype)
    if requires_grad and not dt.is_float:
        raise DTypeError(f"{what}: only tensors of floating point dtype can require gradients "
                         f"(got {dt}); pass a float dtype, or requires_grad=False")
    return _leaf(np.full(_sizes(size), fill), dt, requires_grad)


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
    if op in empty.MOVES and not grad and empty.on_host_now():
        node = empty.moved(op, refs, attrs)      # integer data in hand: moved at once
        if node is not None:
            return Tensor(node) if len(node.types) == 1 else \
                tuple(Tensor(node, i) for i in range(len(node.types)))
    if empty.MAYBE and empty.reads_oversized(refs.values()):   # host data past 65536
        node = _host_op(op, refs, attrs, grad)
    else:
        try:
            node = record(op, refs, attrs, grad and CTX.thread.grad_enabled)
        except LimitError:
            node = empty.evaluate(op, refs, attrs,   # an empty (or too large) operand or result:
                                  grad and CTX.thread.grad_enabled)     # a host value
            if node is None:
                raise
    if len(node.types) == 1:
        return Tensor(node)
    return tuple(Tensor(node, i) for i in range(len(node.types)))


def _host_op(op: str, refs: dict, attrs: dict, grad: bool) -> Node:
    """`op` reading host data past 65536 (core/empty.py), run on the host: its other operands
    are computed first (a running statistic updated lazily, say), then the op's kernel."""
    pending = [r for v in refs.values() if v is not None
               for r in ([v] if type(v) is tuple else v) if r[0].data is None and
               r[0].op is not None and not is_literal(r[0].op)]
    if pending and not (grad and CTX.thread.grad_enabled):
        realization.realize(pending)
    return empty.evaluate(op, refs, attrs, grad and CTX.thread.grad_enabled)


def const(value, dtype: DType) -> Tensor:
    """A literal baked into the program (Python numbers in expressions: part of the structure)."""
    if type(value) in (int, float, bool) and value == value:     # a Python number (not NaN)
        if dtype is dtypes.float16 and scalar_consts.overflows(value):
            scalar_consts.warn_constant(value)                  # no exact route: say so
        return Tensor(_number_node(value, dtype))
    array = np.asarray(value)
    if dtype is dtypes.float16 and scalar_consts.range_losses(array)[0]:      # an inf made
        scalar_consts.warn_constant(float(array.flat[np.argmax(np.abs(array))]))
    with np.errstate(over="ignore"):
        return record_op("const", {}, {"val": array.astype(dtype.np)})


def _number_node(value, dtype: DType) -> Node:
    """The const node of a Python number, checked once per (number, dtype): then a new node
    with the same literal (every use is its own node, as recorded)."""
    # -0.0 == 0.0 (and hashes alike): a zero is keyed by its spelling, keeping its sign
    key = (type(value), value if value else repr(value), dtype)
    made = _CONSTS.get(key)
    if made is not None:
        node = Node("const", {}, made[0], made[1], None, False, made[2], (), made[3])
        node.mid = made[4]
        taped(node)
        return node
    if len(_CONSTS) >= 4096:
        _CONSTS.clear()
    with np.errstate(over="ignore"):        # an overflow was reported by the caller
        node = record_op("const", {}, {"val": np.asarray(value, dtype=dtype.np)})._node
    _CONSTS[key] = (node.attrs, node.types, node.key, (node.sid, ()), node.mid)
    return node


_KEPT = KeptStretches()     # Tensor._kept's recordings, by kind (trace.kept_stretch)
_CONSTS: dict = {}      # a pure cache: a Python number's checked const (attrs, types, key,
                        # prekey, memo number)


def tensor_like(value, like: Tensor) -> Tensor:
    """`value` if it is a Tensor, else a new leaf holding it (host data: a program input)."""
    return like._as_tensor(value)


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


# ---- host data: a new leaf (a program input, never a baked constant) ----------------------
def tensor(data, dtype=None, *, device=None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A tensor holding a copy of `data` (nested lists, numbers, numpy arrays, torch tensors).

    Floating data becomes float16, the ANE's type (values are rounded to fp16 now; finite values
    past 65504 become inf and nonzero ones below 2**-25 become 0, with a `Float16RangeWarning`
    naming the count); integers become int32 and booleans bool. `device` may name the one device ("cpu", "mps", "ane");
    `pin_memory` is accepted (host data is copied into each program's inputs anyway).

    >>> import aneforge as af
    >>> af.tensor([[1.0, 2.0], [3.0, 4.0]]).dtype
    aneforge.float16
    """
    use(device, "af.tensor")
    source = data
    arr = _host_array(data)
    _check_int_range(arr)
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.from_numpy(arr.dtype)
    if requires_grad and not dt.is_float:
        raise DTypeError(f"Only Tensors of floating point and complex dtype can require "
                         f"gradients (torch's rule), got {dt}; give floating data or "
                         f"dtype=af.float32")
    t = _leaf(arr, dt, requires_grad, source=source,
              remake=lambda new: _stored(_host_array(new), dt))
    if dt.is_float and arr.dtype.kind == "f" and arr.dtype != np.float16 and _from_user():
        stored = t._storage if isinstance(t, highrank.HighRank) else t
        losses = scalar_consts.range_losses(arr, stored.ref[0].data[0].reshape(arr.shape))
        if any(losses):
            scalar_consts.report_range("af.tensor", {"data": losses})
    return t


# the torch names that make a tensor of the user's data by calling `tensor`
_USER_WRAPPERS = frozenset({"from_numpy", "as_tensor", "asarray"})


def _from_user() -> bool:
    """Whether `tensor`'s caller is the user's code (or a torch-named wrapper the user called):
    aneforge's own host scalars (a GradScaler's 2**17 scale, ...) mean their fp16 values."""
    code = sys._getframe(2).f_code
    return not code.co_filename.startswith(scalar_consts.PACKAGE) or code.co_name in _USER_WRAPPERS


def _check_int_range(arr: np.ndarray) -> None:
    """Integer data becomes int32 (the widest integer a program holds): refuse values it would
    wrap, where torch keeps int64."""
    if arr.dtype.kind in "iu" and arr.dtype.itemsize > 4 and arr.size:
        # the ufuncs' reductions called directly (`arr.min()` goes through numpy's Python
        # wrapper first, ~1 us a call): an eager loop's `tensor(rng.integers(...))` each step
        lo, hi = int(np.minimum.reduce(arr, None)), int(np.maximum.reduce(arr, None))
        if lo < -2 ** 31 or hi >= 2 ** 31:
            raise OverflowError(f"integer data in [{lo}, {hi}] does not fit int32, aneforge's "
                                f"widest integer; scale it, or pass it as floating point")


def _host_array(data) -> np.ndarray:
    if isinstance(data, Tensor):
        data = data.numpy()
    if hasattr(data, "detach") and hasattr(data, "cpu"):      # a torch tensor, without importing torch
        data = data.detach().cpu().numpy()
    return np.asarray(data)            # `_stored` copies


def _leaf(arr: np.ndarray, dt, requires_grad: bool = False, source=None, remake=None) -> Tensor:
    """A new leaf holding `arr` stored as `dt`. Inside af.compile's capture it is reported with
    how to make it again: from a new argument (`source` is the host object it came from,
    `remake(new_object)` converts one), by a new draw (`remake()` alone), or as a constant."""
    if arr.ndim > MAX_RANK:                        # kept as rank <= 5 (tensor/highrank.py)
        merged = highrank.merged(arr.shape)
        again = remake and (lambda *a: remake(*a).reshape(merged))
        return highrank.wrap(_leaf(arr.reshape(merged), dt, requires_grad, source, again),
                             arr.shape)
    arr = _stored(arr, dt)
    check_leaf_shape(arr.shape)                    # an empty tensor: a host value (core/empty)
    t = Tensor(empty.hold(leaf(arr, TensorType(arr.shape, dt), requires_grad)))
    capture = CTX.thread.capture
    if capture is not None:
        capture.created_leaf(t.ref[0], source, remake)
    return t


def host_draw(draw, dtype) -> Tensor:
    """A leaf holding `draw()` (a host random draw); af.compile draws again on each replay, as
    an eager call would."""
    dt = dtypes.as_dtype(dtype)
    return _leaf(draw(), dt, remake=lambda: _stored(draw(), dt))


def host_segment(name: str, reason: str, fn, reads: tuple, out_dtypes: tuple) -> tuple:
    """Run `fn` (numpy) on the values of `reads` between two ANE segments: the values are
    realized (the segment before ends), `fn`'s arrays become leaves of `out_dtypes` that later
    programs read as inputs. Said once per op (HostSegmentNotice); af.compile replays it as a
    host step of the plan, af.explain lists it."""
    def compute(*arrays):
        return [_stored(np.asarray(a), dt) for a, dt in zip(fn(*arrays), out_dtypes)]
    arrays = [t.value() for t in reads]
    outs = compute(*arrays)
    plan.host_ran(name, reason, arrays, outs)
    for a in outs:
        check_leaf_shape(a.shape)                  # empty: a host value (core/empty.py)
    nodes = [leaf(a, TensorType(a.shape, dt)) for a, dt in zip(outs, out_dtypes)]
    capture = CTX.thread.capture
    if capture is not None:
        capture.host_step(compute, [t.ref for t in reads], nodes)
    return tuple(Tensor(n) for n in nodes)


def _stored(arr: np.ndarray, dt) -> np.ndarray:
    """A new array (never `arr` itself: a tensor holds a copy) of `arr`'s values stored as
    `dt`: floating values rounded to fp16 at the boundary, by the compiled cast from float32
    (numpy's takes ~3 ns an element: 12 us for a 64 x 64 batch, every step)."""
    if dt.is_float:
        with np.errstate(over="ignore"):          # values past fp16's range: af.tensor warns
            half = kernels.astype(arr, np.float16)
        return half.astype(dt.np, copy=half is arr)
    return arr.astype(dt.np)
