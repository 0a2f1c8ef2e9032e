"""The MIL text parser (aneforge/mil/text.py + resolve.py) and af.load_mil.

1. The MIL primer's example programs, written as the primer writes them, parse and run on the
   simulator with numpy's numbers (fp16 tolerances).
2. Every op-table program, forward and backward, survives emit -> parse with its signature
   (and emits the same text again).
3. One test per validation rule: the error names the line and the rule.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import aneforge as af
from aneforge.errors import AneforgeError, DTypeError, ShapeError
from aneforge.mil.text import MILSyntaxError, emit, parse
from optable import CASES
from test_coreml_accepts import backward, forward

HEADER = '''program(1.3)
[buildInfo = dict<string, string>({{"coremlc-component-MIL", "3520.4.1"},
{"coremlc-version", "3520.5.1"}})]
{
'''
U = 2.0 ** -11           # fp16 unit roundoff


def program(signature: str, body: str, outputs: str) -> str:
    """A primer-format program: the header, func main<ios18>(signature) { body } -> (outputs)."""
    return HEADER + f"func main<ios18>({signature}) {{\n{body.strip()}\n}} -> ({outputs});\n}}\n"


def f16(*shape, lo=-2.0, hi=2.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float16)


def close(got, want, rtol=2 * U, atol=2.0 ** -20):
    want = np.asarray(want, np.float64)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------- 1. primer programs

X14 = "tensor<fp16, [1, 4]> x"
AB14 = "tensor<fp16, [1, 4]> a, tensor<fp16, [1, 4]> b"


def test_smallest_program_relu():
    fn = af.load_mil(program(X14, '''
tensor<fp16, [1, 4]> relu = relu(x = x)[name = string("relu")];''', "relu"))
    x = f16(1, 4)
    np.testing.assert_array_equal(fn(x), np.maximum(x, 0))
    assert fn.program.build_info == {"coremlc-component-MIL": "3520.4.1",
                                     "coremlc-version": "3520.5.1"}


# gelu (EXACT) and sigmoid read the engine's tables under M1's default model: their published
# worst absolute errors (0.0059, 0.0034; sbryngelson/ane-guide) are the tolerance.
TABLE_ATOL = {"gelu": 0.0059, "sigmoid": 0.0034}


@pytest.mark.parametrize("line, ref", [
    ('tensor<fp16, [1, 4]> y = gelu(x = x, mode = string("EXACT"))[name = string("y")];',
     lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / np.sqrt(2)))),
    ('tensor<fp16, [1, 4]> y = gelu(x = x, mode = const(string("TANH_APPROXIMATION")))'
     '[name = string("y")];',
     lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))),
    ('tensor<fp16, [1, 4]> y = sigmoid(x = x)[name = string("y")];',
     lambda x: 1 / (1 + np.exp(-x))),
    ('tensor<fp16, [1, 4]> y = softplus(x = x)[name = string("y")];',
     lambda x: np.log1p(np.exp(x))),
    ('tensor<fp16, [1, 4]> y = softsign(x = x)[name = string("y")];', lambda x: x / (1 + x)),
    ('tensor<fp16, [1, 4]> y = sqrt(x = x)[name = string("y")];', np.sqrt),
    ('tensor<fp16, [1, 4]> y = exp(x = x)[name = string("y")];', np.exp),
    ('tensor<fp16, [1, 4]> y = log(x = x, epsilon = const(fp16(0)))[name = string("y")];', np.log),
    ('tensor<fp16, [1, 4]> y = abs(x = x)[name = string("y")];', np.abs),
], ids=["gelu", "gelu_tanh", "sigmoid", "softplus", "softsign", "sqrt", "exp", "log", "abs"])
def test_primer_unary(request, line, ref):
    x = f16(1, 4, lo=0.25, hi=3.0)
    atol = TABLE_ATOL.get(request.node.callspec.id, 2.0 ** -20)
    close(af.load_mil(program(X14, line, "y"))(x), ref(x.astype(np.float64)), atol=atol)


@pytest.mark.parametrize("op, ref", [("add", np.add), ("mul", np.multiply), ("sub", np.subtract),
                                     ("real_div", np.divide)])
def test_primer_binary(op, ref):
    a, b = f16(1, 4, seed=1), f16(1, 4, lo=0.5, hi=2.0, seed=2)
    fn = af.load_mil(program(AB14, f'tensor<fp16, [1, 4]> y = {op}(x = a, y = b)'
                                   f'[name = string("y")];', "y"))
    close(fn(a, b), ref(a.astype(np.float64), b))


def test_primer_comparison_and_select():
    a, b = f16(1, 4, seed=3), f16(1, 4, seed=4)
    fn = af.load_mil(program(AB14, '''
tensor<bool, [1, 4]> mask = less(x = a, y = b)[name = string("mask")];
tensor<fp16, [1, 4]> y = select(cond = mask, a = a, b = b)[name = string("y")];''', "y"))
    np.testing.assert_array_equal(fn(a, b), np.minimum(a, b))


def test_primer_matmul_with_transposes_and_comments():
    fn = af.load_mil(program("tensor<fp16, [3, 5]> a, tensor<fp16, [4, 5]> b", '''
tensor<fp16, [3, 4]> y = matmul(
    x = a,  // [M, K]
    y = b,  // [N, K], transposed below
    transpose_x = const(bool(false)),
    transpose_y = const(bool(true))
)[name = string("y")];''', "y"))
    a, b = f16(3, 5, seed=5), f16(4, 5, seed=6)
    close(fn(a, b), a.astype(np.float64) @ b.T.astype(np.float64), atol=8 * U)


def test_primer_reshape_and_transpose():
    fn = af.load_mil(program("tensor<fp16, [1, 64]> x", '''
tensor<fp16, [1, 16, 4]> y = reshape(
    x = x,
    shape = const(tensor<int32, [3]>([1, 16, 4]))
)[name = string("y")];
tensor<fp16, [1, 4, 16]> z = transpose(
    x = y,  // [B, H, W]
    perm = const(tensor<int32, [3]>([0, 2, 1]))
)[name = string("z")];''', "z"))
    x = f16(1, 64)
    np.testing.assert_array_equal(fn(x), x.reshape(1, 16, 4).transpose(0, 2, 1))


def test_primer_reduce_sum_keep_dims():
    fn = af.load_mil(program("tensor<fp16, [1, 16]> x", '''
tensor<fp16, [1, 1]> y = reduce_sum(
    x = x,  // [1, 16]
    axes = const(tensor<int32, [1]>([-1])),
    keep_dims = const(bool(true))
)[name = string("y")];''', "y"))
    x = np.arange(16, dtype=np.float16).reshape(1, 16)
    np.testing.assert_array_equal(fn(x), [[120.0]])


def test_primer_scaled_dot_product_attention():
    fn = af.load_mil(program("tensor<fp16, [1, 2, 3, 8]> q, tensor<fp16, [1, 2, 5, 8]> k, "
                             "tensor<fp16, [1, 2, 5, 8]> v", '''
tensor<fp16, [1, 2, 3, 8]> y = scaled_dot_product_attention(
    query = q,  // [B, H, Sq, Dh]
    key = k,    // [B, H, Sk, Dh]
    value = v   // [B, H, Sk, Dh]
)[name = string("y")];''', "y"))
    q, k, v = (f16(1, 2, n, 8, seed=i) for i, n in enumerate((3, 5, 5)))
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / np.sqrt(8)
    p = np.exp(s - s.max(-1, keepdims=True))
    close(fn(q, k, v), (p / p.sum(-1, keepdims=True)) @ v, rtol=8 * U, atol=8 * U)


def test_primer_constants_scalars_tensors_and_hex():
    fn = af.load_mil(program("tensor<fp16, [1, 64]> x", '''
tensor<fp16, []> scale = const(val = fp16(0.125))[name = string("scale")];
tensor<int32, [3]> shape = const(val = tensor<int32, [3]>([1, 16, 4]))[name = string("shape")];
tensor<fp16, [2, 3]> w = const(val = tensor<fp16, [2, 3]>(
    [[0x3c00, 0x4000, 0x4200],
     [0x4400, 0x4500, 0x4600]]
))[name = string("w")];
tensor<fp16, [1, 16, 4]> r = reshape(x = x, shape = shape)[name = string("r")];
tensor<fp16, [1, 16, 4]> s = mul(x = r, y = scale)[name = string("s")];
tensor<fp16, [2, 3]> w2 = add(x = w, y = fp16(0.5))[name = string("w2")];''', "s, w2"))
    x = f16(1, 64)
    s, w2 = fn(x)
    np.testing.assert_array_equal(s, (x * np.float16(0.125)).reshape(1, 16, 4))
    np.testing.assert_array_equal(w2, [[1.5, 2.5, 3.5], [4.5, 5.5, 6.5]])
    assert "shape" not in {op.name for op in fn.program.operations}   # folded into reshape


def test_primer_multi_input():
    fn = af.load_mil(HEADER + '''func main<ios18>(
    tensor<fp16, [1, 4]> x,
    tensor<fp16, [1, 4]> y
) {
    tensor<fp16, [1, 4]> z = add(x = x, y = y)[name = string("z")];
} -> (z);
}''')
    assert [v.name for v in fn.inputs] == ["x", "y"]
    np.testing.assert_array_equal(fn(y=np.ones((1, 4)), x=np.full((1, 4), 2.0)), [[3.0] * 4])


def test_primer_multi_output():
    fn = af.load_mil(program(X14, '''
tensor<fp16, [1, 4]> y_relu = relu(x = x)[name = string("y_relu")];
tensor<fp16, [1, 4]> y_neg = sub(x = const(val = fp16(0)), y = x)[name = string("y_neg")];''',
                             "y_relu, y_neg"))
    x = f16(1, 4)
    y_relu, y_neg = fn(x)
    np.testing.assert_array_equal(y_relu, np.maximum(x, 0))
    np.testing.assert_array_equal(y_neg, -x)
    assert [v.name for v in fn.outputs] == ["y_relu", "y_neg"]


def test_split_concat_and_literal_forms():
    fn = af.load_mil(program("tensor<fp16, [2, 6]> x", '''
tensor<fp16, [2, 2]> a, tensor<fp16, [2, 4]> b = split(x = x,
    split_sizes = const(tensor<int32, [2]>([2, 4])), axis = const(int32(1)))[name = string("s")];
tensor<fp16, [2, 6]> c = concat(values = (b, a), axis = int32(-1), interleave = bool(false))
    [name = string("c")];
tensor<fp16, [2, 6]> d = mul(x = c, y = const(fp16(0x1.8p+1)))[name = string("d")];
tensor<fp32, [2, 6]> e = cast(x = d, dtype = string("fp32"))[name = string("e")];
tensor<fp32, [2, 6]> f = add(x = e, y = fp32(-1.5e-1))[name = string("f")];
tensor<fp16, [2, 6]> g = cast(x = f, dtype = string("fp16"))[name = string("g")];''', "g"))
    x = np.arange(12, dtype=np.float16).reshape(2, 6)
    want = np.concatenate([x[:, 2:], x[:, :2]], 1).astype(np.float32) * 3 - np.float32(0.15)
    np.testing.assert_array_equal(fn(x), want.astype(np.float16))


def test_coremltools_style_consts_in_annotations():
    """model.mil from coremltools: `const()[name = ..., val = ...]`, scalar types, names bound."""
    fn = af.load_mil(program(X14, '''
string mode = const()[name = string("mode"), val = string("TANH_APPROXIMATION")];
fp16 eps = const()[name = string("eps"), val = fp16(0x0p+0)];
tensor<fp16, [1, 4]> g = gelu(x = x, mode = mode)[name = string("g")];
tensor<fp16, [1, 4]> y = log(x = g, epsilon = eps)[name = string("y")];''', "y"))
    assert [op.type for op in fn.program.operations] == ["gelu", "log"]
    assert fn.program.operations[0].attrs["mode"] == "TANH_APPROXIMATION"


def test_blobfile_weights(tmp_path):
    from aneforge.mil.proto import WeightFile
    w = np.arange(12, dtype=np.float16).reshape(3, 4)
    wf = WeightFile()
    offset = wf.add(w, "float16")
    (tmp_path / "weights1.bin").write_bytes(wf.to_bytes())
    text = program(X14.replace("[1, 4]", "[2, 4]"), f'''
tensor<fp16, [3, 4]> w = const(
    val = tensor<fp16, [3, 4]>(BLOBFILE(@path="weights1.bin", offset={offset}))
)[name = string("w")];
tensor<fp16, [2, 3]> y = matmul(x = x, y = w, transpose_x = const(bool(false)),
    transpose_y = const(bool(true)))[name = string("y")];''', "y")
    (tmp_path / "model.mil").write_text(text)
    fn = af.load_mil(tmp_path / "model.mil")
    x = np.ones((2, 4), np.float16)
    np.testing.assert_array_equal(fn(x), x @ w.T)
    with pytest.raises(MILSyntaxError, match="weights_dir"):
        af.load_mil(text)


def _blob_text(offset, path="weights1.bin", shape="[3, 4]"):
    return program(X14.replace("[1, 4]", "[2, 4]"), f'''
tensor<fp16, {shape}> w = const(
    val = tensor<fp16, {shape}>(BLOBFILE(@path="{path}", offset={offset}))
)[name = string("w")];
tensor<fp16, [2, 4]> y = relu(x = x)[name = string("y")];''', "y")


@pytest.mark.parametrize("offset,contents,match", [
    ("64", b"", "has 0 bytes, fewer than the 64-byte header"),
    ("64", b"\x01" * 63, "has 63 bytes, fewer than the 64-byte header"),
    ("100", None, "offset 100 is not the start of a blob record"),
    ("-1", None, "expected a number|byte offset"),
    ("int32(-64)", None, "offset -64 is not the start of a blob record"),
    ("fp16(1.5)", None, "byte offset \\(a non-negative integer\\), found 1.5"),
    ("99999999999999999999", None, "is not the start of a blob record"),
    ("0", None, "no float16 blob there"),
    ('"\u00b2"', None, "byte offset \\(a non-negative integer\\), found '\u00b2'"),
], ids=["empty", "short", "past-end", "negative", "int32-negative", "float", "huge", "header",
        "unicode-digit"])
def test_blobfile_reads_are_bounds_checked(tmp_path, offset, contents, match):
    """Issue 14: a short or damaged weight file is a MILSyntaxError [literal], never struct.error."""
    from aneforge.mil.proto import WeightFile
    wf = WeightFile()
    wf.add(np.arange(12, dtype=np.float16), "float16")
    (tmp_path / "weights1.bin").write_bytes(wf.to_bytes() if contents is None else contents)
    with pytest.raises(MILSyntaxError, match=match):
        parse(_blob_text(offset), weights_dir=str(tmp_path))
    with pytest.raises(MILSyntaxError, match="holds 12 float16 elements; a value of shape \\[4, 4\\]"):
        (tmp_path / "weights1.bin").write_bytes(wf.to_bytes())
        parse(_blob_text(64, shape="[4, 4]"), weights_dir=str(tmp_path))
    with pytest.raises(MILSyntaxError, match="cannot read the weight file 'missing.bin'"):
        parse(_blob_text(64, path="missing.bin"), weights_dir=str(tmp_path))


# ---------------------------------------------------------------------------- 2. round trip

@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_round_trip_keeps_the_signature(case):
    programs = [forward(case)] + ([] if case.bakes_inputs else [backward(case)])
    for p in filter(None, programs):
        text = emit(p)
        q = parse(text)
        assert q.signature() == p.signature()
        assert emit(q) == text


def test_round_trip_of_strings_that_need_escapes():
    p = af.program(af.ones(1, 4).exp())
    p.build_info = {"tool": 'say "hi"\\n', "tab": "a\tb\nc"}
    p.operations[0].name = 'exp "1"'
    q = parse(emit(p))
    assert q.build_info == p.build_info and q.operations[0].name == 'exp "1"'


def test_round_trip_of_a_training_step():
    from test_export import training_step_program
    p = training_step_program()
    assert parse(emit(p)).signature() == p.signature()


def test_load_mil_runs_like_the_traced_program():
    x = af.tensor(f16(3, 5))
    w = af.tensor(f16(5, 4, seed=1))
    y = ((x @ w).relu().sum(dim=1, keepdim=True) / 3).log_softmax(0)
    want = y.numpy()
    fn = af.load_mil(af.to_mil(y))          # the program that computed y
    np.testing.assert_array_equal(fn(x.numpy(), w.numpy()), want)


# ---------------------------------------------------------------------------- load_mil's calls

RELU = program(X14, 'tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")];', "y")


def test_load_mil_compiles_once_per_backend_and_numerics(monkeypatch):
    from aneforge.runtime import get_backend
    fn, calls = af.load_mil(RELU), []
    real = type(get_backend()).compile
    monkeypatch.setattr(type(get_backend()), "compile",
                        lambda self, p, nm: calls.append(nm) or real(self, p, nm))
    for _ in range(3):
        fn(np.ones((1, 4)))
    with af.numerics(rounding="half_away"):
        fn(np.ones((1, 4)))
    assert len(calls) == 2


@pytest.mark.parametrize("args, kwargs, error, words", [
    ((np.ones((2, 4)),), {}, ShapeError, "shape [1, 4]"),
    ((), {}, AneforgeError, "needs input(s) ['x']"),
    ((np.ones((1, 4)),) * 2, {}, AneforgeError, "takes 1 input(s)"),
    ((), {"z": np.ones((1, 4))}, AneforgeError, "no input 'z'"),
    ((np.ones((1, 4)),), {"x": np.ones((1, 4))}, AneforgeError, "both by position and by name"),
    ((np.array([["a"] * 4]),), {}, DTypeError, "Pass floating-point data"),
])
def test_load_mil_checks_its_inputs(args, kwargs, error, words):
    with pytest.raises(error) as e:
        af.load_mil(RELU)(*args, **kwargs)
    assert words in str(e.value)


def test_load_mil_integer_inputs_are_range_checked():
    fn = af.load_mil(program("tensor<int16, [2]> x", '''
tensor<int32, [2]> w = cast(x = x, dtype = string("int32"))[name = string("w")];
tensor<int32, [2]> v = add(x = w, y = int32(1))[name = string("v")];
tensor<int16, [2]> y = cast(x = v, dtype = string("int16"))[name = string("y")];''', "y"))
    assert fn(np.array([1, 2])).tolist() == [2, 3]
    with pytest.raises(DTypeError, match="do not fit"):
        fn(np.array([1, 70000]))


def test_load_mil_reads_files_and_says_when_it_cannot(tmp_path):
    (tmp_path / "relu.mil").write_text(RELU)
    assert af.load_mil(str(tmp_path / "relu.mil"))(np.ones((1, 4))).tolist() == [[1.0] * 4]
    with pytest.raises(AneforgeError, match="cannot read MIL text"):
        af.load_mil(str(tmp_path / "missing.mil"))
    with pytest.raises(AneforgeError, match="MIL text or a path"):
        af.load_mil(42)


# ---------------------------------------------------------------------------- 3. validation

def error_line(text: str, needle: str) -> int:
    """The 1-based line of the first occurrence of `needle` in `text`."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


