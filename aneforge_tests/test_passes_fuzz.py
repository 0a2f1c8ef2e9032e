"""Random programs through the pipeline (hypothesis): programs built from a vocabulary that is
dense in what the passes rewrite (x * 1, x + 0, constant arithmetic, repeated ops, reshape,
transpose and relu chains, casts through fp32, negations, tiles, gelu / leaky relu written
out) keep their values under the exact preset, stay within fp16 roundings under the default,
never grow, validate, and are fixed points of the pipeline.

"Within fp16 roundings" for a numeric pass (passes/registry.py: a fused op rounds once where its
parts rounded several times) is TOL of the output scale, plus the roundings of the parts it
replaces, measured as how far the fp16 program is from its unrounded evaluation: the parts'
roundings can be amplified. A written-out layer norm rounds its mean to fp16 (error up to
ulp(|mean|) / 2) and then divides by the standard deviation, so when |mean| >> std the written-out
chain is off by far more than TOL of its output, and fusing it into layer_norm (computed in
fp32, rounded once) moves the value by that much — towards the exact result."""
from __future__ import annotations

import copy

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aneforge as af
import aneforge.passes as P
from aneforge import dtypes
from aneforge.hardware.numerics import Numerics, get_numerics
from aneforge.ops import validate
from aneforge.runtime.sim import SimBackend
from test_mil_proto import Builder
from test_passes_pipeline import TOL, close

SHAPE = (2, 3, 4)


def _unary(b, x, draw):
    kind = draw(st.sampled_from(["relu", "exp_small", "reshape", "transpose", "cast", "neg",
                                 "identity", "tile", "gelu", "leaky", "mean", "stack", "zero_pad",
                                 "layer_norm", "select", "divide", "sink"]))
    if kind in MORE:
        return MORE[kind](b, x)
    if kind == "relu":
        return b("relu", x=x)
    if kind == "exp_small":
        return b("exp", x=b("mul", x=x, y=b.const(0.25)))
    if kind == "reshape":
        return b("reshape", x=b("reshape", x=x, shape=(6, 4)), shape=SHAPE)
    if kind == "transpose":
        perm = draw(st.permutations(range(3)))
        inverse = tuple(int(i) for i in np.argsort(perm))
        return b("transpose", x=b("transpose", x=x, perm=tuple(perm)), perm=inverse)
    if kind == "cast":
        return b("cast", x=b("cast", x=x, dtype="fp32"), dtype="fp16")
    if kind == "neg":
        return b("sub", x=b.const(0.0), y=x)
    if kind == "identity":
        op = draw(st.sampled_from(["add", "sub", "mul", "real_div"]))
        return b(op, x=x, y=b.const(0.0 if op in ("add", "sub") else 1.0))
    if kind == "tile":
        r = b("reduce_max", x=x, axes=(2,), keep_dims=True)
        return b("add", x=x, y=b("tile", x=r, reps=(1, 1, 4)))
    if kind == "gelu":
        e = b("erf", x=b("real_div", x=x, y=b.const(1.4142135)))
        return b("mul", x=b("mul", x=b("add", x=e, y=b.const(1.0)), y=b.const(0.5)), y=x)
    return b("maximum", x=b("mul", x=x, y=b.const(0.125)), y=x)


def _window(b, x, start, size):
    """x[:, :, start:start + size]."""
    return b("slice_by_index", x=x, begin=(0, 0, start), end=(2, 3, start + size),
             stride=(1, 1, 1), begin_mask=(True, True, False), end_mask=(True, True, False),
             squeeze_mask=(False,) * 3)


def _layer_norm(b, x):
    mu = b("reduce_mean", x=x, axes=(-1,), keep_dims=True)
    xc = b("sub", x=x, y=mu)
    var = b("reduce_mean", x=b("mul", x=xc, y=xc), axes=(-1,), keep_dims=True)
    return b("mul", x=xc, y=b("rsqrt", x=b("add", x=var, y=b.const(2.0 ** -10))))


def _zero_pad(b, x):
    edge = _window(b, x, 0, 1)
    z = b("sub", x=edge, y=edge)
    return _window(b, b("concat", values=(z, x, z), axis=2), 1, 4)


