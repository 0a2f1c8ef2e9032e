"""`af.save` / `af.load`: checkpoints in torch's own file format, written and read without torch.

The format is the one `torch.save` writes (PyTorch's `torch/serialization.py`): a zip archive
holding `<name>/data.pkl`, a pickle of the object in which each tensor is a call to
`torch._utils._rebuild_tensor_v2` on a storage that lives in its own record `<name>/data/<key>`
as raw little-endian bytes. So `torch.load(path, weights_only=True)` reads an aneforge
checkpoint, and `af.load` reads a `torch.save` file of tensors.

Reading a checkpoint of data runs no pickled code. The writer emits the pickle opcodes itself
(no `pickle.dumps` of Python objects: the only globals named are torch's tensor rebuild
function, its storage classes and `collections.OrderedDict`, none of which is imported). The
reader interprets the pickle itself, with the opcodes and rules of torch's `weights_only=True`
unpickler: it knows exactly those names (mapped to numpy) and refuses every other, before
anything runs.

A whole object (`torch.save(model)`: a module pickled with its class named by reference, as
pytorch/examples' word_language_model saves its best model) is pickled by Python's pickler,
each tensor a record of the archive; it loads only with `af.load(f, weights_only=False)`, which
runs Python's unpickler on it (importing the classes it names), exactly as `torch.load(f,
weights_only=False)` does: for files you trust. torch cannot load such a file (its classes are
aneforge's), nor aneforge a whole-object file of torch's.

Nothing read is trusted either: every record is checked against the tensors that use it
(absent, duplicated, shorter or longer than its storage, a view past its storage, sizes past
int64 or past the machine's memory) before anything is allocated, and a damaged file raises
`CheckpointError` naming the record: never zero-filled or truncated data.

What a checkpoint may hold: tensors (aneforge, numpy or torch), dicts (OrderedDict kept),
lists, tuples, str, int, float, bool and None, nested. Tensors load as aneforge tensors:
floating data as float16 (aneforge's storage type, rounded once to nearest; values that change
beyond rounding are reported), int64 as int32, other integers and bools as they are.
"""
from __future__ import annotations

import io
import math
import os
import pickle
import pickletools
import struct
import zipfile
import zlib
from collections import OrderedDict

import numpy as np

from .core import scalar_consts
from .creation import tensor
from .errors import AneforgeError, CheckpointError
from .runtime import memory
from .tensor import Tensor

# numpy dtype <-> torch's storage class name (the legacy names torch still pickles).
STORAGES = {"float16": "HalfStorage", "float32": "FloatStorage", "float64": "DoubleStorage",
            "int64": "LongStorage", "int32": "IntStorage", "int16": "ShortStorage",
            "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage"}
NUMPY_OF = {v: np.dtype(k) for k, v in STORAGES.items()}
BFLOAT16 = "BFloat16Storage"         # no numpy type: widened to float32 on load

ARCHIVE = "archive"


