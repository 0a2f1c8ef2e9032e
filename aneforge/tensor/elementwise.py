"""Elementwise Tensor math: arithmetic, comparisons, logic, unary functions, rounding,
select (af.where). Each is a registered MIL op or a short composite of them."""
from __future__ import annotations

import builtins
import math
import numbers

import numpy as np

from .. import dtypes
from ..core import scalar_consts
from ..errors import AneforgeError, DTypeError, ShapeError
from ..ops._grad import zero_link, zeros
from .base import TensorBase


def where(condition: "Tensor", input, other) -> "Tensor":
    """Elementwise `input` where `condition` is true, else `other` (MIL select).

    >>> import aneforge as af
    >>> x = af.tensor([-1.0, 2.0])
    >>> af.where(x > 0, x, 0.0).tolist()
    [0.0, 2.0]
    """
    if condition.dtype != dtypes.bool_:
        raise AneforgeError(f"where: condition must be a bool tensor, got {condition.dtype}; "
                            f"compare first, e.g. x > 0")
    if not isinstance(input, TensorBase) and not isinstance(other, TensorBase):
        dt = _scalars_dtype(input, other)
        a, b = condition._const(input, dt), condition._const(other, dt)
    elif not isinstance(input, TensorBase):
        b, a = other._operands(input)
    else:
        a, b = input._operands(other)
    try:
        shape = np.broadcast_shapes(condition.shape, a.shape, b.shape)
    except ValueError:
        raise ShapeError(f"where: shapes do not broadcast: condition {condition.shape}, input "
                         f"{a.shape}, other {b.shape} (aligned from the right, each axis equal "
                         f"or 1)") from None
    if np.broadcast_shapes(a.shape, b.shape) != shape:
        a = a.expand(shape)                 # Core ML types select as broadcast(a, b) alone
    return condition._record("select", {"cond": condition, "a": a, "b": b}, {})


def _scalars_dtype(*values) -> dtypes.DType:
    """torch's dtype for Python numbers alone: bool, else int (int32 here), else float16."""
    if builtins.all(isinstance(v, bool) for v in values):       # af.all is defined below
        return dtypes.bool_
    if builtins.all(isinstance(v, numbers.Integral) for v in values):
        return dtypes.int32
    return dtypes.float16


def _bools(x, other) -> tuple:
    if not isinstance(other, TensorBase):
        other = x._const(bool(other), dtypes.bool_)
    if x.dtype != dtypes.bool_ or other.dtype != dtypes.bool_:
        raise DTypeError(f"&, | and ^ need bool tensors, got {x.dtype} and {other.dtype}; "
                         f"compare first (x > 0) or cast with .bool()")
    shape = np.broadcast_shapes(x.shape, other.shape)   # the select's cond may not add axes
    return tuple(t if t.shape == shape else t.expand(shape) for t in (x, other))


# Bits the bitwise ops read of each integer dtype. The ANE has no bitwise unit: the bits are
# read with exact fp32 arithmetic (scaling by powers of two, truncating casts), so int32
# operands are exact below 2**23 in magnitude (fp32's integers; int32 data that crosses the
# program boundary is in int16's range anyway).
_BITS = {dtypes.int8: 8, dtypes.uint8: 8, dtypes.int16: 16, dtypes.uint16: 16, dtypes.int32: 24}
_SIGNED = (dtypes.int8, dtypes.int16, dtypes.int32)
# how a result bit follows from the operands' bits a, b (0 or 1)
_BIT_RULES = {"and": lambda a, b: a * b, "or": lambda a, b: a + b - a * b,
              "xor": lambda a, b: a + b - a * b * 2}
_SIGN_RULES = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b}


