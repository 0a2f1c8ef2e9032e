"""Samplers (torch.utils.data.sampler): which indices a DataLoader reads, and in which batches."""
from __future__ import annotations

import numpy as np

from ...random import Generator, engine


class Sampler:
    """Yields dataset indices (or, for a batch sampler, lists of them)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _epoch_engine(generator):
    """The engine one epoch draws from: `generator`'s, else (as torch) a new generator seeded
    by a 64-bit draw from the default one (torch's `torch.empty((), dtype=torch.int64)
    .random_()`), so `af.manual_seed` fixes every epoch's order, torch's order."""
    if generator is not None:
        return engine(generator)
    return Generator().manual_seed(int(engine().random_int64())).engine


class RandomSampler(Sampler):
    """The indices in a random order (a new one each epoch), or `num_samples` drawn with
    replacement.

    >>> import aneforge as af
    >>> from aneforge.utils.data import RandomSampler
    >>> sorted(RandomSampler(range(5), generator=af.Generator().manual_seed(1)))
    [0, 1, 2, 3, 4]
    """

    def __init__(self, data_source, replacement: bool = False, num_samples: int | None = None,
                 generator=None):
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        # a generator, as torch's: the draws happen as the iteration reaches them (with
        # replacement, 32 indices at a time), in torch's order
        n, eng = len(self.data_source), _epoch_engine(self.generator)
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from eng.random_from_to((32,), 0, n).tolist()
            yield from eng.random_from_to((self.num_samples % 32,), 0, n).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from eng.randperm(n).tolist()
        yield from eng.randperm(n).tolist()[:self.num_samples % n]   # drawn even when empty

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order, without replacement."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        # torch draws from the default generator itself here (no per-epoch seed)
        for i in engine(self.generator).randperm(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probabilities proportional to `weights`."""

    def __init__(self, weights, num_samples: int, replacement: bool = True, generator=None):
        w = np.asarray(weights.numpy() if hasattr(weights, "numpy") else weights, np.float64)
        if w.ndim != 1 or (w < 0).any() or not np.isfinite(w).all() or w.sum() <= 0:
            raise ValueError("weights must be a 1-D sequence of finite, non-negative numbers "
                             "with a positive sum")
        self.weights, self.num_samples = w, num_samples
        self.replacement, self.generator = replacement, generator

    def __iter__(self):
        # torch.multinomial of the float64 weights, from the default generator itself
        picks = engine(self.generator).multinomial(self.weights[None], self.num_samples,
                                                   self.replacement)
        yield from picks[0].tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of `batch_size` indices from `sampler`; the last may be short unless `drop_last`.

    >>> from aneforge.utils.data import BatchSampler, SequentialSampler
    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
