"""How much do compensated (hi, lo) fp16 weights matter? Train the digits MLP with both
`master_weights` settings of aneforge's optimizers, and torch fp32, from the same init on the
same batches, and print how far each aneforge run ends from torch.

    python examples/master_weights.py [--epochs 10]
"""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np

import aneforge as af

spec = importlib.util.spec_from_file_location("train_mlp", Path(__file__).with_name("train_mlp.py"))
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)

SETUPS = {   # name: (aneforge optimizer, torch optimizer)
    "AdamW lr=3e-3": (lambda p, m: af.optim.AdamW(p, lr=3e-3, weight_decay=1e-2, master_weights=m),
                      lambda p, torch: torch.optim.AdamW(p, lr=3e-3, weight_decay=1e-2)),
    "SGD lr=0.05 momentum=0.9": (
        lambda p, m: af.optim.SGD(p, lr=0.05, momentum=0.9, master_weights=m),
        lambda p, torch: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    "SGD lr=0.01 (small steps)": (lambda p, m: af.optim.SGD(p, lr=0.01, master_weights=m),
                                  lambda p, torch: torch.optim.SGD(p, lr=0.01)),
}


def main(argv=None):
    import torch
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=10)
    args = p.parse_args(argv)
    train, test = ex.load_data(0)
    window = len(train[0]) // 64
    print(f"{'setup':<28} {'weights':<12} {'final loss':>10} {'vs torch':>9} {'accuracy':>9}")
    for name, (make_af, make_torch) in SETUPS.items():
        af.manual_seed(0)
        model = ex.make_model()
        init = {k: np.asarray(v) for k, v in model.state_dict().items()}
        twin = ex.torch_twin(model)
        t = ex.train_torch(twin, train, test, args.epochs, 64, 0, 0, False,
                           lambda ps: make_torch(ps, torch))
        t_loss = np.mean(t["losses"][-window:])
        print(f"{name:<28} {'torch fp32':<12} {t_loss:>10.4f} {'':>9} {t['accuracy']:>9.2%}")
        for mode in ("compensated", "fp16"):
            model.load_state_dict(init)
            a = ex.train_aneforge(model, train, test, args.epochs, 64, 0, 0, False,
                                  lambda ps: make_af(ps, mode))
            a_loss = np.mean(a["losses"][-window:])
            print(f"{'':<28} {mode:<12} {a_loss:>10.4f} {a_loss - t_loss:>+9.4f} "
                  f"{a['accuracy']:>9.2%}")


if __name__ == "__main__":
    main()
