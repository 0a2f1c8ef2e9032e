"""MILSpec protobuf: an aneforge Program to `CoreML.Specification.MILSpec.Program` bytes and back.

The message classes are built at run time, in a private descriptor pool, from the field numbers
of Apple's MIL.proto (coremltools' `mlmodel/format/MIL.proto`) — no generated `_pb2` module, no coremltools import.
Only the messages a MIL program needs are declared; a reader meets anything else as unknown fields.

Encoding follows coremltools' own writer (converters/mil/backend/mil/load.py and helper.py):

    program  version 1, attributes["buildInfo"] = dict<string, string>
    function main: inputs (NamedValueType), opset "CoreML8" (= ios18), block_specializations
    op       type; tensor arguments bound by name (a variadic one binds several names, in order);
             compile-time attributes (OpDef.attrs) bound as immediate values; attribute "name";
             a const's `val` is the attribute "val", as coremltools stores it
    values   fp16, int8, uint8 as little-endian bytes; int16, uint16, int32 as ints; fp32 as floats;
             bool as bools; strings as strings; rank-0 tensors for scalars

With a `weights_dir`, const tensors of >= 10 elements whose dtype the weight file holds go to
`weights_dir/weight.bin` in Core ML's weight-file format, referenced as
`@model_path/weights/weight.bin` + offset; without one everything is inlined. The threshold is
coremltools' own (`should_use_weight_file`, iOS18 dtypes), so Core ML gets the split it is
tested with; compile-time arguments (axes, perms, epsilons) are never consts here, so in
practice only weights move out of the proto.
"""
from __future__ import annotations

import functools
import os
import struct

import numpy as np

from .. import dtypes
from ..errors import AneforgeError
from ..ir import Block, Function, Operation, Program, TensorType, Var
from ..ir.dag import fresh_name
from ..ops import REGISTRY, validate
from ..ops.registry import apply_to_vars
from ..ops.walls import check_walls
from .checks import io_problem, name_problem, raise_problem, shape_problem

PACKAGE = "CoreML.Specification.MILSpec"

# The subset of MIL.proto aneforge reads and writes: `message  field=number:type[|oneof] ...`,
# an indented line continuing the message above. [T] is repeated, map<T> is map<string, T>,
# A.B is message B nested in A.
SCHEMA = """
Program         version=1:int64 functions=2:map<Function> docString=3:string
                attributes=4:map<Value>
Function        inputs=1:[NamedValueType] opset=2:string block_specializations=3:map<Block>
                attributes=4:map<Value>
Block           inputs=1:[NamedValueType] outputs=2:[string] operations=3:[Operation]
                attributes=4:map<Value>
Argument        arguments=1:[Argument.Binding]
Argument.Binding  name=1:string|binding value=2:Value|binding
Operation       type=1:string inputs=2:map<Argument> outputs=3:[NamedValueType] blocks=4:[Block]
                attributes=5:map<Value>
NamedValueType  name=1:string type=2:ValueType
ValueType       tensorType=1:TensorType|type dictionaryType=4:DictionaryType|type
TensorType      dataType=1:DataType rank=2:int64 dimensions=3:[Dimension] attributes=4:map<Value>
DictionaryType  keyType=1:ValueType valueType=2:ValueType
Dimension       constant=1:Dimension.ConstantDimension|dimension
                unknown=2:Dimension.UnknownDimension|dimension
Dimension.ConstantDimension  size=1:uint64
Dimension.UnknownDimension   variadic=1:bool
Value           docString=1:string type=2:ValueType immediateValue=3:Value.ImmediateValue|value
                blobFileValue=5:Value.BlobFileValue|value
Value.ImmediateValue  tensor=1:TensorValue|value dictionary=4:DictionaryValue|value
Value.BlobFileValue   fileName=1:string offset=2:uint64
TensorValue     floats=1:TensorValue.RepeatedFloats|value ints=2:TensorValue.RepeatedInts|value
                bools=3:TensorValue.RepeatedBools|value strings=4:TensorValue.RepeatedStrings|value
                longInts=5:TensorValue.RepeatedLongInts|value
                doubles=6:TensorValue.RepeatedDoubles|value bytes=7:TensorValue.RepeatedBytes|value
TensorValue.RepeatedFloats    values=1:[float]
TensorValue.RepeatedDoubles   values=1:[double]
TensorValue.RepeatedInts      values=1:[int32]
TensorValue.RepeatedLongInts  values=1:[int64]
TensorValue.RepeatedBools     values=1:[bool]
TensorValue.RepeatedStrings   values=1:[string]
TensorValue.RepeatedBytes     values=1:bytes
DictionaryValue               values=1:[DictionaryValue.KeyValuePair]
DictionaryValue.KeyValuePair  key=1:Value value=2:Value
"""
DATA_TYPES = {"UNUSED_TYPE": 0, "BOOL": 1, "STRING": 2, "FLOAT16": 10, "FLOAT32": 11,
              "FLOAT64": 12, "BFLOAT16": 13, "INT8": 21, "INT16": 22, "INT32": 23, "INT64": 24,
              "UINT8": 31, "UINT16": 32, "UINT32": 33, "UINT64": 34}

