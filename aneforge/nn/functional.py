"""torch.nn.functional names over the registered ops: each function records one MIL op (or a
composite of them), with torch's argument names.

>>> import aneforge as af
>>> import aneforge.nn.functional as F
>>> F.relu(af.tensor([-1.0, 2.0])).tolist()
[0.0, 2.0]
"""
from __future__ import annotations

from ..tensor import Tensor, _op

__all__ = ["relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "linear"]

# torch's `approximate` argument -> MIL gelu's `mode`.
GELU_MODES = {"none": "EXACT", "tanh": "TANH_APPROXIMATION"}


def relu(input: Tensor) -> Tensor:
    return input.relu()


def sigmoid(input: Tensor) -> Tensor:
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    return input.tanh()


def silu(input: Tensor) -> Tensor:
    """x * sigmoid(x), one MIL silu."""
    return input._unary("silu")


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """GELU, exact (erf) or tanh-approximated, as torch's `approximate='none'|'tanh'`.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.gelu(af.tensor([0.0, 1.0]), approximate="tanh").tolist()
    [0.0, 0.84130859375]
    """
    if approximate not in GELU_MODES:
        raise ValueError(f"gelu: approximate must be one of {sorted(GELU_MODES)}, "
                         f"got {approximate!r}")
    return input._unary("gelu", mode=GELU_MODES[approximate])


def softmax(input: Tensor, dim: int) -> Tensor:
    return input.softmax(dim)


def log_softmax(input: Tensor, dim: int) -> Tensor:
    return input.log_softmax(dim)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """input @ weight.T + bias, one MIL linear (weight is [out_features, in_features]).

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.linear(af.ones(2, 3), af.ones(4, 3), af.zeros(4)).shape
    (2, 4)
    """
    x, w = input._floating(), weight.to(input._floating().dtype)
    b = None if bias is None else bias.to(x.dtype)
    return _op("linear", {"x": x, "weight": w, "bias": b}, {})
