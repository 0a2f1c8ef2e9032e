"""ExecuTorch's program file (`.pte`): the flatbuffer `Program` (file identifier `ET12`), written
with the `flatbuffers` package's Builder, field by field from ExecuTorch's schema
(`exir/_serialize/program.fbs` and `scalar_type.fbs` in the executorch package).

A table's fields are numbered in schema order (a union takes two: its type, then its value);
`_table` writes the slots given as {number: value}. The values a program holds are plain tuples
here (`EValue`), built by mil/pte.py:

    ("null",) ("int", 3) ("bool", True) ("double", 0.5) ("string", "none")
    ("ints", (k, ...))          an IntList: indices of Int values (ExecuTorch boxes int lists)
    ("tensors", (k, ...))       a TensorList: indices of Tensor values
    ("tensor", Tensor(...))
"""
from __future__ import annotations

from typing import NamedTuple

from ..errors import AneforgeError

FILE_IDENTIFIER = b"ET12"
SCHEMA_VERSION = 0                     # executorch.exir.version.EXECUTORCH_SCHEMA_VERSION
# scalar_type.fbs ScalarType, for the dtypes aneforge programs carry
SCALAR_TYPES = {"uint8": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "fp16": 5, "fp32": 6,
                "bool": 11, "uint16": 27}
ITEMSIZE = {"uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "fp16": 2, "fp32": 4,
            "bool": 1, "uint16": 2}
# union KernelTypes and InstructionArguments: member -> type tag (0 is NONE)
KERNEL_TYPES = {k: i for i, k in enumerate(
    ("null", "int", "bool", "double", "tensor", "string", "ints", "doubles", "bools", "tensors",
     "optional_tensors"), start=1)}
KERNEL_CALL, DELEGATE_CALL = 1, 2
INLINE = 0                             # DataLocation: the delegate's bytes in the program
DATA_ALIGNMENT = 16                    # program.fbs force_align on Buffer / inline delegate data
HEADER_LENGTH = 32                     # the extended header (_program.py _ExtendedHeader)
SEGMENT_ALIGNMENT = 128                # where segments start (ExecutorchBackendConfig default)


class Tensor(NamedTuple):
    """A Tensor value: constant (buffer > 0) or planned (alloc = (memory id, byte offset))."""
    sizes: tuple
    dtype: str                         # an aneforge dtype name
    buffer: int = 0
    alloc: tuple | None = None


class Delegate(NamedTuple):
    backend: str                       # BackendDelegate.id, e.g. "CoreMLBackend"
    data: int                          # index into Program.backend_delegate_data
    compile_specs: tuple               # ((key, value bytes), ...)


class Plan(NamedTuple):
    """One ExecutionPlan (a method). `instructions` are ("kernel", operator index, args) or
    ("delegate", delegate index, args), args being value indices."""
    name: str
    values: list
    inputs: list
    outputs: list
    instructions: list
    operators: list                    # (name, overload)
    delegates: list
    buffer_sizes: list                 # non_const_buffer_sizes; [0] is ignored by the runtime


def _flatbuffers():
    try:
        import flatbuffers
    except ImportError as e:
        raise AneforgeError(f'writing a .pte needs the flatbuffers package: pip install -e ".[pte]" '
                            f"in a clone of aneforge ({e})") from None
    return flatbuffers


def serialize(plans: list[Plan], constants: list[bytes], delegate_data: list[bytes]) -> bytes:
    """The `.pte` bytes: a Program of `plans` with inline delegate payloads, its constants in
    one data segment after the flatbuffer (the constant segment: constant k at offsets[k], 0
    being the empty entry non-constant tensors point at; ExecuTorch's runtime no longer reads
    the older in-flatbuffer `constant_buffer` by default), found through the extended header."""
    b = _flatbuffers().Builder(1024)
    offsets, segment = _layout(constants)
    plan_offsets = [_plan(b, p) for p in plans]
    inline = [_table(b, {0: _bytes(b, data)}) for data in delegate_data]
    segments = [_table(b, {0: ("uint64", 0), 1: ("uint64", len(segment))})]
    constant_segment = _table(b, {0: ("uint32", 0), 1: _scalars(b, "uint64", offsets)})
    root = _table(b, {0: ("uint32", SCHEMA_VERSION), 1: _vector(b, plan_offsets),
                      3: _vector(b, inline), 4: _vector(b, segments), 5: constant_segment})
    b.Finish(root, file_identifier=FILE_IDENTIFIER)
    return _with_segments(bytes(b.Output()), segment)


