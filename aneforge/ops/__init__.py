"""The op registry. Importing this package defines every op (one module per family)."""
from . import activations, elementwise, linalg, misc, reduce, shape  # noqa: F401  (registers)
from . import attention, conv, normalization, padding, pixel_shuffle  # noqa: F401,E402  (made by graph passes)
from .registry import REGISTRY, Attr, OpDef, register, validate

__all__ = ["REGISTRY", "Attr", "OpDef", "register", "validate"]
