"""Every program the op table builds — forward, and the backward of every differentiable case —
serializes with our MILSpec writer and passes Apple's own loader (coremltools'
`load_mil_proto`, which re-runs Core ML's type inference on each op), with the same output
types we infer. This is the independent check that our MIL is real MIL."""
import numpy as np
import pytest

import aneforge as af
from aneforge.mil import proto
from conftest import coremltools_types, load_in_coremltools
from optable import CASES, af_inputs, arrays, call


def accepted(ct, program) -> None:
    theirs = coremltools_types(load_in_coremltools(proto.to_proto_bytes(program)))
    for op in program.operations:
        for v in op.outputs:
            assert theirs[v.name] == (v.shape, v.dtype.name), f"{op.type} {v.name}"


def forward(case):
    outs = call(case, af, af_inputs(arrays(case)))
    pending = [o for o in outs if not o._node.realized]
    return af.program(*pending) if pending else None


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward_program_is_accepted(ct, case):
    p = forward(case)
    if p is not None:                       # cases that only reshape a leaf build no program
        accepted(ct, p)


def backward(case):
    ins = af_inputs(arrays(case), requires_grad=True)
    outs = [o for o in call(case, af, ins) if o.dtype.is_float and o.requires_grad]
    leaves = [t for t in ins if t.requires_grad]
    if not outs or not leaves:
        return None
    rng = np.random.default_rng(1)           # a data cotangent: nothing folds to a constant
    loss = None
    for o in outs:
        c = af.tensor(rng.standard_normal(o.shape).astype(np.float16))
        loss = (o * c).sum() if loss is None else loss + (o * c).sum()
    grads = [g for g in af.grad(loss, leaves, allow_unused=True) if g is not None]
    return af.program(*grads) if grads else None


@pytest.mark.parametrize("case", [c for c in CASES if not c.bakes_inputs], ids=lambda c: c.name)
def test_backward_program_is_accepted(ct, case):
    p = backward(case)
    if p is not None:
        accepted(ct, p)


def test_training_step_program_is_accepted(ct):
    import aneforge.nn as nn
    import aneforge.nn.functional as F
    from conftest import step_program
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    program = step_program(model, F.cross_entropy, (af.randn(5, 8), af.tensor([0, 1, 2, 3, 0])))
    assert len(program.operations) > 50
    accepted(ct, program)
