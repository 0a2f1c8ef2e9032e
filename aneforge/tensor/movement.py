"""Tensor movement: reshapes, permutations, slices, tiles, concatenation (af.cat, af.stack).
Every op here moves elements without computing on them (exact for every dtype)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import dtypes
from ..errors import AneforgeError, ShapeError
from ..hardware.limits import MAX_RANK
from ..ops._grad import zeros
from . import highrank
from .highrank import shape_argument
from .args import _dim_or_axis, _infer_size, _sizes, norm_dim
from .base import TensorBase
from .elementwise import where
from .indexing import narrow


def _as_tensors(tensors: Sequence) -> list:
    tensors = list(tensors)
    if not tensors:
        raise AneforgeError("expected a non-empty sequence of tensors")
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = dtypes.promote(dt, t.dtype)
    return [t.to(dt) for t in tensors]


def cat(tensors: Sequence, dim: int = 0) -> "Tensor":
    """Concatenate along `dim` (MIL concat).

    >>> import aneforge as af
    >>> af.cat([af.ones(2, 1), af.zeros(2, 2)], dim=1).shape
    (2, 3)
    """
    tensors = _as_tensors(tensors)
    kept = [t for t in tensors if t.numel()]      # an empty piece adds nothing (torch skips
    tensors = kept or tensors                     # a 1-D empty one of any shape too)
    dim = norm_dim(dim, tensors[0].ndim, "cat")
    if len(tensors) == 1:
        return tensors[0]
    return tensors[0]._record("concat", {"values": tuple(tensors)}, {"axis": dim})


concat = concatenate = cat


def stack(tensors: Sequence, dim: int = 0) -> "Tensor":
    """Join along a new axis `dim` (expand_dims each, then concat)."""
    tensors = _as_tensors(tensors)
    dim = norm_dim(dim, tensors[0].ndim + 1, "stack")
    return cat([t.unsqueeze(dim) for t in tensors], dim=dim)


class MovementMixin(TensorBase):
    """Shape and layout changes; narrow and select go through indexing."""
    __slots__ = ()

    def reshape(self, *shape, **kwargs) -> "Tensor":
        shape = _infer_size(_sizes(shape_argument(shape, kwargs)), self.numel(), self.shape)
        if len(shape) > MAX_RANK:                 # kept as rank <= 5 (tensor/highrank.py)
            return highrank.wrap(self, shape)
        return self if shape == self.shape else self._record("reshape", {"x": self}, {"shape": shape})

    def view(self, *shape) -> "Tensor":
        """reshape; with a dtype, torch's bit reinterpretation: the same bytes read as `dtype`
        (the last axis scales by the size ratio). No ANE op reinterprets bits, so the values
        are read and viewed on the host (a host segment); the result carries no gradient.

        >>> import aneforge as af
        >>> af.tensor([1.0, -2.0]).view(af.int16).tolist()
        [15360, -16384]
        """
        if len(shape) == 1 and isinstance(shape[0], dtypes.DType):
            return self._bits_as(shape[0])
        return self.reshape(*shape)

    def _bits_as(self, dtype) -> "Tensor":
        if dtype.is_float and self.requires_grad:
            raise AneforgeError(f"view({dtype}): a bit reinterpretation carries no gradient "
                                f"here; detach() first, or convert values with .to({dtype})")
        item, new = np.dtype(self.dtype.np).itemsize, np.dtype(dtype.np).itemsize
        if item != new and (not self.ndim or (self.shape[-1] * item) % new):
            raise RuntimeError(f"view({dtype}): the last dimension ({self.shape[-1:]} of "
                               f"{self.dtype}) must hold a whole number of {dtype} elements")
        return self._host("view(dtype)", "no ANE op reinterprets bits",
                          lambda a: [np.ascontiguousarray(a).view(dtype.np)], (self,), (dtype,))[0]

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        s, e = norm_dim(start_dim, self.ndim, "flatten"), norm_dim(end_dim, self.ndim, "flatten")
        if s > e:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        if self.ndim == 0:
            return self.reshape(1)
        return self.reshape(self.shape[:s] + (-1,) + self.shape[e + 1:])

    def permute(self, *dims) -> "Tensor":
        if not dims:
            raise TypeError('permute() missing 1 required positional arguments: "dims"')
        dims = tuple(norm_dim(d, self.ndim, "permute") for d in _sizes(dims))
        if sorted(dims) != list(range(self.ndim)):
            raise ShapeError(f"permute: {dims} is not a permutation of {self.ndim} dims "
                             f"(shape {self.shape})")
        if dims == tuple(range(self.ndim)):
            return self
        return self._record("transpose", {"x": self}, {"perm": dims})

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        perm = list(range(self.ndim))
        dim0, dim1 = norm_dim(dim0, self.ndim, "transpose"), norm_dim(dim1, self.ndim, "transpose")
        if self.ndim == 0:
            return self
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        return self.permute(perm)

    def swapaxes(self, axis0: int, axis1: int) -> "Tensor":
        return self.transpose(axis0, axis1)

    def t(self) -> "Tensor":
        if self.ndim > 2:
            raise ShapeError(f"t() expects a tensor with <= 2 dims, got shape {self.shape}; "
                             f"use transpose(dim0, dim1)")
        return self if self.ndim < 2 else self.transpose(0, 1)

    @property
    def T(self) -> "Tensor":
        return self.permute(tuple(reversed(range(self.ndim))))

    def unsqueeze(self, dim: int | None = None, *, axis=None) -> "Tensor":
        dim = norm_dim(_dim_or_axis(dim, axis, "unsqueeze", required=True), self.ndim + 1,
                       "unsqueeze")
        if self.ndim >= MAX_RANK:
            return self.reshape(self.shape[:dim] + (1,) + self.shape[dim:])
        return self._record("expand_dims", {"x": self}, {"axes": (dim,)})

    def squeeze(self, dim=None, *, axis=None) -> "Tensor":
        """Drop size-1 axes (all, or the given ones; like torch, a given axis of size > 1 stays)."""
        dim = _dim_or_axis(dim, axis, "squeeze")
        dims = range(self.ndim) if dim is None else dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = [norm_dim(d, self.ndim, "squeeze") for d in dims]
        axes = tuple(d for d in dims if self.ndim and self.shape[d] == 1)
        return self if not axes else self._record("squeeze", {"x": self}, {"axes": axes})

    def expand(self, *sizes) -> "Tensor":
        """Broadcast to `sizes` (-1 keeps an axis); MIL has no view, so this tiles."""
        if not sizes:
            raise TypeError('expand() missing 1 required positional arguments: "size"')
        sizes = _sizes(sizes)
        if len(sizes) > MAX_RANK:
            return highrank.expand(self, self.shape, sizes)
        if len(sizes) < self.ndim:
            raise ShapeError(f"expand: {sizes} has fewer dims than the tensor's shape {self.shape}")
        lead = len(sizes) - self.ndim
        if -1 in sizes[:lead]:
            raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, "
                               f"non-existing dimension {sizes.index(-1)}")
        x = self.reshape((1,) * lead + self.shape)
        target = tuple(n if s == -1 else s for n, s in zip(x.shape, sizes))
        reps = []
        for n, s in zip(x.shape, target):
            if n != s and n != 1:
                raise ShapeError(f"expand: cannot expand shape {self.shape} to {sizes}: an axis "
                                 f"of size {n} can only stay or grow from 1")
            reps.append(s if n == 1 else 1)
        if 0 in target:          # narrowed, so the gradient (zeros) still reaches self
            for d, s in enumerate(target):
                x = x.narrow(d, 0, 0) if s == 0 else x
            reps = [1 if s == 0 else r for r, s in zip(reps, target)]
        return x if all(r == 1 for r in reps) else \
            self._record("tile", {"x": x}, {"reps": tuple(reps)})

    def expand_as(self, other: "Tensor") -> "Tensor":
        return self.expand(other.shape)

    def split(self, split_size_or_sections, dim: int = 0) -> tuple["Tensor", ...]:
        dim = norm_dim(dim, self.ndim, "split")
        n = self.shape[dim]
        if isinstance(split_size_or_sections, int):
            k = split_size_or_sections
            if k <= 0:
                raise ValueError(f"split expects split_size be positive, but got split_size={k}")
            sizes = [k] * (n // k) + ([n % k] if n % k else [])
        else:
            sizes = list(split_size_or_sections)
        if len(sizes) == 1:
            return (self,)
        return self._record("split", {"x": self}, {"split_sizes": tuple(sizes), "axis": dim})

    def chunk(self, chunks: int, dim: int = 0) -> tuple["Tensor", ...]:
        if chunks <= 0:
            raise ValueError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
        dim = norm_dim(dim, self.ndim, "chunk")
        return self.split(-(-self.shape[dim] // chunks), dim)

    def movedim(self, source: int, destination: int) -> "Tensor":
        src, dst = norm_dim(source, self.ndim, "movedim"), norm_dim(destination, self.ndim, "movedim")
        if self.ndim == 0:
            return self
        perm = list(range(self.ndim))
        perm.insert(dst, perm.pop(src))
        return self.permute(perm)

    def narrow(self, dim: int, start: int, length: int) -> "Tensor":
        """`length` entries of axis `dim` from `start` (negative `start` counts from the end).

        >>> import aneforge as af
        >>> af.tensor([1, 2, 3, 4]).narrow(0, -3, 2).tolist()
        [2, 3]
        """
        if self.ndim == 0:
            raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
        dim = norm_dim(dim, self.ndim, "narrow")
        n = self.shape[dim]
        if not -n <= start <= n:
            raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], "
                             f"but got {start})")
        start %= n if start < 0 else n + 1
        if length < 0:
            raise RuntimeError("narrow(): length must be non-negative.")
        if start + length > n:
            raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
        return narrow(self, dim, start, start + length)

    def select(self, dim: int, index: int) -> "Tensor":
        """The slice at `index` along `dim`, with that axis removed (``x.select(1, 0)`` is
        ``x[:, 0]``).

        >>> import aneforge as af
        >>> af.tensor([[1, 2], [3, 4]]).select(1, -1).tolist()
        [2, 4]
        """
        if self.ndim == 0:
            raise IndexError("select() cannot be applied to a 0-dim tensor.")
        dim = norm_dim(dim, self.ndim, "select")
        n = self.shape[dim]
        if not -n <= index < n:
            raise IndexError(f"select(): index {index} out of range for tensor of size "
                             f"{list(self.shape)} at dimension {dim}")
        return self[(slice(None),) * dim + (index,)]

    def unbind(self, dim: int = 0) -> tuple["Tensor", ...]:
        return tuple(t.squeeze(dim) for t in self.split(1, dim))

    @property
    def mT(self) -> "Tensor":
        """The last two axes swapped (a batch of matrices transposed).

        >>> import aneforge as af
        >>> af.zeros(2, 3, 4).mT.shape
        (2, 4, 3)
        """
        return self.transpose(-2, -1)

    def tril(self, diagonal: int = 0) -> "Tensor":
        """The lower triangle of the last two axes (above `diagonal` zeroed): a select with a
        constant mask.

        >>> import aneforge as af
        >>> af.tril(af.ones(2, 2)).tolist()
        [[1.0, 0.0], [1.0, 1.0]]
        """
        return self._triangle(np.tri(*self.shape[-2:], k=diagonal, dtype=bool))

    def triu(self, diagonal: int = 0) -> "Tensor":
        """The upper triangle of the last two axes (below `diagonal` zeroed).

        >>> import aneforge as af
        >>> af.triu(af.ones(2, 2)).tolist()
        [[1.0, 1.0], [0.0, 1.0]]
        """
        return self._triangle(~np.tri(*self.shape[-2:], k=diagonal - 1, dtype=bool))

    def _triangle(self, mask: np.ndarray) -> "Tensor":
        if self.ndim < 2:
            raise ShapeError(f"tril/triu need at least 2 dims, got shape {self.shape}")
        return where(self._const(mask, dtypes.bool_), self, zeros(self))

    def repeat(self, *sizes) -> "Tensor":
        """Tile the tensor `sizes` times along each axis (MIL tile; new leading axes allowed).

        >>> import aneforge as af
        >>> af.tensor([1, 2]).repeat(2, 2).tolist()
        [[1, 2, 1, 2], [1, 2, 1, 2]]
        """
        if not sizes:
            raise TypeError('repeat() missing 1 required positional arguments: "repeats"')
        sizes = _sizes(sizes)
        if len(sizes) > MAX_RANK:
            return highrank.expand(self, self.shape, sizes)
        if len(sizes) < self.ndim:
            raise ShapeError(f"repeat: {len(sizes)} sizes for a {self.ndim}-D tensor; give at "
                             f"least one per axis")
        x = self.reshape((1,) * (len(sizes) - self.ndim) + self.shape)
        if 0 in sizes:           # MIL tile takes reps >= 1: tile the rest, then cut those to 0
            x = x.repeat(*[max(r, 1) for r in sizes])
            return x[tuple(slice(0, 0) if r == 0 else slice(None) for r in sizes)]
        return x if all(r == 1 for r in sizes) else self._record("tile", {"x": x}, {"reps": sizes})

    def flip(self, dims) -> "Tensor":
        """Reverse the order along `dims` (split into slices, concatenated backwards: exact for
        every dtype).

        >>> import aneforge as af
        >>> af.flip(af.tensor([[1, 2], [3, 4]]), (0, 1)).tolist()
        [[4, 3], [2, 1]]
        """
        x = self
        dims = [norm_dim(d, self.ndim, "flip") for d in ((dims,) if isinstance(dims, int) else dims)]
        for d in dims:
            if dims.count(d) > 1:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        for d in dims if self.ndim else ():
            if x.shape[d] > 1:
                x = cat(list(reversed(x.split(1, d))), d)
        return x

    def roll(self, shifts, dims=None) -> "Tensor":
        """Shift elements along `dims` by `shifts`, wrapping around (slices + concat); with no
        dims the flattened tensor is rolled.

        >>> import aneforge as af
        >>> af.roll(af.tensor([1, 2, 3, 4]), 1).tolist()
        [4, 1, 2, 3]
        """
        if dims is None:
            return self.flatten().roll(shifts, 0).reshape(self.shape)
        shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
        dims = (dims,) if isinstance(dims, int) else tuple(dims)
        x = self
        for s, d in zip(shifts, dims):
            n = x.shape[d]
            s %= n
            if s:
                x = cat([x.narrow(d, n - s, s), x.narrow(d, 0, n - s)], d)
        return x

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> "Tensor":
        """The diagonal of the (dim1, dim2) planes, as the last axis: a strided slice of the
        flattened planes (exact).

        >>> import aneforge as af
        >>> af.diagonal(af.tensor([[1, 2], [3, 4]])).tolist()
        [1, 4]
        """
        d1, d2 = dim1 % self.ndim, dim2 % self.ndim
        x = self.permute([i for i in range(self.ndim) if i not in (d1, d2)] + [d1, d2])
        n, m = x.shape[-2:]
        length = min(n, m - offset) if offset >= 0 else min(n + offset, m)
        if length < 1:
            raise ShapeError(f"diagonal: offset {offset} leaves no diagonal in a {n}x{m} plane "
                             f"(empty tensors are not supported)")
        start = offset if offset >= 0 else -offset * m
        flat = x.reshape(x.shape[:-2] + (n * m,))
        return flat[..., start:start + (length - 1) * (m + 1) + 1:m + 1]

    def tile(self, *dims) -> "Tensor":
        """repeat(), with ones prepended when fewer dims than axes are given (torch.tile).

        >>> import aneforge as af
        >>> af.tile(af.tensor([[1, 2]]), (2,)).tolist()
        [[1, 2, 1, 2]]
        """
        dims = _sizes(dims)
        return self.repeat((1,) * (self.ndim - len(dims)) + dims)

    def unflatten(self, dim: int, sizes) -> "Tensor":
        """Split axis `dim` into `sizes` (one may be -1): a reshape.

        >>> import aneforge as af
        >>> af.zeros(2, 6).unflatten(1, (2, -1)).shape
        (2, 2, 3)
        """
        d = dim % self.ndim
        inner = _infer_size(tuple(sizes), self.shape[d], self.shape)
        return self.reshape(self.shape[:d] + inner + self.shape[d + 1:])

    def view_as(self, other: "Tensor") -> "Tensor":
        """A view with `other`'s shape: reshape(other.shape).

        >>> import aneforge as af
        >>> af.zeros(6).view_as(af.zeros(2, 3)).shape
        (2, 3)
        """
        return self.reshape(other.shape)

    def nelement(self) -> int:
        """torch's alias of numel: the static element count (no program).

        >>> import aneforge as af
        >>> af.zeros(2, 3).nelement()
        6
        """
        return self.numel()

    def repeat_interleave(self, repeats=None, dim: int | None = None, *,
                          output_size: int | None = None) -> "Tensor":
        """Each element repeated `repeats` times along `dim` (the flattened tensor when None).
        An int repeats is an expand and a reshape; a tensor of per-element repeats gives a
        data-dependent length, so its values are read on the host (realized if pending) and
        the result is a constant index_select. With no `repeats`, self is the repeats:
        torch.repeat_interleave(r) is arange(len(r)) repeated r times.

        >>> import aneforge as af
        >>> af.tensor([[1, 2], [3, 4]]).repeat_interleave(2, dim=0).tolist()
        [[1, 2], [1, 2], [3, 4], [3, 4]]
        >>> af.tensor([1, 2]).repeat_interleave(af.tensor([1, 2])).tolist()
        [1, 2, 2]
        """
        if repeats is None:
            counts = self._counts(self.numel())
            return self._as_tensor(np.repeat(np.arange(counts.size, dtype=np.int32), counts))
        x, d = (self.reshape(-1), 0) if dim is None else (self, norm_dim(dim, self.ndim,
                                                                          "repeat_interleave"))
        n = x.shape[d]
        if isinstance(repeats, TensorBase) and repeats.numel() != 1:
            index = np.repeat(np.arange(n, dtype=np.int32), repeats._counts(n))
            out = x.index_select(d, index)
        else:
            r = int(repeats.item() if isinstance(repeats, TensorBase) else repeats)
            if r < 0:
                raise ValueError(f"repeat_interleave: repeats must be >= 0, got {r}")
            wide = x.unsqueeze(d + 1).expand(x.shape[:d + 1] + (r,) + x.shape[d + 1:])
            out = wide.reshape(x.shape[:d] + (n * r,) + x.shape[d + 1:])
        if output_size is not None and out.shape[d] != output_size:
            raise ValueError(f"repeat_interleave: output_size {output_size} but the repeats "
                             f"give {out.shape[d]}")
        return out

    def _counts(self, n: int) -> np.ndarray:
        """A repeats tensor's values on the host: n non-negative integers."""
        if self.dtype.is_float or self.dtype == dtypes.bool_:
            raise TypeError(f"repeat_interleave: repeats must be an integer tensor, got "
                            f"{self.dtype}")
        counts = self.numpy().reshape(-1).astype(np.int64)
        if counts.size != n or (counts < 0).any():
            raise ValueError(f"repeat_interleave: repeats must hold {n} non-negative counts "
                             f"(one per element along dim), got {counts.tolist()}")
        return counts

    def unfold(self, dimension: int, size: int, step: int) -> "Tensor":
        """Every window of `size` elements along `dimension`, `step` apart, as a new last axis
        (torch.Tensor.unfold): one strided slice per window offset, stacked.

        >>> import aneforge as af
        >>> af.arange(5).unfold(0, 2, 2).tolist()
        [[0, 1], [2, 3]]
        """
        d = norm_dim(dimension, self.ndim, "unfold")
        length = self.shape[d]
        if not 0 < size <= length or step < 1:
            raise ValueError(f"unfold: size {size} must be in [1, {length}] (the length of "
                             f"dimension {dimension}) and step {step} >= 1")
        n = (length - size) // step + 1
        head = (slice(None),) * d
        windows = [self[head + (slice(k, k + step * (n - 1) + 1, step),)] for k in range(size)]
        return stack(windows, dim=-1)

    def diag(self, diagonal: int = 0) -> "Tensor":
        """A 1-D tensor -> the square matrix with it on the `diagonal`-th diagonal (a select
        with a constant mask); a 2-D tensor -> that diagonal.

        >>> import aneforge as af
        >>> af.diag(af.tensor([1, 2])).tolist()
        [[1, 0], [0, 2]]
        """
        if self.ndim == 2:
            return self.diagonal(diagonal)
        if self.ndim != 1:
            raise ShapeError(f"diag: expects a 1-D or 2-D tensor, got shape {self.shape}")
        m, k = self.shape[0], abs(diagonal)
        n = m + k
        # k >= 0: row i holds v[i] (rows past m are zeros); k < 0: column j holds v[j]
        axis = 0 if diagonal >= 0 else 1
        grid = self.unsqueeze(1 - axis).expand((m, n) if axis == 0 else (n, m))
        if k:
            pad = zeros(grid.narrow(axis, 0, 1)).expand((k, n) if axis == 0 else (n, k))
            grid = cat([grid, pad], axis)
        return where(self._const(np.eye(n, k=diagonal, dtype=bool), dtypes.bool_), grid, zeros(grid))
