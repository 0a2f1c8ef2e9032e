"""What the digits examples (train_mlp.py, train_cnn.py) share: the data split, the batches,
the two training loops (aneforge and torch, same initial weights and batches), the progress
display, the comparison table and the loss plot."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import aneforge as af
import aneforge.nn.functional as F
from aneforge.hardware import kernels


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


def train_aneforge(model, train, test, epochs, batch_size, lr, weight_decay, progress=True,
                   make_optimizer=None):
    make_optimizer = make_optimizer or (lambda params: af.optim.AdamW(
        params, lr=lr, weight_decay=weight_decay))
    opt = make_optimizer(model.parameters())
    (x, y), losses = train, []
    steps = list(batches(len(x), batch_size, epochs))
    before = af.cache_info().misses
    start = time.perf_counter()
    log = Progress("aneforge", len(steps), epochs, progress)

    # The step is torch's, unchanged: backward() scales the fp16 gradients automatically.
    @af.compile            # captured on the first step, replayed after: one program per step
    def train_step(xb, yb):
        loss = F.cross_entropy(model(af.tensor(xb)), af.tensor(yb))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    times, compiled = [], []
    for idx in steps:
        times.append(time.perf_counter())
        losses.append(train_step(x[idx], y[idx]).item())
        compiled.append(kernels.active() == "numba")      # or the numpy reference (same bits)
        log.step(losses[-1])
    log.close()
    seconds = time.perf_counter() - start
    times = np.diff(times + [start + seconds])
    compiles = af.cache_info().misses - before
    with af.no_grad():
        model.eval()
        pred = model(af.tensor(test[0])).argmax(1).numpy()
        model.train()
    return dict(losses=losses, accuracy=float((pred == test[1]).mean()), seconds=seconds,
                compiles=compiles, steps=len(steps), step_times=times, compiled=compiled)


def train_torch(model, train, test, epochs, batch_size, lr, weight_decay, progress=True,
                make_optimizer=None):
    import torch
    make_optimizer = make_optimizer or (lambda params: torch.optim.AdamW(
        params, lr=lr, weight_decay=weight_decay))
    opt = make_optimizer(model.parameters())
    (x, y), losses = train, []
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    steps = list(batches(len(x), batch_size, epochs))
    log = Progress("torch", len(steps), epochs, progress)
    start, times = time.perf_counter(), []
    for idx in steps:
        times.append(time.perf_counter())
        loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        log.step(losses[-1])
    log.close()
    seconds = time.perf_counter() - start
    times = np.diff(times + [start + seconds])
    with torch.no_grad():
        pred = model(torch.from_numpy(test[0])).argmax(1).numpy()
    return dict(losses=losses, accuracy=float((pred == test[1]).mean()), seconds=seconds,
                compiles=None, steps=len(steps), step_times=times)


def load_into_torch(model, twin):
    """Give the torch twin aneforge's initial weights (same state_dict names)."""
    import torch
    twin.load_state_dict({k: torch.as_tensor(np.asarray(v, np.float32))
                          for k, v in model.state_dict().items()})
    return twin