Y = 'tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")];'

# (rule, signature, body, text on the offending line, words the message must contain);
# the program returns y (or what the needle's "-> (name)" says).
ERRORS = [
    ("io-dtype", "tensor<fp32, [1, 4]> x", Y, "tensor<fp32", ["fp32", "cast"]),
    ("io-dtype", "tensor<int32, [1, 4]> x", Y, "tensor<int32", ["int32", "fp16, int16"]),
    ("io-dtype", "tensor<bf16, [1, 4]> x", Y, "tensor<bf16", ["bf16"]),
    ("io-dtype", X14, Y + '\ntensor<bool, [1, 4]> m = less(x = x, y = y)[name = string("m")];',
     "-> (m)", ["bool", "compute-only"]),
    ("io-rank", "tensor<fp16, []> x", 'tensor<fp16, []> y = relu(x = x)[name = string("y")];',
     "tensor<fp16, []> x", ["scalar", "[1]"]),
    ("axis-limit", "tensor<fp16, [1, 70000]> x", Y, "70000", ["70000", "1..65536"]),
    ("axis-limit", "tensor<fp16, [0, 4]> x", Y, "[0, 4]", ["size 0", "empty"]),
    ("rank-limit", "tensor<fp16, [1, 1, 1, 1, 1, 4]> x", Y, "[1, 1, 1, 1, 1, 4]",
     ["rank 6", "<= 5"]),
    ("required-argument", X14, 'tensor<fp16, [1, 4]> y = log(x = x)[name = string("y")];', "log(",
     ["epsilon", "const(fp16(0))"]),
    ("required-argument", X14, 'tensor<fp16, [1, 4]> y = gelu(x = x)[name = string("y")];',
     "gelu(", ["mode", 'string("EXACT")']),
    ("required-argument", X14, 'tensor<fp16, [1, 4]> y = add(x = x)[name = string("y")];',
     "add(", ["input 'y'"]),
    ("name-annotation", X14, "tensor<fp16, [1, 4]> y = relu(x = x);", "relu(", ["[name ="]),
    ("name-annotation", X14, 'tensor<fp16, [1, 4]> y = relu(x = x)[name = string("")];', "relu(",
     ["empty"]),
    ("name-annotation", X14, "tensor<fp16, [1, 4]> y = relu(x = x)[];", "relu(", ["missing"]),
    ("duplicate-name", X14, Y + "\n" + Y.replace('string("y")', 'string("y2")'), 'string("y2")',
     ["already defined on line", "coremltools' loader does not catch this"]),
    ("duplicate-name", X14, 'tensor<fp16, [1, 4]> x = relu(x = x)[name = string("y")];', "= relu",
     ["'x' is already defined"]),
    ("undefined-name", X14, 'tensor<fp16, [1, 4]> y = relu(x = z)[name = string("y")];', "x = z",
     ["'z' is not defined"]),
    ("undefined-name", X14, 'tensor<fp16, [1, 4]> y = relu(x = z)[name = string("y")];\n'
     'tensor<fp16, [1, 4]> z = exp(x = x)[name = string("z")];', "x = z",
     ["before it is defined (on line", "move its definition up"]),
    ("undefined-name", X14, Y, "-> (w)", ["'w' is not defined"]),
    ("unknown-op", X14, 'tensor<fp16, [1, 4]> y = rellu(x = x)[name = string("y")];', "rellu",
     ["unknown op 'rellu'", "did you mean 'relu'"]),
    ("unknown-argument", AB14, 'tensor<fp16, [1, 4]> y = add(a = a, b = b)[name = string("y")];',
     "add(", ["add has no argument 'a'", "it takes x, y"]),
    ("argument-type", X14, 'tensor<fp16, [1, 4]> y = log(x = x, epsilon = const(fp32(0)))'
     '[name = string("y")];', "log(", ["scalar of dtype fp16 (like 'x')"]),
    ("argument-type", X14, 'tensor<fp16, [1, 1]> y = reduce_sum(x = x, axes = int32(1), '
     'keep_dims = bool(true))[name = string("y")];', "reduce_sum", ["1-D int32 tensor"]),
    ("type-mismatch", X14, 'tensor<fp16, [1, 3]> y = relu(x = x)[name = string("y")];', "relu(",
     ["declared tensor<fp16, [1, 3]>", "gives tensor<fp16, [1, 4]>"]),
    ("op-check", "tensor<fp16, [1, 4]> x, tensor<fp16, [3, 5]> w",
     'tensor<fp16, [1, 5]> y = matmul(x = x, y = w)[name = string("y")];', "matmul(",
     ["contraction sizes differ"]),
    ("compile-wall", X14, 'tensor<fp16, [1, 1]> r = reduce_sum(x = x, axes = const(tensor<int32, '
     '[1]>([1])), keep_dims = const(bool(true)))[name = string("r")];\n'
     'tensor<fp16, [1, 1]> y = mul(x = r, y = const(val = fp16(0)))[name = string("y")];',
     "mul(", ["ANECCompile", "sub(x, x)"]),
    ("literal", X14, 'tensor<fp16, [1, 4]> y = add(x = x, y = tensor<fp16, [2]>([1]))'
     '[name = string("y")];', "add(", ["shape [1]", "exactly 2 elements"]),
    ("literal", X14, 'tensor<fp16, [1, 4]> y = add(x = x, y = fp16(1e6))[name = string("y")];',
     "add(", ["beyond the range of float16"]),
    ("opset", X14, Y, "func main", ["ios18"]),
    ("unsupported", X14, 'tensor<fp16, [1, 4]> y = add(x = x, y = bf16(1))[name = string("y")];',
     "add(", ["no bf16 values"]),
    ("syntax", X14, 'tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")]', "-> (y)",
     ["expected ';'"]),
]


