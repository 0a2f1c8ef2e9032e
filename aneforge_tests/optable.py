"""The op table: every op of the registry, reached through the public API, as one line each.

A case is a name, input shapes, an input generator, ONE function `fn(m, *inputs)` called with
`m = aneforge` or `m = torch` (the API uses torch's names, so one lambda serves both; `torch_fn`
overrides it where the spellings differ) and a tolerance. Inputs are drawn with numpy (seeded
by the case name), rounded to fp16, and the SAME values go to torch in float32: the only
difference left is aneforge's fp16 computation. Forward tests (test_ops.py) run the table now;
gradient and serializer tests reuse it through `arrays`, `af_inputs`, `torch_inputs`, `call`.

Tolerance rule: |af - torch| <= atol + rtol * |torch| + cond * fn(|inputs|)
(u = 2**-11, the unit roundoff of fp16: one rounding moves a value by at most u * |value|)

- EXACT: data movement, comparisons, logic, selects, max/min, casts of fp16 values, integer
  arithmetic on small ints. No rounding happens, so rtol = atol = 0.
- ONE_ROUNDING: the result is computed in fp32 from fp16 operands and rounded to fp16 once
  (add/sub/mul of fp16 values are exact in fp32; div, sqrt, exp, ... are within an fp32 ulp).
  rtol = 2u = 2**-10 (twice the bound: covers a double rounding fp32 -> fp16 and the
  half-away rounding switch); atol = 2**-24 (one fp16 subnormal step: results below 2**-14
  have a fixed spacing of 2**-24, so the relative bound does not hold there).
- TRANSCENDENTAL: one rounding as above (the sim's kernels are accurate to ~1e-7 relative, gelu
  tails included), but torch's fp32 REFERENCE is not near zeros of the result: its gelu forms
  0.5 x (1 + erf) and 0.5 x (1 + tanh), which cancel to an absolute error of about
  |x|/2 * 2**-23 <= 7e-7 for |x| <= 12 (measured: 0.5% relative at gelu(-4)).
  atol = 2**-20 (~9.5e-7) covers it; rtol = 2u as above.
- summed(K): reduce_sum/reduce_mean accumulate in fp16 (ANE_FACTS, "reduce_sum accumulates
  narrow"): each of the K-1 additions rounds the running sum, so (recursive summation,
  Higham 4.2) |error| <= (K-1) u sum|x_i|: cond = K u applied to the same reduction of |x|.
  That is the worst case; it grows with K and is far above the typical sqrt(K) u |S|, so
  long sums are also checked EXACTLY on integer-valued data whose partial sums stay within
  2048 (every fp16 addition is then exact, in any order), and on positive data (where
  sum|x| = |S|: the bound is K/2 ulps of the result).
- products(K): matmul/linear round each product to fp16 (u |x_i y_i|), accumulate in fp32
  (K 2**-24 sum|x_i y_i|) and round the output once (u |C|): cond = u + K 2**-24 on |x| @ |y|,
  rtol = 2u. Wide accumulation makes it nearly independent of K, unlike reduce_sum.
- log_softmax(K, span): a composite of fp16-stored steps with |x - max| <= span: the shift
  (u span), exp (u per term), the narrow sum of K terms in [0, 1] (relative (K-1) u), log of it
  (absolute = the sum's relative error, + u ln K) and the final subtraction (u |result|):
  atol = u (K + 2 span + ln K + 2), rtol = 2u.
Results beyond fp16's range (|t| >= 65520 rounds to inf) are expected as ±inf.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

import aneforge as af
import aneforge.nn.functional  # noqa: F401  (af.nn.functional, as torch.nn.functional)

U = 2.0 ** -11                  # fp16 unit roundoff
F16_OVERFLOW = 65520.0          # the smallest magnitude that rounds to inf in fp16


@dataclass(frozen=True)
class Tol:
    rtol: float = 0.0
    atol: float = 0.0
    cond: float = 0.0           # times fn(|inputs|): for sums whose error scales with sum|terms|


EXACT = Tol()
ONE_ROUNDING = Tol(2 * U, 2.0 ** -24)
TRANSCENDENTAL = Tol(2 * U, 2.0 ** -20)


def summed(k: int) -> Tol:
    return Tol(2 * U, 2.0 ** -24, k * U)


def products(k: int) -> Tol:
    return Tol(2 * U, 2.0 ** -24, U + k * 2.0 ** -24)


def summed_wide(k: int) -> Tol:
    """An fp32 reduce_sum (of x.float()): fp32 rounding per addition, one fp16 rounding out."""
    return Tol(2 * U, 2.0 ** -24, k * 2.0 ** -24)


def log_softmax_tol(k: int, span: float) -> Tol:
    return Tol(2 * U, U * (k + 2 * span + math.log(k) + 2))


# Input generators: fp16-exact values of a known range (rounded to fp16 by `arrays`).
GENERATORS: dict[str, Callable[[np.random.Generator, tuple], np.ndarray]] = {
    "normal": lambda r, s: r.standard_normal(s),
    "unit4": lambda r, s: r.uniform(-4, 4, s),                        # |x - max| <= 8
    "pos": lambda r, s: r.uniform(0.25, 4, s),                        # log, sqrt, rsqrt, pow base
    "nonzero": lambda r, s: r.choice([-1, 1], s) * r.uniform(0.5, 2, s),   # divisors
    "wide": lambda r, s: r.uniform(-12, 12, s),                       # activation tails, overflow
    "lo": lambda r, s: r.uniform(-2, -0.25, s),                       # clamp bounds, lo < hi
    "hi": lambda r, s: r.uniform(0.25, 2, s),
    "perm": lambda r, s: (r.permutation(max(1, int(np.prod(s)))) - np.prod(s) // 2).reshape(s) / 4,
    "iperm": lambda r, s: (r.permutation(max(1, int(np.prod(s)))) - 8).reshape(s).astype(np.int32),
    "fint": lambda r, s: r.integers(-4, 5, s).astype(np.float64),     # exact sums while |S| <= 2048
    "int": lambda r, s: r.integers(-8, 9, s).astype(np.int32),
    "intnz": lambda r, s: (r.choice([-1, 1], s) * r.integers(1, 9, s)).astype(np.int32),
    "bool": lambda r, s: r.random(s) < 0.5,
    "i16": lambda r, s: r.integers(-2 ** 15, 2 ** 15, s).astype(np.int32),  # int16's range
    "u8": lambda r, s: r.integers(0, 256, s).astype(np.int32),
    "prob": lambda r, s: r.uniform(0.02, 0.98, s),                        # probabilities
    "unit1": lambda r, s: r.uniform(-0.99, 0.99, s),                     # asin, acos, atanh
    "halves": lambda r, s: r.integers(-8, 9, s) * 0.5,                    # round's ties
    "huge": lambda r, s: r.choice([-1, 1], s) * r.uniform(300, 400, s),   # fp16 x^3 overflows
    "zbase": lambda r, s: r.choice([0.0, 0.0, 0.5, 2.0], s),              # pow at zero bases
    "zexp": lambda r, s: r.choice([0.0, 1.0, 2.0, -1.0, 0.5], s),
    "fexp": lambda r, s: r.integers(0, 4, s).astype(np.float64),         # integral exponents
    "iexp": lambda r, s: r.integers(0, 5, s).astype(np.int32),
    "idx4": lambda r, s: r.integers(0, 4, s).astype(np.int32),                # indices < 4
    "uidx4": lambda r, s: np.argsort(r.random(tuple(s[:-1]) + (4,)), -1)[..., :s[-1]].astype(
        np.int32),                                                          # distinct per row
    "cls4": lambda r, s: r.integers(0, 4, s).astype(np.int32),                # class indices
    "cls4ign": lambda r, s: r.choice([-100, 0, 1, 2, 3], s).astype(np.int32),  # with ignored
}


@dataclass(frozen=True)
class OpCase:
    name: str
    shapes: tuple                      # one shape per tensor input
    fn: Callable                       # fn(m, *inputs) with m = aneforge or torch
    tol: Tol = ONE_ROUNDING
    gen: str | tuple = "normal"        # one generator for all inputs, or one per input
    torch_fn: Callable | None = None   # when torch spells it differently
    bakes_inputs: bool = False         # the case turns input data into constants on purpose
    grad: bool = True                  # False: its gradient is singular on the engine on purpose

    def gens(self) -> tuple:
        return (self.gen,) * len(self.shapes) if isinstance(self.gen, str) else self.gen


def arrays(case: OpCase, salt: int = 0) -> list[np.ndarray]:
    """The case's inputs: seeded by name (and `salt`, for new data of the same shapes), with
    floats rounded to fp16."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()) + 7919 * salt)
    out = []
    for shape, gen in zip(case.shapes, case.gens()):
        a = np.asarray(GENERATORS[gen](rng, tuple(shape)))
        out.append(a.astype(np.float16) if a.dtype.kind == "f" else a)
    return out


def af_inputs(xs, requires_grad: bool = False) -> list:
    return [af.tensor(x, requires_grad=requires_grad and x.dtype.kind == "f") for x in xs]


def torch_inputs(xs, requires_grad: bool = False) -> list:
    return [torch.tensor(x.astype(np.float32) if x.dtype.kind == "f" else x,
                         requires_grad=requires_grad and x.dtype.kind == "f") for x in xs]


def flat(result) -> list:
    """Outputs as a flat list (tuples from split, (values, indices) from max(dim), ...)."""
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in flat(r)]
    return [result]


def call(case: OpCase, m, inputs) -> list:
    fn = case.torch_fn if m is torch and case.torch_fn is not None else case.fn
    return flat(fn(m, *inputs))


def family(dtype) -> str:
    """'float', 'int' or 'bool', for an aneforge or a torch dtype."""
    if dtype in (torch.bool, af.bool):
        return "bool"
    if isinstance(dtype, torch.dtype):
        return "float" if dtype.is_floating_point else "int"
    return "float" if dtype.is_float else "int"


def expected(t: np.ndarray) -> np.ndarray:
    """torch's value as fp16 storage would hold it: beyond fp16's range means ±inf."""
    if t.dtype.kind != "f":
        return t
    return np.where(np.abs(t) >= F16_OVERFLOW, np.copysign(np.inf, t), t)


def bound(case: OpCase, t: np.ndarray, abs_ref: np.ndarray | None) -> np.ndarray:
    b = case.tol.atol + case.tol.rtol * np.abs(t)
    return b if abs_ref is None else b + case.tol.cond * abs_ref


def _engine_div(m, x, y):
    """torch's x / y as the engine gives it: 0 / 0 is +0 (gradient 0 there)."""
    zero = (x == 0) & (y == 0)
    return m.where(zero, 0.0 * x.detach(), x / m.where(zero, m.ones_like(y), y))


# ---- the table ---------------------------------------------------------------------------
S = (3, 4)
C = OpCase
T3 = TRANSCENDENTAL


def table(worst: float) -> Tol:
    """sigmoid, tanh, gelu and silu under the default M1 model read the engine's 33-knot
    tables, whose worst absolute error against the exact function is published (measured on
    M1, after the fp16 store: sigmoid 0.0034, tanh 0.0017, gelu 0.0059; sbryngelson/ane-guide
    part-1-machine/03-numerics.md): atol = that figure + torch's own fp32 error (2**-20, see
    TRANSCENDENTAL), rtol = 2u as for one rounding."""
    return Tol(2 * U, worst + 2.0 ** -20)


# silu's worst error is not published (only its origin bias, -0.001259): bounded by the
# largest figure of the standard set, gelu's.
T_SIGMOID, T_TANH, T_GELU, T_SILU = table(0.0034), table(0.0017), table(0.0059), table(0.0059)


