"""The program boundary: in which form each value crosses it, on the host and inside the program.

The ANE's programs take and return only fp16, int8, uint8, int16 and uint16 (int32 I/O is
rejected at MIL parse: the MIL primer's validation list, docs/capabilities.md). So:

- float32 crosses as fp16 and bool as uint8, cast inside (one `cast`);
- int32 crosses as int16 when the data fit it, else as two uint16 parts stacked on a leading
  axis -- `v = (hi - 32768) * 65536 + lo` with `hi = (v >> 16) + 32768`, `lo = v & 0xFFFF` --
  recombined inside in int32 arithmetic, exact over the whole int32 range (token ids of a
  50257-word vocabulary, an int64 tensor's values). Which inputs take the parts form is part
  of the compile-cache key (`wide_leaves`): class labels keep the one-input int16 form whose
  bounded values the run plan fuses. Inside an af.compile capture an int32 input keeps that
  form only if a replay can check its new values first (an argument's: a replay whose values
  leave int16 captures again) or they never change (a constant's); others take the parts.
- an int32 *output* always leaves as two parts (the engine would wrap an int16 silently, and
  the program is built before its values exist): an argmax over 50257 logits comes back exact.
- a scalar crosses as shape (1,): Core ML's functions take and return rank >= 1.

Everything that knows the forms is here: `transport_type` (the boundary's type), `encode` /
`decode` (the host's side, used by realization and by af.compile's replay), `enter` / `leave`
(the ops the program opens and closes with).

    >>> import numpy as np
    >>> from aneforge import dtypes
    >>> from aneforge.ir import TensorType
    >>> t = TensorType((3,), dtypes.int32)
    >>> a = encode(np.array([1, 40000, -100], np.int32), t, wide=True)
    >>> a.dtype, a.shape
    (dtype('uint16'), (2, 3))
    >>> decode(a, t).tolist()
    [1, 40000, -100]
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import DTypeError
from ..hardware import kernels, limits
from ..ir import Operation, TensorType, Var
from ..ops.registry import apply_to_vars

BASE = 1 << 16          # the low part's range: lo in [0, 65536)
BIAS = 1 << 15          # the high part v >> 16 lies in [-32768, 32767]; biased into uint16
PREFIX = "io_"           # the names of the parts' ops (the one-cast forms keep theirs)


def made_here(op) -> bool:
    """Whether `op` is one of the ops the int32 parts form adds at the boundary."""
    return op.name.startswith(PREFIX)


def boundary_shape(shape: tuple) -> tuple:
    return shape or (1,)


def split(dtype) -> bool:
    """Whether values of `dtype` may need two parts (int32: no single I/O dtype holds it)."""
    return dtype == dtypes.int32


def wide_leaves(leaves: list, capture=None) -> tuple:
    """The positions of the int32 leaves (node, index) that cross as two parts: those whose
    data leave int16's range and, inside an af.compile capture, those whose values at a replay
    it cannot check before running (`capture.checked(node, i)`: an argument's it can, a
    constant's never change; a value computed or held elsewhere may leave int16)."""
    wide = []
    for j, (node, i) in enumerate(leaves):     # (a loop, `split` inline: every run)
        if node.types[i].dtype == dtypes.int32 and (
                not fits_int16(node.data[i]) or capture is not None and
                not capture.checked(node, i)):
            wide.append(j)
    return tuple(wide)


def fits_int16(array) -> bool:
    """Whether every value of `array` lies in int16's range (its int32 crosses as one int16)."""
    a = np.asarray(array)
    return not a.size or bool(_MIN(a, None) >= _INT16.min and _MAX(a, None) <= _INT16.max)


_INT16 = np.iinfo(np.int16)      # (np.iinfo costs a microsecond a call; realization asks each run)
# the ufuncs' reductions called directly: `a.min()` goes through numpy's Python wrapper first
# (~1 us a call, two calls for each int32 input of each run)
_MIN, _MAX = np.minimum.reduce, np.maximum.reduce


def _parts_shape(shape: tuple) -> tuple:
    """Each part's shape: a new leading axis while the rank allows, else axis 0 doubled."""
    shape = boundary_shape(shape)
    return (1,) + shape if len(shape) < limits.MAX_RANK else shape


def transport_type(t: TensorType, wide: bool = True) -> TensorType:
    """The type a value of type `t` has at the boundary (`wide`: int32 in two parts)."""
    if not (wide and split(t.dtype)):
        return TensorType(boundary_shape(t.shape), dtypes.transport(t.dtype))
    p = _parts_shape(t.shape)
    stacked = (2 * p[0],) + p[1:]
    if stacked[0] > limits.MAX_AXIS:
        raise DTypeError(f"an int32 tensor of shape {t.shape} cannot cross the program boundary: "
                         f"its two uint16 parts would make axis 0 of {stacked[0]}, over the ANE's "
                         f"{limits.MAX_AXIS} (the rank is already {limits.MAX_RANK}). Merge "
                         f"axes to rank 4 or less first.")
    return TensorType(stacked, dtypes.uint16)


# ---- the host's side ------------------------------------------------------------------------
def encode(array: np.ndarray, t: TensorType, wide: bool) -> np.ndarray:
    """Host data of type `t` as the program input of `transport_type(t, wide)`."""
    dtype = t.dtype     # (`split`, `boundary_shape`, `transport` inline: every input, every run)
    if wide and dtype == dtypes.int32:
        v = np.asarray(array).astype(np.int64, copy=False).reshape(_parts_shape(t.shape))
        n = v.shape[0]                  # hi then lo, each in [0, 65536): the casts are exact
        parts = np.empty((2 * n,) + v.shape[1:], np.uint16)
        np.add(v >> 16, BIAS, out=parts[:n], casting="unsafe")
        np.bitwise_and(v, BASE - 1, out=parts[n:], casting="unsafe")
        return parts
    shape, to = t.shape or (1,), dtypes.TRANSPORT.get(dtype, dtype)
    if to is dtype:                # the array itself where it has the shape: a run given the
        return array if array.shape == shape else array.reshape(shape)   # array it returned
    return kernels.astype(array, to.np).reshape(shape)     # float32 -> fp16 by the compiled cast


def decode(array: np.ndarray, t: TensorType) -> np.ndarray:
    """A program output of `transport_type(t)` as host data of type `t`."""
    if t.dtype == dtypes.int32:                    # (`split`, inline: every output)
        hi, lo = np.split(array.astype(np.int64), 2)
        return (((hi - BIAS) << 16) + lo).astype(np.int32).reshape(t.shape)
    out = array if array.dtype == t.dtype.np else array.astype(t.dtype.np)
    return out if out.shape == t.shape else out.reshape(t.shape)


# ---- inside the program ---------------------------------------------------------------------
class Emitter:
    """Appends boundary ops to a program under construction, typed and checked by the
    registry as recorded ops are (`fresh` names the results)."""

    def __init__(self, ops: list, fresh, prefix: str = ""):
        self.ops, self.fresh, self.prefix = ops, fresh, prefix

    def parts(self) -> "Emitter":
        """The same program, its ops named as the parts form's (`made_here`)."""
        return Emitter(self.ops, self.fresh, PREFIX)

    def op(self, type_: str, inputs: dict, attrs: dict):
        attrs, types = apply_to_vars(type_, inputs, attrs)
        outs = [self.fresh(self.prefix + type_, t) for t in types]
        self.ops.append(Operation(type_, inputs, attrs, outs, outs[0].name))
        return outs[0] if len(outs) == 1 else outs

    def const(self, value, dtype) -> Var:
        return self.op("const", {}, {"val": np.asarray(value, dtype.np)})

    def cast(self, v: Var, dtype) -> Var:
        return v if v.dtype == dtype else self.op("cast", {"x": v}, {"dtype": dtype.name})

    def reshape(self, v: Var, shape: tuple) -> Var:
        return v if v.shape == shape else self.op("reshape", {"x": v}, {"shape": shape})

    def half(self, v: Var, k: int) -> Var:
        """The first (k = 0) or second half of `v` along axis 0."""
        n, rank = v.shape[0] // 2, len(v.shape)
        begin, end, flags = [0] * rank, list(v.shape), (False,) * rank
        begin[0], end[0] = k * n, (k + 1) * n
        return self.op("slice_by_index", {"x": v}, {
            "begin": tuple(begin), "end": tuple(end), "stride": (1,) * rank,
            "begin_mask": flags, "end_mask": flags, "squeeze_mask": flags})

    def binary(self, type_: str, x: Var, y) -> Var:
        y = y if isinstance(y, Var) else self.const(y, x.dtype)
        return self.op(type_, {"x": x, "y": y}, {})


def enter(v: Var, t: TensorType, emit: Emitter) -> Var:
    """The boundary input `v` (either form) as a value of type `t`."""
    if v.dtype != dtypes.uint16 or not split(t.dtype):
        return emit.reshape(emit.cast(v, t.dtype), t.shape)
    emit = emit.parts()
    wide = emit.cast(v, dtypes.int32)
    hi, lo = (emit.half(wide, k) for k in (0, 1))
    high = emit.binary("mul", emit.binary("sub", hi, BIAS), BASE)    # in [-2**31, 2**31 - 2**16]
    return emit.reshape(emit.binary("add", high, lo), t.shape)


def leave(v: Var, emit: Emitter, int32_out: bool = False) -> Var:
    """The value `v` as a boundary output of `transport_type(v.type)` (int32 as itself with
    `int32_out`: a program exported for a runtime that takes int32, as ExecuTorch's)."""
    if int32_out and split(v.dtype):
        return emit.reshape(v, boundary_shape(v.shape))
    if not split(v.dtype):
        return emit.cast(emit.reshape(v, boundary_shape(v.shape)), dtypes.transport(v.dtype))
    emit = emit.parts()
    hi, lo = _floor_divmod(v, emit)
    p = _parts_shape(v.shape)
    parts = [emit.reshape(emit.cast(u, dtypes.uint16), p) for u in (emit.binary("add", hi, BIAS), lo)]
    return emit.op("concat", {"values": tuple(parts)}, {"axis": 0})


def _floor_divmod(v: Var, emit: Emitter) -> tuple[Var, Var]:
    """(v // 65536, v % 65536) of int32 `v`, exactly. The engine has no integer division: a
    first quotient comes from fp32 (a little off: fp32 rounds |v| > 2**24, the cast
    truncates toward zero); the remainder is exact in int32 and small (|rem| < 2**17), so its
    own fp32 quotient is exact and corrects the first."""
    f32, i32 = dtypes.float32, dtypes.int32
    f = emit.binary("minimum", emit.cast(v, f32), float(2 ** 31 - BASE))   # h * 65536 fits int32
    h = emit.cast(emit.binary("mul", f, 1.0 / BASE), i32)
    rem = emit.binary("sub", v, emit.binary("mul", h, BASE))               # |rem| < 2**17
    t = emit.cast(emit.binary("mul", emit.cast(rem, f32), 1.0 / BASE), i32)
    below = emit.binary("less", rem, emit.binary("mul", t, BASE))
    c = emit.binary("sub", t, emit.cast(below, i32))                       # floor(rem / 65536)
    return emit.binary("add", h, c), emit.binary("sub", rem, emit.binary("mul", c, BASE))
