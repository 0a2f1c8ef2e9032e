"""Layers with torch's names, arguments, parameter names, layouts and default initializations."""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..context import CTX
from . import functional as F
from . import init
from .convolution import _triple
from .losses import _legacy
from .module import Module
from .parameter import Parameter
from ..creation import ones, tensor, zeros
from ..tensor.elementwise import where


def _param(*shape) -> Parameter:
    return Parameter(np.zeros(shape, np.float32))


class Linear(Module):
    """y = x @ weight.T + bias, weight [out_features, in_features] as in torch.

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.Linear(3, 2)(af.ones(5, 3)).shape
    (5, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = _param(out_features, in_features)
        self.bias = _param(out_features) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, " \
               f"bias={self.bias is not None}"


class Conv2d(Module):
    """2-D convolution (stride, padding, dilation, groups) lowered to im2col + matmul.

    The ANE's native conv wants constant weights (ANEForge `docs/op-catalog.md`), so a trainable
    conv is slices + concat + matmul, with the weight a program input like any parameter.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True):
        super().__init__()
        pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)   # noqa: E731
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels={in_channels} and out_channels={out_channels} must "
                             f"be divisible by groups={groups}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = pair(kernel_size), pair(stride)
        self.padding = padding if isinstance(padding, str) else pair(padding)   # 'same', 'valid'
        self.dilation = pair(dilation)
        self.weight = _param(out_channels, in_channels // groups, *self.kernel_size)
        self.bias = _param(out_channels) if bias else None
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = in_channels // groups * self.kernel_size[0] * self.kernel_size[1]
            init.uniform_(self.bias, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, groups={self.groups}")


class Embedding(Module):
    """A lookup table, computed as one_hot(indices) @ weight (the ANE has no dynamic gather).
    Row `padding_idx` starts at zero and gets no gradient, as in torch.

    >>> import aneforge as af, aneforge.nn as nn
    >>> emb = nn.Embedding(4, 2, padding_idx=0)
    >>> emb(af.tensor([0, 0])).tolist()
    [[0.0, 0.0], [0.0, 0.0]]
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight=None, _freeze: bool = False):
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"padding_idx {padding_idx} must be within num_embeddings "
                                 f"({num_embeddings})")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm = padding_idx, max_norm
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        self.weight = _param(num_embeddings, embedding_dim) if _weight is None else \
            Parameter(_weight, requires_grad=not _freeze)
        if _weight is None:
            init.normal_(self.weight)
            if padding_idx is not None:
                row = np.arange(num_embeddings).reshape(-1, 1) != padding_idx
                self.weight.set_(self.weight.numpy() * row.astype(np.float16))

    def forward(self, indices):
        return F.embedding(indices, self.weight, self.padding_idx, self.max_norm,
                           scale_grad_by_freq=self.scale_grad_by_freq, sparse=self.sparse)

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) \
            else tuple(normalized_shape)
        self.eps = eps
        self.weight = Parameter(np.ones(self.normalized_shape)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape)) if elementwise_affine and bias \
            else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) \
            else tuple(normalized_shape)
        self.eps = eps
        self.weight = Parameter(np.ones(self.normalized_shape)) if elementwise_affine else None

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)


class Dropout(Module):
    """Zeroes elements with probability p in training; the mask is drawn on the host and fed
    to the program as an input, so the compiled step is reused."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0 <= p < 1:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


def _activation(name: str, fn, doc: str, inplace: bool = False):
    """A stateless activation module; `inplace` is accepted where torch takes it (programs
    are SSA: nothing changes in place)."""
    def __init__(self, inplace: bool = False):
        Module.__init__(self)
        self.inplace = inplace

    def forward(self, x):
        return fn(x)
    body = {"forward": forward, "__doc__": doc}
    if inplace:
        body["__init__"] = __init__
    return type(name, (Module,), body)


ReLU = _activation("ReLU", F.relu, "max(x, 0)", inplace=True)
SiLU = _activation("SiLU", F.silu, "x * sigmoid(x)", inplace=True)
Tanh = _activation("Tanh", F.tanh, "tanh(x)")
Sigmoid = _activation("Sigmoid", F.sigmoid, "1 / (1 + exp(-x))")


class Identity(Module):
    """x (any constructor arguments are ignored, as torch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)


class Softmax(Module):
    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim)


class Softmin(Softmax):
    """F.softmin over `dim`.

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.Softmin(dim=0)(af.tensor([0.0, 0.0])).tolist()
    [0.5, 0.5]
    """

    def forward(self, x):
        return F.softmin(x, self.dim)


class LogSoftmax(Softmax):
    def forward(self, x):
        return F.log_softmax(x, self.dim)


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)


def _activation_with(name: str, fn, params: dict, doc: str):
    """A module holding torch's constructor arguments `params` (name -> default)."""
    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        values = {**params, **dict(zip(params, args)), **kwargs}
        for k, v in values.items():
            setattr(self, k, v)

    def forward(self, x):
        return fn(x, **{k: getattr(self, k) for k in params if k != "inplace"})

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={getattr(self, k)}" for k in params if k != "inplace")
    return type(name, (Module,), {"__init__": __init__, "forward": forward,
                                  "extra_repr": extra_repr, "__doc__": doc})


LeakyReLU = _activation_with("LeakyReLU", F.leaky_relu,
                             {"negative_slope": 0.01, "inplace": False}, "F.leaky_relu")
ELU = _activation_with("ELU", F.elu, {"alpha": 1.0, "inplace": False}, "F.elu")
Softplus = _activation_with("Softplus", F.softplus, {"beta": 1.0, "threshold": 20.0}, "F.softplus")
Hardtanh = _activation_with("Hardtanh", F.hardtanh,
                            {"min_val": -1.0, "max_val": 1.0, "inplace": False}, "F.hardtanh")
Mish = _activation_with("Mish", F.mish, {"inplace": False}, "F.mish")


class _Pool(Module):
    def __init__(self, kernel_size, stride=None, padding=0, **options):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        for k, v in options.items():
            setattr(self, k, v)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxPool2d(_Pool):
    """F.max_pool2d as a layer.

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.MaxPool2d(2)(af.ones(1, 3, 4, 4)).shape
    (1, 3, 2, 2)
    """

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__(kernel_size, stride, padding, dilation=dilation,
                         return_indices=return_indices, ceil_mode=ceil_mode)

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class MaxUnpool2d(Module):
    """F.max_unpool2d as a layer.

    >>> import aneforge as af, aneforge.nn as nn
    >>> y, i = nn.MaxPool2d(2, return_indices=True)(af.ones(1, 1, 4, 4))
    >>> nn.MaxUnpool2d(2)(y, i).shape
    (1, 1, 4, 4)
    """

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, input, indices, output_size=None):
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class MaxPool1d(MaxPool2d):
    """F.max_pool1d as a layer."""

    def forward(self, x):
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class AvgPool2d(_Pool):
    """F.avg_pool2d as a layer.

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.AvgPool2d(2)(af.ones(1, 3, 4, 4)).shape
    (1, 3, 2, 2)
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__(kernel_size, stride, padding, ceil_mode=ceil_mode,
                         count_include_pad=count_include_pad, divisor_override=divisor_override)

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AvgPool1d(_Pool):
    """F.avg_pool1d as a layer."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__(kernel_size, stride, padding, ceil_mode=ceil_mode,
                         count_include_pad=count_include_pad)

    def forward(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AdaptiveAvgPool2d(Module):
    """F.adaptive_avg_pool2d as a layer.

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.AdaptiveAvgPool2d(1)(af.ones(2, 3, 5, 4)).shape
    (2, 3, 1, 1)
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)


class Upsample(Module):
    """F.interpolate as a layer.

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.Upsample(scale_factor=2)(af.ones(1, 1, 2, 3)).shape
    (1, 1, 4, 6)
    """

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x):
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)


class Conv1d(Module):
    """1-D convolution (F.conv1d: conv2d of a height-1 image), torch's weight layout
    [out_channels, in_channels / groups, kernel_size] and initialization.

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.Conv1d(3, 4, 3, padding=1)(af.ones(2, 3, 8)).shape
    (2, 4, 8)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride=1,
                 padding=0, dilation=1, groups: int = 1, bias: bool = True):
        super().__init__()
        one = lambda v: v if isinstance(v, int) else v[0]       # noqa: E731
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = (one(kernel_size),), (one(stride),)
        self.padding = padding if isinstance(padding, str) else (one(padding),)
        self.dilation = (one(dilation),)
        self.weight = _param(out_channels, in_channels // groups, one(kernel_size))
        self.bias = _param(out_channels) if bias else None
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(in_channels // groups * one(kernel_size))
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.conv1d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)


class Conv3d(Module):
    """3-D convolution (F.conv3d), torch's weight layout [out_channels, in_channels / groups,
    kd, kh, kw] and initialization.

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.Conv3d(2, 4, 3, padding=1)(af.ones(1, 2, 4, 4, 4)).shape
    (1, 4, 4, 4, 4)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True):
        super().__init__()
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _triple(kernel_size), _triple(stride)
        self.padding, self.dilation = _triple(padding), _triple(dilation)
        self.weight = _param(out_channels, in_channels // groups, *self.kernel_size)
        self.bias = _param(out_channels) if bias else None
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(in_channels // groups * math.prod(self.kernel_size))
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.conv3d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)


class AvgPool3d(Module):
    """F.avg_pool3d as a layer.

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.AvgPool3d(2)(af.ones(1, 1, 4, 4, 4)).shape
    (1, 1, 2, 2, 2)
    """

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x):
        return F.avg_pool3d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class ConvTranspose2d(Module):
    """Transposed 2-D convolution (F.conv_transpose2d), weight [in_channels,
    out_channels / groups, kh, kw] as torch.

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.ConvTranspose2d(3, 2, 2, stride=2)(af.ones(1, 3, 4, 4)).shape
    (1, 2, 8, 8)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1):
        super().__init__()
        pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)   # noqa: E731
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.padding = pair(kernel_size), pair(stride), pair(padding)
        self.output_padding, self.dilation = pair(output_padding), pair(dilation)
        self.weight = _param(in_channels, out_channels // groups, *self.kernel_size)
        self.bias = _param(out_channels) if bias else None
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:   # torch's fan_in of this weight: dim 1 times the kernel
            bound = 1 / math.sqrt(out_channels // groups * self.kernel_size[0] * self.kernel_size[1])
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


class GroupNorm(Module):
    """F.group_norm with a per-channel affine (weight 1, bias 0 at start).

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.GroupNorm(2, 4)(af.ones(1, 4, 3)).shape
    (1, 4, 3)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True):
        super().__init__()
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.weight = Parameter(np.ones(num_channels)) if affine else None
        self.bias = Parameter(np.zeros(num_channels)) if affine else None

    def forward(self, x):
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


class _BatchNorm(Module):
    """torch's BatchNorm: per-channel affine weight/bias, running_mean/running_var/
    num_batches_tracked buffers (in state_dict); batch statistics in training, running ones in
    eval."""
    ranks: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = Parameter(np.ones(num_features)) if affine else None
        self.bias = Parameter(np.zeros(num_features)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features))
            self.register_buffer("running_var", ones(num_features))
            self.register_buffer("num_batches_tracked", tensor(0))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None
        CTX.participants.add(self)

    def join_realization(self, refs: list) -> list:
        """Running statistics updated by a training forward are computed by the same program as
        the step that realizes (they would otherwise chain lazily from step to step)."""
        if CTX.thread.capture is not None:
            return []
        return [b.ref for b in (self.running_mean, self.running_var, self.num_batches_tracked)
                if b is not None and b.ref[0].data is None]

    def forward(self, x):
        if x.ndim not in self.ranks:
            ranks = " or ".join(map(str, self.ranks))
            raise ValueError(f"{type(self).__name__}: expected a {ranks}-D input, got shape "
                             f"{x.shape}")
        batch_stats = self.training or not self.track_running_stats
        momentum = self.momentum
        if self.training and self.track_running_stats:
            F.update_buffer(self.num_batches_tracked, self.num_batches_tracked + 1)
            if momentum is None:             # torch: a cumulative average
                momentum = 1.0 / float(self.num_batches_tracked.item())
        return F.batch_norm(x, self.running_mean if self.training or not batch_stats else None,
                            self.running_var if self.training or not batch_stats else None,
                            self.weight, self.bias, batch_stats, momentum or 0.0, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class BatchNorm1d(_BatchNorm):
    """torch.nn.BatchNorm1d over [N, C] or [N, C, L].

    >>> import aneforge as af, aneforge.nn as nn
    >>> bn = nn.BatchNorm1d(1)
    >>> bn(af.tensor([[1.0], [3.0]])).tolist(), bn.running_mean.tolist()
    ([[-1.0], [1.0]], [0.2000...])
    """
    ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """torch.nn.BatchNorm2d over [N, C, H, W]."""
    ranks = (4,)


class _Loss(Module):
    def __init__(self, reduction: str = "mean", **options):
        super().__init__()
        self.reduction = reduction
        for k, v in options.items():
            setattr(self, k, v)


class CrossEntropyLoss(_Loss):
    """F.cross_entropy as a module (class weight, ignore_index, label_smoothing).

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.CrossEntropyLoss()(af.zeros(2, 4), af.tensor([1, 3])).item()
    1.38...
    """

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0):
        super().__init__(_legacy(size_average, reduce, reduction), ignore_index=ignore_index,
                         label_smoothing=label_smoothing)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    """F.nll_loss as a module."""

    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean"):
        super().__init__(_legacy(size_average, reduce, reduction), ignore_index=ignore_index)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """F.mse_loss as a module."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """F.l1_loss as a module."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """F.smooth_l1_loss as a module."""

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0):
        super().__init__(_legacy(size_average, reduce, reduction), beta=beta)

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """F.huber_loss as a module."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction, delta=delta)

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCEWithLogitsLoss(_Loss):
    """F.binary_cross_entropy_with_logits as a module (weight and pos_weight are buffers, as
    in torch).

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.BCEWithLogitsLoss(pos_weight=af.tensor([2.0]))(af.zeros(2), af.ones(2)).item()
    1.38...
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean",
                 pos_weight=None):
        super().__init__(_legacy(size_average, reduce, reduction))
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class BCELoss(_Loss):
    """F.binary_cross_entropy as a module (input: probabilities).

    >>> import aneforge as af, aneforge.nn as nn
    >>> nn.BCELoss()(af.tensor([0.5]), af.tensor([1.0])).item()
    0.693...
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__(_legacy(size_average, reduce, reduction))
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class KLDivLoss(_Loss):
    """F.kl_div as a module (input: log-probabilities; reduction 'batchmean' is the KL
    divergence).

    >>> import aneforge as af, aneforge.nn as nn
    >>> p = af.tensor([[0.25, 0.75]])
    >>> nn.KLDivLoss(reduction="batchmean")(p.log(), p).item()
    0.0
    """

    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 log_target: bool = False):
        super().__init__(_legacy(size_average, reduce, reduction), log_target=log_target)

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class MultiheadAttention(Module):
    """torch's MultiheadAttention (packed in_proj_weight [3E, E], out_proj), with
    attn_mask, key_padding_mask and batch_first. Without need_weights the heads run as one
    MIL scaled_dot_product_attention; with it (torch's default), or with attention dropout in
    training, the softmax is spelled out so the head-averaged weights can be returned (or the
    dropout applied to them, as torch).

    >>> import aneforge as af, aneforge.nn as nn
    >>> mha = nn.MultiheadAttention(8, 2, batch_first=True)
    >>> out, w = mha(af.ones(1, 3, 8), af.ones(1, 3, 8), af.ones(1, 3, 8))
    >>> out.shape, w.shape
    ((1, 3, 8), (1, 3, 3))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} must be divisible by num_heads {num_heads}")
        if add_bias_kv or add_zero_attn or (kdim or embed_dim) != embed_dim or \
                (vdim or embed_dim) != embed_dim:
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and kdim/"
                                      "vdim != embed_dim are not supported")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.batch_first, self.head_dim = batch_first, embed_dim // num_heads
        self.in_proj_weight = _param(3 * embed_dim, embed_dim)
        self.in_proj_bias = _param(3 * embed_dim) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        init.xavier_uniform_(self.in_proj_weight)
        if bias:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _heads(self, x, i: int):
        """Project with the i-th third of the packed weights; [B, L, E] -> [B, H, L, D]."""
        e = self.embed_dim
        w = self.in_proj_weight[i * e:(i + 1) * e]
        b = None if self.in_proj_bias is None else self.in_proj_bias[i * e:(i + 1) * e]
        y = F.linear(x, w, b)
        return y.reshape(y.shape[0], y.shape[1], self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        q, k, v = self._heads(query, 0), self._heads(key, 1), self._heads(value, 2)
        mask = self._additive_mask(attn_mask, key_padding_mask, is_causal, q)
        drop = self.dropout if self.training else 0.0
        if need_weights or drop:           # spelled out: the weights are returned or dropped
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            weights = (scores if mask is None else scores + mask).softmax(-1)
            weights = F.dropout(weights, drop)      # torch returns the dropped weights too
            out = weights @ v
            weights = weights if need_weights else None
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            weights = None
        b, h, l, d = out.shape
        out = self.out_proj(out.transpose(1, 2).reshape(b, l, h * d))
        out = out if self.batch_first else out.transpose(0, 1)
        if weights is not None and average_attn_weights:
            weights = weights.mean(1)
        return out, weights

    @staticmethod
    def _additive_mask(attn_mask, key_padding_mask, is_causal, q):
        """One float mask [B or 1, 1, L, S]: bool masks (True = not allowed, torch's
        convention here) become -inf additions, as torch."""
        mask, l = None, q.shape[-2]
        if is_causal and attn_mask is None:
            raise ValueError("MultiheadAttention: is_causal needs the causal attn_mask too "
                             "(as torch)")
        if attn_mask is not None:
            m = attn_mask
            if m.dtype == dtypes.bool_:
                m = where(m, float("-inf"), 0.0)
            mask = m.reshape((1,) * (4 - m.ndim) + m.shape) if m.ndim == 2 else \
                m.reshape(q.shape[0], -1, l, m.shape[-1])
        if key_padding_mask is not None:
            kp = key_padding_mask
            kp = where(kp, float("-inf"), 0.0) if kp.dtype == dtypes.bool_ else kp
            kp = kp.reshape(kp.shape[0], 1, 1, kp.shape[-1])
            mask = kp if mask is None else mask + kp
        return mask
