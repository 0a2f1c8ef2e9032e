"""Tensors of rank 6 and more, which ANE programs cannot hold (rank 6 fails ANECCompile;
ANEForge docs/developer/op-quirks.md), as torch code makes them on the way between two
rank <= 5 shapes: Swin's window partition `x.view(B, H//w, w, W//w, w, C).permute(0, 1, 3, 2,
4, 5).reshape(-1, w, w, C)`, a hand-written pixel shuffle, a ViT patchify.

A `HighRank` keeps its elements, in the C order of its (logical) shape, in a rank <= 5 Tensor
whose axes merge runs of the logical ones. Reshapes, permutations whose moved axes form at most
five runs, broadcasts, elementwise arithmetic, sum and mean work on that tensor; the result is an
ordinary Tensor again as soon as its rank is 5 or less. Anything else says to reshape first."""
from __future__ import annotations

import math

import numpy as np

from ..errors import AneforgeError, ShapeError
from ..hardware.limits import MAX_RANK
from .args import Shaped, _infer_size, _sizes, index_entries, norm_dim
from .assign import host_index

# Tensor methods that compute each element from its own: they run on the rank <= 5 storage.
ELEMENTWISE = frozenset((
    "abs", "neg", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt",
    "relu", "sigmoid", "tanh", "sin", "cos", "tan", "sign", "square", "reciprocal", "floor",
    "ceil", "round", "trunc", "clamp", "clip", "float", "half", "int", "long", "bool", "to",
    "type", "detach", "clone", "requires_grad_", "nan_to_num", "isnan", "isinf", "isfinite",
    "logical_not", "pow", "erf", "atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh",
    "atanh", "frac", "lerp", "where", "masked_fill", "add", "sub", "mul", "div", "maximum",
    "minimum", "eq", "ne", "lt", "le", "gt", "ge"))


def shape_argument(shape: tuple, kwargs: dict) -> tuple:
    """reshape's sizes, positional or torch's `shape=` keyword."""
    if kwargs:
        if shape or set(kwargs) != {"shape"}:
            raise TypeError(f"reshape() takes the sizes, or shape=, got {sorted(kwargs)}")
        return (kwargs["shape"],)
    return shape


def merged(shape: tuple) -> tuple:
    """`shape` (size-1 axes dropped) with adjacent axes merged, from the front, down to
    MAX_RANK axes: a rank <= 5 shape holding the same elements in the same order."""
    dims = [n for n in shape if n != 1] or [1]
    while len(dims) > MAX_RANK:
        dims[:2] = [dims[0] * dims[1]]
    return tuple(dims)


def index(x, index: tuple):
    """x[index] (x a Tensor) with a rank > 5 index tensor among the entries: by positions."""
    return HighRank(x.reshape(merged(x.shape)), x.shape)[index]


def wrap(storage, shape: tuple):
    """`storage`'s elements (in C order) with `shape`: a Tensor when the rank allows."""
    shape = tuple(shape)
    if len(shape) <= MAX_RANK:
        return storage.reshape(shape)
    return HighRank(storage.reshape(merged(shape)), shape)


def _runs(order: list) -> list:
    """`order` (axes of a source, in a new order) cut into runs of consecutive source axes:
    each run moves as one axis."""
    runs = []
    for a in order:
        if runs and runs[-1][-1] + 1 == a:
            runs[-1].append(a)
        else:
            runs.append([a])
    return runs