def _const_linear(m, x, w, b):
    """MIL `linear` (weight and bias must be constants): what passes fuse a frozen layer into."""
    if m is torch:
        return torch.nn.functional.linear(x, w, b)
    from aneforge.tensor import const, record_op
    return record_op("linear", {"x": x, "weight": const(w.numpy(), af.float16),
                          "bias": const(b.numpy(), af.float16)}, {})


def _conv(m, x, w, b, strides=(1, 1), pad=(0, 0, 0, 0), dilations=(1, 1), groups=1):
    """MIL `conv` with constant weight and bias (numpy arrays); torch pads explicitly."""
    if m is torch:
        xp = torch.nn.functional.pad(x, (pad[2], pad[3], pad[0], pad[1]))
        t = lambda a: None if a is None else torch.tensor(np.asarray(a, np.float32))  # noqa: E731
        return torch.nn.functional.conv2d(xp, t(w), t(b), strides, 0, dilations, groups)
    from aneforge.tensor import const, record_op
    ins = {"x": x, "weight": const(w, af.float16)}
    if b is not None:
        ins["bias"] = const(b, af.float16)
    return record_op("conv", ins, dict(strides=strides, pad_type="custom", pad=pad,
                                 dilations=dilations, groups=groups))


def _const_conv(m, x, w, b, **kw):
    """MIL `conv` of input data baked into its constant weight and bias (as _const_linear)."""
    arr = (lambda a: a.detach().numpy()) if m is torch else (lambda a: a.numpy())
    return _conv(m, x, arr(w), arr(b), **kw)


