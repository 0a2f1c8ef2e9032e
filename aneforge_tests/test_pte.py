"""af.export(obj, "m.pte"): ExecuTorch programs, read back with ExecuTorch's own reader and run
with its runtime (portable kernels, on Linux); the Core ML delegate's payload checked against
ExecuTorch's Core ML backend's own (un)flattening. executorch is imported inside the tests."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F
from aneforge.errors import AneforgeError




def _reader():
    from executorch.exir._serialize._program import deserialize_pte_binary
    return deserialize_pte_binary


def _read(path):
    with open(path, "rb") as f:
        return _reader()(f.read()).program


def _torch_dtype(scalar_type):
    import torch
    return {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 5: torch.float16,
            6: torch.float32, 11: torch.bool}[int(scalar_type)]


def _run_executorch(path, arrays):
    """The method's outputs as numpy, its inputs cast to the dtypes the program declares."""
    import torch
    from executorch.runtime import Runtime
    plan = _read(path).execution_plan[0]
    kinds = [_torch_dtype(plan.values[k].val.scalar_type) for k in plan.inputs]
    inputs = [torch.from_numpy(np.asarray(a)).to(d) for a, d in zip(arrays, kinds)]
    method = Runtime.get().load_program(path).load_method("forward")
    return [o.float().numpy() for o in method.execute(inputs)]


class AttentionBlock(nn.Module):
    """layer norm, then one head of softmax attention."""

    def __init__(self, d):
        super().__init__()
        self.norm, self.qkv = nn.LayerNorm(d), nn.Linear(d, 3 * d)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        return scores.softmax(-1) @ v


def _mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), np.random.randn(2, 8)


def _conv():
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.MaxPool2d(2), nn.ReLU())
    return net, np.random.randn(1, 3, 8, 8)


def _attention():
    return AttentionBlock(8), np.random.randn(1, 5, 8)


def _embedding():
    return nn.Embedding(10, 4), np.array([[1, 2, 3], [9, 0, 9]], dtype=np.int32)


MODELS = {"mlp": _mlp, "conv_pool_relu": _conv, "layer_norm_attention": _attention,
          "embedding": _embedding}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_portable_program_runs_in_executorch_like_aneforge(name, tmp_path):
    af.manual_seed(0)
    np.random.seed(0)
    model, x = MODELS[name]()
    path = af.export(model, str(tmp_path / "m.pte"), (x,), delegate=False)
    (got,) = _run_executorch(path, [x])
    want = model(af.tensor(x)).numpy()
    assert got.shape == want.shape
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * scale)


def _one_op(op_type, inputs, attrs=None, consts=None):
    """A MIL program of one op (inputs {name: shape}, fp16; consts {name: array}), callable."""
    from aneforge.ir import Block, Function, Operation, Program, TensorType, Var
    from aneforge.mil.load import MILFunction
    from aneforge.ops.registry import apply_to_vars
    args = {k: Var(k, TensorType(shape, af.dtypes.float16)) for k, shape in inputs.items()}
    ops = []
    for k, value in (consts or {}).items():
        args[k] = Var(k, TensorType(value.shape, af.dtypes.float16))
        ops.append(Operation("const", {}, {"val": value.astype(np.float16)}, [args[k]], k))
    _, types = apply_to_vars(op_type, args, attrs or {})
    outs = [Var(f"y{i}", t) for i, t in enumerate(types)]
    ops.append(Operation(op_type, args, dict(attrs or {}), outs, "y0"))
    return MILFunction(Program({"main": Function(Block([args[k] for k in inputs], ops, outs))}))