# ---- writing ------------------------------------------------------------------------------
class _Writer:
    """Pickle protocol 2 opcodes for the allowed objects, and the storages they reference."""

    def __init__(self):
        self.out = io.BytesIO()
        self.storages: list[np.ndarray] = []

    def emit(self, *chunks: bytes) -> None:
        for c in chunks:
            self.out.write(c)

    def global_(self, module: str, name: str) -> None:
        self.emit(pickle.GLOBAL, f"{module}\n{name}\n".encode())

    def dump(self, obj) -> bytes:
        self.emit(pickle.PROTO, b"\x02")
        self.save(obj)
        self.emit(pickle.STOP)
        return self.out.getvalue()

    def save(self, obj) -> None:
        for kinds, method in _SAVERS:
            if isinstance(obj, kinds):
                return method(self, obj)
        array = _as_array(obj)
        if array is None:
            raise _NotData(type(obj).__name__)
        self.tensor(array)

    def none(self, _) -> None:
        self.emit(pickle.NONE)

    def bool(self, b: bool) -> None:
        self.emit(pickle.NEWTRUE if b else pickle.NEWFALSE)

    def int(self, n: int) -> None:
        if -2 ** 31 <= n < 2 ** 31:
            self.emit(pickle.BININT, struct.pack("<i", n))
        else:
            raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
            self.emit(pickle.LONG1, bytes([len(raw)]), raw)

    def float(self, x: float) -> None:
        self.emit(pickle.BINFLOAT, struct.pack(">d", x))

    def str(self, s: str) -> None:
        raw = s.encode("utf-8")
        self.emit(pickle.BINUNICODE, struct.pack("<I", len(raw)), raw)

    def tuple(self, t: tuple) -> None:
        self.emit(pickle.MARK)
        for v in t:
            self.save(v)
        self.emit(pickle.TUPLE)

    def list(self, items: list) -> None:
        self.emit(pickle.EMPTY_LIST, pickle.MARK)
        for v in items:
            self.save(v)
        self.emit(pickle.APPENDS)

    def dict(self, d: dict) -> None:
        if isinstance(d, OrderedDict):
            self.ordered_dict()
        else:
            self.emit(pickle.EMPTY_DICT)
        self.emit(pickle.MARK)
        for k, v in d.items():
            self.save(k)
            self.save(v)
        self.emit(pickle.SETITEMS)

    def ordered_dict(self) -> None:
        self.global_("collections", "OrderedDict")
        self.emit(pickle.EMPTY_TUPLE, pickle.REDUCE)

    def tensor(self, a: np.ndarray) -> None:
        """torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)."""
        if a.dtype.name not in STORAGES:
            raise TypeError(f"af.save: arrays of dtype {a.dtype} have no torch storage type")
        key = str(len(self.storages))
        self.storages.append(np.ascontiguousarray(a))
        self.global_("torch._utils", "_rebuild_tensor_v2")
        self.emit(pickle.MARK, pickle.MARK, pickle.BINUNICODE, struct.pack("<I", 7), b"storage")
        self.global_("torch", STORAGES[a.dtype.name])
        self.str(key)
        self.str("cpu")
        self.int(a.size)
        self.emit(pickle.TUPLE, pickle.BINPERSID)
        self.int(0)
        self.tuple(tuple(int(n) for n in a.shape))
        self.tuple(_strides(a.shape))
        self.bool(False)
        self.ordered_dict()
        self.emit(pickle.TUPLE, pickle.REDUCE)


class _NotData(TypeError):
    """An object a checkpoint of data cannot hold (save pickles it whole instead)."""


class _ObjectWriter(pickle.Pickler):
    """A whole object (`torch.save(model)`: a module, with its class named by reference) as
    Python's pickle writes it, each tensor a persistent record beside it (its array in the
    archive's `data/<key>`, as torch stores storages): one record per tensor however often it is
    referenced (tied weights stay tied). Only `af.load(f, weights_only=False)` reads it, as
    torch's own whole-module files need `torch.load(f, weights_only=False)`."""

    def __init__(self):
        self.out = io.BytesIO()
        super().__init__(self.out, protocol=2)
        self.storages: list[np.ndarray] = []
        self.keys: dict[int, str] = {}
        self.held: list = []                 # (ids stay unique while the dump runs)

    def dump(self, obj) -> bytes:
        super().dump(obj)
        return self.out.getvalue()

    def persistent_id(self, obj):
        if not isinstance(obj, Tensor):
            return None
        key = self.keys.get(id(obj))
        if key is None:
            key = self.keys[id(obj)] = str(len(self.storages))
            self.storages.append(np.ascontiguousarray(obj.detach().numpy()))
            self.held.append(obj)
        from .nn.parameter import Parameter
        return (_OBJECT_TENSOR, key, obj.dtype.torch_name, self.storages[int(key)].dtype.str,
                tuple(obj.shape), isinstance(obj, Parameter), bool(obj.requires_grad))