class Progress:
    """tqdm's bar on a terminal; elsewhere (a log file, a pipe, a notebook) one line per epoch,
    so a long run never floods the log with bar redraws."""

    def __init__(self, name: str, total: int, epochs: int, enabled: bool = True, stream=None):
        self.name, self.total, self.enabled = name, total, enabled
        self.stream = stream or sys.stdout
        self.per_epoch, self.epochs = max(1, total // max(1, epochs)), epochs
        self.done, self.epoch_losses, self.start = 0, [], time.perf_counter()
        self.bar = self._bar() if enabled and self.stream.isatty() else None

    def _bar(self):
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        return tqdm(total=self.total, desc=f"{self.name:>8}", unit="step", file=self.stream)

    def step(self, loss: float) -> None:
        self.done += 1
        self.epoch_losses.append(loss)
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        elif self.enabled and (self.done % self.per_epoch == 0 or self.done == self.total):
            self._line()

    def _line(self) -> None:
        epoch = -(-self.done // self.per_epoch)
        print(f"{self.name:>8} epoch {epoch}/{self.epochs}: mean loss "
              f"{np.mean(self.epoch_losses):.4f}, {time.perf_counter() - self.start:.1f} s",
              file=self.stream, flush=True)
        self.epoch_losses = []

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def steady_state(a: dict, t: dict) -> str:
    """Per-step times without the first step (aneforge captures and compiles it), over the
    steps the simulator's compiled kernels ran; the steps before they came in (a fresh
    install compiles them in the background) are counted and said."""
    ms = lambda times: np.median(times) * 1e3                   # noqa: E731
    fast = [s for s, c in zip(a["step_times"][1:], a["compiled"][1:]) if c]
    slow = len(a["step_times"]) - 1 - len(fast)
    line = (f"steady state (median step after the first): aneforge "
            f"{ms(fast) if fast else ms(a['step_times'][1:]):.2f} ms, torch "
            f"{ms(t['step_times'][1:]):.2f} ms; aneforge's first step (capture, compile): "
            f"{a['step_times'][0]:.2f} s")
    if slow:
        line += (f"\n{slow} of aneforge's steps ran the simulator's numpy reference kernels "
                 f"(same bits, slower): numba is absent or switched off, or, on a first run, "
                 f"was compiling its kernels in the background (once per machine, cached)"
                 + ("" if fast else "; run again for the compiled kernels' speed"))
    return line


def table(a: dict, t: dict, window: int) -> str:
    def last(r):
        return float(np.mean(r["losses"][-window:]))
    rows = [("final loss (mean of last epoch)", f"{last(a):.4f}", f"{last(t):.4f}"),
            ("test accuracy", f"{a['accuracy']:.2%}", f"{t['accuracy']:.2%}"),
            ("wall time", f"{a['seconds']:.2f} s", f"{t['seconds']:.2f} s"),
            # the median: a fresh install's first steps include numba's one-time kernel JIT
            ("time per step (median)", f"{np.median(a['step_times']) * 1e3:.2f} ms",
             f"{np.median(t['step_times']) * 1e3:.2f} ms"),
            ("compiles", str(a["compiles"]), "n/a (eager)")]
    width = max(len(r[0]) for r in rows)
    lines = [f"{'':<{width}}  {'aneforge (sim)':>16}  {'torch fp32':>12}"]
    lines += [f"{r[0]:<{width}}  {r[1]:>16}  {r[2]:>12}" for r in rows]
    return "\n".join(lines)


def report(a: dict, t: dict, heading: str, window: int, path: Path, title: str) -> None:
    """Print the comparison (heading, table, steady-state step times) and save the loss plot."""
    print(f"\n{heading}\n")
    print(table(a, t, window=window))
    print(steady_state(a, t))
    plot(a, t, path, title)
    print(f"\nloss curves: {path}")


def plot(a: dict, t: dict, path: Path | None, title: str):
    """The two loss curves and their absolute difference, saved to `path` when given; the
    figure is returned (a notebook shows it inline)."""
    import matplotlib
    if "inline" not in matplotlib.get_backend():
        matplotlib.use("Agg")                   # a file, never a window
    import matplotlib.pyplot as plt
    fig, (ax, dx) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True,
                                 gridspec_kw={"height_ratios": [3, 1.3]})
    ax.plot(a["losses"], label=f"aneforge ({af.get_backend().name}, fp16)", lw=1.2)
    ax.plot(t["losses"], label="torch (fp32)", lw=1.2, alpha=0.8, ls="--")
    ax.set(ylabel="cross-entropy loss", yscale="log", title=title)
    ax.legend()
    diff = np.abs(np.array(a["losses"]) - np.array(t["losses"]))
    dx.plot(diff, color="k", lw=0.8)
    dx.set(xlabel="step", ylabel="|difference|", yscale="log")
    fig.tight_layout()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120)
    return fig


def arguments(doc: str, epochs: int, lr: float) -> argparse.ArgumentParser:
    """The command line both examples take; each adds its model's own options."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=epochs)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=lr)
    p.add_argument("--weight-decay", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path("examples/out"))
    p.add_argument("--no-progress", action="store_true")
    return p
