"""pad (MIL iOS15 tensor_operation): constant, reflect or replicate padding of the last N axes.

`pad` lists (before, after) for each of the last len(pad) // 2 axes, as MIL orders it. The
graph passes make it from the zero-concats that conv padding records (ANE-safe zeros x - x) and
from slice-and-concat reflections."""
from __future__ import annotations

import numpy as np

from ._common import FLOATS, require_dtype, same_type
from ._grad import attach, const, op
from .registry import Attr, define, shape_error

MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge"}   # -> numpy's


def widths(rank: int, pad) -> list[tuple[int, int]]:
    """(before, after) for every axis of a rank-`rank` tensor."""
    pairs = [(int(pad[2 * i]), int(pad[2 * i + 1])) for i in range(len(pad) // 2)]
    return [(0, 0)] * (rank - len(pairs)) + pairs


def _pad_infer(t, attrs):
    require_dtype("pad", t, "x", FLOATS)
    x, pad, mode = t["x"], tuple(attrs["pad"]), attrs["mode"]
    if mode not in MODES:
        raise shape_error("pad", t, f"mode {mode!r} is not one of {sorted(MODES)}")
    if len(pad) % 2 or len(pad) > 2 * x.rank or any(p < 0 for p in pad):
        raise shape_error("pad", t, f"pad {pad} needs (before, after) >= 0 pairs for at most "
                          f"{x.rank} trailing axes")
    limit = {"reflect": 1, "replicate": 0}.get(mode)
    for n, (b, e) in zip(x.shape, widths(x.rank, pad)):
        if limit is not None and max(b, e) > n - limit:
            raise shape_error("pad", t, f"{mode} padding of an axis of size {n} is at most "
                              f"{n - limit} per side")
    return same_type([n + b + e for n, (b, e) in zip(x.shape, widths(x.rank, pad))], x.dtype)


def _pad_sim(ctx, x, pad, mode, constant_val):
    w = widths(x.ndim, pad)
    if mode != "constant":
        return np.pad(x, w, mode=MODES[mode])
    out = np.empty([n + b + e for n, (b, e) in zip(x.shape, w)],
                   dtype=x.dtype if x.dtype.kind == "f" else np.float32)
    _pad_into(ctx, out, x, pad, mode, constant_val)
    return out


def _pad_into(ctx, out, x, pad, mode, constant_val):
    """The constant mode by hand (np.pad's Python takes twice as long on a conv's
    activations): the borders, slab by slab, then the input into the middle."""
    if mode != "constant":
        np.copyto(out, _pad_sim(ctx, x, pad, mode, constant_val))
        return
    w = widths(x.ndim, pad)
    fill = np.float32(constant_val)
    for axis, (b, e) in enumerate(w):
        lead = (slice(None),) * axis
        if b:
            out[lead + (slice(0, b),)] = fill
        if e:
            out[lead + (slice(out.shape[axis] - e, None),)] = fill
    out[tuple(slice(b, b + n) for n, (b, _) in zip(x.shape, w))] = x


define("pad", ("x",), _pad_infer, _pad_sim, exact=True, layout="assemble",
       attrs={"pad": Attr("ints"), "mode": Attr("str", "constant"),
              "constant_val": Attr("scalar", 0.0)}, into=_pad_into,
       alters=lambda ctx, attrs: attrs["mode"] != "constant", fill="constant_val")


def _pad_vjp(g, ins, attrs, out):
    """Constant: the middle of g. Reflect / replicate: each padded axis is a linear map of the
    input along it, x -> M x with M a 0/1 matrix, so its cotangent is M^T g (a matmul with a
    constant, axis by axis)."""
    x = ins["x"]
    for axis, (b, e) in enumerate(widths(x.ndim, attrs["pad"])):
        if not b and not e:
            continue
        n = x.shape[axis]
        if attrs["mode"] == "constant":
            g = g.narrow(axis, b, n)
            continue
        m = np.zeros((n + b + e, n), np.float16)
        idx = np.pad(np.arange(n), (b, e), mode=MODES[attrs["mode"]])
        m[np.arange(n + b + e), idx] = 1
        moved = g.transpose(axis, -1)
        g = op("matmul", {"x": moved, "y": const(m, g)}).transpose(axis, -1)
    return {"x": g}


attach("pad", _pad_vjp)
