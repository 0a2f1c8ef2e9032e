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
def abs(input: Tensor):
    """torch.abs: `input.abs()`; see Tensor.abs."""
    return input.abs()


def acos(input: Tensor) -> Tensor:
    """torch.acos: `input.acos()`; see Tensor.acos."""
    return input.acos()


def acosh(input: Tensor) -> Tensor:
    """torch.acosh: `input.acosh()`; see Tensor.acosh."""
    return input.acosh()


def add(input: Tensor, other, alpha=1):
    """torch.add: `input.add(other, alpha)`; see Tensor.add.

    >>> import aneforge as af
    >>> af.add(af.tensor([1.0, 2.0]), 1.0, alpha=2).tolist()
    [3.0, 4.0]
    """
    return input.add(other, alpha)


def addcdiv(input: Tensor, tensor1, tensor2, *, value=1) -> Tensor:
    """torch.addcdiv: `input.addcdiv(tensor1, tensor2, value=value)`; see Tensor.addcdiv."""
    return input.addcdiv(tensor1, tensor2, value=value)


def addcmul(input: Tensor, tensor1, tensor2, *, value=1) -> Tensor:
    """torch.addcmul: `input.addcmul(tensor1, tensor2, value=value)`; see Tensor.addcmul."""
    return input.addcmul(tensor1, tensor2, value=value)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """torch.addmm: `input.addmm(mat1, mat2, beta=beta, alpha=alpha)`; see Tensor.addmm."""
    return input.addmm(mat1, mat2, beta=beta, alpha=alpha)