_OBJECT_TENSOR = "aneforge.tensor"


_SAVERS = ((type(None), _Writer.none), (bool, _Writer.bool), (int, _Writer.int),
           (float, _Writer.float), (str, _Writer.str), (tuple, _Writer.tuple),
           (list, _Writer.list), (dict, _Writer.dict))


def _strides(shape) -> tuple:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= int(n)
    return tuple(reversed(out))


def _as_array(obj) -> np.ndarray | None:
    """numpy data of an aneforge tensor, a numpy array or scalar, or a torch tensor."""
    if isinstance(obj, Tensor):
        return obj.numpy()
    if isinstance(obj, (np.ndarray, np.generic)):
        return np.asarray(obj)
    if hasattr(obj, "detach") and hasattr(obj, "cpu"):       # torch, without importing it
        t = obj.detach().cpu()
        return (t.float() if str(t.dtype) == "torch.bfloat16" else t).numpy()
    return None


def save(obj, f) -> None:
    """Save `obj` (a state_dict, or nested dicts/lists/tuples of tensors, numbers and strings)
    to a path or a binary file, in torch's checkpoint format: `torch.load(f, weights_only=True)`
    reads it, as does `af.load`. Any other object (a whole module, `af.save(model, f)`) is
    pickled whole, its tensors as records: `af.load(f, weights_only=False)` reads it.

    >>> import io, aneforge as af, aneforge.nn as nn
    >>> buf = io.BytesIO()
    >>> af.save({"model": nn.Linear(2, 1).state_dict(), "epoch": 3}, buf)
    >>> ckpt = af.load(io.BytesIO(buf.getvalue()))
    >>> list(ckpt["model"]), ckpt["model"]["weight"].shape, ckpt["epoch"]
    (['weight', 'bias'], (1, 2), 3)
    """
    writer = _Writer()
    try:
        data = writer.dump(obj)
    except _NotData:                    # a module or other object: pickled whole, as torch does
        writer = _ObjectWriter()
        data = writer.dump(obj)         # (outside the except: no chained error if this fails)
    with _open(f, "wb") as handle, zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{ARCHIVE}/data.pkl", data)
        z.writestr(f"{ARCHIVE}/byteorder", "little")
        for key, a in enumerate(writer.storages):
            z.writestr(f"{ARCHIVE}/data/{key}", a.astype(a.dtype.newbyteorder("<")).tobytes())
        z.writestr(f"{ARCHIVE}/version", "3\n")


# ---- reading ------------------------------------------------------------------------------
# What a damaged archive raises from zipfile, and a damaged pickle from the reader below (a
# stack or memo entry missing, a call with the wrong arguments, an unhashable key, bad UTF-8).
_ZIP_DAMAGE = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, struct.error,
               OverflowError, NotImplementedError)
_PICKLE_DAMAGE = (IndexError, KeyError, TypeError, ValueError)
INT64_MAX = 2 ** 63 - 1


class _Storage(tuple):
    """(record key, its array, its storage type): only persistent ids make one."""
    __slots__ = ()


