"""torch.nn.functional's padding, pooling and resampling (aneforge.nn.functional re-exports
them): pad, max/avg pooling as strided views reduced by a select chain or a matmul with ones,
max_unpool2d, adaptive pooling and interpolate as one constant matrix per spatial axis."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import AneforgeError, ShapeError
from ..ops._grad import zeros
from ..tensor import Tensor, const, record_op
from ..tensor.elementwise import where
from ..tensor.movement import cat, stack


# ---- padding and pooling ---------------------------------------------------------------------
def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the trailing axes: `pad` lists (left, right) for the last axis first, then the one
    before, as torch; negative amounts crop. Modes 'constant' (with `value`), 'reflect' and
    'replicate' record MIL pads (floating tensors), 'circular' slices and concatenates. As in
    torch, reflect reaches less than the axis past each edge, circular wraps at most once,
    replicate and constant any amount; reflect and replicate pad before cropping, circular
    wraps what is left after cropping.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.pad(af.tensor([[1.0, 2.0]]), (1, 0), value=9.0).tolist()
    [[9.0, 1.0, 2.0]]
    >>> F.pad(af.tensor([[1.0, 2.0]]), (3, -1), mode="replicate").tolist()
    [[1.0, 1.0, 1.0, 1.0]]
    """
    if len(pad) % 2 or len(pad) > 2 * input.ndim:
        raise ValueError(f"pad: {tuple(pad)} needs (left, right) pairs for at most {input.ndim} "
                         f"axes")
    if mode not in _PAD_REACH:
        raise NotImplementedError(f"pad: unrecognised padding mode {mode!r}; use 'constant', "
                                  f"'reflect', 'replicate' or 'circular'")
    pairs = [(input.ndim - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1]))
             for i in range(len(pad) // 2)]
    for axis, before, after in pairs:
        if input.shape[axis] + before + after < 0:
            raise ShapeError(f"pad: the input size {input.shape[axis]} of dim {axis} plus the "
                             f"padding ({before}, {after}) is negative")
    x = _crop(input, pairs) if mode == "circular" else input
    grow = [(a, max(b, 0), max(e, 0)) for a, b, e in pairs if b > 0 or e > 0]
    for axis, before, after in grow:
        reach = _PAD_REACH[mode]
        if reach is not None and max(before, after) > reach[0](x.shape[axis]):
            raise ShapeError(f"pad: {mode} padding ({before}, {after}) of dim {axis} (size "
                             f"{x.shape[axis]}) {reach[1]}")
    x = _grown(x, grow, mode, value) if grow else x
    return x if mode == "circular" else _crop(x, pairs)


# torch's limit on a side's amount per mode (aten ReflectionPad.cpp, PadNd.cpp): a reflection
# reaches n - 1 past the edge, circular wraps at most once; constant and replicate: any amount
_PAD_REACH = {"constant": None, "replicate": None,
              "reflect": (lambda n: n - 1, "must be less than the dimension's size"),
              "circular": (lambda n: n, "may not wrap around more than once (at most the size "
                                        "left after cropping)")}


def _crop(x: Tensor, pairs) -> Tensor:
    """x with the negative amounts of `pairs` ((axis, before, after)) cut off."""
    for axis, before, after in pairs:
        if before < 0 or after < 0:
            cut = max(-before, 0)
            x = x.narrow(axis, cut, x.shape[axis] - cut - max(-after, 0))
    return x


def _grown(x: Tensor, pairs, mode: str, value) -> Tensor:
    """x padded by the nonnegative (axis, before, after) of `pairs` in `mode`."""
    if mode == "circular":
        for axis, before, after in pairs:
            n = x.shape[axis]
            x = cat(([x.narrow(axis, n - before, before)] if before else []) + [x] +
                    ([x.narrow(axis, 0, after)] if after else []), axis)
        return x
    if not x.dtype.is_float:
        if mode != "constant":
            raise AneforgeError(f"pad: {mode} padding needs a floating tensor, got {x.dtype}; "
                                f"cast with .half() first")
        for axis, before, after in pairs:
            fill = zeros(x.narrow(axis, 0, 1)) + (value or 0)
            block = [fill.expand(*[n if i == axis else s for i, s in enumerate(x.shape)])
                     for n in (before, after) if n]          # no empty block for a 0 side
            x = cat(block[:1] * bool(before) + [x] + block[bool(before):], axis)
        return x
    while pairs:        # MIL's replicate reaches at most the axis per pad: repeat past that
        step = [(a, min(b, x.shape[a]), min(e, x.shape[a])) if mode == "replicate" else (a, b, e)
                for a, b, e in pairs]
        first = min(a for a, _, _ in step)
        widths = {a: (b, e) for a, b, e in step}
        mil_pad = tuple(p for a in range(first, x.ndim) for p in widths.get(a, (0, 0)))
        x = record_op("pad", {"x": x}, {"pad": mil_pad, "mode": mode,
                                        "constant_val": float(value or 0.0)})
        pairs = [(a, b - sb, e - se) for (a, b, e), (_, sb, se) in zip(pairs, step)
                 if b > sb or e > se]
    return x


def _pair(v, name: str = "") -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, (int, np.integer)) else tuple(int(a) for a in v)


