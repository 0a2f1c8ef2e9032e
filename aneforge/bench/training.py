"""Training-step time of the digits MLP (examples/train_mlp.py's 64-128-10 network, AdamW):
aneforge on the current backend against torch eager CPU fp32, side by side, and the number of
compiles over 200 steps."""
from __future__ import annotations

import time

import numpy as np

from . import section, settings


def _data(batch: int):
    rng = np.random.default_rng(0)
    x = rng.random((settings.steps, batch, 64)).astype(np.float32)
    y = rng.integers(0, 10, (settings.steps, batch))
    return x, y


def _aneforge(batch: int) -> tuple[float, int]:
    import aneforge as af
    import aneforge.nn as nn
    import aneforge.nn.functional as F
    af.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10))
    opt = af.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    x, y = _data(batch)
    af.clear_cache()                     # count this loop's compiles from a cold cache
    before = af.cache_info().misses
    times = []
    for i in range(settings.steps):
        start = time.perf_counter()
        loss = F.cross_entropy(model(af.tensor(x[i])), af.tensor(y[i]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        times.append(time.perf_counter() - start)
    return float(np.median(times[len(times) // 10:])), af.cache_info().misses - before


def _torch(batch: int) -> float:
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    x, y = _data(batch)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    times = []
    for i in range(settings.steps):
        start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        times.append(time.perf_counter() - start)
    return float(np.median(times[len(times) // 10:]))


@section("training")
def training() -> list[tuple[str, float, str]]:
    rows = []
    for batch in (64, 256):
        step, compiles = _aneforge(batch)
        rows.append((f"aneforge MLP step, batch {batch} (median)", step * 1e3, "ms"))
        rows.append((f"  compiles over {settings.steps} steps", compiles, ""))
        try:
            ref = _torch(batch)
        except ImportError:
            rows.append(("  torch not installed: no ratio", 0.0, ""))
            continue
        rows.append((f"torch eager fp32 step, batch {batch}", ref * 1e3, "ms"))
        rows.append((f"  ratio aneforge / torch, batch {batch}", step / ref, "x"))
    return rows