def _bitwise(x, other, rule: str):
    """x & other, | or ^ (by `rule`) of integer tensors (bools: the logical select forms),
    exact from supported ops: each operand's two's-complement bits as a new last axis, the
    rule bit by bit, then the weighted sum of the bits."""
    if not isinstance(other, TensorBase):
        other = x._const(other, dtypes.bool_ if isinstance(other, bool) else x.dtype)
    if x.dtype == dtypes.bool_ and other.dtype == dtypes.bool_:
        return None
    a, b = x._operands(other)
    if a.dtype not in _BITS:
        raise DTypeError(f"&, | and ^ need bool tensors or integer ones, got {x.dtype} and "
                         f"{other.dtype}; compare first (x > 0) or cast with .bool() (torch "
                         f"refuses floats too)")
    n, signed, dt = _BITS[a.dtype], a.dtype in _SIGNED, a.dtype
    a, b = a.to(dtypes.int32), b.to(dtypes.int32)      # MIL compares and adds int32, not int16
    bits_a, bits_b = _bits(a, n, signed), _bits(b, n, signed)
    weights = a._const(2 ** np.arange(n, dtype=np.int32), dtypes.int32)
    # an integer sum: a float one of more than 16 terms is a matmul with fp16 products
    low = (_BIT_RULES[rule](bits_a, bits_b).to(dtypes.int32) * weights).sum(-1)
    if signed:
        low = where(_SIGN_RULES[rule](a < 0, b < 0), low - 2 ** n, low)
    return low.to(dt)


def _powers_of_two(x, shift):
    """2**shift for the shift ops, of integers only (torch refuses float shifts)."""
    if x.dtype.is_float or x.dtype == dtypes.bool_:
        raise DTypeError(f"<< and >> need integer tensors, got {x.dtype}")
    if isinstance(shift, TensorBase):
        return 2 ** shift.to(x.dtype)
    bits = 8 * np.dtype(x.dtype.np).itemsize       # 2**shift in x's two's complement: 2**31 is
    wrapped = (2 ** int(shift) + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1)   # -2**31 in
    return x._const(wrapped, x.dtype)              # int32, so x << 31 wraps as torch's does


def _bits(v, n: int, signed: bool):
    """int32 v's n low bits (two's complement if signed) as float32 0/1 on a new last axis: bit
    k = trunc(low / 2**k) - 2 trunc(low / 2**(k + 1)), every step exact in fp32."""
    low = where(v < 0, v + 2 ** n, v) if signed else v
    scales = v._const(np.float32(2.0) ** -np.arange(n + 1, dtype=np.float32), dtypes.float32)
    steps = (low.to(dtypes.float32).unsqueeze(-1) * scales).to(dtypes.int32).to(dtypes.float32)
    return steps[..., :n] - steps[..., 1:] * 2.0


def _both_bool(x, other) -> bool:
    return x.dtype == dtypes.bool_ and isinstance(other, TensorBase) and other.dtype == dtypes.bool_


def _select(cond, a, b):
    return cond._record("select", {"cond": cond, "a": a, "b": b}, {})


def _int_power(x, n: int):
    """x ** n by repeated squaring: exact, where MIL pow is floating-only."""
    if n < 0:
        raise AneforgeError(f"integer tensors cannot be raised to a negative integer power ({n}); "
                            f"use x.float() ** {n}")
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else result * base
        n >>= 1
        if n:
            base = base * base
    return zeros(x) + 1 if result is None else result      # x ** 0: ones without mul by 0


def _int_pow_tensor(x, y):
    """int ** int tensors stay integer, as in torch: |x| ** y in fp32 (exact below 2**24),
    rounded to the nearest integer (a fraction, from a negative exponent, truncates to 0 as
    torch's integer pow does), with the sign of x for odd y."""
    q = x.abs().float() ** y.float()
    q = _select(q >= 1.0, q + 0.5, q).to(x.dtype)
    odd = (y - (y.float() * 0.5).to(y.dtype) * 2) != 0
    return _select((x < 0) & odd, -q, q)