def _windows(x: Tensor, kernel, stride, padding, dilation, ceil_mode, fill):
    """The kh*kw strided views of x [N, C, H, W] padded with `fill` (torch's pooling
    geometry, ceil_mode included): each view is [N, C, Ho, Wo]."""
    (kh, kw), (ph, pw), (dh, dw) = _pair(kernel), _pair(padding), _pair(dilation)
    sh, sw = _pair(stride) if stride is not None and stride != [] else (kh, kw)
    h, w = x.shape[-2:]

    def out_size(n, k, s, p, d):
        span = n + 2 * p - d * (k - 1) - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= n + p:          # the last window must start inside
            o -= 1
        return o

    ho, wo = out_size(h, kh, sh, ph, dh), out_size(w, kw, sw, pw, dw)
    if ho < 1 or wo < 1:
        raise ShapeError(f"pool: kernel {(kh, kw)} does not fit input {(h, w)} with padding "
                         f"{(ph, pw)}")
    rows = [_span(i * dh - ph, sh, h, ho) for i in range(kh)]
    cols = [_span(j * dw - pw, sw, w, wo) for j in range(kw)]
    views = [_view(x, r, c, (sh, sw), (ho, wo), fill) for r in rows for c in cols]
    views = [v for v in views if v is not None]
    if not views:
        raise ShapeError(f"pool: with padding {(ph, pw)} and dilation {(dh, dw)} every window "
                         f"of kernel {(kh, kw)} lies in the padding of input {(h, w)}")
    return views, (ho, wo), (sh, sw)


