"""conv2d as im2col + matmul.

The ANE's native conv needs a constant weight (ANEForge `docs/op-catalog.md`); a trainable
conv instead gathers the kh*kw shifted views of the padded input with slices, stacks them
(rank 5 at most: [N, C, kh*kw, Ho, Wo]) and contracts them with the weight in one matmul per
group. Zero padding is one constant `pad` op (never a multiply by zero). On
pre-A16 engines a width-offset slice saturates |v| > 4094 (ANEForge `docs/numeric-cliffs.md`): keep activations in range.
"""
from __future__ import annotations

from ..errors import ShapeError
from ..hardware import limits
from ..tensor.movement import cat, stack


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _pad(x, ph: int, pw: int):
    """Zeros around the last two axes: one constant pad (MIL pad, an exact data movement)."""
    if not (ph or pw):
        return x
    return x._record("pad", {"x": x}, {"pad": (ph, ph, pw, pw), "mode": "constant",
                                        "constant_val": 0.0})


def columns(x, kernel, stride, padding, dilation, name: str):
    """The kh*kw shifted views of [N, C, H, W] (zero-padded), stacked: ([N, C, kh*kw, Ho, Wo],
    Ho, Wo), im2col's columns."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = map(_pair, (kernel, stride, padding, dilation))
    h, w = x.shape[2:]
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if ho < 1 or wo < 1:
        raise ShapeError(f"{name}: kernel {kh}x{kw} does not fit input {h}x{w} with padding "
                         f"{(ph, pw)} and dilation {(dh, dw)}")
    xp = _pad(x, ph, pw)
    views = [xp[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw]
             for i in range(kh) for j in range(kw)]
    return (stack(views, 2) if len(views) > 1 else views[0].unsqueeze(2)), ho, wo


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    unbatched = x.ndim == 3
    x = x.unsqueeze(0) if unbatched else x
    if x.ndim != 4 or weight.ndim != 4:
        raise ShapeError(f"conv2d: input must be [N, C, H, W] and weight [Cout, Cin/groups, kh, kw]; "
                         f"got {x.shape} and {weight.shape}")
    n, c = x.shape[:2]
    cout, cin_g, kh, kw = weight.shape
    if c != cin_g * groups:
        raise ShapeError(f"conv2d: input has {c} channels, weight expects {cin_g * groups} "
                         f"({cin_g} per group x {groups} groups)")
    cols, ho, wo = columns(x, (kh, kw), stride, padding, dilation, "conv2d")
    # Ho*Wo flattened is one axis of the matmul: past the axis limit the output rows are
    # computed in bands of at most `rows` (a legal Ho*Wo each) and joined (exact: each output
    # element is the same contraction)
    rows = max(1, limits.axis_bound() // wo)
    bands = [_band(cols[:, :, :, r:r + rows], weight, groups) for r in range(0, ho, rows)]
    out = (cat(bands, 2) if len(bands) > 1 else bands[0])
    if bias is not None:
        out = out + bias.reshape(cout, 1, 1)
    return out.squeeze(0) if unbatched else out


def _band(cols, weight, groups: int):
    """conv2d of im2col columns [N, C, kh*kw, Ho, Wo]: one matmul per group -> [N, Cout, Ho, Wo]."""
    n, c, taps, ho, wo = cols.shape
    cout, cin_g = weight.shape[:2]
    outs = []
    for g in range(groups):
        cg = cols[:, g * cin_g:(g + 1) * cin_g] if groups > 1 else cols
        cg = cg.reshape(n, cin_g * taps, ho * wo)
        wg = weight[g * (cout // groups):(g + 1) * (cout // groups)] if groups > 1 else weight
        outs.append(wg.reshape(cout // groups, cin_g * taps) @ cg)         # [N, Cout/g, Ho*Wo]
    return (cat(outs, 1) if groups > 1 else outs[0]).reshape(n, cout, ho, wo)
