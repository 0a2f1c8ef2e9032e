"""Graph passes, one at a time (coremltools-style): build a small program, run the pass, assert
the op counts after and that the simulator's outputs are the same values (exact passes) or
within fp16 rounding (numeric passes); plus a case each pass must leave alone."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import aneforge as af
import aneforge.nn.functional as F
import aneforge.passes as P
from aneforge import dtypes
from aneforge.ir import Block, Function, Program
from aneforge.hardware.numerics import get_numerics
from aneforge.ops import validate
from aneforge.runtime.sim import SimBackend
from aneforge.tensor import const, record_op
from test_mil_proto import Builder, _inputs

U = 2.0 ** -11


def outputs(program, inputs):
    return SimBackend().compile(program, get_numerics()).run(inputs)


def apply(program, *names, exact=None, tol=4 * U, **options):
    """Run the passes on `program` in place; check its outputs against the untouched copy
    (equal values if every pass is exact, else |a - b| <= tol (|b| + max|b|)); return the
    report."""
    before = copy.deepcopy(program)
    report = P.run(program, list(names), **options)
    validate(program)
    exact = all(P.PASSES[n].exact for n in names) if exact is None else exact
    inputs = _inputs(before)
    for a, b in zip(outputs(program, inputs), outputs(before, inputs)):
        if exact or a.dtype.kind != "f":
            np.testing.assert_array_equal(a, b)
        else:
            a, b = a.astype(np.float64), b.astype(np.float64)
            np.testing.assert_array_equal(np.isfinite(a), np.isfinite(b))
            ok = np.isfinite(b)
            scale = np.abs(b[ok]).max() if ok.any() else 0.0
            assert np.all(np.abs(a[ok] - b[ok]) <= tol * (np.abs(b[ok]) + scale)), (a, b)
    return report


def counts(program) -> dict:
    return program.op_counts()


def ops(program) -> list[str]:
    return [op.type for op in program.operations if op.type != "const"]


def data(*shape, low=-2.0, high=2.0):
    return af.tensor(np.random.default_rng(len(shape)).uniform(low, high, shape))


def fp16(v):
    return const(np.asarray(v, np.float16), af.float16)


# ---------------------------------------------------------------------------- machinery

def test_order_places_every_registered_pass_once():
    names = [n for n, _, _ in P.ORDER]
    assert sorted(names) == sorted(P.PASSES) and len(set(names)) == len(names)
    assert all(why for _, _, why in P.ORDER)


@pytest.mark.parametrize("name", sorted(P.PASSES))
def test_every_pass_draws_its_program_before_and_after(name):
    p = P.PASSES[name]
    assert p.kind in ("exact", "numeric")
    assert len(p.doc.splitlines()) >= 3 and ("%" in p.doc or "->" in p.doc), name


def test_docs_list_every_pass():
    from pathlib import Path
    text = (Path(__file__).resolve().parent.parent / "docs" / "passes.md").read_text()
    missing = [n for n in P.PASSES if f"`{n}`" not in text]
    assert not missing, f"docs/passes.md does not describe {missing}"


def test_presets_and_settings():
    assert set(P.PRESETS["exact"]) <= set(P.DEFAULT)
    assert all(P.PASSES[n].exact for n in P.PRESETS["exact"])
    assert "reduce_sum_to_matmul" not in P.DEFAULT and "reduce_sum_to_matmul" in P.PRESETS["ane"]
    with P.pipeline(add=["reduce_sum_to_matmul"], remove=["divide_to_multiply"]) as spec:
        names = spec.passes
        assert names.index("reduce_sum_to_matmul") > names.index("fuse_reduce_mean")
        assert "divide_to_multiply" not in names
    assert P.get_pipeline().passes == P.DEFAULT
    with pytest.raises(af.AneforgeError, match="no graph pass 'fuse_everything'"):
        P.set_pipeline(["fuse_everything"])
    with pytest.raises(af.AneforgeError, match="no pass preset"):
        P.set_pipeline("fast")


def test_pipeline_is_part_of_the_cache_key_and_runs_on_misses_only():
    af.clear_cache()
    x = data(3, 4)
    (x * 1.0 + 0.0).exp().numpy()
    first = P.last_report()
    assert first.ops_before == 5 and first.ops_after == 1         # mul, add and consts gone
    (x * 1.0 + 0.0).exp().numpy()
    assert P.last_report() is first and af.cache_info().misses == 1
    with P.pipeline("none"):
        (x * 1.0 + 0.0).exp().numpy()
        assert P.last_report().ops_after == 5
    assert af.cache_info().misses == 2


def test_report_names_what_each_pass_did():
    p = af.program(data(3).relu().relu() * 1.0)
    report = P.run(p)
    text = str(report)
    assert "merge_consecutive_relus" in text and "noop_elimination" in text
    assert "ops 4 -> 1" in text
    assert report.removed("noop_elimination") == 2                  # the mul and its const
    assert report.rewrites("merge_consecutive_relus") == 1
    assert "divide_to_multiply" not in text                        # passes that did nothing


def test_debug_prints_each_compile(capsys):
    P.debug(True)
    try:
        (data(5) + 0.0).exp().numpy()
    finally:
        P.debug(False)
    assert "noop_elimination" in capsys.readouterr().out


def test_output_names_survive_and_outputs_never_become_inputs_or_consts():
    b = Builder()
    x = b.input(3)
    one = b.const(1.0)
    y = b("mul", x=x, y=one)                   # would reduce to the input itself
    z = b("relu", x=b("identity", x=x))        # the identity goes, relu keeps the output name
    p = b.program(y, z)
    names = [v.name for v in p.main.outputs]
    apply(p, "noop_elimination", "dead_code_elimination")
    assert [v.name for v in p.main.outputs] == names
    assert ops(p) == ["mul", "relu"]


# ---------------------------------------------------------------------------- cleanup passes

def test_dead_code_elimination():
    b = Builder()
    x, w = b.input(2, 4), b.input(4, 2)
    b("matmul", x=x, y=w)
    b.const(np.ones(3))
    p = b.program(b("add", x=x, y=b.const(2.0)))
    report = apply(p, "dead_code_elimination")
    assert counts(p) == {"const": 1, "add": 1} and report.removed("dead_code_elimination") == 2


def test_dead_code_elimination_keeps_multi_output_ops_with_one_used_output():
    b = Builder()
    x = b.input(4, 2)
    a, _ = b("split", x=x, num_splits=2, axis=0)
    p = b.program(a)
    apply(p, "dead_code_elimination")
    assert ops(p) == ["split"]


def test_const_elimination_folds_through_the_simulator():
    x = data(3)
    p = af.program(x * (fp16(2.0) * fp16(0.35)).exp())
    apply(p, "const_elimination", "dead_code_elimination")
    assert ops(p) == ["mul"] and counts(p)["const"] == 1
    with af.numerics(rounding="half_away"):         # folded by the model's own rounding
        q = af.program(x + (fp16(2048.0) + fp16(1.0)))
        P.run(q, ["const_elimination", "dead_code_elimination"])
    folded = next(op for op in q.operations if op.type == "const").attrs["val"]
    assert folded.dtype == np.float16 and float(folded) == 2050.0


def test_const_elimination_leaves_large_results_and_non_constants():
    b = Builder()
    x = b.input(2, 3)
    big = b("tile", x=b.const(np.ones((1, 1))), reps=(4096, 2))      # 8192 > 4096 elements
    p = b.program(b("add", x=x, y=b.const(np.ones((2, 3)))), big)
    apply(p, "const_elimination")
    assert counts(p)["tile"] == 1 and counts(p)["add"] == 1


def test_const_deduplication():
    x, y = data(3), data(2, 3)
    p = af.program(x * 0.5, y * 0.5, x.float() * 0.5)
    apply(p, "const_deduplication", "dead_code_elimination")
    consts = [op.attrs["val"] for op in p.operations if op.type == "const"]
    assert sorted(str(c.dtype) for c in consts) == ["float16", "float32"]   # dtypes stay apart


def test_remove_redundant_ops():
    x, y = data(3), data(3)
    p = af.program(x.abs().maximum(x.abs()), (x + y) * (y + x), x - y, y - x)
    report = apply(p, "remove_redundant_ops", "dead_code_elimination")
    assert counts(p) == {"abs": 1, "maximum": 1, "add": 1, "mul": 1, "sub": 2}
    assert report.rewrites("remove_redundant_ops") == 2


NOOPS = {   # (op, attributes) applied to x: [3, 4] (Tensor methods never record these)
    "identity": ("identity", {}),
    "reshape_same": ("reshape", {"shape": (3, 4)}),
    "transpose_identity": ("transpose", {"perm": (0, -1)}),
    "tile_ones": ("tile", {"reps": (1, 1)}),
    "squeeze_nothing": ("squeeze", {}),
    "slice_full": ("slice_by_index", {"begin": (0, 0), "end": (3, 4), "stride": (1, 1),
                                      "begin_mask": (False, True), "end_mask": (False, False),
                                      "squeeze_mask": (False, False)}),
    "sum_size1": ("reduce_sum", {"axes": (0,), "keep_dims": True}),
    "add_zero": ("add", {"y": 0.0}),
    "zero_add": ("add", {"x": 0.0}),
    "sub_zero": ("sub", {"y": np.zeros(4)}),
    "mul_one": ("mul", {"y": 1.0}),
    "one_mul": ("mul", {"x": np.ones((1, 4))}),
    "div_one": ("real_div", {"y": 1.0}),
    "pow_one": ("pow", {"y": 1.0}),
    "max_self": ("maximum", {"y": "x"}),
}


@pytest.mark.parametrize("name", NOOPS)
def test_noop_elimination(name):
    op, attrs = NOOPS[name]
    b = Builder()
    x = b.input(1, 4) if name == "sum_size1" else b.input(3, 4)
    args = {"x": x}
    for k, v in attrs.items():
        args[k] = x if isinstance(v, str) else b.const(v) if k in ("x", "y") else v
    args.setdefault("x", x)
    if "x" in attrs and "y" not in attrs:
        args["y"] = x
    p = b.program(b("exp", x=b(op, **args)))
    apply(p, "noop_elimination", "dead_code_elimination")
    assert ops(p) == ["exp"]


def test_noop_elimination_leaves_broadcasting_and_real_work():
    x = data(3)
    p = af.program((x + const(np.zeros((2, 3), np.float16), af.float16)).exp(), x * 2.0,
                   x.reshape(3, 1))
    apply(p, "noop_elimination", "dead_code_elimination")
    assert counts(p) == {"add": 1, "exp": 1, "mul": 1, "reshape": 1, "const": 2}


def test_cast_optimization():
    b = Builder()
    x8, h = b.input(3, dtype=dtypes.int8), b.input(3)
    a = b("cast", x=b("cast", x=x8, dtype="fp16"), dtype="fp32")         # int8 -> fp32
    back = b("cast", x=b("cast", x=h, dtype="fp32"), dtype="fp16")        # fp16 -> fp16
    same = b("cast", x=h, dtype="fp16")
    p = b.program(b("cast", x=a, dtype="fp16"), b("relu", x=back), b("exp", x=same))
    apply(p, "cast_optimization", "dead_code_elimination")
    assert ops(p) == ["cast", "relu", "exp"]          # int8 -> fp16 -> fp32 -> fp16: int8 -> fp16
    assert p.operations[0].inputs["x"] is x8


def test_cast_optimization_leaves_lossy_chains():
    b = Builder()
    x, i = b.input(3), b.input(3, dtype=dtypes.int16)
    f = b("exp", x=b("cast", x=x, dtype="fp32"))                     # values fp16 cannot hold
    i32 = b("mul", x=b("cast", x=i, dtype="int32"), y=b.const(300, dtypes.int32))
    p = b.program(b("cast", x=b("cast", x=f, dtype="bool"), dtype="fp16"),          # 0/1 only
                  b("cast", x=b("cast", x=i32, dtype="int8"), dtype="uint8"),       # wraps
                  b("exp", x=b("cast", x=b("cast", x=f, dtype="fp16"), dtype="fp32")))  # rounds
    n = ops(p).count("cast")
    apply(p, "cast_optimization")
    assert ops(p).count("cast") == n


def test_merge_consecutive_reshapes():
    x = data(2, 3, 4)
    p = af.program(x.reshape(6, 4).unsqueeze(0).reshape(2, 12).exp())
    apply(p, "merge_consecutive_reshapes", "dead_code_elimination")
    assert ops(p) == ["reshape", "exp"]


def test_merge_consecutive_reshapes_round_trip_vanishes():
    x = data(2, 3)
    p = af.program(x.reshape(6).reshape(2, 3).exp())
    apply(p, "merge_consecutive_reshapes", "noop_elimination", "dead_code_elimination")
    assert ops(p) == ["exp"]


def test_merge_consecutive_transposes():
    x = data(2, 3, 4)
    p = af.program(x.permute(1, 2, 0).permute(1, 2, 0).exp(),
                   x.permute(2, 1, 0).permute(2, 1, 0) + 1.0)
    apply(p, "merge_consecutive_transposes", "dead_code_elimination")
    assert counts(p)["transpose"] == 1 and ops(p).count("transpose") == 1
    perm = next(op for op in p.operations if op.type == "transpose").attrs["perm"]
    assert perm == (2, 0, 1)


def test_merge_consecutive_transposes_keeps_a_shared_inner_transpose():
    x = data(2, 3)
    t = x.t()
    p = af.program(t.exp(), t.t().exp())
    apply(p, "merge_consecutive_transposes", "dead_code_elimination")
    assert ops(p).count("transpose") == 1


def test_reduce_transposes_sinks_transposes_until_they_cancel():
    x, y = data(3, 4), data(3, 4)
    p = af.program((x.t().relu().exp() + y.t()).t() * 2.0)
    apply(p, "reduce_transposes", "merge_consecutive_transposes", "dead_code_elimination")
    assert "transpose" not in counts(p)


def test_reduce_transposes_moves_through_the_mil_softplus_and_softsign():
    from aneforge.tensor import record_op
    x = data(3, 4)
    y = record_op("softsign", {"x": record_op("softplus", {"x": x.t()}, {})}, {})
    p = af.program(y.t() * 2.0)
    apply(p, "reduce_transposes", "merge_consecutive_transposes", "dead_code_elimination")
    assert "transpose" not in counts(p)


def test_reduce_transposes_leaves_shared_transposes_and_other_ops():
    x = data(2, 3, 4)
    t = x.permute(2, 0, 1)
    p = af.program(t.relu().permute(1, 2, 0), t + 1.0, x.permute(2, 0, 1).softmax(-1))
    apply(p, "reduce_transposes")
    assert counts(p)["transpose"] == 3


def test_merge_consecutive_relus():
    p = af.program(data(3).relu().relu().relu().exp())
    apply(p, "merge_consecutive_relus", "dead_code_elimination")
    assert ops(p) == ["relu", "exp"]


def test_select_optimization():
    x, y = data(3), data(3)
    t = const(np.array(True), af.bool)
    p = af.program(af.where(t, x, y).exp(), af.where(x > 0, y, y).exp())
    apply(p, "select_optimization", "dead_code_elimination")
    assert "select" not in ops(p)
    q = af.program(af.where(const(np.array([True, False, True]), af.bool), x, y).exp(),
                   af.where(x > 0, x, y).exp())
    apply(q, "select_optimization")
    assert ops(q).count("select") == 2             # a mixed condition; a computed one


def test_dedup_op_and_var_names():
    b = Builder()
    x = b.input(3)
    a = b("relu", x=x)
    c = b("exp", x=a)
    c.name = c.op.name = a.name
    out = b("add", x=a, y=c)
    p = Program({"main": Function(Block(b.inputs, b.ops, [out]))})
    with pytest.raises(Exception, match="duplicate"):
        validate(p)
    P.run(p, ["dedup_op_and_var_names"])
    validate(p)
    assert [v.name for v in p.main.block.vars()] == ["x_1", "relu_2", "relu_2_1", "add_4"]


def test_sanitize_input_output_names():
    b = Builder()
    x = b.input(3)
    x.name = "input.1"
    y = b("relu", x=x)
    y.name = "0out:0"
    p = b.program(y)
    apply(p, "sanitize_input_output_names")
    assert [p.main.inputs[0].name, p.main.outputs[0].name] == ["input_1", "_0out_0"]


def test_topological_reorder_moves_casts_and_transposes_to_their_first_use():
    b = Builder()
    x = b.input(2, 4)
    c = b("cast", x=x, dtype="fp32")
    t = b("transpose", x=x, perm=(1, 0))
    r = b("relu", x=x)
    e = b("exp", x=r)
    p = b.program(b("cast", x=b("add", x=c, y=c), dtype="fp16"), b("relu", x=t), e)
    apply(p, "topological_reorder")
    assert ops(p) == ["relu", "exp", "cast", "add", "transpose", "relu", "cast"]
    report = P.run(p, ["topological_reorder"])
    assert report.rewrites("topological_reorder") == 0          # a fixed point


def test_divide_to_multiply():
    x = data(3, 4)
    p = af.program(x / 3.0, x / 4.0)
    apply(p, "divide_to_multiply", "dead_code_elimination")
    assert counts(p)["mul"] == 2 and "real_div" not in counts(p)
    q = af.program(x / 4.0)
    apply(q, "divide_to_multiply", exact=True)                   # a power of two: exact


def test_divide_to_multiply_leaves_tensor_and_tiny_divisors():
    x = data(3)
    p = af.program(x / data(3, low=1, high=2), x / fp16(2.0 ** -24), x / 0.0)
    apply(p, "divide_to_multiply")
    assert counts(p)["real_div"] == 3


def _wide_sum_program(x):
    """x.sum(-1) / 20 and a mean of a product's sum: the wide route's matmul (a column of 0.5),
    x2, a reshape, and the division (a multiply once divide_to_multiply ran)."""
    p = af.program(x.sum(-1) / 20.0, (x * 3.0).sum(-1, keepdim=True) * -0.5)
    P.run(p, ["divide_to_multiply"])
    return p


# values around the output port's limit (sums past 32752 read inf), tiny ones, signed zeros
WIDE = np.concatenate([np.full((1, 20), 1800.0), np.full((1, 20), -1637.5),
                       np.full((1, 20), 6e-5), np.zeros((1, 20)), -np.zeros((1, 20)),
                       np.random.default_rng(4).uniform(-3, 3, (3, 20))]).astype(np.float16)


@pytest.mark.parametrize("target", ["M1", "M4", "M5"])
def test_fold_scalar_multiplies_folds_the_wide_sums_doubling(target):
    """The wide sum's x2 and the divisor's multiply become one, on every target's numerics,
    with the same bits as before on values at the port's limit, tiny values and zeros."""
    with af.target(target):
        p = _wide_sum_program(af.tensor(WIDE))
        before = copy.deepcopy(p)
        assert counts(p)["mul"] == 4 + 1       # (x2, /20), (x3 before the sum, x2, x-0.5)
        P.run(p, ["fold_scalar_multiplies", "dead_code_elimination"])
        validate(p)
        assert counts(p)["mul"] == 3 and counts(p)["matmul"] == 2
        assert counts(p)["reshape"] == counts(before)["reshape"]
        ins = [WIDE] * len(p.main.inputs)            # x, a program input
        for a, b in zip(outputs(p, ins), outputs(before, ins)):
            np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
        assert np.isinf(outputs(p, ins)[1][0])     # 3 x 36000 read inf at the port, as before


