"""Check aneforge on this Mac's Neural Engine and write one JSON report to send back.

    git clone <aneforge> && cd aneforge
    pip install -e ".[coreml,test]"          # coremltools, and torch for the op table's reference
    python examples/check_ane.py             # every available backend -> check_ane_report.json

For each available hardware backend (`ane`: Espresso's e5rt API; `coreml`: Core ML with
CPU_AND_NE), with the simulator (`sim`) as the reference:

- the op table (aneforge_tests/optable.py): each case's outputs against the simulator's, and
  whether they lie within the table's tolerance of torch;
- a training step: three AdamW steps of a small MLP, losses and parameters against the simulator;
- datapath probes: small programs whose results pin the engine's numerics (accumulation width,
  overflow, rounding, subnormals, softmax's and layer_norm's sums), engine and simulator side
  by side;
- deciding probes: dot products whose value tells apart hypotheses about the matmul datapath
  (how the 4-lane tile adder drops bits and carries, whether tiles keep 12 bits, whether
  products are exact, plus the published M1 measurements): each prints its value, what each
  hypothesis predicts and which it supports, and a JSON block to paste into a GitHub issue;
- compile and per-call times, and for `coreml` where Core ML placed each op (it falls back to
  the CPU silently).

The op table runs in child processes: `ane` allows only ~100 programs per process, and a
compiler crash ends only the child (it is reported as such). Off macOS no hardware backend is
available; `--backends sim` runs the whole check on the simulator against itself.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "aneforge_tests")]
os.environ.setdefault("TQDM_DISABLE", "1")

import aneforge as af                                    # noqa: E402
from aneforge.context import CTX                         # noqa: E402

ANE_BATCH = 80          # op-table cases per child process on `ane` (its per-process program limit)

PROBES = {
    # name: (MIL body over inputs a, b of tensor<fp16, [1, n]>, n, a, b, what it tells)
    "reduce_sum_4096_ones": ("tensor<fp16, [1, 1]> y = reduce_sum(x = a, axes = const(tensor<int32, [1]>([1])), "
                             "keep_dims = const(bool(true)))[name = string(\"y\")];", 4096, 1.0, None,
                             "2048: the running sum is fp16 (narrow); 4096: wider accumulator"),
    "matmul_4096_ones": ("tensor<fp16, [1, 1]> y = matmul(x = a, y = b, transpose_x = const(bool(false)), "
                         "transpose_y = const(bool(true)))[name = string(\"y\")];", 4096, 1.0, 1.0,
                         "4096: wide (fp32) accumulation; 2048: fp16"),
    "add_overflow": ("tensor<fp16, [1, 2]> y = add(x = a, y = b)[name = string(\"y\")];", 2,
                     [65504, 65504], [16, 15], "[inf, 65504]: IEEE fp16 rounding at the top"),
    "add_tie_2048_plus_1": ("tensor<fp16, [1, 2]> y = add(x = a, y = b)[name = string(\"y\")];", 2,
                            [2048, 2050], [1, 1], "[2048, 2052]: ties to even; [2050, 2052]: ties away"),
    "mul_subnormal": ("tensor<fp16, [1, 2]> y = mul(x = a, y = b)[name = string(\"y\")];", 2,
                      [2 ** -14, 2 ** -10], [2 ** -5, 2 ** -14], "nonzero: subnormals kept; 0: flushed"),
    "exp_near_overflow": ("tensor<fp16, [1, 2]> y = exp(x = a)[name = string(\"y\")];", 2,
                          [11.0, 11.1], None, "[59872, inf]: exp(11) rounded to fp16, exp(11.1) > 65504"),
    "reduce_sum_2049_tie": ("tensor<fp16, [1, 1]> y = reduce_sum(x = a, axes = const(tensor<int32, [1]>([1])), "
                            "keep_dims = const(bool(true)))[name = string(\"y\")];", 8, [256] * 7 + [257], None,
                            "2048: the running sum ties to even (measured M1); 2050: as measured on M5"),
    "softmax_4096_zeros": ("tensor<fp16, [1, 4096]> s = softmax(x = a, axis = const(int32(-1)))[name = string(\"s\")]; "
                           "tensor<fp16, [1, 1]> y = reduce_max(x = s, axes = const(tensor<int32, [1]>([1])), "
                           "keep_dims = const(bool(true)))[name = string(\"y\")];", 4096, 0.0, None,
                           "0.000244 (1/4096): a wide denominator; 0.000488: an fp16 running sum (stalls at 2048)"),
    "layer_norm_4096": ("tensor<fp16, [1, 4096]> n = layer_norm(x = a, axes = const(tensor<int32, [1]>([1])), "
                        "epsilon = const(fp16(1e-5)))[name = string(\"n\")]; "
                        "tensor<fp16, [1, 1]> y = reduce_min(x = n, axes = const(tensor<int32, [1]>([1])), "
                        "keep_dims = const(bool(true)))[name = string(\"y\")];", 4096, [2, 3] * 2048, None,
                        "-1: wide statistics (mean 2.5); 0: fp16 running sums (mean 2, variance 0.5)"),
}


# --------------------------------------------------------------------------- deciding probes
# Each probe below separates hypotheses about the engine's arithmetic: it prints the value, what
# each hypothesis predicts and which one it supports. The matmul datapath as published for M1
# (sbryngelson/ane-guide, numerics and datapath chapters): products exact, 4 consecutive lanes per
# tile added left to right by a 12-bit adder that drops low bits toward zero (a carry renormalises
# and truncates), the tile result kept at 12 bits, an fp32 sum across tiles, the output port
# rounding to fp16 (inf from 2**15; below 2**-14 flushed on M1, kept on M5). The open points are
# the switches of `tile_dot`; each named hypothesis is one setting of them.

MODELS = {
    "published M1 model": {},
    "adder rounds to nearest": {"drop": "nearest"},
    "adder drops toward -inf": {"drop": "floor"},
    "carry rounds to nearest even": {"carry": "nearest"},
    "tile result rounded to fp16": {"tile16": True},
    "products rounded to fp16": {"products16": True},
    "subnormals kept at the port (M5)": {"flush": False},
    "fp16 products, fp32 sum": {"wide": True},
    "fp16 running sum": {"narrow": True},
}
_DROP = {"zero": np.trunc, "floor": np.floor, "nearest": np.rint}     # rint: ties to even


def f16(v) -> float:
    return float(np.float16(v))


def add12(x: float, y: float, drop: str = "zero", carry: str = "zero") -> float:
    """The tile adder: both addends cut to a multiple of 2**(e - 11), e the larger exponent."""
    m = max(abs(x), abs(y))
    if m == 0:
        return 0.0
    q = 2.0 ** (np.floor(np.log2(m)) - 11)
    s = _DROP[drop](x / q) * q + _DROP[drop](y / q) * q
    return float(_DROP[carry](s / (2 * q)) * 2 * q) if abs(s) >= 2 ** 12 * q else float(s)


def port(r: float, flush: bool = True) -> float:
    """The matmul output port: fp16, inf from 2**15, |r| < 2**-14 flushed when `flush`."""
    if abs(r) >= 2.0 ** 15:
        return float(np.copysign(np.inf, r))
    return 0.0 if flush and abs(r) < 2.0 ** -14 else f16(r)


def tile_dot(a, b, drop="zero", carry="zero", tile16=False, products16=False, flush=True,
             wide=False, narrow=False) -> float:
    """a . b as the engine's matmul would compute it under one hypothesis."""
    p = [f16(x) * f16(y) for x, y in zip(a, b)]
    p = [f16(v) for v in p] if products16 or wide or narrow else p
    if narrow:                                    # one rounding per term, in lane order
        return functools.reduce(lambda s, v: f16(s + v), p, 0.0)
    if wide:
        return port(float(np.sum(np.asarray(p, np.float32), dtype=np.float32)), flush)
    p += [0.0] * (-len(p) % 4)
    acc = np.float32(0)
    for t in range(0, len(p), 4):
        s = p[t]
        for v in p[t + 1:t + 4]:
            s = add12(s, v, drop, carry)
        acc = np.float32(acc + np.float32(f16(s) if tile16 else s))
    return port(float(acc), flush)


