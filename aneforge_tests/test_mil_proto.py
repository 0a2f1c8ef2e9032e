"""MILSpec protobuf writer/reader (aneforge/mil/proto.py), checked against coremltools.

Every program below is (1) round-tripped IR -> bytes -> IR (same signature, bit-identical
simulator outputs), (2) parsed by coremltools' own MIL_pb2 and loaded by its milproto frontend,
whose type inference must agree with ours on every op output. Together they use every op in
the registry (test_every_registered_op_is_covered).
"""
from __future__ import annotations

import copy
import os

import numpy as np
import pytest

import aneforge as af
from aneforge import dtypes
from aneforge.errors import AneforgeError, CompileWallError, DTypeError, LimitError, ShapeError
from aneforge.ir import Block, Function, Operation, Program, TensorType, Var
from aneforge.mil import proto
from aneforge.hardware.numerics import get_numerics
from aneforge.ops import REGISTRY, validate
from aneforge.runtime.sim import SimBackend

IOS18 = 9   # coremltools' specification version for iOS18 (opset "CoreML8")


# ---------------------------------------------------------------------------- building programs

class Builder:
    """Hand-built IR for what the Tensor API does not spell (linear, gelu modes, transposed
    matmul, epsilons...): each op is checked by its own `infer`, like the tracer does."""

    def __init__(self):
        self.inputs, self.ops, self.n = [], [], 0

    def _var(self, prefix, type_):
        self.n += 1
        return Var(f"{prefix}_{self.n}", type_)

    def input(self, *shape, dtype=dtypes.float16):
        v = self._var("x", TensorType(tuple(shape), dtype))
        self.inputs.append(v)
        return v

    def const(self, value, dtype=dtypes.float16):
        return self("const", val=np.asarray(value, dtype.np))

    def __call__(self, op, **kw):
        spec = REGISTRY[op]
        inputs = {k: kw.pop(k) for k in spec.inputs if kw.get(k) is not None}
        attrs = spec.full_attrs(kw)
        in_types = {k: tuple(u.type for u in v) if isinstance(v, tuple) else v.type
                    for k, v in inputs.items()}
        outs = [self._var(op, t) for t in spec.infer_types(in_types, attrs)]
        self.ops.append(Operation(op, inputs, attrs, outs, outs[0].name))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def program(self, *outputs):
        outs = [v if v.dtype == dtypes.transport(v.dtype) else
                self("cast", x=v, dtype=dtypes.transport(v.dtype).name) for v in outputs]
        return validate(Program({"main": Function(Block(self.inputs, self.ops, outs))}))


def _data(*shape, low=0.5, high=2.0):
    return af.tensor(np.random.default_rng(len(shape)).uniform(low, high, shape))


def p_arithmetic():
    x, y = _data(2, 3), _data(3)
    return af.program(x + y, x - 1.5, x * y, x / y, x ** y, 2.0 ** x, x.maximum(y), x.minimum(y))


def p_unary():
    x = _data(4, 5)
    return af.program(x.exp(), x.log(), x.sqrt(), x.rsqrt(), (x - 1).abs(), x.sin(), x.cos(),
                      (x - 1).relu(), x.sigmoid(), x.tanh(), x.clamp(0.75, 1.5), x.erf(),
                      (x + 1).detach())


def p_compare_select():
    x, y = _data(3, 4), _data(4)
    a, b = x < y, x >= 1.0
    return af.program(af.where(a, x, y), x <= y, x > y, x == y, x != y, a & b, a | b, a ^ b, ~a)


def p_int32():
    i = af.tensor(np.arange(-6, 6, dtype=np.int32).reshape(3, 4))
    return af.program((i + 3) * i - i.abs(), i.maximum(1), i.sum(1), i > 0, i.float().half(),
                      i.argmax(1), i.amin(0))


def p_fp32_inside():
    x, y = _data(2, 8), _data(8, 3)
    xf, yf = x.float(), y.float()
    return af.program((xf @ yf).exp().half(), (xf * xf).sum(-1).half(), (xf < xf.sqrt()).half())


def p_matmul():
    b = Builder()
    x, y, v, w = b.input(2, 5, 3), b.input(2, 4, 5), b.input(1, 5), b.input(3, 5)
    return b.program(b("matmul", x=x, y=y, transpose_x=True, transpose_y=True),
                     b("matmul", x=v, y=w, transpose_y=True), b("matmul", x=x, y=x, transpose_x=True))


def p_matmul_vector_y():
    x, v = _data(3, 4), _data(4)
    return af.program(x @ v)


def p_matmul_vector_x_batched():
    v, x = _data(4), _data(2, 4, 3)
    return af.program(v @ x)


def p_matmul_api():
    x, y = _data(3, 4, 5), _data(5, 2)
    return af.program(x @ y, x.transpose(1, 2) @ x)