def test_fold_scalar_multiplies_leaves_multiplies_that_could_overflow():
    """x * 2 of a value no port bounds may overflow where x * (2b) would not (40000 * 2 is
    inf, 40000 * 0.25 is 10000): left alone; so are shared products and a multiply by 3."""
    x = af.tensor(np.array([40000.0, 1.0], np.float16))
    d = x * 2.0
    p = af.program((x * 2.0).reshape(2, 1) * 0.125, d * 0.5, d + 1.0, (x * 3.0) * 0.5)
    before = counts(p)["mul"]
    apply(p, "fold_scalar_multiplies", "dead_code_elimination")
    assert counts(p)["mul"] == before


def test_fuse_reduce_mean():
    x = data(4, 6)
    p = af.program(x.sum(1, keepdim=True) / 6.0, x.sum(0) * (1 / 4))
    apply(p, "fuse_reduce_mean", "dead_code_elimination", exact=True)   # bit-exact here
    assert counts(p) == {"reduce_mean": 2}


def test_fuse_reduce_mean_leaves_other_divisors_and_shared_sums():
    x = data(4, 6)
    s = x.sum(1)
    p = af.program(x.sum(1) / 5.0, s / 6.0, s + 1.0)
    apply(p, "fuse_reduce_mean")
    assert "reduce_mean" not in counts(p)