M1 = "published M1 model"
# name: (a, b (None: ones), hypotheses compared, the published M1 value or None, what it settles)
DECIDING = {
    "drop_toward_zero": ([4096, 3, -4096], None, (M1, "adder rounds to nearest", "fp16 products, fp32 sum"), None,
                         "how the tile adder drops low bits"),
    "drop_negative": ([-4096, -3, 4096], None, (M1, "adder drops toward -inf", "fp16 products, fp32 sum"), None,
                      "truncation toward zero or toward -inf"),
    "carry": ([4094, 5, -4096], None, (M1, "carry rounds to nearest even", "fp16 products, fp32 sum"), None,
              "how a carry out of the tile adder is renormalised"),
    "tile_width": ([2048, 1, 0, 0, -2048], None, (M1, "tile result rounded to fp16", "fp16 products, fp32 sum"), None,
                   "whether a tile's result keeps 12 bits into the fp32 sum"),
    "exact_products": ([1 + 2 ** -5, -1], [1 + 2 ** -6, 1], (M1, "products rounded to fp16", "fp16 products, fp32 sum"), None,
                       "whether products enter the tiles exactly"),
    "4096_then_1024_ones": ([4096] + [1] * 1024, None, (M1, "fp16 products, fp32 sum", "fp16 running sum"),
                            5116, "measured on M1"),
    "cancel_B1024_x16": ([1024, -1024, 1] * 16, None, (M1, "fp16 products, fp32 sum"), 16, "measured on M1"),
    "cancel_B4096_x16": ([4096, -4096, 1] * 16, None, (M1, "fp16 products, fp32 sum"), 4, "measured on M1"),
    "cancel_B30000_x16": ([30000, -30000, 1] * 16, None, (M1, "fp16 products, fp32 sum"), 4,
                          "measured on M1"),
    "8192_then_16_ones": ([8192] + [1] * 16, None, (M1, "fp16 running sum"), 8208, "measured on M1"),
    "16384_ones": ([1] * 16384, None, (M1, "fp16 running sum"), 16384, "measured on M1"),
    "16000_cancel": ([16000, -16000, 1], None, (M1, "fp16 products, fp32 sum"), 1, "measured on M1"),
    "subnormal_pair": ([2 ** -20, 2 ** -20], None, (M1, "subnormals kept at the port (M5)"), 0,
                       "measured: +0 on M1, kept on M5"),
    "port_32752": ([32752], None, (M1,), 32752, "measured M1..M5: the port passes 32752"),
    "port_32768_k2": ([16384, 16384], None, (M1, "fp16 running sum"), float("inf"),
                      "measured M1..M5: 32768 is inf at the matmul port, not in fp16"),
}


