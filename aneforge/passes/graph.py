"""The one place passes read and edit a program: a `Graph` over the main block with a use map
that stays current through every edit, and the questions patterns ask of a value.

Passes never touch `Block.operations` or `Operation.inputs` directly: they call `add`,
`replace`, `remove` and `set_operations`, so the use map, fresh names and the program-output
rule below hold for every pass.

Program outputs keep their names: when an output value is replaced, the replacement takes the
output's name (the ANE hands multi-output buffers back in alphabetical order of name, and users
see the names). An output is never replaced by a function input, a const or another output.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..ir import Operation, Var
from ..ir.dag import fresh_name
from ..ops.registry import apply_to_vars


class Graph:
    def __init__(self, program, numerics, options=None):
        self.program, self.numerics, self.options = program, numerics, options
        self.block = program.main.block
        self._names = {v.name for v in self.block.vars()} | {op.name for op in self.ops}
        # removed ops by id, kept referenced: a freed op's id could go to an op made later,
        # which walk() and sweep() would then take for removed (and its values' use lists
        # for another's)
        self._removed: dict[int, Operation] = {}
        self._index_uses()

    # ---- reading ----------------------------------------------------------------------
    @property
    def ops(self) -> list[Operation]:
        return self.block.operations

    def walk(self, *types: str):
        """The ops (of `types`, if given) in program order, from a snapshot: ops a pass adds
        on the way are not visited, ops it removes are skipped."""
        for op in list(self.ops):
            if id(op) not in self._removed and (not types or op.type in types):
                yield op

    def uses(self, var: Var) -> list[Operation]:
        """The ops reading `var` (each once), in program order of insertion."""
        return self._uses.get(id(var), [])

    def is_output(self, var: Var) -> bool:
        return any(v is var for v in self.block.outputs)

    def only_use(self, var: Var) -> Operation | None:
        """The single op reading `var`, if it has exactly one reader and is no program output."""
        uses = self.uses(var)
        return uses[0] if len(uses) == 1 and not self.is_output(var) else None

    def internal(self, var: Var, inside: Iterable[Operation]) -> bool:
        """True if only ops of `inside` read `var` (and it is no program output): a fused
        pattern may then drop it."""
        ids = {id(op) for op in inside}
        return not self.is_output(var) and all(id(op) in ids for op in self.uses(var))

    # ---- editing ----------------------------------------------------------------------
    def fresh(self, base: str, plain_first: bool = False) -> str:
        """A name no value or op of the program has: base_N, N counting from the number of
        names (or, with `plain_first`, `base` itself if free, then base_1, base_2, ...)."""
        return fresh_name(base, self._names, None if plain_first else len(self._names))

    def add(self, type: str, inputs: dict[str, Any], before: Operation | None = None, **attrs):
        """Insert a new op (typed by its own `infer`) before `before` (default: at the end);
        returns its output Var, or a tuple of them."""
        inputs = {k: v for k, v in inputs.items() if v is not None}
        attrs, types = apply_to_vars(type, inputs, attrs)
        name = self.fresh(type)
        outs = [Var(name if i == 0 else self.fresh(type), t) for i, t in enumerate(types)]
        op = Operation(type, inputs, attrs, outs, name)
        index = len(self.ops) if before is None else self.ops.index(before)
        self.ops.insert(index, op)
        self._note_uses(op)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def const(self, value, before: Operation | None = None) -> Var:
        return self.add("const", {}, before, val=np.asarray(value))

    def replace(self, old: Var, new: Var) -> bool:
        """Make every reader of `old` read `new` instead. False (and nothing changed) when
        `old` is a program output that `new` may not stand in for (see the module doc)."""
        if old is new:
            return False
        assert old.type == new.type, f"replace {old!r} by {new!r}: types differ"
        if self.is_output(old):
            if new.op is None or new.op.type == "const" or self.is_output(new):
                return False
            old.name, new.name = self.fresh(old.name), old.name
        readers = self._uses.pop(id(old), [])
        for op in readers:
            op.replace_input(old, new)
            self._add_use(new, op)
        self.block.outputs = [new if v is old else v for v in self.block.outputs]
        return True

    def replace_op(self, op: Operation, new_outputs: list[Var]) -> bool:
        """Replace all of `op`'s outputs, remove it and whatever only it read (so the report
        credits the pass with the ops it made dead); False if an output could not move."""
        if not all(self.can_replace(o, n) for o, n in zip(op.outputs, new_outputs)):
            return False
        for o, n in zip(op.outputs, new_outputs):
            self.replace(o, n)
        self.remove(op)
        self.sweep(op.input_vars())
        return True

    def sweep(self, vars: Iterable[Var]) -> None:
        """Remove the producers of `vars` that nothing reads any more, transitively."""
        stack = list(vars)
        while stack:
            op = stack.pop().op
            if op is None or id(op) in self._removed or any(
                    self.uses(v) or self.is_output(v) for v in op.outputs):
                continue
            self.remove(op)
            stack.extend(op.input_vars())

    def can_replace(self, old: Var, new: Var) -> bool:
        return old is new or not self.is_output(old) or not (
            new.op is None or new.op.type == "const" or self.is_output(new))

    def set_input(self, op: Operation, key: str, new: Var) -> None:
        """Point one (non-variadic) argument of `op` at `new`."""
        self.set_inputs(op, {key: new})

    def set_inputs(self, op: Operation, changes: dict[str, Var]) -> None:
        """Point arguments of `op` at new values, all at once; then remove what the old values'
        producers leave unread (connecting first, so nothing still needed is swept)."""
        old = [op.inputs[k] for k in changes]
        op.inputs.update(changes)
        for v in changes.values():
            self._add_use(v, op)
        for v in old:
            if not any(u is v for u in op.input_vars()):
                self._uses[id(v)] = [u for u in self.uses(v) if u is not op]
        self.sweep(old)

    def remove(self, op: Operation) -> None:
        self.ops.remove(op)
        self._removed[id(op)] = op
        for v in set(op.input_vars()):
            self._uses[id(v)] = [u for u in self.uses(v) if u is not op]

    def set_operations(self, ops: list[Operation]) -> None:
        """Replace the op list wholesale (DCE, reordering) and rebuild the use map."""
        kept = {id(op) for op in ops}
        self._removed.update((id(op), op) for op in self.ops if id(op) not in kept)
        self.block.operations = ops
        self._index_uses()

    # ---- internals --------------------------------------------------------------------
    def _index_uses(self) -> None:
        self._uses: dict[int, list[Operation]] = {}
        for op in self.ops:
            self._note_uses(op)

    def _note_uses(self, op: Operation) -> None:
        for v in op.input_vars():
            self._add_use(v, op)

    def _add_use(self, v: Var, op: Operation) -> None:
        lst = self._uses.setdefault(id(v), [])
        if not any(u is op for u in lst):
            lst.append(op)


# ---- questions about values (no graph needed) ---------------------------------------------
def producer(var: Var, *types: str) -> Operation | None:
    """The op that computes `var` if its type is one of `types` (any type when none given)."""
    op = var.op
    return op if op is not None and (not types or op.type in types) else None


def const_value(var: Var) -> np.ndarray | None:
    op = var.op
    return op.attrs["val"] if op is not None and op.type == "const" else None


def splat(var: Var) -> float | None:
    """The value of a const whose elements are all equal (a scalar in disguise), else None."""
    val = const_value(var)
    if val is None or val.size == 0:
        return None
    flat = val.reshape(-1)
    first = flat[0]
    if not (np.all(flat == first) or (np.isnan(first) and np.all(np.isnan(flat)))):
        return None
    return first.item()


def is_splat(var: Var, value: float, rtol: float = 0.0) -> bool:
    v = splat(var)
    if v is None or isinstance(v, bool) and not isinstance(value, bool):
        return False
    return v == value if rtol == 0 else abs(v - value) <= rtol * abs(value)


def reduce_axes(op: Operation) -> tuple[int, ...]:
    """A reduction's axes, non-negative and sorted (all of them when `axes` is None)."""
    rank = len(op.inputs["x"].shape)
    axes = range(rank) if op.attrs["axes"] is None else op.attrs["axes"]
    return tuple(sorted(a % rank for a in axes)) if rank else ()