class _Archive:
    """The records of one checkpoint archive, each checked before it is read."""

    def __init__(self, z: zipfile.ZipFile, name: str):
        self.z, self.name = z, name
        names = z.namelist()
        twice = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) < len(names) else []
        if twice:
            raise self.error(f"the records {twice} appear more than once; which one is meant is "
                             f"ambiguous")
        self.names = set(names)
        self.room = memory.budget()     # read once: /proc/meminfo per storage would be slow
        pkl = next((n for n in names if n.endswith("/data.pkl")), None)
        if pkl is None:
            raise self.error("the archive has no data.pkl record")
        self.pkl, self.root = pkl, pkl[:-len("data.pkl")]

    def error(self, what: str) -> CheckpointError:
        return CheckpointError(f"af.load({self.name}): {what}. The file is damaged or not a "
                               f"torch checkpoint: save it again or download it again")

    def read(self, path: str, size: int | None = None) -> bytes:
        """Record `path`, whose size must be `size` bytes if given (checked before reading)."""
        if path not in self.names:
            raise self.error(f"the record {path} is absent")
        info = self.z.getinfo(path)
        if info.flag_bits & 0x1:
            raise self.error(f"the record {path} is marked encrypted, which torch never writes")
        declared = info.file_size
        _check_memory(self, f"the record {path}", declared)     # a compressed bomb included
        if size is not None and declared != size:
            raise self.error(f"the record {path} has {declared} bytes where its storage needs "
                             f"{size} (torch refuses it too)")
        try:
            raw = self.z.read(path)
        except _ZIP_DAMAGE as e:
            raise self.error(f"the record {path} cannot be read ({type(e).__name__}: {e})") from e
        if size is not None and len(raw) != size:
            raise self.error(f"the record {path} holds {len(raw)} bytes where its storage needs "
                             f"{size}")
        return raw


# What each allowed name is: a reader method's name (bound per load), or the object itself.
_ALLOWED = {("torch._utils", "_rebuild_tensor_v2"): "rebuild_tensor",
            ("torch._utils", "_rebuild_parameter"): "rebuild_parameter",
            ("collections", "OrderedDict"): OrderedDict}


class _StorageType(str):
    """torch.FloatStorage & co. as the pickle names them: a marker only persistent ids take
    (a plain string "FloatStorage" is not one, and a marker left as a value is refused)."""
    __slots__ = ()


_ALLOWED.update({("torch", name): _StorageType(name) for name in [*NUMPY_OF, BFLOAT16]})
_VALUES = (str, bytes, int, float, complex, bool, type(None))     # what a checkpoint may hold


def _allowed(module: str, name: str):
    found = _ALLOWED.get((module, name))
    if found is None:
        raise _refused(
            f"af.load: the checkpoint names {module}.{name}, which a checkpoint of tensors, "
            f"containers and numbers does not need; refusing to load it (with weights_only=True "
            f"nothing in a checkpoint runs). A whole object saved with torch.save(model) / "
            f"af.save(model) loads with af.load(f, weights_only=False), which runs its pickle "
            f"as torch.load does: only for files you trust")
    return found


def _refused(message: str) -> CheckpointError:
    """The weights-only reader's refusal of a name (`load` with weights_only=False unpickles
    such a file as objects instead)."""
    error = CheckpointError(message)
    error.refused = True
    return error


def _scan(data: bytes) -> None:
    """Before anything runs, every name the pickle imports is allowed (protocol 4's
    STACK_GLOBAL included, so a `pickle.dumps` of code is named too)."""
    strings = []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            _allowed(*arg.split(" ", 1))
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            _allowed(*strings[-2:])
        if isinstance(arg, str):
            strings.append(arg)


def _is_index(n) -> bool:
    return type(n) is int and n >= 0