W = np.linspace(-1, 1, 12).reshape(3, 4)
# MIL op -> (function or MIL program, its inputs' shapes): every rule of mil/pte.py KERNELS
OPS = {
    **{op: (getattr(af.Tensor, op), [(2, 3, 4)])
       for op in ("relu", "exp", "sin", "cos", "erf", "tanh", "sigmoid", "abs")},
    "sqrt": (lambda x: x.exp().sqrt(), [(2, 3)]),
    "log": (lambda x: x.exp().log(), [(2, 3)]),
    "rsqrt": (lambda x: x.exp().rsqrt(), [(2, 3)]),
    "logical_not": (lambda x: (x > 0).logical_not(), [(2, 3)]),
    "equal": (lambda x, y: (x.round() == y.round()).half(), [(2, 3), (3,)]),
    "not_equal": (lambda x, y: (x.round() != y.round()).half(), [(2, 3), (3,)]),
    "greater": (lambda x, y: (x > y).half(), [(2, 3), (3,)]),
    "greater_equal": (lambda x, y: (x >= y).half(), [(2, 3), (3,)]),
    "less": (lambda x, y: (x < y).half(), [(2, 3), (3,)]),
    "less_equal": (lambda x, y: (x <= y).half(), [(2, 3), (3,)]),
    "add": (lambda x, y: x + y, [(2, 3), (3,)]),
    "sub": (lambda x, y: x - y, [(2, 3), (2, 1)]),
    "mul": (lambda x, y: x * y, [(2, 3), (3,)]),
    "real_div": (lambda x, y: x / y.exp(), [(2, 3), (3,)]),
    "maximum": (af.maximum, [(2, 3), (2, 3)]),
    "minimum": (af.minimum, [(2, 3), (2, 3)]),
    "pow": (lambda x, y: x.abs() ** y, [(2, 3), (2, 3)]),
    "const": (lambda x: x * 3, [(2, 3)]),
    "reshape": (lambda x: x.reshape(3, 2), [(2, 3)]),
    "expand_dims": (lambda x: x.unsqueeze(0), [(2, 3)]),
    "squeeze": (lambda x: x[:, :1].squeeze(1), [(2, 3)]),
    "transpose": (lambda x: x.permute(2, 0, 1), [(2, 3, 4)]),
    "slice_by_index": (_one_op("slice_by_index", {"x": (4, 6)}, {
        "begin": (1, -1), "end": (4, 0), "stride": (2, -2), "begin_mask": (False, False),
        "end_mask": (False, True), "squeeze_mask": (False, False)}), [(4, 6)]),
    "concat": (lambda x, y: af.cat([x, y, x], dim=1), [(2, 3), (2, 1)]),
    "pad": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), [(2, 3)]),
    "tile": (lambda x: x.repeat(1, 2, 1), [(2, 3, 4)]),
    "split": (lambda x: x.split(2, -1)[1], [(2, 3, 4)]),
    "reduce_mean": (lambda x: x.mean(-1), [(2, 3, 4)]),
    "reduce_sum": (lambda x: x.sum((0, 2)), [(2, 3, 4)]),
    "reduce_max": (lambda x: x.amax(-1), [(2, 3, 4)]),
    "reduce_min": (lambda x: x.amin(1), [(2, 3, 4)]),
    "reduce_argmax": (lambda x: x.argmax(-1), [(2, 3, 4)]),
    "reduce_argmin": (lambda x: x.argmin(1), [(2, 3, 4)]),
    "softmax": (lambda x: x.softmax(1), [(2, 3, 4)]),
    "cast": (lambda x: (x * 4).int(), [(2, 3)]),
    "select": (lambda x, y: af.where(x > 0, x, y), [(2, 3), (2, 3)]),
    "clip": (lambda x: x.clamp(-0.5, 0.5), [(2, 3)]),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), [(2, 3)]),
    "gelu": (lambda x: F.gelu(x) + F.gelu(x, approximate="tanh"), [(2, 3)]),
    "silu": (F.silu, [(2, 3)]),
    "matmul": (lambda x, y: x @ y, [(2, 1, 3, 4), (5, 4, 2)]),
    "linear": (_one_op("linear", {"x": (2, 5, 4)}, consts={"weight": W, "bias": W[:, 0]}),
               [(2, 5, 4)]),
    "identity": (_one_op("identity", {"x": (2, 3)}), [(2, 3)]),
    "layer_norm": (_one_op("layer_norm", {"x": (2, 3, 4)}, {"axes": (-1, -2), "epsilon": 1e-5},
                           {"gamma": W + 1, "beta": W}), [(2, 3, 4)]),
    "conv": (_one_op("conv", {"x": (1, 2, 5, 6)}, {
        "strides": (2, 1), "pad_type": "custom", "pad": (1, 0, 2, 2), "dilations": (1, 2),
        "groups": 1}, {"weight": np.linspace(-1, 1, 36).reshape(3, 2, 2, 3),
                       "bias": W[0, :3]}), [(1, 2, 5, 6)]),
    "softsign": (_one_op("softsign", {"x": (2, 3)}), [(2, 3)]),
}


