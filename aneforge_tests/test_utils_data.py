"""aneforge.utils.data against torch.utils.data: the same batches (structure, shapes, values)
for the same datasets and arguments, torch's argument errors, and generator-driven orders."""
import collections

import numpy as np
import pytest
import torch
import torch.utils.data as tud

import aneforge as af
import aneforge.utils.data as aud
from aneforge.utils.data import DataLoader, TensorDataset   # the import torch code uses


def _plain(x):
    """A batch as nested Python values (tensors of both libraries as lists)."""
    if isinstance(x, (af.Tensor, torch.Tensor)):
        return np.asarray(x.float() if isinstance(x, torch.Tensor) else x.numpy(),
                          np.float64).tolist()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [_plain(v) for v in x]
    return x


Point = collections.namedtuple("Point", "x y")
SAMPLES = {
    "numbers": [1, 2, 3, 4, 5],
    "floats": [0.5, 1.5, 2.5],
    "arrays": [np.full((2, 3), i, np.float32) for i in range(5)],
    "tuples": [(np.ones(2, np.float32) * i, i) for i in range(5)],
    "dicts": [{"x": np.arange(3, dtype=np.float32) + i, "label": i, "name": f"s{i}"} for i in range(5)],
    "lists": [[i, i + 1] for i in range(5)],
    "namedtuples": [Point(np.float32(i), i) for i in range(5)],
    "strings": ["a", "b", "c"],
}


class ListDataset:
    def __init__(self, items):
        self.items = items

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
@pytest.mark.parametrize("batch_size,drop_last", [(2, False), (2, True), (None, False)])
def test_batches_match_torch(kind, batch_size, drop_last):
    items = SAMPLES[kind]
    ours = list(DataLoader(ListDataset(items), batch_size=batch_size, drop_last=drop_last))
    theirs = list(tud.DataLoader(ListDataset(items), batch_size=batch_size, drop_last=drop_last))
    assert len(ours) == len(theirs) == len(DataLoader(ListDataset(items), batch_size=batch_size,
                                                      drop_last=drop_last))
    assert [_plain(b) for b in ours] == [_plain(b) for b in theirs]


def test_tensor_dataset_batches_match_torch_and_keep_dtypes():
    x = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
    y = np.arange(10)
    ours = TensorDataset(af.tensor(x), af.tensor(y))
    theirs = tud.TensorDataset(torch.tensor(x), torch.tensor(y))
    for a, b in zip(DataLoader(ours, batch_size=4), tud.DataLoader(theirs, batch_size=4)):
        assert isinstance(a, list) and a[0].dtype == af.float16 and a[1].dtype == af.int32
        np.testing.assert_allclose(a[0].numpy(), b[0].numpy(), atol=2e-3)
        assert a[1].tolist() == b[1].tolist()
    assert len(ours) == 10 and [t.tolist() for t in ours[3]] == [af.tensor(x[3]).tolist(), 3]
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(af.ones(3), af.ones(4))


def test_shuffle_follows_the_generator_and_covers_every_sample():
    ds = TensorDataset(af.arange(20))

    def order(gen):
        return [i for (b,) in DataLoader(ds, batch_size=6, shuffle=True, generator=gen)
                for i in b.tolist()]
    a = order(af.Generator().manual_seed(1))
    assert sorted(a) == list(range(20)) and a != list(range(20))
    assert order(af.Generator().manual_seed(1)) == a
    assert order(af.Generator().manual_seed(2)) != a
    af.manual_seed(3)
    first = [order(None), order(None)]          # epochs differ, and repeat under the same seed
    af.manual_seed(3)
    assert [order(None), order(None)] == first and first[0] != first[1]