@pytest.mark.parametrize("rule, signature, body, needle, words", ERRORS,
                         ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)])
def test_validation_error_names_line_and_rule(rule, signature, body, needle, words):
    outputs = needle[4:-1] if needle.startswith("-> (") else "y"
    text = program(signature, body, outputs)
    if rule == "opset":
        text = text.replace("main<ios18>", "main<ios99>")
    with pytest.raises(MILSyntaxError) as e:
        parse(text)
    err = e.value
    assert (err.rule, err.line) == (rule, error_line(text, needle)), str(err)
    message = str(err)
    assert message.startswith(f"MIL line {err.line} [{rule}]: ")
    for w in words:
        assert w in message, message


def test_every_rule_is_tested():
    from aneforge.mil.resolve import RULES
    assert set(RULES) == {e[0] for e in ERRORS}


def test_errors_are_aneforge_errors_with_a_line():
    with pytest.raises(AneforgeError) as e:
        af.load_mil("program(1.3) {\n  func main<ios18>(tensor<fp16, [1]> x) {\n  } -> (x);\n} }")
    assert e.value.line == 4 and "after the program's closing" in str(e.value)


@pytest.mark.parametrize("text, words", [
    ('program(1.3) { func main<ios18>(tensor<fp16, [1]> x) { } -> (x); } "', "unterminated"),
    ("program(1.3) { func main<ios18>(tensor<fp16, [M, N]> x) { } -> (x); }", "integer sizes"),
    ("program(1.3) { func main<ios18>(state<tensor<fp16, [1]>> x) { } -> (x); }", "paired"),
    ("program(1.3) { func f<ios18>(tensor<fp16, [1]> x) { } -> (x); }", "named main"),
    ("program(1.3) [foo = 1] { }", "unknown program attribute"),
    ("program(1.3) { func main<ios18>(tensor<fp16, [1]> x) {\n"
     "  tensor<fp16, [1]> y = relu(x = x)[name = string(\"y\")];\n"
     "  tensor<fp16, [1]> z = exp(x = x)[name = string(\"y\")];\n } -> (z); }", "op name 'y'"),
    ("program(1.3) { func main<ios18>(tensor<fp16, [1]> x) {\n"
     "  tensor<fp16, [1]> y = add(x = x, y = tensor<fp16, [1]>([[[[[[[1]]]]]]]))"
     "[name = string(\"y\")];\n } -> (y); }", "deeper than rank 5"),
])
def test_syntax_errors_say_what_was_expected(text, words):
    with pytest.raises(MILSyntaxError) as e:
        parse(text)
    assert words in str(e.value)


