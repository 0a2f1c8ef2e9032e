"""The `coreml` backend (macOS 15+): Program → MILSpec → Core ML model (fp16 I/O, iOS18) →
coremltools with compute units CPU_AND_NE.

    program ─ package(): core_ml_boundary + model_spec (mil/package.py) ─ content hash
            ─ <cache>/<hash>.mlmodelc (compiled once, copied out of Core ML's temporary dir)
            ─ CompiledMLModel(path, CPU_AND_NE): no recompile in later processes
            ─ predict(feed) per run; placement() from MLComputePlan

What is verifiable off-device is tested on Linux (the package coremltools loads, its cache
name, the feed and fetch conversions, the placement summary); the Core ML calls are the thin
`_CoreML` methods, one line each, run only on a Mac.

Facts (apple/coremltools models/model.py, _compiled_model.py, compute_plan.py,
coremlpython/CoreMLPythonUtils.mm; docs-guides model-prediction.md, mlmodel-utilities.md):
- `predict` casts float16 inputs to float32 before Core ML sees them and returns Float16
  outputs as float32: the API offers no fp16-only path. The round trip is exact (every fp16
  value is a float32), so results are returned as the program's fp16.
- `MLModel.get_compiled_model_path()` is a temporary directory deleted with the object; a
  copy loaded with `CompiledMLModel` skips the compile, and Core ML's specialization cache is
  keyed by the .mlmodelc's path: hence one path per content hash, never replaced in place.
- Core ML places ops itself and falls back to the CPU silently; MLComputePlan (macOS 14.4+)
  says where each op runs.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from .base import Backend, cache_root, macos_version, this_machine

MIN_MACOS = (15, 0)          # specification version 9 (iOS18 / macOS 15): fp16 I/O, ios18 ops
DEVICES = {"MLNeuralEngineComputeDevice": "ane", "MLCPUComputeDevice": "cpu",
           "MLGPUComputeDevice": "gpu"}


@dataclass
class Package:
    """A Program as Core ML sees it: the `Model` spec, its weight file, the I/O conversions."""
    spec: object
    weights: bytes
    feeds: list          # (name, the dtype Core ML takes)
    fetches: list        # (name, the program's dtype, shape)

    @property
    def digest(self) -> str:
        """The content hash naming the compiled model in the cache."""
        h = hashlib.sha256(self.spec.SerializeToString(deterministic=True))
        h.update(self.weights)
        return h.hexdigest()[:32]


def package(program) -> Package:
    """Build the Core ML model of `program` (uint8/int16/uint16 I/O widened to int32 inside,
    as af.export does)."""
    from ..mil.package import core_ml_boundary, model_spec
    boundary = core_ml_boundary(program)
    with tempfile.TemporaryDirectory() as tmp:
        spec = model_spec(boundary, tmp)
        with open(os.path.join(tmp, "weight.bin"), "rb") as f:
            weights = f.read()
    f = program.main
    feeds = [(v.name, w.dtype.np) for v, w in zip(f.inputs, boundary.main.inputs)]
    fetches = [(v.name, v.dtype.np, v.shape) for v in f.outputs]
    return Package(spec, weights, feeds, fetches)


def feed(pkg: Package, inputs: list[np.ndarray]) -> dict:
    """The predict() dictionary: fp16 stays fp16 (coremltools widens it itself), integer
    transports become Core ML's int32."""
    return {name: np.ascontiguousarray(a, dtype) for (name, dtype), a in zip(pkg.feeds, inputs)}


def fetch(pkg: Package, result: dict) -> list[np.ndarray]:
    """predict()'s outputs back in the program's order and dtypes (fp16 arrives as float32,
    exactly; integer transports as int32, within range by the cast inside the program)."""
    return [np.asarray(result[name]).reshape(shape).astype(dtype) for name, dtype, shape in pkg.fetches]


@dataclass
class OpPlacement:
    op: str          # the op type
    outputs: str     # its output names
    device: str      # "ane", "cpu", "gpu", or "-" (Core ML gave no usage, e.g. for consts)
    supported: tuple
    cost: float      # MLComputePlan's estimated share of the program's cost, 0..1 (or None)