def test_every_portable_rule_has_a_case():
    from aneforge.mil.pte import KERNELS
    assert sorted(OPS) == sorted(KERNELS)


@pytest.mark.parametrize("op", sorted(OPS))
def test_each_mil_op_runs_on_portable_kernels_like_aneforge(op, tmp_path):
    fn, shapes = OPS[op]
    rng = np.random.default_rng(len(op))
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    if hasattr(fn, "program"):                    # a MIL program
        program, want = fn.program, [fn(*arrays)]
        path = af.export(fn, str(tmp_path / "o.pte"), delegate=False)
    else:
        outs = fn(*[af.tensor(a) for a in arrays])
        program, want = af.program(outs), [outs.numpy()]
        path = af.export(fn, str(tmp_path / "o.pte"), tuple(arrays), delegate=False)
    assert op in program.op_counts()
    got = _run_executorch(path, arrays)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w, np.float32), rtol=1e-2, atol=1e-2)


def test_a_compiled_function_and_tensors_export_too(tmp_path):
    af.manual_seed(0)
    lin = nn.Linear(4, 3)
    step = af.compile(lambda x: F.gelu(lin(x)) * 2)
    x = np.random.randn(2, 4)
    path = af.export(step, str(tmp_path / "c.pte"), (af.tensor(x),), delegate=False)
    (got,) = _run_executorch(path, [x])
    np.testing.assert_allclose(got, step(af.tensor(x)).numpy(), rtol=1e-2, atol=1e-2)
    # tensors: the program computing them, every leaf an input (as for .mlpackage)
    a, b = af.tensor(np.random.randn(3, 5)), af.tensor(np.random.randn(5))
    path = af.export((a * b).sum(-1).exp(), str(tmp_path / "t.pte"), delegate=False)
    (got,) = _run_executorch(path, [a.numpy(), b.numpy()])
    np.testing.assert_allclose(got, (a * b).sum(-1).exp().numpy(), rtol=1e-2)


def _values(plan, kind):
    return [(k, v.val) for k, v in enumerate(plan.values) if type(v.val).__name__ == kind]


def test_round_trip_of_shapes_dtypes_constants_and_memory_plan(tmp_path):
    af.manual_seed(1)
    model, x = _mlp()
    path = af.export(model, str(tmp_path / "m.pte"), (x,), delegate=False)
    program = _read(path)
    plan = program.execution_plan[0]
    (inp,), (out,) = plan.inputs, plan.outputs
    assert list(plan.values[inp].val.sizes) == [2, 8] and int(plan.values[inp].val.scalar_type) == 5
    assert list(plan.values[out].val.sizes) == [2, 4]
    # the constants: the parameters' fp16 values, in the constant segment
    weights = {p.shape: p.detach().numpy().astype(np.float16) for p in model.parameters()}
    consts = [t for _, t in _values(plan, "Tensor") if t.data_buffer_idx > 0]
    assert sorted(tuple(t.sizes) for t in consts) == sorted(weights)
    for t in consts:
        data = bytes(program.constant_buffer[t.data_buffer_idx].storage)
        n = int(np.prod(t.sizes)) * 2
        np.testing.assert_array_equal(np.frombuffer(data[:n], np.float16).reshape(t.sizes),
                                      weights[tuple(t.sizes)])
    size, total = _check_memory_plan(plan)
    assert size < total                                   # places are reused