# ---------------------------------------------------------------------------- large values
# A tensor value is read as one "array" token converted with numpy (text.py); these check that
# it accepts and rejects exactly what the plain tokens do, with the same value or message.

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from aneforge.mil import text as mil_text  # noqa: E402

CONST_DTYPES = {"fp16": np.float16, "fp32": np.float32, "int32": np.int32, "int16": np.int16,
                "uint8": np.uint8, "int8": np.int8, "bool": np.bool_}


def _const_program(dtype: str, shape, body: str) -> str:
    t = f"tensor<{dtype}, [{', '.join(map(str, shape))}]>"
    return program("tensor<fp16, [1]> x", f'{t} w = const(val = {t}({body}))[name = string("w")];\n'
                   f'tensor<fp16, [1]> y = relu(x = x)[name = string("y")];', "y")


def _parse_both(text: str):
    """(value or error message) with array tokens, and with the plain tokens only."""
    out = []
    for min_chars in (mil_text.ARRAY_MIN_CHARS, 10 ** 9):
        old, mil_text.ARRAY_MIN_CHARS = mil_text.ARRAY_MIN_CHARS, min_chars
        try:
            p = parse(text)
            out.append(next(op.attrs["val"] for op in p.operations if op.type == "const"))
        except MILSyntaxError as e:
            out.append(str(e))
        finally:
            mil_text.ARRAY_MIN_CHARS = old
    return out