def other_operand(op: Operation, var: Var) -> Var | None:
    """For a binary op reading `var` as x or y, the other operand."""
    x, y = op.inputs.get("x"), op.inputs.get("y")
    return y if x is var else x if y is var else None


def binary_with_const(op: Operation, types: tuple[str, ...], commutative: bool = True):
    """(tensor operand, const operand) of a binary op `x ∘ c` (or `c ∘ x` when commutative)
    whose one operand is a const, else None."""
    if op.type not in types:
        return None
    x, y = op.inputs["x"], op.inputs["y"]
    if const_value(y) is not None and const_value(x) is None:
        return x, y
    if commutative and const_value(x) is not None and const_value(y) is None:
        return y, x
    return None


COMMUTATIVE = frozenset({"add", "mul", "maximum", "minimum", "equal", "not_equal"})


# ---- chain matching shared by the fusions ------------------------------------------------
def prev(var: Var, types: tuple[str, ...], const: float | None = None,
         rtol: float = 2.0 ** -10):
    """(op, tensor operand) if `var` = op(t, c) with op in `types` and c a const of value
    `const` (within fp16 rounding); for unary ops (const None), (op, its x)."""
    op = producer(var, *types)
    if op is None:
        return None
    if const is None:
        return (op, op.inputs["x"]) if "y" not in op.inputs else None
    pair = binary_with_const(op, types, commutative=op.type in COMMUTATIVE)
    return (op, pair[0]) if pair is not None and is_splat(pair[1], const, rtol) else None


