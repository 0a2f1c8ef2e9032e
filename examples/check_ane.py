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
  overflow, rounding, subnormals), engine and simulator side by side;
- compile and per-call times, and for `coreml` where Core ML placed each op (it falls back to
  the CPU silently).

The op table runs in child processes: `ane` allows only ~100 programs per process, and a
compiler crash ends only the child (it is reported as such). Off macOS no hardware backend is
available; `--backends sim` runs the whole check on the simulator against itself.
"""
from __future__ import annotations

import argparse
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
}


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
                                   "probes": probes(name)}
        print(summary(name, report["results"][name]))
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1, default=str)
    print(f"wrote {args.out}: please send it back (docs/macos.md, 'Reporting results')")


if __name__ == "__main__":
    main()