# --------------------------------------------------------------------------- schema -> classes


def file_descriptor():
    """SCHEMA as a FileDescriptorProto (proto3, so repeated scalars are packed as in MIL.proto)."""
    from google.protobuf import descriptor_pb2 as d
    fdp = d.FileDescriptorProto(name="MIL.proto", package=PACKAGE, syntax="proto3")
    fdp.enum_type.add(name="DataType").value.extend(
        d.EnumValueDescriptorProto(name=k, number=n) for k, n in DATA_TYPES.items())
    messages = {}
    for path, fields in schema_messages().items():
        parent, _, name = path.rpartition(".")
        msg = messages[path] = (messages[parent].nested_type if parent else fdp.message_type).add(name=name)
        for f in fields:
            _add_field(msg, path, f)
    return fdp


def schema_messages() -> dict[str, list[str]]:
    """SCHEMA as {message path: field specs}, continuation lines joined."""
    out: dict[str, list[str]] = {}
    for line in SCHEMA.strip().splitlines():
        words = line.split()
        if line[0].isspace():
            out[path] += words
        else:
            path = words[0]
            out[path] = words[1:]
    return out


def _add_field(msg, path: str, spec: str) -> None:
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F
    name, _, rest = spec.partition("=")
    number, _, rest = rest.partition(":")
    type_, _, oneof = rest.partition("|")
    label = F.LABEL_REPEATED if type_.startswith(("[", "map<")) else F.LABEL_OPTIONAL
    if type_.startswith("map<"):         # a map is a repeated nested XxxEntry{key=1, value=2}
        entry = msg.nested_type.add(name=_camel(name) + "Entry")
        entry.options.map_entry = True
        _add_field(entry, f"{path}.{entry.name}", "key=1:string")
        _add_field(entry, f"{path}.{entry.name}", f"value=2:{type_[4:-1]}")
        type_ = f"{path}.{entry.name}"
    field = msg.field.add(name=name, number=int(number), label=label)
    _set_type(field, type_.strip("[]"))
    if oneof:
        names = [o.name for o in msg.oneof_decl]
        if oneof not in names:
            msg.oneof_decl.add(name=oneof)
        field.oneof_index = [o.name for o in msg.oneof_decl].index(oneof)


_SCALAR_FIELDS = {"int64": "TYPE_INT64", "uint64": "TYPE_UINT64", "int32": "TYPE_INT32",
                  "float": "TYPE_FLOAT", "double": "TYPE_DOUBLE", "bool": "TYPE_BOOL",
                  "string": "TYPE_STRING", "bytes": "TYPE_BYTES"}


def _set_type(field, type_: str) -> None:
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F
    if type_ in _SCALAR_FIELDS:
        field.type = getattr(F, _SCALAR_FIELDS[type_])
    else:
        field.type = F.TYPE_ENUM if type_ == "DataType" else F.TYPE_MESSAGE
        field.type_name = f".{PACKAGE}.{type_}"


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


@functools.lru_cache(maxsize=None)
def _pool():
    from google.protobuf import descriptor_pool
    pool = descriptor_pool.DescriptorPool()      # private: never clashes with coremltools' MIL_pb2
    pool.AddSerializedFile(file_descriptor().SerializeToString())
    return pool


