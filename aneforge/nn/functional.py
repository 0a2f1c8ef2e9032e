"""torch.nn.functional names over the registered ops: each function records one MIL op (or a
composite of them), with torch's argument names.

>>> import aneforge as af
>>> import aneforge.nn.functional as F
>>> F.relu(af.tensor([-1.0, 2.0])).tolist()
[0.0, 2.0]
"""
from __future__ import annotations

import numpy as np

from ..creation import generator, tensor
from ..errors import AneforgeError
from ..functions import where
from ..tensor import Tensor, const, record_op

__all__ = ["relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "linear",
           "one_hot", "embedding", "nll_loss", "cross_entropy", "mse_loss", "l1_loss",
           "binary_cross_entropy_with_logits", "layer_norm", "rms_norm", "dropout", "conv2d"]

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
    """input @ weight.T + bias (weight is [out_features, in_features], as in torch).

    Recorded as matmul(transpose_y=True) + add: MIL `linear` needs a constant weight, and here
    weights are program inputs so that training compiles once.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.linear(af.ones(2, 3), af.ones(4, 3), af.zeros(4)).shape
    (2, 4)
    """
    x = input._floating()
    w = weight.to(x.dtype)
    lifted = x.unsqueeze(0) if x.ndim == 1 else x
    out = record_op("matmul", {"x": lifted, "y": w}, {"transpose_y": True})
    out = out.squeeze(0) if x.ndim == 1 else out
    return out if bias is None else out + bias.to(x.dtype)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """Class indices -> one-hot rows (int32, as torch's int64), built as equal(idx, arange).

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.one_hot(af.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    return _one_hot_mask(tensor, num_classes).int()


def _one_hot_mask(indices: Tensor, num_classes: int) -> Tensor:
    if indices.dtype.is_float:
        raise AneforgeError(f"class indices must be an integer tensor, got {indices.dtype}")
    if num_classes < 1:
        raise AneforgeError("one_hot needs num_classes: the number of classes cannot be read "
                            "from the data inside a static program")
    classes = const(np.arange(num_classes), indices.dtype)
    return indices.unsqueeze(-1) == classes


def embedding(input: Tensor, weight: Tensor) -> Tensor:
    """Rows of `weight` picked by integer `input`, as one_hot(input) @ weight (no dynamic
    gather on the ANE; the gradient to the weight is a matmul)."""
    onehot = _one_hot_mask(input, weight.shape[0]).to(weight.dtype)
    return onehot @ weight


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def nll_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices `target` under log-probabilities `input` [N, C]."""
    picked = select_class(input, target)
    return _reduce(-picked, reduction)


def select_class(values: Tensor, target: Tensor) -> Tensor:
    """values[n, target[n]] over the class axis 1, as a masked sum (no gather)."""
    mask = _one_hot_mask(target, values.shape[1])             # [N, ..., C]
    mask = mask if values.ndim == 2 else mask.movedim(-1, 1)   # classes on axis 1
    return where(mask, values, values - values).sum(1)


def cross_entropy(input: Tensor, target: Tensor, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """torch's cross_entropy: class indices (int) or class probabilities (float) as target,
    with label smoothing. Classes on axis 1.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.cross_entropy(af.zeros(2, 4), af.tensor([1, 3])).item()   # ln 4 = 1.3863 in fp16
    1.38...
    """
    logp = log_softmax(input, 1)
    classes = input.shape[1]
    if target.dtype.is_float:
        if target.shape != input.shape:
            raise AneforgeError(f"probability targets need the input's shape {input.shape}, "
                                f"got {target.shape}")
        soft = target if not label_smoothing else \
            target * (1 - label_smoothing) + label_smoothing / classes
        return _reduce(-(logp * soft).sum(1), reduction)
    loss = -select_class(logp, target)
    if label_smoothing:
        loss = loss * (1 - label_smoothing) - logp.mean(1) * label_smoothing
    return _reduce(loss, reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    return _reduce((input - target).abs(), reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     reduction: str = "mean") -> Tensor:
    """max(x, 0) - x*y + log(1 + exp(-|x|)): stable for large |x|."""
    loss = input.relu() - input * target + ((-input.abs()).exp() + 1.0).log()
    return _reduce(loss, reduction)


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize over the trailing `normalized_shape` axes (composite of registered ops)."""
    dims = tuple(range(-len(tuple(normalized_shape)), 0))
    mu = input.mean(dims, keepdim=True)
    xc = input - mu
    out = xc * ((xc * xc).mean(dims, keepdim=True) + eps).rsqrt()
    out = out if weight is None else out * weight
    return out if bias is None else out + bias


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """x / sqrt(mean(x^2) + eps) * weight; eps defaults to the dtype's machine epsilon (torch)."""
    dims = tuple(range(-len(tuple(normalized_shape)), 0))
    eps = float(np.finfo(input.dtype.np).eps) if eps is None else eps
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return out if weight is None else out * weight


def dropout(input: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero elements with probability p and scale the rest by 1/(1-p). The mask is drawn on the
    host (af.manual_seed) and enters the program as an input."""
    if not training or p == 0:
        return input
    keep = tensor(generator().random(input.shape) >= p)
    return where(keep, input * (1.0 / (1.0 - p)), input - input)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D convolution as im2col (slices) + matmul, so the weight can be a program input."""
    from ._conv import conv2d as _conv2d
    return _conv2d(input, weight, bias, stride, padding, dilation, groups)