def _elements(a: np.ndarray, dtype: str, how: str) -> list[str]:
    flat = a.ravel()
    if dtype == "bool":
        return ["true" if v else "false" for v in flat]
    if dtype.startswith("fp") and how == "hex":
        width = flat.dtype.itemsize * 2
        return [f"0x{b:0{width}x}" for b in flat.view(f"uint{flat.dtype.itemsize * 8}")]
    if dtype.startswith("fp"):
        return [repr(float(v)) for v in flat]
    return [f"{int(v):#x}" if how == "hex" and v >= 0 else str(int(v)) for v in flat]


def _nest(items: list[str], shape) -> str:
    if len(shape) == 1:
        return "[" + ", ".join(items) + "]"
    n = len(items) // shape[0]
    return "[" + ",\n ".join(_nest(items[i * n:(i + 1) * n], shape[1:]) for i in range(shape[0])) + "]"


@st.composite
def large_values(draw):
    dtype = draw(st.sampled_from(sorted(CONST_DTYPES)))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))) + (8,)
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    a = (rng.standard_normal(shape) * 100).astype(CONST_DTYPES[dtype]) if dtype != "bool" else \
        rng.random(shape) < 0.5
    items = _elements(a, dtype, draw(st.sampled_from(["hex", "decimal"])))
    for _ in range(draw(st.integers(0, 3))):     # damage: a word, a number, a bracket, ...
        i = draw(st.integers(0, len(items) - 1))
        items[i] = draw(st.sampled_from(["1e", ".", "-", "0x", "0x1ffff", "1.5", "-0x3c00", "inf",
                                         "nan", "-inf", "1e9", "true", "x", "1 2", "", "[1]",
                                         "0x1.8p+0", "99999999999999999999", "1_0", "+7",
                                         "0X3C00", "007", items[i]]))
    return dtype, shape, _nest(items, shape)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(large_values())
