"""conv (MIL iOS15/iOS17 conv.py), 2-D only: x [N, C_in, H, W], weight [C_out, C_in/groups, kh, kw]
and the optional bias [C_out] must be constants (the engine's native conv takes constant
weights; a trainable conv is im2col + matmul, aneforge/nn/_conv.py). Graph passes fold a
following constant bias, scale or batch norm into them.

The kernel is im2col + the matmul MAC datapath (tiles of 4 lanes in im2col order, a wide sum
across tiles, the output port); the executor rounds the result once. The gradient for x is again a conv
with a constant weight: the flipped, channel-transposed kernel over the cotangent dilated by
the stride and padded by (dilated kernel - 1 - pad).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..hardware import kernels, limits
from ._common import FLOATS, require_dtype, require_same_dtype, same_type
from ._grad import attach, const, op
from .linalg import fp16_matmul, port
from .registry import Attr, define, describe, is_literal, shape_error

PAD_TYPES = ("valid", "custom", "same", "same_lower")


def paddings(pad_type, pad, size, kernel, strides, dilations) -> list[tuple[int, int]]:
    """(before, after) padding of each spatial axis, by coremltools' rules (`aggregated_pad`:
    "same" puts an odd extra row after, "same_lower" before; `pad` counts only when custom)."""
    out = []
    for i, (n, k, s, d) in enumerate(zip(size, kernel, strides, dilations)):
        dk = d * (k - 1) + 1
        if pad_type == "custom":
            out.append((int(pad[2 * i]), int(pad[2 * i + 1])))
        elif pad_type == "valid":
            out.append((0, 0))
        else:
            total = max(0, s * math.ceil(n / s) - n + dk - s)
            small, big = total // 2, total - total // 2
            out.append((small, big) if pad_type == "same" else (big, small))
    return out


def _conv_infer(t, attrs):
    require_dtype("conv", t, "x", FLOATS)
    require_same_dtype("conv", t, ("x", "weight") + (("bias",) if t.get("bias") else ()))
    x, w, b = t["x"], t["weight"], t.get("bias")
    if x.rank != 4 or w.rank != 4:
        raise shape_error("conv", t, "x must be [N, C_in, H, W] and weight "
                          "[C_out, C_in/groups, kh, kw] (2-D convolution only)")
    groups = attrs["groups"]
    strides, dilations, pad = tuple(attrs["strides"]), tuple(attrs["dilations"]), tuple(attrs["pad"])
    if attrs["pad_type"] not in PAD_TYPES:
        raise shape_error("conv", t, f"pad_type {attrs['pad_type']!r} is not one of {list(PAD_TYPES)}")
    if len(strides) != 2 or len(dilations) != 2 or min(strides + dilations) < 1:
        raise shape_error("conv", t, f"strides {strides} and dilations {dilations} need two "
                          f"values >= 1")
    if len(pad) != 4 or min(pad) < 0:
        raise shape_error("conv", t, f"pad {pad} needs (before, after) >= 0 for H and W")
    if groups < 1 or x.shape[1] % groups or w.shape[0] % groups:
        raise shape_error("conv", t, f"groups={groups} must divide C_in={x.shape[1]} and "
                          f"C_out={w.shape[0]}")
    if x.shape[1] // groups != w.shape[1]:
        raise shape_error("conv", t, f"C_in / groups = {x.shape[1]}/{groups} != weight's "
                          f"axis 1 ({w.shape[1]})")
    if b is not None and b.shape != w.shape[:1]:
        raise shape_error("conv", t, f"bias must have shape [{w.shape[0]}]")
    limits.check_kernel_width("conv", w.shape[3], describe(t))    # the target's kW cap (docs/capabilities.md)
    pads = paddings(attrs["pad_type"], pad, x.shape[2:], w.shape[2:], strides, dilations)
    out = []
    for n, k, s, d, (p0, p1) in zip(x.shape[2:], w.shape[2:], strides, dilations, pads):
        o = (n + p0 + p1 - d * (k - 1) - 1) // s + 1
        if o < 1:
            raise shape_error("conv", t, f"kernel {tuple(w.shape[2:])} (dilations {dilations}) "
                              f"does not fit the padded input {tuple(x.shape[2:])}")
        out.append(o)
    return same_type((x.shape[0], w.shape[0], *out), x.dtype)


def _padded(x: np.ndarray, pads) -> np.ndarray:
    """x [N, C, H, W] with zero rows/columns (before, after) on H and W (one allocation;
    np.pad costs ~20 us of Python per call)."""
    (p0, p1), (q0, q1) = pads
    if not (p0 or p1 or q0 or q1):
        return x
    n, c, h, w = x.shape
    xp = np.zeros((n, c, h + p0 + p1, w + q0 + q1), x.dtype)
    xp[:, :, p0:p0 + h, q0:q0 + w] = x
    return xp


def im2col(xp: np.ndarray, kernel, strides, dilations, groups: int) -> tuple:
    """The padded input as columns [N, groups, C/groups * kh * kw, Ho * Wo] (im2col order: c,
    then kh, then kw), copied once from a strided view; and (Ho, Wo)."""
    n, c, h, w = xp.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel, strides, dilations
    ho, wo = (h - dh * (kh - 1) - 1) // sh + 1, (w - dw * (kw - 1) - 1) // sw + 1
    xp = np.ascontiguousarray(xp)
    s = xp.strides        # a view made by np.ndarray over the buffer: as_strided costs ~10 us
    view = np.ndarray((n, c, kh, kw, ho, wo), xp.dtype, xp, 0,
                      (s[0], s[1], dh * s[2], dw * s[3], sh * s[2], sw * s[3]))
    return view.reshape(n, groups, c // groups * kh * kw, ho * wo), (ho, wo)


def _conv_sim(ctx, x, weight, bias, strides, pad_type, pad, dilations, groups):
    n, _, h, w = x.shape
    co, cg, kh, kw = weight.shape
    xp = _padded(x, paddings(pad_type, pad, (h, w), (kh, kw), strides, dilations))
    cols, out_hw = im2col(xp, (kh, kw), strides, dilations, groups)
    wm = weight.reshape(groups, co // groups, cg * kh * kw)[None]
    fp16 = ctx.in_dtypes[0] == dtypes.float16
    acc = fp16_matmul(ctx.numerics, wm, cols) if fp16 else kernels.blas_matmul(wm, cols)
    acc = acc.reshape(n, co, *out_hw)
    if bias is not None:
        acc += bias.reshape(1, co, 1, 1)        # in place: acc is the matmul's fresh output
    return port(ctx, acc) if fp16 else acc


define("conv", ("x", "weight", "bias"), _conv_infer, _conv_sim,
       attrs={"strides": Attr("ints", (1, 1)), "pad_type": Attr("str", "valid"),
              "pad": Attr("ints", (0, 0, 0, 0)), "dilations": Attr("ints", (1, 1)),
              "groups": Attr("int", 1)},
       optional=frozenset({"bias"}), const_inputs=frozenset({"weight", "bias"}))


# ---- gradient rule (weight and bias are constants: only x gets a cotangent) ----------------
def const_array(t) -> np.ndarray:
    """The value of a const Tensor (its recorded literal, or its data once realized)."""
    node = t._node
    return node.attrs["val"] if is_literal(node.op) else t.numpy()


def transposed_weight(w: np.ndarray, groups: int) -> np.ndarray:
    """[C_out, C_in/g, kh, kw] -> [C_in, C_out/g, kh, kw], spatially flipped, group by group:
    the kernel of the input gradient."""
    co, cg, kh, kw = w.shape
    wg = w.reshape(groups, co // groups, cg, kh, kw).transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(wg.reshape(groups * cg, co // groups, kh, kw)[:, :, ::-1, ::-1])


def _dilate(g, axis: int, s: int):
    """Insert s - 1 zeros between the elements of g along `axis` (2 or 3), by a pad of a
    new axis and a reshape (rank <= 5)."""
    if s == 1:
        return g
    shape = list(g.shape)
    n = shape[axis]
    g = g.reshape(*shape[:axis + 1], 1, *shape[axis + 1:])
    g = op("pad", {"x": g}, pad=(0, s - 1) + (0, 0) * (3 - axis), mode="constant")
    g = g.reshape(*shape[:axis], n * s, *shape[axis + 1:])
    return g.narrow(axis, 0, (n - 1) * s + 1)


def _conv_vjp(g, ins, attrs, out):
    x, w = ins["x"], const_array(ins["weight"])
    _, _, h, wd = x.shape
    kernel, strides, dilations = w.shape[2:], attrs["strides"], attrs["dilations"]
    pads = paddings(attrs["pad_type"], attrs["pad"], (h, wd), kernel, strides, dilations)
    for axis in (2, 3):
        g = _dilate(g, axis, strides[axis - 2])
    # full correlation: pad by dk - 1 - p before; after, also the input rows no output read
    widths = []
    for axis, (n, k, d, (p0, p1)) in enumerate(zip((h, wd), kernel, dilations, pads), 2):
        dk = d * (k - 1) + 1
        before, after = dk - 1 - p0, n + p0 - g.shape[axis]      # after: so that H_out = n
        if before < 0:
            g, before = g.narrow(axis, -before, g.shape[axis] + before), 0
        if after < 0:
            g, after = g.narrow(axis, 0, g.shape[axis] + after), 0
        widths += [before, after]
    wt = const(transposed_weight(w, attrs["groups"]), x)
    gx = op("conv", {"x": g, "weight": wt}, pad_type="custom", pad=tuple(widths),
            dilations=tuple(dilations), groups=attrs["groups"])
    return {"x": gx}


attach("conv", _conv_vjp)