@functools.lru_cache(maxsize=None)
def message_class(name: str):
    """The runtime class of MILSpec message `name` ("Program", "Argument.Binding", ...)."""
    from google.protobuf import message_factory
    try:
        desc = _pool().FindMessageTypeByName(f"{PACKAGE}.{name}")
    except KeyError:
        raise AneforgeError(f"no MILSpec message {name!r} in aneforge's schema; known: "
                            f"{list(schema_messages())}") from None
    return message_factory.GetMessageClass(desc)


# --------------------------------------------------------------------------- values

# numpy dtype name -> (MIL DataType, the TensorValue field holding the elements), as
# coremltools' helper._tensor_field_by_type: fp16 and the 8-bit types as raw bytes.
ELEMENTS = {
    "float16": ("FLOAT16", "bytes"), "float32": ("FLOAT32", "floats"),
    "float64": ("FLOAT64", "doubles"), "int8": ("INT8", "bytes"), "uint8": ("UINT8", "bytes"),
    "int16": ("INT16", "ints"), "uint16": ("UINT16", "ints"), "int32": ("INT32", "ints"),
    "uint32": ("UINT32", "bytes"), "int64": ("INT64", "longInts"), "bool": ("BOOL", "bools"),
    "str": ("STRING", "strings"),
}
_NP_OF_CODE = {DATA_TYPES[t]: k for k, (t, _) in ELEMENTS.items()}
_IR_DTYPE = {d.np_name: d for d in dtypes.ALL}


def _key(a: np.ndarray) -> str:
    key = "str" if a.dtype.kind in "US" else a.dtype.name
    if key not in ELEMENTS:
        raise AneforgeError(f"a MIL value cannot hold numpy dtype {a.dtype}; use one of "
                            f"{sorted(ELEMENTS)}")
    return key


def _little(key: str) -> np.dtype:
    return np.dtype(key).newbyteorder("<")


def _write_type(vt, shape, key: str) -> None:
    t = vt.tensorType
    t.dataType, t.rank = DATA_TYPES[ELEMENTS[key][0]], len(shape)
    for n in shape:
        t.dimensions.add().constant.size = int(n)


def _read_type(vt) -> tuple[tuple[int, ...], str]:
    if vt.WhichOneof("type") != "tensorType":
        raise AneforgeError(f"aneforge reads tensor types only, got {vt.WhichOneof('type')}")
    t = vt.tensorType
    if any(d.WhichOneof("dimension") != "constant" for d in t.dimensions):
        raise AneforgeError("aneforge programs have static shapes; found an unknown dimension")
    if t.rank != len(t.dimensions):
        raise AneforgeError(f"a tensor type of rank {t.rank} lists {len(t.dimensions)} "
                            f"dimensions; they must agree")
    if t.dataType not in _NP_OF_CODE:
        raise AneforgeError(f"MIL DataType {t.dataType} has no numpy counterpart in aneforge")
    return tuple(d.constant.size for d in t.dimensions), _NP_OF_CODE[t.dataType]


def _value(a: np.ndarray, weights: "WeightFile | None" = None):
    """A MILSpec Value for array `a`: inline, or in the weight file when it is large enough."""
    key = _key(a)
    v = message_class("Value")()
    _write_type(v.type, a.shape, key)
    if weights is not None and weights.takes(a, key):
        v.blobFileValue.fileName = WEIGHT_PATH
        v.blobFileValue.offset = weights.add(a, key)
        return v
    field = getattr(v.immediateValue.tensor, ELEMENTS[key][1])
    field.SetInParent()                  # an empty tensor still names its field
    if ELEMENTS[key][1] == "bytes":
        field.values = a.astype(_little(key)).tobytes()
    elif a.size:
        field.values.extend(a.ravel().tolist())
    return v


def _array(v, weights: "WeightReader | None") -> np.ndarray:
    shape, key = _read_type(v.type)
    which = v.WhichOneof("value")
    if which == "blobFileValue":
        if weights is None:
            raise AneforgeError(f"value stored in {v.blobFileValue.fileName}: pass weights_dir "
                                f"(the directory holding that weight file) to from_proto")
        return weights.read(v.blobFileValue, key, shape)
    if which != "immediateValue" or v.immediateValue.WhichOneof("value") != "tensor":
        raise AneforgeError(f"aneforge reads tensor values only, got {which}")
    tv = v.immediateValue.tensor
    field = tv.WhichOneof("value")
    if field and field != ELEMENTS[key][1]:
        raise AneforgeError(f"a value typed {key}{list(shape)} holds its elements in the {field} "
                            f"field; MIL keeps {key} elements in {ELEMENTS[key][1]}")
    data = getattr(tv, field).values if field else []
    size = int(np.prod(shape, dtype=object))
    itemsize = np.dtype(key).itemsize if field == "bytes" else 1
    if len(data) != size * itemsize:
        raise AneforgeError(f"a value typed {key}{list(shape)} holds {len(data) // itemsize} "
                            f"elements in its {field or 'empty'} field, not {size}")
    if field == "bytes":
        return np.frombuffer(data, _little(key)).astype(key).reshape(shape)
    return np.array(list(data), dtype=str if key == "str" else key).reshape(shape)


