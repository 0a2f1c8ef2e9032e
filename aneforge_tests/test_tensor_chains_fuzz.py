"""Random chains of tensor ops, aneforge against torch: values and input gradients.

hypothesis draws a shape (rank 1..3), a dtype (float16, or int32 for the integer-exact ops), a
data seed and a chain of 1..4 ops from OPS; both libraries run the chain on the same fp16
values. The reference is torch in float16 (each op's result rounded to fp16, as each aneforge
op's is: a sigmoid that rounds to 1.0 has a zero gradient in both); aneforge must agree under
aneforge.testing's rule (`af.testing.assert_close`: rtol 2^-7 against max(|e|, 1/8 of the
largest), the fp16 tolerance), gradients too, and integer results exactly. A chain whose
values leave fp16's range is skipped: past 65504 fp16 overflows by definition
(docs/numerics.md), not by a bug. Activations run with `activations="exact"` (every
target's model but M1's): M1's 33-knot tables differ from torch by their published worst error
(sigmoid 0.0034, docs/numerics.md "Activation tables"), which test_datapath holds them to.

Derandomized with a small budget so every CI run checks the same cases. CORPUS
(tensor_chains_corpus.json, beside this file) is the regression corpus: cases that once failed,
each with what was wrong and the rule or fix, replayed on every run; a new failure prints the
JSON line to add there. Each run is timed by pytest's --durations (about 3 s for 600 cases).
Set ANEFORGE_CHAIN_EXAMPLES for a longer local hunt (8000 cases: about a minute)."""
import json
import os
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import aneforge as af

CORPUS = os.path.join(os.path.dirname(__file__), "tensor_chains_corpus.json")
F16_SAFE = 30000.0            # intermediate values past this may overflow fp16 (differently): skipped
# Gradient rules subtract (tanh's 1 - y^2, sigmoid's y (1 - y), softmax's g - sum(g y)): in fp16
# the difference keeps the error of its larger terms, so gradients get aneforge.testing's
# gradient tolerance, 2^-5, values the default 2^-7.
GRAD_RTOL = 2.0 ** -5
# Sums, means and cumsums run as matmuls (docs/reductions.md), and matmul outputs below 2^-14
# flush to +0 on M1 (docs/numerics.md, matmul_subnormals): fp16's smallest normal is the atol.
ATOL = 2.0 ** -14
# A sum of 16 or fewer terms keeps an fp16 running sum (docs/reductions.md): its error is a few
# roundings of the largest partial, which cancellation can leave far above the result. So the
# absolute tolerance is also a few fp16 roundings (2^-9) of the largest magnitude the chain
# passes through (2^-7 of the largest gradient for gradients): a wrong axis, sign or term is
# off by the magnitude itself.
SUM_TOL = 2.0 ** -9
GRAD_SUM_TOL = 2.0 ** -7
INT16 = 2 ** 15               # integers cross the program boundary as int16 (docs/architecture.md)


def _lib(x):
    return torch if isinstance(x, torch.Tensor) else af


def _dim(x, d: int) -> int:
    return d % x.dim()


