"""Datasets (torch.utils.data.dataset): map-style and iterable, TensorDataset, Subset,
ConcatDataset, ChainDataset, random_split."""
from __future__ import annotations

import bisect
import itertools
import math
import numbers

import numpy as np

from ...random import engine
from ...tensor import Tensor
from ...tensor.core import tensor


class Dataset:
    """A map-style dataset: `__getitem__(index)` and (usually) `__len__`. `a + b` concatenates."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream: `__iter__` yields samples (the DataLoader batches them)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other: "IterableDataset") -> "ChainDataset":
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the tensors' rows: `ds[i] == (t[i] for t in tensors)`. The DataLoader's
    default collation takes a batch's rows in one host copy per tensor.

    >>> import aneforge as af
    >>> ds = af.utils.data.TensorDataset(af.ones(3, 2), af.arange(3))
    >>> len(ds), ds[2][1].item()
    (3, 2)
    """

    def __init__(self, *tensors):
        if any(len(t) != len(tensors[0]) for t in tensors):
            raise ValueError("Size mismatch between tensors: TensorDataset needs tensors with "
                             "the same first dimension")
        self.tensors = tensors
        self._host = [(np.asarray(t.numpy() if isinstance(t, Tensor) else t), _dtype(t))
                      for t in tensors]

    def __getitem__(self, index):
        return tuple(tensor(a[index], dtype=dt) for a, dt in self._host)

    def rows(self, indices: list) -> tuple:
        """A batch as the default collation makes it: each tensor's rows `indices`, stacked."""
        return tuple(tensor(a[np.asarray(indices, np.int64)], dtype=dt) for a, dt in self._host)

    def __len__(self) -> int:
        return len(self._host[0][0])


def _dtype(t):
    return t.dtype if isinstance(t, Tensor) else None


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Datasets one after another (map-style only, as torch's).

    >>> from aneforge.utils.data import ConcatDataset
    >>> ds = ConcatDataset([[1, 2], [3]])
    >>> len(ds), ds[2], ds.cumulative_sizes
    (3, 3, [2, 3])
    """

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        if any(isinstance(d, IterableDataset) for d in self.datasets):
            raise TypeError("ConcatDataset does not support IterableDataset (use ChainDataset)")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)


def random_split(dataset, lengths, generator=None) -> list[Subset]:
    """Split `dataset` into non-overlapping random Subsets of `lengths` (counts, or fractions
    summing to 1: floor(n * f) each, the remainder handed out one by one from the first, as
    torch does).

    >>> import aneforge as af
    >>> from aneforge.utils.data import random_split
    >>> a, b = random_split(range(10), [0.7, 0.3], generator=af.Generator().manual_seed(0))
    >>> len(a), len(b), sorted(list(a) + list(b)) == list(range(10))
    (7, 3, True)
    """
    lengths = list(lengths)
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1 and not all(
            isinstance(x, numbers.Integral) for x in lengths):
        for i, f in enumerate(lengths):
            if not 0 <= f <= 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        counts = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError(f"Sum of input lengths ({sum(lengths)}) does not equal the length of the "
                         f"input dataset ({n})")
    order = engine(generator).randperm(n).tolist()        # torch.randperm's order
    ends = list(itertools.accumulate(lengths))
    return [Subset(dataset, order[end - k:end]) for k, end in zip(lengths, ends)]
