"""How much a long fp16 sum loses on the engine's reduce_sum against its matmul, by length K.

    PYTHONPATH=. python examples/reduction_accuracy.py

For K terms per row (512 rows; standard-normal terms, and their squares), the error against the
exact sum, in fp16 ulps of sum|x| (rms and worst), of:

- narrow: MIL reduce_sum on the simulator (an fp16 running sum, one rounding per term);
- wide:   the simulator's matmul with a ones column;
- tile:   the published M1 matmul datapath (sbryngelson/ane-guide, datapath chapter): products
          exact, 4-lane tiles added with a 12-bit truncating adder, an fp32 sum across tiles,
          the output rounded to fp16 -- written out below so the table does not depend on which
          matmul model the simulator currently uses.

The table is where aneforge.tensor.reduce.NARROW_MAX (16) comes from. A second table shows
torch-level results through aneforge's route, through MIL reduce_sum / reduce_mean alone (the
naive lowering), and from torch in float64 on the same fp16 inputs (needs torch).
"""
import numpy as np

import aneforge as af
from aneforge.tensor import const, record_op


def add12(x, y):
    """The M1 tile adder: drop bits below 2**(e - 11) toward zero, renormalise a carry."""
    m = np.maximum(np.abs(x), np.abs(y))
    e = np.floor(np.log2(np.where(m > 0, m, 1.0)))
    q = 2.0 ** (e - 11)
    s = np.trunc(x / q) * q + np.trunc(y / q) * q
    s = np.where(np.abs(s) >= 2.0 ** (e + 1), np.trunc(s / (2 * q)) * 2 * q, s)
    return np.where(m > 0, s, 0.0)


def tile_sum(x: np.ndarray) -> np.ndarray:
    """Each row of fp16 values summed as x @ ones under the M1 tile model."""
    p = np.pad(x.astype(np.float64), ((0, 0), (0, -x.shape[1] % 4))).reshape(x.shape[0], -1, 4)
    tiles = add12(add12(add12(p[..., 0], p[..., 1]), p[..., 2]), p[..., 3])
    acc = np.zeros(x.shape[0], np.float32)
    for i in range(tiles.shape[1]):
        acc = acc + tiles[:, i].astype(np.float32)
    return acc.astype(np.float16).astype(np.float64)


def errors(x: np.ndarray) -> dict:
    exact = x.astype(np.float64).sum(1)
    t = af.tensor(x)
    got = {"narrow": record_op("reduce_sum", {"x": t}, {"axes": (1,), "keep_dims": False}).numpy(),
           "wide": (t @ const(np.ones((x.shape[1], 1)), af.float16)).numpy()[:, 0],
           "tile": tile_sum(x)}
    ulp = np.spacing(np.abs(x.astype(np.float64)).sum(1).astype(np.float16)).astype(np.float64)
    return {k: np.abs(v.astype(np.float64) - exact) / ulp for k, v in got.items()}


def main():
    rng = np.random.default_rng(0)
    print(f"{'K':>5} {'terms':>8} | rms: {'narrow':>7} {'wide':>6} {'tile':>6} | worst: {'narrow':>7} {'tile':>6}")
    for k in (2, 4, 8, 12, 16, 24, 32, 64, 256, 1024, 4096):
        for kind in ("signed", "squares"):
            x = rng.standard_normal((512, k))
            e = errors((x * x if kind == "squares" else x).astype(np.float16))
            rms = {n: np.sqrt((v ** 2).mean()) for n, v in e.items()}
            print(f"{k:>5} {kind:>8} | {rms['narrow']:12.2f} {rms['wide']:6.2f} {rms['tile']:6.2f} | "
                  f"{e['narrow'].max():14.1f} {e['tile'].max():6.1f}")


def _raw(op, x, axes=None):
    return record_op(op, {"x": x}, {"axes": axes, "keep_dims": axes is not None})


def naive_var(x):
    c = x - _raw("reduce_mean", x, tuple(range(x.ndim)))
    return _raw("reduce_sum", c * c) / (x.numel() - 1.0)


def torch_level():
    import torch
    x = np.random.default_rng(0).standard_normal((15, 25, 35)).astype(np.float16)
    y = np.random.default_rng(1).standard_normal((512, 100)).astype(np.float16)
    a, t, ya, yt = af.tensor(x), torch.tensor(x.astype(np.float64)), af.tensor(y), torch.tensor(y.astype(np.float64))
    rows = [("x.var(), randn(15, 25, 35)", a.var(), naive_var(a), t.var()),
            ("x.std()", a.std(), naive_var(a).sqrt(), t.std()),
            ("(x + 3).mean()", (a + 3).mean(), _raw("reduce_mean", a + 3), (t + 3).mean()),
            ("(x * x).sum()", (a * a).sum(), _raw("reduce_sum", a * a), (t * t).sum()),
            ("F.mse_loss(y, 0), randn(512, 100)", af.nn.functional.mse_loss(ya, ya - ya),
             _raw("reduce_mean", ya * ya), (yt * yt).mean())]
    print(f"\n{'value':<36} {'aneforge':>10} {'naive':>10} {'torch':>10}")
    for name, got, naive, want in rows:
        print(f"{name:<36} {got.item():10.5g} {naive.item():10.5g} {want.item():10.5g}")


if __name__ == "__main__":
    main()
    torch_level()