def test_fold_negation():
    x, y = data(3), data(2, 3)
    p = af.program(y + (0.0 - x), y - (0.0 - x), (0.0 - x) + y, 0.0 - (0.0 - x))
    apply(p, "fold_negation", "dead_code_elimination")
    assert ops(p) == ["sub", "add", "sub", "add"]        # the last: 0 + x (an output stays an op)
    assert all(op.inputs["y"] is p.main.inputs[0] for op in p.operations if op.type != "const")


def test_fold_negation_leaves_other_subtractions():
    x, y = data(3), data(3)
    p = af.program(y + (1.0 - x))
    apply(p, "fold_negation")
    assert counts(p)["add"] == 1


def test_remove_redundant_broadcasts():
    x, y = data(4, 1), data(4, 5)
    p = af.program(y / x.expand(4, 5), af.where(y > 0, x.expand(4, 5), y),
                   data(2, 4, 5) * x.unsqueeze(0))
    apply(p, "remove_redundant_broadcasts", "dead_code_elimination")
    assert "tile" not in counts(p) and "expand_dims" not in counts(p)


def test_remove_redundant_broadcasts_leaves_needed_expansions():
    x, y = data(4, 1), data(1, 3)
    t = x.expand(4, 3)
    p = af.program(t - t, y.reshape(3, 1) * data(3, 3))
    apply(p, "remove_redundant_broadcasts")
    assert counts(p)["tile"] == 1 and counts(p)["reshape"] == 1


