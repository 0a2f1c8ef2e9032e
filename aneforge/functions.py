"""torch-named functions over tensors, the torch.X surface: af.cat, af.where, af.exp, ...

Written here: the functions whose home is this module (cat, stack, where) and adapters for
torch's top-level signatures of nn.functional names (torch.embedding(weight, indices), ...).
Generated from the table in aneforge/_api.py: af.X for every Tensor method torch also spells
as torch.X, forwarding to the method, and __all__.
"""
from __future__ import annotations

import builtins
import math


from .errors import AneforgeError
from .tensor import Tensor
from .tensor.elementwise import where
from .tensor.movement import cat, concat, concatenate, stack
from .tensor.args import _dim_or_axis
from .tensor.reduce import var_mean as _var_mean


def meshgrid(*tensors, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids from 1-D tensors: 'ij' (matrix, torch's default) or 'xy' (Cartesian:
    the first two axes swapped). Each grid is a reshape and an expand (MIL tile).

    >>> import aneforge as af
    >>> [g.tolist() for g in af.meshgrid(af.tensor([1, 2]), af.tensor([3, 4, 5]))][1]
    [[3, 4, 5], [3, 4, 5]]
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = [t.reshape(-1) for t in tensors]
    if indexing == "xy" and len(ts) > 1:
        ts[0], ts[1] = ts[1], ts[0]
    sizes = tuple(t.shape[0] for t in ts)
    grids = [t.reshape(tuple(-1 if i == k else 1 for i in range(len(ts)))).expand(sizes)
             for k, t in enumerate(ts)]
    if indexing == "xy" and len(ts) > 1:          # each grid belongs to its own tensor again
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation, contracted pairwise left to right: each pair as one batched matmul
    (indices in both operands and the output: batch; in both only: summed by the matmul;
    in one only: rows or columns), indices of one operand alone summed first. `...` stands for
    the broadcast axes (aligned from the right; size-1 axes expand), and an index repeated in
    one term takes that operand's diagonal ('ii->i', 'ii->' is the trace).

    >>> import aneforge as af
    >>> af.einsum("ij,jk->ik", af.ones(2, 3), af.ones(3, 4)).tolist()[0]
    [3.0, 3.0, 3.0, 3.0]
    >>> af.einsum("ii", af.tensor([[1.0, 2.0], [3.0, 4.0]])).item()
    5.0
    >>> af.einsum("...ij,...jk->...ik", af.ones(5, 2, 3), af.ones(3, 4)).shape
    (5, 2, 4)
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    lhs, out = eq.split("->") if "->" in eq else (eq, None)
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise AneforgeError(f"einsum: {len(terms)} terms in {equation!r} for {len(operands)} "
                            f"operands")
    terms, out, ell = _expand_ellipsis(eq, terms, out, operands)
    if out is None:
        counts = {c: "".join(terms).count(c) for c in set("".join(terms))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    pairs = [_diagonals(t, x) for t, x in zip(terms, operands)]
    terms, operands = [t for t, _ in pairs], _broadcast(pairs)
    cur_t, cur = terms[0], operands[0]
    for i in range(1, len(terms)):
        keep = set(out).union(*terms[i + 1:])
        cur_t, cur = _contract(cur_t, cur, terms[i], operands[i], keep)
    cur_t, cur = _sum_only(cur_t, cur, set(out))
    return cur.permute([cur_t.index(c) for c in out]) if cur_t else cur


def _expand_ellipsis(eq: str, terms: list, out, operands):
    """Terms with `...` replaced by letters the equation does not use, one per broadcast axis
    (aligned from the right, as torch); the output's `...`, and those letters in order."""
    for t, x in zip(terms, operands):
        if t.count("...") > 1:
            raise AneforgeError(f"einsum: term {t!r} has more than one ellipsis; torch allows "
                                f"one `...` per operand")
        named = len(t.replace("...", ""))
        if ("..." in t and named > x.ndim) or ("..." not in t and named != x.ndim) or \
                t.count(".") not in (0, 3):
            raise AneforgeError(f"einsum: term {t!r} does not fit a {x.ndim}-D operand (one "
                                f"letter per axis, or `...` for the rest)")
    width = builtins.max((x.ndim - len(t) + 3 for t, x in zip(terms, operands) if "..." in t),
                         default=0)
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq][:width]
    ell = "".join(free)
    terms = [t.replace("...", ell[width - (x.ndim - len(t) + 3):]) if "..." in t else t
             for t, x in zip(terms, operands)]
    return terms, (out.replace("...", ell) if out is not None else None), ell


def _diagonals(t: str, x: Tensor) -> tuple[str, Tensor]:
    """A term without repeated indices: each repeated index takes x's diagonal over its two
    axes (the diagonal becomes the last axis, as Tensor.diagonal puts it)."""
    while len(set(t)) != len(t):
        c = next(c for c in t if t.count(c) > 1)
        i, j = t.index(c), t.index(c, t.index(c) + 1)
        x = x.diagonal(0, i, j)
        t = t[:i] + t[i + 1:j] + t[j + 1:] + c
    return t, x


def _broadcast(pairs) -> list:
    """Operands with their size-1 axes expanded to the size the index has elsewhere."""
    size = {}
    for t, x in pairs:
        for c, n in zip(t, x.shape):
            if n != 1 and size.setdefault(c, n) != n:
                raise AneforgeError(f"einsum: index {c!r} has sizes {size[c]} and {n}")
    return [x.expand(tuple(size.get(c, n) for c, n in zip(t, x.shape)))
            if builtins.any(n == 1 and size.get(c, 1) != 1 for c, n in zip(t, x.shape)) else x
            for t, x in pairs]


def _sum_only(t: str, x: Tensor, keep: set) -> tuple[str, Tensor]:
    gone = [i for i, c in enumerate(t) if c not in keep]
    if not gone:
        return t, x
    return "".join(c for c in t if c in keep), x.sum(tuple(gone))


def _contract(ta: str, a: Tensor, tb: str, b: Tensor, keep: set) -> tuple[str, Tensor]:
    ta, a = _sum_only(ta, a, keep | set(tb))
    tb, b = _sum_only(tb, b, keep | set(ta))
    batch = [c for c in ta if c in tb and c in keep]
    summed = [c for c in ta if c in tb and c not in keep]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]
    size = {**dict(zip(tb, b.shape)), **dict(zip(ta, a.shape))}
    n = lambda cs: math.prod([size[c] for c in cs])     # noqa: E731
    a = a.permute([ta.index(c) for c in batch + left + summed]).reshape(n(batch), n(left), n(summed))
    b = b.permute([tb.index(c) for c in batch + summed + right]).reshape(n(batch), n(summed), n(right))
    out = (a @ b).reshape(tuple(size[c] for c in batch + left + right))
    return "".join(batch + left + right), out


