"""The fp16-faithful ANE simulator: runs a Program op by op with the registry's numpy kernels
under one `Numerics` model (aneforge/numerics.py). It is the default backend off macOS."""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError
from ..ops import REGISTRY
from .base import Backend
from .walls import check_walls


class SimExecutable:
    """A Program turned into a flat list of kernel calls over a slot-indexed environment."""

    def __init__(self, program, numerics):
        f = program.main
        slot = {id(v): i for i, v in enumerate(f.block.vars())}
        self.n_slots, self.numerics = len(slot), numerics
        self.input_slots = [slot[id(v)] for v in f.inputs]
        self.output_slots = [slot[id(v)] for v in f.outputs]
        # Integer outputs narrowed at the boundary (int32 -> int16): the engine would wrap
        # silently; the simulator checks the value before the cast instead.
        self.narrowed = [(slot[id(v.op.inputs["x"])], v.dtype.np, v.name) for v in f.outputs
                         if v.op is not None and v.op.type == "cast" and v.dtype.np.kind in "iu"
                         and v.op.inputs["x"].dtype.np.itemsize > v.dtype.np.itemsize]
        self.steps = []
        for op in f.block.operations:
            opdef = REGISTRY[op.type]
            self.steps.append((opdef.simulate, _arg_plan(op, slot, opdef.inputs),
                               op.attrs, [slot[id(v)] for v in op.outputs]))

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        env: list = [None] * self.n_slots
        for s, a in zip(self.input_slots, inputs):
            env[s] = a
        nm = self.numerics
        for fn, plan, attrs, outs in self.steps:
            args = [None if p is None else tuple(env[i] for i in p) if isinstance(p, tuple) else env[p]
                    for p in plan]
            res = fn(nm, *args, **attrs)
            if len(outs) == 1:
                env[outs[0]] = res
            else:
                for s, r in zip(outs, res):
                    env[s] = r
        for s, dtype, name in self.narrowed:
            info = np.iinfo(dtype)
            wide = env[s]
            if wide.size and (wide.min() < info.min or wide.max() > info.max):
                raise DTypeError(f"output {name!r}: integer values in [{wide.min()}, {wide.max()}] "
                                 f"do not fit {dtype} at the program boundary (the ANE has no "
                                 f"int32 I/O). Compute in floating point, or keep results within "
                                 f"[{info.min}, {info.max}].")
        return [env[s] for s in self.output_slots]


def _arg_plan(op, slot, names):
    plan = []
    for k in names:
        v = op.inputs.get(k)
        plan.append(None if v is None else
                    tuple(slot[id(u)] for u in v) if isinstance(v, tuple) else slot[id(v)])
    return plan


class SimBackend(Backend):
    name = "sim"

    def available(self) -> tuple[bool, str]:
        return True, "numpy simulator of the ANE's fp16 numerics; runs everywhere"

    def compile(self, program, numerics) -> SimExecutable:
        program.validate()
        check_walls(program)
        return SimExecutable(program, numerics)