def test_replace_stack_reshape():
    x, y = data(2, 3), data(2, 3)
    p = af.program(af.stack([x, y], 1).reshape(2, 6).exp(), af.stack([x, y], 1).reshape(4, 3).exp())
    apply(p, "replace_stack_reshape", "dead_code_elimination")
    assert ops(p) == ["concat", "exp", "concat", "exp"]
    assert [op.attrs["interleave"] for op in p.operations if op.type == "concat"] == [False, True]


def test_replace_stack_reshape_leaves_other_reshapes():
    x, y = data(2, 3), data(2, 3)
    p = af.program(af.stack([x, y], 1).reshape(3, 4).exp())
    apply(p, "replace_stack_reshape")
    assert counts(p)["expand_dims"] == 2


def test_detect_concat_interleave():
    b = Builder()
    a, c = b.input(1, 2, 3, 4), b.input(1, 2, 3, 4)
    cat = b("concat", values=(a, c), axis=1)
    r = b("reshape", x=cat, shape=(1, 2, 2, 3, 4))
    t = b("transpose", x=r, perm=(0, 2, 1, 3, 4))
    p = b.program(b("exp", x=b("reshape", x=t, shape=(1, 4, 3, 4))))
    apply(p, "detect_concat_interleave", "dead_code_elimination")
    assert ops(p) == ["concat", "exp"] and p.operations[0].attrs["interleave"]


def test_detect_concat_interleave_leaves_other_perms():
    b = Builder()
    a, c = b.input(2, 3, 4), b.input(2, 3, 4)
    r = b("reshape", x=b("concat", values=(a, c), axis=0), shape=(2, 2, 3, 4))
    p = b.program(b("reshape", x=b("transpose", x=r, perm=(0, 1, 3, 2)), shape=(4, 3, 4)))
    apply(p, "detect_concat_interleave")
    assert counts(p)["transpose"] == 1


def test_rank0_expand_dims_swap():
    b = Builder()
    x = b.input(1)
    s = b("sub", x=b("reshape", x=x, shape=()), y=b.const(1.5))
    p = b.program(b("expand_dims", x=b("mul", x=s, y=b.const(2.0)), axes=(0,)))
    apply(p, "rank0_expand_dims_swap", "merge_consecutive_reshapes", "noop_elimination",
          "dead_code_elimination")
    assert all(v.shape == (1,) for op in p.operations if op.type != "const" for v in op.outputs)


def test_rank0_expand_dims_swap_leaves_tensor_operands():
    b = Builder()
    x, y = b.input(1), b.input(1)
    s = b("sub", x=b("reshape", x=x, shape=()), y=b("reshape", x=y, shape=()))
    p = b.program(b("expand_dims", x=s, axes=(0,)))
    apply(p, "rank0_expand_dims_swap")
    assert counts(p)["sub"] == 1 and p.operations[-2].outputs[0].shape == ()


def test_concat_zeros_to_pad_turns_conv_padding_into_one_pad():
    x, w = data(1, 2, 5, 5), data(3, 2, 3, 3)
    p = af.program(F.conv2d(x, w, padding=1))
    apply(p, "concat_zeros_to_pad", "merge_consecutive_paddings", "dead_code_elimination")
    pads = [op for op in p.operations if op.type == "pad"]
    assert len(pads) == 1 and pads[0].attrs["pad"] == (1, 1, 1, 1)
    assert "sub" not in counts(p)