def predictions(a, b, hypotheses) -> dict:
    b = [1.0] * len(a) if b is None else b
    return {h: tile_dot(a, b, **MODELS[h]) for h in hypotheses}


def same(x: float, y: float) -> bool:
    return bool(x == y or (np.isnan(x) and np.isnan(y)))


def verdict(value, predicted: dict) -> str:
    """The hypotheses the engine's value agrees with, in words."""
    if value is None:
        return "no value (the probe failed)"
    hits = [h for h, v in predicted.items() if same(value, v)]
    if not hits:
        return "none of the hypotheses: please report"
    return "supports " + " / ".join(hits) if len(hits) < len(predicted) or len(hits) == 1 else \
        "consistent with all of " + ", ".join(hits)


def deciding_program(n: int) -> str:
    body = (f"tensor<fp16, [1, 1]> y = matmul(x = a, y = b, transpose_x = const(bool(false)), "
            f"transpose_y = const(bool(true)))[name = string(\"y\")];")
    return probe_program(body, n, True)


def deciding_row(name: str, backend: str) -> dict:
    a, b, hypotheses, published, settles = DECIDING[name]
    b = [1.0] * len(a) if b is None else b
    fn = af.load_mil(deciding_program(len(a)))
    args = [np.asarray(v, np.float16).reshape(1, -1) for v in (a, b)]
    row = {"probe": name, "settles": settles, "published": published,
           "predicted": predictions(a, b, hypotheses)}
    try:
        row["value"] = float(on(backend, lambda: fn(*args)).ravel()[0])
    except Exception as e:
        row["value"], row["error"] = None, f"{type(e).__name__}: {e}"[:1000]
    row["sim"] = float(on("sim", lambda: fn(*args)).ravel()[0])
    row["verdict"] = verdict(row["value"], row["predicted"])
    return row


def deciding_probes(backend: str) -> list[dict]:
    return [deciding_row(name, backend) for name in DECIDING]


def describe(row: dict) -> str:
    guesses = ", ".join(f"{h}: {v:g}" for h, v in row["predicted"].items())
    return (f"   {row['probe']:<22} {row['value'] if row['value'] is not None else row.get('error')}"
            f"  [{guesses}] -> {row['verdict']}")


def _plain(v):
    """Strict JSON: inf and nan as strings."""
    return v if v is None or np.isfinite(v) else str(v)


def issue_block(report: dict) -> str:
    """A compact JSON block of the deciding probes (one line per probe), to paste into a
    GitHub issue."""
    m = report["machine"]
    lines = [f'{{"chip": {json.dumps(m.get("chip"))}, "macos": {json.dumps(m.get("macos"))}, "results": {{']
    for i, (name, res) in enumerate(report["results"].items()):
        rows = [f'  {json.dumps(r["probe"])}: {json.dumps([_plain(r["value"]), r["verdict"]])}'
                for r in res["deciding_probes"]]
        lines += [f' {json.dumps(name)}: {{', ",\n".join(rows), " }" + ("," if i < len(report["results"]) - 1 else "")]
    return "```json\n" + "\n".join(lines + ["}}"]) + "\n```"


