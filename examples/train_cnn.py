"""Train a small CNN on scikit-learn's 8x8 handwritten digits with aneforge (default backend:
the ANE simulator off macOS), then the same network from the same initial weights on the same
batches in PyTorch fp32, and compare.

    python examples/train_cnn.py [--epochs 20] [--batch-size 64] [--out examples/out] [--profile]

The network is written once, against torch's API, and built from either library:
Conv2d(1, 8, 3, padding=1) - ReLU - MaxPool2d(2) - Conv2d(8, 16, 3, padding=1) - ReLU -
max_pool2d(2) - Linear(64, 10). Prints a side-by-side table (final loss, test accuracy, wall
time, time per step, compiles) and saves the two loss curves with their difference to
OUT/train_cnn_loss.png.

How the convolutions train. The engine's native `conv` takes its weight as a compile-time
constant (coremltools' MIL `conv` op; github.com/sbryngelson/ane-guide), so a conv whose weight
changes every step would need a recompile every step, and compiles are slow and, on the direct
route, limited per process. aneforge's `Conv2d` therefore lowers to im2col + matmul: the padded
input's kh*kw shifted views (slices, zero padding built as x - x) are stacked into
[N, C, kh*kw, Ho, Wo] and contracted with the weight, a program input like every parameter, in
one matmul. The weight gradient is a matmul of the same views; the input gradient pads each
view's gradient back into place and sums them. Max pooling is a select chain over the window's strided slices. So the whole
training step -- forward, backward, AdamW update, loss-scale check -- is ONE program of
slices, concats, pads, matmuls and elementwise ops, compiled once and replayed every step.

`--profile` measures that program on the simulator: its op counts, its run time, and the time
of the two convolutions alone (forward and backward at the step's shapes, a program of their
own) as a share of it. Measured (20 epochs; docs/training.md has the table): test accuracy
97.22% vs torch's 97.78%; a 480-op step program with no `conv` op, 31 inputs, one compile;
about 40 ms per step on the simulator vs 12 ms for torch fp32 on the CPU, the convolutions
about 45% of the simulator's time (mostly their matmuls, which it models bit by bit).
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))   # _common.py, also when imported
from _common import (arguments, load_data as load_flat, load_into_torch,  # noqa: E402
                     report, train_aneforge, train_torch)


def define_cnn(nn, F):
    """The CNN class for a library with torch's `nn` and `nn.functional` (torch or aneforge)."""

    class CNN(nn.Module):
        def __init__(self, c1: int = 8, c2: int = 16):
            super().__init__()
            self.conv1 = nn.Conv2d(1, c1, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
            self.fc = nn.Linear(c2 * 2 * 2, 10)

        def forward(self, x):                                   # x: [N, 1, 8, 8]
            x = self.pool(F.relu(self.conv1(x)))                # [N, c1, 4, 4]
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)          # [N, c2, 2, 2]
            return self.fc(x.flatten(1))
    return CNN


def make_model(c1: int = 8, c2: int = 16) -> nn.Module:
    return define_cnn(nn, F)(c1, c2)


def torch_twin(model):
    """The same network in torch fp32, with aneforge's initial weights."""
    import torch
    twin = define_cnn(torch.nn, torch.nn.functional)(model.conv1.out_channels,
                                                     model.conv2.out_channels)
    return load_into_torch(model, twin)