class HighRank(Shaped):
    """A rank > 5 tensor between two reshapes (see the module's docstring).

    >>> import aneforge as af
    >>> x = af.arange(64.0).reshape(2, 2, 2, 2, 2, 2)           # rank 6
    >>> y = x.permute(0, 1, 3, 2, 4, 5).reshape(8, 8)          # back to rank 2
    >>> y.shape, y[0].tolist()[:4]
    ((8, 8), [0.0, 1.0, 2.0, 3.0])
    """
    __slots__ = ("_storage", "_shape")
    __array_priority__ = 1000

    def __init__(self, storage, shape: tuple):
        self._storage, self._shape = storage, tuple(shape)

    # ---- what it is -------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return self._shape

    nelement = Shaped.numel

    def __len__(self) -> int:
        return self._shape[0]

    @property
    def dtype(self):
        return self._storage.dtype

    @property
    def device(self):
        return self._storage.device

    @property
    def requires_grad(self) -> bool:
        return self._storage.requires_grad

    @property
    def is_leaf(self) -> bool:
        return self._storage.is_leaf

    @property
    def grad(self):
        g = self._storage.grad
        return None if g is None else wrap(g, self._shape)

    def backward(self, gradient=None, retain_graph=None):
        if gradient is None:
            raise self._refusal("backward() without a gradient")
        self._storage.backward(self._operand(gradient), retain_graph)

    def __repr__(self) -> str:
        return f"tensor(shape={self._shape}, dtype={self.dtype.name}, rank > {MAX_RANK})"

    # ---- values -----------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        return self._storage.numpy().reshape(self._shape)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def tolist(self) -> list:
        return self.numpy().tolist()

    # ---- movement ---------------------------------------------------------------------------
    def reshape(self, *shape, **kwargs):
        shape = _infer_size(_sizes(shape_argument(shape, kwargs)), self.numel(), self._shape)
        return wrap(self._storage, shape)

    view = reshape

    def view_as(self, other):
        return self.reshape(other.shape)

    def contiguous(self, memory_format=None):
        return self

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        s, e = norm_dim(start_dim, self.ndim, "flatten"), norm_dim(end_dim, self.ndim, "flatten")
        return self.reshape(self._shape[:s] + (-1,) + self._shape[e + 1:])

    def unflatten(self, dim: int, sizes):
        d = norm_dim(dim, self.ndim, "unflatten")
        inner = _infer_size(tuple(sizes), self._shape[d], self._shape)
        return self.reshape(self._shape[:d] + inner + self._shape[d + 1:])

    def unsqueeze(self, dim: int):
        d = norm_dim(dim, self.ndim + 1, "unsqueeze")
        return self.reshape(self._shape[:d] + (1,) + self._shape[d:])

    def squeeze(self, dim=None):
        dims = range(self.ndim) if dim is None else dim if isinstance(dim, (tuple, list)) else (dim,)
        gone = {norm_dim(d, self.ndim, "squeeze") for d in dims}
        return self.reshape(tuple(n for i, n in enumerate(self._shape) if i not in gone or n != 1))

    def permute(self, *dims):
        return permute(self._storage, self._shape, _sizes(dims))

    def transpose(self, dim0: int, dim1: int):
        perm = list(range(self.ndim))
        a, b = norm_dim(dim0, self.ndim, "transpose"), norm_dim(dim1, self.ndim, "transpose")
        perm[a], perm[b] = perm[b], perm[a]
        return self.permute(perm)

    swapaxes = transpose

    def movedim(self, source: int, destination: int):
        perm = list(range(self.ndim))
        perm.insert(norm_dim(destination, self.ndim, "movedim"),
                    perm.pop(norm_dim(source, self.ndim, "movedim")))
        return self.permute(perm)

    def expand(self, *sizes):
        return expand(self._storage, self._shape, _sizes(sizes))

    def expand_as(self, other):
        return self.expand(other.shape)

    # ---- arithmetic and reductions ----------------------------------------------------------
    def _operand(self, other):
        """`other` as this storage's shape: a number, a one-element tensor, or a tensor of this
        shape (the same elements in the same order)."""
        if isinstance(other, HighRank):
            if other.shape != self._shape:
                raise self._refusal(f"an operand of shape {other.shape}")
            return other._storage.reshape(self._storage.shape)
        shape = getattr(other, "shape", ())
        if tuple(shape) == self._shape:
            return other.reshape(self._storage.shape)
        if math.prod(shape) != 1:
            raise self._refusal(f"broadcasting with shape {tuple(shape)}")
        return other.reshape(()) if hasattr(other, "reshape") and shape else other

    def sum(self, dim=None, keepdim: bool = False, dtype=None):
        return self._reduce("sum", dim, keepdim, dtype)

    def mean(self, dim=None, keepdim: bool = False, dtype=None):
        return self._reduce("mean", dim, keepdim, dtype)

    def _reduce(self, how: str, dim, keepdim: bool, dtype):
        s = self._storage if dtype is None else self._storage.to(dtype)
        if dim is None:
            return getattr(s, how)()
        dims = sorted({norm_dim(d, self.ndim, how) for d in (dim if isinstance(dim, (tuple, list))
                                                             else (dim,))})
        kept = [d for d in range(self.ndim) if d not in dims]
        rest = tuple(self._shape[d] for d in kept)
        moved = permute(s, self._shape, kept + dims)             # reduced axes last, together
        stored = moved._storage if isinstance(moved, HighRank) else moved
        result = getattr(stored.reshape(_front(rest) + (-1,)), how)(-1)
        shape = tuple(1 if d in dims else n for d, n in enumerate(self._shape)) if keepdim else rest
        return wrap(result, shape)

    def __getattr__(self, name: str):
        if name in ELEMENTWISE:
            method = getattr(self._storage, name)
            return lambda *a, **k: self._elementwise(method, a, k)
        if name.startswith("__"):
            raise AttributeError(name)
        raise self._refusal(f"{name}()")

    def _elementwise(self, method, args, kwargs):
        args = [self._operand(a) if isinstance(a, HighRank) or getattr(a, "shape", None) ==
                self._shape else a for a in args]
        out = method(*args, **kwargs)
        return HighRank(out, self._shape) if getattr(out, "shape", None) == self._storage.shape \
            else out

    def __getitem__(self, index):
        """torch's (numpy's) indexing, as positions found on the host: the storage's entries
        at them are picked with the storage's own indexing (gradients included)."""
        index = host_index(tuple(i.numpy() if isinstance(i, HighRank) else i
                                 for i in index_entries(index)))
        at = np.arange(self.numel()).reshape(self._shape)
        # torch selects with Python ints first (numpy would count them as advanced indices,
        # moving the broadcast axes of `x[1, :, idx]` to the front): two passes
        ints = tuple(i if isinstance(i, int) else ... if i is Ellipsis else slice(None)
                     for i in index if i is not None)
        at = at[ints] if any(isinstance(i, int) for i in ints) else at
        at = at[tuple(i for i in index if not isinstance(i, int))]
        coords = np.unravel_index(at.reshape(-1), self._storage.shape)
        picked = self._storage[tuple(self._storage._as_tensor(c.astype(np.int32))
                                     for c in coords)]
        return wrap(picked, at.shape)

    def __neg__(self):
        return HighRank(-self._storage, self._shape)

    def _refusal(self, what: str) -> AneforgeError:
        return AneforgeError(
            f"{what} on a rank-{self.ndim} tensor (shape {self._shape}): ANE programs hold rank "
            f"<= {MAX_RANK}, so a higher-rank tensor supports reshape/view, permute/transpose, "
            f"expand, elementwise ops with numbers or same-shape tensors, sum and mean; reshape it "
            f"to {MAX_RANK} dims or fewer first (merge adjacent axes)")