class _Reader:
    """The pickle interpreted opcode by opcode, with the opcodes and rules of torch's
    weights-only unpickler (torch/_weights_only_unpickler.py): only the names a tensor checkpoint
    needs (anything else refused, never imported), appends only to lists, items only into dicts.
    Every storage and tensor is checked against its record before anything is allocated."""

    def __init__(self, archive: _Archive):
        self.archive = archive
        self.data = archive.read(archive.pkl)
        _scan(self.data)
        self.pos, self.stack, self.marks, self.memo = 0, [], [], {}
        self.storages: dict[str, _Storage] = {}

    def load(self):
        while True:
            code = self.read(1)
            if code == pickle.STOP:
                return self.stack.pop()
            run = _OPS.get(code)
            if run is None:
                raise self.archive.error(
                    f"{self.archive.pkl} uses the pickle opcode {code!r} (byte {self.pos - 1}), "
                    f"which torch's weights-only loader does not run either")
            run(self)

    def read(self, n: int) -> bytes:
        chunk = self.data[self.pos:self.pos + n]
        if len(chunk) < n:
            raise self.archive.error(f"{self.archive.pkl} ends inside an opcode: it is truncated")
        self.pos += n
        return chunk

    def line(self) -> str:
        end = self.data.find(b"\n", self.pos)
        if end < 0:
            raise self.archive.error(f"{self.archive.pkl} ends inside a name: it is truncated")
        text, self.pos = self.data[self.pos:end].decode("utf-8"), end + 1
        return text

    def pop_mark(self) -> list:
        items, self.stack = self.stack, self.marks.pop()
        return items

    def target(self, kinds: tuple, what: str):
        if type(self.stack[-1]) not in kinds:
            raise self.archive.error(f"{what} into a {type(self.stack[-1]).__name__}")
        return self.stack[-1]

    # ---- the opcodes (pickle's names) ----------------------------------------------------
    def global_(self):
        module, name = self.line(), self.line()
        found = _allowed(module, name)
        self.stack.append(getattr(self, found) if type(found) is str else found)

    def reduce(self):
        args, func = self.stack.pop(), self.stack[-1]
        if func not in (self.rebuild_tensor, self.rebuild_parameter, OrderedDict) or \
                type(args) is not tuple:
            raise self.archive.error(f"a call of {str(func)[:40]} on {str(args)[:40]}")
        self.stack[-1] = func(*args)

    def newobj(self):
        args, cls = self.stack.pop(), self.stack.pop()
        if cls is not OrderedDict or type(args) is not tuple:
            raise self.archive.error(f"a new object of {str(cls)[:40]}")
        self.stack.append(OrderedDict.__new__(OrderedDict, *args))

    def build(self):
        state = self.stack.pop()            # attributes of an OrderedDict: not data, dropped
        if type(self.stack[-1]) is not OrderedDict or not isinstance(state, dict):
            raise self.archive.error(f"a state set on a {type(self.stack[-1]).__name__}")

    def setitems(self):
        items = self.pop_mark()
        into = self.target((dict, OrderedDict), "items")
        if len(items) % 2:
            raise self.archive.error("a key without a value")
        for k in range(0, len(items), 2):
            into[items[k]] = items[k + 1]

    def persid(self):
        self.stack.append(self.persistent_load(self.stack.pop()))

    def rebuild_parameter(self, data, requires_grad=True, hooks=None, *rest):
        return data

    def persistent_load(self, pid):
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage"):
            raise self.archive.error(f"unknown persistent record {str(pid)[:80]}")
        _, kind, key, _location, numel = pid
        if type(kind) is not _StorageType:
            raise self.archive.error(f"a storage of unknown type {str(kind)[:40]}")
        if not _is_index(numel) or not isinstance(key, (str, int)):
            raise self.archive.error(f"storage {str(key)[:40]} declares {str(numel)[:40]} "
                                     f"elements")
        key = str(key)
        made = self.storages.get(key)
        if made is None:
            made = self.storages[key] = _Storage((key, self._storage(kind, key, numel), kind))
        if made[1].size != numel or made[2] != kind:
            raise self.archive.error(f"storage {key} is declared twice, differently")
        return made

    def _storage(self, kind: str, key: str, numel: int) -> np.ndarray:
        itemsize = 2 if kind == BFLOAT16 else NUMPY_OF[kind].itemsize
        _check_memory(self.archive, f"storage {key}", numel * itemsize)
        raw = self.archive.read(f"{self.archive.root}data/{key}", numel * itemsize)
        if kind == BFLOAT16:            # the top half of a float32
            return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        if kind == "BoolStorage":       # any nonzero byte is True, as in torch
            return np.frombuffer(raw, np.uint8) != 0
        return np.frombuffer(raw, NUMPY_OF[kind].newbyteorder("<"))

    def rebuild_tensor(self, storage, offset, size, stride, *rest) -> np.ndarray:
        """torch._utils._rebuild_tensor_v2: a view of `storage`, copied, after torch's checks."""
        if type(storage) is not _Storage:
            raise self.archive.error("a tensor is built from something that is not a storage")
        key, array, _ = storage
        what = f"the tensor on storage {key}"
        if not (_is_index(offset) and isinstance(size, (tuple, list))
                and isinstance(stride, (tuple, list)) and len(size) == len(stride)
                and all(map(_is_index, size)) and all(map(_is_index, stride))):
            raise self.archive.error(f"{what} has offset {str(offset)[:40]}, size "
                                     f"{str(size)[:80]}, stride {str(stride)[:80]}: not "
                                     f"non-negative integers of one rank")
        numel = math.prod(size)
        if max(numel, offset, *stride) * array.itemsize > INT64_MAX:
            raise self.archive.error(f"{what} has size {tuple(size)} ({numel} elements), stride "
                                     f"{tuple(stride)}, offset {offset}: past int64 in bytes "
                                     f"(torch's sizes are int64 too)")
        end = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if numel else offset
        if end > array.size:
            raise self.archive.error(
                f"{what}: size {tuple(size)}, stride {tuple(stride)} and offset {offset} reach "
                f"element {end - 1}, past the storage's {array.size} elements (torch refuses it too)")
        _check_memory(self.archive, what, numel * (array.itemsize + 2))
        view = np.lib.stride_tricks.as_strided(array[offset:], tuple(size),
                                               tuple(s * array.itemsize for s in stride))
        return view.copy()