def p_linear():
    b = Builder()
    x = b.input(2, 3, 4)
    rng = np.random.default_rng(1)
    w, bias = b.const(rng.standard_normal((6, 4))), b.const(rng.standard_normal(6))
    return b.program(b("linear", x=x, weight=w, bias=bias), b("linear", x=x, weight=w))


def p_reductions():
    x = _data(2, 3, 2)      # at most 16 summed: longer float16 sums are matmuls with a ones column
    return af.program(x.sum(), x.sum((0, 2)), x.mean(1, keepdim=True), x.amax(-1, keepdim=True),
                      x.amin((1, 2)), x.sum(-1, keepdim=False))


def p_reduce_all_keep():
    b = Builder()
    x = b.input(2, 3)
    # a scalar result leaves as [1], as the tracer writes it: program I/O has rank >= 1
    return b.program(b("reduce_max", x=x, keep_dims=True),
                     b("reshape", x=b("reduce_mean", x=x), shape=(1,)))


def p_arg_softmax():
    x = _data(3, 5)
    return af.program(x.argmax(1), x.argmin(0, keepdim=True), x.argmax(), x.softmax(-1),
                      x.softmax(0), x.log_softmax(1))


def p_shapes():
    x = _data(2, 3, 4)
    parts = x.split([1, 3], dim=2)
    return af.program(x.reshape(6, 4), x.permute(2, 0, 1), x.unsqueeze(1), x[:, :1].squeeze(1),
                      af.cat([x, x * 2], dim=1), *parts, x[1, ::2, 1:3], x[None, ..., -1],
                      x[:, :1].expand(2, 5, 4), af.stack([x, x], dim=0))


def p_shapes_ir():
    b = Builder()
    x, y = b.input(2, 1, 4), b.input(2, 1, 4)
    return b.program(b("concat", values=(x, y, x), axis=1, interleave=True),
                     *b("split", x=x, num_splits=2, axis=-1),
                     b("squeeze", x=x), b("tile", x=x, reps=(1, 3, 2)),
                     b("slice_by_index", x=x, begin=(0, 0, 1), end=(2, 1, 4), stride=(1, 1, 2),
                       begin_mask=(True, False, False), end_mask=(False, True, False),
                       squeeze_mask=(False, True, False)))


def p_cast():
    b = Builder()
    x = b.input(3, 4)
    i = b("cast", x=x, dtype="int32")
    f = b("cast", x=i, dtype="fp32")
    k = b("cast", x=b("cast", x=x, dtype="uint8"), dtype="int16")
    return b.program(b("cast", x=f, dtype="fp16"), b("add", x=i, y=i), k,
                     b("cast", x=b("cast", x=x, dtype="bool"), dtype="fp16"))


def p_activations_ir():
    b = Builder()
    x = b.input(2, 6)
    eps = 2.0 ** -10    # fp16-representable: see test_scalar_attributes_hold_the_inputs_dtype
    return b.program(*(b("gelu", x=x, mode=m) for m in ("EXACT", "TANH_APPROXIMATION",
                                                         "SIGMOID_APPROXIMATION")),
                     b("silu", x=x), b("softplus", x=x), b("softsign", x=x),
                     b("clip", x=x, alpha=-0.5, beta=1.25),
                     b("log", x=x, epsilon=eps), b("rsqrt", x=x, epsilon=eps), b("softmax", x=x))


def p_small_io():
    b = Builder()
    u, s, i8 = b.input(4, dtype=dtypes.uint8), b.input(4, dtype=dtypes.int16), b.input(4, dtype=dtypes.int8)
    c = b.const(np.arange(12).reshape(3, 4), dtypes.int32)
    s32 = b("cast", x=s, dtype="int32")
    return b.program(b("add", x=c, y=s32), b("cast", x=u, dtype="fp16"),
                     b("cast", x=i8, dtype="fp16"), b("logical_not", x=b("cast", x=u, dtype="bool")))


def p_fused_ops():
    """The ops graph passes make: layer_norm, instance_norm, batch_norm, leaky_relu, prelu,
    pad, sdpa."""
    b = Builder()
    x, q, k, v = b.input(2, 3, 4), b.input(2, 4, 8), b.input(2, 5, 8), b.input(2, 5, 6)
    g, beta = b.const(np.linspace(0.5, 1.5, 4)), b.const(np.linspace(-1, 1, 4))
    gc, bc = b.const(np.linspace(0.5, 1.5, 3)), b.const(np.linspace(-1, 1, 3))
    mask = b.const(np.tril(np.ones((4, 5), bool)), dtypes.bool_)
    pads = [b("pad", x=x, pad=(1, 0, 2, 1), mode=mode, constant_val=0.5 if mode == "constant" else 0.0)
            for mode in ("constant", "reflect", "replicate")]
    norm = b("batch_norm", x=x, mean=gc, variance=b.const(np.linspace(0.5, 2, 3)), gamma=gc,
             beta=bc, epsilon=2.0 ** -10)
    return b.program(*pads, norm, b("prelu", x=b("expand_dims", x=x, axes=(0,)),
                                    alpha=b.const(np.linspace(-1, 1, 2))),
                     b("layer_norm", x=x, gamma=g, beta=beta, axes=(-1,), epsilon=2.0 ** -10),
                     b("layer_norm", x=x, axes=(0, 2), epsilon=2.0 ** -10),
                     b("instance_norm", x=x, gamma=gc, beta=bc, epsilon=2.0 ** -10),
                     b("leaky_relu", x=x, alpha=0.125),
                     b("scaled_dot_product_attention", query=q, key=k, value=v, attn_mask=mask),
                     b("scaled_dot_product_attention", query=q, key=k, value=v))


