"""Train an MLP on scikit-learn's handwritten digits with aneforge (default backend: the ANE
simulator off macOS), then the same network from the same initial weights on the same batches
in PyTorch fp32, and compare.

    python examples/train_mlp.py [--epochs 20] [--batch-size 64] [--out examples/out]

Prints a side-by-side table (final loss, test accuracy, wall time, compiles) and saves the two
loss curves to OUT/train_mlp_loss.png.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F


def load_data(seed: int = 0):
    """Digits scaled to [0, 1]; a fixed shuffled split of 1437 train / 360 test images."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x, y = (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    return (x[:1437], y[:1437]), (x[1437:], y[1437:])


def batches(n: int, batch_size: int, epochs: int, seed: int = 0):
    """The same index batches for both frameworks; the last partial batch is dropped so every
    step has one shape (one compile)."""
    rng = np.random.default_rng(seed)
    for _ in range(epochs):
        perm = rng.permutation(n)
        for i in range(0, n - batch_size + 1, batch_size):
            yield perm[i:i + batch_size]


def make_model(hidden: int = 128) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.GELU(), nn.Linear(hidden, 10))


def train_aneforge(model, train, test, epochs, batch_size, lr, weight_decay, progress=True,
                   make_optimizer=None):
    make_optimizer = make_optimizer or (lambda params: af.optim.AdamW(
        params, lr=lr, weight_decay=weight_decay))
    opt = make_optimizer(model.parameters())
    scaler = af.amp.GradScaler(init_scale=256.0)
    (x, y), losses = train, []
    steps = list(batches(len(x), batch_size, epochs))
    before = af.cache_info().misses
    start = time.perf_counter()
    bar = _progress(steps, "aneforge", progress)

    @af.compile            # captured on the first step, replayed after: one program per step
    def train_step(xb, yb):
        loss = F.cross_entropy(model(af.tensor(xb)), af.tensor(yb))
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    for idx in bar:
        losses.append(train_step(x[idx], y[idx]).item())
        if hasattr(bar, "set_postfix"):
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
    seconds = time.perf_counter() - start
    compiles = af.cache_info().misses - before
    with af.no_grad():
        model.eval()
        pred = model(af.tensor(test[0])).argmax(1).numpy()
        model.train()
    return dict(losses=losses, accuracy=float((pred == test[1]).mean()), seconds=seconds,
                compiles=compiles, steps=len(steps))


def train_torch(model, train, test, epochs, batch_size, lr, weight_decay, progress=True,
                make_optimizer=None):
    import torch
    make_optimizer = make_optimizer or (lambda params: torch.optim.AdamW(
        params, lr=lr, weight_decay=weight_decay))
    opt = make_optimizer(model.parameters())
    (x, y), losses = train, []
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    steps = list(batches(len(x), batch_size, epochs))
    start = time.perf_counter()
    for idx in _progress(steps, "torch", progress):
        loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    with torch.no_grad():
        pred = model(torch.from_numpy(test[0])).argmax(1).numpy()
    return dict(losses=losses, accuracy=float((pred == test[1]).mean()), seconds=seconds,
                compiles=None, steps=len(steps))


def torch_twin(model):
    """The same architecture in torch fp32, with aneforge's initial weights."""
    import torch
    hidden = model[0].out_features
    twin = torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.GELU(),
                               torch.nn.Linear(hidden, 10))
    twin.load_state_dict({k: torch.as_tensor(np.asarray(v, np.float32))
                          for k, v in model.state_dict().items()})
    return twin


def _progress(items, name, enabled):
    if not enabled:
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=f"{name:>8}", unit="step")


def table(a: dict, t: dict, window: int) -> str:
    def last(r):
        return float(np.mean(r["losses"][-window:]))
    rows = [("final loss (mean of last epoch)", f"{last(a):.4f}", f"{last(t):.4f}"),
            ("test accuracy", f"{a['accuracy']:.2%}", f"{t['accuracy']:.2%}"),
            ("wall time", f"{a['seconds']:.2f} s", f"{t['seconds']:.2f} s"),
            ("time per step", f"{a['seconds'] / a['steps'] * 1e3:.2f} ms",
             f"{t['seconds'] / t['steps'] * 1e3:.2f} ms"),
            ("compiles", str(a["compiles"]), "n/a (eager)")]
    width = max(len(r[0]) for r in rows)
    lines = [f"{'':<{width}}  {'aneforge (sim)':>16}  {'torch fp32':>12}"]
    lines += [f"{r[0]:<{width}}  {r[1]:>16}  {r[2]:>12}" for r in rows]
    return "\n".join(lines)


def plot(a: dict, t: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, dx) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True,
                                 gridspec_kw={"height_ratios": [3, 1.3]})
    ax.plot(a["losses"], label=f"aneforge ({af.get_backend().name}, fp16)", lw=1.2)
    ax.plot(t["losses"], label="torch (fp32)", lw=1.2, alpha=0.8, ls="--")
    ax.set(ylabel="cross-entropy loss", yscale="log",
           title="MLP on digits: same init, same batches")
    ax.legend()
    diff = np.abs(np.array(a["losses"]) - np.array(t["losses"]))
    dx.plot(diff, color="k", lw=0.8)
    dx.set(xlabel="step", ylabel="|difference|", yscale="log")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("examples/out"))
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)

    train, test = load_data(args.seed)
    af.manual_seed(args.seed)
    model = make_model(args.hidden)
    twin = torch_twin(model)
    hp = (args.epochs, args.batch_size, args.lr, args.weight_decay, not args.no_progress)
    a = train_aneforge(model, train, test, *hp)
    t = train_torch(twin, train, test, *hp)
    print(f"\nMLP 64-{args.hidden}-10 on digits, {a['steps']} steps of batch {args.batch_size}, "
          f"AdamW lr={args.lr}\n")
    print(table(a, t, window=len(train[0]) // args.batch_size))
    path = args.out / "train_mlp_loss.png"
    plot(a, t, path)
    print(f"\nloss curves: {path}")
    return {"aneforge": a, "torch": t}


if __name__ == "__main__":
    main()