def probe_program(body: str, n: int, two: bool) -> str:
    args = f"tensor<fp16, [1, {n}]> a" + (f", tensor<fp16, [1, {n}]> b" if two else "")
    return f"program(1.3) {{ func main<ios18>({args}) {{ {body} }} -> (y); }}"


def on(backend: str, fn):
    previous = CTX.backend
    af.set_backend(backend)
    try:
        return fn()
    finally:
        CTX.backend = previous


def last_executable():
    entries = CTX.cache.entries
    return next(reversed(entries.values())).executable if entries else None


def placement(exe) -> dict:
    """Where the program ran: Core ML's per-device summary (without the per-op rows), or the
    ane backend's compiled segments."""
    try:
        return {k: v for k, v in exe.placement().items() if k != "rows"}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"[:1000]}


def timed_calls(exe) -> dict:
    s = list(getattr(exe, "seconds", []))
    return {"calls": len(s), "median_ms": float(np.median(s) * 1e3) if s else None}


# --------------------------------------------------------------------------- op table (child)


def op_case(case, backend: str) -> dict:
    import torch
    from optable import af_inputs, arrays, bound, call, expected, torch_inputs
    xs = arrays(case)
    out = {"name": case.name}
    try:
        before = af.cache_info().compile_seconds
        got = on(backend, lambda: [t.numpy() for t in _realized(call(case, af, af_inputs(xs)))])
        out["compile_s"] = af.cache_info().compile_seconds - before
        exe = last_executable()
        for _ in range(5):
            on(backend, lambda: _realized(call(case, af, af_inputs(xs))))
        out["time"] = timed_calls(exe)
        if hasattr(exe, "placement"):
            out["placement"] = placement(exe)
    except Exception as e:                               # a compile the engine rejects, ...
        return {**out, "error": f"{type(e).__name__}: {e}"[:2000]}
    sim = on("sim", lambda: [t.numpy() for t in _realized(call(case, af, af_inputs(xs)))])
    want = [t.detach().numpy() for t in call(case, torch, torch_inputs(xs))]
    refs = ([t.detach().numpy().astype(np.float64) for t in call(case, torch, torch_inputs([np.abs(x) for x in xs]))]
            if case.tol.cond else [None] * len(want))
    out["equal_to_sim"] = all(np.array_equal(a, b, equal_nan=a.dtype.kind == "f") for a, b in zip(got, sim))
    out["max_abs_vs_sim"] = max((float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0))
                                 for a, b in zip(got, sim) if a.size), default=0.0)
    ok = len(got) == len(want)
    for a, t, r in zip(got, want, refs):
        if t.dtype.kind != "f" or a.dtype.kind != "f":
            ok &= np.array_equal(a, t)
            continue
        e = expected(t.astype(np.float64))
        fin = np.isfinite(e)
        ok &= bool(np.array_equal(a[~fin].astype(np.float64), e[~fin]))
        ok &= bool(np.all(np.abs(a[fin] - e[fin]) <= bound(case, e, r)[fin]))
    out["within_torch_tolerance"] = bool(ok)
    return out


def _realized(outs):
    af.realize(*outs)
    return outs


def worker(backend: str, start: int, stop: int) -> None:
    from optable import CASES
    results = [op_case(c, backend) for c in CASES[start:stop]]
    print(json.dumps(results))


def op_table(backend: str, limit: int | None) -> list[dict]:
    from optable import CASES
    n = len(CASES) if limit is None else min(limit, len(CASES))
    batch = ANE_BATCH if backend == "ane" else n
    results = []
    for start in range(0, n, batch):
        stop = min(start + batch, n)
        r = subprocess.run([sys.executable, __file__, "--worker", backend, str(start), str(stop)],
                           capture_output=True, text=True, env={**os.environ, "ANEFORGE_BACKEND": "sim"})
        if r.returncode != 0:
            how = f"signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
            results += [{"name": c.name, "error": f"the child process died ({how}): {r.stderr[-1500:]}"}
                        for c in CASES[start:stop]]
            continue
        results += json.loads(r.stdout.strip().splitlines()[-1])
    return results


# --------------------------------------------------------------------------- in this process


