"""matmul and linear: fp16 operands through the ANE's MAC datapath (tiles of 4 products summed
by a 12-bit truncating adder, a wide fp32 sum across tiles), then the output port (saturation
at 2**15, subnormal flush on M1), then the fp16 store (sbryngelson/ane-guide,
part-6-silicon/20-datapath-mac.md and part-1-machine/03-numerics.md). The kernels live in
aneforge/hardware/kernels."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..hardware import hazards, kernels, limits
from ._common import FLOATS, broadcast, require_dtype, require_same_dtype, same_type
from ._grad import attach, op
from .registry import Attr, define, is_literal, shape_error
from ..ir.types import TensorType

def _matmul_shape(op, t, xs, ys, tx, ty):
    if len(xs) < 2 or len(ys) < 2:
        raise shape_error(op, t, "MIL matmul operands need rank >= 2 here (Core ML types rank-1 "
                          "operands inconsistently); Tensor.matmul lifts 1-D operands for you")
    xs = xs[:-2] + (xs[-1], xs[-2]) if tx and len(xs) > 1 else xs
    ys = ys[:-2] + (ys[-1], ys[-2]) if ty and len(ys) > 1 else ys
    kx, ky = xs[-1], (ys[-2] if len(ys) > 1 else ys[0])
    if kx != ky:
        raise shape_error(op, t, f"contraction sizes differ: x has {kx}, y has {ky}")
    batch = broadcast(op, {"x": TensorType(xs[:-2], t["x"].dtype),
                           "y": TensorType(ys[:-2], t["y"].dtype)}, ("x", "y"))
    return batch + xs[-2:-1] + ys[-1:] if len(ys) > 1 else batch + xs[-2:-1]


def _matmul_infer(t, attrs):
    require_same_dtype("matmul", t, ("x", "y"))
    require_dtype("matmul", t, "x", FLOATS)
    shape = _matmul_shape("matmul", t, t["x"].shape, t["y"].shape,
                          attrs["transpose_x"], attrs["transpose_y"])
    return same_type(shape, t["x"].dtype)


def fp16_matmul(nm, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x @ y of fp16 values through the ANE's MAC datapath; returns the wide (fp32) accumulator
    before the output port.

    `accumulator="tile4"` (the default): lanes in tiles of 4, each tile summed by a 12-bit
    truncating adder, an fp32 sum across tiles that saturates to +-inf at `matmul_overflow`
    (measured on M1, sbryngelson/ane-guide part-6-silicon/20-datapath-mac.md; docs/numerics.md
    has the model). `"per_product"`: each product rounded to fp16, an fp32 sum in order over K (the
    simulator's earlier model); `"blas"`: fp32 BLAS."""
    if nm.accumulator == "blas":
        return kernels.blas_matmul(x, y)
    vx, vy = x.ndim == 1, y.ndim == 1
    x = x[None, :] if vx else x
    y = y[:, None] if vy else y
    if nm.accumulator == "tile4":
        limit = np.inf if nm.matmul_overflow is None else nm.matmul_overflow
        acc = kernels.tile_matmul(x, y, nm.mode, nm.tile_mode, limit)
    else:
        acc = kernels.matmul(x, y, nm.mode)
    acc = acc[..., 0, :] if vx else acc
    return acc[..., 0] if vy else acc


def port(ctx, acc: np.ndarray) -> np.ndarray:
    """The output port of matmul/linear/conv, applied in place to `acc` (a fresh array): |y| >=
    matmul_overflow reads back as +-inf (the fp16 store saturates at 2**15: 32752 passes,
    32768 is inf, sbryngelson/ane-guide part-1-machine/03-numerics.md), reported as a hazard;
    results below 2**-14 become +0 where the target flushes them (M1). The executor then
    rounds to fp16."""
    nm = ctx.numerics
    _saturated(ctx, kernels.port(acc, nm.matmul_overflow, nm.matmul_subnormals == "flush"))
    return acc


def _saturated(ctx, big: int) -> None:
    if big:
        hazards.report(ctx, f"{big} output value(s) rounded to |y| >= 2**15 (32752 is the largest "
                       f"that passes) and read back as +-inf: the matmul output port saturates",
                       saturated=True)


def _matmul_sim(ctx, x, y, transpose_x, transpose_y):
    x = np.swapaxes(x, -1, -2) if transpose_x and x.ndim > 1 else x
    y = np.swapaxes(y, -1, -2) if transpose_y and y.ndim > 1 else y
    if ctx.in_dtypes[0] != dtypes.float16:
        return kernels.blas_matmul(x, y)
    return port(ctx, fp16_matmul(ctx.numerics, x, y))


def _bound(ctx, out, x, y, bias=None):
    """x @ y (+ bias), the output port and the fp16 store, into `out`, as a function of no
    arguments (the run plan's matmul over its places: `OpDef.bind`); None where the kernel is
    not the compiled tile datapath on fp16 matrices."""
    nm = ctx.numerics
    if ctx.in_dtypes[0] != dtypes.float16 or nm.accumulator != "tile4" or min(x.ndim, y.ndim) < 2:
        return None
    limit = np.inf if nm.matmul_overflow is None else nm.matmul_overflow
    tile = kernels.tile_bound(x, y, out, nm.mode, nm.tile_mode, limit)
    # the bias as `_linear_sim` adds it (into the accumulator), the port, then the store
    finish = kernels.port_bound(out, bias, nm.matmul_overflow, nm.matmul_subnormals == "flush",
                                nm.store_mode)
    if tile is None or finish is None:
        return None

    def run():
        tile()
        big = finish()
        if big:
            _saturated(ctx, big)
    return run


