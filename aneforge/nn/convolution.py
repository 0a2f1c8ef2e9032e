"""torch.nn.functional's convolutions (conv1d/2d/3d, the transposed ones, unfold) and the
3-D average pool built on the same depth taps, imported into aneforge.nn.functional: im2col
slices and matmuls, so a weight can be a program input (the engine's conv op needs a constant
weight).

>>> import aneforge as af
>>> import aneforge.nn.functional as F
>>> F.conv2d(af.ones(1, 1, 3, 3), af.ones(1, 1, 2, 2)).tolist()
[[[[4.0, 4.0], [4.0, 4.0]]]]
"""
from __future__ import annotations

import numpy as np

from ..errors import AneforgeError, ShapeError
from ..ops._grad import zeros
from ..tensor import Tensor, const
from ..tensor.movement import stack
from ._conv import columns as _columns
from ._conv import conv2d as _conv2d
from .parameter import Parameter
from .pooling import _batched, _pair, avg_pool2d, pad


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """torch.nn.functional.unfold (im2col): every sliding kernel_size block of [N, C, H, W]
    (or [C, H, W]) as a column, [N, C * kh * kw, L], from strided slices (no data-dependent
    gather). Tensor.unfold is another function: windows along one axis.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.unfold(af.arange(6.0).reshape(1, 1, 2, 3), (2, 2)).tolist()
    [[[0.0, 1.0], [1.0, 2.0], [3.0, 4.0], [4.0, 5.0]]]
    """
    x = input.unsqueeze(0) if input.ndim == 3 else input
    if x.ndim != 4:
        raise ShapeError(f"unfold: input must be [N, C, H, W] or [C, H, W], got {input.shape}")
    cols, ho, wo = _columns(x, kernel_size, stride, padding, dilation, "unfold")
    out = cols.reshape(x.shape[0], -1, ho * wo)
    return out.squeeze(0) if input.ndim == 3 else out


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D convolution as im2col (slices) + matmul, so the weight can be a program input.

    >>> import aneforge as af
    >>> af.conv2d(af.ones(1, 1, 3, 3), af.ones(1, 1, 2, 2)).tolist()
    [[[[4.0, 4.0], [4.0, 4.0]]]]
    """
    if isinstance(padding, str):
        input, padding = _string_padding(input, weight, padding, stride, dilation)
    # a function of its inputs' values: recorded once per kind, then re-recorded (its kh*kw
    # slices, pad, stack and matmul cost more Python to record than a small CNN's step has)
    key = ("conv2d", *[tuple(v) if isinstance(v, list) else v for v in (stride, padding, dilation)],
           groups, bias is None)
    build = lambda: _conv2d(input, weight, bias, stride, padding, dilation, groups)  # noqa: E731
    try:
        hash(key)
    except TypeError:                     # a setting that is no key (a nested list): not kept
        return build()
    return input._kept(key, [_plain(t) for t in (input, weight, bias) if t is not None], build)


def _string_padding(input: Tensor, weight: Tensor, padding: str, stride, dilation):
    """torch's padding='valid' (none) and 'same' (stride 1: each side d*(k-1)//2, and an odd
    total's extra row or column at the bottom or right, as torch pads it): (the input, with
    that extra when there is one, and the even padding)."""
    if padding == "valid":
        return input, 0
    if padding != "same":
        raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                         f"{{'valid', 'same'}}")
    if _pair(stride) != (1, 1):
        raise ValueError("padding='same' is not supported for strided convolutions: pass the "
                         "padding as numbers, or use stride=1")
    total = [d * (k - 1) for d, k in zip(_pair(dilation), weight.shape[-2:])]
    if total[0] % 2 or total[1] % 2:
        input = pad(input, (0, total[1] % 2, 0, total[0] % 2))
    return input, (total[0] // 2, total[1] // 2)


def _plain(t: Tensor) -> Tensor:
    """A Parameter as a kept recording's input: the same value, as a Tensor (a Parameter
    records as a Tensor does; other subclasses may not, and are not kept)."""
    return t._at(*t.ref) if isinstance(t, Parameter) else t



# ---- convolutions ----------------------------------------------------------------------------
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-D convolution over [N, C, L] (or [C, L]): conv2d of a height-1 image.

    >>> import aneforge as af
    >>> af.conv1d(af.ones(1, 1, 4), af.ones(1, 1, 2)).tolist()
    [[[2.0, 2.0, 2.0]]]
    """
    one = lambda v: (1, v if isinstance(v, int) else v[0])            # noqa: E731
    padding = padding if isinstance(padding, str) else (0, _pair(padding)[0])
    return conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, one(stride), padding,
                  one(dilation), groups).squeeze(-2)


