"""The IR: MIL-shaped SSA, named as MIL.proto names it (Program / Function / Block / Operation / Var).

A Block holds its operations in a plain list in topological order; every Var has exactly one
producer (an Operation, or None for a function input). Passes rewrite it with `replace_uses`,
`remove_op` and `insert_op`; `aneforge.ops.validate` checks the invariants again afterwards.
"""
from __future__ import annotations

from typing import Any, Iterator

from .types import TensorType


class Var:
    """One SSA value: a name, a static type and the operation that produces it."""

    __slots__ = ("name", "type", "op")

    def __init__(self, name: str, type: TensorType, op: "Operation | None" = None):
        self.name, self.type, self.op = name, type, op

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self):
        return self.type.dtype

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


class Operation:
    """A MIL op: `type` names an entry of the op registry.

    `inputs` maps MIL argument names to a Var (or a tuple of Vars for variadic arguments such
    as concat's `values`); `attrs` holds the compile-time arguments (axes, keep_dims, mode, a
    const's `val`) as plain Python / numpy values.
    """

    __slots__ = ("type", "inputs", "attrs", "outputs", "name")

    def __init__(self, type: str, inputs: dict[str, Any], attrs: dict[str, Any],
                 outputs: list[Var], name: str):
        self.type, self.inputs, self.attrs, self.outputs, self.name = type, inputs, attrs, outputs, name
        for v in outputs:
            v.op = self

    def input_vars(self) -> Iterator[Var]:
        for v in self.inputs.values():
            yield from (v if isinstance(v, tuple) else (v,))

    def replace_input(self, old: Var, new: Var) -> None:
        for k, v in self.inputs.items():
            if isinstance(v, tuple):
                self.inputs[k] = tuple(new if u is old else u for u in v)
            elif v is old:
                self.inputs[k] = new

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.inputs.items())
        return f"{', '.join(map(repr, self.outputs))} = {self.type}({args}) {self.attrs}"


class Block:
    """Inputs, a topologically ordered list of operations, and outputs."""

    def __init__(self, inputs: list[Var], operations: list[Operation], outputs: list[Var]):
        self.inputs, self.operations, self.outputs = inputs, operations, outputs

    def uses(self, var: Var) -> list[Operation]:
        return [op for op in self.operations if any(u is var for u in op.input_vars())]

    def replace_uses(self, old: Var, new: Var, after: Operation | None = None) -> None:
        """Make every consumer of `old` (from `after` on, if given) read `new`, outputs included."""
        start = self.operations.index(after) + 1 if after is not None else 0
        for op in self.operations[start:]:
            op.replace_input(old, new)
        self.outputs = [new if v is old else v for v in self.outputs]

    def remove_op(self, op: Operation) -> None:
        self.operations.remove(op)

    def insert_op(self, index: int, op: Operation) -> None:
        self.operations.insert(index, op)

    def vars(self) -> Iterator[Var]:
        yield from self.inputs
        for op in self.operations:
            yield from op.outputs


class Function:
    def __init__(self, block: Block, opset: str = "ios18"):
        self.block, self.opset = block, opset

    @property
    def inputs(self) -> list[Var]:
        return self.block.inputs

    @property
    def outputs(self) -> list[Var]:
        return self.block.outputs


BUILD_INFO = {"coremlc-component-MIL": "3520.4.1", "coremlc-version": "3520.5.1"}


class Program:
    """A MIL program: version, build info and functions by name (aneforge emits one, `main`)."""

    def __init__(self, functions: dict[str, Function], version: str = "1.3",
                 build_info: dict[str, str] | None = None):
        self.functions, self.version = functions, version
        self.build_info = dict(BUILD_INFO if build_info is None else build_info)

    @property
    def main(self) -> Function:
        return self.functions["main"]

    @property
    def operations(self) -> list[Operation]:
        return self.main.block.operations

    def signature(self) -> str:
        from .signature import signature
        return signature(self)

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for op in self.operations:
            counts[op.type] = counts.get(op.type, 0) + 1
        return counts

    def __repr__(self) -> str:
        f = self.main
        lines = [f"Program(main{tuple(f.inputs)})"] + [f"  {op!r}" for op in f.block.operations]
        return "\n".join(lines + [f"  -> {[v.name for v in f.outputs]}"])