def _check_memory_plan(plan):
    """Every non-constant tensor has a place in buffer 1, inside its size, and no two tensors
    alive at once overlap (lives read back from the instruction list)."""
    tensors = {k: t for k, t in _values(plan, "Tensor") if t.data_buffer_idx == 0}
    size = plan.non_const_buffer_sizes[1]
    live = {k: [-1, -1] for k in plan.inputs}
    for step, ins in enumerate(plan.chains[0].instructions):
        for k in ins.instr_args.args:
            items = getattr(plan.values[k].val, "items", None)
            for j in (items if type(plan.values[k].val).__name__ == "TensorList" else [k]):
                if j in tensors:
                    live.setdefault(j, [step, step])[1] = step
    for k in plan.outputs:
        live[k][1] = len(plan.chains[0].instructions)
    spans = {}
    for k, t in tensors.items():
        a = t.allocation_info
        assert a is not None and a.memory_id == 1 and a.memory_offset_high == 0
        nbytes = int(np.prod(t.sizes)) * {5: 2, 6: 4, 2: 2, 3: 4, 11: 1, 0: 1, 1: 1}[int(t.scalar_type)]
        assert a.memory_offset_low + nbytes <= size
        spans[k] = (a.memory_offset_low, a.memory_offset_low + nbytes)
    for i in spans:
        for j in spans:
            if i < j and i in live and j in live:
                overlap_time = live[i][0] <= live[j][1] and live[j][0] <= live[i][1]
                overlap_space = spans[i][0] < spans[j][1] and spans[j][0] < spans[i][1]
                assert not (overlap_time and overlap_space), (i, j)
    return size, sum(b - a for a, b in spans.values())


def test_memory_plan_of_a_deeper_net_reuses_places(tmp_path):
    model, x = _conv()
    path = af.export(model, str(tmp_path / "c.pte"), (x,), delegate=False)
    size, total = _check_memory_plan(_read(path).execution_plan[0])
    assert size < total / 2


def _delegated(tmp_path, model, x):
    path = af.export(model, str(tmp_path / "d.pte"), (x,))
    return path, _read(path)


def test_delegated_program_is_one_core_ml_call_with_the_backends_payload(tmp_path):
    from executorch.backends.apple.coreml import executorchcoreml as coreml
    import coremltools as ct
    af.manual_seed(0)
    model, x = _embedding()
    path, program = _delegated(tmp_path, model, x)
    plan = program.execution_plan[0]
    (delegate,) = plan.delegates
    assert delegate.id == "CoreMLBackend"
    assert {s.key: bytes(s.value) for s in delegate.compile_specs}["model_type"] == b"model"
    (ins,) = plan.chains[0].instructions
    assert type(ins.instr_args).__name__ == "DelegateCall"
    assert list(ins.instr_args.args) == list(plan.inputs) + list(plan.outputs)
    # int inputs cross Core ML's interface as int32 (mil/package.py core_ml_boundary)
    assert int(plan.values[plan.inputs[0]].val.scalar_type) == 3
    payload = bytes(program.backend_delegate_data[delegate.processed.index].data)
    assert coreml.unflatten_directory_contents(payload, str(tmp_path))
    out = tmp_path / "lowered_module"         # the root the backend's preprocess flattens
    meta = json.loads((out / "metadata.json").read_text())
    spec = ct.models.MLModel(str(out / "model.mlpackage"), skip_model_load=True).get_spec()
    assert meta["inputNames"] == [i.name for i in spec.description.input]
    assert meta["outputNames"] == [o.name for o in spec.description.output]
    assert meta["identifier"].startswith("executorch_")
    assert spec.specificationVersion == 9
    assert [list(i.type.multiArrayType.shape) for i in spec.description.input] == [[2, 3]]
    # the package inside is the one af.export writes as .mlpackage, file for file (the
    # manifest names its items by random UUIDs: compare what they point at)
    same = af.export(model, str(tmp_path / "same.mlpackage"), (x,))
    mine, same = _files(out / "model.mlpackage"), _files(same)
    manifests = [json.loads(f.pop("Manifest.json")) for f in (mine, same)]
    assert mine == same
    assert [sorted(e["path"] for e in m["itemInfoEntries"].values()) for m in manifests] == \
        [["com.apple.CoreML/model.mlmodel", "com.apple.CoreML/weights"]] * 2
    # the backend's own flattening of those files is as long (its file order is its
    # directory listing's, so offsets, not sizes, may differ)
    assert len(coreml.flatten_directory_contents(str(out))) in range(len(payload) - 8,
                                                                     len(payload) + 9)