# name -> (argument strategy, f(x, arg), exact on integers?)
OPS = {
    "neg": (st.none(), lambda x, a: -x, True),
    "abs": (st.none(), lambda x, a: x.abs(), True),
    "tanh": (st.none(), lambda x, a: x.tanh(), False),
    "sigmoid": (st.none(), lambda x, a: x.sigmoid(), False),
    "sin": (st.none(), lambda x, a: x.clamp(-8.0, 8.0).sin(), False),     # well-conditioned
    "exp": (st.none(), lambda x, a: x.clamp(-4.0, 4.0).exp(), False),
    "relu": (st.none(), lambda x, a: x.relu(), False),
    "square": (st.none(), lambda x, a: x * x, True),
    "mul_c": (st.sampled_from([0.5, -3.0, 1e-3, 2.0 ** -20, 1e-6, 70000.0]), lambda x, a: x * a, False),
    "div_c": (st.sampled_from([3.0, -0.1, 1e5, 7e-5]), lambda x, a: x / a, False),
    "add_c": (st.sampled_from([1.0, -0.25, 1e-9, 3]), lambda x, a: x + a, False),
    "rsub_c": (st.sampled_from([1.0, 2.5]), lambda x, a: a - x, False),
    "remainder_c": (st.sampled_from([1.5, 3.0, -2.0]), lambda x, a: x % a, False),
    "clamp": (st.none(), lambda x, a: x.clamp(-1.0, 1.0), False),
    "where": (st.none(), lambda x, a: _lib(x).where(x > 0, x, x * 0.1), False),
    "softmax": (st.integers(0, 2), lambda x, a: x.softmax(_dim(x, a)), False),
    "log_softmax": (st.integers(0, 2), lambda x, a: x.log_softmax(_dim(x, a)), False),
    "sum": (st.integers(0, 2), lambda x, a: x.sum(_dim(x, a), keepdim=True), True),
    "mean": (st.integers(0, 2), lambda x, a: x.mean(_dim(x, a), keepdim=True), False),
    "amax": (st.integers(0, 2), lambda x, a: x.amax(_dim(x, a), keepdim=True), True),
    "cumsum": (st.integers(0, 2), lambda x, a: x.cumsum(_dim(x, a)), True),
    "flip": (st.integers(0, 2), lambda x, a: x.flip(_dim(x, a)), True),
    "transpose": (st.none(), lambda x, a: x.transpose(0, -1), True),
    "cat": (st.integers(0, 2), lambda x, a: _lib(x).cat([x, x * 2], _dim(x, a)), True),
    "narrow": (st.integers(0, 2), lambda x, a: x.narrow(_dim(x, a), 0, max(1, x.shape[_dim(x, a)] // 2)), True),
    "flatten": (st.none(), lambda x, a: x.reshape(-1), True),
    "unsqueeze": (st.none(), lambda x, a: x.unsqueeze(0) if x.dim() < 4 else x, True),
    "var": (st.integers(0, 2), lambda x, a: x.var(_dim(x, a), keepdim=True, correction=0), False),
}


def run(lib_x, chain):
    """The chain's output and every intermediate (to check the exact values stay in range)."""
    seen, x = [], lib_x
    for name, arg in chain:
        x = OPS[name][1](x, arg)
        seen.append(x)
    return x, seen


def inputs(shape, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return rng.integers(-5, 6, size=shape).astype(np.int32)
    return rng.uniform(-2, 2, size=shape).astype(np.float16)


def check(case: dict, known: bool = True) -> str:
    """Run one case on both libraries: "agrees", or why it is not compared (a documented engine
    rule; `known=False` compares those too); AssertionError (with the case) on a difference."""
    x0 = inputs(tuple(case["shape"]), case["dtype"], case["seed"])
    chain = [tuple(step) for step in case["chain"]]
    floating = case["dtype"] == "float16"
    xt = torch.tensor(x0, requires_grad=floating)
    want, seen = run(xt, chain)
    if floating and any(not torch.isfinite(v).all() or v.abs().max() > F16_SAFE for v in seen):
        return "leaves fp16's range"
    if not floating and any(v.abs().max() >= INT16 for v in seen):
        return "past int16: a DTypeError at the boundary"
    if known and floating and narrow_sum_overflows(chain, xt, seen):
        return "a narrow sum's running partial passes 65504"
    with af.numerics(activations="exact"):
        xa = af.tensor(x0, requires_grad=floating)
        got, _ = run(xa, chain)
        what = f"case {json.dumps(case)}"
        assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {got.shape} for {tuple(want.shape)}"
        if not floating:
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=what)
            return "agrees"
        close(got, want.detach(), af.testing.RTOL, SUM_TOL * largest([xt, *seen]), f"{what}: values")
        w = torch.tensor(np.random.default_rng(case["seed"] + 1).uniform(-1, 1, size=tuple(want.shape)),
                         dtype=torch.float16)
        for v in seen:
            v.retain_grad()
        (want * w).sum().backward()
        (got * af.tensor(w.numpy())).sum().backward()
        grads = [xt.grad, *(v.grad for v in seen if v.grad is not None)]
        close(xa.grad, xt.grad, GRAD_RTOL, GRAD_SUM_TOL * largest(grads), f"{what}: input gradients")
    return "agrees"


REDUCING = {"sum", "mean", "var"}       # at most 5 terms here: the narrow route (reduce_sum/mean)


def narrow_sum_overflows(chain, x, seen) -> bool:
    """Whether a reduction's terms sum, in absolute value, past fp16's 65504: its fp16 running
    partial may read inf where torch (fp32 accumulation) is finite (docs/numerics.md,
    reduce_accumulate: the engine's reduce_sum/mean keep an fp16 running sum; var sums squared
    deviations). Known: see the corpus entry "narrow var overflows"."""
    inputs_ = [x, *seen[:-1]]
    for (name, arg), v in zip(chain, inputs_):
        if name in REDUCING:
            terms = v.detach().float()
            if name == "var":
                terms = (terms - terms.mean(_dim(terms, arg), keepdim=True)) ** 2
            if terms.abs().sum(_dim(terms, arg)).max() > 65504:
                return True
    return False


def largest(values) -> float:
    return max(float(v.detach().abs().max()) for v in values)


def close(got, want, rtol: float, atol: float, what: str) -> None:
    try:
        af.testing.assert_close(got, want, rtol=rtol, atol=max(atol, ATOL))
    except AssertionError as e:
        raise AssertionError(f"{what}: {e}") from None


def corpus() -> list:
    with open(CORPUS) as f:
        return json.load(f)["cases"]


@pytest.mark.parametrize("entry", corpus(), ids=lambda e: e["id"])
def test_corpus_replays(entry):
    """Each case that once failed: its outcome now. A "known" entry is a difference not fixed
    yet (named in docs/errors.md or its own docs): it must still show, with its message, so a
    fix is noticed and the entry moved to "agrees"."""
    if "known" not in entry:
        assert check(entry["case"]) == entry["outcome"]
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", af.Float16RangeWarning)     # tested in test_data_in
        with pytest.raises(AssertionError, match=entry["known"]):
            check(entry["case"], known=False)


# cases the corpus pins as known differences (which examples the fuzz draws depends on how
# earlier ones ran, e.g. alone or with ANEFORGE_KERNELS=numpy: a pinned one may come up)
KNOWN_CASES = {json.dumps(e["case"]) for e in corpus() if "known" in e}


def case_of(draw) -> dict:
    dtype = draw(st.sampled_from(["float16", "float16", "int32"]))
    names = sorted(n for n, op in OPS.items() if dtype == "float16" or op[2])
    chain = [(n, draw(OPS[n][0])) for n in draw(st.lists(st.sampled_from(names), min_size=1, max_size=4))]
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    return {"shape": shape, "dtype": dtype, "seed": draw(st.integers(0, 2 ** 16)), "chain": chain}


@settings(max_examples=int(os.environ.get("ANEFORGE_CHAIN_EXAMPLES", "600")), deadline=None,
          derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_op_chains_agree_with_torch(data):
    case = case_of(data.draw)
    if json.dumps(case) in KNOWN_CASES:      # pinned with its message: test_corpus_replays
        return
    try:
        check(case)
    except Exception as e:       # any failure: print the corpus line for it
        raise AssertionError(f"add to {os.path.basename(CORPUS)}: "
                             f'{{"id": "...", "why": "...", "case": {json.dumps(case)}, '
                             f'"outcome": "agrees"}}\n{type(e).__name__}: {e}') from e