def test_concat_zeros_to_pad_shrinks_zero_concats():
    """Zeros made from the input (x - x, as conv padding records them) concatenated on two
    axes become one pad."""
    x = data(4, 6)
    edge = x.narrow(1, 0, 1)
    z = (edge - edge).expand(4, 2)
    y = af.cat([z, x, z], 1)
    edge = y.narrow(0, 0, 1)
    z = (edge - edge).expand(1, 10)
    p = af.program(af.cat([z, y, z], 0) * 2.0)
    report = apply(p, "concat_zeros_to_pad", "merge_consecutive_paddings", "noop_elimination",
                   "dead_code_elimination")
    assert report.ops_after < report.ops_before / 2 and counts(p)["pad"] == 1


def test_slice_gradients_record_pads_that_merge():
    """A slice's gradient is recorded as one zero pad per sliced axis (no zero-concat), and
    the two merge into one."""
    x = af.tensor(np.random.default_rng(0).standard_normal((4, 6)), requires_grad=True)
    (g,) = af.grad((x[1:3, 2:5] * 2.0).sum(), [x])
    p = af.program(g)
    assert counts(p)["pad"] == 2 and "concat" not in counts(p)
    apply(p, "merge_consecutive_paddings", "dead_code_elimination")
    assert counts(p)["pad"] == 1
    want = np.zeros((4, 6), np.float32)
    want[1:3, 2:5] = 2.0
    np.testing.assert_array_equal(g.numpy(), want)


def test_concat_zeros_to_pad_leaves_non_zero_neighbours():
    x, y = data(2, 3), data(2, 1)
    p = af.program(af.cat([y, x, y - y], 1), af.cat([x - x, x, y - y, x], 1))
    apply(p, "concat_zeros_to_pad")
    assert counts(p)["concat"] == 2


def test_merge_consecutive_paddings_leaves_overlapping_reflections():
    b = Builder()
    x = b.input(1, 2, 6, 8)
    a = b("pad", x=x, pad=(1, 1), mode="reflect")
    p = b.program(b("pad", x=a, pad=(0, 0, 1, 1), mode="reflect"),
                  b("pad", x=a, pad=(2, 2), mode="reflect"),
                  b("pad", x=b("pad", x=x, pad=(1, 1), constant_val=1.0), pad=(1, 1)))
    apply(p, "merge_consecutive_paddings", "dead_code_elimination")
    assert counts(p)["pad"] == 5                 # only the first pair merged


def test_use_reflection_padding():
    b = Builder()
    x = b.input(1, 2, 6, 8)

    def at(i):
        return b("slice_by_index", x=x, begin=(0, 0, 0, i), end=(1, 2, 6, i + 1),
                 stride=(1, 1, 1, 1), begin_mask=(True, True, True, False),
                 end_mask=(True, True, True, False), squeeze_mask=(False,) * 4)
    p = b.program(b("concat", values=(at(2), at(1), x, at(6)), axis=3))
    apply(p, "use_reflection_padding", "dead_code_elimination")
    assert ops(p) == ["pad"] and p.operations[-1].attrs["pad"] == (2, 1)


def test_use_reflection_padding_leaves_other_slices():
    b = Builder()
    x = b.input(2, 5)
    s = b("slice_by_index", x=x, begin=(0, 0), end=(2, 1), stride=(1, 1),
          begin_mask=(False,) * 2, end_mask=(False,) * 2, squeeze_mask=(False,) * 2)
    p = b.program(b("concat", values=(s, x), axis=1))              # x[0] is a copy, not a mirror
    apply(p, "use_reflection_padding")
    assert "pad" not in counts(p)


# ---------------------------------------------------------------------------- fusions

GELU_EXACT = {
    "half_then_x": lambda x: (((x / 1.4142135).erf() + 1.0) * 0.5) * x,
    "x_then_half": lambda x: ((x * 0.70710678).erf() + 1.0) * x * 0.5,
    "half_x_first": lambda x: (x * 0.5) * ((x / 1.4142135).erf() + 1.0),
}


@pytest.mark.parametrize("form", GELU_EXACT)
def test_fuse_gelu_exact(form):
    p = af.program(GELU_EXACT[form](data(4, 8, low=-4, high=4)))
    apply(p, "fuse_gelu_exact", "dead_code_elimination")
    assert ops(p) == ["gelu"] and p.operations[-1].attrs["mode"] == "EXACT"


def test_fuse_gelu_exact_leaves_a_shared_erf():
    x = data(4, 8)
    e = (x / 1.4142135).erf()
    p = af.program(((e + 1.0) * 0.5) * x, e)
    apply(p, "fuse_gelu_exact", "dead_code_elimination")
    assert "gelu" not in counts(p)


def _gelu_tanh(x, cube):
    inner = (x + cube(x) * 0.044715) * math.sqrt(2 / math.pi)
    return ((inner.tanh() + 1.0) * 0.5) * x


@pytest.mark.parametrize("cube", [lambda x: x ** 3, lambda x: x * x * x], ids=["pow", "muls"])
def test_fuse_gelu_tanh_approximation(cube):
    p = af.program(_gelu_tanh(data(4, 8, low=-4, high=4), cube))
    apply(p, "fuse_gelu_tanh_approximation", "dead_code_elimination")
    assert ops(p) == ["gelu"] and p.operations[-1].attrs["mode"] == "TANH_APPROXIMATION"


def test_fuse_gelu_tanh_leaves_another_constant():
    x = data(4, 8)
    inner = (x + x ** 3 * 0.5) * math.sqrt(2 / math.pi)
    p = af.program(((inner.tanh() + 1.0) * 0.5) * x)
    apply(p, "fuse_gelu_tanh_approximation")
    assert "gelu" not in counts(p)


def test_fuse_leaky_relu():
    x = data(4, 8)
    p = af.program((x * 0.2).maximum(x), x.maximum(x * 0.01))
    apply(p, "fuse_leaky_relu", "dead_code_elimination")
    assert ops(p) == ["leaky_relu", "leaky_relu"]


def test_fuse_leaky_relu_leaves_alpha_above_one():
    x = data(4, 8)
    p = af.program((x * 1.5).maximum(x))
    apply(p, "fuse_leaky_relu")
    assert "leaky_relu" not in counts(p)


def test_fuse_layernorm():
    x = data(2, 5, 8)
    g = np.linspace(0.5, 1.5, 8).astype(np.float16)
    p = af.program(F.layer_norm(x, (8,)) * const(g, af.float16) + 0.25)
    apply(p, "fuse_layernorm_or_instancenorm", "dead_code_elimination", tol=8 * U)
    assert ops(p) == ["layer_norm"]
    ln = p.operations[-1]
    assert set(ln.inputs) == {"x", "gamma", "beta"} and ln.attrs["axes"] == (2,)