def _dilate_zeros(x: Tensor, axis: int, s: int) -> Tensor:
    """s - 1 zeros between consecutive entries along `axis` (stride of a transposed conv)."""
    if s == 1:
        return x
    if x.ndim == 5:              # the stack below adds an axis: merge the leading ones first
        lead = x.shape[:axis]
        y = _dilate_zeros(x.reshape(-1, *x.shape[axis:]), 1, s)
        return y.reshape(*lead, *y.shape[1:])
    z = zeros(x)
    up = stack([x] + [z] * (s - 1), axis + 1)
    shape = x.shape[:axis] + (x.shape[axis] * s,) + x.shape[axis + 1:]
    return up.reshape(shape).narrow(axis, 0, (x.shape[axis] - 1) * s + 1)


def _triple(v) -> tuple[int, int, int]:
    return (v, v, v) if isinstance(v, int) else tuple(v)


def _depth_taps(x: Tensor, k: int, s: int, p: int, d: int, name: str):
    """The k depth taps of [N, C, D, H, W] zero-padded by p: each tap's strided depth slice,
    merged into the batch ([N * Do, C, H, W]), and Do."""
    if p:
        x = pad(x, (0, 0, 0, 0, p, p))
    do = (x.shape[2] - d * (k - 1) - 1) // s + 1
    if do < 1:
        raise ShapeError(f"{name}: depth kernel {k} does not fit depth {x.shape[2] - 2 * p} with "
                         f"padding {p}")
    n, c, _, h, w = x.shape
    taps = [x[:, :, i * d: i * d + s * (do - 1) + 1: s].transpose(1, 2).reshape(n * do, c, h, w)
            for i in range(k)]
    return taps, do


def _from_depth(out: Tensor, n: int, do: int) -> Tensor:
    """[N * Do, C, H, W] back to [N, C, Do, H, W]."""
    return out.reshape(n, do, *out.shape[1:]).transpose(1, 2)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """3-D convolution over [N, C, D, H, W]: for each depth tap, conv2d of the input's strided
    depth slices (merged into the batch) with that tap's weights, summed over the taps (rank 5,
    the ANE's cap, holds throughout).

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.conv3d(af.ones(1, 1, 3, 3, 3), af.ones(1, 1, 2, 2, 2)).shape
    (1, 1, 2, 2, 2)
    """
    x = _batched(input, 4, "conv3d")
    (sd, sh, sw), (pd, ph, pw), (dd, dh, dw) = _triple(stride), _triple(padding), _triple(dilation)
    taps, do = _depth_taps(x, weight.shape[2], sd, pd, dd, "conv3d")
    out = None
    for i, tap in enumerate(taps):
        y = conv2d(tap, weight[:, :, i], None, (sh, sw), (ph, pw), (dh, dw), groups)
        out = y if out is None else out + y
    out = _from_depth(out, x.shape[0], do)
    out = out if bias is None else out + bias.reshape(-1, 1, 1, 1)
    return out if input.ndim == 5 else out.squeeze(0)