def _span(start: int, s: int, n: int, n_out: int):
    """The outputs o whose input index start + s*o lies in [0, n): (first o, how many, the
    first index)."""
    first = min(n_out, -(start // s)) if start < 0 else 0
    last = min(n_out - 1, (n - 1 - start) // s)
    return first, last - first + 1, start + s * first


def _view(x: Tensor, rows, cols, stride, out, fill):
    """One kernel tap's view [N, C, Ho, Wo]: the input's strided slice, then `fill` padded
    around it (None when the tap sees only padding, which never changes a max or a sum). The
    padding is added after the slice, not sliced out of a padded input: on M1/M2 a slice with
    a width offset multiplies by 16 on the way (docs/numerics.md), which would turn a -65504
    fill into -inf and report a hazard for a value the op made itself."""
    (fh, nh, r0), (fw, nw, c0), (sh, sw), (ho, wo) = rows, cols, stride, out
    if nh < 1 or nw < 1:
        return None
    v = x[..., r0: r0 + sh * (nh - 1) + 1: sh, c0: c0 + sw * (nw - 1) + 1: sw]
    if (nh, nw) != (ho, wo):
        v = pad(v, (fw, wo - fw - nw, fh, ho - fh - nh), value=fill)
    return v


def _batched(input: Tensor, rank: int, name: str):
    if input.ndim not in (rank, rank + 1):
        raise ShapeError(f"{name}: input must be {rank}-D or {rank + 1}-D (batched), got shape "
                         f"{input.shape}")
    return input.unsqueeze(0) if input.ndim == rank else input


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """2-D max pooling over [N, C, H, W] (or [C, H, W]): the maximum of the window's strided
    slices; padding never wins (it is the dtype's lowest value). As in torch, the gradient of
    a window goes to its first maximum (row-major), not shared between ties. With
    `return_indices`, also each maximum's flat index into its input plane (h * W + w; int32,
    so a program returns them while H * W fits int16), the same select chain over a constant
    image of indices.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.max_pool2d(af.arange(16.0).reshape(1, 4, 4), 2).tolist()
    [[[5.0, 7.0], [13.0, 15.0]]]
    >>> F.max_pool2d(af.tensor([[[1.0, 3.0], [4.0, 2.0]]]), 2, return_indices=True)[1].tolist()
    [[[2]]]
    """
    x = _batched(input, 3, "max_pool2d")
    low = float(np.finfo(x.dtype.np).min) if x.dtype.is_float else int(np.iinfo(x.dtype.np).min)
    views, _, _ = _windows(x, kernel_size, stride, padding, dilation, ceil_mode, low)
    h, w = x.shape[-2:]
    places = const(np.arange(h * w).reshape(1, 1, h, w), dtypes.int32) if return_indices else None
    spots = _windows(places, kernel_size, stride, padding, dilation, ceil_mode, -1)[0] \
        if return_indices else [None] * len(views)
    out, at = views[-1], spots[-1]
    for v, i in zip(reversed(views[:-1]), reversed(spots[:-1])):   # an earlier view wins ties
        first = v >= out
        out = where(first, v, out)
        at = where(first, i, at) if return_indices else None
    squeeze = (lambda t: t) if input.ndim == 4 else (lambda t: t.squeeze(0))    # noqa: E731
    return (squeeze(out), squeeze(at.expand(out.shape))) if return_indices else squeeze(out)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0,
                 output_size=None) -> Tensor:
    """max_pool2d's partial inverse: zeros of the unpooled size with each input value at its
    index (flat, into the output plane), as torch: a scatter (one-hot selects; of repeated
    indices the last is kept).

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> x = af.tensor([[[1.0, 3.0], [4.0, 2.0]]])
    >>> y, i = F.max_pool2d(x, 2, return_indices=True)
    >>> F.max_unpool2d(y, i, 2).tolist()
    [[[0.0, 0.0], [4.0, 0.0]]]
    """
    x = _batched(input, 3, "max_unpool2d")
    idx = indices.unsqueeze(0) if indices.ndim == 3 else indices
    (kh, kw), (ph, pw) = _pair(kernel_size), _pair(padding)
    sh, sw = _pair(stride) if stride is not None else (kh, kw)
    h, w = x.shape[-2:]
    size = (tuple(output_size)[-2:] if output_size is not None else
            ((h - 1) * sh - 2 * ph + kh, (w - 1) * sw - 2 * pw + kw))
    n, c = x.shape[:2]
    flat = zeros(x).reshape(n, c, -1)[..., :1].expand(n, c, size[0] * size[1])
    out = flat.scatter(2, idx.reshape(n, c, -1), x.reshape(n, c, -1)).reshape(n, c, *size)
    return out if input.ndim == 4 else out.squeeze(0)


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """2-D average pooling: the window's strided slices summed by a matmul with ones (the wide
    accumulator) and divided by the window size (or the count of real elements).

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.avg_pool2d(af.arange(16.0).reshape(1, 4, 4), 2).tolist()
    [[[2.5, 4.5], [10.5, 12.5]]]
    """
    x = _batched(input, 3, "avg_pool2d")._floating()
    views, (ho, wo), (sh, sw) = _windows(x, kernel_size, stride, padding, 1, ceil_mode, 0.0)
    (kh, kw), (ph, pw) = _pair(kernel_size), _pair(padding)
    total = (stack(views, -1) @ const(np.ones((len(views), 1)), x.dtype)).squeeze(-1)
    if divisor_override:
        count = np.full((ho, wo), float(divisor_override))
    else:   # torch: window clipped to the padded input; without count_include_pad, to the input
        h, w = x.shape[-2:]
        lo_h = np.arange(ho) * sh - ph
        lo_w = np.arange(wo) * sw - pw
        if count_include_pad:
            rows = np.minimum(lo_h + kh, h + ph) - lo_h
            cols = np.minimum(lo_w + kw, w + pw) - lo_w
        else:
            rows = np.minimum(lo_h + kh, h) - np.maximum(lo_h, 0)
            cols = np.minimum(lo_w + kw, w) - np.maximum(lo_w, 0)
        count = np.outer(rows, cols).astype(np.float64)
    out = total / (float(count.flat[0]) if np.all(count == count.flat[0])
                   else const(count, x.dtype))
    return out if input.ndim == 4 else out.squeeze(0)


def _flat(v) -> tuple[int, int]:
    """A 1-D pooling size as the 2-D one of a height-1 image."""
    return 1, v if isinstance(v, int) else v[0]


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """1-D max pooling over [N, C, L] (or [C, L]), as max_pool2d of a height-1 image.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.max_pool1d(af.tensor([[1.0, 3.0, 2.0, 0.0]]), 2).tolist()
    [[3.0, 2.0]]
    """
    return max_pool2d(input.unsqueeze(-2), _flat(kernel_size),
                      None if stride is None else _flat(stride), (0, _pair(padding)[0]),
                      _flat(dilation), ceil_mode, return_indices).squeeze(-2)


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """1-D average pooling over [N, C, L] (or [C, L]), as avg_pool2d of a height-1 image.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.avg_pool1d(af.tensor([[1.0, 3.0, 2.0, 0.0]]), 2).tolist()
    [[2.0, 1.0]]
    """
    return avg_pool2d(input.unsqueeze(-2), _flat(kernel_size),
                      None if stride is None else _flat(stride), (0, _pair(padding)[0]),
                      ceil_mode, count_include_pad).squeeze(-2)


def _resample(x: Tensor, matrices) -> Tensor:
    """Apply one constant [out, in] matrix per trailing spatial axis (a separable resampling:
    one matmul per axis, the wide accumulator)."""
    first = x.ndim - len(matrices)
    for axis, m in enumerate(matrices, start=first):
        moved = x.transpose(axis, -1)
        x = (moved @ const(np.ascontiguousarray(m.T), x.dtype)).transpose(axis, -1)
    return x


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Average over torch's adaptive windows [floor(i n / o), ceil((i + 1) n / o)), as one
    constant averaging matrix per axis.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.adaptive_avg_pool2d(af.arange(16.0).reshape(1, 4, 4), 1).tolist()
    [[[7.5]]]
    """
    x = _batched(input, 3, "adaptive_avg_pool2d")._floating()
    sizes = _pair(output_size) if not isinstance(output_size, (tuple, list)) else tuple(
        n if o is None else o for n, o in zip(x.shape[-2:], output_size))
    mats = []
    for n, o in zip(x.shape[-2:], sizes):
        m = np.zeros((o, n))
        for i in range(o):
            lo, hi = (i * n) // o, -(-((i + 1) * n) // o)
            m[i, lo:hi] = 1.0 / (hi - lo)
        mats.append(m)
    out = _resample(x, mats)
    return out if input.ndim == 4 else out.squeeze(0)


def _interp_matrix(n_in: int, n_out: int, mode: str, align_corners, scale) -> np.ndarray:
    """[n_out, n_in]: torch's source coordinates and weights for one axis."""
    o = np.arange(n_out, dtype=np.float64)
    ratio = 1.0 / scale if scale else n_in / n_out
    m = np.zeros((n_out, n_in))
    if mode in ("nearest", "nearest-exact"):
        src = np.floor((o + 0.5) * ratio) if mode == "nearest-exact" else np.floor(o * ratio)
        m[np.arange(n_out), np.minimum(src.astype(int), n_in - 1)] = 1.0
        return m
    if align_corners:
        src = o * ((n_in - 1) / (n_out - 1)) if n_out > 1 else o * 0
    else:
        src = np.maximum((o + 0.5) * ratio - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(int), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = src - i0
    np.add.at(m, (np.arange(n_out), i0), 1.0 - lam)
    np.add.at(m, (np.arange(n_out), i1), lam)
    return m


INTERPOLATE_MODES = {"nearest": 0, "nearest-exact": 0, "linear": 1, "bilinear": 2, "trilinear": 3}


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial axes of [N, C, ...] to `size` (or by `scale_factor`): 'nearest',
    'nearest-exact', 'linear', 'bilinear' or 'trilinear', as one constant interpolation
    matrix per axis contracted with a matmul (torch's source coordinates and weights). An
    integer input (a uint8 image) gives the same dtype back, as torch: resampled in fp32 and
    rounded once (torch's uint8 path rounds fixed-point weights per axis: linear modes may
    differ from it by 1).

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.interpolate(af.tensor([[[1.0, 2.0]]]), scale_factor=2).tolist()
    [[[1.0, 1.0, 2.0, 2.0]]]
    >>> F.interpolate(af.tensor([[[0, 255]]], dtype=af.uint8), size=3, mode="linear").tolist()
    [[[0, 128, 255]]]
    """
    if mode not in INTERPOLATE_MODES:
        raise AneforgeError(f"interpolate: mode {mode!r} is not supported; use one of "
                            f"{sorted(INTERPOLATE_MODES)}")
    if antialias:
        raise AneforgeError("interpolate: antialias is not supported")
    spatial = input.ndim - 2
    if INTERPOLATE_MODES[mode] not in (0, spatial):
        raise ShapeError(f"interpolate: mode {mode!r} needs a {INTERPOLATE_MODES[mode] + 2}-D "
                         f"input, got shape {input.shape}")
    ins = input.shape[2:]
    if size is not None:
        outs = (size,) * spatial if isinstance(size, int) else tuple(size)
        scales = (None,) * spatial
    elif scale_factor is not None:
        scales = (scale_factor,) * spatial if not isinstance(scale_factor, (tuple, list)) \
            else tuple(scale_factor)
        outs = tuple(int(np.floor(n * s)) for n, s in zip(ins, scales))
        if recompute_scale_factor:
            scales = (None,) * spatial
    else:
        raise ValueError("interpolate: give size or scale_factor")
    mats = [_interp_matrix(n, o, mode, align_corners, s) for n, o, s in zip(ins, outs, scales)]
    if input.dtype.is_float:
        return _resample(input, mats)
    # integer images (uint8) stay integer, as in torch: resampled in fp32, rounded to nearest
    return _resample(input.float(), mats).round().to(input.dtype)