MORE = {
    "mean": lambda b, x: b("add", x=x, y=b("real_div", x=b("reduce_sum", x=x, axes=(2,),
                                                              keep_dims=True), y=b.const(4.0))),
    "stack": lambda b, x: _window(b, b("reshape", x=b("concat", values=(
        b("expand_dims", x=x, axes=(2,)), b("expand_dims", x=b("relu", x=x), axes=(2,))),
        axis=2), shape=(2, 3, 8)), 2, 4),
    "zero_pad": _zero_pad,
    "layer_norm": _layer_norm,
    "select": lambda b, x: b("select", cond=b.const(np.array(True), dtypes.bool_), a=x,
                             b=b("relu", x=x)),
    "divide": lambda b, x: b("real_div", x=x, y=b.const(3.0)),
    "sink": lambda b, x: b("transpose", perm=(1, 2, 0), x=b("exp", x=b("relu", x=b(
        "transpose", x=x, perm=(2, 0, 1))))),
}


def _binary(b, x, y, draw):
    op = draw(st.sampled_from(["add", "sub", "mul", "maximum", "minimum"]))
    folded = b("mul", x=b.const(np.float16(draw(st.sampled_from([0.5, 1.5, 3.0])))),
               y=b.const(2.0))                            # constant arithmetic to fold
    return b(op, x=b(op, x=x, y=y), y=b("add", x=y, y=folded))


@st.composite
def programs(draw):
    b = Builder()
    values = [b.input(*SHAPE), b.input(*SHAPE)]
    for _ in range(draw(st.integers(2, 7))):
        x = draw(st.sampled_from(values))
        if draw(st.booleans()):
            values.append(_unary(b, x, draw))
        else:
            values.append(_binary(b, x, draw(st.sampled_from(values)), draw))
        if draw(st.booleans()):                          # a repeat for CSE
            values.append(_unary(b, x, draw) if draw(st.booleans()) else b("relu", x=values[-1]))
    outs = draw(st.lists(st.sampled_from(values[2:]), min_size=1, max_size=3, unique_by=id))
    return b.program(*outs)


def run(program, inputs, numerics=None):
    with np.errstate(over="ignore"):          # unrounded values may overflow fp16 outputs
        return SimBackend().compile(program, numerics or get_numerics()).run(inputs)


class Unrounded(Numerics):
    """The simulator without fp16 roundings of intermediate results (carried in fp32)."""

    def round16(self, x):
        return np.asarray(x, np.float32)


def within_pass_tolerance(got, want, unrounded, atol=2.0 ** -8):
    """Each element of `got` within TOL of the scale (+ atol) of `want`, plus what the fp16
    roundings of `want`'s program amounted to there (|want - unrounded|)."""
    for x, y, z in zip(got, want, unrounded):
        if x.dtype.kind != "f":
            np.testing.assert_array_equal(x, y)
            continue
        x, y, z = (a.astype(np.float64) for a in (x, y, z))
        np.testing.assert_array_equal(np.isnan(x), np.isnan(y))
        ok = np.isfinite(y)
        np.testing.assert_array_equal(x[~ok & ~np.isnan(y)], y[~ok & ~np.isnan(y)])
        scale = np.abs(y[ok]).max() if ok.any() else 0.0
        with np.errstate(all="ignore"):     # inf - inf where a value overflows
            rounded = np.nan_to_num(np.abs(y - z), nan=0.0, posinf=0.0)
            bound = TOL * (np.abs(y) + scale) + atol + rounded
            bad = np.abs(x - y)[ok] > bound[ok]
        assert not bad.any(), f"{int(bad.sum())} of {x.size} elements moved beyond the tolerance"