def _files(root):
    root = str(root)
    return {os.path.relpath(os.path.join(d, f), root): open(os.path.join(d, f), "rb").read()
            for d, _, files in os.walk(root) for f in files}


def test_delegated_attention_block_parses(tmp_path):
    af.manual_seed(0)
    model, x = _attention()
    _, program = _delegated(tmp_path, model, x)
    plan = program.execution_plan[0]
    assert [d.id for d in plan.delegates] == ["CoreMLBackend"]
    assert [list(plan.values[k].val.sizes) for k in plan.outputs] == [[1, 5, 8]]
    _check_memory_plan(plan)


def test_an_op_without_a_portable_kernel_is_refused_by_name(tmp_path):
    def attend(q):
        return F.scaled_dot_product_attention(q, q, q)
    with pytest.raises(AneforgeError, match="'scaled_dot_product_attention'.*delegate=True"):
        af.export(attend, str(tmp_path / "s.pte"), (np.ones((1, 2, 3)),), delegate=False)
    assert not os.path.exists(tmp_path / "s.pte")


def test_bad_input_gets_clear_errors(tmp_path):
    x = np.ones((2, 3))
    with pytest.raises(AneforgeError, match="static shapes only"):
        af.export(nn.ReLU(), str(tmp_path / "r.pte"), (x,), dynamic_shapes={"x": {0: "batch"}})
    with pytest.raises(AneforgeError, match="needs its example inputs"):
        af.export(nn.ReLU(), str(tmp_path / "r.pte"))
    with pytest.raises(AneforgeError, match=r"'\*.pte'"):
        af.export(nn.ReLU(), str(tmp_path / "r.onnx"), (x,))
    with pytest.raises(AneforgeError, match="do not reach the outputs"):
        af.export(lambda a, b: a.exp(), str(tmp_path / "r.pte"), (x, x))
    with pytest.raises(AneforgeError, match="computed on the host"):
        af.export(lambda a: a, str(tmp_path / "r.pte"), (x,))


def test_a_missing_flatbuffers_says_which_extra_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "flatbuffers", None)
    with pytest.raises(AneforgeError, match=r'pip install -e "\.\[pte\]"'):
        af.export(nn.ReLU(), str(tmp_path / "r.pte"), (np.ones(3),), delegate=False)


def test_import_aneforge_imports_neither_executorch_nor_flatbuffers():
    code = ("import sys, aneforge; print([m for m in ('executorch', 'flatbuffers') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_segments_chain_by_value_names_host_then_core_ml(tmp_path):
    """The writer over a list of segments (what a multi-segment plan hands it): portable
    kernels, then a Core ML delegate reading the host segment's output by name."""
    from aneforge.mil.pte import Segment, to_pte_bytes
    host = _one_op("relu", {"x": (2, 3)}).program
    host.main.block.outputs[0].name = "h"
    ane = _one_op("exp", {"x": (2, 3)}).program
    ane.main.inputs[0].name = "h"
    program = _reader()(to_pte_bytes([Segment(None, host), Segment("CoreMLBackend", ane)])).program
    plan = program.execution_plan[0]
    kernel, delegate = [i.instr_args for i in plan.chains[0].instructions]
    assert plan.operators[kernel.op_index].name == "aten::relu"
    assert list(delegate.args) == [kernel.args[1], plan.outputs[0]]      # relu's out feeds it
    assert [d.id for d in plan.delegates] == ["CoreMLBackend"]
    _check_memory_plan(plan)
