"""torch's devices: `af.device`, the placement arguments (`device=`, `.to(...)`, `.cuda()`) and
`af.backends.mps` / `.cudnn` (aneforge/backends/).

aneforge has one device: wherever the backend runs its programs (the ANE on macOS, the
simulator elsewhere). `"cpu"`, `"mps"` and `"ane"` all name it, so torch code that picks one of
them runs unchanged; `"cuda"` has no meaning here and raises where it is used, saying what to do.

>>> import aneforge as af
>>> af.device("mps"), str(af.device("cuda:1")), af.device("cpu") == "ane"
(device(type='mps'), 'cuda:1', True)
"""
from __future__ import annotations

from .errors import AneforgeError

ONE_DEVICE = ("cpu", "mps", "ane")           # every one of them is where the backend runs
FOREIGN = ("cuda", "xpu", "hip", "xla", "meta", "mtia", "hpu", "ipu", "vulkan", "privateuseone")


class DeviceError(AneforgeError, RuntimeError):
    """A device aneforge cannot place data on (cuda, xpu, ...)."""


class device:
    """torch.device: a device type and an optional index ("cuda:0", ("cuda", 0), "cpu").

    Equality (also with strings) treats "cpu", "mps" and "ane" as the one device they are.

    >>> import aneforge as af
    >>> d = af.device("cuda", 0)
    >>> d.type, d.index, d, af.device("cpu") == af.device("mps")
    ('cuda', 0, device(type='cuda', index=0), True)
    """
    __slots__ = ("type", "index")

    def __init__(self, type, index: int | None = None):
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type          # torch: a bare ordinal is a CUDA device
        elif isinstance(type, str) and ":" in type:
            if index is not None:
                raise ValueError(f"device {type!r} already names an index; pass it once")
            type, _, index = type.partition(":")
            index = int(index) if index.isdigit() else _bad(f"{type}:{index}")
        if not isinstance(type, str) or type not in ONE_DEVICE + FOREIGN:
            _bad(type)
        if index is not None and (not isinstance(index, int) or index < 0):
            raise ValueError(f"device index must be a non-negative int, got {index!r}")
        self.type, self.index = type, index

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        index = "" if self.index is None else f", index={self.index}"
        return f"device(type={self.type!r}{index})"

    def _key(self):
        return ("one", None) if self.type in ONE_DEVICE else (self.type, self.index)

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except ValueError:
                return False
        return isinstance(other, device) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def _bad(name):
    raise ValueError(f"Expected one of {', '.join(ONE_DEVICE + FOREIGN)} device type at start of "
                     f"device string: {name!r}")


THE_DEVICE = device("ane")


def use(where, what: str = "device") -> device:
    """The device placement `where` names (None: the one device), raising for one aneforge does
    not have (cuda, ...) with what to write instead; `what` names the call for the message."""
    if where is None:
        return THE_DEVICE
    d = device(where)
    if d.type not in ONE_DEVICE:
        raise DeviceError(f"{what}: device {str(d)!r} is not available in aneforge, which runs every "
                          f"program on one device (the Apple Neural Engine, or its simulator). "
                          f"Use \"cpu\", \"mps\" or \"ane\", or drop the device argument.")
    return d


def is_device(value) -> bool:
    """Is `value` a device spelling (a device, or a string naming one)? (Tensor.to's arguments.)"""
    if isinstance(value, device):
        return True
    if not isinstance(value, str):
        return False
    return value.partition(":")[0] in ONE_DEVICE + FOREIGN