def p_conv():
    """conv: every argument spelled, the defaults, and each pad_type; pixel_shuffle."""
    b = Builder()
    x = b.input(1, 4, 7, 6)
    rng = np.random.default_rng(2)
    w, bias = b.const(rng.standard_normal((6, 2, 3, 3))), b.const(rng.standard_normal(6))
    w1 = b.const(rng.standard_normal((3, 4, 1, 2)))
    return b.program(
        b("conv", x=x, weight=w, bias=bias, strides=(2, 1), pad_type="custom", pad=(1, 0, 2, 1),
          dilations=(1, 2), groups=2),
        b("conv", x=x, weight=w1),
        b("conv", x=x, weight=w, groups=2, pad_type="same", strides=(2, 2)),
        b("conv", x=x, weight=w, groups=2, pad_type="same_lower", strides=(2, 2)),
        b("pixel_shuffle", x=x, upscale_factor=2))


PROGRAMS = {f.__name__[2:]: f for f in (
    p_arithmetic, p_unary, p_compare_select, p_int32, p_fp32_inside, p_matmul, p_matmul_vector_y, p_matmul_vector_x_batched,
    p_matmul_api,
    p_linear, p_reductions, p_reduce_all_keep, p_arg_softmax, p_shapes, p_shapes_ir, p_cast,
    p_activations_ir, p_small_io, p_fused_ops, p_conv)}


@pytest.fixture(scope="module")
def programs():
    return {name: build() for name, build in PROGRAMS.items()}


def _inputs(program):
    rng = np.random.default_rng(0)
    out = []
    for v in program.main.inputs:
        if v.dtype.is_float:
            out.append(rng.uniform(-2, 2, v.shape).astype(v.dtype.np))
        else:
            lo, hi = (0, 2) if v.dtype == dtypes.uint8 else (-5, 5)
            out.append(rng.integers(lo, hi, v.shape).astype(v.dtype.np))
    return out


def _run(program, inputs):
    return SimBackend().compile(program, get_numerics()).run(inputs)


# ---------------------------------------------------------------------------- schema

def _fields(desc):
    """Every field of a message and its nested messages, as comparable tuples."""
    rows = {}
    for f in desc.fields:
        rows[f"{desc.full_name}.{f.name}"] = (
            f.number, f.type, f.is_repeated,
            f.message_type.full_name if f.message_type else None,
            f.enum_type.full_name if f.enum_type else None,
            f.containing_oneof.name if f.containing_oneof else None, f.is_packed)
    for n in desc.nested_types:
        rows.update(_fields(n))
    return rows


def test_schema_agrees_with_coremltools_mil_pb2(ct):
    from coremltools.proto import MIL_pb2
    theirs = MIL_pb2.DESCRIPTOR
    assert proto.PACKAGE == theirs.package
    checked = 0
    for name in proto.schema_messages():
        top, *nested = name.split(".")
        desc = theirs.message_types_by_name[top]
        for part in nested:
            desc = desc.nested_types_by_name[part]
        ref = _fields(desc)
        for key, row in _fields(proto.message_class(name).DESCRIPTOR).items():
            assert row == ref[key], key
            checked += 1
    assert checked > 60
    ref_enum = {v.name: v.number for v in theirs.enum_types_by_name["DataType"].values}
    assert proto.DATA_TYPES.items() <= ref_enum.items()


def test_message_class_names_what_exists():
    assert proto.message_class("Argument.Binding")(name="x").name == "x"
    with pytest.raises(AneforgeError, match="no MILSpec message 'ListType'"):
        proto.message_class("ListType")


# ---------------------------------------------------------------------------- round trip

def test_every_registered_op_is_covered(programs):
    used = {op.type for p in programs.values() for op in p.operations}
    missing = sorted(set(REGISTRY) - used)
    assert not missing, f"add programs using {missing} to PROGRAMS in this file"