def _conv_op(m, x, cout, k, groups=1, bias=True, **kw):
    """MIL `conv` with a fixed constant weight [cout, C/groups, k, k] (and bias). Positive
    weights and bias: the products(K) bound evaluates fn(|x|), and they are no input."""
    rng = np.random.default_rng(cout * 100 + k * 10 + groups)
    w = rng.uniform(0.25, 1.5, (cout, x.shape[1] // groups, k, k)).astype(np.float16)
    b = np.linspace(0.25, 0.75, cout).astype(np.float16) if bias else None
    return _conv(m, x, w, b, groups=groups, **kw)


def _f(m):
    return m.nn.functional


def _fused(m, op, inputs, torch_fn, **attrs):
    """An op graph passes fuse into (aneforge.ops.normalization / attention / leaky_relu),
    recorded directly: the public API spells these as composites."""
    if m is torch:
        return torch_fn()
    from aneforge.tensor import record_op
    return record_op(op, inputs, attrs)


def _affine_consts(n):
    """A fixed gamma and beta of length n (constants: MIL needs them constant)."""
    return np.linspace(0.5, 1.5, n).astype(np.float16), np.linspace(-0.25, 0.25, n).astype(np.float16)


def _layer_norm_op(m, x, dims):
    from aneforge.tensor import const
    shape = x.shape[-dims:]
    g, b = (a.reshape(shape) for a in _affine_consts(int(np.prod(shape))))
    t = lambda a: torch.tensor(a.astype(np.float32))    # noqa: E731
    return _fused(m, "layer_norm", {"x": x, "gamma": const(g, af.float16) if m is af else None,
                                    "beta": const(b, af.float16) if m is af else None},
                  lambda: torch.nn.functional.layer_norm(x, shape, t(g), t(b), 1e-5),
                  axes=tuple(range(-dims, 0)), epsilon=1e-5)


def _instance_norm_op(m, x):
    from aneforge.tensor import const
    g, b = _affine_consts(x.shape[1])
    t = lambda a: torch.tensor(a.astype(np.float32))    # noqa: E731
    return _fused(m, "instance_norm", {"x": x, "gamma": const(g, af.float16) if m is af else None,
                                       "beta": const(b, af.float16) if m is af else None},
                  lambda: torch.nn.functional.instance_norm(x, weight=t(g), bias=t(b), eps=1e-5),
                  epsilon=1e-5)


def _pad(m, x, pad, mode):
    """MIL pad: (before, after) per trailing axis, first axis first (torch lists the last first)."""
    pairs = [pad[i:i + 2] for i in range(0, len(pad), 2)]
    torch_pad = tuple(p for pair in reversed(pairs) for p in pair)
    return _fused(m, "pad", {"x": x}, lambda: torch.nn.functional.pad(x, torch_pad, mode=mode),
                  pad=pad, mode=mode)


def _per_channel_consts(m, c, *arrays):
    from aneforge.tensor import const
    if m is torch:
        return [torch.tensor(a.astype(np.float32)) for a in arrays]
    return [const(a, af.float16) for a in arrays]


def _prelu_op(m, x):
    (alpha,) = _per_channel_consts(m, x.shape[1], np.linspace(-0.5, 0.5, x.shape[1]).astype(np.float16))
    return _fused(m, "prelu", {"x": x, "alpha": alpha}, lambda: torch.nn.functional.prelu(x, alpha))


def _batch_norm_op(m, x):
    c = x.shape[1]
    mean, var = np.linspace(-0.5, 0.5, c).astype(np.float16), np.linspace(0.5, 2, c).astype(np.float16)
    g, b = _affine_consts(c)
    mean, var, g, b = _per_channel_consts(m, c, mean, var, g, b)
    return _fused(m, "batch_norm", {"x": x, "mean": mean, "variance": var, "gamma": g, "beta": b},
                  lambda: torch.nn.functional.batch_norm(x, mean, var, g, b, False, eps=1e-5),
                  epsilon=1e-5)


def _class_weights(m):
    """Fixed class weights (torch's cross_entropy takes no gradient for them)."""
    return m.tensor(np.array([0.5, 1.0, 2.0, 1.5], np.float32 if m is torch else np.float16))


CAUSAL = np.tril(np.ones((4, 5), bool), 1)      # every row keeps at least one key


def _sdpa(m, q, k, v, mask=None):
    return _fused(m, "scaled_dot_product_attention",
                  {"query": q, "key": k, "value": v, "attn_mask": mask},
                  lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask))


# softmax(Q K^T / sqrt(E) + mask) V stored in fp16 after each step: the scores (products(E)),
# the scaled scores and the mask sum (u |s| each, |s| <= ~8 here), softmax (u), then a
# products(S) matmul with |p| summing to 1: |error| <= ~ (8 + 3) u max|v| + products. With
# max|v| ~ 3 for normal data: atol = 32 u.
ATTENTION = Tol(2 * U, 32 * U)


CASES: list[OpCase] = [
    # binary arithmetic (add, sub, mul, real_div, pow, maximum, minimum)
    C("add", (S, S), lambda m, x, y: x + y),
    C("add_scalar", (S,), lambda m, x: x + 1.5),
    C("radd_scalar", (S,), lambda m, x: 2 + x),
    C("add_alpha", (S, S), lambda m, x, y: x.add(y, alpha=2)),
    C("sub", (S, S), lambda m, x, y: x - y),
    C("rsub_scalar", (S,), lambda m, x: 1 - x),
    C("mul", (S, S), lambda m, x, y: x * y),
    C("mul_scalar", (S,), lambda m, x: x * 0.3),
    C("div", (S, S), lambda m, x, y: x / y, gen=("normal", "nonzero")),
    C("div_scalar", (S,), lambda m, x: x / 3),
    C("rdiv_scalar", (S,), lambda m, x: 2 / x, gen="nonzero"),
    C("pow_tensor", (S, S), lambda m, x, y: x ** y, gen=("pos", "normal")),
    C("pow_2", (S,), lambda m, x: x ** 2),
    C("pow_3", (S,), lambda m, x: x ** 3),
    C("pow_half", (S,), lambda m, x: x ** 0.5, gen="pos"),
    C("pow_minus_half", (S,), lambda m, x: x ** -0.5, gen="pos"),
    C("pow_minus_1", (S,), lambda m, x: x.pow(-1), gen="nonzero"),
    C("pow_1_5", (S,), lambda m, x: m.pow(x, 1.5), gen="pos"),
    C("rpow", (S,), lambda m, x: 2 ** x),
    C("pow_zero_base", ((4, 5), (4, 5)), lambda m, x, y: x ** y, gen=("zbase", "zexp")),
    # d(x ** y)/dy = x ** y * log(x): on the engine log(x < 0) is the indeterminate +0, not NaN
    # (no NaN leaves the ANE; sbryngelson/ane-guide part-1-machine/03-numerics.md)
    C("pow_neg_base", (S, S), lambda m, x, y: x ** y, gen=("nonzero", "fexp"),
      torch_fn=lambda m, x, y: m.where(x < 0, x ** y.detach(),
                                        m.where(x < 0, m.ones_like(x), x) ** y)),
    C("int_pow_tensor", ((4, 5), (4, 5)), lambda m, x, y: x ** y, EXACT, gen=("int", "iexp")),
    C("int_rpow_tensor", (S,), lambda m, x: 3 ** x, EXACT, gen="iexp"),
    C("maximum", (S, S), lambda m, x, y: m.maximum(x, y), EXACT),
    C("minimum", (S, S), lambda m, x, y: m.minimum(x, y), EXACT),
    C("max_elementwise", (S, S), lambda m, x, y: x.max(y), EXACT),
    C("min_elementwise", (S, S), lambda m, x, y: m.min(x, y), EXACT),
    # integer arithmetic and int/float promotion
    C("int_add", (S, S), lambda m, x, y: x + y, EXACT, gen="int"),
    C("int_sub_scalar", (S,), lambda m, x: x - 3, EXACT, gen="int"),
    C("int_mul", (S, S), lambda m, x, y: x * y, EXACT, gen="int"),
    C("int_maximum", (S, S), lambda m, x, y: m.maximum(x, y), EXACT, gen="int"),
    C("int_abs", (S,), lambda m, x: x.abs(), EXACT, gen="int"),
    C("int_neg", (S,), lambda m, x: -x, EXACT, gen="int"),
    C("int_div", (S, S), lambda m, x, y: x / y, gen=("int", "intnz")),
    C("int_mul_float", (S,), lambda m, x: x * 0.5, gen="int"),
    C("int_plus_float_tensor", (S, S), lambda m, x, y: x + y, gen=("int", "normal")),
    C("bool_sum", ((4, 5),), lambda m, x: x.sum(1), EXACT, gen="bool"),
    C("int_sum", ((4, 5),), lambda m, x: x.sum(0), EXACT, gen="int"),
    C("int_clamp", (S,), lambda m, x: x.clamp(-2, 3), EXACT, gen="int"),
    # unary math
    C("neg", (S,), lambda m, x: -x, EXACT),
    C("neg_method", (S,), lambda m, x: m.neg(x), EXACT),
    C("exp", (S,), lambda m, x: x.exp(), T3),
    C("erf", (S,), lambda m, x: x.erf(), T3),
    C("detach_identity", (S,), lambda m, x: (x + 1.0).detach(), ONE_ROUNDING),
    C("exp_overflow", ((2, 5),), lambda m, x: m.exp(x), T3, gen="wide"),
    C("log", (S,), lambda m, x: x.log(), T3, gen="pos"),
    C("sqrt", (S,), lambda m, x: x.sqrt(), gen="pos"),
    C("rsqrt", (S,), lambda m, x: m.rsqrt(x), gen="pos"),
    C("abs", (S,), lambda m, x: abs(x), EXACT),
    C("abs_method", (S,), lambda m, x: x.abs(), EXACT),
    C("sin", (S,), lambda m, x: x.sin(), T3, gen="unit4"),
    C("cos", (S,), lambda m, x: m.cos(x), T3, gen="unit4"),
    C("reciprocal", (S,), lambda m, x: x.reciprocal(), gen="nonzero"),
    C("square", (S,), lambda m, x: x.square()),
    # activations
    C("relu", (S,), lambda m, x: x.relu(), EXACT),
    C("F_relu", (S,), lambda m, x: _f(m).relu(x), EXACT),
    C("sigmoid", (S,), lambda m, x: x.sigmoid(), T_SIGMOID),
    C("sigmoid_tails", ((4, 6),), lambda m, x: m.sigmoid(x), T_SIGMOID, gen="wide"),
    C("tanh", (S,), lambda m, x: x.tanh(), T_TANH),
    C("tanh_tails", ((4, 6),), lambda m, x: _f(m).tanh(x), T_TANH, gen="wide"),
    C("gelu_exact", ((4, 6),), lambda m, x: _f(m).gelu(x), T_GELU, gen="unit4"),
    C("gelu_tanh", ((4, 6),), lambda m, x: _f(m).gelu(x, approximate="tanh"), T3, gen="unit4"),
    C("gelu_tails", ((4, 6),), lambda m, x: _f(m).gelu(x), T_GELU, gen="wide"),
    C("gelu_tanh_huge", ((4, 6),), lambda m, x: _f(m).gelu(x, approximate="tanh"), T3,
      gen="huge"),
    C("silu", ((4, 6),), lambda m, x: _f(m).silu(x), T_SILU, gen="unit4"),
    C("silu_tails", ((4, 6),), lambda m, x: _f(m).silu(x), T_SILU, gen="wide"),
    C("F_sigmoid", (S,), lambda m, x: _f(m).sigmoid(x), T_SIGMOID),
    # clamp / clip
    C("clamp_both", (S,), lambda m, x: x.clamp(-0.5, 0.5), EXACT),
    C("clip_both", (S,), lambda m, x: m.clip(x, -1, 0.25), EXACT),
    C("clamp_min", (S,), lambda m, x: x.clamp(min=0.1)),     # 0.1 becomes an fp16 constant
    C("clamp_max", (S,), lambda m, x: m.clamp(x, max=-0.2)),
    C("clamp_tensors", (S, S, S), lambda m, x, lo, hi: x.clamp(lo, hi), EXACT,
      gen=("normal", "lo", "hi")),
    C("clamp_tensor_min", (S, (4,)), lambda m, x, lo: x.clamp(min=lo), EXACT, gen=("normal", "lo")),
    # matmul and linear
    C("matmul_1d_1d", ((5,), (5,)), lambda m, x, y: x @ y, products(5)),
    C("matmul_1d_2d", ((5,), (5, 3)), lambda m, x, y: m.matmul(x, y), products(5)),
    C("matmul_2d_1d", ((3, 5), (5,)), lambda m, x, y: x @ y, products(5)),
    C("matmul_2d", ((3, 5), (5, 4)), lambda m, x, y: x.matmul(y), products(5)),
    C("matmul_batched", ((2, 3, 5), (2, 5, 4)), lambda m, x, y: x @ y, products(5)),
    C("matmul_broadcast", ((2, 1, 3, 8), (4, 8, 2)), lambda m, x, y: x @ y, products(8)),
    C("matmul_1d_3d", ((5,), (2, 5, 3)), lambda m, x, y: x @ y, products(5)),
    C("matmul_3d_2d", ((2, 3, 16), (16, 4)), lambda m, x, y: x @ y, products(16)),
    C("matmul_long_k", ((2, 512), (512, 3)), lambda m, x, y: x @ y, products(512)),
    C("matmul_long_k_exact", ((2, 100), (100, 3)), lambda m, x, y: x @ y, EXACT, gen="fint"),
    C("linear", ((2, 3, 4), (5, 4), (5,)), lambda m, x, w, b: _f(m).linear(x, w, b), products(4)),
    C("linear_op_const_weight", ((2, 3, 4), (5, 4), (5,)), lambda m, x, w, b: _const_linear(m, x, w, b),
      products(4), bakes_inputs=True),
    C("conv_op_const_weight", ((2, 3, 6, 5), (4, 3, 3, 3), (4,)),
      lambda m, x, w, b: _const_conv(m, x, w, b, pad=(1, 1, 0, 1)), products(27), bakes_inputs=True),
    C("conv_op", ((2, 3, 6, 5),), lambda m, x: _conv_op(m, x, 4, 3), products(27)),
    C("conv_op_stride_pad", ((1, 2, 7, 8),), lambda m, x: _conv_op(
        m, x, 3, 3, strides=(2, 3), pad=(1, 2, 0, 1)), products(18)),
    C("conv_op_groups_dilated", ((1, 4, 8, 7),), lambda m, x: _conv_op(
        m, x, 6, 3, groups=2, bias=False, dilations=(2, 1), pad=(3, 0, 1, 1)), products(18)),
    C("conv_op_depthwise_1x1", ((2, 4, 3, 3),), lambda m, x: _conv_op(m, x, 4, 1, groups=4),
      products(1)),
    C("linear_no_bias", ((3, 6), (2, 6)), lambda m, x, w: _f(m).linear(x, w), products(6)),
    # ops the graph passes fuse into (recorded directly here)
    C("layer_norm_op", ((3, 8),), lambda m, x: _layer_norm_op(m, x, 1), T3),
    C("layer_norm_op_2d", ((2, 3, 4),), lambda m, x: _layer_norm_op(m, x, 2), T3),
    C("instance_norm_op", ((2, 3, 5),), lambda m, x: _instance_norm_op(m, x), T3),
    C("instance_norm_op_4d", ((2, 3, 2, 4),), lambda m, x: _instance_norm_op(m, x), T3),
    C("pad_constant", ((3, 4),), lambda m, x: _pad(m, x, (1, 2, 2, 1), "constant"), EXACT),
    C("pad_last_axis", ((2, 3, 4),), lambda m, x: _pad(m, x, (0, 3), "constant"), EXACT),
    C("pad_reflect", ((2, 3, 5),), lambda m, x: _pad(m, x, (2, 1, 1, 3), "reflect"), EXACT),
    C("pad_replicate", ((2, 3, 5),), lambda m, x: _pad(m, x, (3, 0, 0, 2), "replicate"), EXACT),
    C("prelu_op", ((2, 3, 2, 4),), lambda m, x: _prelu_op(m, x)),
    # MIL softplus / softsign (F.softplus and F.softsign are compositions of other ops)
    C("softplus_op", ((4, 6),), lambda m, x: _fused(
        m, "softplus", {"x": x}, lambda: torch.nn.functional.softplus(x)), T3, gen="wide"),
    C("softsign_op", ((4, 6),), lambda m, x: _fused(
        m, "softsign", {"x": x}, lambda: torch.nn.functional.softsign(x)), T3, gen="wide"),
    C("batch_norm_op", ((2, 3, 2, 2),), lambda m, x: _batch_norm_op(m, x), T3),
    C("pixel_shuffle_op", ((2, 8, 3, 2),), lambda m, x: _fused(
        m, "pixel_shuffle", {"x": x}, lambda: torch.nn.functional.pixel_shuffle(x, 2),
        upscale_factor=2), EXACT),
    C("pixel_shuffle_op_3", ((1, 9, 2, 3),), lambda m, x: _fused(
        m, "pixel_shuffle", {"x": x}, lambda: torch.nn.functional.pixel_shuffle(x, 3),
        upscale_factor=3), EXACT),
    C("leaky_relu_op", ((4, 6),), lambda m, x: _fused(
        m, "leaky_relu", {"x": x}, lambda: torch.nn.functional.leaky_relu(x, 0.125), alpha=0.125)),
    C("sdpa_op", ((2, 4, 8), (2, 5, 8), (2, 5, 6)), lambda m, q, k, v: _sdpa(m, q, k, v), ATTENTION),
    C("sdpa_op_float_mask", ((1, 2, 4, 8), (1, 2, 5, 8), (1, 2, 5, 3), (4, 5)),
      lambda m, q, k, v, mask: _sdpa(m, q, k, v, mask), ATTENTION),
    C("sdpa_op_bool_mask", ((2, 4, 8), (2, 5, 8), (2, 5, 6)), lambda m, q, k, v: _sdpa(
        m, q, k, v, m.tensor(CAUSAL)), ATTENTION),
    # reductions
    C("sum_all", ((2, 3, 4),), lambda m, x: x.sum(), summed(24)),
    C("sum_dim", ((2, 3, 4),), lambda m, x: x.sum(1), summed(3)),
    C("sum_neg_dim_keepdim", ((2, 3, 4),), lambda m, x: x.sum(-1, keepdim=True), summed(4)),
    C("sum_dims", ((2, 3, 4),), lambda m, x: m.sum(x, (0, 2)), summed(8)),
    C("sum_long", ((2, 300),), lambda m, x: x.sum(-1), summed(300), gen="pos"),
    C("sum_long_exact", ((2, 300),), lambda m, x: x.sum(-1), EXACT, gen="fint"),
    C("mean_long_exact_sum", ((300, 2),), lambda m, x: x.mean(0), gen="fint"),
    C("mean_all", ((2, 3, 4),), lambda m, x: x.mean(), summed(24)),
    C("mean_dim", ((2, 3, 4),), lambda m, x: x.mean(0), summed(2)),
    C("mean_dims_keepdim", ((2, 3, 4),), lambda m, x: m.mean(x, (-1, -2), keepdim=True),
      summed(12)),
    C("amax_dim", ((2, 3, 4),), lambda m, x: x.amax(1), EXACT),
    C("amax_all", ((2, 3, 4),), lambda m, x: m.amax(x), EXACT, torch_fn=lambda m, x: x.amax()),
    C("amin_dims_keepdim", ((2, 3, 4),), lambda m, x: x.amin((0, 2), keepdim=True), EXACT),
    C("amin_neg_dim", ((2, 3, 4),), lambda m, x: m.amin(x, -1), EXACT),
    C("max_all", ((2, 3, 4),), lambda m, x: x.max(), EXACT),
    C("min_all", ((2, 3, 4),), lambda m, x: m.min(x), EXACT),
    C("max_dim", ((3, 5),), lambda m, x: x.max(1), EXACT, gen="perm"),
    C("max_dim_keepdim", ((3, 5),), lambda m, x: x.max(dim=0, keepdim=True), EXACT, gen="perm"),
    C("min_dim", ((2, 3, 4),), lambda m, x: m.min(x, -1), EXACT, gen="perm"),
    C("max_dim_values", ((3, 5),), lambda m, x: x.max(1).values, EXACT, gen="perm"),
    C("min_dim_indices", ((3, 5),), lambda m, x: x.min(0).indices, EXACT, gen="perm"),
    C("argmax", ((3, 5),), lambda m, x: x.argmax(), EXACT, gen="perm"),
    C("argmax_dim", ((3, 5),), lambda m, x: m.argmax(x, 1), EXACT, gen="perm"),
    C("argmin_dim_keepdim", ((2, 3, 4),), lambda m, x: x.argmin(-2, keepdim=True), EXACT,
      gen="perm"),
    C("argmin", ((3, 5),), lambda m, x: m.argmin(x), EXACT, gen="perm"),
    C("int_argmax", ((4, 6),), lambda m, x: x.argmax(1), EXACT, gen="iperm"),
    # softmax family
    C("softmax", ((3, 5),), lambda m, x: x.softmax(-1), gen="unit4"),
    C("softmax_dim0", ((3, 5),), lambda m, x: m.softmax(x, 0), gen="unit4"),
    C("F_softmax", ((2, 3, 4),), lambda m, x: _f(m).softmax(x, dim=1), gen="unit4"),
    C("log_softmax", ((3, 5),), lambda m, x: x.log_softmax(-1), log_softmax_tol(5, 8), gen="unit4"),
    C("log_softmax_wide", ((45, 65),), lambda m, x: x.log_softmax(1), log_softmax_tol(65, 8),
      gen="unit4"),
    C("F_log_softmax", ((2, 3, 4),), lambda m, x: _f(m).log_softmax(x, dim=1),
      log_softmax_tol(3, 8), gen="unit4"),
    # shapes
    C("reshape", ((2, 3, 4),), lambda m, x: x.reshape(4, -1), EXACT),
    C("reshape_tuple", ((2, 3, 4),), lambda m, x: m.reshape(x, (-1,)), EXACT),
    C("view", ((2, 3, 4),), lambda m, x: x.view(6, 4), EXACT),
    C("view_minus1", ((2, 3, 4),), lambda m, x: x.view(-1, 2, 3), EXACT),
    C("flatten", ((2, 3, 4),), lambda m, x: x.flatten(), EXACT),
    C("flatten_1", ((2, 3, 4),), lambda m, x: m.flatten(x, 1), EXACT),
    C("flatten_0_1", ((2, 3, 4),), lambda m, x: x.flatten(0, 1), EXACT),
    C("permute", ((2, 3, 4),), lambda m, x: x.permute(2, 0, 1), EXACT),
    C("permute_tuple_neg", ((2, 3, 4),), lambda m, x: m.permute(x, (-1, 1, 0)), EXACT),
    C("transpose", ((2, 3, 4),), lambda m, x: x.transpose(0, -1), EXACT),
    C("transpose_fn", ((2, 3, 4),), lambda m, x: m.transpose(x, 1, 2), EXACT),
    C("t", ((3, 4),), lambda m, x: x.t(), EXACT),
    C("t_1d", ((4,),), lambda m, x: m.t(x), EXACT),
    C("T", ((3, 4),), lambda m, x: x.T, EXACT),
    C("unsqueeze", ((3, 4),), lambda m, x: x.unsqueeze(1), EXACT),
    C("unsqueeze_neg", ((3, 4),), lambda m, x: m.unsqueeze(x, -1), EXACT),
    C("unsqueeze_neg_first", ((3, 4),), lambda m, x: x.unsqueeze(-3), EXACT),
    C("squeeze", ((1, 3, 1, 4),), lambda m, x: x.squeeze(), EXACT),
    C("squeeze_dim", ((1, 3, 1, 4),), lambda m, x: x.squeeze(2), EXACT),
    C("squeeze_neg_dim", ((3, 4, 1),), lambda m, x: m.squeeze(x, -1), EXACT),
    C("squeeze_non1", ((1, 3, 1, 4),), lambda m, x: x.squeeze(1), EXACT),
    C("squeeze_dims", ((1, 3, 1, 4),), lambda m, x: x.squeeze((0, 2)), EXACT),
    C("expand", ((3, 1),), lambda m, x: x.expand(3, 4), EXACT),
    C("expand_new_dims", ((3, 1),), lambda m, x: x.expand(2, 3, 5), EXACT),
    C("expand_minus1", ((3, 1),), lambda m, x: x.expand(-1, 4), EXACT),
    C("expand_as", ((1, 4), (3, 4)), lambda m, x, y: x.expand_as(y), EXACT),
    C("cat", ((2, 3), (2, 4)), lambda m, x, y: m.cat([x, y], dim=1), EXACT),
    C("cat_neg_dim", ((2, 3), (1, 3), (2, 3)), lambda m, x, y, z: m.cat((x, y, z), -2), EXACT),
    C("cat_mixed", ((2, 3), (2, 3)), lambda m, x, y: m.cat([x, y]), gen=("int", "normal")),
    C("concat", ((2, 3), (2, 3)), lambda m, x, y: m.concat([x, y], 1), EXACT),
    C("stack", ((2, 3), (2, 3)), lambda m, x, y: m.stack([x, y]), EXACT),
    C("stack_neg", ((2, 3), (2, 3)), lambda m, x, y: m.stack([x, y], dim=-1), EXACT),
    C("stack_mid", ((2, 3), (2, 3), (2, 3)), lambda m, x, y, z: m.stack([x, y, z], 1), EXACT),
    C("split_int", ((5, 3),), lambda m, x: x.split(2), EXACT),
    C("split_sections", ((2, 6),), lambda m, x: m.split(x, [1, 3, 2], dim=1), EXACT),
    C("split_even_neg_dim", ((2, 6),), lambda m, x: x.split(3, -1), EXACT),
    C("split_whole", ((2, 6),), lambda m, x: x.split(6, 1), EXACT),
    C("chunk", ((5, 3),), lambda m, x: x.chunk(3), EXACT),
    C("chunk_dim", ((2, 6),), lambda m, x: m.chunk(x, 4, dim=1), EXACT),
    C("unbind", ((3, 2),), lambda m, x: x.unbind(1), EXACT),
    # where / select
    C("where", (S, S), lambda m, x, y: m.where(x > 0, x, y), EXACT),
    C("where_scalar_other", (S,), lambda m, x: m.where(x > 0, x, 0.0), EXACT),
    C("where_scalar_input", (S,), lambda m, x: m.where(x < 0, 1.0, x), EXACT),
    C("where_broadcast", ((3, 1), (4,), (3, 4)), lambda m, c, x, y: m.where(c, x, y), EXACT,
      gen=("bool", "normal", "normal")),
    C("where_int_float", (S, S), lambda m, c, x: m.where(c, x, 0.5), EXACT, gen=("bool", "int")),
    # comparisons
    C("lt", (S, S), lambda m, x, y: x < y, EXACT),
    C("le", (S, S), lambda m, x, y: x <= y, EXACT, gen="int"),
    C("gt", (S, S), lambda m, x, y: x > y, EXACT),
    C("ge", (S, S), lambda m, x, y: x >= y, EXACT, gen="int"),
    C("eq", (S, S), lambda m, x, y: x == y, EXACT, gen="int"),
    C("ne", (S, S), lambda m, x, y: x != y, EXACT, gen="int"),
    C("lt_scalar", (S,), lambda m, x: x < 0.25, EXACT),
    C("le_scalar_int", (S,), lambda m, x: x <= 2, EXACT, gen="int"),
    C("gt_scalar", (S,), lambda m, x: x > -0.5, EXACT),
    C("ge_scalar", (S,), lambda m, x: x >= 0, EXACT),
    C("eq_scalar", (S,), lambda m, x: x == 3, EXACT, gen="int"),
    C("ne_scalar", (S,), lambda m, x: x != 0, EXACT, gen="int"),
    C("rlt_scalar", (S,), lambda m, x: 0.5 < x, EXACT),
    C("int_lt_float", (S,), lambda m, x: x < 0.5, EXACT, gen="int"),
    C("cmp_methods", (S, S), lambda m, x, y: (x.lt(y), x.le(y), x.gt(y), x.ge(y), x.eq(y), x.ne(y)),
      EXACT, gen="int"),
    C("cmp_broadcast", ((3, 1), (4,)), lambda m, x, y: x < y, EXACT),
    # logical
    C("and", (S, S), lambda m, x, y: x & y, EXACT, gen="bool"),
    C("or", (S, S), lambda m, x, y: x | y, EXACT, gen="bool"),
    C("xor", (S, S), lambda m, x, y: x ^ y, EXACT, gen="bool"),
    C("not", (S,), lambda m, x: ~x, EXACT, gen="bool"),
    C("logical_not", (S,), lambda m, x: x.logical_not(), EXACT, gen="bool"),
    C("logic_of_cmp", (S,), lambda m, x: (x > -0.5) & (x < 0.5) | ~(x != 0), EXACT),
    # casts
    C("float", (S,), lambda m, x: x.float(), EXACT),
    C("float_add", (S, S), lambda m, x, y: x.float() + y.float()),
    C("half", (S,), lambda m, x: x.half(), EXACT),
    C("int", (S,), lambda m, x: (x * 4).int(), EXACT),
    C("long", (S,), lambda m, x: (x * 4).long(), EXACT),
    C("bool", (S,), lambda m, x: x.int().bool(), EXACT),
    C("float_bool", (S,), lambda m, x: x.bool(), EXACT),
    C("int_to_float", (S,), lambda m, x: x.float(), EXACT, gen="int"),
    C("bool_to_half", (S,), lambda m, x: x.half(), EXACT, gen="bool"),
    C("to_dtype", (S,), lambda m, x: x.to(m.float16), EXACT, gen="int"),
    C("type_as", (S, S), lambda m, x, y: x.type_as(y), EXACT, gen=("int", "normal")),
    # basic indexing
    C("slice_none", ((4, 3, 2),), lambda m, x: x[1:3, :, None], EXACT),
    C("ellipsis_last", ((4, 3, 2),), lambda m, x: x[..., -1], EXACT),
    C("step", ((5, 3),), lambda m, x: x[::2], EXACT),
    C("int_index", ((4, 3, 2),), lambda m, x: x[0], EXACT),
    C("neg_slice", ((5, 3),), lambda m, x: x[-2:, 1:], EXACT),
    C("index_mixed", ((4, 3, 5),), lambda m, x: x[1, ::2, -3:-1], EXACT),
    C("none_first", ((3, 4),), lambda m, x: x[None, :, 1], EXACT),
    C("ellipsis_mid", ((2, 3, 4, 5),), lambda m, x: x[1, ..., 2:], EXACT),
    C("full_slice", ((3, 4),), lambda m, x: x[:], EXACT),
    C("ellipsis_only", ((3, 4),), lambda m, x: x[...], EXACT),
    C("step_offset", ((7,),), lambda m, x: x[1::3], EXACT),
    C("slice_overrun", ((5,),), lambda m, x: x[2:100], EXACT),
    C("iterate", ((3, 2),), lambda m, x: list(x), EXACT),
    # creation (compared with torch's own)
    C("zeros", (), lambda m: m.zeros(2, 3), EXACT),
    C("zeros_tuple", (), lambda m: m.zeros((4,)), EXACT),
    C("ones", (), lambda m: m.ones(2, 3), EXACT),
    C("ones_dtype", (), lambda m: m.ones(3, dtype=m.int32), EXACT),
    C("full", (), lambda m: m.full((2, 3), 1.5), EXACT),
    C("full_int", (), lambda m: m.full((2,), 7), EXACT),
    C("full_bool", (), lambda m: m.full((2, 2), True), EXACT),
    C("zeros_like", (S,), lambda m, x: m.zeros_like(x), EXACT),
    C("ones_like", (S,), lambda m, x: m.ones_like(x), EXACT, gen="int"),
    C("ones_like_dtype", (S,), lambda m, x: m.ones_like(x, dtype=m.float32), EXACT, gen="int"),
    C("full_like", (S,), lambda m, x: m.full_like(x, 2.5), EXACT),
    C("arange", (), lambda m: m.arange(5), EXACT),
    C("arange_start_step", (), lambda m: m.arange(2, 11, 3), EXACT),
    C("arange_float", (), lambda m: m.arange(0, 1, 0.25), EXACT),
    C("arange_neg_step", (), lambda m: m.arange(5, 0, -2), EXACT),
    C("eye", (), lambda m: m.eye(3), EXACT),
    C("eye_rect", (), lambda m: m.eye(2, 4), EXACT),
    C("tensor_list", (), lambda m: m.tensor([[1.0, 2.0], [3.0, 4.0]]) * 2, EXACT),
    C("tensor_int_list", (), lambda m: m.tensor([1, 2, 3]) + 1, EXACT),
    C("tensor_scalar", (), lambda m: m.tensor(2.5) * m.tensor(2.0), EXACT),
    # torch corner semantics
    C("argmax_keepdim_all", ((3, 5),), lambda m, x: x.argmax(dim=None, keepdim=True), EXACT,
      gen="perm"),
    C("sum_all_keepdim", ((2, 3),), lambda m, x: x.sum(dim=None, keepdim=True), summed(6)),
    C("mean_all_keepdim", ((2, 3),), lambda m, x: x.mean(dim=None, keepdim=True), summed(6)),
    C("amax_all_keepdim", ((2, 3),), lambda m, x: x.amax(dim=(), keepdim=True), EXACT),
    C("where_two_scalars", (S,), lambda m, x: m.where(x > 0, 1.0, -0.5), EXACT),
    C("where_two_int_scalars", (S,), lambda m, x: m.where(x > 0, 1, 0), EXACT),
    C("bool_eq", (S, S), lambda m, x, y: (x == y, x != y), EXACT, gen="bool"),
    C("bool_eq_scalar", (S,), lambda m, x: x == True, EXACT, gen="bool"),  # noqa: E712
    C("int_pow_2", (S,), lambda m, x: x ** 2, EXACT, gen="int"),
    C("int_pow_3", (S,), lambda m, x: x.pow(3), EXACT, gen="int"),
    C("int_pow_half", (S,), lambda m, x: x.abs() ** 0.5),
    C("index_numpy_int", ((4, 3),), lambda m, x: x[np.int64(1), np.int32(-1)], EXACT),
    C("index_true", ((4, 3),), lambda m, x: x[True], EXACT),
    C("clamp_min_above_max", (S,), lambda m, x: x.clamp(0.5, -0.5), EXACT),
    C("rank0_squeeze_dim", ((),), lambda m, x: x.squeeze(0), EXACT),
    C("rank0_max_dim", ((),), lambda m, x: x.max(0), EXACT),
    C("rank0_argmax_dim", ((),), lambda m, x: x.argmax(-1), EXACT),
    C("rank0_sum_dim", ((),), lambda m, x: x.sum(0), EXACT),
    C("rank0_softmax", ((),), lambda m, x: (x.softmax(0), x.log_softmax(-1)), EXACT),
    C("rank0_transpose", ((),), lambda m, x: x.t(), EXACT),
    C("int_relu", (S,), lambda m, x: x.relu(), EXACT, gen="int"),
    C("int_exp", (S,), lambda m, x: x.exp(), T3, gen="int"),
    C("bool_arith", (S,), lambda m, x: (x + 1, x * 2.5, x.float().mean()), EXACT, gen="bool"),
    C("float_sum", ((4, 64),), lambda m, x: x.float().sum(-1), summed_wide(64)),
    C("float_mean", ((4, 64),), lambda m, x: x.float().mean(0), summed_wide(4)),
    C("sum_dtype", ((4, 64),), lambda m, x: x.sum(1, dtype=m.float32), summed_wide(64)),
    C("expand_rank0", ((),), lambda m, x: x.expand(3), EXACT),
    C("flatten_neg", ((2, 3, 4, 5),), lambda m, x: x.flatten(-3, -2), EXACT),
    C("rank0_reshape_minus1", ((),), lambda m, x: x.reshape(-1), EXACT),
    # broadcasting
    C("bcast_col_row", ((3, 1), (1, 4)), lambda m, x, y: x + y),
    C("bcast_trailing", ((2, 3, 4), (4,)), lambda m, x, y: x * y),
    C("bcast_scalar_tensor", ((3, 4), ()), lambda m, x, y: x - y),
    C("bcast_scalar_left", ((), (2, 3)), lambda m, x, y: x / y, gen=("normal", "nonzero")),
    C("bcast_both", ((2, 1, 4), (3, 1)), lambda m, x, y: m.maximum(x, y), EXACT),
    # edge shapes: rank 0, rank 5, size-1 axes
    C("rank0_add", ((), ()), lambda m, x, y: x + y),
    C("rank0_exp", ((),), lambda m, x: x.exp(), T3),
    C("rank0_sum", ((),), lambda m, x: x.sum(), EXACT),
    C("rank0_reshape", ((),), lambda m, x: x.reshape(1, 1), EXACT),
    C("rank0_unsqueeze", ((),), lambda m, x: x.unsqueeze(0), EXACT),
    C("rank0_flatten", ((),), lambda m, x: x.flatten(), EXACT),
    C("rank0_index_none", ((),), lambda m, x: x[None], EXACT),
    C("to_rank0", ((1, 1),), lambda m, x: x.reshape(()), EXACT),
    C("rank0_item_index", ((3,),), lambda m, x: x[1] * x[2]),
    C("rank5_add", ((2, 1, 3, 1, 2), (1, 3, 4, 2)), lambda m, x, y: x + y),
    C("rank5_sum", ((2, 1, 3, 2, 2),), lambda m, x: x.sum((0, 3)), summed(4)),
    C("rank5_permute", ((2, 1, 3, 2, 2),), lambda m, x: x.permute(4, 2, 0, 3, 1), EXACT),
    C("rank5_squeeze", ((2, 1, 3, 1, 2),), lambda m, x: x.squeeze(), EXACT),
    C("rank5_softmax", ((2, 1, 3, 2, 2),), lambda m, x: x.softmax(2), gen="unit4"),
    C("size1_sum", ((1, 1),), lambda m, x: x.sum(0), EXACT),
    C("size1_matmul", ((1, 1), (1, 1)), lambda m, x, y: x @ y, products(1)),
    C("size1_softmax", ((3, 1),), lambda m, x: x.softmax(-1)),
    C("size1_max_dim", ((3, 1),), lambda m, x: x.max(1), EXACT),
    # ---- torch parity (issue 12): composites of registered ops ----
    # rounding and division: quotients in fp32 as torch's reference; results exact integers
    C("trunc", ((4, 6),), lambda m, x: x.trunc(), EXACT, gen="wide"),
    C("floor", ((4, 6),), lambda m, x: m.floor(x), EXACT, gen="wide"),
    C("ceil", ((4, 6),), lambda m, x: x.ceil(), EXACT, gen="wide"),
    C("div_trunc", (S, S), lambda m, x, y: m.div(x, y, rounding_mode="trunc"), EXACT,
      gen=("wide", "nonzero")),
    C("div_floor_int", (S, S), lambda m, x, y: x.div(y, rounding_mode="floor"), EXACT,
      gen=("int", "intnz")),
    C("div_floor", (S, S), lambda m, x, y: x.div(y, rounding_mode="floor"), EXACT,
      gen=("wide", "nonzero")),
    C("floordiv", (S, S), lambda m, x, y: x // y, EXACT, gen=("int", "intnz")),
    C("floordiv_int_scalar", (S,), lambda m, x: x // 3, EXACT, gen="int"),
    C("rfloordiv_int", (S,), lambda m, x: 7 // x, EXACT, gen="intnz"),
    C("floor_divide", (S, S), lambda m, x, y: m.floor_divide(x, y), EXACT, gen=("int", "intnz")),
    C("mod", (S, S), lambda m, x, y: x % y, gen=("wide", "nonzero")),
    C("mod_scalar", (S,), lambda m, x: x % 1.5, gen="wide"),
    C("int_mod", (S, S), lambda m, x, y: x % y, EXACT, gen=("int", "intnz")),
    C("rmod_int", (S,), lambda m, x: 5 % x, EXACT, gen="intnz"),
    C("remainder", (S,), lambda m, x: m.remainder(x, -2), EXACT, gen="int"),
    C("fmod", (S, S), lambda m, x, y: m.fmod(x, y), gen=("wide", "nonzero")),
    C("int_fmod", (S, S), lambda m, x, y: x.fmod(y), EXACT, gen=("int", "intnz")),
    C("copysign", (S, S), lambda m, x, y: m.copysign(x, y), EXACT),
    C("copysign_scalar", (S,), lambda m, x: x.copysign(-1.0), EXACT),
    C("isclose", (S, S), lambda m, x, y: m.isclose(x, y, atol=1.0), EXACT, gen="fint"),
    C("isclose_rtol", (S, S), lambda m, x, y: x.isclose(y, rtol=0.5), EXACT, gen="fint"),
    # triangles, tiles, flips, rolls, diagonals
    C("tril", ((3, 4),), lambda m, x: x.tril(), EXACT),
    C("triu_k", ((3, 4),), lambda m, x: m.triu(x, 1), EXACT),
    C("tril_batched_neg", ((2, 3, 3),), lambda m, x: m.tril(x, -1), EXACT),
    C("int_triu", ((3, 3),), lambda m, x: x.triu(), EXACT, gen="int"),
    C("repeat", ((2, 3),), lambda m, x: x.repeat(2, 1, 2), EXACT),
    C("repeat_same_rank", ((2, 3),), lambda m, x: x.repeat(1, 3), EXACT, gen="int"),
    C("flip", ((2, 3, 4),), lambda m, x: m.flip(x, (0, 2)), EXACT),
    C("flip_int", ((5,),), lambda m, x: x.flip(0), EXACT, gen="int"),
    C("roll", ((3, 4),), lambda m, x: m.roll(x, (1, -3), (0, 1)), EXACT),
    C("roll_flat", ((3, 4),), lambda m, x: x.roll(5), EXACT),
    C("diagonal", ((3, 4),), lambda m, x: x.diagonal(), EXACT),
    C("diagonal_offset", ((3, 4),), lambda m, x: m.diagonal(x, 2), EXACT),
    C("diagonal_neg_dims", ((2, 4, 3),), lambda m, x: x.diagonal(-1, 1, 2), EXACT),
    C("diagonal_dims_swapped", ((3, 2, 4),), lambda m, x: x.diagonal(1, 2, 0), EXACT),
    C("mT", ((2, 3, 4),), lambda m, x: x.mT, EXACT),
    C("bmm", ((2, 3, 4), (2, 4, 5)), lambda m, x, y: m.bmm(x, y), products(4)),
    C("mm", ((3, 4), (4, 5)), lambda m, x, y: m.mm(x, y), products(4)),
    C("mm_method", ((3, 7), (7, 2)), lambda m, x, y: x.mm(y), products(7)),
    # products and scans: each multiplication rounds once, (n - 1) roundings in all
    C("prod_dim", ((3, 5),), lambda m, x: x.prod(1), Tol(6 * U, 2.0 ** -24)),
    C("prod_all", ((2, 3),), lambda m, x: m.prod(x), Tol(7 * U, 2.0 ** -24)),
    C("prod_keepdim", ((3, 4),), lambda m, x: x.prod(0, keepdim=True), Tol(5 * U, 2.0 ** -24)),
    C("int_prod", ((2, 5),), lambda m, x: x.prod(1), EXACT, gen="int"),
    C("cumsum", ((3, 6),), lambda m, x: x.cumsum(1), products(6)),
    C("cumsum_dim0", ((5, 3),), lambda m, x: m.cumsum(x, 0), products(5)),
    C("int_cumsum", ((3, 6),), lambda m, x: x.cumsum(-1), EXACT, gen="int"),
    C("cumprod", ((3, 5),), lambda m, x: x.cumprod(1), Tol(6 * U, 2.0 ** -24)),
    C("cumprod_zeros", ((2, 6),), lambda m, x: m.cumprod(x, 1), Tol(7 * U, 2.0 ** -24),
      gen="fint"),
    C("cummax", ((3, 6),), lambda m, x: x.cummax(1), EXACT, gen="perm"),
    C("cummin_dim0", ((4, 3),), lambda m, x: m.cummin(x, 0), EXACT, gen="perm"),
    C("int_cummax", ((2, 5),), lambda m, x: x.cummax(-1).values, EXACT, gen="iperm"),
    C("logsumexp", ((3, 5),), lambda m, x: x.logsumexp(1), log_softmax_tol(5, 8), gen="unit4"),
    C("logsumexp_dims", ((2, 3, 4),), lambda m, x: m.logsumexp(x, (0, 2), keepdim=True),
      log_softmax_tol(8, 8), gen="unit4"),
    C("logcumsumexp", ((3, 6),), lambda m, x: x.logcumsumexp(1), Tol(2 * U, 4 * U), gen="unit4"),
    # sorting: ranks from all-pairs comparisons, values picked by one-hot selects
    C("sort", ((3, 6),), lambda m, x: x.sort(1), EXACT, gen="perm"),
    C("sort_desc_dim0", ((4, 3),), lambda m, x: m.sort(x, 0, descending=True), EXACT,
      gen="perm"),
    C("sort_ties_stable", ((2, 6),), lambda m, x: x.sort(stable=True), EXACT, gen="fint"),
    C("argsort", ((3, 6),), lambda m, x: x.argsort(-1), EXACT, gen="perm"),
    C("int_sort", ((2, 5),), lambda m, x: m.sort(x).values, EXACT, gen="iperm"),
    C("topk", ((3, 6),), lambda m, x: x.topk(3), EXACT, gen="perm"),
    C("topk_smallest_dim0", ((5, 3),), lambda m, x: m.topk(x, 2, dim=0, largest=False), EXACT,
      gen="perm"),
    # gather / scatter by one-hot selects
    C("gather", ((3, 4), (3, 2)), lambda m, x, i: x.gather(1, i), EXACT, gen=("normal", "idx4")),
    C("gather_dim0", ((4, 3), (2, 3)), lambda m, x, i: m.gather(x, 0, i), EXACT,
      gen=("normal", "idx4")),
    C("int_gather", ((3, 4), (3, 5)), lambda m, x, i: x.gather(-1, i), EXACT, gen=("int", "idx4")),
    C("scatter", ((3, 4), (3, 2), (3, 2)), lambda m, x, i, v: x.scatter(1, i, v), EXACT,
      gen=("normal", "uidx4", "normal")),
    C("scatter_value", ((3, 4), (3, 3)), lambda m, x, i: m.scatter(x, 1, i, value=2.5), EXACT,
      gen=("normal", "uidx4")),
    C("scatter_add", ((3, 4), (3, 5), (3, 5)), lambda m, x, i, v: x.scatter_add(1, i, v),
      summed(6), gen=("normal", "idx4", "normal")),
    C("scatter_smaller_index", ((4, 5, 6), (3, 4, 5), (3, 4, 5)), lambda m, x, i, v: x.scatter_reduce(
        1, i, v, "sum"), summed(6), gen=("normal", "idx4", "normal")),
    C("scatter_smaller_index_int", ((4, 5), (2, 3), (3, 3)), lambda m, x, i, v: m.scatter(
        x, 0, i, v, reduce="add"), EXACT, gen=("int", "idx4", "int")),
    C("scatter_reduce_amax", ((3, 4), (3, 5), (3, 5)), lambda m, x, i, v: x.scatter_reduce(
        1, i, v, "amax", include_self=False), EXACT, gen=("normal", "idx4", "perm")),
    C("scatter_reduce_amin_self", ((3, 4), (3, 5), (3, 5)), lambda m, x, i, v: m.scatter_reduce(
        x, 1, i, v, "amin"), EXACT, gen=("perm", "idx4", "normal")),
    C("scatter_reduce_mean", ((3, 4), (3, 5), (3, 5)), lambda m, x, i, v: x.scatter_reduce(
        1, i, v, "mean"), Tol(3 * U, 2.0 ** -24, 6 * U), gen=("normal", "idx4", "normal")),
    C("scatter_reduce_prod", ((3, 4), (3, 5), (3, 5)), lambda m, x, i, v: x.scatter_reduce(
        1, i, v, "prod", include_self=False), Tol(6 * U, 2.0 ** -24), gen=("normal", "idx4", "normal")),
    # in place: the handle takes the new value
    C("add_", (S, S), lambda m, x, y: x.clone().add_(y, alpha=2)),
    C("mul_div_", (S, S), lambda m, x, y: x.clone().mul_(y).div_(3), Tol(4 * U, 2.0 ** -24)),
    C("sub_clamp_", (S, S), lambda m, x, y: x.clone().sub_(y).clamp_(-1, 1)),
    C("zero_", (S,), lambda m, x: x.clone().zero_(), EXACT),
    C("fill_", (S,), lambda m, x: x.clone().fill_(1.5), EXACT),
    C("type_cast", (S,), lambda m, x: (x * 4).type(m.int32), EXACT),
    C("type_string", (S,), lambda m, x: x.type("torch.FloatTensor"), EXACT),
    C("sign", ((4, 6),), lambda m, x: m.sign(x), EXACT, gen="fint"),
    C("int_sign", (S,), lambda m, x: x.sign(), EXACT, gen="int"),
    C("log1p", ((4, 6),), lambda m, x: m.log1p(x * 0.01), Tol(4 * U, 2.0 ** -24)),
    C("log1p_wide", ((4, 6),), lambda m, x: x.log1p(), Tol(4 * U, 2.0 ** -24), gen="pos"),
    C("expm1", ((4, 6),), lambda m, x: x.expm1(), Tol(5 * U, 2.0 ** -24), gen="unit4"),
    C("expm1_small", ((4, 6),), lambda m, x: m.expm1(x * 0.001), Tol(5 * U, 2.0 ** -24)),
    # trig, hyperbolic and their inverses: composites of a few fp16 roundings each
    C("tan", ((4, 6),), lambda m, x: x.tan(), Tol(4 * U, 2.0 ** -20)),
    C("atan", ((4, 6),), lambda m, x: m.atan(x), Tol(5 * U, 2.0 ** -20), gen="wide"),
    C("atan_small", ((4, 6),), lambda m, x: x.atan(), Tol(5 * U, 2.0 ** -20)),
    C("asin", ((4, 6),), lambda m, x: m.asin(x), Tol(6 * U, 2.0 ** -20), gen="unit1"),
    C("acos", ((4, 6),), lambda m, x: x.acos(), Tol(6 * U, 2.0 ** -20), gen="unit1"),
    C("sinh", ((4, 6),), lambda m, x: x.sinh(), Tol(5 * U, 2.0 ** -24), gen="unit4"),
    C("sinh_wide", ((4, 6),), lambda m, x: m.sinh(x), Tol(5 * U, 2.0 ** -24), gen="wide"),
    C("cosh", ((4, 6),), lambda m, x: m.cosh(x), Tol(5 * U, 2.0 ** -24), gen="wide"),
    C("asinh", ((4, 6),), lambda m, x: m.asinh(x), Tol(4 * U, 2.0 ** -20), gen="wide"),
    C("asinh_small", ((4, 6),), lambda m, x: x.asinh(), Tol(4 * U, 2.0 ** -20)),
    C("acosh", ((4, 6),), lambda m, x: m.acosh(x + 1.0), Tol(4 * U, 2.0 ** -20), gen="pos"),
    C("atanh", ((4, 6),), lambda m, x: x.atanh(), Tol(4 * U, 2.0 ** -20), gen="unit1"),
    C("log2_log10", ((4, 6),), lambda m, x: (m.log2(x), x.log10()), Tol(3 * U, 2.0 ** -20),
      gen="pos"),
    C("exp2", ((4, 6),), lambda m, x: m.exp2(x), T3, gen="wide"),
    C("logaddexp", ((4, 6), (4, 6)), lambda m, x, y: m.logaddexp(x, y), Tol(4 * U, 2.0 ** -20),
      gen="wide"),
    C("logaddexp2", ((4, 6), (4, 6)), lambda m, x, y: x.logaddexp2(y), Tol(4 * U, 2.0 ** -20),
      gen="wide"),
    C("round", ((4, 6),), lambda m, x: m.round(x * 2), EXACT, gen="wide"),
    C("round_half_even", ((4, 6),), lambda m, x: x.round(), EXACT, gen="halves"),
    C("round_decimals", ((4, 6),), lambda m, x: (m.round(x, decimals=1), x.round(decimals=-1)),
      ONE_ROUNDING, gen="wide"),
    C("isnan_isinf_isfinite", ((4, 6),), lambda m, x: (m.isnan(x / x.round()), x.round().isinf(),
                                                       m.isfinite(1 / x.round())), EXACT,
      gen="wide", torch_fn=lambda m, x: (m.isnan(x / x.round()), x.round().isinf(),
                                         m.isfinite(1 / x.round()))),
    C("int_isfinite", (S,), lambda m, x: (m.isfinite(x), x.isnan(), m.isinf(x)), EXACT, gen="int"),
    C("repeat_interleave", ((2, 3),), lambda m, x: (x.repeat_interleave(2, dim=1),
                                                    m.repeat_interleave(x, 3)), EXACT),
    C("repeat_interleave_counts", ((3, 2),), lambda m, x: x.repeat_interleave(
        m.tensor([2, 0, 1]), dim=0), EXACT),
    C("repeat_interleave_of_counts", ((3,),), lambda m, x: m.repeat_interleave(
        m.tensor([1, 3, 2])).to(x.dtype) * x.sum(), ONE_ROUNDING),
    C("unfold", ((2, 7),), lambda m, x: (x.unfold(1, 3, 2), x.unfold(0, 1, 1)), EXACT),
    C("unfold_overlap", ((3, 5, 2),), lambda m, x: x.unfold(-2, 4, 1), EXACT),
    C("view_as", ((2, 6), (3, 4)), lambda m, x, y: x.view_as(y) + y),
    C("bool_max_min", ((3, 4), (3, 4)), lambda m, x, y: (x.max(), x.min(), m.maximum(x, y),
                                                         m.minimum(x, y), x.amax(1), x.max(0),
                                                         x.min(1)), EXACT, gen="bool"),
    C("bitwise_int32", (S, S), lambda m, x, y: (x & y, x | y, x ^ y, ~x, m.bitwise_and(x, 5),
                                             3 | y, x.bitwise_xor(y), m.bitwise_not(y)), EXACT,
      gen="i16"),
    C("bitwise_int16", (S, S), lambda m, x, y: (x.to(m.int16) & y.to(m.int16),
                                             ~x.to(m.int16) ^ y.to(m.int16)), EXACT, gen="i16"),
    C("bitwise_uint8", (S, S), lambda m, x, y: ((x & y).to(m.uint8), x.to(m.uint8) | y.to(m.uint8),
                                             ~(x.to(m.uint8) ^ y.to(m.uint8))), EXACT, gen="u8"),
    C("bitwise_bool_int", (S, S), lambda m, x, y: ((x > 0) & y, (x > 0) ^ (y > 1)), EXACT,
      gen="i16"),
    C("bool_ops_broadcast", ((3, 4), (4,)), lambda m, x, y: ((x > 0) ^ (y > 0), (x > 0) & True,
                                                         False | (y > 0)), EXACT),
    C("shifts", (S, S), lambda m, x, y: (x << 3, x >> 2, m.bitwise_left_shift(x, y.abs() % 4),
                                       x.bitwise_right_shift(y.abs() % 4)), EXACT, gen="int"),
    C("logical_ops", (S, S), lambda m, x, y: (m.logical_and(x, y), x.logical_or(y),
                                           m.logical_xor(x, y), m.logical_not(x > 0)), EXACT,
      gen="int"),
    C("clamp_min_max", (S,), lambda m, x: (x.clamp_min(-0.5), m.clamp_max(x, 0.25)), EXACT),
    C("aliases", (S, S), lambda m, x, y: (m.subtract(x, y, alpha=2), x.multiply(y),
                                          m.negative(x)), Tol(2 * U, 2.0 ** -24)),
    C("true_divide", (S, S), lambda m, x, y: m.true_divide(x, y), gen=("normal", "nonzero")),
    C("outer", ((3,), (4,)), lambda m, x, y: m.outer(x, y)),
    C("addmm", ((2, 4), (2, 3), (3, 4)), lambda m, c, x, y: m.addmm(c, x, y, beta=0.5, alpha=2),
      Tol(3 * U, 2.0 ** -24, 3 * U)),
    C("tile", ((2, 3),), lambda m, x: m.tile(x, (2,)), EXACT),
    C("tile_more_dims", ((2, 3),), lambda m, x: x.tile(2, 1, 2), EXACT, gen="int"),
    C("relu6", ((4, 6),), lambda m, x: _f(m).relu6(x), EXACT, gen="wide"),
    C("hardsigmoid", ((4, 6),), lambda m, x: _f(m).hardsigmoid(x), Tol(3 * U, 2.0 ** -24),
      gen="unit4"),
    C("hardswish", ((4, 6),), lambda m, x: _f(m).hardswish(x), Tol(4 * U, 2.0 ** -24),
      gen="unit4"),
    C("logsigmoid", ((4, 6),), lambda m, x: _f(m).logsigmoid(x), Tol(6 * U, 2.0 ** -20),
      gen="wide"),
    C("softsign", ((4, 6),), lambda m, x: _f(m).softsign(x), Tol(3 * U, 2.0 ** -24), gen="wide"),
    C("selu", ((4, 6),), lambda m, x: m.selu(x), Tol(8 * U, 2.0 ** -20), gen="unit4"),
    C("celu", ((4, 6),), lambda m, x: _f(m).celu(x, alpha=0.5), Tol(8 * U, 2.0 ** -20),
      gen="unit4"),
    C("unflatten", ((2, 6),), lambda m, x: x.unflatten(1, (2, -1)), EXACT),
    C("count_nonzero", ((3, 4),), lambda m, x: (m.count_nonzero(x, 1), x.count_nonzero()), EXACT,
      gen="int"),
    C("lerp", (S, S), lambda m, x, y: m.lerp(x, y, 0.25), Tol(3 * U, 2.0 ** -24, 2 * U)),
    C("lerp_tensor_weight", (S, S, S), lambda m, x, y, w: x.lerp(y, w), Tol(3 * U, 2.0 ** -24, 2 * U)),
    C("addcmul_addcdiv", (S, S, S), lambda m, x, y, z: (m.addcmul(x, y, z, value=0.5),
                                                       x.addcdiv(y, z, value=2)),
      Tol(3 * U, 2.0 ** -24, 2 * U), gen=("normal", "normal", "nonzero")),
    C("diag", ((4,),), lambda m, x: m.diag(x), EXACT),
    C("diag_offsets", ((3,),), lambda m, x: (x.diag(2), m.diag(x, -1)), EXACT),
    C("diag_of_matrix", ((3, 4),), lambda m, x: m.diag(x, 1), EXACT),
    # (the default posinf is the dtype's max: fp16's here, fp32's in torch's reference)
    # On the engine 0 / 0 is the indeterminate +0, not NaN (no NaN leaves the ANE;
    # sbryngelson/ane-guide part-1-machine/03-numerics.md): there is no NaN left to replace, and
    # the gradient of x / (x - x) is +-inf / +0 there, not torch's NaN (test_datapath checks
    # nan_to_num's value and gradient against torch under specials="ieee").
    C("nan_to_num", ((3, 4),), lambda m, x: (m.nan_to_num(x / (x - x), posinf=2.0, neginf=-3.0),
                                            (x / (x - x)).nan_to_num(1.5, 100.0, -7.0)), EXACT,
      gen="fint", torch_fn=lambda m, x: (m.nan_to_num(_engine_div(m, x, x - x), posinf=2.0, neginf=-3.0),
                                         _engine_div(m, x, x - x).nan_to_num(1.5, 100.0, -7.0)),
      grad=False),
    # norms (sums of powers in fp32: one rounding out)
    C("norm", ((3, 4),), lambda m, x: x.norm(), Tol(3 * U, 2.0 ** -24)),
    C("norm_p1_dim", ((3, 4),), lambda m, x: m.norm(x, 1, dim=1), Tol(3 * U, 2.0 ** -24)),
    C("norm_inf", ((3, 4),), lambda m, x: x.norm(float("inf"), dim=0), EXACT),
    C("norm_p3_keepdim", ((3, 4),), lambda m, x: x.norm(3, 1, keepdim=True), Tol(4 * U, 2.0 ** -24)),
    # einsum as batched matmuls
    C("einsum_matmul", ((3, 4), (4, 5)), lambda m, x, y: m.einsum("ij,jk->ik", x, y), products(4)),
    C("einsum_batched", ((2, 3, 4), (2, 4, 5)), lambda m, x, y: m.einsum("bij,bjk->bik", x, y),
      products(4)),
    C("einsum_attention", ((2, 2, 3, 4), (2, 2, 5, 4)), lambda m, q, k: m.einsum(
        "bhqd,bhkd->bhqk", q, k), products(4)),
    C("einsum_outer", ((3,), (4,)), lambda m, x, y: m.einsum("i,j->ij", x, y), products(1)),
    C("einsum_implicit_mv", ((3, 4), (4,)), lambda m, x, y: m.einsum("ij,j", x, y), products(4)),
    C("einsum_transpose", ((3, 4),), lambda m, x: m.einsum("ij->ji", x), EXACT),
    C("einsum_sum", ((3, 4),), lambda m, x: m.einsum("ij->", x), summed(12)),
    C("einsum_three", ((2, 3), (3, 4), (4, 2)), lambda m, x, y, z: m.einsum(
        "ij,jk,kl->il", [x, y, z]), Tol(2 * U, 2.0 ** -24, 3 * U)),
    C("einsum_sum_one_side", ((2, 3), (3, 4)), lambda m, x, y: m.einsum("ij,kl->jl", x, y),
      Tol(2 * U, 2.0 ** -24, 4 * U)),
    C("einsum_trace_diagonal", ((4, 4),), lambda m, x: (m.einsum("ii->", x), m.einsum("ii->i", x),
                                                        m.einsum("ii", x)), summed(4)),
    C("einsum_batched_diagonal", ((2, 3, 3, 4),), lambda m, x: m.einsum("biij->bj", x), summed(3)),
    C("einsum_ellipsis", ((2, 3, 4), (4, 5)), lambda m, x, y: m.einsum("...ij,...jk->...ik", x, y),
      products(4)),
    C("einsum_ellipsis_broadcast", ((2, 1, 3, 4), (5, 4, 2)), lambda m, x, y: m.einsum(
        "...ij,...jk", x, y), products(4)),
    C("einsum_ellipsis_sum", ((3, 2, 4),), lambda m, x: m.einsum("i...->...", x), summed(3)),
    C("meshgrid", ((3,), (4,)), lambda m, x, y: m.meshgrid(x, y, indexing="ij"), EXACT),
    C("meshgrid_xy", ((3,), (4,), (2,)), lambda m, x, y, z: m.meshgrid([x, y, z], indexing="xy"),
      EXACT),
    # torch's axis= alias of dim
    C("sum_axis", ((2, 3, 4),), lambda m, x: m.sum(x, axis=1), summed(3)),
    C("mean_std_axis", ((2, 3, 4),), lambda m, x: (x.mean(axis=0), x.var(axis=-1)), summed(4)),
    C("extrema_axis", ((3, 5),), lambda m, x: (x.amax(axis=-1), m.argmin(x, axis=0),
                                               x.max(axis=1), m.cummax(x, axis=1)), EXACT,
      gen="perm"),
    C("std_var_mean_axis", ((3, 4, 5),), lambda m, x: (*m.std_mean(x, axis=(0, 2)),
                                                       *m.var_mean(x, axis=1, keepdim=True)),
      summed(15)),
    C("softmax_axis", ((3, 5),), lambda m, x: m.softmax(x, axis=1), gen="unit4"),
    C("cumsum_sort_axis", ((3, 4),), lambda m, x: (x.cumsum(axis=0), m.sort(x, axis=0)),
      products(3), gen="perm"),
    C("squeeze_unsqueeze_axis", ((3, 1),), lambda m, x: x.squeeze(axis=1).unsqueeze(axis=0),
      EXACT),
    # padding, pooling, resampling
    C("F_pad_constant", ((2, 3, 4),), lambda m, x: _f(m).pad(x, (1, 2), value=1.5), EXACT),
    C("F_pad_2d", ((1, 2, 3, 4),), lambda m, x: _f(m).pad(x, (1, 1, 2, 0)), EXACT),
    C("F_pad_reflect", ((1, 2, 3, 4),), lambda m, x: _f(m).pad(x, (2, 1, 1, 2), mode="reflect"),
      EXACT),
    C("F_pad_replicate", ((2, 5),), lambda m, x: _f(m).pad(x, (3, 1), mode="replicate"), EXACT),
    C("F_pad_circular", ((1, 2, 3, 4),), lambda m, x: _f(m).pad(x, (1, 2, 2, 1), mode="circular"),
      EXACT),
    C("F_pad_crop", ((2, 5),), lambda m, x: _f(m).pad(x, (-1, 2)), EXACT),
    C("F_pad_int", ((3, 4),), lambda m, x: _f(m).pad(x, (1, 1), value=2), EXACT, gen="int"),
    C("max_pool2d", ((2, 3, 6, 6),), lambda m, x: _f(m).max_pool2d(x, 2), EXACT),
    C("max_pool2d_stride_pad", ((1, 2, 7, 6),), lambda m, x: m.max_pool2d(x, 3, 2, 1), EXACT),
    C("max_pool2d_ceil", ((1, 1, 5, 5),), lambda m, x: _f(m).max_pool2d(x, 2, ceil_mode=True),
      EXACT),
    C("max_pool2d_dilated_3d", ((2, 7, 7),), lambda m, x: _f(m).max_pool2d(x, 3, dilation=2),
      EXACT),
    C("max_pool2d_indices", ((2, 3, 6, 6),), lambda m, x: _f(m).max_pool2d(
        x, 2, return_indices=True), EXACT, gen="perm"),
    C("max_pool2d_indices_pad", ((1, 2, 7, 6),), lambda m, x: _f(m).max_pool2d(
        x, 3, 2, 1, return_indices=True), EXACT, gen="perm"),
    C("max_unpool2d", ((2, 3, 6, 6),), lambda m, x: _f(m).max_unpool2d(
        *_f(m).max_pool2d(x, 2, return_indices=True), 2), EXACT, gen="perm"),
    C("max_unpool2d_module", ((1, 2, 7, 6),), lambda m, x: m.nn.MaxUnpool2d(3, 2, 1)(
        *m.nn.MaxPool2d(3, 2, 1, return_indices=True)(x), output_size=(7, 6)), EXACT,
      gen="perm"),
    C("max_pool1d", ((2, 3, 8),), lambda m, x: m.max_pool1d(x, 3, stride=2), EXACT),
    C("avg_pool2d", ((2, 3, 6, 6),), lambda m, x: _f(m).avg_pool2d(x, 2), Tol(2 * U, 2.0 ** -24, 2 * U)),
    C("avg_pool2d_pad", ((1, 2, 7, 6),), lambda m, x: _f(m).avg_pool2d(x, 3, 2, 1),
      Tol(2 * U, 2.0 ** -24, 2 * U)),
    C("avg_pool2d_exclude_pad", ((1, 2, 7, 6),), lambda m, x: _f(m).avg_pool2d(
        x, 3, 2, 1, count_include_pad=False), Tol(2 * U, 2.0 ** -24, 2 * U)),
    C("avg_pool2d_divisor", ((1, 2, 4, 4),), lambda m, x: _f(m).avg_pool2d(
        x, 2, divisor_override=3), Tol(2 * U, 2.0 ** -24, 2 * U)),
    C("avg_pool2d_ceil", ((1, 2, 5, 6),), lambda m, x: _f(m).avg_pool2d(
        x, 2, padding=1, ceil_mode=True), Tol(2 * U, 2.0 ** -24, 2 * U)),
    C("avg_pool1d", ((2, 3, 8),), lambda m, x: m.avg_pool1d(x, 2), Tol(2 * U, 2.0 ** -24, 2 * U)),
    C("adaptive_avg_pool2d", ((1, 2, 6, 5),), lambda m, x: _f(m).adaptive_avg_pool2d(x, (3, 2)),
      Tol(4 * U, 2.0 ** -24, 4 * U)),
    C("interpolate_nearest", ((1, 2, 3, 4),), lambda m, x: _f(m).interpolate(x, scale_factor=2),
      EXACT),
    C("interpolate_nearest_size", ((1, 2, 3, 4),), lambda m, x: _f(m).interpolate(x, size=(5, 7)),
      EXACT),
    C("interpolate_bilinear", ((1, 2, 3, 4),), lambda m, x: _f(m).interpolate(
        x, size=(5, 6), mode="bilinear"), Tol(4 * U, 2.0 ** -24, 4 * U)),
    C("interpolate_bilinear_corners", ((1, 2, 3, 4),), lambda m, x: _f(m).interpolate(
        x, scale_factor=2, mode="bilinear", align_corners=True), Tol(4 * U, 2.0 ** -24, 4 * U)),
    C("interpolate_linear", ((2, 3, 5),), lambda m, x: _f(m).interpolate(
        x, scale_factor=1.5, mode="linear"), Tol(3 * U, 2.0 ** -24, 3 * U)),
    # convolutions as composites of conv2d's im2col + matmul
    C("F_unfold", ((2, 3, 5, 6),), lambda m, x: _f(m).unfold(x, (2, 3), dilation=(2, 1),
                                                              padding=1, stride=(1, 2)), EXACT),
    C("F_unfold_unbatched", ((3, 4, 4),), lambda m, x: _f(m).unfold(x, 2, stride=2), EXACT),
    C("conv1d", ((2, 3, 10), (4, 3, 3), (4,)), lambda m, x, w, b: m.conv1d(
        x, w, b, stride=2, padding=1), products(9)),
    C("conv3d", ((2, 4, 5, 6, 5), (6, 2, 3, 2, 3), (6,)), lambda m, x, w, b: m.conv3d(
        x, w, b, stride=(2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1), groups=2),
      Tol(4 * U, 2.0 ** -24, 4 * U)),
    C("avg_pool3d", ((2, 3, 4, 5, 6),), lambda m, x: _f(m).avg_pool3d(
        x, (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0)), Tol(3 * U, 2.0 ** -24, 3 * U)),
    C("avg_pool3d_module", ((1, 2, 4, 4, 4),), lambda m, x: m.nn.AvgPool3d(2)(x),
      Tol(3 * U, 2.0 ** -24, 3 * U)),
    C("conv_transpose2d", ((1, 3, 4, 5), (3, 2, 3, 3), (2,)), lambda m, x, w, b: m.conv_transpose2d(
        x, w, b, stride=2, padding=1, output_padding=1), products(27)),
    C("conv_transpose2d_groups", ((1, 4, 3, 3), (4, 1, 2, 2)), lambda m, x, w: _f(m).conv_transpose2d(
        x, w, groups=2), products(8)),
    # activations (fp16 steps: a few roundings each)
    C("softplus", ((4, 6),), lambda m, x: _f(m).softplus(x), Tol(6 * U, 2.0 ** -20), gen="wide"),
    C("softplus_beta", ((4, 6),), lambda m, x: _f(m).softplus(x, beta=2, threshold=5),
      Tol(6 * U, 2.0 ** -20), gen="wide"),
    C("leaky_relu", ((4, 6),), lambda m, x: _f(m).leaky_relu(x, 0.2)),
    C("elu", ((4, 6),), lambda m, x: _f(m).elu(x), Tol(6 * U, 2.0 ** -20), gen="wide"),
    C("elu_small", ((4, 6),), lambda m, x: _f(m).elu(x * 0.001, alpha=0.5), Tol(6 * U, 2.0 ** -20)),
    C("hardtanh", (S,), lambda m, x: _f(m).hardtanh(x, -0.5, 0.75), EXACT),
    C("mish", ((4, 6),), lambda m, x: _f(m).mish(x), Tol(10 * U, 2.0 ** -20), gen="unit4"),
    C("normalize", ((3, 4),), lambda m, x: _f(m).normalize(x), Tol(3 * U, 2.0 ** -24)),
    C("normalize_p1", ((3, 4),), lambda m, x: _f(m).normalize(x, p=1.0, dim=-1),
      Tol(3 * U, 2.0 ** -24)),
    C("cosine_similarity", ((3, 4), (3, 4)), lambda m, x, y: m.cosine_similarity(x, y),
      Tol(2 * U, 2.0 ** -18)),
    C("group_norm", ((2, 4, 3), (4,), (4,)), lambda m, x, w, b: m.group_norm(x, 2, w, b),
      Tol(4 * U, 16 * U)),
    C("group_norm_4d", ((2, 6, 2, 2),), lambda m, x: _f(m).group_norm(x, 3), Tol(4 * U, 16 * U)),
    C("sdpa", ((2, 4, 8), (2, 5, 8), (2, 5, 6)), lambda m, q, k, v: _f(
        m).scaled_dot_product_attention(q, k, v), ATTENTION),
    C("sdpa_causal_scale", ((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 3)), lambda m, q, k, v: _f(
        m).scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.25), ATTENTION),
    # losses
    C("smooth_l1_loss", ((3, 4), (3, 4)), lambda m, x, y: _f(m).smooth_l1_loss(
        x, y, reduction="none"), Tol(3 * U, 2.0 ** -24)),
    C("smooth_l1_loss_beta", ((3, 4), (3, 4)), lambda m, x, y: _f(m).smooth_l1_loss(
        x, y, beta=0.5), summed(12)),
    C("huber_loss", ((3, 4), (3, 4)), lambda m, x, y: _f(m).huber_loss(x, y, delta=0.5),
      summed(12)),
    C("cross_entropy_ignore_index", ((6, 4), (6,)), lambda m, x, t: _f(m).cross_entropy(x, t),
      log_softmax_tol(4, 8), gen=("unit4", "cls4ign"),
      torch_fn=lambda m, x, t: _f(m).cross_entropy(x, t.long())),
    C("cross_entropy_weight", ((6, 4), (6,)), lambda m, x, t: _f(m).cross_entropy(
        x, t, weight=_class_weights(m)), log_softmax_tol(4, 8), gen=("unit4", "cls4ign"),
      torch_fn=lambda m, x, t: _f(m).cross_entropy(x, t.long(), weight=_class_weights(m))),
    C("cross_entropy_weight_smooth", ((6, 4), (6,)), lambda m, x, t: _f(m).cross_entropy(
        x, t, _class_weights(m), label_smoothing=0.2), log_softmax_tol(4, 8),
      gen=("unit4", "cls4ign"), torch_fn=lambda m, x, t: _f(m).cross_entropy(
        x, t.long(), _class_weights(m), label_smoothing=0.2)),
    C("cross_entropy_4d_sum", ((2, 4, 3, 2), (2, 3, 2)), lambda m, x, t: _f(m).cross_entropy(
        x, t, ignore_index=1, reduction="sum"), log_softmax_tol(12, 8), gen=("unit4", "cls4"),
      torch_fn=lambda m, x, t: _f(m).cross_entropy(x, t.long(), ignore_index=1, reduction="sum")),
    C("binary_cross_entropy", ((3, 4), (3, 4)), lambda m, x, t: _f(m).binary_cross_entropy(
        x, t, reduction="none"), Tol(4 * U, 2.0 ** -20), gen="prob"),
    C("binary_cross_entropy_weight_sum", ((3, 4), (3, 4), (4,)), lambda m, x, t, w: _f(
        m).binary_cross_entropy(x, t, w.detach(), reduction="sum"),
      Tol(4 * U, 2.0 ** -20, 12 * U), gen=("prob", "prob", "pos")),
    C("bce_logits_pos_weight", ((3, 4), (3, 4), (4,), (4,)), lambda m, x, t, w, p: _f(
        m).binary_cross_entropy_with_logits(x, t, w.detach(), reduction="none",
                                            pos_weight=p.detach()),
      Tol(6 * U, 2.0 ** -20), gen=("wide", "prob", "pos", "pos")),
    C("bce_logits_torch_adapter", ((3, 4), (3, 4), (4,)), lambda m, x, t, p: m.binary_cross_entropy_with_logits(
        x, t, None, p.detach(), 2), summed(12), gen=("unit4", "prob", "pos")),
    C("softmin", ((3, 5),), lambda m, x: _f(m).softmin(x, dim=1), gen="unit4"),
    C("softmin_module", ((3, 5),), lambda m, x: m.nn.Softmin(dim=0)(x), gen="unit4"),
    C("kl_div_batchmean", ((4, 5), (4, 5)), lambda m, x, t: _f(m).kl_div(
        x.log_softmax(-1), t.softmax(-1), reduction="batchmean"), log_softmax_tol(20, 8),
      gen="unit4"),
    C("kl_div_zero_targets", ((3, 4), (3, 4)), lambda m, x, t: _f(m).kl_div(
        x, t.detach(), reduction="none"), Tol(3 * U, 2.0 ** -24), gen=("normal", "zbase")),
    C("kl_div_log_target_sum", ((3, 4), (3, 4)), lambda m, x, t: _f(m).kl_div(
        x, t, reduction="sum", log_target=True), summed(12), gen="unit4"),
    C("kl_div_mean_module", ((3, 4), (3, 4)), lambda m, x, t: m.nn.KLDivLoss()(x, t),
      summed(12), gen=("normal", "pos")),
    C("batch_norm_train", ((4, 3, 2),), lambda m, x: _f(m).batch_norm(x, None, None,
                                                                      training=True),
      Tol(4 * U, 2.0 ** -12)),
    C("batch_norm_eval_affine", ((4, 3), (3,), (3,)), lambda m, x, w, b: _f(m).batch_norm(
        x, *_per_channel_consts(m, 3, np.array([0.5, -1, 0], np.float16),
                                np.array([1, 2, 0.5], np.float16)), w, b),
      Tol(3 * U, 2.0 ** -20, 4 * U)),
    C("embedding_padding_idx", ((6,), (5, 3)), lambda m, i, w: _f(m).embedding(
        i, w, padding_idx=2), EXACT, gen=("idx4", "normal"),
      torch_fn=lambda m, i, w: _f(m).embedding(i.long(), w, padding_idx=2)),
    C("nll_loss_ignore", ((6, 4), (6,)), lambda m, x, t: _f(m).nll_loss(x, t, ignore_index=2),
      Tol(3 * U, 2.0 ** -24), gen=("normal", "cls4"), torch_fn=lambda m, x, t: _f(m).nll_loss(
        x, t.long(), ignore_index=2)),
]

CASES_BY_NAME = {c.name: c for c in CASES}
assert len(CASES_BY_NAME) == len(CASES), "case names must be unique"
