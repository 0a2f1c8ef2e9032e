"""Python numbers beyond float16's range, kept exact in fp16 arithmetic.

A Python number in an expression becomes a constant of the tensor's dtype. In fp16 that silently
breaks numbers fp16 cannot hold: ``x / 70000`` would divide by inf (0), ``x * 1e-8`` multiply
by 0, ``x + 70000`` add inf. torch computes such expressions with the scalar at full precision
and rounds the result once; aneforge rewrites them so that every constant is a normal fp16
number: the number keeps fp16's precision (11 significant bits, as any fp16 constant) but not
its range limits, and the result is rounded as torch's fp16 result is:

- ``x * c`` and ``x / c`` with ``|c|`` outside fp16's normal range ``[2**-14, 65504]``:
  ``c = m * 2**e`` with ``m`` a normal fp16 mantissa, applied as one multiplication (or division)
  by ``m`` and multiplications by exact powers of two (fp16 numbers themselves, so exact unless
  the result leaves fp16's range, where the true result does too). When the scale grows the
  powers of two come first, when it shrinks the mantissa does, so the partial results move
  monotonically toward the final one: nothing overflows or underflows before the result does,
  and the one rounding happens at the result's magnitude.
- ``x + c`` and ``x - c`` with ``|c| > 65504``: ``c`` is added as parts of ±65504 and a remainder
  (smaller than ``c``, so rounded more finely than ``c`` itself would be). Beyond ``3 * 65504``
  every finite fp16 ``x`` gives an infinite sum, which three parts of ±65504 give too (and
  ``-inf + 1e6`` stays ``-inf``, as in torch, instead of ``inf - inf``).
- ``c / x`` (``rtruediv``) with such a ``c``: ``(c1 / x) * 2**(e - k)`` with ``c1 = m * 2**k`` the
  normal fp16 number nearest the edge of the range on ``c``'s side.

Small addends (``x + 1e-8``) need nothing: fp16 rounding of the sum is the answer torch's fp16
gives. Integers and in-range numbers take the ordinary single-constant path.

Data from outside (checkpoints, state_dicts, host arrays) is stored as float16 once, so values
fp16 cannot hold cannot be kept exact there: ``range_losses`` counts what the cast changes
beyond rounding and ``report_range`` says so (a ``Float16RangeWarning``, or an error in strict
mode) instead of letting 1e5 become inf and 1e-9 become 0 silently.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..errors import Float16RangeWarning
from ..hardware import hazards

F16_MAX = 65504.0
F16_MIN_NORMAL = 2.0 ** -14
_POW2_STEPS = (15, -24)     # the largest and smallest exact power-of-two fp16 constants
_MAX_SHIFT = 45             # 2**45 * 2**-24 > 65504: any larger scale saturates every nonzero fp16
_MIN_SHIFT = -48            # 65504 * 2**-48 < 2**-25: any smaller scale flushes every fp16 to 0


def needs_split(op: str, value) -> bool:
    """Whether `op` with the Python number `value` as its constant operand leaves fp16's range."""
    if not isinstance(value, float) and not isinstance(value, int) or isinstance(value, bool):
        return False
    v = abs(float(value))
    if not math.isfinite(v) or op not in _SPLITTERS:
        return False
    if op in ("add", "sub"):
        return v > F16_MAX
    return v != 0.0 and (v > F16_MAX or v < F16_MIN_NORMAL)


def _pow2_steps(e: int) -> list[float]:
    """2**e as a product of exact fp16 powers of two, saturated where fp16 saturates anyway."""
    e = max(_MIN_SHIFT, min(_MAX_SHIFT, e))
    step = _POW2_STEPS[0] if e > 0 else _POW2_STEPS[1]
    out = []
    while e:
        s = max(e, step) if e < 0 else min(e, step)
        out.append(2.0 ** s)
        e -= s
    return out


def _mantissa(value: float) -> tuple[float, int]:
    m, e = math.frexp(value)            # value = m * 2**e, |m| in [0.5, 1)
    return m * 2.0, e - 1               # |m| in [1, 2): a normal fp16 number


def _scale(x, e: int, first):
    """x times 2**e, with the single rounding step `first` applied on the side that keeps every
    partial result between x and the final one (powers of two first when the scale grows, so a
    small x is not rounded while it is still small; the mantissa first when it shrinks)."""
    if e > 0:
        for p in _pow2_steps(e):
            x = x * p
        return first(x)
    x = first(x)
    for p in _pow2_steps(e):
        x = x * p
    return x


def _mul(x, value: float, reverse: bool):
    m, e = _mantissa(value)
    if e < 0:                            # shrinking: |m| in [0.5, 1) so x * m cannot overflow
        m, e = m / 2.0, e + 1
    return _scale(x, e, lambda t: t * m)


def _div(x, value: float, reverse: bool):
    m, e = _mantissa(value)
    if reverse:                          # c / x = (m * 2**k / x) * 2**(e - k), m * 2**k normal
        k = 14 if e > 0 else -14
        c1 = m * 2.0 ** k
        out = c1 / x
        for p in _pow2_steps(e - k):
            out = out * p
        return out
    if e < 0:                            # x / c grows: |m| in [0.5, 1) so x / m >= x
        m, e = m / 2.0, e + 1
    return _scale(x, -e, lambda t: t / m)