def _string(s: str):
    return _value(np.array(s))


def _read_string(v, where: str) -> str:
    """A Value that must hold one string (an op's name, a buildInfo key or value)."""
    return _attr("str", _array(v, None), where)


# --------------------------------------------------------------------------- weight file

WEIGHT_FILE = "weight.bin"
WEIGHT_PATH = f"@model_path/weights/{WEIGHT_FILE}"
BLOB_MIN_ELEMENTS = 10          # coremltools `should_use_weight_file`
BLOB_ALIGN = 64
BLOB_SENTINEL = 0xDEADBEEF
BLOB_VERSION = 2
# numpy dtype name -> BlobDataType (MILBlob/Blob/BlobDataType.hpp); int16..uint32 need iOS18.
BLOB_DTYPES = {"float16": 1, "float32": 2, "uint8": 3, "int8": 4, "int16": 6, "uint16": 7,
               "int32": 14, "uint32": 15}
_HEADER = struct.Struct("<II56x")     # storage_header: count, version, 7 reserved u64
_META = struct.Struct("<IIQQ40x")     # blob_metadata: sentinel, dtype, size, data offset, 5 u64


class WeightFile:
    """Core ML's weight file, "blob storage v2" (MILBlob/Blob/StorageFormat.hpp): a 64-byte
    header (blob count, version 2); then per blob, at a 64-byte aligned offset, a 64-byte
    metadata record (sentinel 0xDEADBEEF, dtype, size in bytes, data offset) and the data.
    A BlobFileValue's offset points at the metadata record."""

    def __init__(self):
        self.chunks: list[bytes] = []
        self.size, self.count = _HEADER.size, 0

    def takes(self, a: np.ndarray, key: str) -> bool:
        return a.size >= BLOB_MIN_ELEMENTS and key in BLOB_DTYPES

    def add(self, a: np.ndarray, key: str) -> int:
        pad = -self.size % BLOB_ALIGN
        meta_at = self.size + pad
        data = a.astype(_little(key)).tobytes()
        meta = _META.pack(BLOB_SENTINEL, BLOB_DTYPES[key], len(data), meta_at + _META.size)
        self.chunks += [bytes(pad), meta, data]
        self.size, self.count = meta_at + _META.size + len(data), self.count + 1
        return meta_at

    def to_bytes(self) -> bytes:
        return _HEADER.pack(self.count, BLOB_VERSION) + b"".join(self.chunks)


