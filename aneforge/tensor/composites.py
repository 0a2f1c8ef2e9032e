"""Elementwise functions the engine has no op for, built from ones it has: log1p, expm1, the
trigonometric and hyperbolic functions and their inverses, log2/log10/exp2, logaddexp. Each
is written for fp16: no cancellation where the textbook formula would have it, each branch
reading its input clamped to its own range (so a branch not taken stays finite, and so does
its zero gradient), and torch's values at the domain's ends (docstrings say how)."""
from __future__ import annotations

import math

from ..ops._grad import zeros
from .base import TensorBase
from .elementwise import where


class CompositesMixin(TensorBase):
    """Unary and binary math composed of engine ops (the Tensor's methods; af.X forwards)."""
    __slots__ = ()

    def log1p(self) -> "Tensor":
        """log(1 + x) without losing small x to the rounding of 1 + x (Goldberg:
        log(u) * x / (u - 1) with u = 1 + x as stored), log(1 + x) itself above x = 1.

        >>> import aneforge as af
        >>> af.log1p(af.tensor([0.0, 1e-3])).tolist()
        [0.0, 0.00099945068359375]
        """
        x = self._floating()
        s = x._bounded(hi=1.0)      # above 1, log(1 + x) loses nothing (and x = inf stays inf)
        u = s + 1.0
        grown = u - 1.0
        safe = where(grown == 0, grown + 1.0, grown)
        near = where(grown == 0, s, u.log() * (s / safe))
        return where(x > 1.0, (x + 1.0).log(), near)

    def expm1(self) -> "Tensor":
        """exp(x) - 1: its Taylor polynomial to x**7 / 7! near zero (no cancellation, and no
        activation table: the engine's tanh table errs by up to 0.0017), the plain difference
        elsewhere.

        >>> import aneforge as af
        >>> af.expm1(af.tensor([0.0, 1e-3])).tolist()
        [0.0, 0.0010013580322265625]
        """
        x = self._floating()
        s = x.clamp(-0.5, 0.5)
        p = s * (1.0 / 5040.0) + 1.0 / 720.0
        for c in (1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0):
            p = p * s + c
        return where(x.abs() < 0.5, p * s, x.exp() - 1.0)

    def _bounded(self, lo=None, hi=None) -> "Tensor":
        """self limited to [lo, hi] for one branch of a composite: a select, so a value on
        the bound keeps its whole gradient (maximum / minimum split a tie's in half)."""
        x = self if lo is None else where(self < lo, lo, self)
        return x if hi is None else where(x > hi, hi, x)

    def _magnitude(self) -> "Tensor":
        """|self| with gradient +1 at 0 (abs's is 0 there, as in torch): the odd functions
        below compute t(|x|) and put the sign back, so d/dx = t'(|x|) must hold at 0 too."""
        return where(self < 0, -self, self)

    def _odd(self, t) -> "Tensor":
        """t (computed from |self|) with self's sign: the odd functions' last step."""
        return where(self < 0, -t, t)

    def _polynomial(self, coefficients) -> "Tensor":
        """c0 + c1 x + c2 x**2 + ... by Horner's rule (coefficients from the highest)."""
        p = self * coefficients[0] + coefficients[1]
        for c in coefficients[2:]:
            p = p * self + c
        return p

    def tan(self) -> "Tensor":
        """sin(x) / cos(x) (the engine has no tan; op_catalog.csv: rejected on M1).

        >>> import aneforge as af
        >>> af.tan(af.tensor([0.0, 0.5])).tolist()
        [0.0, 0.54638671875]
        """
        x = self._floating()
        return x.sin() / x.cos()

    def atan(self) -> "Tensor":
        """arctan by range reduction: |x| > 1 reflects (pi/2 - atan(1/|x|)), |x| > tan(pi/8)
        shifts (pi/4 + atan((r - 1) / (r + 1))), leaving |z| <= 0.4143 for the odd series to
        z**11 (truncation < 1e-6, far below fp16's 2**-11). Each branch reads its input
        clamped to its own range, so the branch not taken stays finite, and so does its
        (zero) gradient.

        >>> import aneforge as af
        >>> af.atan(af.tensor([0.0, 1.0, -3.0])).tolist()
        [0.0, 0.785, -1.25]
        """
        x = self._floating()
        a = x._magnitude()
        big = a > 1.0
        r = where(big, 1.0 / a._bounded(lo=1.0), a)
        mid = r > 0.41421356237309503
        z = where(mid, (r - 1.0) / (r + 1.0), r)
        s = z * z
        p = z * s._polynomial((-1 / 11, 1 / 9, -1 / 7, 1 / 5, -1 / 3, 1.0))
        t = where(mid, p + math.pi / 4, p)
        return x._odd(where(big, math.pi / 2 - t, t))

    def asin(self) -> "Tensor":
        """atan(a / sqrt((1 - a)(1 + a))) for a = |x| < 1/2, pi/2 - 2 atan(sqrt((1 - a) /
        (1 + a))) above (1 - a is exact there, where 1 - a**2 would cancel), with x's sign. The
        gradient at +-1 is inf, as in torch (sqrt's at 0).
        Out of the domain the result is NaN under `af.numerics(specials="ieee")`; the engine
        has no NaN (see nan_to_num), so its default special values give a finite or inf value.

        >>> import aneforge as af
        >>> af.asin(af.tensor([0.0, 0.5, -1.0])).tolist()
        [0.0, 0.5234375, -1.5703125]
        """
        x = self._floating()
        a = x._magnitude()
        s = a._bounded(hi=0.5)
        near = (s / ((1.0 - s) * (1.0 + s)).sqrt()).atan()
        far = math.pi / 2 - a._bounded(lo=0.5)._half_angle() * 2.0
        return x._odd(where(a < 0.5, near, far))

    def acos(self) -> "Tensor":
        """2 atan(sqrt((1 - a) / (1 + a))) for a = |x| (no cancellation near 1, where
        pi/2 - asin would have it), pi minus that for negative x. The gradient at +-1 is -inf,
        as in torch.
        Out of the domain the result is NaN under `af.numerics(specials="ieee")`; the engine
        has no NaN (see nan_to_num), so its default special values give a finite or inf value.

        >>> import aneforge as af
        >>> af.acos(af.tensor([1.0, 0.0, -1.0])).tolist()
        [0.0, 1.5703125, 3.140625]
        """
        x = self._floating()
        t = x._magnitude()._half_angle() * 2.0
        return where(x < 0, math.pi - t, t)

    def _half_angle(self) -> "Tensor":
        """atan(sqrt((1 - a) / (1 + a))) = acos(a) / 2 of a = self in [0, 1]: its gradient at
        a = 1 comes from sqrt's at 0, inf."""
        return ((1.0 - self) / (1.0 + self)).sqrt().atan()

    def _exp_halves(self) -> tuple["Tensor", "Tensor"]:
        """(e**a / 2, e**-a / 2) of a = self >= 0 from h = e**(a/2): e**a itself overflows
        fp16 from a = 11.1, where sinh and cosh still hold values up to a = 11.8."""
        h = (self * 0.5).exp()
        return h * 0.5 * h, 0.5 / h / h

    def sinh(self) -> "Tensor":
        """(e**x - e**-x) / 2; below |x| = 1 its odd series to x**9 (no cancellation;
        truncation < 3e-8).

        >>> import aneforge as af
        >>> af.sinh(af.tensor([0.0, 1e-3, -2.0])).tolist()
        [0.0, 0.0010004043579101562, -3.626953125]
        """
        x = self._floating()
        small = x._bounded(-1.0, 1.0)
        series = small * (small * small)._polynomial(
            (1 / 362880, 1 / 5040, 1 / 120, 1 / 6, 1.0))
        up, down = x.abs()._bounded(lo=1.0)._exp_halves()
        return where(x.abs() < 1.0, series, x._odd(up - down))

    def cosh(self) -> "Tensor":
        """(e**|x| + e**-|x|) / 2 (a sum of positive terms: no cancellation).

        >>> import aneforge as af
        >>> af.cosh(af.tensor([0.0, -2.0])).tolist()
        [1.0, 3.76]
        """
        up, down = self._floating().abs()._exp_halves()
        return up + down

    def asinh(self) -> "Tensor":
        """log1p(a + a**2 / (1 + sqrt(1 + a**2))) for a = |x| < 1 (accurate near 0), and
        log(a) + log(1 + sqrt(1 + 1/a**2)) above (a**2 would overflow fp16 from a = 256).

        >>> import aneforge as af
        >>> af.asinh(af.tensor([0.0, 1e-3, -2.0])).tolist()
        [0.0, 0.0010004043579101562, -1.443359375]
        """
        x = self._floating()
        a = x._magnitude()
        s = a._bounded(hi=1.0)
        near = (s + s * s / ((s * s + 1.0).sqrt() + 1.0)).log1p()
        b = a._bounded(lo=1.0)
        r = 1.0 / b
        far = b.log() + ((r * r + 1.0).sqrt() + 1.0).log()
        return x._odd(where(a < 1.0, near, far))

    def acosh(self) -> "Tensor":
        """log1p(t + sqrt(t (t + 2))) with t = x - 1 (exact near 1) below x = 2, and
        log(x) + log(1 + sqrt(1 - 1/x**2)) above; NaN below 1, as in torch.
        Out of the domain the result is NaN under `af.numerics(specials="ieee")`; the engine
        has no NaN (see nan_to_num), so its default special values give a finite or inf value.

        >>> import aneforge as af
        >>> af.acosh(af.tensor([1.0, 2.0, 10.0])).tolist()
        [0.0, 1.317, 2.99]
        """
        x = self._floating()
        t = x._bounded(hi=2.0) - 1.0
        near = (t + (t * (t + 2.0)).sqrt()).log1p()
        b = x._bounded(lo=2.0)
        r = 1.0 / b
        far = b.log() + ((1.0 - r * r).sqrt() + 1.0).log()
        return where(x < 2.0, near, far)

    def atanh(self) -> "Tensor":
        """log1p(2a / (1 - a)) / 2 for a = |x| < 1/2, (log(1 + a) - log(1 - a)) / 2 above (1 - a
        is exact there, and the two logs add, never cancel), with x's sign: +-inf at +-1 with
        an inf gradient, NaN beyond, as in torch.
        Out of the domain the result is NaN under `af.numerics(specials="ieee")`; the engine
        has no NaN (see nan_to_num), so its default special values give a finite or inf value.

        >>> import aneforge as af
        >>> af.atanh(af.tensor([0.0, 0.5, -1.0])).tolist()
        [0.0, 0.54931640625, -inf]
        """
        x = self._floating()
        a = x._magnitude()
        s = a._bounded(hi=0.5)
        near = (s * 2.0 / (1.0 - s)).log1p()
        f = a._bounded(lo=0.5)
        d = 1.0 - f
        # log(d) at d = 0 is the engine's finite -45440: -1/d there is -inf, and its gradient
        # inf, as log's would be
        far = (1.0 + f).log() - where(d == 0, -1.0 / d, d.log())
        return x._odd(where(a < 0.5, near, far) * 0.5)

    def log2(self) -> "Tensor":
        """log(x) / ln 2.

        >>> import aneforge as af
        >>> af.log2(af.tensor([1.0, 8.0])).tolist()
        [0.0, 3.0]
        """
        return self.log() * (1.0 / math.log(2.0))

    def log10(self) -> "Tensor":
        """log(x) / ln 10.

        >>> import aneforge as af
        >>> af.log10(af.tensor([1.0, 100.0])).tolist()
        [0.0, 2.0]
        """
        return self.log() * (1.0 / math.log(10.0))

    def exp2(self) -> "Tensor":
        """2 ** x, as MIL pow (exp(x ln 2) would round x ln 2 to fp16 first: 0.5% off at
        x = 15).

        >>> import aneforge as af
        >>> af.exp2(af.tensor([0.0, 3.0, -1.0])).tolist()
        [1.0, 8.0, 0.5]
        """
        return 2.0 ** self._floating()

    def logaddexp(self, other) -> "Tensor":
        """log(e**self + e**other) = max + log1p(e**-|self - other|), without overflow; equal
        infinities give themselves, as in torch.

        >>> import aneforge as af
        >>> af.logaddexp(af.tensor([0.0, 100.0]), af.tensor([0.0, 1.0])).tolist()
        [0.693, 100.0]
        """
        a, b = self._operands(other, floating=True)
        d = where(a == b, zeros(a), (a - b).abs())      # inf - inf: NaN, not the 0 it means
        return a.maximum(b) + (-d).exp().log1p()

    def logaddexp2(self, other) -> "Tensor":
        """log2(2**self + 2**other) = max + log1p(2**-|self - other|) / ln 2.

        >>> import aneforge as af
        >>> af.logaddexp2(af.tensor([1.0, 10.0]), af.tensor([1.0, 0.0])).tolist()
        [2.0, 10.0]
        """
        a, b = self._operands(other, floating=True)
        d = where(a == b, zeros(a), (a - b).abs())
        return a.maximum(b) + (2.0 ** -d).log1p() * (1.0 / math.log(2.0))