def test_samplers_match_torch():
    seq = list(range(7))
    assert list(aud.SequentialSampler(seq)) == list(tud.SequentialSampler(seq))
    for drop in (False, True):
        ours = aud.BatchSampler(aud.SequentialSampler(seq), 3, drop)
        theirs = tud.BatchSampler(tud.SequentialSampler(seq), 3, drop)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
    loader = DataLoader(ListDataset(seq), batch_sampler=[[0, 2], [4, 6, 1]])
    assert [b.tolist() for b in loader] == [[0, 2], [4, 6, 1]]
    r = aud.RandomSampler(seq, replacement=True, num_samples=50,
                          generator=af.Generator().manual_seed(0))
    assert len(list(r)) == len(r) == 50 and set(r) <= set(seq)
    r = aud.RandomSampler(seq, num_samples=10, generator=af.Generator().manual_seed(0))
    assert len(list(r)) == 10 and sorted(list(r)[:7]) == seq
    assert sorted(aud.SubsetRandomSampler([3, 5, 9])) == [3, 5, 9]
    w = list(aud.WeightedRandomSampler([0.0, 1.0, 0.0], 5))
    assert w == [1] * 5
    sampled = list(DataLoader(ListDataset(seq), sampler=[6, 5, 4], batch_size=2))
    assert [b.tolist() for b in sampled] == [[6, 5], [4]]


def test_random_split_lengths_match_torch():
    for lengths in ([3, 7], [0.5, 0.5], [0.3, 0.3, 0.4], [0.34, 0.33, 0.33], [1.0]):
        ours = aud.random_split(range(10), lengths, generator=af.Generator().manual_seed(0))
        theirs = tud.random_split(range(10), lengths, generator=torch.Generator().manual_seed(0))
        assert [len(s) for s in ours] == [len(s) for s in theirs]
        assert sorted(i for s in ours for i in s) == list(range(10))
    a = aud.random_split(range(10), [5, 5], generator=af.Generator().manual_seed(4))
    b = aud.random_split(range(10), [5, 5], generator=af.Generator().manual_seed(4))
    assert [list(s) for s in a] == [list(s) for s in b]
    with pytest.raises(ValueError, match="Sum of input lengths"):
        aud.random_split(range(10), [3, 3])


def test_concat_subset_and_iterable_datasets():
    c = aud.ConcatDataset([ListDataset([1, 2]), ListDataset([3, 4, 5])])
    t = tud.ConcatDataset([ListDataset([1, 2]), ListDataset([3, 4, 5])])
    assert [c[i] for i in range(-5, 5)] == [t[i] for i in range(-5, 5)]
    assert c.cumulative_sizes == t.cumulative_sizes and len(c) == len(t)
    s = aud.Subset(ListDataset([10, 11, 12, 13]), [3, 1])
    assert [s[0], s[1], len(s)] == [13, 11, 2]

    class Stream(aud.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in DataLoader(Stream(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in DataLoader(Stream(), batch_size=3, drop_last=True)] == \
        [[0, 1, 2], [3, 4, 5]]
    assert [b.tolist() for b in DataLoader(aud.ChainDataset([Stream(), Stream()]),
                                           batch_size=7)] == [list(range(7))] * 2
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(Stream(), shuffle=True)


def test_loader_arguments_as_torch():
    ds = ListDataset(list(range(5)))
    loader = DataLoader(ds, batch_size=2, num_workers=4, pin_memory=True, persistent_workers=True,
                        prefetch_factor=2, collate_fn=lambda b: sum(b))
    assert list(loader) == [1, 5, 4] and aud.get_worker_info() is None
    for bad in (dict(sampler=[0], shuffle=True), dict(batch_sampler=[[0]], batch_size=2),
                dict(batch_size=None, drop_last=True), dict(num_workers=-1)):
        with pytest.raises(ValueError):
            DataLoader(ds, **bad)
        with pytest.raises(ValueError):
            tud.DataLoader(ds, **bad)
    with pytest.raises(RuntimeError, match="equal size"):
        list(DataLoader(ListDataset([[1, 2], [3]]), batch_size=2))
    with pytest.raises(RuntimeError, match="equal size"):
        list(DataLoader(ListDataset([np.ones(2), np.ones(3)]), batch_size=2))


def test_a_training_loop_over_a_loader_compiles_once():
    """Batches are host data (program inputs): every full batch reuses the step's program."""
    rng = np.random.default_rng(0)
    ds = TensorDataset(af.tensor(rng.standard_normal((32, 4)).astype(np.float32)),
                       af.tensor(rng.standard_normal((32, 1)).astype(np.float32)))
    model = af.nn.Linear(4, 1)
    opt = af.optim.SGD(model.parameters(), lr=0.05)
    af.clear_cache()
    losses = []
    for _ in range(3):
        for x, y in DataLoader(ds, batch_size=8, shuffle=True):
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert af.cache_info().misses == 1 and losses[-1] < losses[0]