class ElementwiseMixin(TensorBase):
    """Elementwise math: each result has the broadcast shape of the operands."""
    __slots__ = ()

    def __add__(self, o):
        return self._binary("add", o)

    def __radd__(self, o):
        return self._binary("add", o, reverse=True)

    def __sub__(self, o):
        return self._binary("sub", o)

    def __rsub__(self, o):
        return self._binary("sub", o, reverse=True)

    def __mul__(self, o):
        return self._binary("mul", o)

    def __rmul__(self, o):
        return self._binary("mul", o, reverse=True)

    def __truediv__(self, o):
        return self._binary("real_div", o, floating=True)

    def __rtruediv__(self, o):
        return self._binary("real_div", o, reverse=True, floating=True)

    def __pow__(self, exponent):
        return self.pow(exponent)

    def __rpow__(self, base):
        if isinstance(base, numbers.Integral) and not self.dtype.is_float:
            return _int_pow_tensor(self._const(int(base), self.dtype), self)
        return self._binary("pow", base, reverse=True, floating=True)

    def __neg__(self):
        return self.neg()

    def __pos__(self):
        return self

    def __abs__(self):
        return self.abs()

    def add(self, other, alpha=1):
        return self + (other * alpha if alpha != 1 else other)

    def sub(self, other, alpha=1):
        return self - (other * alpha if alpha != 1 else other)

    def mul(self, other):
        return self * other

    def neg(self) -> "Tensor":
        """-x, recorded as sub(0, x) (MIL has no neg)."""
        return self._binary("sub", 0, reverse=True)

    def pow(self, exponent) -> "Tensor":
        """x ** exponent; 2 becomes mul(x, x) and 0.5 sqrt (the ANE never emits square).
        An integer tensor to a non-negative integer power stays integer, as in torch."""
        if isinstance(exponent, numbers.Integral) and not self.dtype.is_float:
            return _int_power(self, int(exponent))
        if isinstance(exponent, TensorBase) and not (self.dtype.is_float or exponent.dtype.is_float):
            return _int_pow_tensor(*self._operands(exponent))
        if isinstance(exponent, numbers.Real) and not isinstance(exponent, TensorBase):
            special = {1: lambda x: x, 2: lambda x: x * x, 0.5: lambda x: x.sqrt(), -0.5: lambda x: x.rsqrt(),
                       -1: lambda x: 1 / x}
            if exponent in special:
                return special[exponent](self._floating() if exponent != 1 else self)
        return self._binary("pow", exponent, floating=True)

    def maximum(self, other):
        if _both_bool(self, other):         # MIL maximum takes numbers: on bools it is or
            return self | other
        return self._binary("maximum", other)

    def minimum(self, other):
        if _both_bool(self, other):
            return self & other
        return self._binary("minimum", other)

    def _compare(self, op: str, other):
        if self.dtype is dtypes.float16 and scalar_consts.overflows(other):
            # x < 1e9: the constant rounds to inf, as torch rounds it against a float16 tensor,
            # and the answer is exact for every finite x (no warning: nothing differs)
            other = math.copysign(math.inf, other)
        a, b = self._operands(other)
        if a.dtype == dtypes.bool_:       # MIL compares numbers: bools compare as 0/1 in fp16
            a, b = a.half(), b.half()
        return self._record(op, {"x": a, "y": b}, {})

    def __lt__(self, other):
        return self._compare("less", other)

    def __le__(self, other):
        return self._compare("less_equal", other)

    def __gt__(self, other):
        return self._compare("greater", other)

    def __ge__(self, other):
        return self._compare("greater_equal", other)

    def __eq__(self, other):
        return self._compare("equal", other)

    def __ne__(self, other):
        return self._compare("not_equal", other)

    lt, le, gt, ge, eq, ne = __lt__, __le__, __gt__, __ge__, __eq__, __ne__

    def __and__(self, o):
        out = _bitwise(self, o, "and")
        if out is not None:
            return out
        a, b = _bools(self, o)
        return _select(a, b, a)        # logical_and/or/xor have no ANE path (op_catalog.csv)

    def __or__(self, o):
        out = _bitwise(self, o, "or")
        if out is not None:
            return out
        a, b = _bools(self, o)
        return _select(a, a, b)

    def __xor__(self, o):
        out = _bitwise(self, o, "xor")
        if out is not None:
            return out
        a, b = _bools(self, o)
        return _select(a, ~b, b)

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__      # & | ^ commute

    def bitwise_left_shift(self, other) -> "Tensor":
        """self << other of integers: self * 2**other (exact while it fits the dtype).

        >>> import aneforge as af
        >>> (af.tensor([1, -3]) << 2).tolist()
        [4, -12]
        """
        return self * _powers_of_two(self, other)

    def bitwise_right_shift(self, other) -> "Tensor":
        """self >> other of integers: floor(self / 2**other), the arithmetic shift.

        >>> import aneforge as af
        >>> (af.tensor([13, -13]) >> 2).tolist()
        [3, -4]
        """
        if type(other) is int and other == 31 and self.dtype == dtypes.int32:
            return -(self < 0).to(self.dtype)          # only the sign is left: 0 or -1
        return self.floor_divide(_powers_of_two(self, other))

    __lshift__, __rshift__ = bitwise_left_shift, bitwise_right_shift

    def __invert__(self):
        """~x: logical not of bools; of integers -x - 1 (two's complement), the unsigned
        dtype's max - x."""
        if self.dtype == dtypes.bool_ or self.dtype.is_float:    # floats: MIL's dtype error
            return self._record("logical_not", {"x": self}, {})
        wide = self.to(dtypes.int32)
        flipped = -wide - 1 if self.dtype in _SIGNED else int(np.iinfo(self.dtype.np).max) - wide
        return flipped.to(self.dtype)

    def logical_not(self):
        return ~self

    def bitwise_and(self, other) -> "Tensor":
        """self & other: bits of integers (exact; see `_BITS`), logical and of bools.

        >>> import aneforge as af
        >>> af.bitwise_and(af.tensor([12, -3]), af.tensor([10, 6])).tolist()
        [8, 4]
        """
        return self & other

    def bitwise_or(self, other) -> "Tensor":
        """self | other.

        >>> import aneforge as af
        >>> af.bitwise_or(af.tensor([12, -3]), af.tensor([10, 6])).tolist()
        [14, -1]
        """
        return self | other

    def bitwise_xor(self, other) -> "Tensor":
        """self ^ other.

        >>> import aneforge as af
        >>> af.bitwise_xor(af.tensor([12, -3]), af.tensor([10, 6])).tolist()
        [6, -5]
        """
        return self ^ other

    def bitwise_not(self) -> "Tensor":
        """~self.

        >>> import aneforge as af
        >>> af.bitwise_not(af.tensor([0, 5, -1])).tolist()
        [-1, -6, 0]
        """
        return ~self

    def logical_and(self, other) -> "Tensor":
        """(self != 0) and (other != 0), a bool tensor.

        >>> import aneforge as af
        >>> af.logical_and(af.tensor([0, 2]), af.tensor([1, 3])).tolist()
        [False, True]
        """
        return (self != 0) & (self._as_tensor(other) != 0)

    def logical_or(self, other) -> "Tensor":
        """(self != 0) or (other != 0).

        >>> import aneforge as af
        >>> af.logical_or(af.tensor([0, 2]), af.tensor([0, 0])).tolist()
        [False, True]
        """
        return (self != 0) | (self._as_tensor(other) != 0)

    def logical_xor(self, other) -> "Tensor":
        """(self != 0) xor (other != 0).

        >>> import aneforge as af
        >>> af.logical_xor(af.tensor([0, 2]), af.tensor([1, 3])).tolist()
        [True, False]
        """
        return (self != 0) ^ (self._as_tensor(other) != 0)

    def _unary(self, op: str, **attrs) -> "Tensor":
        return self._record(op, {"x": self._floating()}, attrs)

    def exp(self):
        return self._unary("exp")

    def log(self):
        return self._unary("log", epsilon=0.0)

    def sqrt(self):
        return self._unary("sqrt")

    def rsqrt(self):
        return self._unary("rsqrt", epsilon=0.0)

    def abs(self):
        return self._record("abs", {"x": self}, {})

    def relu(self):
        """max(x, 0); integer tensors stay integer, as in torch (MIL relu is floating-only)."""
        return self._unary("relu") if self.dtype.is_float else self.maximum(0)

    def sigmoid(self):
        return self._unary("sigmoid")

    def tanh(self):
        return self._unary("tanh")

    def erf(self):
        return self._unary("erf")

    def sin(self):
        return self._unary("sin")

    def cos(self):
        return self._unary("cos")

    def reciprocal(self):
        return 1 / self

    def square(self):
        return self * self

    def clamp(self, min=None, max=None) -> "Tensor":
        """Clamp into [min, max]; numbers for both give one MIL clip, otherwise selects. As in
        torch, a value on a bound keeps its whole gradient (maximum/minimum would split it
        between their two operands at a tie), and NaN stays NaN.

        >>> import aneforge as af
        >>> x = af.tensor([-2.0, 0.0, 3.0], requires_grad=True)
        >>> x.clamp(min=0.0).sum().backward()
        >>> x.grad.tolist()
        [0.0, 1.0, 1.0]
        """
        if min is None and max is None:
            raise AneforgeError("clamp: give at least one of min and max")
        scalar = all(v is None or isinstance(v, numbers.Real) for v in (min, max))
        if scalar and min is not None and max is not None and min < max and self.dtype.is_float:
            return self._record("clip", {"x": self}, {"alpha": float(min), "beta": float(max)})
        out = self if min is None else where(self < min, min, self)
        return out if max is None else where(out > max, max, out)

    clip = clamp

    def masked_fill(self, mask: "Tensor", value) -> "Tensor":
        """`value` where `mask` is true, else self (MIL select)."""
        return where(mask, value, self)

    def where(self, condition: "Tensor", other) -> "Tensor":
        """`self` where `condition` is true, else `other`: torch.where(condition, self, other).

        >>> import aneforge as af
        >>> x = af.tensor([-1.0, 2.0])
        >>> x.where(x > 0, 0.0).tolist()
        [0.0, 2.0]
        """
        return where(condition, self, other)

    def _rounded(self, mode: str) -> "Tensor":
        """trunc / floor / ceil of a floating tensor: a cast to int32 truncates (exact below
        2**10 in fp16 and 2**23 in fp32: larger values are integers already). The gradient is
        zero everywhere, as torch's, through a zero term that stays finite (`zero_link`)."""
        x = self._floating()
        t = x.to(dtypes.int32).to(x.dtype)
        if mode == "floor":
            t = where(t > x, t - 1.0, t)
        elif mode == "ceil":
            t = where(t < x, t + 1.0, t)
        big = 1024.0 if x.dtype == dtypes.float16 else 8388608.0
        return where(x.abs() < big, t, x.detach()) + zero_link(x)

    def trunc(self) -> "Tensor":
        """Round toward zero.

        >>> import aneforge as af
        >>> af.tensor([-1.5, 2.5]).trunc().tolist()
        [-1.0, 2.0]
        """
        return self if not self.dtype.is_float else self._rounded("trunc")

    def floor(self) -> "Tensor":
        """Round down.

        >>> import aneforge as af
        >>> af.tensor([-1.5, 2.5]).floor().tolist()
        [-2.0, 2.0]
        """
        return self if not self.dtype.is_float else self._rounded("floor")

    def ceil(self) -> "Tensor":
        """Round up.

        >>> import aneforge as af
        >>> af.tensor([-1.5, 2.5]).ceil().tolist()
        [-1.0, 3.0]
        """
        return self if not self.dtype.is_float else self._rounded("ceil")

    def div(self, other, rounding_mode: str | None = None) -> "Tensor":
        """self / other; rounding_mode 'trunc' or 'floor' rounds the quotient (integers stay
        integer). Quotients are formed in fp32, as torch's reference computes them.

        >>> import aneforge as af
        >>> af.div(af.tensor([1.0, 3.0]), 2).tolist()
        [0.5, 1.5]
        >>> af.tensor([-7, 7]).div(2, rounding_mode="floor").tolist()
        [-4, 3]
        """
        if rounding_mode is None:
            return self / other
        if rounding_mode not in ("trunc", "floor"):
            raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got "
                             f"{rounding_mode!r}")
        a, b = self._operands(other)
        q = a.to(dtypes.float32) / b.to(dtypes.float32)
        return q._rounded(rounding_mode).to(a.dtype)

    def floor_divide(self, other) -> "Tensor":
        """floor(self / other), as Python's // (torch.floor_divide).

        >>> import aneforge as af
        >>> (af.tensor([-7, 7]) // 2).tolist()
        [-4, 3]
        """
        return self.div(other, rounding_mode="floor")

    def __floordiv__(self, other):
        return self.floor_divide(other)

    def __rfloordiv__(self, other):
        return self._operands(other)[1].floor_divide(self)

    def _modulo(self, other, mode: str) -> "Tensor":
        a, b = self._operands(other)
        wide = dtypes.float32
        af_, bf = a.to(wide), b.to(wide)
        if not a.dtype.is_float:
            return a - b * (af_ / bf)._rounded(mode).to(a.dtype)
        return (af_ - bf * (af_ / bf)._rounded(mode)).to(a.dtype)

    def remainder(self, other) -> "Tensor":
        """self - other * floor(self / other): the sign of `other`, as Python's %.

        >>> import aneforge as af
        >>> (af.tensor([-3, 5]) % 3).tolist()
        [0, 2]
        """
        return self._modulo(other, "floor")

    def fmod(self, other) -> "Tensor":
        """self - other * trunc(self / other): the sign of `self`, as C's fmod.

        >>> import aneforge as af
        >>> af.fmod(af.tensor([-3, 5]), 3).tolist()
        [0, 2]
        """
        return self._modulo(other, "trunc")

    def __mod__(self, other):
        return self.remainder(other)

    def __rmod__(self, other):
        return self._operands(other)[1].remainder(self)

    def copysign(self, other) -> "Tensor":
        """|self| with the sign of `other`. -0.0 counts as negative, as in torch, under IEEE
        special values; the engine computes 1/(-0) = +inf (sbryngelson/ane-guide, numerics
        chapter), so with its default special values a -0.0 in `other` reads as positive.

        >>> import aneforge as af
        >>> af.tensor([1.0, -2.0]).copysign(af.tensor([-5.0, 3.0])).tolist()
        [-1.0, 2.0]
        >>> with af.numerics(specials="ieee"):
        ...     af.tensor([1.0]).copysign(af.tensor([-0.0])).tolist()
        [-1.0]
        """
        a, b = self._operands(other, floating=True)
        negative = (b < 0) | (b.reciprocal() < 0)       # 1 / -0.0 = -inf
        mag = a.abs()
        out = where(negative, -mag, mag)
        return out + zero_link(b) if b.requires_grad else out

    def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> "Tensor":
        """|self - other| <= atol + rtol * |other| elementwise, compared in fp32 as torch's
        float reference; as in torch, equal values (infinities included) are close, an
        infinity and anything else are not, and NaNs are close to each other only with
        `equal_nan` (under the engine's default special values a NaN input reads as +inf:
        see isnan).

        >>> import aneforge as af
        >>> af.isclose(af.tensor([1.0, 2.0]), af.tensor([1.0, 2.5])).tolist()
        [True, False]
        >>> inf = float("inf")
        >>> af.isclose(af.tensor([inf, inf, 1.0]), af.tensor([inf, -inf, inf])).tolist()
        [True, False, False]
        """
        a, b = self._operands(other)
        if not a.dtype.is_float:
            return a == b
        a, b = a.float(), b.float()
        finite = a.isfinite() & b.isfinite()
        close = (finite & ((a - b).abs() <= (b.abs() * rtol + atol))) | (a == b)
        return close | (a.isnan() & b.isnan()) if equal_nan else close

    def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08,
                 equal_nan: bool = False) -> bool:
        """True if isclose holds everywhere (computes the values: a Python bool).

        >>> import aneforge as af
        >>> af.allclose(af.tensor([1.0, 2.0]), af.tensor([1.0, 2.0]))
        True
        """
        return bool(self.isclose(other, rtol, atol, equal_nan).all())

    def sign(self) -> "Tensor":
        """-1, 0 or 1 by the sign of each element (integers stay integer; zero gradient).

        >>> import aneforge as af
        >>> af.sign(af.tensor([-2.0, 0.0, 3.0])).tolist()
        [-1.0, 0.0, 1.0]
        """
        s = where(self > 0, 1, where(self < 0, -1, 0)).to(self.dtype)
        return s + zero_link(self) if self.dtype.is_float and self.requires_grad else s

    def round(self, decimals: int = 0) -> "Tensor":
        """Round half to even, as torch; with `decimals`, x * 10**decimals is rounded in fp32
        and scaled back (torch's formula). The gradient is zero.

        >>> import aneforge as af
        >>> af.round(af.tensor([0.5, 1.5, -2.5, 2.6])).tolist()
        [0.0, 2.0, -2.0, 3.0]
        >>> af.tensor([1.2345]).round(decimals=2).tolist()
        [1.23046875]
        """
        if not self.dtype.is_float:
            return self
        if decimals:
            scale = 10.0 ** builtins.abs(decimals)
            wide = self.to(dtypes.float32)
            wide = wide * scale if decimals > 0 else wide / scale
            wide = wide.round()
            return (wide / scale if decimals > 0 else wide * scale).to(self.dtype)
        f = self.floor()
        d = self.detach() - f.detach()
        half = f.detach() * 0.5
        odd = half.floor() != half
        return where((d > 0.5) | ((d == 0.5) & odd), f + 1.0, f)

    def isnan(self) -> "Tensor":
        """True where x is NaN (x != x). The engine turns a NaN entering it into +inf
        (sbryngelson/ane-guide, numerics chapter): under its default special values a NaN
        input reads as inf; `af.numerics(specials="ieee")` keeps NaN.

        >>> import aneforge as af
        >>> with af.numerics(specials="ieee"):
        ...     af.isnan(af.tensor([1.0, float("nan")])).tolist()
        [False, True]
        """
        return self != self

    def isinf(self) -> "Tensor":
        """True where x is +-inf.

        >>> import aneforge as af
        >>> af.isinf(af.tensor([1.0, float("-inf")])).tolist()
        [False, True]
        """
        return self.abs() == math.inf if self.dtype.is_float else self != self

    def isfinite(self) -> "Tensor":
        """True where x is neither NaN nor +-inf.

        >>> import aneforge as af
        >>> af.isfinite(af.tensor([1.0, float("inf")])).tolist()
        [True, False]
        """
        return (self == self) & (self.abs() != math.inf) if self.dtype.is_float else self == self

    def clamp_min(self, min) -> "Tensor":
        """clamp(min=min)."""
        return self.clamp(min=min)

    def clamp_max(self, max) -> "Tensor":
        """clamp(max=max)."""
        return self.clamp(max=max)

    def subtract(self, other, alpha=1) -> "Tensor":
        """torch's alias of sub."""
        return self.sub(other, alpha)

    def multiply(self, other) -> "Tensor":
        """torch's alias of mul."""
        return self * other

    def true_divide(self, other) -> "Tensor":
        """torch's alias of true division (/)."""
        return self / other

    def negative(self) -> "Tensor":
        """torch's alias of neg."""
        return self.neg()

    def lerp(self, end, weight) -> "Tensor":
        """self + weight * (end - self).

        >>> import aneforge as af
        >>> af.lerp(af.tensor([0.0, 2.0]), af.tensor([4.0, 4.0]), 0.5).tolist()
        [2.0, 3.0]
        """
        return self + (end - self) * weight

    def addcmul(self, tensor1, tensor2, *, value=1) -> "Tensor":
        """self + value * tensor1 * tensor2.

        >>> import aneforge as af
        >>> af.addcmul(af.ones(2), af.tensor([1.0, 2.0]), af.tensor([3.0, 4.0]), value=0.5).tolist()
        [2.5, 5.0]
        """
        prod = tensor1 * tensor2
        return self + (prod if value == 1 else prod * value)

    def addcdiv(self, tensor1, tensor2, *, value=1) -> "Tensor":
        """self + value * tensor1 / tensor2.

        >>> import aneforge as af
        >>> af.addcdiv(af.ones(2), af.tensor([1.0, 2.0]), af.tensor([2.0, 4.0])).tolist()
        [1.5, 1.5]
        """
        quot = tensor1 / tensor2
        return self + (quot if value == 1 else quot * value)

    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None,
                   neginf: float | None = None) -> "Tensor":
        """NaN -> nan, +inf -> posinf, -inf -> neginf (the dtype's extremes by default). The
        engine coerces a NaN entering it to +inf (sbryngelson/ane-guide, numerics chapter), so
        with its default special values a NaN input becomes posinf, not `nan`.

        >>> import aneforge as af
        >>> af.tensor([float("nan"), float("inf"), 1.0]).nan_to_num().tolist()
        [65504.0, 65504.0, 1.0]
        >>> with af.numerics(specials="ieee"):
        ...     af.tensor([float("nan"), float("inf"), 1.0]).nan_to_num().tolist()
        [0.0, 65504.0, 1.0]
        """
        if not self.dtype.is_float:
            return self
        big = float(np.finfo(self.dtype.np).max)
        x = where(self != self, nan, self)
        x = where(x == float("inf"), big if posinf is None else posinf, x)
        return where(x == float("-inf"), -big if neginf is None else neginf, x)