class WeightReader:
    """Reads blobs from the weight files of a `weights_dir`, each file read once. Every read is
    bounds-checked: a short, damaged or missing file is an AneforgeError naming the file, the
    offset and what is wrong (both readers, protobuf and MIL text BLOBFILE, come through here)."""

    def __init__(self, weights_dir: str):
        self.dir, self.files = weights_dir, {}

    def _file(self, name: str) -> bytes:
        path = os.path.join(self.dir, name.split("/")[-1])     # as coremltools resolves it
        if path not in self.files:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise AneforgeError(f"cannot read the weight file {name!r} ({path}): "
                                    f"{e.strerror or e}") from None
            if len(data) < _HEADER.size:
                raise AneforgeError(f"{path} has {len(data)} bytes, fewer than the {_HEADER.size}"
                                    f"-byte header of a Core ML weight file: it is truncated")
            _, version = _HEADER.unpack_from(data)
            if version != BLOB_VERSION:
                raise AneforgeError(f"{path} is weight-file version {version}; aneforge reads "
                                    f"version {BLOB_VERSION} (Core ML, iOS15 on)")
            self.files[path] = data
        return self.files[path]

    def read(self, blob, key: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        """The blob at `blob.offset` of `blob.fileName` as a `key` array (of `shape`, checked)."""
        if key not in BLOB_DTYPES:
            raise AneforgeError(f"a weight file holds {', '.join(BLOB_DTYPES)} blobs, not {key}")
        data, offset = self._file(blob.fileName), blob.offset
        if not isinstance(offset, int) or not 0 <= offset <= len(data) - _META.size:
            raise AneforgeError(f"{blob.fileName}: offset {offset} is not the start of a blob "
                                f"record in its {len(data)} bytes")
        sentinel, code, size, at = _META.unpack_from(data, offset)
        if sentinel != BLOB_SENTINEL or BLOB_DTYPES[key] != code:
            raise AneforgeError(f"{blob.fileName} at offset {offset}: no {key} blob there "
                                f"(sentinel {sentinel:#x}, dtype code {code})")
        itemsize = np.dtype(key).itemsize
        if at + size > len(data) or size % itemsize:
            raise AneforgeError(f"{blob.fileName} at offset {offset}: a {size}-byte blob at "
                                f"{at} does not fit the file's {len(data)} bytes")
        count = size // itemsize
        if shape is not None and count != int(np.prod(shape, dtype=object)):
            raise AneforgeError(f"{blob.fileName} at offset {offset}: the blob holds {count} "
                                f"{key} elements; a value of shape {list(shape)} needs "
                                f"{int(np.prod(shape, dtype=object))}")
        a = np.frombuffer(data, _little(key), count, at).astype(key)
        return a if shape is None else a.reshape(shape)


# --------------------------------------------------------------------------- attributes

# Attr.kind -> (to an array, back to the Python value ops use). "scalar" has the dtype of the
# op's first input, so MIL can type it (`epsilon: const T`).
ATTR_KINDS = {
    "int": (lambda v, dt: np.array(v, np.int32), lambda a: int(a)),
    "ints": (lambda v, dt: np.array(v, np.int32).reshape(-1), lambda a: tuple(map(int, a.ravel()))),
    "bool": (lambda v, dt: np.array(v, bool), lambda a: bool(a)),
    "bools": (lambda v, dt: np.array(v, bool).reshape(-1), lambda a: tuple(map(bool, a.ravel()))),
    "str": (lambda v, dt: np.array(str(v)), lambda a: str(a.item())),
    "dtype": (lambda v, dt: np.array(str(v)), lambda a: str(a.item())),
    "scalar": (lambda v, dt: np.array(v, dt), lambda a: a.item()),
    "value": (lambda v, dt: np.asarray(v), lambda a: a),
}
# Attr.kind -> does an array read from a program hold a value of that kind (checked before the
# conversion above, so ops only ever see the Python types they expect).
ATTR_FITS = {
    "int": lambda a: a.ndim == 0 and a.dtype.kind in "iu",
    "ints": lambda a: a.ndim == 1 and a.dtype.kind in "iu",
    "bool": lambda a: a.ndim == 0 and a.dtype.kind == "b",
    "bools": lambda a: a.ndim == 1 and a.dtype.kind == "b",
    "str": lambda a: a.ndim == 0 and a.dtype.kind == "U",
    "dtype": lambda a: a.ndim == 0 and a.dtype.kind == "U",
    "scalar": lambda a: a.ndim == 0 and a.dtype.kind in "fiu",
    "value": lambda a: a.dtype.kind in "fiubU",
}
# Kinds MIL keeps in Operation.attributes, not among its arguments (const's `val`, as coremltools).
STORED_AS_ATTRIBUTE = frozenset({"value"})

OPSETS = {"ios15": "CoreML5", "ios16": "CoreML6", "ios17": "CoreML7", "ios18": "CoreML8"}
_IR_OPSET = {v: k for k, v in OPSETS.items()}


def _opdef(type_: str):
    if type_ not in REGISTRY:
        raise AneforgeError(f"MIL op {type_!r} is not in aneforge's op registry; define it in "
                            f"aneforge/ops/ to read this program")
    return REGISTRY[type_]


# --------------------------------------------------------------------------- writer


def to_proto(program: Program, weights_dir: str | None = None):
    """The Program as a MILSpec Program message. With `weights_dir`, const tensors of >= 10
    elements are written to `weights_dir/weight.bin` (created) instead of inline."""
    weights = WeightFile() if weights_dir is not None else None
    m = message_class("Program")(version=1)
    for name, f in program.functions.items():
        m.functions[name].CopyFrom(_function(f, weights))
    if program.build_info:
        m.attributes["buildInfo"].CopyFrom(_build_info(program.build_info))
    if weights is not None:
        os.makedirs(weights_dir, exist_ok=True)
        with open(os.path.join(weights_dir, WEIGHT_FILE), "wb") as fh:
            fh.write(weights.to_bytes())
    return m


def to_proto_bytes(program: Program, weights_dir: str | None = None) -> bytes:
    """The Program as serialized `CoreML.Specification.MILSpec.Program` bytes.

    >>> import aneforge as af
    >>> from aneforge.mil import proto
    >>> p = af.program(af.ones(1, 4).relu())
    >>> proto.from_proto_bytes(proto.to_proto_bytes(p)).signature() == p.signature()
    True
    """
    return to_proto(program, weights_dir).SerializeToString()


def _function(f: Function, weights):
    if f.opset not in OPSETS:
        raise AneforgeError(f"opset {f.opset!r} has no MILSpec name; use one of {sorted(OPSETS)}")
    m = message_class("Function")(opset=OPSETS[f.opset])
    for v in f.inputs:
        _named(m.inputs.add(), v)
    block = m.block_specializations[m.opset]
    block.outputs.extend(v.name for v in f.outputs)
    for op in f.block.operations:
        block.operations.append(_operation(op, weights))
    return m


def _named(m, v: Var) -> None:
    m.name = v.name
    _write_type(m.type, v.shape, v.dtype.np_name)


def _operation(op: Operation, weights):
    spec = _opdef(op.type)
    m = message_class("Operation")(type=op.type)
    for k, v in op.inputs.items():
        for u in v if isinstance(v, tuple) else (v,):
            m.inputs[k].arguments.add().name = u.name
    first = next(op.input_vars(), None)
    for k, a in spec.attrs.items():
        if op.attrs.get(k) is None:
            continue
        array = ATTR_KINDS[a.kind][0](op.attrs[k], first.dtype.np if first is not None else None)
        if a.kind in STORED_AS_ATTRIBUTE:
            m.attributes[k].CopyFrom(_value(array, weights))
        else:
            m.inputs[k].arguments.add().value.CopyFrom(_value(array))
    m.attributes["name"].CopyFrom(_string(op.name))
    for v in op.outputs:
        _named(m.outputs.add(), v)
    return m


def _build_info(info: dict[str, str]):
    """buildInfo as Core ML stores it: a dict<string, string> Value (coremltools model.py)."""
    v = message_class("Value")()
    for side in (v.type.dictionaryType.keyType, v.type.dictionaryType.valueType):
        side.tensorType.dataType = DATA_TYPES["STRING"]
    for k, s in info.items():
        kv = v.immediateValue.dictionary.values.add()
        kv.key.CopyFrom(_string(k))
        kv.value.CopyFrom(_string(s))
    return v


# --------------------------------------------------------------------------- reader


def from_proto(data, weights_dir: str | None = None, walls: bool = True) -> Program:
    """An aneforge Program from MILSpec Program bytes (or message), validated by the rules MIL
    text is (docs/mil.md); `walls=False` skips the ANE compiler walls, as text.parse's does.
    Blob-file values are read from `weights_dir` (the directory holding weight.bin)."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        m = _decode(bytes(data))
    elif getattr(getattr(data, "DESCRIPTOR", None), "full_name", None) == f"{PACKAGE}.Program":
        m = data
    else:
        raise AneforgeError(f"from_proto reads MILSpec Program bytes or a Program message, not "
                            f"{type(data).__name__}")
    if m.version != 1:
        raise AneforgeError(f"MILSpec program version {m.version}; aneforge reads version 1")
    weights = WeightReader(weights_dir) if weights_dir is not None else None
    if "main" not in m.functions:
        raise AneforgeError(f"the MILSpec program has no function 'main' (it has "
                            f"{sorted(m.functions)}); aneforge runs main")
    functions = {name: _read_function(f, weights) for name, f in m.functions.items()}
    info = _read_build_info(m.attributes["buildInfo"]) if "buildInfo" in m.attributes else {}
    program = validate(Program(functions, build_info=info))
    if walls:
        check_walls(program)
    return program


def _read_build_info(v) -> dict[str, str]:
    if v.WhichOneof("value") != "immediateValue" or \
            v.immediateValue.WhichOneof("value") != "dictionary":
        raise AneforgeError("the program's buildInfo is not a dict<string, string> value")
    return {_read_string(kv.key, "a buildInfo key"): _read_string(kv.value, "a buildInfo value")
            for kv in v.immediateValue.dictionary.values}


def _decode(data: bytes):
    from google.protobuf.message import DecodeError
    try:
        return message_class("Program").FromString(data)
    except DecodeError as e:
        raise AneforgeError(f"these {len(data)} bytes are not a MILSpec Program (protobuf: {e}); "
                            f"pass the serialized mlProgram of a Core ML model") from None


def from_proto_bytes(data: bytes, weights_dir: str | None = None, walls: bool = True) -> Program:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise AneforgeError(f"from_proto_bytes reads bytes, not {type(data).__name__}")
    return from_proto(bytes(data), weights_dir, walls)


def _read_function(m, weights) -> Function:
    if m.opset not in _IR_OPSET or m.opset not in m.block_specializations:
        raise AneforgeError(f"function opset {m.opset!r}: aneforge reads {sorted(_IR_OPSET)} "
                            f"with a block specialization of that name")
    inputs = [_read_var(v, "program input") for v in m.inputs]
    for v in inputs:
        raise_problem(io_problem(v.dtype.name, v.shape, f"program input {v.name!r}"))
    r = _BlockReader(inputs, weights)
    block = m.block_specializations[m.opset]
    for op in block.operations:
        r.operation(op)
    if len(set(block.outputs)) != len(block.outputs):
        raise AneforgeError(f"the function returns {list(block.outputs)}: each output needs its "
                            f"own name")
    outputs = [r.var(name, "the function's outputs") for name in block.outputs]
    for v in outputs:
        raise_problem(io_problem(v.dtype.name, v.shape, f"program output {v.name!r}"))
    return Function(Block(inputs, r.live_ops(outputs), outputs), _IR_OPSET[m.opset])


def _read_var(m, what: str) -> Var:
    """A declared value (a function input, an op's output), held to the text reader's rules."""
    raise_problem(name_problem(m.name, what))
    shape, key = _read_type(m.type)
    v = Var(m.name, TensorType(shape, _ir_dtype(key, m.name)))
    raise_problem(shape_problem(shape, f"{what} {m.name!r} ({v.type})"))
    return v


def _ir_dtype(key: str, name: str):
    if key not in _IR_DTYPE:
        raise AneforgeError(f"{name!r} has MIL element type {key}, which aneforge has no dtype "
                            f"for; aneforge values are {', '.join(_IR_DTYPE)}")
    return _IR_DTYPE[key]


class _BlockReader:
    """Reads one block's operations into IR ops, resolving names in scope."""

    def __init__(self, inputs: list[Var], weights):
        self.scope: dict[str, Var] = {}
        self.op_names: set[str] = set()
        self.ops: list[Operation] = []
        self.weights = weights
        self.consts: dict[str, np.ndarray] = {}    # const outputs by name: usable as attributes
        self.folded: set[str] = set()              # consts read as compile-time arguments
        for v in inputs:
            self.define(v.name)
            self.scope[v.name] = v

    def define(self, name: str) -> None:
        if name in self.scope or name in self.consts:
            raise AneforgeError(f"{name!r} is defined twice; every value needs a unique name "
                                f"(coremltools' loader silently rebinds it)")

    def var(self, name: str, where: str) -> Var:
        if name not in self.scope:
            raise AneforgeError(f"{where} uses {name!r} before it is defined")
        return self.scope[name]

    def operation(self, m) -> None:
        spec = _opdef(m.type)
        if not m.outputs:
            raise AneforgeError(f"a {m.type} op declares no outputs; every MIL op has at least one")
        name = (_read_string(m.attributes["name"], f"{m.type}'s name") if "name" in m.attributes
                else m.outputs[0].name)
        where = f"{m.type} {name!r}"
        if not name or name in self.op_names:
            raise AneforgeError(f"{where}: every op needs a unique, non-empty name")
        self.op_names.add(name)
        _check_arguments(m, spec, where)
        for v in m.outputs:
            self.define(v.name)
        inputs = {}
        for k in spec.inputs:              # registry order: the IR's (and signature's) order
            if k in m.inputs:
                args = m.inputs[k].arguments
                if k not in spec.variadic:
                    args = [_one(m.inputs[k], f"{where} argument {k}")]
                inputs[k] = tuple(self.tensor(b, f"{where} argument {k}") for b in args)
                inputs[k] = inputs[k] if k in spec.variadic else inputs[k][0]
        found = {}
        for k, a in spec.attrs.items():
            if a.kind in STORED_AS_ATTRIBUTE and k in m.attributes:
                found[k] = _attr(a.kind, _array(m.attributes[k], self.weights), f"{where} {k}")
                self.consts[m.outputs[0].name] = found[k]
                if _key(found[k]) not in _IR_DTYPE:
                    return                 # e.g. a string const: only ever an argument
            elif k in m.inputs:
                found[k] = _attr(a.kind, self.literal(_one(m.inputs[k], f"{where} {k}"),
                                                      f"{where} {k}"), f"{where} {k}")
        try:
            attrs, types = apply_to_vars(m.type, inputs, found)
        except AneforgeError:
            raise
        except Exception as e:    # an op's own inference on arguments it did not expect
            raise AneforgeError(f"{where}: {m.type} cannot take these arguments "
                                f"({type(e).__name__}: {e})") from None
        outputs = [_read_var(v, f"{where} output") for v in m.outputs]
        if [v.type for v in outputs] != types:
            raise AneforgeError(f"{where}: outputs are typed {[str(v.type) for v in outputs]}; "
                                f"{m.type} gives {[str(t) for t in types]} for these arguments")
        self.scope.update((v.name, v) for v in outputs)
        self.ops.append(Operation(m.type, inputs, attrs, outputs, name))

    def tensor(self, b, where: str) -> Var:
        """A tensor argument: a name, or a literal (read as the const op MIL means by it)."""
        if b.WhichOneof("binding") == "name":
            return self.var(b.name, where)
        val = _array(b.value, self.weights)
        raise_problem(shape_problem(val.shape, f"the value of {where}"))
        name = fresh_name("literal", set(self.scope) | set(self.consts), len(self.scope))
        out = Var(name, TensorType(val.shape, _ir_dtype(_key(val), where)))
        self.ops.append(Operation("const", {}, {"val": val}, [out], name))
        self.scope[name] = out
        return out

    def literal(self, b, where: str) -> np.ndarray:
        """A compile-time argument: a value, or (as coremltools writes programs) the name of a
        const op's output."""
        if b.WhichOneof("binding") == "value":
            return _array(b.value, self.weights)
        if b.name not in self.consts:
            self.var(b.name, where)
            raise AneforgeError(f"{where} is bound to {b.name!r}, which is not a const; aneforge "
                                f"needs compile-time arguments known when the program is built")
        self.folded.add(b.name)
        return self.consts[b.name]

    def live_ops(self, outputs: list[Var]) -> list[Operation]:
        """The ops, without consts that only fed compile-time arguments (now inline attrs)."""
        used = {id(v) for op in self.ops for v in op.input_vars()} | {id(v) for v in outputs}
        return [op for op in self.ops if not op.outputs or not all(
            v.name in self.folded and id(v) not in used for v in op.outputs)]


def _one(argument, where: str):
    if len(argument.arguments) != 1:
        raise AneforgeError(f"{where} binds {len(argument.arguments)} values; it takes one")
    return argument.arguments[0]


def _attr(kind: str, a: np.ndarray, where: str):
    if not ATTR_FITS[kind](a):
        raise AneforgeError(f"{where}: a {a.dtype} value of shape {list(a.shape)} is not a "
                            f"{kind} argument")
    return ATTR_KINDS[kind][1](a)


def _check_arguments(m, spec, where: str) -> None:
    attributes = {k for k, a in spec.attrs.items() if a.kind in STORED_AS_ATTRIBUTE} | {"name"}
    unknown = (set(m.inputs) - set(spec.inputs) - set(spec.attrs)) | (set(m.attributes) - attributes)
    if unknown:
        raise AneforgeError(f"{where} has argument(s) {sorted(unknown)} that aneforge's {m.type} "
                            f"does not take; it takes {list(spec.inputs) + list(spec.attrs)}")
