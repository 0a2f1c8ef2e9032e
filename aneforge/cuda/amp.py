"""torch.cuda.amp's spellings (torch's older API): `GradScaler(init_scale, ...)` without a
device, and `autocast(enabled, dtype, cache_enabled)`. They are aneforge.amp's, which run on the
ANE; gradients are also scaled automatically (aneforge.amp.auto_scaler).

>>> import aneforge as af
>>> af.cuda.amp.GradScaler(init_scale=512.0).get_scale()
512.0
"""
from __future__ import annotations

from .. import amp as _amp


class GradScaler(_amp.GradScaler):
    """torch.cuda.amp.GradScaler: aneforge.amp.GradScaler with torch's older signature."""

    def __init__(self, init_scale: float = 1024.0, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


class autocast(_amp.autocast):
    """torch.cuda.amp.autocast: accepted, changes nothing (see aneforge.amp.autocast)."""

    def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
        super().__init__("cuda", dtype, enabled, cache_enabled)