def placement_summary(rows: list[OpPlacement]) -> dict:
    """Ops and estimated cost per device; `ane_share` is the cost share the ANE runs."""
    by: dict = {}
    for r in rows:
        d = by.setdefault(r.device, {"ops": 0, "cost": 0.0})
        d["ops"] += 1
        d["cost"] += r.cost or 0.0
    total = sum(d["cost"] for d in by.values())
    on_cpu = [f"{r.op}->{r.outputs}" for r in rows if r.device == "cpu"]
    return {"devices": by, "ane_share": (by.get("ane", {}).get("cost", 0.0) / total) if total else None,
            "cpu_ops": on_cpu}


def device_name(device) -> str:
    return "-" if device is None else DEVICES.get(type(device).__name__, type(device).__name__)


class _CoreML:
    """The Core ML calls, one line each (macOS only)."""

    def __init__(self):
        from ..mil.package import _coremltools
        self.ct = _coremltools()
        self.units = self.ct.ComputeUnit.CPU_AND_NE

    def compile_to(self, pkg: Package, path: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "weight.bin"), "wb") as f:
                f.write(pkg.weights)
            model = self.ct.models.MLModel(pkg.spec, weights_dir=tmp, compute_units=self.units)
            shutil.copytree(model.get_compiled_model_path(), path)

    def load(self, path: str):
        return self.ct.models.CompiledMLModel(path, self.units)

    def predict(self, model, d: dict) -> dict:
        return model.predict(d)

    def placement(self, path: str) -> list[OpPlacement]:
        plan = self.ct.models.compute_plan.MLComputePlan.load_from_path(path=path, compute_units=self.units)
        rows = []
        for op in plan.model_structure.program.functions["main"].block.operations:
            u = plan.get_compute_device_usage_for_mlprogram_operation(op)
            c = plan.get_estimated_cost_for_mlprogram_operation(op)
            rows.append(OpPlacement(op.operator_name, ",".join(o.name for o in op.outputs),
                                    device_name(u and u.preferred_compute_device),
                                    tuple(device_name(d) for d in (u.supported_compute_devices if u else ())),
                                    c.weight if c is not None else None))
        return rows


def cached_model_path(pkg: Package, root: str | None = None) -> str:
    return os.path.join(root or cache_root("coreml"), pkg.digest + ".mlmodelc")


class CoreMLExecutable:
    def __init__(self, pkg: Package, path: str, calls: _CoreML):
        self.pkg, self.path, self.calls = pkg, path, calls
        self.model = calls.load(path)
        self.seconds: list[float] = []

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        d = feed(self.pkg, inputs)
        start = time.perf_counter()
        out = self.calls.predict(self.model, d)
        self.seconds.append(time.perf_counter() - start)
        return fetch(self.pkg, out)

    def placement(self) -> dict:
        """Where Core ML runs each op ({"rows": [OpPlacement], **placement_summary})."""
        rows = self.calls.placement(self.path)
        return {"rows": rows, **placement_summary(rows)}


class CoreMLBackend(Backend):
    name = "coreml"

    def available(self) -> tuple[bool, str]:
        import importlib.util
        v = macos_version()
        if v is None:
            return False, f"Core ML runs only on macOS {MIN_MACOS[0]}+; this is {this_machine()}"
        if v < MIN_MACOS:
            return False, (f"needs macOS {MIN_MACOS[0]}+ (iOS18 programs with fp16 I/O); this is "
                           f"{this_machine()}")
        if importlib.util.find_spec("coremltools") is None:
            return False, 'needs coremltools: pip install -e ".[coreml]" in a clone of aneforge'
        return True, "Core ML, compute units CPU_AND_NE (ops Core ML keeps on the CPU: placement())"

    def compile(self, program, numerics) -> CoreMLExecutable:
        self.admit(program)
        pkg, calls = package(program), _CoreML()
        path = cached_model_path(pkg)
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            staging = tempfile.mkdtemp(prefix=".staging-", dir=os.path.dirname(path))
            try:
                calls.compile_to(pkg, os.path.join(staging, "m.mlmodelc"))
                try:
                    os.rename(os.path.join(staging, "m.mlmodelc"), path)
                except OSError:
                    if not os.path.exists(path):    # another process won the race: theirs is equal
                        raise
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return CoreMLExecutable(pkg, path, calls)