def test_fuse_layernorm_takes_a_constant_beta_without_gamma():
    x = data(2, 5, 8)
    beta = const(np.linspace(-1, 1, 8).astype(np.float16), af.float16)
    p = af.program(F.layer_norm(x, (8,)) + beta)
    apply(p, "fuse_layernorm_or_instancenorm", "dead_code_elimination", tol=8 * U)
    assert ops(p) == ["layer_norm"] and set(p.operations[-1].inputs) == {"x", "beta"}


def test_fuse_layernorm_keeps_trained_gamma_beta_outside():
    x, w, b = data(2, 5, 8), data(8), data(8)
    p = af.program(F.layer_norm(x, (8,), w, b, eps=1e-5))
    apply(p, "fuse_layernorm_or_instancenorm", "dead_code_elimination", tol=8 * U)
    assert ops(p) == ["layer_norm", "mul", "add"]


def test_fuse_instance_norm():
    x = data(2, 3, 2, 4)      # 8 per instance: longer reductions take the matmul route
    g = const(np.array([0.5, 1.0, 2.0], np.float16).reshape(3, 1, 1), af.float16)
    p = af.program(F.layer_norm(x.permute(0, 1, 2, 3), (4, 5)) * g)
    apply(p, "fuse_layernorm_or_instancenorm", "dead_code_elimination", tol=8 * U)
    assert ops(p) == ["instance_norm"] and p.operations[-1].inputs["gamma"].shape == (3,)


def test_fuse_layernorm_leaves_a_composite_whose_parts_are_read_elsewhere():
    x = data(2, 8)
    mu = x.mean(-1, keepdim=True)
    xc = x - mu
    p = af.program(xc * ((xc * xc).mean(-1, keepdim=True) + 1e-5).rsqrt(), xc)
    apply(p, "fuse_layernorm_or_instancenorm")
    assert "layer_norm" not in counts(p)


def test_fuse_transpose_matmul():
    x, y = data(5, 3), data(4, 5)
    p = af.program(x.t() @ y.t())
    apply(p, "fuse_transpose_matmul", "dead_code_elimination")
    mm = p.operations[-1]
    assert ops(p) == ["matmul"] and mm.attrs["transpose_x"] and mm.attrs["transpose_y"]


def test_fuse_transpose_matmul_leaves_batch_perms():
    x, y = data(3, 2, 4), data(2, 4, 5)
    p = af.program(x.permute(1, 0, 2) @ y)
    apply(p, "fuse_transpose_matmul")
    assert "transpose" in counts(p)


@pytest.mark.parametrize("neg", ["mul", "sub"])
def test_fuse_prelu(neg):
    x = data(2, 3, 4, 4)
    a = const(np.array([0.25, 0.5, -1.0], np.float16).reshape(3, 1, 1), af.float16)
    def minus():
        return x * -1.0 if neg == "mul" else 0.0 - x
    alphas = []
    for y in (x.relu() + minus().relu() * a, x.relu() - a * minus().relu()):
        p = af.program(y)
        apply(p, "fuse_prelu", "dead_code_elimination")
        assert ops(p) == ["prelu"]
        alphas.append(p.operations[-1].inputs["alpha"].op.attrs["val"].tolist())
    assert alphas == [[-0.25, -0.5, 1.0], [0.25, 0.5, -1.0]]


def test_fuse_prelu_leaves_rank3_and_spatial_slopes():
    x3, x4 = data(3, 4, 4), data(1, 2, 3, 3)
    a = const(np.linspace(0.1, 0.9, 9).reshape(3, 3).astype(np.float16), af.float16)
    p = af.program(x3.relu() + (x3 * -1.0).relu() * 0.5, x4.relu() + (x4 * -1.0).relu() * a)
    apply(p, "fuse_prelu")
    assert "prelu" not in counts(p)


def test_fuse_elementwise_to_batchnorm():
    x = data(2, 3, 4, 4)
    s = const(np.array([0.5, 2.0, -1.0], np.float16).reshape(1, 3, 1, 1), af.float16)
    b = const(np.array([0.1, 0.0, 3.0], np.float16).reshape(3, 1, 1), af.float16)
    p = af.program(x * s + b, (x * 2.0 - b).exp())
    apply(p, "fuse_elementwise_to_batchnorm", "dead_code_elimination")
    assert counts(p)["batch_norm"] == 2 and "mul" not in counts(p)


def test_fuse_elementwise_to_batchnorm_leaves_other_ranks_and_spatial_constants():
    x, y = data(2, 3, 4), data(2, 3, 4, 4)
    s = const(np.ones((4, 4), np.float16), af.float16)
    p = af.program(x * 2.0 + 1.0, y * s + 1.0)
    apply(p, "fuse_elementwise_to_batchnorm")
    assert "batch_norm" not in counts(p)


def _frozen(w):
    return const(np.asarray(w, np.float16), af.float16)


def test_fuse_matmul_weight_bias():
    rng = np.random.default_rng(0)
    x = data(2, 3, 4)
    w, b = rng.standard_normal((4, 5)), rng.standard_normal(5)
    p = af.program(x @ _frozen(w) + _frozen(b), x @ _frozen(w) - _frozen(b))
    apply(p, "fuse_matmul_weight_bias", "dead_code_elimination")
    assert ops(p) == ["linear", "linear"]


def test_fuse_matmul_weight_bias_leaves_trained_weights():
    x, w = data(2, 4), data(4, 5)
    p = af.program(x @ w + _frozen(np.ones(5)))
    apply(p, "fuse_matmul_weight_bias")
    assert "linear" not in counts(p)


def test_fuse_linear_bias():
    from aneforge.tensor import record_op
    rng = np.random.default_rng(1)
    x = data(3, 4)
    def lin():
        return record_op("linear", {"x": x, "weight": _frozen(rng.standard_normal((2, 4))),
                              "bias": _frozen(rng.standard_normal(2))}, {})
    p = af.program(lin() + _frozen([0.5, -1.0]), 1.0 - lin())
    apply(p, "fuse_linear_bias", "dead_code_elimination")
    assert ops(p) == ["linear", "linear"]


def _conv(x, cout, k=3, bias=True, seed=0, **attrs):
    """MIL conv with a frozen weight [cout, C, k, k] (and bias)."""
    from aneforge.tensor import record_op
    rng = np.random.default_rng(seed)
    ins = {"x": x, "weight": _frozen(rng.standard_normal((cout, x.shape[1], k, k)) / k)}
    if bias:
        ins["bias"] = _frozen(rng.standard_normal(cout))
    return record_op("conv", ins, attrs)


