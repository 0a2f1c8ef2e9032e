"""torch.onnx's names, so `import torch.onnx` runs with the import swapped: aneforge writes no
ONNX (the ANE runs Core ML programs), so `export` raises, naming the formats it writes
(`aneforge.export`: a Core ML `.mlpackage` or an ExecuTorch `.pte`), and `is_in_onnx_export()`
is False, as torch says outside an export (models branch on it).

>>> import aneforge as af
>>> af.onnx.is_in_onnx_export()
False
"""
from __future__ import annotations

from .errors import AneforgeError

__all__ = ["export", "is_in_onnx_export"]


def export(model, args=(), f=None, *rest, **kwargs):
    """Not available: raises AneforgeError saying what to use instead."""
    raise AneforgeError("torch.onnx.export: aneforge writes no ONNX (the ANE runs Core ML "
                        "programs); af.export(model, 'model.mlpackage', args) writes a Core ML "
                        "package and af.export(model, 'model.pte', args) an ExecuTorch program, "
                        "with the same example args")


def is_in_onnx_export() -> bool:
    return False
