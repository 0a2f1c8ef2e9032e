"""pixel_shuffle (MIL iOS15 tensor_transformation): [N, C f^2, H, W] -> [N, C, H f, W f], as
torch's pixel_shuffle: out[n, c, h f + i, w f + j] = x[n, c f^2 + i f + j, h, w]. A move
(exact). The concat_to_pixel_shuffle pass makes it from nested interleaved concats."""
from __future__ import annotations

import numpy as np

from ._common import same_type
from ._grad import attach
from .registry import Attr, define, shape_error


def _pixel_shuffle_infer(t, attrs):
    x, f = t["x"], attrs["upscale_factor"]
    if x.rank != 4:
        raise shape_error("pixel_shuffle", t, "x must be [N, C, H, W]")
    if f < 1 or x.shape[1] % (f * f):
        raise shape_error("pixel_shuffle", t, f"channels ({x.shape[1]}) must be a multiple of "
                          f"upscale_factor**2 = {f * f} (upscale_factor >= 1)")
    n, c, h, w = x.shape
    return same_type((n, c // (f * f), h * f, w * f), x.dtype)


def _pixel_shuffle_sim(ctx, x, upscale_factor):
    f = upscale_factor
    n, c, h, w = x.shape
    y = x.reshape(n, c // (f * f), f, f, h, w).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(y).reshape(n, c // (f * f), h * f, w * f)


define("pixel_shuffle", ("x",), _pixel_shuffle_infer, _pixel_shuffle_sim,
       attrs={"upscale_factor": Attr("int")}, exact=True, layout="reorder")


def _pixel_shuffle_vjp(g, ins, attrs, out):
    """pixel_unshuffle of g, in rank <= 5 moves: [N C, H, f, W, f] -> [N C, f, f, H, W]."""
    f = attrs["upscale_factor"]
    n, c, h, w = ins["x"].shape
    gx = g.reshape(n * (c // (f * f)), h, f, w, f).permute(0, 2, 4, 1, 3)
    return {"x": gx.reshape(n, c, h, w)}


attach("pixel_shuffle", _pixel_shuffle_vjp)