def _push(value):
    return lambda r: r.stack.append(value() if callable(value) else value)


def _push_read(fmt: str):
    size = struct.calcsize(fmt)
    return lambda r: r.stack.append(struct.unpack(fmt, r.read(size))[0])


def _memo_put(fmt: str):
    size = struct.calcsize(fmt)
    return lambda r: r.memo.__setitem__(struct.unpack(fmt, r.read(size))[0], r.stack[-1])


def _memo_get(fmt: str):
    size = struct.calcsize(fmt)
    return lambda r: r.stack.append(r.memo[struct.unpack(fmt, r.read(size))[0]])


def _tuple(n: int):
    def run(r: _Reader):
        if len(r.stack) < n:
            raise IndexError("stack underflow")
        r.stack[len(r.stack) - n:] = [tuple(r.stack[len(r.stack) - n:])]
    return run


def _tuple_mark(r: _Reader):
    items = r.pop_mark()            # first: it swaps the stack
    r.stack.append(tuple(items))


def _append(r: _Reader):
    item = r.stack.pop()
    r.target((list,), "an append").append(item)


def _appends(r: _Reader):
    items = r.pop_mark()
    r.target((list,), "an append").extend(items)


def _setitem(r: _Reader):
    value, key = r.stack.pop(), r.stack.pop()
    r.target((dict, OrderedDict), "an item")[key] = value


def _mark(r: _Reader):
    r.marks.append(r.stack)
    r.stack = []


def _text(r: _Reader, n: int) -> str:
    return str(r.read(n), "utf-8", "surrogatepass")


