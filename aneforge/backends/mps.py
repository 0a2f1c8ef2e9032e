"""torch.backends.mps: available, since "mps" names aneforge's one device (the Neural Engine,
or its simulator; aneforge/devices.py).

>>> import aneforge.backends.mps
>>> aneforge.backends.mps.is_available(), aneforge.backends.mps.is_built()
(True, True)
"""


def is_available() -> bool:
    """True: `device("mps")` is accepted everywhere, as the one device."""
    return True


def is_built() -> bool:
    return True