@pytest.mark.parametrize("name", PROGRAMS)
def test_round_trip_keeps_signature_and_outputs(programs, name):
    p = programs[name]
    q = proto.from_proto_bytes(proto.to_proto_bytes(p))
    assert q.signature() == p.signature()
    assert [op.name for op in q.operations] == [op.name for op in p.operations]
    assert q.build_info == p.build_info and q.main.opset == "ios18"
    inputs = _inputs(p)
    for a, b in zip(_run(p, inputs), _run(q, inputs)):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


def test_attribute_values_come_back_as_the_types_ops_use(programs):
    q = proto.from_proto_bytes(proto.to_proto_bytes(programs["shapes_ir"]))
    by_type = {op.type: op.attrs for op in q.operations}
    assert by_type["slice_by_index"]["begin"] == (0, 0, 1)
    assert by_type["slice_by_index"]["end_mask"] == (False, True, False)
    assert type(by_type["concat"]["axis"]) is int and by_type["concat"]["interleave"] is True
    assert by_type["squeeze"]["axes"] is None and by_type["split"]["split_sizes"] is None
    q = proto.from_proto_bytes(proto.to_proto_bytes(programs["activations_ir"]))
    clip = next(op for op in q.operations if op.type == "clip")
    assert clip.attrs == {"alpha": -0.5, "beta": 1.25} and type(clip.attrs["alpha"]) is float
    const = next(op for op in proto.from_proto_bytes(proto.to_proto_bytes(programs["linear"])).operations
                 if op.type == "const")
    assert const.attrs["val"].dtype == np.float16 and const.attrs["val"].shape == (6, 4)


# ---------------------------------------------------------------------------- coremltools

from conftest import coremltools_types as _coremltools_types  # noqa: E402
from conftest import load_in_coremltools as _load_in_coremltools  # noqa: E402


# program -> (exception, why): constructs we emit that coremltools 9.0 rejects.
COREMLTOOLS_REJECTS = {
}


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, raises=COREMLTOOLS_REJECTS[n][0],
                                            reason=COREMLTOOLS_REJECTS[n][1]))
    if n in COREMLTOOLS_REJECTS else n for n in PROGRAMS])
def test_coremltools_infers_our_types(ct, programs, name):
    p = programs[name]
    theirs = _coremltools_types(_load_in_coremltools(proto.to_proto_bytes(p)))
    for op in p.operations:
        for v in op.outputs:
            assert theirs[v.name] == (v.shape, v.dtype.name), f"{op.type} {v.name}"


def test_coremltools_reads_our_fields(ct, programs):
    from coremltools.proto import MIL_pb2
    m = MIL_pb2.Program.FromString(proto.to_proto_bytes(programs["shapes_ir"]))
    assert m.version == 1 and list(m.functions) == ["main"]
    f = m.functions["main"]
    assert f.opset == "CoreML8" and list(f.block_specializations) == ["CoreML8"]
    assert [(i.name, i.type.tensorType.dataType, [d.constant.size for d in i.type.tensorType.dimensions])
            for i in f.inputs] == [("x_1", MIL_pb2.FLOAT16, [2, 1, 4]), ("x_2", MIL_pb2.FLOAT16, [2, 1, 4])]
    ops = f.block_specializations["CoreML8"].operations
    concat = ops[0]
    assert concat.type == "concat"
    assert [b.name for b in concat.inputs["values"].arguments] == ["x_1", "x_2", "x_1"]
    axis = concat.inputs["axis"].arguments[0].value
    assert axis.type.tensorType.dataType == MIL_pb2.INT32 and axis.type.tensorType.rank == 0
    assert list(axis.immediateValue.tensor.ints.values) == [1]
    assert list(concat.inputs["interleave"].arguments[0].value.immediateValue.tensor.bools.values) == [True]
    assert concat.attributes["name"].immediateValue.tensor.strings.values == [concat.outputs[0].name]
    sl = next(op for op in ops if op.type == "slice_by_index")
    mask = sl.inputs["squeeze_mask"].arguments[0].value
    assert [d.constant.size for d in mask.type.tensorType.dimensions] == [3]
    assert list(mask.immediateValue.tensor.bools.values) == [False, True, False]
    split = next(op for op in ops if op.type == "split")
    assert "split_sizes" not in split.inputs and len(split.outputs) == 2     # None is omitted
    assert m.attributes["buildInfo"].immediateValue.dictionary.values[0].key \
        .immediateValue.tensor.strings.values == ["coremlc-component-MIL"]