def var_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,
             correction=None, axis=None) -> tuple[Tensor, Tensor]:
    """(variance, mean) over `dim`, as torch.var_mean: one mean serves both (two passes through
    the engine's wide matmul accumulator when the reduced length calls for it). torch's
    overloads: `var_mean(x, unbiased)`, `var_mean(x, dim, unbiased, keepdim)` and
    `var_mean(x, dim, correction=..., keepdim=...)`.

    >>> import aneforge as af
    >>> v, m = af.var_mean(af.tensor([1.0, 2.0, 3.0, 4.0]))
    >>> v.item(), m.item()
    (1.666..., 2.5)
    """
    if isinstance(dim, bool):                     # var_mean(x, unbiased)
        dim, unbiased = None, dim
    dim = _dim_or_axis(dim, axis, "var_mean")
    if unbiased is not None and correction is not None:
        raise AneforgeError("var_mean: pass either unbiased or correction, not both")
    c = int(unbiased) if unbiased is not None else 1 if correction is None else correction
    return _var_mean(input._floating(), dim, keepdim, c)


def std_mean(input: Tensor, dim=None, unbiased=None, keepdim: bool = False, *,
             correction=None, axis=None) -> tuple[Tensor, Tensor]:
    """(standard deviation, mean) over `dim`, as torch.std_mean (see var_mean).

    >>> import aneforge as af
    >>> s, m = af.std_mean(af.tensor([1.0, 3.0]))
    >>> s.item(), m.item()
    (1.4140625, 2.0)
    """
    v, m = var_mean(input, dim, unbiased, keepdim, correction=correction, axis=axis)
    return v.sqrt(), m


