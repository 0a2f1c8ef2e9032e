"""`.mlpackage` export (aneforge/mil/package.py), checked by coremltools on Linux: the package
loads with skip_model_load, its program converts back to pymil, and the model interface
describes every input and output by name, shape and dtype."""
from __future__ import annotations

import os

import numpy as np
import pytest

import aneforge as af
from optable import CASES
from test_coreml_accepts import forward

IOS18 = 9


def training_step_program():
    """The one program of an nn.Linear + AdamW training step (parameters and state as I/O)."""
    import aneforge.nn as nn
    import aneforge.nn.functional as F
    from conftest import step_program
    return step_program(nn.Linear(8, 4), F.mse_loss, (af.randn(5, 8), af.randn(5, 4)))


def exported(ct, obj, tmp_path, name="model.mlpackage"):
    """Export, load back with coremltools (no Core ML runtime on Linux), convert to pymil."""
    from coremltools.converters.mil.frontend.milproto.load import load
    path = af.export(obj, str(tmp_path / name))
    model = ct.models.MLModel(path, skip_model_load=True)
    spec = model.get_spec()
    pymil = load(spec, specification_version=IOS18, file_weights_dir=model.weights_dir or "")
    return spec, pymil


def described(spec) -> tuple[list, list]:
    """(name, shape, dtype) of the model interface's inputs and outputs."""
    from coremltools.proto import FeatureTypes_pb2 as F
    names = {v: k for k, v in F.ArrayFeatureType.ArrayDataType.items()}

    def one(f):
        a = f.type.multiArrayType
        return f.name, tuple(a.shape), names[a.dataType]
    return [one(f) for f in spec.description.input], [one(f) for f in spec.description.output]


def pymil_io(pymil) -> tuple[list, list]:
    from coremltools.converters.mil.mil import types
    main = pymil.functions["main"]

    def one(v):
        return v.name, tuple(int(d) for d in v.shape), types.builtin_to_string(v.dtype)
    return [one(v) for v in main.inputs.values()], [one(v) for v in main.outputs]


CORE_ML = {"fp16": "FLOAT16", "int8": "INT8", "uint8": "INT32", "int16": "INT32",
           "uint16": "INT32"}


def expected_interface(program) -> tuple[list, list]:
    def one(v):
        return v.name, v.shape, CORE_ML[v.dtype.name]
    return [one(v) for v in program.main.inputs], [one(v) for v in program.main.outputs]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_forward_program_exports(ct, case, tmp_path):
    p = forward(case)
    if p is None:
        return
    spec, pymil = exported(ct, p, tmp_path)
    assert spec.specificationVersion == IOS18
    assert described(spec) == expected_interface(p)
    ins, outs = pymil_io(pymil)
    assert [(n, s) for n, s, _ in ins + outs] == [(n, s) for n, s, _ in sum(described(spec), [])]
    assert {d for _, _, d in ins + outs} <= {"fp16", "int8", "int32"}


def test_training_step_exports(ct, tmp_path):
    p = training_step_program()
    spec, pymil = exported(ct, p, tmp_path)
    ins, outs = described(spec)
    assert len(ins) >= 4 and len(outs) >= 4         # weight, bias, their moments, the step
    assert (ins, outs) == expected_interface(p)
    params = {(4, 8), (4,)}                          # nn.Linear(8, 4): in and out
    assert params <= {s for _, s, _ in ins} and params <= {s for _, s, _ in outs}
    assert len(pymil.functions["main"].operations) > 30


def test_integer_io_is_int32_at_the_core_ml_boundary(ct, tmp_path):
    x = af.tensor(np.arange(12, dtype=np.int32).reshape(3, 4))
    y = (x.argmax(1), x > 5)
    p = af.program(*y)
    spec, pymil = exported(ct, y, tmp_path)
    ins, outs = described(spec)
    assert [d for _, _, d in ins + outs] == ["INT32"] * 3
    assert [n for n, _, _ in ins + outs] == [v.name for v in p.main.inputs + p.main.outputs]
    types = [t for _, _, t in sum(pymil_io(pymil), [])]
    assert types == ["int32"] * 3
    casts = [op for op in pymil.functions["main"].operations if op.op_type == "cast"]
    assert len(casts) >= 3


def test_load_mil_functions_and_tensors_export(ct, tmp_path):
    fn = af.load_mil('''program(1.3) {
  func main<ios18>(tensor<fp16, [2, 16]> x) {
    tensor<fp16, [16, 3]> w = const(val = tensor<fp16, [16, 3]>(''' +
                     str(np.arange(48).reshape(16, 3).tolist()) + '''))[name = string("w")];
    tensor<fp16, [2, 3]> y = matmul(x = x, y = w)[name = string("y")];
  } -> (y);
}''')
    spec, pymil = exported(ct, fn, tmp_path)
    assert described(spec) == ([("x", (2, 16), "FLOAT16")], [("y", (2, 3), "FLOAT16")])
    weights = tmp_path / "model.mlpackage" / "Data" / "com.apple.CoreML" / "weights" / "weight.bin"
    assert weights.stat().st_size > 48 * 2                   # w lives in the weight file
    (w,) = [op.outputs[0].val for op in pymil.functions["main"].operations
            if op.op_type == "const" and op.outputs[0].shape == (16, 3)]
    assert w.tolist() == np.arange(48).reshape(16, 3).tolist()
    a = af.ones(2, 3)
    spec, _ = exported(ct, (a + 1, a * 2), tmp_path, "two.mlpackage")
    assert len(spec.description.output) == 2


def test_export_says_what_it_needs(monkeypatch, tmp_path):
    import builtins
    with pytest.raises(af.AneforgeError, match=r"\*\.mlpackage"):
        af.export(af.ones(2).exp(), str(tmp_path / "model.mlmodel"))
    with pytest.raises(af.AneforgeError, match="takes a Program"):
        af.export("not a program", str(tmp_path / "m.mlpackage"))
    real = builtins.__import__

    def no_coremltools(name, *args, **kw):
        if name.startswith("coremltools"):
            raise ImportError("No module named 'coremltools'")
        return real(name, *args, **kw)
    monkeypatch.setattr(builtins, "__import__", no_coremltools)
    with pytest.raises(af.AneforgeError, match=r'needs coremltools: pip install -e "\.\[coreml\]" in a clone'):
        af.export(af.ones(2).exp(), str(tmp_path / "m.mlpackage"))


def test_export_refuses_a_compile_wall(tmp_path):
    x = af.randn(4, 8)
    with pytest.raises(af.CompileWallError):
        af.export(x.sum(1) * 0.0, str(tmp_path / "m.mlpackage"))


def test_a_failed_export_keeps_the_previous_package(ct, tmp_path, monkeypatch):
    path = str(tmp_path / "m.mlpackage")
    af.export(af.ones(2, 3).relu() * 2, path)
    before = sorted(p.name for p in (tmp_path / "m.mlpackage").rglob("*"))

    def broken_save(self, where):
        os.makedirs(where)
        raise OSError("disk full")
    monkeypatch.setattr(ct.models.MLModel, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        af.export(af.ones(2, 3) * 3, path)
    assert sorted(p.name for p in (tmp_path / "m.mlpackage").rglob("*")) == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.mlpackage"]      # nothing left behind