def test_coremltools_reads_our_constants(ct, programs):
    from coremltools.proto import MIL_pb2
    p = programs["linear"]
    m = MIL_pb2.Program.FromString(proto.to_proto_bytes(p))
    ops = m.functions["main"].block_specializations["CoreML8"].operations
    w = ops[0]
    assert w.type == "const" and not w.inputs and set(w.attributes) == {"name", "val"}
    val = w.attributes["val"]
    assert val.type.tensorType.dataType == MIL_pb2.FLOAT16
    assert val.immediateValue.tensor.bytes.values == p.operations[0].attrs["val"].astype("<f2").tobytes()
    m = MIL_pb2.Program.FromString(proto.to_proto_bytes(programs["small_io"]))
    c = m.functions["main"].block_specializations["CoreML8"].operations[0].attributes["val"]
    assert c.type.tensorType.dataType == MIL_pb2.INT32
    assert list(c.immediateValue.tensor.ints.values) == list(range(12))
    m = MIL_pb2.Program.FromString(proto.to_proto_bytes(programs["activations_ir"]))
    clip = next(op for op in m.functions["main"].block_specializations["CoreML8"].operations
                if op.type == "clip")
    alpha = clip.inputs["alpha"].arguments[0].value     # `const T`: fp16 like x, as bytes
    assert alpha.type.tensorType.dataType == MIL_pb2.FLOAT16
    assert alpha.immediateValue.tensor.bytes.values == np.float16(-0.5).tobytes()


VALUES = [np.float16([[1.5, -2.0], [np.inf, 0.0]]), np.float32([0.1, -3.25]), np.int32([-7, 8, 9]),
          np.int16([-3, 4]), np.uint16([5, 60000]), np.int8([-128, 127]), np.uint8([0, 255]),
          np.array([True, False]), np.array(np.float16(0.5)), np.array(np.int32(-1)),
          np.array(True), np.zeros((0, 3), np.float16), np.zeros((2, 0), np.int32)]