def train(steps: int = 3) -> dict:
    af.manual_seed(0)
    model = af.nn.Sequential(af.nn.Linear(64, 128), af.nn.ReLU(), af.nn.Linear(128, 10))
    opt = af.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = af.randn(32, 64), af.randn(32, 10)
    losses, seconds = [], []
    for _ in range(steps):
        start = time.perf_counter()
        loss = af.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        seconds.append(time.perf_counter() - start)
    return {"losses": losses, "step_s": seconds, "params": [p.numpy() for p in model.parameters()]}


def training(backend: str) -> dict:
    before = af.cache_info().compile_seconds
    got = on(backend, train)
    out = {"compile_s": af.cache_info().compile_seconds - before, "losses": got["losses"],
           "step_s": got["step_s"], "time": timed_calls(last_executable())}
    exe = last_executable()
    if hasattr(exe, "placement"):
        out["placement"] = placement(exe)
    sim = on("sim", train)
    out["sim_losses"] = sim["losses"]
    out["max_rel_param_diff_vs_sim"] = max(
        float(np.max(np.abs(a.astype(np.float64) - b) / (np.abs(b.astype(np.float64)) + 1e-3)))
        for a, b in zip(got["params"], sim["params"]))
    return out


def probes(backend: str) -> list[dict]:
    out = []
    for name, (body, n, a, b, meaning) in PROBES.items():
        fn = af.load_mil(probe_program(body, n, b is not None))
        args = [np.broadcast_to(np.asarray(v, np.float16).reshape(1, -1), (1, n)).copy()
                for v in (a, b) if v is not None]
        row = {"probe": name, "meaning": meaning}
        try:
            row["engine"] = on(backend, lambda: fn(*args)).ravel().astype(float).tolist()
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"[:1000]
        row["sim"] = on("sim", lambda: fn(*args)).ravel().astype(float).tolist()
        out.append(row)
    return out


def machine() -> dict:
    info = {"platform": platform.platform(), "machine": platform.machine(),
            "macos": platform.mac_ver()[0], "python": sys.version.split()[0], "numpy": np.__version__}
    try:
        info["chip"] = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"],
                                      capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    try:
        import importlib.metadata as md
        info["coremltools"] = md.version("coremltools")
    except Exception:
        info["coremltools"] = None
    return info


def summary(name: str, r: dict) -> str:
    table = r["op_table"]
    errors = sum("error" in c for c in table)
    lines = [f"== {name}: op table {len(table)} cases: "
             f"{sum(c.get('within_torch_tolerance', False) for c in table)} within torch's tolerance, "
             f"{sum(c.get('equal_to_sim', False) for c in table)} bit-equal to the simulator, {errors} errors"]
    for c in table:
        if "error" in c:
            lines.append(f"   {c['name']}: {c['error'].splitlines()[0][:150]}")
    t = r["training"]
    lines.append(f"   training: losses {['%.5g' % v for v in t['losses']]} (sim "
                 f"{['%.5g' % v for v in t['sim_losses']]}), compile {t['compile_s']:.2f} s, "
                 f"per call {t['time']['median_ms']} ms")
    if "placement" in t:
        lines.append(f"   placement of the training step: {t['placement']}")
    for p in r["probes"]:
        lines.append(f"   probe {p['probe']}: engine {p.get('engine', p.get('error'))}, sim {p['sim']}")
    lines.append("   deciding probes: value  [what each hypothesis predicts] -> verdict")
    lines += [describe(row) for row in r["deciding_probes"]]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", nargs="*", help="default: every available hardware backend")
    ap.add_argument("--limit", type=int, help="run only the first N op-table cases")
    ap.add_argument("--out", default="check_ane_report.json")
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker[0], int(args.worker[1]), int(args.worker[2]))
    listed = af.backends()
    for name, (ok, why) in listed.items():
        print(f"{name:7s} {'available' if ok else 'unavailable'}: {why}")
    chosen = args.backends or [n for n in ("ane", "coreml") if listed[n][0]]
    if not chosen:
        print("no hardware backend can run here; `--backends sim` checks the script on the simulator")
    report = {"aneforge": af.__version__ if hasattr(af, "__version__") else None, "machine": machine(),
              "backends": {n: list(v) for n, v in listed.items()}, "results": {}}
    for name in chosen:
        print(f"running {name} ...", flush=True)
        report["results"][name] = {"op_table": op_table(name, args.limit), "training": training(name),
                                   "probes": probes(name), "deciding_probes": deciding_probes(name)}
        print(summary(name, report["results"][name]))
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1, default=str)
    print("\nthe deciding probes, to paste into a GitHub issue:\n" + issue_block(report))
    print(f"wrote {args.out}: please send it back (docs/macos.md, 'Reporting results')")


if __name__ == "__main__":
    main()
