"""DataLoader (torch.utils.data.DataLoader) and torch's default collation.

Worker processes are accepted (`num_workers`, `pin_memory`, `prefetch_factor`, ...) and the
loading runs in this process: batches are host data the next program reads, and aneforge's
programs, not the loading, are what a training step waits for. `get_worker_info()` is None,
as in torch's main process.
"""
from __future__ import annotations

import collections.abc as abc
import numbers

import numpy as np

from ...random import engine
from ...tensor import Tensor
from ...tensor.core import tensor
from .dataset import IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


def get_worker_info():
    """None: loading runs in this process (torch's answer outside a worker)."""
    return None


def _stack(batch: list) -> Tensor:
    """One leaf holding the samples stacked along a new first axis (one host copy)."""
    first = batch[0]
    arrays = [np.asarray(b.numpy() if isinstance(b, Tensor) else b) for b in batch]
    if any(a.shape != arrays[0].shape for a in arrays):
        raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                           f"{[a.shape for a in arrays]} in one batch; pad the samples or pass a "
                           f"collate_fn")
    return tensor(np.stack(arrays), dtype=first.dtype if isinstance(first, Tensor) else None)


def default_collate(batch: list):
    """torch's default collation: tensors, numpy arrays and numbers become one tensor with a
    new batch axis; dicts, tuples and lists collate field by field (a tuple gives a list, as
    torch's); strings stay lists.

    >>> import aneforge as af
    >>> from aneforge.utils.data import default_collate
    >>> out = default_collate([{"x": af.ones(2), "y": 1}, {"x": af.zeros(2), "y": 2}])
    >>> out["x"].shape, out["y"].tolist()
    ((2, 2), [1, 2])
    """
    elem = batch[0]
    if isinstance(elem, Tensor) or _is_torch(elem):
        return _stack(batch)
    if isinstance(elem, np.ndarray) and elem.dtype.kind not in "USO":
        return _stack(batch)
    if isinstance(elem, (np.generic, numbers.Number)) and not isinstance(elem, (str, bytes)):
        return tensor(np.asarray(batch))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, abc.Mapping):
        return _same_type(elem, {k: default_collate([d[k] for d in batch]) for k in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):          # a namedtuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, abc.Sequence):
        if any(len(b) != len(elem) for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(s)) for s in zip(*batch)]
        return columns if isinstance(elem, tuple) else _same_type(elem, columns)
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem).__name__} (pass a collate_fn)")


def default_convert(data):
    """torch's conversion without batching (batch_size=None): numpy arrays become tensors,
    containers are converted field by field, anything else is returned as is."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "USO":
        return tensor(data)
    if isinstance(data, abc.Mapping):
        return {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]          # a list, as torch's
    if isinstance(data, abc.Sequence) and not isinstance(data, (str, bytes)):
        return _same_type(data, [default_convert(d) for d in data])
    return data


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def _same_type(elem, columns):
    try:
        return type(elem)(columns)
    except TypeError:               # a container type that cannot be built from a plain one
        return columns


class DataLoader:
    """torch's DataLoader: batches of a dataset, with torch's arguments and defaults.

    >>> import aneforge as af
    >>> from aneforge.utils.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(af.randn(10, 3), af.arange(10))
    >>> loader = DataLoader(ds, batch_size=4, shuffle=True, drop_last=True,
    ...                     generator=af.Generator().manual_seed(0))
    >>> [(x.shape, y.shape) for x, y in loader]
    [((4, 3), (4,)), ((4, 3), (4,))]
    """

    def __init__(self, dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler=None, batch_sampler=None, num_workers: int = 0, collate_fn=None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        self.dataset, self.num_workers, self.pin_memory = dataset, num_workers, pin_memory
        self.timeout, self.worker_init_fn, self.generator = timeout, worker_init_fn, generator
        self.prefetch_factor, self.persistent_workers = prefetch_factor, persistent_workers
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle, "
                             "sampler and batch_sampler options (the dataset decides its order)")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else \
                SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size, self.drop_last = batch_size, drop_last
        self.sampler, self.batch_sampler = sampler, batch_sampler
        self._auto = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn if collate_fn is not None else \
            (default_collate if self._auto else default_convert)

    def __iter__(self):
        # torch's iterator draws its workers' base seed first (a 64-bit draw from `generator`,
        # else the default generator); drawn here too, so the stream advances as torch's
        engine(self.generator).random_int64()
        if self._iterable:
            return self._iter_stream()
        if not self._auto:
            return (self.collate_fn(self.dataset[i]) for i in self.sampler)
        return (self._fetch(batch) for batch in self.batch_sampler)

    def _fetch(self, indices: list):
        if isinstance(self.dataset, TensorDataset) and self.collate_fn is default_collate:
            return list(self.dataset.rows(indices))    # default_collate's result, one copy each
        getitems = getattr(self.dataset, "__getitems__", None)
        samples = getitems(indices) if getitems else [self.dataset[i] for i in indices]
        return self.collate_fn(samples)

    def _iter_stream(self):
        if not self._auto:
            yield from (self.collate_fn(s) for s in self.dataset)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler) if self._auto else len(self.sampler)
