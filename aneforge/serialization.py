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
import os
import pickle
import struct
import zipfile
from collections import OrderedDict

import numpy as np

from .creation import tensor
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
class _Storage:
    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array


def _rebuild_tensor(storage: _Storage, offset: int, size, stride, requires_grad=False,
                    hooks=None, metadata=None) -> np.ndarray:
    item = storage.array.itemsize
    view = np.lib.stride_tricks.as_strided(storage.array[offset:], tuple(size),
                                           tuple(s * item for s in stride))
    return view.copy()


def _rebuild_parameter(data, requires_grad=True, hooks=None, *rest):
    return data


_ALLOWED = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
            ("collections", "OrderedDict"): OrderedDict}
_ALLOWED.update({("torch", name): name for name in [*NUMPY_OF, BFLOAT16]})


class _Reader(pickle.Unpickler):
    """Only the names a tensor checkpoint needs: anything else is refused, never imported."""

    def __init__(self, data: bytes, records):
        super().__init__(io.BytesIO(data))
        self.records = records

    def find_class(self, module: str, name: str):
        found = _ALLOWED.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(
                f"af.load: the checkpoint names {module}.{name}, which a checkpoint of tensors, "
                f"containers and numbers does not need; refusing to load it (aneforge never "
                f"runs code from a checkpoint)")
        return found

    def persistent_load(self, pid):
        kind, storage, key, _location, numel = pid
        if kind != "storage":
            raise pickle.UnpicklingError(f"af.load: unknown persistent record {kind!r}")
        raw = self.records(str(key))
        if storage == BFLOAT16:         # the top half of a float32
            bits = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
            return _Storage(bits.view(np.float32))
        return _Storage(np.frombuffer(raw, NUMPY_OF[storage].newbyteorder("<")))


def _to_tensors(obj):
    """Arrays (the reader's tensors) as aneforge tensors, inside any container."""
    if isinstance(obj, np.ndarray):
        return tensor(obj)
    if isinstance(obj, dict):
        return type(obj)((k, _to_tensors(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_tensors(v) for v in obj)
    return obj


def load(f, map_location=None, weights_only: bool = True):
    """Load what `af.save` (or `torch.save`, for tensors and containers) wrote. Tensors come
    back as aneforge tensors. `map_location` is accepted for torch's signature (there is one
    device); loading never runs code from the file, whatever `weights_only` says.

    >>> import io, aneforge as af
    >>> buf = io.BytesIO()
    >>> af.save([af.tensor([1.0, 2.0]), {"n": 1}], buf)
    >>> x, meta = af.load(io.BytesIO(buf.getvalue()))
    >>> x.tolist(), meta
    ([1.0, 2.0], {'n': 1})
    """
    with _open(f, "rb") as handle:
        if not zipfile.is_zipfile(handle):
            raise ValueError("af.load: not a checkpoint archive (torch's zip format); files "
                             "from torch.save(..., _use_new_zipfile_serialization=False) are "
                             "not supported")
        handle.seek(0)
        with zipfile.ZipFile(handle) as z:
            names = z.namelist()
            pkl = next((n for n in names if n.endswith("/data.pkl")), None)
            if pkl is None:
                raise ValueError("af.load: the archive has no data.pkl record")
            root = pkl[:-len("data.pkl")]
            _check_byteorder(z, root, names)
            reader = _Reader(z.read(pkl), lambda key: z.read(f"{root}data/{key}"))
            return _to_tensors(reader.load())


def _check_byteorder(z: zipfile.ZipFile, root: str, names) -> None:
    order = z.read(f"{root}byteorder").decode().strip() if f"{root}byteorder" in names else "little"
    if order != "little":
        raise ValueError(f"af.load: storages are {order}-endian; only little-endian is read")


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
