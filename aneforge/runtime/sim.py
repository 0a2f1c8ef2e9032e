"""The fp16-faithful ANE simulator: runs a Program op by op with the registry's numpy kernels
under one `Numerics` model (aneforge/hardware/numerics.py). It is the default backend off macOS.

Inside a run, fp16 values are carried in float32 arrays. Each kernel computes wide (fp32); the
executor then stores the result in the op's declared dtype: fp16 results are rounded with
`Numerics.round16` (fp32-then-round-once, the ANE's elementwise model, per ANEForge `docs/developer/numerics.md`), other dtypes are cast. Ops
that cannot change a value (data movement, max/min, select) are marked `exact` and skip it.
Program inputs and outputs are real fp16/int16/... arrays.
"""
from __future__ import annotations

import weakref

import numpy as np

from .. import dtypes
from ..hardware import kernels
from ..errors import DTypeError
from ..hardware.numerics import Numerics
from ..ops import REGISTRY
from . import memory
from .steps import Slot, Step, gather, nan_hazard
from .base import Backend


class OpContext:
    """What a kernel may know besides its arrays: the numerics model and its op's types."""

    __slots__ = ("numerics", "in_dtypes", "out_dtypes", "op_type", "op_name")

    def __init__(self, numerics, op):
        self.numerics, self.op_type, self.op_name = numerics, op.type, op.name
        self.in_dtypes = tuple(v.dtype for v in op.input_vars())
        self.out_dtypes = tuple(v.dtype for v in op.outputs)


def _storer(numerics, dtype):
    if dtype == dtypes.float16:
        return numerics.round16
    np_dtype = np.float32 if dtype == dtypes.float32 else dtype.np
    return lambda r: np.asarray(r).astype(np_dtype, copy=False)


def _carrier(dtype):
    return np.float32 if dtype == dtypes.float16 else dtype.np