def _align(n: int, to: int) -> int:
    return -(-n // to) * to


def _layout(constants: list[bytes]) -> tuple[list[int], bytes]:
    offsets, parts, end = [], [], 0
    for data in constants:
        start = _align(end, DATA_ALIGNMENT)
        parts.append(bytes(start - end) + data)
        offsets.append(start)
        end = start + len(data)
    return offsets, b"".join(parts)


def _with_segments(flatbuffer: bytes, segment: bytes) -> bytes:
    """The extended header ("eh00", its length, the flatbuffer's size, where the segments
    start and their size; little-endian) goes just after the file identifier, which moves the
    root table's offset by its length (32, a power of 2 >= every force_align: alignment holds)."""
    program_size = len(flatbuffer) + HEADER_LENGTH
    base = _align(program_size, SEGMENT_ALIGNMENT)
    header = (b"eh00" + HEADER_LENGTH.to_bytes(4, "little") + program_size.to_bytes(8, "little")
              + base.to_bytes(8, "little") + len(segment).to_bytes(8, "little"))
    root = int.from_bytes(flatbuffer[:4], "little") + HEADER_LENGTH
    return (root.to_bytes(4, "little") + flatbuffer[4:8] + header + flatbuffer[8:]
            + bytes(base - program_size) + segment)


_PREPEND = {"uint64": "PrependUint64Slot", "uint32": "PrependUint32Slot", "int32": "PrependInt32Slot", "int64": "PrependInt64Slot",
            "uint8": "PrependUint8Slot", "int8": "PrependInt8Slot", "bool": "PrependBoolSlot",
            "float64": "PrependFloat64Slot"}


def _table(b, fields: dict) -> int:
    """A table from {slot: offset (int) or (scalar kind, value)}; offsets are built already."""
    b.StartObject(max(fields, default=-1) + 1)
    for slot, v in sorted(fields.items()):
        if isinstance(v, tuple):
            getattr(b, _PREPEND[v[0]])(slot, v[1], None)     # None default: always written
        else:
            b.PrependUOffsetTRelativeSlot(slot, v, 0)
    return b.EndObject()


def _vector(b, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


_SCALARS = {"uint64": (8, "PrependUint64"), "int64": (8, "PrependInt64"), "int32": (4, "PrependInt32"), "uint8": (1, "PrependUint8"),
            "float64": (8, "PrependFloat64"), "bool": (1, "PrependBool")}


def _scalars(b, kind: str, items) -> int:
    size, prepend = _SCALARS[kind]
    b.StartVector(size, len(items), size)
    for x in reversed(list(items)):
        getattr(b, prepend)(x)
    return b.EndVector()


def _bytes(b, data: bytes) -> int:
    """A [ubyte] vector aligned to 16 (the schema's force_align: tensor data is read in place)."""
    b.StartVector(1, len(data), DATA_ALIGNMENT)
    b.head -= len(data)
    b.Bytes[b.head:b.head + len(data)] = data
    return b.EndVector()


def _plan(b, p: Plan) -> int:
    values = [_evalue(b, v) for v in p.values]
    instructions = [_instruction(b, i) for i in p.instructions]
    chain = _table(b, {0: _scalars(b, "int32", p.inputs), 1: _scalars(b, "int32", p.outputs),
                       2: _vector(b, instructions)})
    operators = [_table(b, {0: b.CreateString(n), 1: b.CreateString(o)}) for n, o in p.operators]
    delegates = [_delegate(b, d) for d in p.delegates]
    meta = _table(b, {0: b.CreateString(""), 1: b.CreateString("")})
    return _table(b, {0: b.CreateString(p.name), 1: meta, 2: _vector(b, values),
                      3: _scalars(b, "int32", p.inputs), 4: _scalars(b, "int32", p.outputs),
                      5: _vector(b, [chain]), 6: _vector(b, operators), 7: _vector(b, delegates),
                      8: _scalars(b, "int64", p.buffer_sizes)})


def _instruction(b, ins) -> int:
    kind, index, args = ins
    call = _table(b, {0: ("int32", index), 1: _scalars(b, "int32", args)})
    return _table(b, {0: ("uint8", KERNEL_CALL if kind == "kernel" else DELEGATE_CALL), 1: call})


def _delegate(b, d: Delegate) -> int:
    specs = [_table(b, {0: b.CreateString(k), 1: _scalars(b, "uint8", v)})
             for k, v in d.compile_specs]
    ref = _table(b, {0: ("uint8", INLINE), 1: ("uint32", d.data)})
    return _table(b, {0: b.CreateString(d.backend), 1: ref, 2: _vector(b, specs)})


def _evalue(b, v: tuple) -> int:
    kind = v[0]
    body = _VALUE_BODY[kind](b, *v[1:])
    return _table(b, {0: ("uint8", KERNEL_TYPES[kind]), 1: body})


def _tensor(b, t: Tensor) -> int:
    fields = {0: ("int8", SCALAR_TYPES[t.dtype]), 2: _scalars(b, "int32", t.sizes),
              3: _scalars(b, "uint8", range(len(t.sizes))), 5: ("uint32", t.buffer)}
    if t.alloc is not None:
        mem_id, offset = t.alloc
        fields[6] = _table(b, {0: ("uint32", mem_id), 1: ("uint32", offset & 0xFFFFFFFF),
                               2: ("uint32", offset >> 32)})
    return _table(b, fields)


_VALUE_BODY = {
    "null": lambda b: _table(b, {}),
    "int": lambda b, x: _table(b, {0: ("int64", int(x))}),
    "bool": lambda b, x: _table(b, {0: ("bool", bool(x))}),
    "double": lambda b, x: _table(b, {0: ("float64", float(x))}),
    "string": lambda b, s: _table(b, {0: b.CreateString(s)}),
    "ints": lambda b, items: _table(b, {0: _scalars(b, "int64", items)}),
    "tensors": lambda b, items: _table(b, {0: _scalars(b, "int32", items)}),
    "tensor": _tensor,
}
