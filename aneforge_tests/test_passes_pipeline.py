"""The whole default pipeline over every program of the op table, forward and backward (the
gradient programs test_coreml_accepts builds), and over real training steps: results unchanged
(the exact preset: the same values; the default: within fp16 roundings), the op count never
grows, and the pipeline is idempotent (a second run rewrites nothing)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import aneforge.passes as P
from aneforge.core.boundary import encode, wide_leaves
from aneforge.core.realization import Cut
from aneforge.hardware.numerics import get_numerics
from aneforge.runtime.sim import SimBackend
from optable import CASES, af_inputs, arrays, call
from test_coreml_accepts import backward

import aneforge as af

# Passes that turn what the engine cannot run into what it can; they may add ops.
LEGALIZATIONS = ("decompose_masked_attention", "split_long_matmul")
TOL = 2.0 ** -8    # x (|b| + max|b|): a few fp16 roundings moved (divide_to_multiply, fusions)


def traced(tensors):
    """(Program, its real inputs) for realizing `tensors`, as the compiler would build them."""
    pending = [t.ref for t in tensors if not t.ref[0].realized]
    if not pending:
        return None, None
    cut = Cut(pending)
    wide = wide_leaves(cut.leaves)
    inputs = [encode(n.data[i], n.types[i], j in wide)
              for j, (n, i) in enumerate(cut.leaves)]
    return cut.program(wide), inputs


def run(program, inputs):
    return SimBackend().compile(program, get_numerics()).run(inputs)


def same_values(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def close(a, b, atol=2.0 ** -24, outliers=0.0):
    """Every output within TOL of the scale (and atol); `outliers`: the fraction of all
    float elements allowed beyond it."""
    bad = total = 0
    for x, y in zip(a, b):
        if x.dtype.kind != "f":
            np.testing.assert_array_equal(x, y)
            continue
        x, y = x.astype(np.float64), y.astype(np.float64)
        np.testing.assert_array_equal(np.isnan(x), np.isnan(y))
        ok = np.isfinite(y)
        np.testing.assert_array_equal(x[~ok & ~np.isnan(y)], y[~ok & ~np.isnan(y)])
        scale = np.abs(y[ok]).max() if ok.any() else 0.0
        bad += int((np.abs(x[ok] - y[ok]) > TOL * (np.abs(y[ok]) + scale) + atol).sum())
        total += x.size
    assert bad <= outliers * total, f"{bad} of {total} elements moved beyond the tolerance"


# A training step also returns the compensation residuals of its weights ((new - old) - update,
# below one ulp of a weight): any rounding moved upstream moves them by up to that ulp. And
# fp16 Adam divides by sqrt(v) + eps, which underflows for tiny gradients: there a rounding
# moved upstream (a fused layer norm) can move a weight by many ulps. The exact preset is
# checked bit for bit; the default may move one weight element in a thousand further.
STEP = dict(atol=2.0 ** -10, outliers=1e-3)


def check_pipeline(program, inputs, atol=2.0 ** -24, outliers=0.0):
    want = run(program, inputs)
    exact = copy.deepcopy(program)
    P.run(exact, "exact")
    same_values(run(exact, inputs), want)
    report = P.run(program, "default")
    grown = sum(-report.removed(n) for n in LEGALIZATIONS)     # they must add ops
    assert report.ops_after <= report.ops_before + max(grown, 0), str(report)
    close(run(program, inputs), want, atol, outliers)
    signature = program.signature()
    again = P.run(program, "default")
    assert sum(s.rewrites for s in again.stats) == 0, str(again)
    assert program.signature() == signature
    return report


def forward(case):
    return traced(call(case, af, af_inputs(arrays(case))))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_pipeline_on_forward_programs(case):
    program, inputs = forward(case)
    if program is not None:
        check_pipeline(program, inputs)


def grads(case):
    captured = {}
    real = af.program

    def spy(*tensors):
        captured["t"] = tensors
        return real(*tensors)
    af.program = spy
    try:
        backward(case)
    finally:
        af.program = real
    return traced(captured["t"]) if "t" in captured else (None, None)


@pytest.mark.parametrize("case", [c for c in CASES if not c.bakes_inputs], ids=lambda c: c.name)
def test_pipeline_on_backward_programs(case):
    program, inputs = grads(case)
    if program is not None:
        check_pipeline(program, inputs)


def test_pipeline_shrinks_the_train_mlp_step():
    from aneforge.bench.passes import mlp_step_program
    report = check_pipeline(*mlp_step_program(batch=16), **STEP)
    assert report.ops_after < report.ops_before - 30, str(report)
    assert report.removed("const_deduplication") > 20
    assert report.removed("remove_redundant_ops") >= 4


def test_pipeline_on_a_transformer_block():
    from aneforge.bench.passes import transformer_programs
    # d = 16: the layer norm's means stay reduce_mean (longer ones are matmuls, not fused)
    forward, step = transformer_programs(batch=2, tokens=8, d=16)
    # the block's scalar output cancels: the M1 matmul model's 12-bit truncating in-tile adder
    # errs at the terms' magnitude (ane-guide datapath chapter), so the fused layer norm's
    # rounding moves it by up to ~2**-6 of the terms, not of the result
    report = check_pipeline(*forward, atol=2.0 ** -6)
    assert forward[0].op_counts()["layer_norm"] == 2
    assert report.ops_after < report.ops_before
    report = check_pipeline(*step, **STEP)
    assert report.ops_after < report.ops_before - 100, str(report)


def test_training_with_the_pipeline_matches_training_without():
    """Ten AdamW steps of a small MLP, optimized vs not: the same losses within fp16 noise."""
    import aneforge.nn as nn
    import aneforge.nn.functional as F

    def losses():
        af.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 3))
        opt = af.optim.AdamW(model.parameters(), lr=1e-2)
        rng = np.random.default_rng(0)
        out = []
        for _ in range(10):
            loss = F.cross_entropy(model(af.tensor(rng.standard_normal((6, 8)))),
                                   af.tensor(rng.integers(0, 3, 6)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        return np.array(out)
    with P.pipeline("none"):
        plain = losses()
    np.testing.assert_allclose(losses(), plain, rtol=2e-2)