def all(input: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """torch.all: `input.all(dim, keepdim, axis=axis)`; see Tensor.all.

    >>> import aneforge as af
    >>> af.all(af.tensor([True, False])).item()
    False
    """
    return input.all(dim, keepdim, axis=axis)


def allclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """torch.allclose: `input.allclose(other, rtol, atol, equal_nan)`; see Tensor.allclose."""
    return input.allclose(other, rtol, atol, equal_nan)


def amax(input: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """torch.amax: `input.amax(dim, keepdim, axis=axis)`; see Tensor.amax."""
    return input.amax(dim, keepdim, axis=axis)


def amin(input: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """torch.amin: `input.amin(dim, keepdim, axis=axis)`; see Tensor.amin."""
    return input.amin(dim, keepdim, axis=axis)


def any(input: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """torch.any: `input.any(dim, keepdim, axis=axis)`; see Tensor.any.

    >>> import aneforge as af
    >>> af.any(af.tensor([True, False])).item()
    True
    """
    return input.any(dim, keepdim, axis=axis)


def argmax(input: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """torch.argmax: `input.argmax(dim, keepdim, axis=axis)`; see Tensor.argmax."""
    return input.argmax(dim, keepdim, axis=axis)


def argmin(input: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """torch.argmin: `input.argmin(dim, keepdim, axis=axis)`; see Tensor.argmin."""
    return input.argmin(dim, keepdim, axis=axis)


def argsort(input: Tensor, dim: int | None = None, descending: bool = False, stable: bool = False,
            *, axis=None) -> Tensor:
    """torch.argsort: `input.argsort(dim, descending, stable, axis=axis)`; see Tensor.argsort."""
    return input.argsort(dim, descending, stable, axis=axis)


def asin(input: Tensor) -> Tensor:
    """torch.asin: `input.asin()`; see Tensor.asin."""
    return input.asin()


def asinh(input: Tensor) -> Tensor:
    """torch.asinh: `input.asinh()`; see Tensor.asinh."""
    return input.asinh()


def atan(input: Tensor) -> Tensor:
    """torch.atan: `input.atan()`; see Tensor.atan."""
    return input.atan()


def atanh(input: Tensor) -> Tensor:
    """torch.atanh: `input.atanh()`; see Tensor.atanh."""
    return input.atanh()


def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    """torch.bernoulli: `input.bernoulli(p, generator=generator)`; see Tensor.bernoulli."""
    return input.bernoulli(p, generator=generator)


def bitwise_and(input: Tensor, other) -> Tensor:
    """torch.bitwise_and: `input.bitwise_and(other)`; see Tensor.bitwise_and."""
    return input.bitwise_and(other)


def bitwise_left_shift(input: Tensor, other) -> Tensor:
    """torch.bitwise_left_shift: `input.bitwise_left_shift(other)`; see Tensor.bitwise_left_shift."""
    return input.bitwise_left_shift(other)


def bitwise_not(input: Tensor) -> Tensor:
    """torch.bitwise_not: `input.bitwise_not()`; see Tensor.bitwise_not."""
    return input.bitwise_not()


def bitwise_or(input: Tensor, other) -> Tensor:
    """torch.bitwise_or: `input.bitwise_or(other)`; see Tensor.bitwise_or."""
    return input.bitwise_or(other)


def bitwise_right_shift(input: Tensor, other) -> Tensor:
    """torch.bitwise_right_shift: `input.bitwise_right_shift(other)`; see Tensor.bitwise_right_shift."""
    return input.bitwise_right_shift(other)


def bitwise_xor(input: Tensor, other) -> Tensor:
    """torch.bitwise_xor: `input.bitwise_xor(other)`; see Tensor.bitwise_xor."""
    return input.bitwise_xor(other)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:
    """torch.bmm: `input.bmm(mat2)`; see Tensor.bmm."""
    return input.bmm(mat2)


def ceil(input: Tensor) -> Tensor:
    """torch.ceil: `input.ceil()`; see Tensor.ceil."""
    return input.ceil()


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """torch.chunk: `input.chunk(chunks, dim)`; see Tensor.chunk."""
    return input.chunk(chunks, dim)


def clamp(input: Tensor, min=None, max=None) -> Tensor:
    """torch.clamp: `input.clamp(min, max)`; see Tensor.clamp."""
    return input.clamp(min, max)


def clamp_(input: Tensor, min=None, max=None) -> Tensor:
    """torch.clamp_: `input.clamp_(min, max)`; see Tensor.clamp_."""
    return input.clamp_(min, max)


def clamp_max(input: Tensor, max) -> Tensor:
    """torch.clamp_max: `input.clamp_max(max)`; see Tensor.clamp_max."""
    return input.clamp_max(max)


def clamp_min(input: Tensor, min) -> Tensor:
    """torch.clamp_min: `input.clamp_min(min)`; see Tensor.clamp_min."""
    return input.clamp_min(min)


def clip(input: Tensor, min=None, max=None) -> Tensor:
    """torch.clip: `input.clip(min, max)`; see Tensor.clip."""
    return input.clip(min, max)


def clone(input: Tensor) -> Tensor:
    """torch.clone: `input.clone()`; see Tensor.clone.

    >>> import aneforge as af
    >>> af.clone(af.tensor([1.0, 2.0])).tolist()
    [1.0, 2.0]
    """
    return input.clone()


def copysign(input: Tensor, other) -> Tensor:
    """torch.copysign: `input.copysign(other)`; see Tensor.copysign."""
    return input.copysign(other)


def cos(input: Tensor):
    """torch.cos: `input.cos()`; see Tensor.cos."""
    return input.cos()


def cosh(input: Tensor) -> Tensor:
    """torch.cosh: `input.cosh()`; see Tensor.cosh."""
    return input.cosh()


def count_nonzero(input: Tensor, dim=None) -> Tensor:
    """torch.count_nonzero: `input.count_nonzero(dim)`; see Tensor.count_nonzero."""
    return input.count_nonzero(dim)


def cummax(input: Tensor, dim: int | None = None, *, axis=None) -> minmax:
    """torch.cummax: `input.cummax(dim, axis=axis)`; see Tensor.cummax."""
    return input.cummax(dim, axis=axis)


def cummin(input: Tensor, dim: int | None = None, *, axis=None) -> minmax:
    """torch.cummin: `input.cummin(dim, axis=axis)`; see Tensor.cummin."""
    return input.cummin(dim, axis=axis)


def cumprod(input: Tensor, dim: int | None = None, dtype=None, *, axis=None) -> Tensor:
    """torch.cumprod: `input.cumprod(dim, dtype, axis=axis)`; see Tensor.cumprod."""
    return input.cumprod(dim, dtype, axis=axis)


def cumsum(input: Tensor, dim: int | None = None, dtype=None, *, axis=None) -> Tensor:
    """torch.cumsum: `input.cumsum(dim, dtype, axis=axis)`; see Tensor.cumsum."""
    return input.cumsum(dim, dtype, axis=axis)


def detach(input: Tensor) -> Tensor:
    """torch.detach: `input.detach()`; see Tensor.detach.

    >>> import aneforge as af
    >>> w = af.ones(2, requires_grad=True)
    >>> af.detach(w * 2).requires_grad
    False
    """
    return input.detach()


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """torch.diag: `input.diag(diagonal)`; see Tensor.diag."""
    return input.diag(diagonal)


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """torch.diagonal: `input.diagonal(offset, dim1, dim2)`; see Tensor.diagonal."""
    return input.diagonal(offset, dim1, dim2)


def div(input: Tensor, other, rounding_mode: str | None = None) -> Tensor:
    """torch.div: `input.div(other, rounding_mode)`; see Tensor.div.

    >>> import aneforge as af
    >>> af.div(af.tensor([1.0, 3.0]), 2).tolist()
    [0.5, 1.5]
    """
    return input.div(other, rounding_mode)


def eq(input: Tensor, other):
    """torch.eq: `input.eq(other)`; see Tensor.eq.

    >>> import aneforge as af
    >>> af.eq(af.tensor([1, 2]), 2).tolist()
    [False, True]
    """
    return input.eq(other)


def erf(input: Tensor):
    """torch.erf: `input.erf()`; see Tensor.erf.

    >>> import aneforge as af
    >>> af.erf(af.tensor([0.0, 3.0])).tolist()
    [0.0, 1.0]
    """
    return input.erf()


def exp(input: Tensor):
    """torch.exp: `input.exp()`; see Tensor.exp."""
    return input.exp()


def exp2(input: Tensor) -> Tensor:
    """torch.exp2: `input.exp2()`; see Tensor.exp2."""
    return input.exp2()


def expm1(input: Tensor) -> Tensor:
    """torch.expm1: `input.expm1()`; see Tensor.expm1."""
    return input.expm1()


def fill_(input: Tensor, value) -> Tensor:
    """torch.fill_: `input.fill_(value)`; see Tensor.fill_."""
    return input.fill_(value)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """torch.flatten: `input.flatten(start_dim, end_dim)`; see Tensor.flatten."""
    return input.flatten(start_dim, end_dim)


def flip(input: Tensor, dims) -> Tensor:
    """torch.flip: `input.flip(dims)`; see Tensor.flip."""
    return input.flip(dims)


def floor(input: Tensor) -> Tensor:
    """torch.floor: `input.floor()`; see Tensor.floor."""
    return input.floor()


def floor_divide(input: Tensor, other) -> Tensor:
    """torch.floor_divide: `input.floor_divide(other)`; see Tensor.floor_divide."""
    return input.floor_divide(other)


def fmod(input: Tensor, other) -> Tensor:
    """torch.fmod: `input.fmod(other)`; see Tensor.fmod."""
    return input.fmod(other)


def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """torch.gather: `input.gather(dim, index)`; see Tensor.gather."""
    return input.gather(dim, index)


def ge(input: Tensor, other):
    """torch.ge: `input.ge(other)`; see Tensor.ge.

    >>> import aneforge as af
    >>> af.ge(af.tensor([1, 2]), 2).tolist()
    [False, True]
    """
    return input.ge(other)


def gt(input: Tensor, other):
    """torch.gt: `input.gt(other)`; see Tensor.gt.

    >>> import aneforge as af
    >>> af.gt(af.tensor([1, 2]), 1).tolist()
    [False, True]
    """
    return input.gt(other)


def index_select(input: Tensor, dim: int, index) -> Tensor:
    """torch.index_select: `input.index_select(dim, index)`; see Tensor.index_select."""
    return input.index_select(dim, index)


def isclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """torch.isclose: `input.isclose(other, rtol, atol, equal_nan)`; see Tensor.isclose."""
    return input.isclose(other, rtol, atol, equal_nan)


def isfinite(input: Tensor) -> Tensor:
    """torch.isfinite: `input.isfinite()`; see Tensor.isfinite."""
    return input.isfinite()


def isinf(input: Tensor) -> Tensor:
    """torch.isinf: `input.isinf()`; see Tensor.isinf."""
    return input.isinf()


def isnan(input: Tensor) -> Tensor:
    """torch.isnan: `input.isnan()`; see Tensor.isnan."""
    return input.isnan()


def le(input: Tensor, other):
    """torch.le: `input.le(other)`; see Tensor.le.

    >>> import aneforge as af
    >>> af.le(af.tensor([1, 2]), 1).tolist()
    [True, False]
    """
    return input.le(other)


def lerp(input: Tensor, end, weight) -> Tensor:
    """torch.lerp: `input.lerp(end, weight)`; see Tensor.lerp."""
    return input.lerp(end, weight)


def log(input: Tensor):
    """torch.log: `input.log()`; see Tensor.log."""
    return input.log()


def log10(input: Tensor) -> Tensor:
    """torch.log10: `input.log10()`; see Tensor.log10."""
    return input.log10()


def log1p(input: Tensor) -> Tensor:
    """torch.log1p: `input.log1p()`; see Tensor.log1p."""
    return input.log1p()


def log2(input: Tensor) -> Tensor:
    """torch.log2: `input.log2()`; see Tensor.log2."""
    return input.log2()


def log_softmax(input: Tensor, dim: int | None = None, *, axis=None) -> Tensor:
    """torch.log_softmax: `input.log_softmax(dim, axis=axis)`; see Tensor.log_softmax."""
    return input.log_softmax(dim, axis=axis)


def logaddexp(input: Tensor, other) -> Tensor:
    """torch.logaddexp: `input.logaddexp(other)`; see Tensor.logaddexp."""
    return input.logaddexp(other)


def logaddexp2(input: Tensor, other) -> Tensor:
    """torch.logaddexp2: `input.logaddexp2(other)`; see Tensor.logaddexp2."""
    return input.logaddexp2(other)


def logcumsumexp(input: Tensor, dim: int | None = None, *, axis=None) -> Tensor:
    """torch.logcumsumexp: `input.logcumsumexp(dim, axis=axis)`; see Tensor.logcumsumexp."""
    return input.logcumsumexp(dim, axis=axis)


def logical_and(input: Tensor, other) -> Tensor:
    """torch.logical_and: `input.logical_and(other)`; see Tensor.logical_and."""
    return input.logical_and(other)


def logical_not(input: Tensor):
    """torch.logical_not: `input.logical_not()`; see Tensor.logical_not.

    >>> import aneforge as af
    >>> af.logical_not(af.tensor([True, False])).tolist()
    [False, True]
    """
    return input.logical_not()


def logical_or(input: Tensor, other) -> Tensor:
    """torch.logical_or: `input.logical_or(other)`; see Tensor.logical_or."""
    return input.logical_or(other)


def logical_xor(input: Tensor, other) -> Tensor:
    """torch.logical_xor: `input.logical_xor(other)`; see Tensor.logical_xor."""
    return input.logical_xor(other)


def logsumexp(input: Tensor, dim: int | None = None, keepdim: bool = False, *, axis=None) -> Tensor:
    """torch.logsumexp: `input.logsumexp(dim, keepdim, axis=axis)`; see Tensor.logsumexp."""
    return input.logsumexp(dim, keepdim, axis=axis)


def lt(input: Tensor, other):
    """torch.lt: `input.lt(other)`; see Tensor.lt.

    >>> import aneforge as af
    >>> af.lt(af.tensor([1, 2]), 2).tolist()
    [True, False]
    """
    return input.lt(other)


def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """torch.masked_fill: `input.masked_fill(mask, value)`; see Tensor.masked_fill.

    >>> import aneforge as af
    >>> x = af.tensor([-1.0, 2.0])
    >>> af.masked_fill(x, x < 0, 0.0).tolist()
    [0.0, 2.0]
    """
    return input.masked_fill(mask, value)


def matmul(input: Tensor, other) -> Tensor:
    """torch.matmul: `input.matmul(other)`; see Tensor.matmul."""
    return input.matmul(other)


def max(input: Tensor, dim=None, keepdim: bool = False, *, axis=None):
    """torch.max: `input.max(dim, keepdim, axis=axis)`; see Tensor.max."""
    return input.max(dim, keepdim, axis=axis)


def maximum(input: Tensor, other):
    """torch.maximum: `input.maximum(other)`; see Tensor.maximum."""
    return input.maximum(other)


def mean(input: Tensor, dim=None, keepdim: bool = False, *, axis=None) -> Tensor:
    """torch.mean: `input.mean(dim, keepdim, axis=axis)`; see Tensor.mean."""
    return input.mean(dim, keepdim, axis=axis)


def min(input: Tensor, dim=None, keepdim: bool = False, *, axis=None):
    """torch.min: `input.min(dim, keepdim, axis=axis)`; see Tensor.min."""
    return input.min(dim, keepdim, axis=axis)


def minimum(input: Tensor, other):
    """torch.minimum: `input.minimum(other)`; see Tensor.minimum."""
    return input.minimum(other)


def movedim(input: Tensor, source: int, destination: int) -> Tensor:
    """torch.movedim: `input.movedim(source, destination)`; see Tensor.movedim.

    >>> import aneforge as af
    >>> af.movedim(af.zeros(2, 3, 4), 0, -1).shape
    (3, 4, 2)
    """
    return input.movedim(source, destination)


def mul(input: Tensor, other):
    """torch.mul: `input.mul(other)`; see Tensor.mul.

    >>> import aneforge as af
    >>> af.mul(af.tensor([1.0, 2.0]), 3).tolist()
    [3.0, 6.0]
    """
    return input.mul(other)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator=None) -> Tensor:
    """torch.multinomial: `input.multinomial(num_samples, replacement, generator=generator)`; see Tensor.multinomial."""
    return input.multinomial(num_samples, replacement, generator=generator)


def multiply(input: Tensor, other) -> Tensor:
    """torch.multiply: `input.multiply(other)`; see Tensor.multiply."""
    return input.multiply(other)


def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """torch.nan_to_num: `input.nan_to_num(nan, posinf, neginf)`; see Tensor.nan_to_num."""
    return input.nan_to_num(nan, posinf, neginf)


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """torch.narrow: `input.narrow(dim, start, length)`; see Tensor.narrow.

    >>> import aneforge as af
    >>> af.narrow(af.arange(5), 0, 1, 3).tolist()
    [1, 2, 3]
    """
    return input.narrow(dim, start, length)


def ne(input: Tensor, other):
    """torch.ne: `input.ne(other)`; see Tensor.ne.

    >>> import aneforge as af
    >>> af.ne(af.tensor([1, 2]), 2).tolist()
    [True, False]
    """
    return input.ne(other)


def neg(input: Tensor) -> Tensor:
    """torch.neg: `input.neg()`; see Tensor.neg."""
    return input.neg()


def negative(input: Tensor) -> Tensor:
    """torch.negative: `input.negative()`; see Tensor.negative."""
    return input.negative()


def norm(input: Tensor, p='fro', dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """torch.norm: `input.norm(p, dim, keepdim, dtype)`; see Tensor.norm."""
    return input.norm(p, dim, keepdim, dtype)


def numel(input: Tensor) -> int:
    """torch.numel: `input.numel()`; see Tensor.numel.

    >>> import aneforge as af
    >>> af.numel(af.zeros(2, 3))
    6
    """
    return input.numel()


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """torch.outer: `input.outer(vec2)`; see Tensor.outer."""
    return input.outer(vec2)


def permute(input: Tensor, *dims) -> Tensor:
    """torch.permute: `input.permute(*dims)`; see Tensor.permute."""
    return input.permute(*dims)


def pow(input: Tensor, exponent) -> Tensor:
    """torch.pow: `input.pow(exponent)`; see Tensor.pow."""
    return input.pow(exponent)


def prod(input: Tensor, dim=None, keepdim: bool = False, dtype=None, *, axis=None) -> Tensor:
    """torch.prod: `input.prod(dim, keepdim, dtype, axis=axis)`; see Tensor.prod."""
    return input.prod(dim, keepdim, dtype, axis=axis)


def reciprocal(input: Tensor):
    """torch.reciprocal: `input.reciprocal()`; see Tensor.reciprocal."""
    return input.reciprocal()


def relu(input: Tensor):
    """torch.relu: `input.relu()`; see Tensor.relu."""
    return input.relu()


def remainder(input: Tensor, other) -> Tensor:
    """torch.remainder: `input.remainder(other)`; see Tensor.remainder."""
    return input.remainder(other)


def repeat_interleave(input: Tensor, repeats=None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """torch.repeat_interleave: `input.repeat_interleave(repeats, dim, output_size=output_size)`; see Tensor.repeat_interleave."""
    return input.repeat_interleave(repeats, dim, output_size=output_size)


def reshape(input: Tensor, *shape) -> Tensor:
    """torch.reshape: `input.reshape(*shape)`; see Tensor.reshape."""
    return input.reshape(*shape)


def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """torch.roll: `input.roll(shifts, dims)`; see Tensor.roll."""
    return input.roll(shifts, dims)


def round(input: Tensor, decimals: int = 0) -> Tensor:
    """torch.round: `input.round(decimals)`; see Tensor.round."""
    return input.round(decimals)


def rsqrt(input: Tensor):
    """torch.rsqrt: `input.rsqrt()`; see Tensor.rsqrt."""
    return input.rsqrt()


def scatter(input: Tensor, dim: int, index: Tensor, src=None, value=None, reduce=None) -> Tensor:
    """torch.scatter: `input.scatter(dim, index, src, value, reduce)`; see Tensor.scatter."""
    return input.scatter(dim, index, src, value, reduce)


def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """torch.scatter_add: `input.scatter_add(dim, index, src)`; see Tensor.scatter_add."""
    return input.scatter_add(dim, index, src)


def scatter_reduce(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str,
                   include_self: bool = True) -> Tensor:
    """torch.scatter_reduce: `input.scatter_reduce(dim, index, src, reduce, include_self)`; see Tensor.scatter_reduce."""
    return input.scatter_reduce(dim, index, src, reduce, include_self)


def select(input: Tensor, dim: int, index: int) -> Tensor:
    """torch.select: `input.select(dim, index)`; see Tensor.select."""
    return input.select(dim, index)


def sigmoid(input: Tensor):
    """torch.sigmoid: `input.sigmoid()`; see Tensor.sigmoid."""
    return input.sigmoid()


def sign(input: Tensor) -> Tensor:
    """torch.sign: `input.sign()`; see Tensor.sign."""
    return input.sign()


def sin(input: Tensor):
    """torch.sin: `input.sin()`; see Tensor.sin."""
    return input.sin()


def sinh(input: Tensor) -> Tensor:
    """torch.sinh: `input.sinh()`; see Tensor.sinh."""
    return input.sinh()


def softmax(input: Tensor, dim: int | None = None, *, axis=None) -> Tensor:
    """torch.softmax: `input.softmax(dim, axis=axis)`; see Tensor.softmax."""
    return input.softmax(dim, axis=axis)


def sort(input: Tensor, dim: int | None = None, descending: bool = False, stable: bool = False, *,
         axis=None) -> minmax:
    """torch.sort: `input.sort(dim, descending, stable, axis=axis)`; see Tensor.sort."""
    return input.sort(dim, descending, stable, axis=axis)


def split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple[Tensor, ...]:
    """torch.split: `tensor.split(split_size_or_sections, dim)`; see Tensor.split."""
    return tensor.split(split_size_or_sections, dim)


def sqrt(input: Tensor):
    """torch.sqrt: `input.sqrt()`; see Tensor.sqrt."""
    return input.sqrt()


def square(input: Tensor):
    """torch.square: `input.square()`; see Tensor.square."""
    return input.square()


def squeeze(input: Tensor, dim=None, *, axis=None) -> Tensor:
    """torch.squeeze: `input.squeeze(dim, axis=axis)`; see Tensor.squeeze."""
    return input.squeeze(dim, axis=axis)


def std(input: Tensor, dim=None, keepdim: bool = False, correction: int = 1, unbiased=None, *,
        axis=None) -> Tensor:
    """torch.std: `input.std(dim, keepdim, correction, unbiased, axis=axis)`; see Tensor.std.

    >>> import aneforge as af
    >>> af.std(af.tensor([1.0, 3.0])).item()
    1.4140625
    """
    return input.std(dim, keepdim, correction, unbiased, axis=axis)


def sub(input: Tensor, other, alpha=1):
    """torch.sub: `input.sub(other, alpha)`; see Tensor.sub.

    >>> import aneforge as af
    >>> af.sub(af.tensor([1.0, 2.0]), 1.0).tolist()
    [0.0, 1.0]
    """
    return input.sub(other, alpha)


def subtract(input: Tensor, other, alpha=1) -> Tensor:
    """torch.subtract: `input.subtract(other, alpha)`; see Tensor.subtract."""
    return input.subtract(other, alpha)


def sum(input: Tensor, dim=None, keepdim: bool = False, dtype=None, *, axis=None) -> Tensor:
    """torch.sum: `input.sum(dim, keepdim, dtype, axis=axis)`; see Tensor.sum."""
    return input.sum(dim, keepdim, dtype, axis=axis)


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """torch.swapaxes: `input.swapaxes(axis0, axis1)`; see Tensor.swapaxes.

    >>> import aneforge as af
    >>> af.swapaxes(af.zeros(2, 3), 0, 1).shape
    (3, 2)
    """
    return input.swapaxes(axis0, axis1)


def t(input: Tensor) -> Tensor:
    """torch.t: `input.t()`; see Tensor.t."""
    return input.t()


def tan(input: Tensor) -> Tensor:
    """torch.tan: `input.tan()`; see Tensor.tan."""
    return input.tan()


def tanh(input: Tensor):
    """torch.tanh: `input.tanh()`; see Tensor.tanh."""
    return input.tanh()


def tile(input: Tensor, *dims) -> Tensor:
    """torch.tile: `input.tile(*dims)`; see Tensor.tile."""
    return input.tile(*dims)


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> minmax:
    """torch.topk: `input.topk(k, dim, largest, sorted)`; see Tensor.topk."""
    return input.topk(k, dim, largest, sorted)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """torch.transpose: `input.transpose(dim0, dim1)`; see Tensor.transpose."""
    return input.transpose(dim0, dim1)


def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """torch.tril: `input.tril(diagonal)`; see Tensor.tril."""
    return input.tril(diagonal)


def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """torch.triu: `input.triu(diagonal)`; see Tensor.triu."""
    return input.triu(diagonal)


def true_divide(input: Tensor, other) -> Tensor:
    """torch.true_divide: `input.true_divide(other)`; see Tensor.true_divide."""
    return input.true_divide(other)


def trunc(input: Tensor) -> Tensor:
    """torch.trunc: `input.trunc()`; see Tensor.trunc."""
    return input.trunc()


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """torch.unbind: `input.unbind(dim)`; see Tensor.unbind.

    >>> import aneforge as af
    >>> [t.tolist() for t in af.unbind(af.tensor([[1, 2], [3, 4]]), 1)]
    [[1, 3], [2, 4]]
    """
    return input.unbind(dim)


def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    """torch.unflatten: `input.unflatten(dim, sizes)`; see Tensor.unflatten."""
    return input.unflatten(dim, sizes)


def unsqueeze(input: Tensor, dim: int | None = None, *, axis=None) -> Tensor:
    """torch.unsqueeze: `input.unsqueeze(dim, axis=axis)`; see Tensor.unsqueeze."""
    return input.unsqueeze(dim, axis=axis)


def var(input: Tensor, dim=None, keepdim: bool = False, correction: int = 1, unbiased=None, *,
        axis=None) -> Tensor:
    """torch.var: `input.var(dim, keepdim, correction, unbiased, axis=axis)`; see Tensor.var.

    >>> import aneforge as af
    >>> af.var(af.tensor([1.0, 3.0])).item()
    2.0
    """
    return input.var(dim, keepdim, correction, unbiased, axis=axis)


def zero_(input: Tensor) -> Tensor:
    """torch.zero_: `input.zero_()`; see Tensor.zero_."""
    return input.zero_()
# ---- end of generated block: forwarders ----


# ---- generated by `python -m aneforge._api` from its TABLE, do not edit: __all__ ----
__all__ = [
    "abs", "acos", "acosh", "add", "addcdiv", "addcmul", "addmm", "all", "allclose", "amax", "amin",
    "any", "argmax", "argmin", "argsort", "asin", "asinh", "atan", "atanh", "bernoulli",
    "bitwise_and", "bitwise_left_shift", "bitwise_not", "bitwise_or", "bitwise_right_shift",
    "bitwise_xor", "bmm", "cat", "ceil", "chunk", "clamp", "clamp_", "clamp_max", "clamp_min",
    "clip", "clone", "concat", "concatenate", "copysign", "cos", "cosh", "count_nonzero", "cummax",
    "cummin", "cumprod", "cumsum", "detach", "diag", "diagonal", "div", "einsum", "eq", "erf",
    "exp", "exp2", "expm1", "fill_", "flatten", "flip", "floor", "floor_divide", "fmod", "gather",
    "ge", "gt", "index_select", "isclose", "isfinite", "isinf", "isnan", "le", "lerp", "log",
    "log10", "log1p", "log2", "log_softmax", "logaddexp", "logaddexp2", "logcumsumexp",
    "logical_and", "logical_not", "logical_or", "logical_xor", "logsumexp", "lt", "masked_fill",
    "matmul", "max", "maximum", "mean", "meshgrid", "min", "minimum", "movedim", "mul",
    "multinomial", "multiply", "nan_to_num", "narrow", "ne", "neg", "negative", "norm", "numel",
    "outer", "permute", "pow", "prod", "reciprocal", "relu", "remainder", "repeat_interleave",
    "reshape", "roll", "round", "rsqrt", "scatter", "scatter_add", "scatter_reduce", "select",
    "sigmoid", "sign", "sin", "sinh", "softmax", "sort", "split", "sqrt", "square", "squeeze",
    "stack", "std", "std_mean", "sub", "subtract", "sum", "swapaxes", "t", "tan", "tanh", "tile",
    "topk", "transpose", "tril", "triu", "true_divide", "trunc", "unbind", "unflatten", "unsqueeze",
    "var", "var_mean", "where", "zero_"]
# ---- end of generated block: __all__ ----
