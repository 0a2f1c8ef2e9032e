"""The op registry: one OpDef per MIL op, looked up by name (`REGISTRY[name]`).

An OpDef holds everything about one op: its MIL argument names, its compile-time attributes
with their defaults, `infer` (result types, checked against the ANE limits), `simulate` (the
numpy kernel the simulator runs) and `vjp` (its gradient rule, attached beside the op's
definition in its family module). `OpDef.apply` is the one way an op is applied to typed
inputs: recording, rewriting in a pass, parsing MIL text and reading MILSpec all go through it,
and `validate` checks a whole Program with it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import numpy as np

from ..hardware import limits
from ..errors import AneforgeError, ShapeError
from ..ir.types import TensorType
from ..ir.validate import ValidationError, validate as validate_ir

REQUIRED = object()

# What a data-movement op's result holds of its input x (`OpDef.layout`; None: the op computes
# new values). The passes, the run plan and the compile walls ask for kinds, not op names.
LAYOUTS = {
    # x's elements in the same (C) order: only the shape changes, so a flat loop copies it
    # and a chain of them is one reshape (reshape, expand_dims, squeeze, identity)
    "same_order": "x's elements, same order",
    # each of x's elements once, in another order (transpose, pixel_shuffle)
    "reorder": "x's elements, reordered",
    # x's elements, some repeated (tile)
    "repeat": "x's elements, repeated",
    # some of x's elements (slice_by_index, split)
    "part": "some of x's elements",
    # x's elements next to other values (concat: other inputs; pad: a constant)
    "assemble": "x's elements and others",
}
# Kinds whose result holds nothing but x's values, each at least once: a value seen through
# them is still x (what the compile walls and the zero-finding passes look through).
WHOLE = ("same_order", "reorder", "repeat")


class Attr(NamedTuple):
    """A compile-time argument. `kind` says how MIL types it:
    int -> int32, ints -> tensor<int32,[n]>, bool, str -> string, dtype -> string naming a dtype,
    scalar -> a scalar of the first input's dtype, value -> a tensor literal (const's val)."""
    kind: str
    default: Any = REQUIRED


@dataclass
class OpDef:
    name: str
    inputs: tuple[str, ...]
    infer: Callable[..., Any]
    simulate: Callable[..., Any]
    attrs: dict[str, Attr] = field(default_factory=dict)
    optional: frozenset = frozenset()
    variadic: frozenset = frozenset()
    const_inputs: frozenset = frozenset()   # tensor inputs MIL requires to be const
    exact: bool = False                     # its result needs no rounding (moves/selects values)
    literal: bool = False                   # its value is its `val` attribute (const)
    layout: str | None = None               # a data-movement op's kind (LAYOUTS), else None
    # a data-movement op whose result, under these attributes, is more than its inputs'
    # elements moved (a pad that reflects, a slice through M1's width crop): (ctx, attrs) ->
    # bool; the run plan's moves (runtime/moves.py) leave such a step to its kernel
    alters: Callable | None = None
    fill: str | None = None                 # the attribute of the constant it writes (pad's)
    # how many inputs it combines element by element, broadcasting (numpy / MIL rules): 1 for
    # a unary elementwise op, 2 binary, 3 select; 0 for any other op
    elementwise: int = 0
    # its fused-VM opcode (kernels/fused.py OPCODES) under IEEE specials and under the
    # engine's, when its kernel is one float32 operation per element; else None
    fused: tuple[str, str] | None = None
    # a reduction's fused-VM opcode with an fp32 accumulator and with the narrow fp16 one
    fold: tuple[str, str] | None = None
    # each result element depends on its own input element and the attributes only (a unary
    # elementwise op): the run plan may evaluate it once per fp16 value and look results up
    pointwise: bool = False
    # `simulate` writing its one result into `out` (an array of the result's shape and dtype)
    # instead of returning it: the run plan gives an exact op's result its arena place this
    # way, saving a copy (concat, pad)
    into: Callable | None = None
    # (ctx, out, *inputs, **attrs) -> a function of no arguments computing the result and its
    # store (fp16 results only) into `out` from the arrays given, whose values change between
    # its calls but not their places (the run plan's arena): the work of finding the kernel
    # and laying out its operands done once (matmul, linear); it may return None (no such form
    # here)
    bind: Callable | None = None
    vjp: Callable | None = None

    def __post_init__(self):
        if self.layout is not None and self.layout not in LAYOUTS:
            raise AneforgeError(f"op {self.name!r}: layout {self.layout!r} is not one of "
                                f"{list(LAYOUTS)}")
        if self.elementwise not in range(len(self.inputs) + 1):
            raise AneforgeError(f"op {self.name!r}: elementwise={self.elementwise} but it has "
                                f"{len(self.inputs)} input(s)")

    def full_attrs(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            raise AneforgeError(f"{self.name} has no argument(s) {sorted(unknown)}; "
                                f"it takes {list(self.inputs) + list(self.attrs)}")
        out = {}
        for k, a in self.attrs.items():
            v = attrs.get(k, a.default)
            if v is REQUIRED:
                raise AneforgeError(f"{self.name} needs argument {k!r}")
            out[k] = v
        return out

    def round_scalars(self, attrs: dict[str, Any], in_types: dict[str, Any]) -> dict[str, Any]:
        """MIL types a `scalar` attribute like the op's first input: store it rounded so, e.g.,
        clip(alpha=0.1) means the fp16 value the engine sees, in the simulator and serializers."""
        first = next((t for t in in_types.values() if isinstance(t, TensorType)), None)
        if first is None or not first.dtype.is_float:
            return attrs
        out = dict(attrs)
        for k, a in self.attrs.items():
            if a.kind == "scalar" and out[k] is not None:
                out[k] = float(np.asarray(out[k], dtype=first.dtype.np))
        return out

    def apply(self, inputs: dict[str, Any], attrs: dict[str, Any], type_of: Callable,
              is_const: Callable) -> tuple[dict[str, Any], list[TensorType]]:
        """Check one use of this op and type it; returns (full attributes, result types).

        `inputs` maps argument names to values (a sequence of them for a variadic argument,
        None for an absent optional one), whatever a value is to the caller (a trace
        reference, an IR Var); `type_of(value)` gives its TensorType and `is_const(value)`
        says whether a const op makes it. Fills in default attributes (rejecting unknown
        ones), rounds `scalar` attributes as MIL types them, infers the result types (shapes,
        dtypes, ANE limits) and checks that inputs MIL requires constant are. Raises an error
        naming the op, the shapes and the rule broken."""
        attrs = self.full_attrs(attrs)
        in_types = {k: None if v is None else tuple(map(type_of, v)) if k in self.variadic
                    else type_of(v) for k, v in inputs.items()}
        attrs = self.round_scalars(attrs, in_types)
        types = self.infer_types(in_types, attrs)
        self.check_const_inputs(inputs, is_const)
        return attrs, types

    def check_const_inputs(self, inputs: dict[str, Any], is_const: Callable) -> None:
        for k in self.const_inputs:
            if inputs.get(k) is not None and not is_const(inputs[k]):
                raise AneforgeError(f"{self.name}: input {k!r} must be a constant (MIL requires "
                                    f"it); for values computed or fed at run time use matmul "
                                    f"instead")

    def infer_types(self, in_types: dict[str, Any], attrs: dict[str, Any]) -> list[TensorType]:
        """Result types for these input types; raises naming the op, shapes and limit."""
        for k in self.inputs:
            if in_types.get(k) is None and k not in self.optional:
                raise AneforgeError(f"{self.name} needs input {k!r}")
        out = self.infer(in_types, attrs)
        out = list(out) if isinstance(out, (list, tuple)) and not isinstance(out, TensorType) else [out]
        bound = limits.axis_bound()         # the target's caps, or the MIL parser's 65536
        for t in out:
            if len(t.shape) > limits.MAX_RANK or not all(1 <= n <= bound for n in t.shape):
                limits.check_shape(self.name, t.shape, describe(in_types))
        return out


def describe(in_types: dict[str, Any]) -> str:
    def one(t):
        if isinstance(t, tuple) and not isinstance(t, TensorType):
            return "[" + ", ".join(one(u) for u in t) + "]"
        return "None" if t is None else f"{t.dtype.name}{list(t.shape)}"
    return ", ".join(f"{k}={one(t)}" for k, t in in_types.items())


def shape_error(op: str, in_types: dict[str, Any], why: str) -> ShapeError:
    return ShapeError(f"{op}: {why} (inputs {describe(in_types)})")


REGISTRY: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    if opdef.name in REGISTRY:
        raise AneforgeError(f"op {opdef.name!r} is defined twice")
    REGISTRY[opdef.name] = opdef
    return opdef


def define(name: str, inputs: tuple[str, ...], infer, simulate, **kw) -> OpDef:
    return register(OpDef(name, inputs, infer, simulate, **kw))


def layout_ops(*kinds: str) -> frozenset:
    """The ops whose `layout` is one of `kinds` (LAYOUTS)."""
    unknown = set(kinds) - set(LAYOUTS)
    if unknown:
        raise AneforgeError(f"no layout kind(s) {sorted(unknown)}; they are {list(LAYOUTS)}")
    return frozenset(name for name, op in REGISTRY.items() if op.layout in kinds)


def elementwise_ops(arity: int | None = None) -> frozenset:
    """The elementwise ops (of `arity` inputs, or any)."""
    return frozenset(name for name, op in REGISTRY.items()
                     if op.elementwise and arity in (None, op.elementwise))


def _var_type(v) -> TensorType:
    return v.type


def is_literal(op_type: str | None) -> bool:
    """Whether ops of this type (a Node's `op`, an Operation's `type`; None for a leaf or an
    input) are literals, their value their `val` attribute (`OpDef.literal`)."""
    return op_type is not None and REGISTRY[op_type].literal


def _var_is_const(v) -> bool:
    return v.op is not None and is_literal(v.op.type)


def apply_to_vars(type: str, inputs: dict[str, Any], attrs: dict[str, Any]):
    """`OpDef.apply` on IR Vars (a tuple of them for a variadic argument)."""
    return REGISTRY[type].apply(inputs, attrs, _var_type, _var_is_const)


def _type_op(op) -> list[TensorType]:
    if op.type not in REGISTRY:
        raise ValidationError(f"unknown op {op.type!r} in {op.name!r}")
    return apply_to_vars(op.type, op.inputs, op.attrs)[1]


def validate(program, ane_io: bool = True):
    """Check a Program's invariants (aneforge.ir.validate), typing each op by the registry;
    returns the program. `ane_io=False` allows int32 at its boundary (an export)."""
    validate_ir(program, _type_op, ane_io)
    return program
