"""`af.save` / `af.load`: checkpoints in torch's own file format, written and read without torch.

The format is the one `torch.save` writes (PyTorch's `torch/serialization.py`): a zip archive
holding `<name>/data.pkl`, a pickle of the object in which each tensor is a call to
`torch._utils._rebuild_tensor_v2` on a storage that lives in its own record `<name>/data/<key>`
as raw little-endian bytes. So `torch.load(path, weights_only=True)` reads an aneforge
checkpoint, and `af.load` reads a `torch.save` file of tensors.

Nothing here runs pickled code. The writer emits the pickle opcodes itself (no `pickle.dumps`
of Python objects: the only globals named are torch's tensor rebuild function, its storage
classes and `collections.OrderedDict`, none of which is imported). The reader is an Unpickler
whose `find_class` knows exactly those names and refuses every other (torch's
`weights_only=True` allow-list is the same idea), mapping them to numpy.

What a checkpoint may hold: tensors (aneforge, numpy or torch), dicts (OrderedDict kept),
lists, tuples, str, int, float, bool and None, nested. Tensors load as aneforge tensors:
floating data as float16 (aneforge's storage type), integers as int32, bools as bool.
"""
from __future__ import annotations

import io
import math
import os
import pickle
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
            raise TypeError(f"af.save: cannot save a {type(obj).__name__}: a checkpoint holds "
                            f"tensors, dicts, lists, tuples, str, int, float, bool and None")
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
    reads it, as does `af.load`.

    >>> import io, aneforge as af, aneforge.nn as nn
    >>> buf = io.BytesIO()
    >>> af.save({"model": nn.Linear(2, 1).state_dict(), "epoch": 3}, buf)
    >>> ckpt = af.load(io.BytesIO(buf.getvalue()))
    >>> list(ckpt["model"]), ckpt["model"]["weight"].shape, ckpt["epoch"]
    (['weight', 'bias'], (1, 2), 3)
    """
    writer = _Writer()
    data = writer.dump(obj)
    with _open(f, "wb") as handle, zipfile.ZipFile(handle, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{ARCHIVE}/data.pkl", data)
        z.writestr(f"{ARCHIVE}/byteorder", "little")
        for key, a in enumerate(writer.storages):
            z.writestr(f"{ARCHIVE}/data/{key}", a.astype(a.dtype.newbyteorder("<")).tobytes())
        z.writestr(f"{ARCHIVE}/version", "3\n")


# ---- reading ------------------------------------------------------------------------------
# What a damaged archive or pickle raises from zipfile / pickle / struct: reported as damage.
_DAMAGE = (pickle.UnpicklingError, zipfile.BadZipFile, zlib.error, EOFError, ValueError,
           TypeError, IndexError, KeyError, AttributeError, struct.error, OverflowError,
           UnicodeDecodeError, NotImplementedError, RecursionError, MemoryError)
INT64_MAX = 2 ** 63 - 1


class _Storage(tuple):
    """(record key, its array, its storage type). A tuple: a forged BUILD opcode cannot swap
    the array."""
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
        declared = self.z.getinfo(path).file_size
        if size is not None and declared != size:
            raise self.error(f"the record {path} has {declared} bytes where its storage needs "
                             f"{size} (torch refuses it too)")
        try:
            raw = self.z.read(path)
        except _DAMAGE as e:
            raise self.error(f"the record {path} cannot be read ({type(e).__name__}: {e})") from e
        if size is not None and len(raw) != size:
            raise self.error(f"the record {path} holds {len(raw)} bytes where its storage needs "
                             f"{size}")
        return raw


def _rebuild_parameter(data, requires_grad=True, hooks=None, *rest):
    return data


_ALLOWED = {("torch._utils", "_rebuild_tensor_v2"): "rebuild_tensor",
            ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
            ("collections", "OrderedDict"): OrderedDict}
_ALLOWED.update({("torch", name): name for name in [*NUMPY_OF, BFLOAT16]})


def _is_index(n) -> bool:
    return type(n) is int and n >= 0


class _Reader(pickle.Unpickler):
    """Only the names a tensor checkpoint needs: anything else is refused, never imported.
    Every storage and tensor is checked against its record before anything is allocated."""

    def __init__(self, archive: _Archive):
        self.archive = archive
        super().__init__(io.BytesIO(archive.read(archive.pkl)))
        self.storages: dict[str, _Storage] = {}

    def find_class(self, module: str, name: str):
        found = _ALLOWED.get((module, name))
        if found is None:
            raise CheckpointError(
                f"af.load: the checkpoint names {module}.{name}, which a checkpoint of tensors, "
                f"containers and numbers does not need; refusing to load it (aneforge never "
                f"runs code from a checkpoint)")
        return getattr(self, found) if found == "rebuild_tensor" else found

    def persistent_load(self, pid):
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage"):
            raise self.archive.error(f"unknown persistent record {str(pid)[:80]}")
        _, kind, key, _location, numel = pid
        if not (isinstance(kind, str) and (kind in NUMPY_OF or kind == BFLOAT16)):
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
        if numel > INT64_MAX:
            raise self.archive.error(f"{what} has size {tuple(size)}: {numel} elements, past "
                                     f"int64 (torch's limit too)")
        end = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if numel else offset
        if end > array.size:
            raise self.archive.error(
                f"{what}: size {tuple(size)}, stride {tuple(stride)} and offset {offset} reach "
                f"element {end - 1}, past the storage's {array.size} elements (torch refuses it too)")
        _check_memory(self.archive, what, numel * (array.itemsize + 2))
        view = np.lib.stride_tricks.as_strided(array[offset:], tuple(size),
                                               tuple(s * array.itemsize for s in stride))
        return view.copy()


def _check_memory(archive: _Archive, what: str, nbytes: int) -> None:
    """Refuse a declared size the machine cannot hold, before anything is allocated."""
    if nbytes > archive.room:
        raise archive.error(f"{what} needs {nbytes} bytes, more than the {archive.room} this machine "
                            f"has available (ANEFORGE_SIM_MAX_BYTES raises the budget)")


def _to_tensors(obj, path: str, losses: dict):
    """Arrays (the reader's tensors) as aneforge tensors, inside any container; what their fp16
    cast loses, by path, into `losses`."""
    if isinstance(obj, np.ndarray):
        return _to_tensor(obj, path, losses)
    if isinstance(obj, dict):
        return type(obj)((k, _to_tensors(v, f"{path}[{k!r}]", losses)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_tensors(v, f"{path}[{i}]", losses) for i, v in enumerate(obj))
    return obj


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
    device); loading never runs code from the file, whatever `weights_only` says.

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
        obj = _unpickle(handle, name)
    losses: dict = {}
    try:
        out = _to_tensors(obj, "", losses)
    except RecursionError as e:
        raise CheckpointError(f"af.load({name}): containers nested too deeply") from e
    scalar_consts.report_range(f"af.load({name})", losses, strict_range, CheckpointError,
                               "af.load(..., strict_range=True) raises instead")
    return out


def _unpickle(handle, name: str):
    if not zipfile.is_zipfile(handle):
        raise CheckpointError(f"af.load({name}): not a checkpoint archive (torch's zip format), "
                              f"or one truncated before its zip directory; files from "
                              f"torch.save(..., _use_new_zipfile_serialization=False) are not "
                              f"supported")
    handle.seek(0)
    try:
        z = zipfile.ZipFile(handle)
    except _DAMAGE as e:
        raise CheckpointError(f"af.load({name}): the zip directory is damaged ({e})") from e
    with z:
        archive = _Archive(z, name)
        _check_byteorder(archive)
        try:
            return _Reader(archive).load()
        except AneforgeError:
            raise
        except _DAMAGE as e:
            raise archive.error(f"the record {archive.pkl} does not unpickle "
                                f"({type(e).__name__}: {str(e)[:200]})") from e


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