def _front(rest: tuple) -> tuple:
    """`rest` merged to at most MAX_RANK - 1 axes (room for one more)."""
    dims = [n for n in rest if n != 1] or [1]
    while len(dims) > MAX_RANK - 1:
        dims[:2] = [dims[0] * dims[1]]
    return tuple(dims)


def permute(storage, shape: tuple, dims) -> "HighRank":
    """`storage` (elements of `shape` in C order) permuted by `dims`: the axes that move
    together (consecutive in both orders; size-1 axes go anywhere) move as one."""
    rank = len(shape)
    dims = tuple(norm_dim(d, rank, "permute") for d in dims)
    if sorted(dims) != list(range(rank)):
        raise ShapeError(f"permute: {dims} is not a permutation of {rank} dims (shape {shape})")
    order = [d for d in dims if shape[d] != 1]
    runs = _runs(order)
    if len(runs) > MAX_RANK:                  # one axis at a time: at most 4 groups each
        return _moves(storage, shape, dims)
    source = sorted(runs)
    stored = storage.reshape(tuple(math.prod(shape[a] for a in r) for r in source) or (1,))
    moved = stored.permute([source.index(r) for r in runs]) if runs else stored
    return wrap(moved, tuple(shape[d] for d in dims))


def _moves(storage, shape: tuple, dims: tuple):
    """permute(dims) as moves of one axis each (the axes before it, it, the ones it jumps, the
    rest: four groups), for a permutation whose axes scatter into more than five groups."""
    current, x = list(range(len(shape))), HighRank(storage.reshape(merged(shape)), shape)
    for k, axis in enumerate(dims):
        i = current.index(axis)
        if i != k:
            step = list(range(len(shape)))
            step.insert(k, step.pop(i))
            current.insert(k, current.pop(i))
            x = x.permute(step)
            x = x if isinstance(x, HighRank) else HighRank(x, x.shape)
    return wrap(x._storage, x.shape)


def expand(storage, shape: tuple, sizes: tuple):
    """`storage` (elements of `shape` in C order) broadcast to `sizes`: runs of axes that all
    stay or all grow from 1 broadcast as one axis."""
    if len(sizes) < len(shape):
        raise ShapeError(f"expand: {sizes} has fewer dims than the tensor's shape {shape}")
    full = (1,) * (len(sizes) - len(shape)) + tuple(shape)
    target = tuple(n if s == -1 else s for n, s in zip(full, sizes))
    groups: list = []                       # [kind, size before, size after]
    for n, s in zip(full, target):
        if n != s and n != 1:
            raise ShapeError(f"expand: cannot expand shape {shape} to {sizes}: an axis of size "
                             f"{n} can only stay or grow from 1")
        if s == 1:
            continue
        kind = n == s
        if groups and groups[-1][0] == kind:
            groups[-1][1] *= n
            groups[-1][2] *= s
        else:
            groups.append([kind, n, s])
    if len(groups) > MAX_RANK:
        raise AneforgeError(f"expand of shape {shape} to {sizes}: the kept and broadcast axes "
                            f"alternate {len(groups)} times, and an ANE program holds rank <= "
                            f"{MAX_RANK}; expand in two steps, or reshape first")
    if not groups:
        return wrap(storage, target)
    grown = storage.reshape(tuple(g[1] for g in groups)).expand(tuple(g[2] for g in groups))
    return wrap(grown, target)


def _dunder(name: str):
    def method(self, other):
        return HighRank(getattr(self._storage, name)(self._operand(other)), self._shape)
    method.__name__ = name
    return method


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "pow", "rpow",
              "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "xor"):
    setattr(HighRank, f"__{_name}__", _dunder(f"__{_name}__"))
