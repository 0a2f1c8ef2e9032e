"""What the Tensor families may use of a tensor: the protocol `core.Tensor` implements.

The families (elementwise.py, movement.py, reduce.py, ...) are mixins below the Tensor class:
they build every result from `self` (and the tensors they are given) through these methods, so
none of them imports the class it ends up in (tinygrad's `mixin/` files work the same way).
"""
from __future__ import annotations

from typing import Any


class TensorBase:
    """A value of the lazy trace; `isinstance(x, TensorBase)` is "x is a Tensor" below core."""
    __slots__ = ()

    def _record(self, op: str, inputs: dict[str, Any], attrs: dict[str, Any]):
        """Record registered MIL op `op` on `inputs` (argument name -> tensor, or a tuple of
        them); its output tensor, or a tuple if it has several."""
        raise NotImplementedError

    def _const(self, value, dtype):
        """A literal of `dtype` baked into the program (part of the structure)."""
        raise NotImplementedError

    def _operands(self, other, floating: bool = False):
        """(self, other) as tensors of one dtype by torch's promotion rules."""
        raise NotImplementedError

    def _as_tensor(self, value):
        """`value` if it is a tensor, else a new leaf holding host data (a program input)."""
        raise NotImplementedError

    def _held(self, array, dtype):
        """A new leaf holding `array` itself, an array this package made already stored as
        `dtype` (an int32 index picked on the host): `_as_tensor` without its checks and copy
        of user data (inside af.compile's capture, a leaf the capture is told of, as any)."""
        raise NotImplementedError

    def _draw(self, draw, dtype):
        """A new leaf holding the host array `draw()` as `dtype` (a random draw: af.compile
        draws again on each replay, as an eager call would)."""
        raise NotImplementedError

    def _host(self, name: str, reason: str, fn, reads: tuple, out_dtypes: tuple):
        """A host segment: `fn(*arrays)` on the realized values of `reads` (numpy), its arrays
        new leaves of `out_dtypes` (a tuple of tensors); for what has no ANE form, mostly
        data-dependent shapes (nonzero, unique). Said once per `name`, with `reason`."""
        raise NotImplementedError

    def _host_data(self):
        """This tensor's array when it is host data no program can take (an axis past 65536:
        aneforge.core.empty), else None."""
        raise NotImplementedError

    def _kept(self, key: tuple, inputs: list, build, many: bool = False):
        """`build()`'s tensor (`many`: its tuple of tensors), a pure function of the tensors
        `inputs` and of `key`: recorded by running it once per kind (key, inputs' types, grad
        mode), re-recorded after that without running its Python
        (aneforge.core.trace.kept_stretch)."""
        raise NotImplementedError

    def _at(self, node, idx: int = 0):
        """A new handle on output `idx` of trace node `node` (autograd wraps the values a
        gradient rule reads this way)."""
        raise NotImplementedError