def with_threads(n: int, fn, *args):
    """fn(*args) with torch limited to n intra-op threads (restored after)."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        return fn(*args)
    finally:
        torch.set_num_threads(before)


def load_data(seed: int = 0):
    """The digits split of train_mlp.py, as [N, 1, 8, 8] images."""
    (x, y), (xt, yt) = load_flat(seed)
    return (x.reshape(-1, 1, 8, 8), y), (xt.reshape(-1, 1, 8, 8), yt)


# ---- --profile: what the step program holds and what its convolutions cost ------------------
def _recorded(fn):
    """The optimized program (and its inputs) that computes the tensors `fn()` returns: the
    largest of the programs run."""
    from aneforge.core.realization import recording
    with recording() as runs:
        af.realize(*fn())
    return max(runs, key=lambda r: len(r.program.main.block.operations))


def _sim_ms(runs, repeat: int) -> list[float]:
    """Median simulator time (ms) of one run of each program (no host recording or replay),
    timed in alternation so that load from other processes hits them alike."""
    from aneforge.hardware.numerics import get_numerics
    from aneforge.runtime.sim import SimBackend
    exes = [(SimBackend().compile(r.program, get_numerics()), r.inputs) for r in runs]
    times = [[] for _ in exes]
    warm = 2                    # the second run builds the run plan (runtime/sim.py)
    for k in range(warm + repeat):
        for (exe, inputs), ts in zip(exes, times):
            start = time.perf_counter()
            exe.run(inputs)
            ts.append(time.perf_counter() - start)
    return [statistics.median(ts[warm:]) * 1e3 for ts in times]


def _op_counts(run) -> dict:
    counts: dict = {}
    for op in run.program.main.block.operations:
        if op.type != "const":
            counts[op.type] = counts.get(op.type, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def profile(c1: int = 8, c2: int = 16, batch_size: int = 64, repeat: int = 30) -> dict:
    """Op counts and simulator time of one training step, and of its two convolutions alone:
    their outputs and the gradients the step needs (weight and bias of both, the input of the
    second), realized together as one program."""
    af.manual_seed(0)
    model = make_model(c1, c2)
    opt = af.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    scaler = af.amp.GradScaler(init_scale=256.0)
    rng = np.random.default_rng(0)
    x = rng.random((batch_size, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, batch_size)

    def step():
        loss = F.cross_entropy(model(af.tensor(x)), af.tensor(y))
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return [loss]

    def convs():
        x2 = af.tensor(rng.random((batch_size, c1, 4, 4)), requires_grad=True)
        y1, y2 = model.conv1(af.tensor(x)), model.conv2(x2)
        g1, g2 = (af.tensor(rng.standard_normal(t.shape)) for t in (y1, y2))
        s = (y1 * g1).sum() + (y2 * g2).sum()
        c1_, c2_ = model.conv1, model.conv2
        grads = af.autograd.grad(s, [c1_.weight, c1_.bias, c2_.weight, c2_.bias, x2])
        return [y1, y2, *grads]

    step_run, conv_run = _recorded(step), _recorded(convs)
    step_ms, conv_ms = _sim_ms([step_run, conv_run], repeat)
    return dict(step_ops=_op_counts(step_run), conv_ops=_op_counts(conv_run),
                step_inputs=len(step_run.program.main.inputs), step_ms=step_ms, conv_ms=conv_ms,
                compiles_on_m1=af.cross_compile_check(step_run.program, target="M1").ok)


def profile_text(p: dict) -> str:
    def ops(counts):
        top = ", ".join(f"{n} {t}" for t, n in list(counts.items())[:6])
        return f"{sum(counts.values())} ops ({top}, ...)"
    return "\n".join([
        f"training step program: {ops(p['step_ops'])}; {p['step_inputs']} inputs "
        f"(data, parameters, optimizer state, per-step scalars); passes the M1 cross-compile "
        f"check: {p['compiles_on_m1']}",
        f"  simulator time per run: {p['step_ms']:.2f} ms",
        f"the two convolutions alone (forward + backward): {ops(p['conv_ops'])}",
        f"  simulator time per run: {p['conv_ms']:.2f} ms "
        f"= {p['conv_ms'] / p['step_ms']:.0%} of the step"])


def main(argv=None) -> dict:
    p = arguments(__doc__, epochs=20, lr=3e-3)
    p.add_argument("--channels", type=int, nargs=2, default=(8, 16), metavar=("C1", "C2"))
    p.add_argument("--profile", action="store_true",
                   help="also measure the step program and its convolutions' share")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch's intra-op threads (default 1: for convolutions this small, "
                        "more threads cost more than they save, badly so on a busy machine)")
    args = p.parse_args(argv)

    train, test = load_data(args.seed)
    af.manual_seed(args.seed)
    model = make_model(*args.channels)
    twin = torch_twin(model)
    hp = (args.epochs, args.batch_size, args.lr, args.weight_decay, not args.no_progress)
    a = train_aneforge(model, train, test, *hp)
    t = with_threads(args.torch_threads, train_torch, twin, train, test, *hp)
    c1, c2 = args.channels
    report(a, t, f"CNN conv(1->{c1})-pool-conv({c1}->{c2})-pool-linear({4 * c2}->10) on digits, "
                 f"{a['steps']} steps of batch {args.batch_size}, AdamW lr={args.lr}",
           len(train[0]) // args.batch_size, args.out / "train_cnn_loss.png",
           "CNN on digits: same init, same batches")
    result = {"aneforge": a, "torch": t}
    if args.profile:
        result["profile"] = profile(c1, c2, args.batch_size)
        print("\n" + profile_text(result["profile"]))
    return result


if __name__ == "__main__":
    main()