def test_array_tokens_read_exactly_what_plain_tokens_read(case):
    dtype, shape, body = case
    fast, plain = _parse_both(_const_program(dtype, shape, body))
    if isinstance(plain, str):
        assert fast == plain
    else:
        assert fast.dtype == plain.dtype and fast.shape == plain.shape
        np.testing.assert_array_equal(fast.view(np.uint8), plain.view(np.uint8))


def test_array_token_errors_keep_their_line():
    rows = [", ".join(["0x3c00"] * 16)] * 4
    rows[2] = rows[2].replace("0x3c00", "0x13c00", 1)
    text = _const_program("fp16", (4, 16), "[" + "],\n[".join(rows).join("[]") + "]")
    with pytest.raises(MILSyntaxError, match="0x13c00 is not a 16-bit pattern") as e:
        parse(text)
    assert e.value.line == 6 and e.value.rule == "literal"      # where the value starts
    fast, plain = _parse_both(text)
    assert fast == plain == str(e.value)
    bad = text.replace("0x13c00", "0x3c00 0x3c00")               # a missing comma, line 8
    fast, plain = _parse_both(bad)
    assert fast == plain and plain.startswith("MIL line 8 [syntax]")


def test_large_inline_weights_parse_fast():
    """Issue 14: ~2 s per MB before; numpy on the whole value reads several MB/s. Timed by
    this process's CPU time, best of three: the suite shares 2 cores between its workers and
    other jobs, and wall time at load 11-13 read 0.72 MB/s for the same parse."""
    import time
    w = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float16)
    body = _nest([f"0x{b:04x}" for b in w.view(np.uint16).ravel()], w.shape)
    text = _const_program("fp16", w.shape, body)
    elapsed = []
    for _ in range(3):
        start = time.process_time()
        p = parse(text)
        elapsed.append(time.process_time() - start)
        np.testing.assert_array_equal(next(op.attrs["val"] for op in p.operations), w)
    assert len(text) / min(elapsed) > 1e6, f"{len(text) / min(elapsed) / 1e6:.2f} MB/s"


def test_a_literal_argument_of_an_op_with_any_name_round_trips():
    """A literal becomes a const whose value name comes from the op's name, which may hold any
    character: the value name is made a MIL name (found by the text fuzzer: 'y_n/g')."""
    for op_name in ("y_n/g", "1st", "fp16", "a b", "é"):
        text = program("tensor<fp16, [1, 4]> x", f'''
tensor<fp16, [1, 4]> y = sub(x = const(val = fp16(0)), y = x)[name = string("{op_name}")];''', "y")
        p = parse(text)
        assert parse(emit(p)).signature() == p.signature()


@pytest.mark.parametrize("shape", ["[99999999999999999999, 8]", "[65536, 65536]", "[]", "[0, 8]",
                                   "[1, 1, 1, 1, 1, 1, 16]"])
def test_a_large_value_for_an_absurd_type_is_an_error(shape):
    """The array token's value is compared with its type by counting elements first (the text
    fuzzer found a shape too large to build the comparison for)."""
    body = "[" + ", ".join(["0x3c00"] * 16) + "]"
    body = "[" * (shape.count(",") - 1) + body + "]" * (shape.count(",") - 1) if shape.count(",") > 1 \
        else body
    text = program("tensor<fp16, [1, 4]> x", f'''
tensor<fp16, {shape}> w = const(val = tensor<fp16, {shape}>({body}))[name = string("w")];
tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")];''', "y")
    fast, plain = _parse_both(text)
    assert fast == plain and ("[literal]" in plain or "[rank-limit]" in plain)


def test_the_end_of_the_text_keeps_its_line():
    text = program("tensor<fp16, [1, 4]> x", '''
tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")];''', "y")
    with pytest.raises(MILSyntaxError) as e:
        parse(text.rstrip().rstrip("}") + "\n\n\n")
    assert e.value.line == text.rstrip().count("\n") + 4     # the last line, blank ones too


# ---------------------------------------------------------------------------- common statements
# A line that is one statement of the common shape is read by one regular expression
# (aneforge/mil/fast.py); these check it reads to the same program, or the same error, as the
# grammar token by token (test_mil_fuzz.py checks it on mutated text too).

from aneforge.bench.startup import mil_program  # noqa: E402


def read_switched(text: str, module, switch: str) -> list[str]:
    """(the program as MIL text, or the error) read with module.switch on, and off."""
    out = []
    for on in (True, False):
        old = getattr(module, switch)
        setattr(module, switch, on)
        try:
            out.append(emit(parse(text)))
        except MILSyntaxError as e:
            out.append(str(e))
        finally:
            setattr(module, switch, old)
    return out


def read_both(text: str) -> list[str]:
    """Read with the fast path, and without."""
    return read_switched(text, mil_text, "FAST_STATEMENTS")


def fast_lines(text: str) -> set[int]:
    """The lines the fast path reads."""
    return set(mil_text.Parser(text).fast.by_line)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_op_table_programs_read_the_same_by_the_fast_path(case):
    programs = [forward(case)] + ([] if case.bakes_inputs else [backward(case)])
    for p in filter(None, programs):
        fast, plain = read_both(emit(p))
        assert fast == plain == emit(p)


