"""torch.cuda as a machine without CUDA sees it: aneforge runs on one device, never CUDA.

`is_available()` is False and `device_count()` 0, so torch code that picks
`"cuda" if torch.cuda.is_available() else "cpu"` picks the device aneforge has; seeding is
ignored, as torch ignores it without CUDA. Anything that would place data on CUDA raises
(aneforge.devices.DeviceError) saying what to write instead.

>>> import aneforge as af
>>> af.cuda.is_available(), af.cuda.device_count()
(False, 0)
"""
from __future__ import annotations

from ..devices import use
from . import amp


def is_available() -> bool:
    return False


def device_count() -> int:
    return 0


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False, as torch says where CUDA is not available."""
    return False


def manual_seed(seed: int) -> None:
    """Ignored, as torch ignores it where CUDA is not available (use af.manual_seed)."""


manual_seed_all = manual_seed


def current_device() -> int:
    use("cuda", "af.cuda.current_device()")
    return 0


def set_device(device) -> None:
    use(device if not isinstance(device, int) else f"cuda:{device}", "af.cuda.set_device()")
