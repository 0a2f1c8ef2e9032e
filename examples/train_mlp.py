"""Train an MLP on scikit-learn's handwritten digits with aneforge (default backend: the ANE
simulator off macOS), then the same network from the same initial weights on the same batches
in PyTorch fp32, and compare.

    python examples/train_mlp.py [--epochs 20] [--batch-size 64] [--out examples/out]

Prints a side-by-side table (final loss, test accuracy, wall time, compiles), the steady-state
step times (the first step captures and compiles the step; on a fresh install numba compiles
the simulator's kernels once in child processes, cached for later runs: the first step runs
on the numpy kernels, the second waits the few seconds the lean compiled forms take, the
steps run on those, at ~1.7x the full ones' step time for this network, then on the full ones
once compiled, about a minute later, the same bits throughout), and saves the two loss curves to
OUT/train_mlp_loss.png.
"""
from __future__ import annotations

import sys
from pathlib import Path

import aneforge as af
import aneforge.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent))   # _common.py, also when imported
from _common import (arguments, load_data, load_into_torch, report,  # noqa: E402
                     train_aneforge, train_torch)


def make_model(hidden: int = 128) -> nn.Module:
    return nn.Sequential(nn.Linear(64, hidden), nn.GELU(), nn.Linear(hidden, 10))


def torch_twin(model):
    """The same architecture in torch fp32, with aneforge's initial weights."""
    import torch
    hidden = model[0].out_features
    twin = torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.GELU(),
                               torch.nn.Linear(hidden, 10))
    return load_into_torch(model, twin)


def main(argv=None) -> dict:
    p = arguments(__doc__, epochs=20, lr=3e-3)
    p.add_argument("--hidden", type=int, default=128)
    args = p.parse_args(argv)

    train, test = load_data(args.seed)
    af.manual_seed(args.seed)
    model = make_model(args.hidden)
    twin = torch_twin(model)
    hp = (args.epochs, args.batch_size, args.lr, args.weight_decay, not args.no_progress)
    a = train_aneforge(model, train, test, *hp)
    t = train_torch(twin, train, test, *hp)
    report(a, t, f"MLP 64-{args.hidden}-10 on digits, {a['steps']} steps of batch "
                 f"{args.batch_size}, AdamW lr={args.lr}", len(train[0]) // args.batch_size,
           args.out / "train_mlp_loss.png", "MLP on digits: same init, same batches")
    return {"aneforge": a, "torch": t}


if __name__ == "__main__":
    main()
