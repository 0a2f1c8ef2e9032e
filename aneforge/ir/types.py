"""TensorType: the static (shape, dtype) of every value in a program."""
from __future__ import annotations

from typing import NamedTuple

from ..dtypes import DType


class TensorType(NamedTuple):
    shape: tuple[int, ...]
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"tensor<{self.dtype.name}, [{', '.join(map(str, self.shape))}]>"
