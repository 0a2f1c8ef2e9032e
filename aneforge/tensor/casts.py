"""Tensor casts and torch's no-op placements: to, float, half, type, ... (MIL cast)."""
from __future__ import annotations

from .. import dtypes
from .base import TensorBase

# torch's legacy type strings (Tensor.type()); int64/double name the int32/fp32 we compute in.
TYPE_NAMES = {"fp16": "torch.HalfTensor", "fp32": "torch.FloatTensor", "int32": "torch.IntTensor",
              "int16": "torch.ShortTensor", "int8": "torch.CharTensor", "uint8": "torch.ByteTensor",
              "uint16": "torch.UInt16Tensor", "bool": "torch.BoolTensor"}
TYPE_DTYPES = {**{v: k for k, v in TYPE_NAMES.items()}, "torch.LongTensor": "int32",
               "torch.DoubleTensor": "fp32"}
DEVICES = ("cpu", "ane", "mps", "cuda", "meta")     # all mean "wherever the backend runs"


class CastsMixin(TensorBase):
    """dtype casts (MIL cast); devices are accepted and ignored."""
    __slots__ = ()

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
            self._record("cast", {"x": self}, {"dtype": dtype.name})

    def cpu(self) -> "Tensor":
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