def _matmul_bind(ctx, out, x, y, transpose_x, transpose_y):
    return _bound(ctx, out, np.swapaxes(x, -1, -2) if transpose_x and x.ndim > 1 else x,
                  np.swapaxes(y, -1, -2) if transpose_y and y.ndim > 1 else y)


define("matmul", ("x", "y"), _matmul_infer, _matmul_sim,
       attrs={"transpose_x": Attr("bool", False), "transpose_y": Attr("bool", False)},
       bind=_matmul_bind)


def _linear_infer(t, attrs):
    require_dtype("linear", t, "x", FLOATS)
    require_same_dtype("linear", t, ("x", "weight"))
    w = t["weight"].shape
    if len(w) != 2:
        raise shape_error("linear", t, "weight must be 2-D [out_features, in_features]")
    if t["x"].shape[-1:] != w[1:]:
        raise shape_error("linear", t, f"x's last axis must equal in_features={w[1]}")
    b = t.get("bias")
    if b is not None and b.shape != w[:1]:
        raise shape_error("linear", t, f"bias must have shape [{w[0]}]")
    return same_type(t["x"].shape[:-1] + w[:1], t["x"].dtype)


def _linear_sim(ctx, x, weight, bias):
    fp16 = ctx.in_dtypes[0] == dtypes.float16
    if not fp16:
        acc = kernels.blas_matmul(x, weight.T)
        return acc if bias is None else acc + bias
    acc = fp16_matmul(ctx.numerics, x, weight.T)
    if bias is not None:
        acc += bias             # in place: acc is the kernel's fresh float32 output
    return port(ctx, acc)


define("linear", ("x", "weight", "bias"), _linear_infer, _linear_sim, optional=frozenset({"bias"}),
       const_inputs=frozenset({"weight", "bias"}),
       bind=lambda ctx, out, x, weight, bias: _bound(ctx, out, x, weight.T, bias))


# ---- gradient rules ----------------------------------------------------------------------
def _uniform(t) -> float | None:
    """The value of a constant whose entries are all equal (a reduction's column), else None."""
    node = t.ref[0]
    if not is_literal(node.op):
        return None
    val = np.asarray(node.attrs["val"])
    return float(val.flat[0]) if val.size and (val == val.flat[0]).all() else None


def _matmul_vjp(g, ins, attrs, out):
    """out = X' @ Y' with X' = x^T if transpose_x, Y' = y^T if transpose_y.

    A sum written as x @ column(v) (aneforge.tensor.reduce) has the cotangent g * v broadcast over
    the column's length: recorded as that elementwise product, not the outer-product matmul,
    whose outputs (g / K for a mean) fall below 2**-14 for long reductions and are flushed to
    zero by the matmul output port on M1 (ane-guide datapath chapter); elementwise ops keep them.
    """
    x, y, tx, ty = ins["x"], ins["y"], attrs["transpose_x"], attrs["transpose_y"]
    vy, vx = _uniform(y), _uniform(x)
    if vy is not None and not (tx or ty) and y.shape[-1] == 1:
        gx = (g * vy).expand(x.shape)
    else:
        gx = (op("matmul", {"x": y, "y": g}, transpose_x=ty, transpose_y=True) if tx else
              op("matmul", {"x": g, "y": y}, transpose_y=not ty))
    if vx is not None and not (tx or ty) and x.shape[-2] == 1 and x.ndim == 2:
        gy = (g * vx).expand(y.shape)
    elif y.ndim == 2 and x.ndim > 2 and not tx:      # a matrix shared by x's batch
        gy = _over_rows(g, x) if ty else _over_rows(x, g)
    else:
        gy = (op("matmul", {"x": g, "y": x}, transpose_x=True, transpose_y=tx) if ty else
              op("matmul", {"x": x, "y": g}, transpose_x=not tx))
    return {"x": gx, "y": gy}


def _foldable(t) -> bool:
    """Whether t's leading axes fold into one axis of rows on the ANE."""
    return t.ndim == 2 or int(np.prod(t.shape[:-1])) <= limits.axis_bound()


def _over_rows(a, b):
    """a^T @ b over every row of the batch ([..., m] and [..., n] -> [m, n]): the gradient of a
    matrix shared by a batch (a linear layer on [batch, tokens, features]). One matmul over all
    rows, as torch folds the batch into the rows, not one per batch entry summed after (each
    entry's K would be a few rows, its fp16 result summed in fp16); one per leading entry,
    summed, only where the folded rows would pass the ANE's per-axis bound."""
    if _foldable(a):
        return op("matmul", {"x": a.reshape(-1, a.shape[-1]), "y": b.reshape(-1, b.shape[-1])},
                  transpose_x=True)
    each = op("matmul", {"x": a, "y": b}, transpose_x=True)
    return each.sum(tuple(range(each.ndim - 2)))


def _linear_vjp(g, ins, attrs, out):
    x, w = ins["x"], ins["weight"]
    grads = {"x": g @ w, "weight": _over_rows(g, x)}
    if "bias" in ins:
        grads["bias"] = (g.reshape(-1, g.shape[-1]).sum(0) if _foldable(g) else
                         g.sum(tuple(range(g.ndim - 1))))
    return grads


attach("matmul", _matmul_vjp)
attach("linear", _linear_vjp)