_OPS = {
    pickle.PROTO: lambda r: r.read(1), pickle.GLOBAL: _Reader.global_,
    pickle.REDUCE: _Reader.reduce, pickle.NEWOBJ: _Reader.newobj, pickle.BUILD: _Reader.build,
    pickle.APPEND: _append, pickle.APPENDS: _appends, pickle.SETITEM: _setitem,
    pickle.SETITEMS: _Reader.setitems, pickle.MARK: _mark,
    pickle.TUPLE: _tuple_mark,
    pickle.TUPLE1: _tuple(1), pickle.TUPLE2: _tuple(2), pickle.TUPLE3: _tuple(3),
    pickle.NONE: _push(None), pickle.NEWFALSE: _push(False), pickle.NEWTRUE: _push(True),
    pickle.EMPTY_TUPLE: _push(()), pickle.EMPTY_LIST: _push(list), pickle.EMPTY_DICT: _push(dict),
    pickle.EMPTY_SET: _push(set), pickle.BININT: _push_read("<i"), pickle.BININT1: _push_read("<B"),
    pickle.BININT2: _push_read("<H"), pickle.BINFLOAT: _push_read(">d"),
    pickle.BINUNICODE: lambda r: r.stack.append(_text(r, struct.unpack("<I", r.read(4))[0])),
    pickle.SHORT_BINSTRING: lambda r: r.stack.append(_text(r, r.read(1)[0])),
    pickle.LONG1: lambda r: r.stack.append(int.from_bytes(r.read(r.read(1)[0]), "little", signed=True)),
    pickle.BINPERSID: _Reader.persid, pickle.BINGET: _memo_get("<B"),
    pickle.LONG_BINGET: _memo_get("<I"), pickle.BINPUT: _memo_put("<B"),
    pickle.LONG_BINPUT: _memo_put("<I"),
}


def _check_memory(archive: _Archive, what: str, nbytes: int) -> None:
    """Refuse a declared size the machine cannot hold, before anything is allocated."""
    if nbytes > archive.room:
        raise archive.error(f"{what} needs {nbytes} bytes, more than the {archive.room} this machine "
                            f"has available (ANEFORGE_SIM_MAX_BYTES raises the budget)")


def _to_tensors(obj, path: str, losses: dict):
    """Arrays (the reader's tensors) as aneforge tensors, inside any container; what their fp16
    cast loses, by path, into `losses`. Anything but data (a storage, a rebuild function or a
    storage type the pickle names but never calls) is refused."""
    if isinstance(obj, np.ndarray):
        return _to_tensor(obj, path, losses)
    if type(obj) in (dict, OrderedDict):
        return type(obj)((_to_tensors(k, f"{path} key", losses), _to_tensors(v, f"{path}[{k!r}]", losses))
                         for k, v in obj.items())
    if type(obj) in (list, tuple, set, frozenset):
        return type(obj)(_to_tensors(v, f"{path}[{i}]", losses) for i, v in enumerate(obj))
    if type(obj) in _VALUES:
        return obj
    raise CheckpointError(f"af.load: {path or 'the top level'} holds {str(obj)[:60]}, which is not "
                          f"data (a name the pickle refers to but never applies): the file is "
                          f"damaged or forged")


def _to_tensor(array: np.ndarray, path: str, losses: dict):
    if array.dtype.kind == "f" and array.dtype != np.float16:
        with np.errstate(over="ignore"):
            half = array.astype(np.float16)
        losses[path or "the tensor"] = scalar_consts.range_losses(array, half)
        array = half
    try:
        return tensor(array)
    except (AneforgeError, OverflowError) as e:
        raise CheckpointError(f"af.load: tensor {path or '(the top level)'} of shape "
                              f"{array.shape} cannot be an aneforge tensor: {e}") from e


def load(f, map_location=None, weights_only: bool = True, *, strict_range: bool = False):
    """Load what `af.save` (or `torch.save`, for tensors and containers) wrote. Tensors come
    back as aneforge tensors. `map_location` is accepted for torch's signature (there is one
    device). A checkpoint of data never runs code from the file; a whole object (`af.save(model,
    f)`) loads only with `weights_only=False`, which unpickles it as torch.load does then
    (importing and running the classes it names: only for files you trust).

    Every record is checked against its tensors (absent, shorter or longer than declared, a
    view past its storage, a size past the machine's memory) before anything is allocated: a
    damaged file raises `CheckpointError` naming the record, never returns altered data.
    Floating values stored as float16 that change beyond rounding (finite values past 65504
    become inf, nonzero ones below 2**-25 become 0) give one `Float16RangeWarning` naming each
    tensor; `strict_range=True` raises `CheckpointError` instead.

    >>> import io, aneforge as af
    >>> buf = io.BytesIO()
    >>> af.save([af.tensor([1.0, 2.0]), {"n": 1}], buf)
    >>> x, meta = af.load(io.BytesIO(buf.getvalue()))
    >>> x.tolist(), meta
    ([1.0, 2.0], {'n': 1})
    """
    name = str(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "<file>")
    with _open(f, "rb") as handle:
        try:
            obj = _unpickle(handle, name)
        except CheckpointError as e:
            if weights_only is not False or not getattr(e, "refused", False):
                raise
            handle.seek(0)
            return _unpickle_objects(handle, name)
    losses: dict = {}
    try:
        out = _to_tensors(obj, "", losses)
    except RecursionError as e:
        raise CheckpointError(f"af.load({name}): containers nested too deeply") from e
    scalar_consts.report_range(f"af.load({name})", losses, strict_range, CheckpointError,
                               "af.load(..., strict_range=True) raises instead")
    return out