def _parts(value: float) -> list[float]:
    """value as up to two addends of ±65504 and an fp16-exact-as-possible remainder (the
    remainder is smaller than value, so its own rounding is finer than value's would be)."""
    big = math.copysign(F16_MAX, value)
    whole = min(3, int(abs(value) // F16_MAX))
    rest = value - whole * big
    return [big] * whole + ([rest] if rest and whole < 3 else [])


def _add(x, value: float, reverse: bool):
    out = x
    for p in _parts(value):
        out = out + p
    return out


def _sub(x, value: float, reverse: bool):
    if reverse:                          # c - x = (c1 - x) + c2 + ...
        first, *rest = _parts(value)
        out = first - x
        for p in rest:
            out = out + p
        return out
    return _add(x, -value, False)


_SPLITTERS = {"mul": _mul, "real_div": _div, "add": _add, "sub": _sub}


def apply_split(op: str, x, value, reverse: bool):
    """`x op value` (or `value op x` when `reverse`) with only fp16-normal constants."""
    return _SPLITTERS[op](x, float(value), reverse)


# ---- numbers no exact route keeps: a float16 constant of +-inf -----------------------------
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # aneforge/
F16_OVERFLOW = 65520.0      # 65504 + half its ulp: this and anything larger rounds to inf


def overflows(value) -> bool:
    """Whether the Python number `value` is finite but rounds to +-inf as a float16 constant.

    >>> overflows(1e6), overflows(65519.0), overflows(float("inf"))
    (True, False, False)
    """
    return type(value) in (float, int) and F16_OVERFLOW <= abs(value) < math.inf


def warn_constant(value) -> None:
    """A `Float16RangeWarning` at the user's line: `value` becomes an infinite fp16 constant."""
    sign = "-inf" if value < 0 else "inf"
    hazards.warn_at_user(f"the Python number {value!r} is past float16's range (+-65504): as a float16 "
                  f"constant it is {sign}. torch computes x % c, x // c, fmod with the exact "
                  f"number and refuses it in masked_fill, fill_, clamp, pow ('value cannot be "
                  f"converted to type c10::Half without overflow'), so the result may differ. "
                  f"Use a number within +-65504 (e.g. -65504 for a mask), compute in float32 "
                  f"(x.float() % c), or rescale the operands", Float16RangeWarning)


# ---- data from outside: what storing it as float16 loses ----------------------------------
def range_losses(array: np.ndarray, half: np.ndarray | None = None) -> tuple[int, int]:
    """(finite values that become +-inf, nonzero values that become 0) when floating `array` is
    stored as float16 (`half`, its cast, if already made). NaN and inf stay what they are.

    >>> import numpy as np
    >>> range_losses(np.array([1e5, -1e6, 1e-9, 1.0, np.inf, 0.0]))
    (2, 1)
    """
    if array.dtype.kind != "f" or array.dtype == np.float16 or not array.size:
        return 0, 0
    if half is None:
        with np.errstate(over="ignore"):
            half = array.astype(np.float16)
    bits = half.view(np.uint16)        # (numpy's float16 isfinite / count_nonzero are slow)
    over = 0 if (bits & 0x7FFF).max() < 0x7C00 else int(np.count_nonzero(np.isinf(half) &
                                                                         np.isfinite(array)))
    under = int(np.count_nonzero(array)) - int(np.count_nonzero(bits << 1))   # -0.0 is 0
    return over, max(under, 0)


def report_range(where: str, losses: dict, strict: bool = False, error=ValueError,
                 strict_hint: str = "") -> None:
    """One `Float16RangeWarning` at the user's line (or `error` when `strict`) for every tensor
    of `losses` ({name: (overflowed, flushed)}) that lost values, naming each and the counts;
    `strict_hint` says how to make it an error instead.

    >>> report_range("load", {"w": (2, 0), "b": (0, 0)}, strict=True)
    Traceback (most recent call last):
    ...
    ValueError: load: values change beyond fp16 rounding when stored as float16 (w: 2 finite value(s) past 65504 become +-inf); nothing was loaded. ...
    """
    lost = {name: counts for name, counts in losses.items() if any(counts)}
    if not lost:
        return
    parts = "; ".join(f"{name}: " + ", ".join(
        text for n, text in zip(counts, (f"{counts[0]} finite value(s) past 65504 become +-inf",
                                         f"{counts[1]} nonzero value(s) below 2**-25 become 0"))
        if n) for name, counts in lost.items())
    fix = ("rescale those values into fp16's range (and undo the scale in the model), keep such a "
           "tensor on the host (numpy) and feed it scaled")
    if strict:
        raise error(f"{where}: values change beyond fp16 rounding when stored as float16 ({parts}); "
                    f"nothing was loaded. {fix[0].upper()}{fix[1:]}")
    hazards.warn_at_user(f"{where}: values change beyond fp16 rounding when stored as float16, "
                         f"aneforge's floating type ({parts}). To keep them: {fix}. "
                         f"{strict_hint}".strip(), Float16RangeWarning)
