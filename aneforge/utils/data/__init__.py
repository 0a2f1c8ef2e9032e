"""torch.utils.data for aneforge: datasets, samplers and the DataLoader, with torch's names,
arguments and defaults. Batches are aneforge tensors of host data (program inputs), so a new
batch of the same shape reuses the compiled training step.

>>> import aneforge as af
>>> from aneforge.utils.data import DataLoader, TensorDataset
>>> ds = TensorDataset(af.arange(10).float(), af.arange(10))
>>> [y.tolist() for _, y in DataLoader(ds, batch_size=4)]
[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
"""
from .dataloader import DataLoader, default_collate, default_convert, get_worker_info
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset,
                      TensorDataset, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info", "Dataset",
           "IterableDataset", "TensorDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]