def test_the_fast_path_reads_every_statement_of_a_network_text():
    text = mil_program(500)
    statements = [n for n, line in enumerate(text.split("\n"), 1) if line.endswith("];")]
    assert fast_lines(text) == set(statements) and len(statements) == 500
    fast, plain = read_both(text)
    assert fast == plain


_SUM = ('tensor<fp16, [1, 1]> s = reduce_sum(x = x, axes = const(tensor<int32, [1]>([1])), '
        'keep_dims = const(bool(true)))[name = string("s")];')
# (a statement on line 6, whether the fast path takes it): each reads the same both ways, a
# program or the same error; the ones it leaves look like the common shape but are not.
NEAR_MISSES = [
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")];', True),
    ('tensor<fp16,[1,4]>y=relu(x=x)[name=string("y")];', True),
    ('\ttensor < fp16 , [ 1 , 4 ] > y = relu ( x = x ) [ name = string ( "y" ) ] ; ', True),
    ('tensor<fp16, [1, 4]> y = add(x = x, y = fp16(0.5))[name = string("y")];', True),
    ('tensor<fp16, [1, 4]> y = add(x = x, y = const(val = fp16(-0x1.8p-1)))[name = string("y")];',
     True),
    ('tensor<fp16, [1, 4]> y = add(x = x, y = const(fp16(inf)))[name = string("y")];', True),
    ('fp16 c = const()[name = string("c"), val = fp16(0.25)];\n'
     'tensor<fp16, [1, 4]> y = mul(x = x, y = c)[name = string("y")];', True),
    ('tensor<fp16, [1, 8]> y = concat(values = (x, x), axis = const(int32(1)), '
     'interleave = const(bool(false)))[name = string("y")];', True),
    ('tensor<fp16, [1, 4]> y = gelu(x = x, mode = string("TANH_APPROXIMATION"))'
     '[name = string("y")];', True),
    ('string m = const()[name = string("m"), val = string("EXACT")];\n'
     'tensor<fp16, [1, 4]> y = gelu(x = x, mode = m)[name = string("y")];', True),
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y é/1")];', True),
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = string("a\\"b")];', True),
    # values the grammar or the rules reject, in a line of the common shape
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = string("")];', True),
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = fp16(1)];', True),
    ('tensor<fp16, [1, 4]> y = relu(x = x, x = x)[name = string("y")];', True),
    ('tensor<fp16, [1, 4]> y = relu(x = z)[name = string("y")];', True),
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y"), val = fp16(1)];', True),
    ('tensor<fp16, [1, 3]> y = relu(x = x)[name = string("y")];', True),
    ('tensor<fp16, [1, 8]> y = concat(values = (), axis = const(int32(1)), '
     'interleave = const(bool(false)))[name = string("y")];', True),
    ('tensor<fp16, [1, 4]> y = add(x = x, y = const(int32(1)))[name = string("y")];', True),
    ('tensor<fp16, [1, 4]> y = add(x = x, y = string("a"))[name = string("y")];', True),
    ('tensor<fp16, [1, 4]> y = add(x = x, y = true)[name = string("y")];', True),
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")];\n'
     'tensor<fp16, [1, 4]> z = relu(x = x)[name = string("y")];', True),
    # not the common shape: read token by token
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y"), name = string("z")];', False),
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")]; // a comment', False),
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")]', False),
    ('tensor<fp16, [1, 4]> y = relu(x = x);', False),
    ('tensor<fp16, [1, 4]> y = relu(x = x)[];', False),
    ('tensor<fp99, [1, 4]> y = relu(x = x)[name = string("y")];', False),
    ('tensor<fp16, [1, 4.5]> y = relu(x = x)[name = string("y")];', False),
    ('tensor<fp16, [1,, 4]> y = relu(x = x)[name = string("y")];', False),
    ('fp99 c = const()[name = string("c"), val = fp16(1)];', False),
    ('state c = const()[name = string("c"), val = fp16(1)];', False),
    ('tensor c = const()[name = string("c"), val = fp16(1)];', False),
    ('fp16 c = const()[name = string("c"), val = fp16(1e6)];', False),
    ('fp16 c = const()[name = string("c"), val = bf16(1)];', False),
    ('fp16 c = const()[name = string("c"), val = fp16(0x1ffff)];', False),
    ('fp16 c = const()[name = string("c"), val = const(const(fp16(1)))];', False),
    ('fp16 c = const()[name = string("c"), val = foo(1)];', False),
    ('int32 c = const()[name = string("c"), val = int32(1.5)];', False),
    ('bool c = const()[name = string("c"), val = bool(1)];', False),
    ('fp16 c = const()[name = string("c"), val = fp16(infx)];', False),
    ('tensor<fp16, [1, 4]> inf = relu(x = x)[name = string("y")];', False),
    ('tensor<fp16, [1, 4]> y = nan(x = x)[name = string("y")];', False),
    ('tensor<fp16, [1, 4]> y = relu(x = inf)[name = string("y")];', False),
    ('tensor<fp16, [1, 4]> y = relu(x = @x)[name = string("y")];', False),
    ('tensor<fp16, [1, 4]> y = add(x = x, y = x<)[name = string("y")];', False),
    ('tensor<fp16, [1, 4]> y = add(x = x, y = (x, inf))[name = string("y")];', False),
    ('tensor<fp16, [1, 4]> y, tensor<fp16, [1, 4]> z = relu(x = x)[name = string("y")];', False),
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")];;', False),
    ('tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y"),];', False),
    ('tensor<fp16, [1, 4]> y = relu(x = x,)[name = string("y")];', False),
    (_SUM + '\ntensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")];', False),
]


@pytest.mark.parametrize("body, taken", NEAR_MISSES, ids=[str(i) for i in range(len(NEAR_MISSES))])
def test_a_line_reads_the_same_by_the_fast_path(body, taken):
    outputs = "y" if " y = " in body or ">y=" in body else "x"
    text = program("tensor<fp16, [1, 4]> x", body, outputs)
    assert (6 in fast_lines(text)) == taken
    fast, plain = read_both(text)
    assert fast == plain