def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """3-D average pooling over [N, C, D, H, W]: each window's sum (avg_pool2d sums over the
    depth taps) divided by torch's divisor: the window size, the count of real elements with
    count_include_pad=False, or divisor_override (ceil_mode is refused).

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.avg_pool3d(af.ones(1, 1, 4, 4, 4), 2).shape
    (1, 1, 2, 2, 2)
    >>> F.avg_pool3d(af.ones(1, 1, 2, 2, 2), 2, padding=1, count_include_pad=False).tolist()
    [[[[[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]]]]]
    """
    if ceil_mode:
        raise AneforgeError("avg_pool3d: ceil_mode is not supported; pad the input to whole "
                            "windows, or pool depth and plane separately with avg_pool2d")
    x = _batched(input, 4, "avg_pool3d")._floating()
    k, p = _triple(kernel_size), _triple(padding)
    s = _triple(stride) if stride is not None and stride != [] else k
    taps, do = _depth_taps(x, k[0], s[0], p[0], 1, "avg_pool3d")
    total = None
    for tap in taps:
        y = avg_pool2d(tap, k[1:], s[1:], p[1:], divisor_override=1)        # window sums
        total = y if total is None else total + y
    total = _from_depth(total, x.shape[0], do)
    if divisor_override:
        count = np.full(total.shape[-3:], float(divisor_override))
    else:
        sizes = [_window_counts(n, *a, m, count_include_pad)
                 for n, a, m in zip(x.shape[-3:], zip(k, s, p), total.shape[-3:])]
        count = np.einsum("i,j,k->ijk", *sizes)
    out = total / (float(count.flat[0]) if np.all(count == count.flat[0])
                   else const(count, x.dtype))
    return out if input.ndim == 5 else out.squeeze(0)


def _window_counts(n: int, k: int, s: int, p: int, out: int, include_pad: bool) -> np.ndarray:
    """Along one axis, how many places each pooling window covers: torch's divisor counts the
    padding (the window clipped to the padded input) or, without include_pad, only the input."""
    lo = np.arange(out) * s - p
    if include_pad:
        return (np.minimum(lo + k, n + p) - lo).astype(np.float64)
    return (np.minimum(lo + k, n) - np.maximum(lo, 0)).astype(np.float64)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The gradient of conv2d as a layer: the input spread by `stride` (zeros between),
    padded by dilation * (k - 1) - padding, and convolved with the weight [Cin, Cout/groups,
    kh, kw] flipped and swapped in/out.

    >>> import aneforge as af
    >>> af.conv_transpose2d(af.ones(1, 1, 2, 2), af.ones(1, 1, 2, 2), stride=2).shape
    (1, 1, 4, 4)
    """
    x = _batched(input, 3, "conv_transpose2d")
    (sh, sw), (ph, pw), (oh, ow), (dh, dw) = (_pair(stride), _pair(padding),
                                              _pair(output_padding), _pair(dilation))
    cin, cout_g, kh, kw = weight.shape
    x = _dilate_zeros(_dilate_zeros(x, 2, sh), 3, sw)
    qh, qw = dh * (kh - 1) - ph, dw * (kw - 1) - pw
    x = pad(x, (qw, qw + ow, qh, qh + oh))
    w = weight.flip((2, 3)).reshape(groups, cin // groups, cout_g, kh, kw).transpose(1, 2)
    w = w.reshape(groups * cout_g, cin // groups, kh, kw)
    out = conv2d(x, w, bias, 1, 0, (dh, dw), groups)
    return out if input.ndim == 4 else out.squeeze(0)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """The gradient of conv3d as a layer, over [N, C, D, H, W]: the input spread by `stride`
    (zeros between), padded by dilation * (k - 1) - padding, and convolved (conv3d) with the
    weight [Cin, Cout/groups, kd, kh, kw] flipped and swapped in/out.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.conv_transpose3d(af.ones(1, 1, 2, 2, 2), af.ones(1, 1, 2, 2, 2), stride=2).shape
    (1, 1, 4, 4, 4)
    """
    x = _batched(input, 4, "conv_transpose3d")
    s, p, o, d = _triple(stride), _triple(padding), _triple(output_padding), _triple(dilation)
    cin, cout_g, *k = weight.shape
    for axis in range(3):
        x = _dilate_zeros(x, axis + 2, s[axis])
    q = [d[a] * (k[a] - 1) - p[a] for a in range(3)]
    x = pad(x, (q[2], q[2] + o[2], q[1], q[1] + o[1], q[0], q[0] + o[0]))
    w = weight.flip((2, 3, 4)).reshape(groups, cin // groups, cout_g, -1).transpose(1, 2)
    w = w.reshape(groups * cout_g, cin // groups, *k)     # (kd, kh, kw merged: rank <= 5)
    out = conv3d(x, w, bias, 1, 0, d, groups)
    return out if input.ndim == 5 else out.squeeze(0)