class SimExecutable:
    """A Program turned into a flat list of kernel calls over a slot-indexed environment."""

    def __init__(self, program, numerics):
        f = program.main
        slot = {id(v): i for i, v in enumerate(f.block.vars())}
        self.n_slots, self.numerics = len(slot), numerics
        self.inputs = [(slot[id(v)], _carrier(v.dtype)) for v in f.inputs]
        self.input_names = [v.name for v in f.inputs]
        self.outputs = [(slot[id(v)], v.dtype.np) for v in f.outputs]
        self.constants = []
        self.steps, self.ops = [], []
        # slot -> its Slot (static shape or None, dtype): what the run plan (runtime/plan.py)
        # lays out
        self.info = [None] * self.n_slots
        for v in f.block.vars():
            shape = getattr(v, "shape", None)
            static = shape is not None and all(type(n) is int for n in shape)
            self.info[slot[id(v)]] = Slot(tuple(shape) if static else None, v.dtype)
        for op in f.block.operations:
            opdef = REGISTRY[op.type]
            outs = [slot[id(v)] for v in op.outputs]
            if op.type == "const":               # carried form computed once, at compile time
                v = op.outputs[0]
                val = np.asarray(op.attrs["val"]).astype(_carrier(v.dtype))
                self.constants.append((outs[0], _coerce_nan(numerics, val, op.name)))
                continue
            store = None if opdef.exact else [_storer(numerics, v.dtype) for v in op.outputs]
            self.steps.append(Step(opdef.simulate, OpContext(numerics, op),
                                   _reads(op, slot, opdef.inputs), op.attrs, outs, store))
            self.ops.append(op)
        # Integer outputs narrowed at the boundary (int32 -> int16): the engine would wrap
        # silently; the simulator checks the value before the cast instead.
        self.narrowed = [(slot[id(v.op.inputs["x"])], v.dtype.np, v.name) for v in f.outputs
                         if v.op is not None and v.op.type == "cast" and v.dtype.np.kind in "iu"
                         and v.op.inputs["x"].dtype.np.itemsize > v.dtype.np.itemsize]
        self._schedule_frees()
        self.blank = [None] * self.n_slots
        self.runs, self.run_plan = 0, None
        self.returned: dict = {}        # id -> (output index, weak ref): the last run's outputs

    def _schedule_frees(self) -> None:
        """When each value is freed (`self.frees`, by step): right after the last step that
        reads it (program outputs stay), so a run's peak memory is the largest set of values
        alive at once, not the sum of all of them (ExecuTorch's memory planning, by
        lifetime)."""
        self.readers: dict = {}            # slot -> the steps reading it, in order
        for k, step in enumerate(self.steps):
            for p in step.reads:
                for s in (() if p is None else p if isinstance(p, tuple) else (p,)):
                    self.readers.setdefault(s, []).append(k)
        last = {s: ks[-1] for s, ks in self.readers.items()}
        for k, step in enumerate(self.steps):
            for s in step.outs:
                last.setdefault(s, k)          # written but never read: dropped at once
        keep = {s for s, _ in self.outputs} | {s for s, _, _ in self.narrowed}
        self.frees = [[] for _ in self.steps]
        for s, k in last.items():
            if s not in keep:
                self.frees[k].append(s)

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        self.runs += 1
        run_plan = self._ready_run_plan(self._fed_back(inputs))
        if run_plan is not None and kernels._fast() is not None and \
                run_plan.lock.acquire(blocking=False):
            try:                            # the arena: one run at a time; others interpret
                with kernels.blas_calls():
                    env = run_plan.run(inputs)
                self._check_narrowed(env)
                return self._returned(run_plan.outputs(env))
            finally:
                run_plan.lock.release()
        env: list = [None] * self.n_slots
        self.load_inputs(env, inputs)
        for s, value in self.constants:
            env[s] = value
        with np.errstate(all="ignore"), kernels.blas_calls():   # once per run: the engine
            self._steps(env)            # raises nothing (special values are the numerics
                                        # model's, hazards warn)
        self._check_narrowed(env)
        return self._returned([kernels.astype(env[s], dtype) for s, dtype in self.outputs])

    def _fed_back(self, inputs) -> list:
        """(input index, output index) of each input that is an array the last run returned:
        a training step's parameters and optimizer state, updated and given back. The run
        plan writes each such output over its input's place, and a run given the very array
        it returned need not load it (`plan.RunPlan._carried`)."""
        last = self.returned
        if not last:                    # (past the runs that learn: every run asks)
            return []
        return [(n, last[id(a)][0]) for n, a in enumerate(inputs)
                if id(a) in last and last[id(a)][1]() is a]

    def _returned(self, outputs: list) -> list:
        """The outputs, noted (weakly) while the run plan may still learn which come back."""
        if self.runs <= _LEARN and not (self.run_plan is not None and self.run_plan.pairs):
            self.returned = {id(a): (m, weakref.ref(a)) for m, a in enumerate(outputs)}
        else:
            self.returned = {}
        return outputs

    def load_inputs(self, env, inputs) -> None:
        for (s, carrier), a, name in zip(self.inputs, inputs, self.input_names):
            env[s] = self.carried(a, carrier, name)

    def carried(self, a, carrier, name) -> np.ndarray:
        """Input `a` in its carried form (float32 for fp16), NaN coerced (engine specials)."""
        return _coerce_nan(self.numerics, kernels.astype(a, carrier), name)

    def _ready_run_plan(self, pairs=()):
        """The run plan (runtime/plan.py), built on the second run (or the first, under
        ANEFORGE_SIM_PLAN=always) when the compiled kernels are on, and again once if a
        later run finds outputs fed back (`pairs`) that it was built without; None
        otherwise."""
        from . import plan
        if self.runs == 2:
            kernels.settle()            # a loop, on a fresh install: compiled kernels soon
        choice = plan.mode()
        if choice == "never" or (choice == "auto" and self.runs < 2):
            return None
        # the compiled kernels loaded (not just installed), and the standard store rounding
        if (self.run_plan is None or (pairs and not self.run_plan.pairs)) and \
                kernels._fast() is not None and type(self.numerics) is Numerics:
            self.run_plan = plan.RunPlan(self, pairs)
        return self.run_plan

    def _steps(self, env) -> None:
        for (simulate, ctx, reads, attrs, outs, store), frees in zip(self.steps, self.frees):
            res = simulate(ctx, *gather(env, reads), **attrs)
            res = (res,) if len(outs) == 1 else res
            for i, (s, r) in enumerate(zip(outs, res)):
                env[s] = r if store is None else store[i](r)
            for s in frees:
                env[s] = None

    def _check_narrowed(self, env) -> None:
        for s, dtype, name in self.narrowed:
            info = np.iinfo(dtype)
            wide = env[s]
            if wide.size and (wide.min() < info.min or wide.max() > info.max):
                raise DTypeError(f"output {name!r}: integer values in [{wide.min()}, {wide.max()}] "
                                 f"do not fit {dtype} at the program boundary (the ANE has no "
                                 f"int32 I/O). Compute in floating point, or keep results within "
                                 f"[{info.min}, {info.max}].")


_LEARN = 4         # runs in which an executable looks for its outputs fed back (`_fed_back`)


def _coerce_nan(numerics, a: np.ndarray, name: str) -> np.ndarray:
    """No NaN enters the engine: a NaN input reads as +inf (sbryngelson/ane-guide
    part-1-machine/03-numerics.md: NaN + 0 = +inf, relu(NaN) = +inf), reported as a hazard."""
    if numerics.specials != "engine" or a.dtype.kind != "f" or not kernels.has_nan(a):
        return a
    nan = np.isnan(a)
    nan_hazard(name, int(nan.sum()))
    return np.where(nan, np.float32(np.inf), a).astype(a.dtype, copy=False)


def _reads(op, slot, names) -> list:
    """The slots a step reads, one entry per input name (`Step.reads`)."""
    return [None if (v := op.inputs.get(k)) is None else
            tuple(slot[id(u)] for u in v) if isinstance(v, tuple) else slot[id(v)]
            for k in names]


class SimBackend(Backend):
    name = "sim"

    def available(self) -> tuple[bool, str]:
        return True, "numpy simulator of the ANE's fp16 numerics; runs everywhere"

    def compile(self, program, numerics) -> SimExecutable:
        self.admit(program)
        memory.check(program)          # before any run allocates: an expand can ask for 17 GB
        return SimExecutable(program, numerics)