def test_a_form_read_before_checks_its_values_in_the_same_order():
    """resolve.py checks a statement form's names once; a later statement of the form still
    has every value checked, inputs in the text's order, and its inputs in the registry's."""
    first = 'tensor<fp16, [1, 4]> c = add(y = a, x = b)[name = string("c")];'
    text = program(AB14, first + '\ntensor<fp16, [1, 4]> d = add(y = z, x = w)'
                   '[name = string("d")];', "d")
    with pytest.raises(MILSyntaxError, match="'z' is not defined") as e:
        parse(text)
    assert (e.value.rule, e.value.line) == ("undefined-name", 7)
    p = parse(program(AB14, first + '\ntensor<fp16, [1, 4]> d = add(y = c, x = a)'
                      '[name = string("d")];', "d"))
    assert [[(k, v.name) for k, v in op.inputs.items()] for op in p.operations] == \
        [[("x", "b"), ("y", "a")], [("x", "a"), ("y", "c")]]
    reduce = _SUM.replace("keep_dims = const(bool(true))", "keep_dims = {}")
    text = program(X14, reduce.format("const(bool(true))") + "\n" +
                   reduce.format("const(int32(1))").replace(" s ", " t ").replace('"s"', '"t"'), "t")
    with pytest.raises(MILSyntaxError, match="keep_dims must be a bool scalar") as e:
        parse(text)
    assert (e.value.rule, e.value.line) == ("argument-type", 7)


# ---------------------------------------------------------------------------- quick statements
# A statement of a form read before, whose inputs are defined and whose result types and op
# answer were met before, is added by resolve.py's quick path; these check it gives the same
# program, or the same error, as the full checks (test_mil_fuzz.py checks mutated text too).

from aneforge.mil import resolve as mil_resolve  # noqa: E402

_FORMS = '''
tensor<fp16, [1, 4]> c{i} = add(x = a, y = b)[name = string("c{i}")];
fp16 k{i} = const()[name = string("k{i}"), val = fp16(0.5)];
tensor<fp16, [1, 4]> d{i} = mul(x = c{i}, y = k{i})[name = string("d{i}")];
string m{i} = const()[name = string("m{i}"), val = string("EXACT")];
tensor<fp16, [1, 4]> g{i} = gelu(x = d{i}, mode = m{i})[name = string("g{i}")];
tensor<fp16, [1, 1]> s{i} = reduce_sum(x = g{i}, axes = const(tensor<int32, [1]>([1])), keep_dims = const(bool(true)))[name = string("s{i}")];'''

# (what the second copy of _FORMS changes, from, to): each reads the same with the quick path
# and without, a program or the same error
QUICK_CASES = [
    ("nothing", "", ""),
    ("a const's value", "fp16(0.5)", "fp16(0.25)"),
    ("a const's dtype", "fp16 k1 = const()[name = string(\"k1\"), val = fp16(0.5)]",
     "int32 k1 = const()[name = string(\"k1\"), val = int32(1)]"),
    ("a const made a string", "val = fp16(0.5)", "val = string(\"x\")"),
    ("a string const made a number", "val = string(\"EXACT\")", "val = fp16(1)"),
    ("gelu's mode", "m1 = const()[name = string(\"m1\"), val = string(\"EXACT\")]",
     "m1 = const()[name = string(\"m1\"), val = string(\"TANH_APPROXIMATION\")]"),
    ("an op name used before", 'name = string("d1")', 'name = string("c0")'),
    ("a value name used before", "tensor<fp16, [1, 4]> d1 =", "tensor<fp16, [1, 4]> d0 ="),
    ("an op name empty", 'name = string("d1")', 'name = string("")'),
    ("an undefined input", "mul(x = c1,", "mul(x = q,"),
    ("an input defined later", "mul(x = c1,", "mul(x = g1,"),
    ("a string const as an input", "y = k1)", "y = m1)"),
    ("a literal as an input", "add(x = a,", "add(x = fp16(1),"),
    ("a declared type", "tensor<fp16, [1, 4]> d1", "tensor<fp16, [1, 3]> d1"),
    ("a new declared type", "tensor<fp16, [1, 4]> c1", "tensor<fp32, [1, 4]> c1"),
    ("keep_dims", "keep_dims = const(bool(true)))[name = string(\"s1\")]",
     "keep_dims = const(bool(false)))[name = string(\"s1\")]"),
    ("keep_dims's kind", "keep_dims = const(bool(true)))[name = string(\"s1\")]",
     "keep_dims = const(int32(1)))[name = string(\"s1\")]"),
    ("a reserved value name", "tensor<fp16, [1, 4]> c1 =", "tensor<fp16, [1, 4]> tensor ="),
    ("an input of another type", "add(x = a, y = b)[name = string(\"c1\")]",
     "add(x = a, y = s0)[name = string(\"c1\")]"),
]


def read_quick_and_not(text: str) -> list[str]:
    """Read with the quick path, and without."""
    return read_switched(text, mil_resolve, "QUICK_STATEMENTS")


@pytest.mark.parametrize("what, before, after", QUICK_CASES, ids=[c[0] for c in QUICK_CASES])
def test_a_statement_reads_the_same_by_the_quick_path(what, before, after, monkeypatch):
    second = _FORMS.format(i=1)
    assert before in second
    text = program(AB14, _FORMS.format(i=0) + second.replace(before, after, 1), "s0")
    taken, quick = [], mil_resolve._FunctionResolver.quick

    def counted(self, st, form):
        took = quick(self, st, form)
        taken.extend([st.line] * took)
        return took
    monkeypatch.setattr(mil_resolve._FunctionResolver, "quick", counted)
    with_quick, without = read_quick_and_not(text)
    assert with_quick == without
    if what == "nothing":          # every statement of the second copy but the string const
        assert taken == [12, 13, 14, 16, 17] and "add(" in with_quick


def test_a_network_text_reads_the_same_by_the_quick_path():
    text = mil_program(400)
    with_quick, without = read_quick_and_not(text)
    assert with_quick == without
    # equal const values, each its own array (a pass may change one in place)
    values = [op.attrs["val"] for op in parse(text).operations if op.type == "const"]
    assert len(values) == 80 and len({id(v) for v in values}) == 80
