"""Tensor casts and torch's no-op placements: to, float, half, type, ... (MIL cast)."""
from __future__ import annotations

from .. import dtypes
from ..devices import is_device, use
from .base import TensorBase

# torch's legacy type strings (Tensor.type()); int64/double name the int32/fp32 we compute in.
TYPE_NAMES = {"fp16": "torch.HalfTensor", "fp32": "torch.FloatTensor", "int32": "torch.IntTensor",
              "int16": "torch.ShortTensor", "int8": "torch.CharTensor", "uint8": "torch.ByteTensor",
              "uint16": "torch.UInt16Tensor", "bool": "torch.BoolTensor"}
TYPE_DTYPES = {**{v: k for k, v in TYPE_NAMES.items()}, "torch.LongTensor": "int32",
               "torch.DoubleTensor": "fp32"}


def placement(args, device=None, dtype=None, what: str = "to()"):
    """(device, dtype) from torch's `.to(...)` arguments: `to(dtype)`, `to(device, dtype)`,
    `to(other_tensor)`, `to(device=..., dtype=...)`. The device is checked (cuda raises, saying
    what to use) and otherwise has no effect: there is one device."""
    for a in args:
        if is_device(a) or (isinstance(a, int) and not isinstance(a, bool)):
            device = a
        elif isinstance(a, TensorBase):
            dtype = a.dtype
        elif a is not None:
            dtype = a
    use(device, what)
    return device, dtype


class CastsMixin(TensorBase):
    """dtype casts (MIL cast); the one device is accepted, others (cuda) raise."""
    __slots__ = ()
    is_cuda = False
    is_mps = False

    def to(self, *args, device=None, dtype=None, non_blocking: bool = False, copy: bool = False,
           memory_format=None) -> "Tensor":
        """Cast to a dtype (MIL cast), as `x.to(dtype)`, `x.to(device, dtype)`,
        `x.to(other)` (its dtype) or keywords. The device may be "cpu", "mps" or "ane" (the one
        device: the backend decides where programs run); "cuda" raises, saying so.

        >>> import aneforge as af
        >>> af.ones(2).to("mps", af.float32).dtype
        aneforge.float32
        """
        _, dtype = placement(args, device, dtype, "Tensor.to()")
        if dtype is None:
            return self.clone() if copy else self
        dtype = dtypes.as_dtype(dtype)
        if dtype == self.dtype:
            return self.clone() if copy else self
        return self._record("cast", {"x": self}, {"dtype": dtype.name})

    def cpu(self, memory_format=None) -> "Tensor":
        return self

    def cuda(self, device=None, non_blocking: bool = False, memory_format=None) -> "Tensor":
        """Raises: aneforge has no CUDA device (use "cpu", "mps" or "ane", or drop the call)."""
        use("cuda", "Tensor.cuda()")
        return self

    def contiguous(self) -> "Tensor":
        return self

    def clone(self) -> "Tensor":
        """A copy that keeps the gradient connection (an identity op)."""
        return self._record("identity", {"x": self}, {})

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