# derandomized: the same 60 programs every run (CI stays deterministic); the programs an
# exploring run found are pinned below as their own tests
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.integers(0, 2 ** 16))
def test_random_programs_keep_their_values(program, seed):
    rng = np.random.default_rng(seed)
    inputs = [rng.uniform(-3, 3, v.shape).astype(np.float16) for v in program.main.inputs]
    want = run(program, inputs)
    original, exact = copy.deepcopy(program), copy.deepcopy(program)
    P.run(exact, "exact")
    for a, b in zip(run(validate(exact), inputs), want):
        np.testing.assert_array_equal(a, b)
    report = P.run(program, "default")
    assert report.ops_after <= report.ops_before
    # atol: a fused gelu is accurate in its tail, where the written-out 1 + erf(x / sqrt2)
    # cancels to about 0.5 |x| ulp(1) = 2**-12 |x| absolute (|x| <= ~10 here). Compared with
    # computed activations: where M1 reads a fused gelu/silu from its table the engine computes
    # a different function (within the published table error, test_datapath.py), not the pass
    with af.numerics(activations="exact"):
        want = run(original, inputs)
        unrounded = run(original, inputs, Unrounded())
        within_pass_tolerance(run(validate(program), inputs), want, unrounded, atol=2.0 ** -8)
    signature = program.signature()
    assert sum(s.rewrites for s in P.run(program, "default").stats) == 0
    assert program.signature() == signature


def test_fused_layer_norm_of_a_cubic_is_exact_where_the_written_out_chain_overflows():
    """A program an exploring run found: layer norm of x (3x + 1)(3x + 2), x ~ U(-3, 3). The
    centred squares reach ~1e5, past fp16, so the written-out variance is inf and its output
    is off by up to 1.4; fused, layer_norm computes them in fp32 and is within 7e-4 of float64.
    (The pass tolerance, measured against the chain, cannot tell that move from an error.)"""
    b = Builder()
    x = b.input(*SHAPE)
    one = b("mul", x=b.const(np.float16(0.5)), y=b.const(2.0))
    a8 = b("add", x=b("add", x=x, y=x), y=b("add", x=x, y=one))
    cubic = b("mul", x=b("mul", x=x, y=a8), y=b("add", x=a8, y=one))
    program = b.program(MORE["layer_norm"](b, cubic))
    inputs = [np.random.default_rng(0).uniform(-3, 3, SHAPE).astype(np.float16)]
    with af.numerics(activations="exact"):
        want = run(program, inputs)
        P.run(program, "default")
        assert [op.type for op in program.operations][-1] == "layer_norm"
        got = run(validate(program), inputs)
    xd = inputs[0].astype(np.float64)
    m = xd * (3 * xd + 1) * (3 * xd + 2)
    xc = m - m.mean(-1, keepdims=True)
    exact = xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 2.0 ** -10)
    assert np.abs(got[0] - exact).max() < 1e-3 < 1.0 < np.abs(want[0] - exact).max()


def test_fused_layer_norm_of_an_offset_input_moves_towards_the_exact_value():
    """The program hypothesis found (seed 2710): layer norm of -(x + 6), x ~ U(-3, 3) over 4
    elements. The written-out chain rounds its mean (~ -6, ulp 2**-8) and divides by a std as
    small as ~0.2. Fused, three elements move by 0.0142, beyond TOL (|y| + scale) + 2**-8
    (0.011..0.014 there); at the worst the error vs float64 drops from 0.0168 to 0.0026, and the
    fp16 chain is 0.0168 from its own unrounded evaluation: the roundings the fusion removed."""
    b = Builder()
    x1 = b.input(*SHAPE)
    x = b("sub", x=b("sub", x=x1, y=x1), y=b("add", x=x1, y=b.const(6.0)))
    program = b.program(MORE["layer_norm"](b, x))
    inputs = [np.random.default_rng(2710).uniform(-3, 3, SHAPE).astype(np.float16)]
    want, unrounded = run(program, inputs), run(program, inputs, Unrounded())
    P.run(program, "default")
    assert [op.type for op in program.operations][-1] == "layer_norm"
    got = run(validate(program), inputs)
    xd = -(inputs[0].astype(np.float64) + 6)
    xc = xd - xd.mean(-1, keepdims=True)
    exact = xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 2.0 ** -10)
    assert np.abs(got[0] - exact).max() < 0.2 * np.abs(want[0] - exact).max()
    with np.testing.assert_raises(AssertionError):       # what the bound without roundings said
        close(got, want, atol=2.0 ** -8)
    within_pass_tolerance(got, want, unrounded)