def _channels(*v):
    return _frozen(np.array(v).reshape(1, -1, 1, 1))


def test_fuse_conv_bias():
    x = data(2, 3, 6, 5)
    c = _channels(0.5, -1.0, 2.0, 0.25)
    p = af.program(_conv(x, 4) + c, _conv(x, 4, seed=1, pad_type="same") - c,
                   _frozen(np.array([1.5, -0.5, 0.0, 3.0]).reshape(4, 1, 1)) - _conv(x, 4, seed=2),
                   _conv(x, 4, bias=False, seed=3) + 0.75)
    apply(p, "fuse_conv_bias", "dead_code_elimination")
    assert ops(p) == ["conv"] * 4


def test_fuse_conv_bias_leaves_spatial_constants_and_shared_outputs():
    x = data(2, 3, 6, 5)
    y = _conv(x, 4, seed=1)
    p = af.program(_conv(x, 4) + _frozen(np.ones((4, 3))), y + _channels(1.0, 2.0, 3.0, 4.0),
                   y.exp())
    apply(p, "fuse_conv_bias")
    assert counts(p)["add"] == 2


def test_fuse_conv_scale():
    x = data(1, 2, 5, 5)
    s = _channels(0.5, -2.0, 3.0)
    p = af.program(_conv(x, 3) * s, s * _conv(x, 3, seed=1, strides=(2, 2)),
                   _conv(x, 3, seed=2, bias=False) / _channels(4.0, -0.5, 1.5))
    apply(p, "fuse_conv_scale", "dead_code_elimination")
    assert ops(p) == ["conv"] * 3


def test_fuse_conv_scale_leaves_divisors_and_trained_scales():
    x, t = data(1, 2, 5, 5), data(1, 3, 1, 1)
    p = af.program(_channels(0.5, -2.0, 3.0) / _conv(x, 3), _conv(x, 3, seed=1) * t)
    apply(p, "fuse_conv_scale")
    assert counts(p)["conv"] == 2 and counts(p)["real_div"] == 1 and counts(p)["mul"] == 1


def _batch_norm(y, eps=1e-3):
    from aneforge.tensor import record_op
    c = y.shape[1]
    return record_op("batch_norm", {"x": y, "mean": _frozen(np.linspace(-1, 1, c)),
                              "variance": _frozen(np.linspace(0.5, 4, c)),
                              "gamma": _frozen(np.linspace(2, -1, c)),
                              "beta": _frozen(np.linspace(0.5, 1, c))}, {"epsilon": eps})


def test_fuse_conv_batchnorm():
    x = data(2, 3, 6, 5)
    p = af.program(_batch_norm(_conv(x, 4)).relu(),
                   _batch_norm(_conv(x, 2, k=1, bias=False, groups=1, seed=1)))
    apply(p, "fuse_conv_batchnorm", "dead_code_elimination")
    assert ops(p) == ["conv", "relu", "conv"]


def test_fuse_conv_batchnorm_leaves_other_inputs_and_read_convs():
    x = data(2, 3, 6, 5)
    y = _conv(x, 4)
    p = af.program(_batch_norm(x), _batch_norm(y), y)
    apply(p, "fuse_conv_batchnorm")
    assert counts(p)["batch_norm"] == 2 and counts(p)["conv"] == 1


def test_default_pipeline_folds_a_frozen_conv_block():
    """conv -> / s -> + b -> batch_norm -> relu, as a frozen model records it: one conv."""
    x = data(2, 3, 6, 5)
    y = _batch_norm(_conv(x, 4) / _channels(2.0, 4.0, 0.5, 1.0) + _channels(1, 2, 3, 4)).relu()
    p = af.program(y)
    apply(p, *P.DEFAULT, tol=8 * U)
    assert ops(p) == ["conv", "relu"]


def _interleave(values, axis):
    from aneforge.tensor import record_op
    return record_op("concat", {"values": tuple(values)}, {"axis": axis, "interleave": True})


@pytest.mark.parametrize("f", [2, 3])
def test_concat_to_pixel_shuffle(f):
    xs = [data(2, 3, 4, 5) + float(i) for i in range(f * f)]
    cols = [_interleave(xs[j * f:(j + 1) * f], 2) for j in range(f)]
    np.testing.assert_array_equal(_interleave(cols, -1).numpy(), _interleave(cols, 3).numpy())
    p = af.program(_interleave(cols, -1).relu())
    apply(p, "concat_to_pixel_shuffle", "dead_code_elimination")
    assert [t for t in ops(p) if t not in ("add",)] == ["concat", "pixel_shuffle", "relu"]


def test_concat_to_pixel_shuffle_leaves_plain_and_shared_concats():
    xs = [data(2, 3, 4, 5) + float(i) for i in range(4)]
    a, b = _interleave(xs[:2], 2), _interleave(xs[2:], 2)
    plain = af.cat([af.cat(xs[:2], 2), af.cat(xs[2:], 2)], 3)
    p = af.program(_interleave([a, b], 3), a, plain)
    apply(p, "concat_to_pixel_shuffle")
    assert "pixel_shuffle" not in counts(p)


# ---------------------------------------------------------------------------- ANE-specific

def test_rewrite_reduce_times_zero_makes_the_wall_compile():
    x = data(4, 8)
    with pytest.raises(af.CompileWallError):
        (x.sum(1) * 0.0).numpy()
    with P.pipeline(add=["rewrite_reduce_times_zero"]):
        assert (x.sum(1) * 0.0).tolist() == [0.0] * 4
        zeros = const(np.zeros((4, 3), np.float16), af.float16)
        assert (x.mean(1, keepdim=True) * zeros).tolist() == [[0.0] * 3] * 4
    p = af.program(x.sum(1) * 0.0)
    report = P.run(p, ["rewrite_reduce_times_zero", "dead_code_elimination"])
    assert report.rewrites("rewrite_reduce_times_zero") == 1 and "mul" not in counts(p)


def test_rewrite_reduce_times_zero_leaves_other_products():
    x = data(4, 8)
    p = af.program(x.sum(1) * 2.0, x * 0.0)
    apply(p, "rewrite_reduce_times_zero")
    assert counts(p)["mul"] == 2


def _raw_sum(x, axes=None):
    """MIL reduce_sum itself (Tensor.sum of a long float16 axis is already a matmul)."""
    return record_op("reduce_sum", {"x": x}, {"axes": axes, "keep_dims": False})


