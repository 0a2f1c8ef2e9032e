"""Scans and orderings: cumsum, cumprod, cummax, cummin, logcumsumexp, sort, argsort, topk.
The ANE has no scan or sort unit: each is a composite of registered ops."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import ShapeError
from ..ops._grad import zeros
from .args import _dim_or_axis, minmax, norm_dim
from .base import TensorBase
from .elementwise import where
from .movement import cat


def _logcumsumexp_link(x, out, d: int):
    """Zeros whose gradient is logcumsumexp's, torch's formula d out_j / d x_i = exp(x_i -
    out_j) for i <= j, pairwise ([..., n, n]): the cumsum's own rule divides by the running
    sum, which overflows fp32 when the early terms are tiny (x = [0, 100])."""
    xs, os = x.movedim(d, -1).float(), out.movedim(d, -1).float()
    diff = xs.unsqueeze(-2) - os.unsqueeze(-1)                  # [..., j, i]
    n = xs.shape[-1]
    keep = x._const(np.tri(n, dtype=bool), dtypes.bool_) & diff.isfinite()
    s = where(keep, diff, float("-inf")).exp().sum(-1)         # 1 at every j: forward 0
    return (s - s.detach()).to(x.dtype).movedim(-1, d)


class ScanMixin(TensorBase):
    """Running reductions and orderings along one axis."""
    __slots__ = ()

    def _scan(self, dim: int, combine, fill) -> "Tensor":
        """Inclusive scan along `dim` in log2(n) steps (Hillis-Steele): each step combines
        every element with the one 2**k before it (`fill` where there is none)."""
        x, d = self, dim % max(self.ndim, 1)
        n, k = x.shape[d], 1
        while k < n:
            head = x.narrow(d, 0, k)
            x = combine(x, cat([fill(head), x.narrow(d, 0, n - k)], d))
            k *= 2
        return x

    def cumsum(self, dim: int | None = None, dtype=None, *, axis=None) -> "Tensor":
        """Running sum along `dim`. Floating tensors use a matmul with a triangular 0/1 matrix
        (the wide accumulator: one rounding per result); integers a log-step scan (exact).

        >>> import aneforge as af
        >>> af.cumsum(af.tensor([1, 2, 3]), 0).tolist()
        [1, 3, 6]
        """
        dim = _dim_or_axis(dim, axis, "cumsum", required=True)
        x = self.to(dtype) if dtype is not None else self.int() if self.dtype == dtypes.bool_ else self
        dim = norm_dim(dim, x.ndim, "cumsum")
        if x.ndim == 0:
            return x
        if not x.dtype.is_float:
            return x._scan(dim, lambda a, b: a + b, lambda h: h - h)
        n = x.shape[dim]
        upper = self._const(np.triu(np.ones((n, n))), x.dtype)
        return (x.movedim(dim, -1) @ upper).movedim(-1, dim)

    def cumprod(self, dim: int | None = None, dtype=None, *, axis=None) -> "Tensor":
        """Running product along `dim` (a log-step scan of multiplications).

        >>> import aneforge as af
        >>> af.cumprod(af.tensor([1.0, 2.0, 3.0]), 0).tolist()
        [1.0, 2.0, 6.0]
        """
        dim = _dim_or_axis(dim, axis, "cumprod", required=True)
        x = self.to(dtype) if dtype is not None else self.int() if self.dtype == dtypes.bool_ else self
        return x if x.ndim == 0 else x._scan(dim, lambda a, b: a * b, lambda h: h - h + 1)

    def _cumulative(self, dim: int, pick) -> "minmax":
        """cummax / cummin: each position against all earlier ones ([..., n, n]: O(n^2)),
        the masked-out ones replaced by the first element (always a candidate)."""
        d = dim % max(self.ndim, 1)
        if 0 in self.shape:            # nothing to compare: empty values (gradient kept), indices
            return minmax(self + 0, self._as_tensor(np.zeros(self.shape, np.int32)))
        x = self.movedim(d, -1) if self.ndim else self.reshape(1)
        n = x.shape[-1]
        earlier = self._const(np.tri(n, dtype=bool), dtypes.bool_)         # [i, j]: j <= i
        cand = where(earlier, x.unsqueeze(-2), x.narrow(-1, 0, 1).unsqueeze(-1))
        values = pick(cand)
        hit = earlier & (x.unsqueeze(-2) == values.unsqueeze(-1))
        index = where(hit, self._const(np.arange(n), dtypes.int32), self._const(0, dtypes.int32)).amax(-1)
        if not self.ndim:
            return minmax(values.reshape(()), index.reshape(()))
        return minmax(values.movedim(-1, d), index.movedim(-1, d))

    def cummax(self, dim: int | None = None, *, axis=None) -> "minmax":
        """(values, indices) of the running maximum along `dim`; on ties the latest index,
        as torch.

        >>> import aneforge as af
        >>> af.cummax(af.tensor([1, 3, 2]), 0).values.tolist()
        [1, 3, 3]
        """
        dim = _dim_or_axis(dim, axis, "cummax", required=True)
        return self._cumulative(dim, lambda c: c.amax(-1))

    def cummin(self, dim: int | None = None, *, axis=None) -> "minmax":
        """(values, indices) of the running minimum along `dim`.

        >>> import aneforge as af
        >>> af.cummin(af.tensor([3, 1, 2]), 0).indices.tolist()
        [0, 1, 1]
        """
        dim = _dim_or_axis(dim, axis, "cummin", required=True)
        return self._cumulative(dim, lambda c: c.amin(-1))

    def logcumsumexp(self, dim: int | None = None, *, axis=None) -> "Tensor":
        """log(cumsum(exp(x))) along `dim`: shifted by the max along `dim`, exponentiated and
        summed in fp32 (no underflow of early terms).

        >>> import aneforge as af
        >>> af.logcumsumexp(af.tensor([0.0, 0.0]), 0).tolist()
        [0.0, 0.693359375]
        """
        dim = _dim_or_axis(dim, axis, "logcumsumexp", required=True)
        x = self._floating()
        m = x.amax(dim, keepdim=True).detach()
        out = ((x - m).float().exp().cumsum(dim).log() + m.float()).to(x.dtype)
        if not out.requires_grad or not x.ndim:
            return out
        return out.detach() + _logcumsumexp_link(x, out.detach(), dim % x.ndim)

    def sort(self, dim: int | None = None, descending: bool = False, stable: bool = False, *,
             axis=None) -> "minmax":
        """(values, indices) sorted along `dim`, stable. No sort unit exists on the ANE: each
        element's rank comes from comparing all pairs ([..., n, n], O(n^2)), and the values
        are picked by rank with a one-hot select (exact).

        >>> import aneforge as af
        >>> af.sort(af.tensor([3.0, 1.0, 2.0])).indices.tolist()
        [1, 2, 0]
        """
        dim = -1 if dim is None and axis is None else _dim_or_axis(dim, axis, "sort")
        d = dim % max(self.ndim, 1)
        x = self.movedim(d, -1) if self.ndim else self.reshape(1)
        n = x.shape[-1]
        xi, xj = x.unsqueeze(-1), x.unsqueeze(-2)
        first = (xj > xi) if descending else (xj < xi)
        tie = (xj == xi) & self._const(np.tri(n, k=-1, dtype=bool), dtypes.bool_)
        rank = (first | tie).sum(-1)                                  # [..., n] (int32)
        onehot = rank.unsqueeze(-2) == self._const(np.arange(n).reshape(n, 1), dtypes.int32)
        values = where(onehot, xj, zeros(xj)).sum(-1) if x.dtype != dtypes.bool_ else \
            onehot & xj
        values = values.any(-1) if x.dtype == dtypes.bool_ else values
        index = where(onehot, self._const(np.arange(n), dtypes.int32), self._const(0, dtypes.int32)).sum(-1)
        if not self.ndim:
            return minmax(values.reshape(()), index.reshape(()))
        return minmax(values.movedim(-1, d), index.movedim(-1, d))

    def argsort(self, dim: int | None = None, descending: bool = False, stable: bool = False, *,
             axis=None) -> "Tensor":
        """The indices that sort `dim` (see sort).

        >>> import aneforge as af
        >>> af.argsort(af.tensor([3, 1, 2]), descending=True).tolist()
        [0, 2, 1]
        """
        dim = -1 if dim is None and axis is None else _dim_or_axis(dim, axis, "argsort")
        return self.sort(dim, descending, stable).indices

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> "minmax":
        """(values, indices) of the k largest (or smallest) elements along `dim`, in order: the
        first k of `sort` (pairwise ranks and exact one-hot picks; differentiable in values).

        >>> import aneforge as af
        >>> v, i = af.topk(af.tensor([1.0, 5.0, 3.0, 4.0]), 2)
        >>> v.tolist(), i.tolist()
        ([5.0, 4.0], [1, 3])
        """
        n = self.shape[norm_dim(dim, self.ndim, "topk")] if self.ndim else 1
        if not 0 <= k <= n:
            raise ShapeError(f"topk: k={k} is out of range for a dimension of size {n}")
        values, indices = self.sort(dim, descending=largest)
        if not self.ndim:
            return minmax(values, indices)
        return minmax(values.narrow(dim, 0, k), indices.narrow(dim, 0, k))
