"""Forward values, shapes and dtype families of every op against torch, from the op table
(optable.py: one line per case, its tolerance rule at the top)."""
import math

import numpy as np
import pytest
import torch

import aneforge as af
from aneforge.ops import REGISTRY
from optable import CASES, af_inputs, arrays, bound, call, expected, family, torch_inputs


def run_af(case, salt=0) -> list:
    outs = call(case, af, af_inputs(arrays(case, salt)))
    af.realize(*outs)                    # one program for all outputs, as a user would
    return outs


def abs_reference(case, xs):
    """fn(|inputs|) in torch: the scale of a sum's rounding error (Tol.cond)."""
    if not case.tol.cond:
        return [None] * 8
    return [t.detach().numpy().astype(np.float64)
            for t in call(case, torch, torch_inputs([np.abs(x) for x in xs]))]


def check(case, i, got, want, abs_ref):
    what = f"{case.name} output {i}"
    assert isinstance(got, af.Tensor), f"{what}: got {type(got).__name__}, not a Tensor"
    assert got.shape == tuple(want.shape), f"{what}: shape {got.shape}, torch {tuple(want.shape)}"
    assert family(got.dtype) == family(want.dtype), f"{what}: dtype {got.dtype}, torch {want.dtype}"
    a, t = got.numpy(), want.detach().numpy()
    assert a.shape == got.shape, f"{what}: value shape {a.shape}, static shape {got.shape}"
    if family(got.dtype) != "float":
        np.testing.assert_array_equal(a, t, err_msg=what)
        return
    a, e = a.astype(np.float64), expected(t.astype(np.float64))
    special = ~np.isfinite(e)
    np.testing.assert_array_equal(a[special], e[special], err_msg=f"{what}: inf/nan positions")
    err, tol = np.abs(a - e)[~special], bound(case, e, abs_ref)[~special]
    bad = err > tol
    assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} values off; worst error "
                           f"{err.max():.3g} vs bound {tol[np.argmax(err - tol)]:.3g}\n"
                           f"aneforge {a.ravel()[:8]}\ntorch    {e.ravel()[:8]}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward(case):
    xs = arrays(case)
    got = run_af(case)
    want = call(case, torch, torch_inputs(xs))
    assert len(got) == len(want), f"{case.name}: {len(got)} outputs, torch {len(want)}"
    for i, (g, w, r) in enumerate(zip(got, want, abs_reference(case, xs))):
        check(case, i, g, w, r)


@pytest.mark.parametrize("case", [c for c in CASES if not c.bakes_inputs], ids=lambda c: c.name)
def test_new_data_reuses_the_compiled_program(case):
    first = run_af(case, salt=1)
    computed = any(t.ref[0].origin is not None for t in first)
    before = af.cache_info()
    run_af(case, salt=2)
    after = af.cache_info()
    assert after.misses == before.misses, f"{case.name}: new data compiled again"
    assert after.hits == before.hits + computed


def test_table_covers_every_registered_op():
    seen = set()
    for case in CASES:
        pending = [t for t in call(case, af, af_inputs(arrays(case))) if not t.is_leaf]
        if pending:
            seen |= {op.type for op in af.program(*pending).main.block.operations}
    assert set(REGISTRY) - seen == set(), "ops no case reaches"


TAILS = {   # float64 truths where torch's fp32 reference itself cancels (1 + erf, 1 + tanh)
    "sigmoid": (lambda x: x.sigmoid(), lambda v: 1 / (1 + np.exp(-v))),
    "silu": (lambda x: af.nn.functional.silu(x), lambda v: v / (1 + np.exp(-v))),
    "gelu": (lambda x: af.nn.functional.gelu(x),
             lambda v: 0.5 * v * np.vectorize(math.erfc)(-v / math.sqrt(2))),
    "gelu_tanh": (lambda x: af.nn.functional.gelu(x, approximate="tanh"),
                  lambda v: v / (1 + np.exp(-2 * 0.7978845608028654 * (v + 0.044715 * v ** 3)))),
}


@pytest.mark.parametrize("name", TAILS)
def test_activation_tails_within_one_ulp(name):
    """Every fp16 input in [-17, 17]: the computed kernel (activations="exact", the
    torch-faithful model; M1's default reads the engine's tables, which test_datapath.py pins
    bit for bit) is within one fp16 ulp of the float64 truth, down into the subnormal tails
    (an fp32 1 + tanh form is off by several ulps there)."""
    fn, truth = TAILS[name]
    xs = np.unique(np.linspace(-17, 17, 20001).astype(np.float16))
    with af.numerics(activations="exact"):
        got = fn(af.tensor(xs)).numpy().astype(np.float64)
    want = truth(xs.astype(np.float64))
    ulp = np.spacing(np.abs(want).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got - want) <= ulp)