def _unpickle(handle, name: str):
    try:
        is_zip = zipfile.is_zipfile(handle)
        handle.seek(0)
        z = zipfile.ZipFile(handle) if is_zip else None
    except _ZIP_DAMAGE as e:
        raise CheckpointError(f"af.load({name}): the zip directory is damaged ({e})") from e
    if z is None:
        raise CheckpointError(f"af.load({name}): not a checkpoint archive (torch's zip format), "
                              f"or one truncated before its zip directory; files from "
                              f"torch.save(..., _use_new_zipfile_serialization=False) are not "
                              f"supported")
    with z:
        archive = _Archive(z, name)
        _check_byteorder(archive)
        try:
            return _Reader(archive).load()
        except AneforgeError:
            raise
        except _PICKLE_DAMAGE as e:
            raise archive.error(f"the record {archive.pkl} does not unpickle "
                                f"({type(e).__name__}: {str(e)[:200]})") from e


def _unpickle_objects(handle, name: str):
    """A whole object `af.save` pickled (`_ObjectWriter`): Python's unpickler, which imports the
    classes it names and runs their code (the caller asked for it: weights_only=False), each
    tensor record made once (tied weights come back tied)."""
    with zipfile.ZipFile(handle) as z:
        archive = _Archive(z, name)
        _check_byteorder(archive)
        made: dict[str, Tensor] = {}
        from .nn.parameter import Parameter

        def tensor_of(pid):
            if not (type(pid) is tuple and len(pid) == 7 and pid[0] == _OBJECT_TENSOR):
                raise archive.error(f"a persistent record {str(pid)[:60]} that is not an "
                                    f"aneforge tensor: a whole object torch.save wrote needs "
                                    f"torch to load it (save its state_dict() there instead)")
            _, key, dtype, np_dtype, shape, is_parameter, requires_grad = pid
            if key not in made:
                raw = archive.read(f"{archive.root}data/{key}")
                array = np.frombuffer(raw, np.dtype(np_dtype)).reshape(shape).copy()
                t = tensor(array, dtype=dtype)
                made[key] = Parameter(t, requires_grad=requires_grad) if is_parameter else \
                    t.requires_grad_(requires_grad)
            return made[key]

        unpickler = pickle.Unpickler(io.BytesIO(archive.read(archive.pkl)))
        unpickler.persistent_load = tensor_of
        return unpickler.load()


def _check_byteorder(archive: _Archive) -> None:
    path = f"{archive.root}byteorder"
    order = archive.read(path).decode(errors="replace").strip() if path in archive.names else "little"
    if order != "little":
        raise archive.error(f"storages are {order[:20]!r}-endian; only little-endian is read")


class _open:
    """A path (opened and closed here) or an already open binary file (left open)."""

    def __init__(self, f, mode: str):
        self.f, self.mode, self.owned = f, mode, isinstance(f, (str, os.PathLike))

    def __enter__(self):
        self.handle = open(self.f, self.mode) if self.owned else self.f
        return self.handle

    def __exit__(self, *exc):
        if self.owned:
            self.handle.close()


__all__ = ["save", "load"]