# ---- af.X of the Tensor methods ---------------------------------------------------------------
# ---- generated by `python -m aneforge._api` from its TABLE, do not edit: forwarders ----
from .forwarders import (
    abs, acos, acosh, add, addcdiv, addcmul, addmm, all, allclose, amax, amin, any, argmax, argmin,
    argsort, argwhere, asin, asinh, atan, atanh, bernoulli, bitwise_and, bitwise_left_shift,
    bitwise_not, bitwise_or, bitwise_right_shift, bitwise_xor, bmm, ceil, chunk, clamp, clamp_,
    clamp_max, clamp_min, clip, clone, copysign, cos, cosh, count_nonzero, cummax, cummin, cumprod,
    cumsum, detach, diag, diagonal, div, eq, erf, exp, exp2, expm1, fill_, flatten, flip, floor,
    floor_divide, fmod, gather, ge, gt, index_put, index_put_, index_select, isclose, isfinite,
    isinf, isnan, le, lerp, log, log10, log1p, log2, log_softmax, logaddexp, logaddexp2,
    logcumsumexp, logical_and, logical_not, logical_or, logical_xor, logsumexp, lt, masked_fill,
    masked_scatter, masked_select, matmul, max, maximum, mean, min, minimum, mm, movedim, mul,
    multinomial, multiply, nan_to_num, narrow, ne, neg, negative, nonzero, norm, numel, outer,
    permute, pow, prod, reciprocal, relu, remainder, repeat_interleave, reshape, roll, round, rsqrt,
    scatter, scatter_add, scatter_reduce, select, sigmoid, sign, sin, sinh, softmax, sort, split,
    sqrt, square, squeeze, std, sub, subtract, sum, swapaxes, t, tan, tanh, tile, topk, transpose,
    tril, triu, true_divide, trunc, unbind, unflatten, unique, unsqueeze, var, zero_)
# ---- end of generated block: forwarders ----


# ---- generated by `python -m aneforge._api` from its TABLE, do not edit: __all__ ----
__all__ = [
    "abs", "acos", "acosh", "add", "addcdiv", "addcmul", "addmm", "all", "allclose", "amax", "amin",
    "any", "argmax", "argmin", "argsort", "argwhere", "asin", "asinh", "atan", "atanh", "bernoulli",
    "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift",
    "bitwise_xor", "bmm", "cat", "ceil", "chunk", "clamp", "clamp_", "clamp_max", "clamp_min",
    "clip", "clone", "concat", "concatenate", "copysign", "cos", "cosh", "count_nonzero", "cummax",
    "cummin", "cumprod", "cumsum", "detach", "diag", "diagonal", "div", "einsum", "eq", "erf",
    "exp", "exp2", "expm1", "fill_", "flatten", "flip", "floor", "floor_divide", "fmod", "gather",
    "ge", "gt", "index_put", "index_put_", "index_select", "isclose", "isfinite", "isinf", "isnan",
    "le", "lerp", "log", "log10", "log1p", "log2", "log_softmax", "logaddexp", "logaddexp2",
    "logcumsumexp", "logical_and", "logical_not", "logical_or", "logical_xor", "logsumexp", "lt",
    "masked_fill", "masked_scatter", "masked_select", "matmul", "max", "maximum", "mean",
    "meshgrid", "min", "minimum", "mm", "movedim", "mul", "multinomial", "multiply", "nan_to_num",
    "narrow", "ne", "neg", "negative", "nonzero", "norm", "numel", "outer", "permute", "pow",
    "prod", "reciprocal", "relu", "remainder", "repeat_interleave", "reshape", "roll", "round",
    "rsqrt", "scatter", "scatter_add", "scatter_reduce", "select", "sigmoid", "sign", "sin", "sinh",
    "softmax", "sort", "split", "sqrt", "square", "squeeze", "stack", "std", "std_mean", "sub",
    "subtract", "sum", "swapaxes", "t", "tan", "tanh", "tile", "topk", "transpose", "tril", "triu",
    "true_divide", "trunc", "unbind", "unflatten", "unique", "unsqueeze", "var", "var_mean",
    "where", "zero_"]
# ---- end of generated block: __all__ ----