@pytest.mark.parametrize("value", VALUES, ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_values_encode_byte_for_byte_like_coremltools(ct, value):
    from coremltools.converters.mil.backend.mil.helper import create_scalar_value, create_tensor_value
    theirs = create_tensor_value(value) if value.ndim else create_scalar_value(value[()])
    assert proto._value(value).SerializeToString() == theirs.SerializeToString()


def test_strings_encode_like_coremltools(ct):
    from coremltools.converters.mil.backend.mil.helper import create_scalar_value
    assert proto._string("relu_1").SerializeToString() == create_scalar_value("relu_1").SerializeToString()


def test_mil_pb2_sees_our_ops(ct, programs):
    """Parsed by coremltools' MIL_pb2, every op has our type, name, bindings and output types,
    and re-serializing it gives our bytes back."""
    from coremltools.proto import MIL_pb2
    for p in programs.values():
        data = proto.to_proto_bytes(p)
        m = MIL_pb2.Program.FromString(data)
        assert m.SerializeToString(deterministic=True) == \
            proto.message_class("Program").FromString(data).SerializeToString(deterministic=True)
        ops = m.functions["main"].block_specializations["CoreML8"].operations
        assert len(ops) == len(p.operations)
        for ours, theirs in zip(p.operations, ops):
            assert theirs.type == ours.type
            assert list(theirs.attributes["name"].immediateValue.tensor.strings.values) == [ours.name]
            for k, v in ours.inputs.items():
                names = [u.name for u in (v if isinstance(v, tuple) else (v,))]
                assert [b.name for b in theirs.inputs[k].arguments] == names
            assert [(o.name, o.type.tensorType.dataType, tuple(d.constant.size for d in o.type.tensorType.dimensions))
                    for o in theirs.outputs] == [
                (v.name, MIL_pb2.DataType.Value(proto.ELEMENTS[v.dtype.np_name][0]), v.shape)
                for v in ours.outputs]


def test_reads_what_coremltools_writes(ct, programs):
    """coremltools binds compile-time arguments to const ops by name: read back, they are
    folded into attributes again and the program is the one we wrote."""
    from coremltools.converters.mil.backend.mil.load import MILProtoExporter
    for name in ("shapes_ir", "reductions", "activations_ir"):
        p = programs[name]
        pymil = _load_in_coremltools(proto.to_proto_bytes(p))
        theirs = MILProtoExporter(pymil, "", IOS18).export().SerializeToString()
        q = proto.from_proto_bytes(theirs)
        assert q.signature() == p.signature(), name


# ---------------------------------------------------------------------------- weight file

def _big_program():
    b = Builder()
    rng = np.random.default_rng(3)
    x, i = b.input(5, 64), b.input(3, 12, dtype=dtypes.int16)
    w = b.const(rng.standard_normal((32, 64)))
    small = b.const(rng.standard_normal(9))            # < 10 elements: stays inline
    ints = b.const(rng.integers(-100, 100, (3, 12)), dtypes.int32)
    i8 = b.const(rng.integers(-100, 100, (12,)), dtypes.int8)
    y = b("linear", x=x, weight=w)
    return b.program(y, b("add", x=b("cast", x=i, dtype="int32"), y=ints),
                     b("add", x=b("reduce_sum", x=y, axes=(1,), keep_dims=True), y=small),
                     b("cast", x=i8, dtype="fp16"))


def test_weight_file_round_trip(tmp_path):
    p = _big_program()
    data = proto.to_proto_bytes(p, str(tmp_path))
    assert len(data) < 32 * 64 * 2 < (tmp_path / "weight.bin").stat().st_size
    with pytest.raises(AneforgeError, match="pass weights_dir"):
        proto.from_proto_bytes(data)
    q = proto.from_proto_bytes(data, str(tmp_path))
    assert q.signature() == p.signature()
    inputs = _inputs(p)
    for a, b in zip(_run(p, inputs), _run(q, inputs)):
        np.testing.assert_array_equal(a, b)


def test_weight_file_is_byte_identical_to_coremltools(ct, tmp_path):
    from coremltools.libmilstoragepython import _BlobStorageWriter
    p = _big_program()
    proto.to_proto_bytes(p, str(tmp_path / "ours"))
    writers = {"float16": lambda w, a: w.write_fp16_data(a.view(np.uint16)),
               "int32": lambda w, a: w.write_int32_data(a), "int8": lambda w, a: w.write_int8_data(a)}
    os.makedirs(tmp_path / "ref")
    ref = _BlobStorageWriter(str(tmp_path / "ref" / "weight.bin"))
    offsets = [writers[op.attrs["val"].dtype.name](ref, op.attrs["val"].ravel()) for op in p.operations
               if op.type == "const" and op.attrs["val"].size >= proto.BLOB_MIN_ELEMENTS]
    del ref                                              # flushes and closes the file
    assert (tmp_path / "ours" / "weight.bin").read_bytes() == (tmp_path / "ref" / "weight.bin").read_bytes()
    from coremltools.proto import MIL_pb2
    m = MIL_pb2.Program.FromString(proto.to_proto_bytes(p, str(tmp_path / "ours")))
    blobs = [op.attributes["val"].blobFileValue for op in
             m.functions["main"].block_specializations["CoreML8"].operations
             if op.type == "const" and op.attributes["val"].WhichOneof("value") == "blobFileValue"]
    assert [b.offset for b in blobs] == offsets
    assert {b.fileName for b in blobs} == {"@model_path/weights/weight.bin"}


def test_coremltools_reads_our_weight_file(ct, tmp_path):
    p = _big_program()
    pymil = _load_in_coremltools(proto.to_proto_bytes(p, str(tmp_path)), str(tmp_path))
    ops = pymil.functions["main"].operations
    # not the consts coremltools makes for literal arguments: their automatic names (const_3)
    # can repeat ours, depending on what coremltools named earlier in the process
    literals = {id(v.op) for op in ops for k, v in op.inputs.items()
                if op.op_type in REGISTRY and k in REGISTRY[op.op_type].attrs}
    consts = {op.outputs[0].name: op.outputs[0].val for op in ops
              if op.op_type == "const" and id(op) not in literals}
    for op in p.operations:
        if op.type == "const":
            np.testing.assert_array_equal(consts[op.name], op.attrs["val"])
            assert consts[op.name].dtype == op.attrs["val"].dtype


# ---------------------------------------------------------------------------- errors

def test_errors_say_what_to_do(programs):
    m = proto.to_proto(programs["unary"])
    m.functions["main"].block_specializations["CoreML8"].operations[0].type = "erfinv"
    with pytest.raises(AneforgeError, match="'erfinv' is not in aneforge's op registry"):
        proto.from_proto(m.SerializeToString())
    m = proto.to_proto(programs["unary"])
    m.functions["main"].opset = "CoreML3"
    with pytest.raises(AneforgeError, match="opset 'CoreML3'"):
        proto.from_proto(m.SerializeToString())
    m = proto.to_proto(programs["unary"])
    op = m.functions["main"].block_specializations["CoreML8"].operations[0]
    op.inputs["alpha"].arguments.add().name = "x_0"
    with pytest.raises(AneforgeError, match=r"argument\(s\) \['alpha'\]"):
        proto.from_proto(m.SerializeToString())
    m = proto.to_proto(programs["unary"])
    op = next(op for op in m.functions["main"].block_specializations["CoreML8"].operations
              if op.type != "const")
    op.outputs[0].type.tensorType.dimensions[0].constant.size += 1
    with pytest.raises(AneforgeError, match=f"{op.type} gives"):      # read through OpDef.apply
        proto.from_proto(m.SerializeToString())


# ---------------------------------------------------------------------------- known op bugs

def test_fp32_constants(ct):
    p = af.program(_data(2, 3).float() * 1.5 + 1.0)
    q = proto.from_proto_bytes(proto.to_proto_bytes(p))
    assert q.signature() == p.signature()
    _load_in_coremltools(proto.to_proto_bytes(p))


def test_scalar_attributes_hold_the_inputs_dtype():
    p = af.program(_data(2, 3).clamp(0.1, 0.9))
    q = proto.from_proto_bytes(proto.to_proto_bytes(p))
    assert q.signature() == p.signature()


def test_constructs_core_ml_rejects_are_rejected_when_recorded():
    """MIL that Core ML's loader refuses never reaches a program: our infer says why first."""
    b = Builder()
    x = b.input(3)
    with pytest.raises(AneforgeError, match="alpha=1.0 must be < beta=1.0"):
        b("clip", x=x, alpha=1.0, beta=1.0)
    v, w = b.input(5), b.input(5, 3)
    with pytest.raises(AneforgeError, match="rank >= 2"):
        b("matmul", x=v, y=w, transpose_x=True)


# ---------------------------------------------------------------------------- damaged input (issue 14)
# Whatever the bytes hold, the reader gives a Program or an AneforgeError naming what is wrong.

def _ops(m):
    return m.functions["main"].block_specializations["CoreML8"].operations


def _rejects(m, match, weights_dir=None, error=AneforgeError):
    with pytest.raises(error, match=match):
        proto.from_proto(m.SerializeToString(), weights_dir)


@pytest.mark.parametrize("size", [0, 1, 63])
def test_a_weight_file_shorter_than_its_header(tmp_path, size):
    data = proto.to_proto_bytes(_big_program(), str(tmp_path))
    (tmp_path / "weight.bin").write_bytes(bytes(size))
    with pytest.raises(AneforgeError, match=f"has {size} bytes, fewer than the 64-byte header"):
        proto.from_proto_bytes(data, str(tmp_path))


def test_weight_blobs_are_bounds_checked(tmp_path):
    p = _big_program()
    m = proto.to_proto(p, str(tmp_path))
    whole = (tmp_path / "weight.bin").read_bytes()
    blob = next(op.attributes["val"].blobFileValue for op in _ops(m)
                if op.type == "const" and op.attributes["val"].WhichOneof("value") == "blobFileValue")
    for cut in (blob.offset + 10, blob.offset + 64 + 5):       # inside the record, the data
        (tmp_path / "weight.bin").write_bytes(whole[:cut])
        _rejects(m, "weight.bin", str(tmp_path))
    (tmp_path / "weight.bin").write_bytes(whole)
    for offset, match in ((len(whole) - 10, "is not the start of a blob record"),
                          (2 ** 63, "is not the start of a blob record"),
                          (blob.offset + 1, "no float16 blob there")):
        m2 = copy.deepcopy(m)
        next(op.attributes["val"].blobFileValue for op in _ops(m2) if op.type == "const"
             and op.attributes["val"].WhichOneof("value") == "blobFileValue").offset = offset
        _rejects(m2, match, str(tmp_path))
    m2 = copy.deepcopy(m)
    const = next(op for op in _ops(m2) if op.type == "const"
                 and op.attributes["val"].WhichOneof("value") == "blobFileValue")
    const.attributes["val"].type.tensorType.dimensions[0].constant.size = 16
    _rejects(m2, "a value of shape \\[16, 64\\] needs 1024", str(tmp_path))
    m2 = copy.deepcopy(m)
    next(op for op in _ops(m2) if op.type == "const" and op.attributes["val"].WhichOneof(
        "value") == "blobFileValue").attributes["val"].blobFileValue.fileName = "@model_path/nope.bin"
    _rejects(m2, "cannot read the weight file '@model_path/nope.bin'", str(tmp_path))


def test_a_const_op_without_outputs(programs):
    m = proto.to_proto(programs["linear"])
    const = next(op for op in _ops(m) if op.type == "const")
    del const.outputs[:]
    _rejects(m, "declares no outputs")


def test_strings_typed_as_other_values(programs):
    m = proto.to_proto(programs["unary"])
    name = _ops(m)[0].attributes["name"]
    name.type.tensorType.dataType = proto.DATA_TYPES["FLOAT32"]
    _rejects(m, "holds its elements in the strings field")
    m = proto.to_proto(programs["unary"])
    _ops(m)[0].attributes["name"].CopyFrom(proto._value(np.array(1.5, np.float32)))
    _rejects(m, "name: a float32 value of shape \\[\\] is not a str argument")
    m = proto.to_proto(programs["unary"])
    kv = m.attributes["buildInfo"].immediateValue.dictionary.values[0]
    kv.value.type.tensorType.dataType = proto.DATA_TYPES["FLOAT32"]
    _rejects(m, "holds its elements in the strings field")
    m = proto.to_proto(programs["unary"])
    m.attributes["buildInfo"].immediateValue.dictionary.values[0].value.CopyFrom(
        proto._value(np.array(["a", "b"])))
    _rejects(m, "a buildInfo value: a <U1 value of shape \\[2\\] is not a str argument")
    m = proto.to_proto(programs["unary"])
    m.attributes["buildInfo"].CopyFrom(proto._value(np.array("x")))
    _rejects(m, "buildInfo is not a dict<string, string>")


def test_elements_must_be_in_their_dtypes_field(programs):
    m = proto.to_proto(programs["linear"])
    val = next(op for op in _ops(m) if op.type == "const").attributes["val"]
    n = len(val.immediateValue.tensor.bytes.values) // 2
    val.immediateValue.tensor.floats.values.extend([1.0] * n)   # was fp16 bytes
    _rejects(m, "typed float16\\[6, 4\\] holds its elements in the floats field")


@pytest.mark.parametrize("shape,rule,error", [
    ((1, 0), "axis-limit", LimitError), ((1, 65537), "axis-limit", LimitError),
    ((1, 2 ** 40), "axis-limit", LimitError), ((1, 1, 1, 1, 1, 4), "rank-limit", LimitError),
    ((), "io-rank", ShapeError)], ids=["axis0", "axis65537", "axis2**40", "rank6", "scalar"])
def test_both_readers_reject_the_same_input_shapes(programs, shape, rule, error):
    from aneforge.mil.text import MILSyntaxError, emit, parse
    m = proto.to_proto(programs["unary"])
    t = m.functions["main"].inputs[0].type.tensorType
    del t.dimensions[:]
    for n in shape:
        t.dimensions.add().constant.size = n
    t.rank = len(shape)
    _rejects(m, f"\\[{rule}\\] program input", error=error)
    text = emit(programs["unary"])
    old = str(programs["unary"].main.inputs[0].type)
    new = f"tensor<fp16, [{', '.join(map(str, shape))}]>"
    with pytest.raises(MILSyntaxError) as e:
        parse(text.replace(old, new, 1))
    assert e.value.rule == rule


def test_declared_types_are_checked_everywhere(programs):
    m = proto.to_proto(programs["unary"])
    out = next(op for op in _ops(m) if op.type != "const").outputs[0].type.tensorType
    out.dimensions.add().constant.size = 1
    _rejects(m, "lists 3 dimensions")                            # rank says 2
    out.rank = 6
    for _ in range(3):
        out.dimensions.add().constant.size = 1
    _rejects(m, "\\[rank-limit\\]", error=LimitError)
    m = proto.to_proto(programs["unary"])
    m.functions["main"].inputs[0].type.tensorType.dataType = proto.DATA_TYPES["FLOAT32"]
    _rejects(m, "\\[io-dtype\\] program input", error=DTypeError)


def test_names_are_held_to_the_text_readers_rules(programs):
    for bad, match in (("fp16", "reserved word"), ("1x", "is not a MIL name"),
                       ("a b", "is not a MIL name"), ("", "is not a MIL name")):
        m = proto.to_proto(programs["unary"])
        m.functions["main"].inputs[0].name = bad
        _rejects(m, match)
    m = proto.to_proto(programs["unary"])
    ops = [op for op in _ops(m) if op.type != "const"]
    ops[1].outputs[0].name = ops[0].outputs[0].name
    _rejects(m, "is defined twice")
    m = proto.to_proto(programs["unary"])
    ops = [op for op in _ops(m) if op.type != "const"]
    ops[1].attributes["name"].CopyFrom(ops[0].attributes["name"])
    _rejects(m, "unique, non-empty name")
    m = proto.to_proto(programs["unary"])
    outs = m.functions["main"].block_specializations["CoreML8"].outputs
    outs.append(outs[0])
    _rejects(m, "each output needs its own name")


def test_arguments_an_op_does_not_expect(programs):
    """An op's inference meeting arguments it never checks (a perm axis out of range) is an
    AneforgeError naming the op, as in the text reader (found by the protobuf fuzzer)."""
    m = proto.to_proto(programs["shapes"])
    op = next(op for op in _ops(m) if op.type == "transpose")
    perm = op.inputs["perm"].arguments[0].value
    rank = len(perm.immediateValue.tensor.ints.values)
    perm.CopyFrom(proto._value(np.array([rank] + list(range(1, rank)), np.int32)))
    _rejects(m, "is not a permutation of 3 axes")               # was IndexError: 3 % 3 == 0


def test_the_compile_walls_and_what_is_not_a_program():
    """As text.parse: a graph the ANE compiler rejects is a CompileWallError (walls=False reads
    it); and anything but bytes or a Program message is an AneforgeError."""
    b = Builder()
    x = b.input(2, 3)
    p = b.program(b("mul", x=b("reduce_sum", x=x, axes=(1,), keep_dims=True), y=b.const(0.0)))
    data = proto.to_proto_bytes(p)
    with pytest.raises(CompileWallError, match="mul\\(reduce_sum output, 0\\)"):
        proto.from_proto_bytes(data)
    assert proto.from_proto_bytes(data, walls=False).signature() == p.signature()
    for bad in ("program", 5, None, [1, 2]):
        with pytest.raises(AneforgeError, match="MILSpec Program bytes or a Program message"):
            proto.from_proto(bad)
        with pytest.raises(AneforgeError, match="from_proto_bytes reads bytes"):
            proto.from_proto_bytes(bad)
    assert proto.from_proto(memoryview(data), walls=False).signature() == p.signature()
