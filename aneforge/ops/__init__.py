"""The op registry. Importing this package defines every op (one module per family)."""
from . import activations, elementwise, linalg, misc, reduce, shape  # noqa: F401  (registers)
from .registry import REGISTRY, Attr, OpDef, register

__all__ = ["REGISTRY", "Attr", "OpDef", "register"]