def test_reduce_sum_to_matmul_sums_wide():
    assert _raw_sum(af.ones(4096)).item() == 2048.0        # the fp16 running sum stalls
    with P.pipeline("ane"):
        assert _raw_sum(af.ones(4096)).item() == 4096.0
    x = np.random.default_rng(0).uniform(0, 1, (8, 1000)).astype(np.float16)
    truth = x.astype(np.float64).sum(1)
    narrow = _raw_sum(af.tensor(x), (1,)).numpy()
    with P.pipeline(add=["reduce_sum_to_matmul"]):
        wide = _raw_sum(af.tensor(x), (1,)).numpy()
    assert np.abs(wide - truth).max() < np.abs(narrow - truth).max() / 4


def test_reduce_sum_to_matmul_forms():
    x = data(2, 3, 4)
    p = af.program(x.sum(-1), x.sum((1, 2), keepdim=True), x.sum())
    apply(p, "reduce_sum_to_matmul", "dead_code_elimination", tol=32 * U)
    assert "reduce_sum" not in counts(p) and counts(p)["matmul"] == 3


def test_reduce_sum_to_matmul_leaves_leading_axes():
    x = data(2, 3, 4)
    p = af.program(x.sum(0), x.sum(1), x.float().sum(-1))
    apply(p, "reduce_sum_to_matmul")
    assert counts(p)["reduce_sum"] == 3


def test_split_long_matmul():
    x, y = data(3, 200), data(200, 5)
    p = af.program(x @ y, x.t().t() @ y)
    apply(p, "split_long_matmul", "dead_code_elimination", contraction_cap=64, tol=16 * U)
    assert counts(p)["matmul"] == 8 and counts(p)["slice_by_index"] >= 8
    q = af.program(data(5, 4).t() @ data(5, 3))               # transpose_x: K is axis -2
    apply(q, "split_long_matmul", contraction_cap=3, tol=16 * U)
    assert counts(q)["matmul"] == 2


def test_split_long_matmul_splits_wide_outputs_exactly():
    x, y = data(3, 8), data(8, 20)
    p = af.program(x @ y, x @ data(20, 8).t())
    apply(p, "split_long_matmul", "dead_code_elimination", contraction_cap=8, exact=True)
    assert counts(p)["matmul"] == 6 and counts(p)["concat"] == 2


def test_split_long_matmul_splits_linear_into_constant_tiles():
    from aneforge.tensor import record_op
    rng = np.random.default_rng(2)
    x = data(3, 10)
    lin = record_op("linear", {"x": x, "weight": _frozen(rng.standard_normal((6, 10))),
                         "bias": _frozen(rng.standard_normal(6))}, {})
    p = af.program(lin)
    apply(p, "split_long_matmul", "dead_code_elimination", contraction_cap=4, tol=16 * U)
    assert counts(p)["linear"] == 3 * 2 and counts(p)["concat"] == 1
    assert all(op.inputs["weight"].shape[0] <= 4 and op.inputs["weight"].shape[1] <= 4
               for op in p.operations if op.type == "linear")


def test_split_long_matmul_leaves_short_contractions():
    p = af.program(data(3, 64) @ data(64, 5))
    apply(p, "split_long_matmul", contraction_cap=64)
    assert counts(p)["matmul"] == 1


def _sdpa(q, k, v, mask=None):
    from aneforge.tensor import record_op
    return record_op("scaled_dot_product_attention", {"query": q, "key": k, "value": v,
                                                "attn_mask": mask}, {})


@pytest.mark.parametrize("mask", ["bool", "float"])
def test_decompose_masked_attention(mask):
    q, k, v = data(2, 4, 8), data(2, 5, 8), data(2, 5, 6)
    m = np.tril(np.ones((4, 5), bool), 1)
    m = af.tensor(m) if mask == "bool" else af.tensor(np.where(m, 0.0, -1e4))
    p = af.program(_sdpa(q, k, v, m))
    apply(p, "decompose_masked_attention", "dead_code_elimination")
    want = ["matmul", "mul", "select" if mask == "bool" else "add", "softmax", "matmul"]
    assert [t for t in ops(p) if t != "cast"] == want


def test_decompose_masked_attention_leaves_unmasked_sdpa():
    p = af.program(_sdpa(data(2, 4, 8), data(2, 5, 8), data(2, 5, 6)))
    apply(p, "decompose_masked_attention")
    assert ops(p) == ["scaled_dot_product_attention"]


def test_ops_added_after_a_removal_are_walked():
    """A removed op's id is never taken for a later op's: the graph keeps removed ops
    referenced (CPython reuses a freed object's address at once, and walk() skipped new ops
    that got one, which made the pipeline miss rewrites now and then)."""
    from aneforge.passes.graph import Graph
    b = Builder()
    x = b.input(2, 3)
    g = Graph(b.program(b("sqrt", x=x)), get_numerics())
    for _ in range(100):
        g.remove(g.add("exp", {"x": x}).op)
        v = g.add("abs", {"x": x})
        assert any(op is v.op for op in g.walk())
        assert g.uses(v) == []
        g.remove(v.op)
        del v


def test_the_pipeline_reaches_its_fixed_point_in_one_run():
    """Two identical chains and a repeated constant product: one run of the default pipeline
    leaves nothing for a second run to rewrite, however objects are laid out in memory."""
    def program():
        b = Builder()
        x, y = b.input(2, 3, 4), b.input(2, 3, 4)

        def chain():
            both = b("concat", values=(b("expand_dims", x=y, axes=(2,)),
                                       b("expand_dims", x=b("relu", x=y), axes=(2,))), axis=2)
            return b("slice_by_index", x=b("reshape", x=both, shape=(2, 3, 8)),
                     begin=(0, 0, 2), end=(2, 3, 6), stride=(1, 1, 1),
                     begin_mask=(True, True, False), end_mask=(True, True, False),
                     squeeze_mask=(False, False, False))
        c = chain()
        k = b("mul", x=b.const(1.5), y=b.const(2.0))
        return b.program(b("sub", x=b("sub", x=c, y=c), y=b("add", x=c, y=k)), chain(),
                         b("add", x=x, y=b("mul", x=b.const(1.5), y=b.const(2.0))))
    keep = []
    for i in range(60):
        keep.append([object() for _ in range(i % 7)])       # vary the memory layout
        p = program()
        P.run(p, "default")
        assert sum(s.rewrites for s in P.run(p, "default").stats) == 0