def next_op(graph: Graph, var: Var, types: tuple[str, ...], const: float | None = None,
            other: Var | None = None, rtol: float = 2.0 ** -10) -> Operation | None:
    """The only reader of `var`, if its type is in `types` and, for a binary op, its other
    operand is a const of value `const` (within fp16 rounding) or the value `other`."""
    op = graph.only_use(var)
    if op is None or op.type not in types:
        return None
    if const is None and other is None:
        return op
    rest = other_operand(op, var)
    if rest is None or op.type not in COMMUTATIVE and op.inputs["x"] is not var:
        return None
    return op if (rest is other if other is not None else is_splat(rest, const, rtol)) else None


def half_x_times(graph: Graph, t: Var, x: Var):
    """The tail shared by both gelu forms: 0.5 * x * (t + 1), in any of coremltools' three
    arrangements. Returns (last op, [ops of the tail]) or None.

        t -> add(1) -> mul(0.5) -> mul(x)      t -> add(1) -> mul(x) -> mul(0.5)
        t -> add(1) -> mul(h) with h = mul(x, 0.5)
    """
    add1 = next_op(graph, t, ("add",), const=1.0)
    if add1 is None:
        return None
    a = add1.outputs[0]
    half = next_op(graph, a, ("mul",), const=0.5)
    if half is not None:
        last = next_op(graph, half.outputs[0], ("mul",), other=x)
        return (last, [add1, half, last]) if last is not None else None
    by_x = next_op(graph, a, ("mul",), other=x)
    if by_x is not None:
        last = next_op(graph, by_x.outputs[0], ("mul",), const=0.5)
        return (last, [add1, by_x, last]) if last is not None else None
    last = graph.only_use(a)
    h = other_operand(last, a) if last is not None and last.type == "mul" else None
    hx = prev(h, ("mul",), const=0.5) if h is not None else None
    if hx is None or hx[1] is not x or not graph.internal(h, [last]):
        return None
    return last, [add1, hx[0], last]


def per_channel(val: np.ndarray, x: Var) -> np.ndarray | None:
    """A constant operand of an [N, C, H, W] `x` as a [C] array, if it varies along the
    channel axis only ([C, 1, 1], [1, C, 1, 1], or one value) and has x's dtype; else None."""
    if val is None or val.ndim > 4 or len(x.shape) != 4 or val.dtype != x.dtype.np:
        return None
    full = val.reshape((1,) * (4 - val.ndim) + val.shape)
    if full.shape[0] != 1 or full.shape[2:] != (1, 1) or full.shape[1] not in (1, x.shape[1]):
        return None
    return np.ascontiguousarray(np.broadcast_to(full.reshape(-1), (x.shape[1],)))


def fuse(graph: Graph, ops: list[Operation], type: str, inputs: dict, **attrs) -> bool:
    """Replace the single-output chain `ops` (its last op's output is the result) by one new
    op, if no value inside the chain is read from outside it (the chain then goes with it)."""
    last = ops[-1]
    if not all(graph.internal(v, ops) for op in ops[:-1] for v in op.outputs):
        return False
    new = graph.add(type, inputs, before=last, **attrs)
    if graph.replace_op(last, [new]):
        return True
    graph.remove(new.op)
    return False


def conv_then_const(graph, kinds: tuple[str, ...]):
    """(conv, its single-use follower of one of `kinds`, the follower's per-channel constant)
    for each conv whose output feeds such an op with a constant other operand of the same type."""
    for op in graph.walk("conv"):
        y = op.outputs[0]
        post = next_op(graph, y, kinds)
        c = other_operand(post, y) if post is not None else None
        cv = per_channel(const_value(c), y) if c is not None else None
        if cv is not None and post.outputs[0].type == y.type:
            yield op, post, cv


def fold_into_conv(graph: Graph, conv: Operation, ops: list[Operation], scale=None,
                   shift=None) -> bool:
    """Replace the chain conv -> `ops` by one conv computing scale * conv(x) + shift per output
    channel ([C_out] arrays or None): weight * scale and bias * scale + shift, folded in fp32 and
    rounded to the weight's dtype. False (nothing changed) if a folded value overflows it or the
    chain cannot be fused."""
    w = const_value(conv.inputs["weight"])
    b = const_value(conv.inputs["bias"]) if "bias" in conv.inputs else None
    co = w.shape[0]
    s = np.ones(co, np.float32) if scale is None else np.asarray(scale, np.float32)
    weight = w.astype(np.float32) * s.reshape(co, 1, 1, 1)
    bias = (np.zeros(co, np.float32) if b is None else b.astype(np.float32)) * s
    bias = bias if shift is None else bias + np.asarray(shift, np.float32)
    with np.errstate(all="ignore"):
        weight, bias = weight.astype(w.dtype), bias.astype(w.dtype)
    if not (np.all(np.isfinite(weight)) and np.all(np.isfinite(bias))):
        return False
    made = [graph.const(weight, ops[-1]), graph.const(bias, ops[-1])]
    inputs = {"x": conv.inputs["x"], "weight": made[0], "bias": made[1]}
    if fuse(graph, [conv, *ops], "conv", inputs, **conv.attrs):
        return True
    for v in made:
        graph.remove(v.op)
    return False
