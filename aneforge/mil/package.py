"""`.mlpackage` export: a Program as a Core ML model package (iOS18, ML Program).

The program itself is our MILSpec protobuf (proto.py), with tensors of >= 10 elements in
the package's weight file. coremltools (the optional extra `coreml`) supplies only
the `Model` message and the package layout:

    model.mlpackage/
        Manifest.json
        Data/com.apple.CoreML/model.mlmodel      Model{specificationVersion 9, description,
                                                       mlProgram = our MILSpec Program}
        Data/com.apple.CoreML/weights/weight.bin  referenced as @model_path/weights/weight.bin

Core ML's model interface describes arrays as FLOAT16, FLOAT32, INT32 or INT8 only
(FeatureTypes.proto ArrayDataType), so program inputs/outputs of dtype uint8, int16 or
uint16 (aneforge's transport of bool and int32 values) are declared INT32 at the Core ML
boundary and cast inside the exported program.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from .. import dtypes
from ..errors import AneforgeError
from ..ir import Block, Function, Operation, Program, TensorType, Var
from ..ir.dag import fresh_name
from ..ops import validate

SPECIFICATION_VERSION = 9          # iOS18 / macOS15: MIL opset CoreML8
CORE_ML_ARRAY_TYPES = {"fp16": "FLOAT16", "fp32": "FLOAT32", "int32": "INT32", "int8": "INT8"}
WIDENED = dtypes.int32             # Core ML's type for the I/O it cannot describe


def export(obj, path: str) -> str:
    """Write `obj` as a Core ML `.mlpackage` at `path` (an existing one is replaced only once
    the new one is written); returns the path.

    `obj` is a Program or a function from `af.load_mil` (`af.export` also takes a tensor or
    tuple of tensors: the program that computes them). Needs coremltools: `pip install
    -e ".[coreml]"` in a clone of aneforge.

    >>> import aneforge as af, coremltools as ct, tempfile, os
    >>> path = af.export(af.ones(2, 3).relu() * 2, os.path.join(tempfile.mkdtemp(), "m.mlpackage"))
    >>> spec = ct.models.MLModel(path, skip_model_load=True).get_spec()
    >>> spec.specificationVersion, [i.name for i in spec.description.input]
    (9, ['x_0'])
    """
    if not str(path).endswith(".mlpackage"):
        raise AneforgeError(f"export writes a Core ML package: name it '*.mlpackage', not {path!r}")
    write_package(program_of(obj), path)
    return str(path)


def write_package(program: Program, path: str) -> None:
    """`program` as a Core ML package at `path`: checked (validation, compile walls), its I/O
    made describable (`core_ml_boundary`)."""
    ct = _coremltools()
    program = validate(program)
    from ..ops.walls import check_walls
    check_walls(program)
    program = core_ml_boundary(program)
    with tempfile.TemporaryDirectory() as tmp:
        spec = model_spec(program, os.path.join(tmp, "weights"))
        model = ct.models.MLModel(spec, weights_dir=os.path.join(tmp, "weights"),
                                  skip_model_load=True)
        _replace(path, model.save)


def _replace(path, write) -> None:
    """write(p) a new package beside `path`, then swap it in: a failed write leaves the old
    package as it was (and no half-written one)."""
    path = os.path.abspath(str(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".aneforge-export-", dir=parent)
    try:
        new = os.path.join(staging, os.path.basename(path))
        write(new)
        old = None
        if os.path.lexists(path):
            old = os.path.join(staging, "previous")
            os.rename(path, old)
        try:
            os.rename(new, path)
        except OSError:
            if old is not None:
                os.rename(old, path)
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _coremltools():
    import logging
    try:
        logging.getLogger("coremltools").setLevel(logging.ERROR)
        import coremltools
    except ImportError as e:
        raise AneforgeError(f'Core ML needs coremltools: pip install -e ".[coreml]" in a clone of aneforge '
                            f"({e})") from None
    return coremltools


def program_of(obj) -> Program:
    if isinstance(obj, Program):
        return obj
    if isinstance(getattr(obj, "program", None), Program):     # a function from af.load_mil
        return obj.program
    raise AneforgeError(f"export takes a Program, a tensor or tuple of tensors, or a function "
                        f"from af.load_mil; got {type(obj).__name__}")


def model_spec(program: Program, weights_dir: str):
    """The Core ML `Model` message: our MILSpec program, its weights in `weights_dir`."""
    from coremltools.proto import MIL_pb2, Model_pb2

    from .proto import to_proto_bytes
    spec = Model_pb2.Model(specificationVersion=SPECIFICATION_VERSION)
    os.makedirs(weights_dir, exist_ok=True)
    spec.mlProgram.CopyFrom(MIL_pb2.Program.FromString(to_proto_bytes(program, weights_dir)))
    spec.description.input.extend(_feature(v) for v in program.main.inputs)
    spec.description.output.extend(_feature(v) for v in program.main.outputs)
    spec.description.metadata.userDefined["com.aneforge.signature"] = program.signature()
    return spec


def _feature(v: Var):
    from coremltools.proto import FeatureTypes_pb2, Model_pb2
    if v.dtype.name not in CORE_ML_ARRAY_TYPES:
        raise AneforgeError(f"{v.name!r} is {v.dtype.name}; Core ML's model interface holds "
                            f"{', '.join(CORE_ML_ARRAY_TYPES)} arrays")
    if not v.shape:
        raise AneforgeError(f"{v.name!r} is a scalar; Core ML passes arrays of rank >= 1 in and "
                            f"out: reshape it to [1] inside the program")
    f = Model_pb2.FeatureDescription(name=v.name)
    f.type.multiArrayType.shape.extend(v.shape)
    f.type.multiArrayType.dataType = getattr(FeatureTypes_pb2.ArrayFeatureType,
                                             CORE_ML_ARRAY_TYPES[v.dtype.name])
    return f


def core_ml_boundary(program: Program) -> Program:
    """A copy of `program` whose I/O Core ML can describe: each uint8/int16/uint16 input or
    output keeps its name but is int32 at the boundary, cast to (from) its dtype inside."""
    f = program.main
    if all(v.dtype.name in CORE_ML_ARRAY_TYPES for v in f.inputs + f.outputs):
        return program
    names = {v.name for v in f.block.vars()}
    new: dict[int, Var] = {}
    ops: list[Operation] = []
    inputs = [_widen_input(v, new, ops, names) for v in f.inputs]
    for op in f.block.operations:
        outs = [Var(v.name, v.type) for v in op.outputs]
        new.update((id(v), n) for v, n in zip(op.outputs, outs))
        ins = {k: tuple(new[id(u)] for u in v) if isinstance(v, tuple) else new[id(v)]
               for k, v in op.inputs.items()}
        ops.append(Operation(op.type, ins, dict(op.attrs), outs, op.name))
    outputs = [_widen_output(new[id(v)], ops, names) for v in f.outputs]
    main = Function(Block(inputs, ops, outputs), f.opset)
    return Program({**program.functions, "main": main}, program.version, program.build_info)


def _widen_input(v: Var, new: dict, ops: list, names: set) -> Var:
    if v.dtype.name in CORE_ML_ARRAY_TYPES:
        new[id(v)] = Var(v.name, v.type)
        return new[id(v)]
    wide = Var(v.name, TensorType(v.shape, WIDENED))
    inner = Var(fresh_name(f"{v.name}_{v.dtype.name}", names), v.type)
    ops.append(Operation("cast", {"x": wide}, {"dtype": v.dtype.name}, [inner], inner.name))
    new[id(v)] = inner
    return wide


def _widen_output(v: Var, ops: list, names: set) -> Var:
    if v.dtype.name in CORE_ML_ARRAY_TYPES:
        return v
    if v.op is None:                    # an input returned as is: the output needs a name
        name = fresh_name(f"{v.name}_out", names)
    else:
        name, v.name = v.name, fresh_name(f"{v.name}_{v.dtype.name}", names)
    for op in ops:                      # the op producing v is named after it: keep them apart
        if op.name == name and v in op.outputs:
            op.name = v.name
    wide = Var(name, TensorType(v.shape, WIDENED))
    ops.append(Operation("cast", {"x": v}, {"dtype": WIDENED.name}, [wide], name))
    return wide
