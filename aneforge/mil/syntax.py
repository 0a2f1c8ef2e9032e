"""The syntax tree of MIL text: what the parser in text.py produces and resolve.py turns into
the IR, each piece with its line; and the error both raise."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..errors import AneforgeError


class MILSyntaxError(AneforgeError):
    """MIL text that aneforge cannot accept: `.line` (1-based) and `.rule` say where and which
    rule; the message says what to do."""

    def __init__(self, line: int, rule: str, message: str, source: str = ""):
        self.line, self.rule, self.message = line, rule, message
        where = f"\n    {line} | {source.strip()}" if source.strip() else ""
        super().__init__(f"MIL line {line} [{rule}]: {message}{where}")



# A number token (a verbose regular expression): text.py's tokenizer and fast.py's statements.
NUMBER_PATTERN = r"""[-+]?(?:0[xX][0-9a-fA-F]+(?:\.[0-9a-fA-F]*)?(?:[pP][-+]?[0-9]+)?
                    |(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?
                    |(?:inf|nan)(?![A-Za-z0-9_]))"""


class Token(NamedTuple):
    kind: str          # name, number, string, punct, eof
    text: str
    line: int

    def __str__(self) -> str:
        return "the end of the text" if self.kind == "eof" else repr(self.text)


def source_line(lines: list[str], line: int) -> str:
    return lines[line - 1] if 0 < line <= len(lines) else ""


# --------------------------------------------------------------------------- syntax tree

@dataclass
class TypeSpec:
    dtype: str
    shape: tuple[int, ...]
    line: int

    def __str__(self) -> str:
        return f"tensor<{self.dtype}, [{', '.join(map(str, self.shape))}]>"


@dataclass
class Literal:
    """A value written in the text: `fp16(0.5)`, `tensor<int32, [2]>([1, 2])`, `string("x")`."""
    dtype: str
    value: np.ndarray
    line: int

    def string(self) -> str | None:
        """The string of a string scalar (None for any other value)."""
        v = self.value
        return v.item() if v.dtype.kind == "U" and not v.ndim else None


@dataclass
class Ref:
    name: str
    line: int


@dataclass
class Arg:
    name: str
    value: Any            # Ref | Literal | tuple of them
    line: int


@dataclass
class Statement:
    outputs: list[tuple[TypeSpec, Token]]
    op: Token
    args: list[Arg]
    annotations: dict[str, tuple[Literal, int]] | None    # None: no [...] at all
    line: int

    # What resolve.py's checks read, by name (fast.py's `Line` has the same, read directly
    # from the text).
    @property
    def form(self) -> tuple | None:
        """The op, its argument and annotation names in order (None: no annotations)."""
        if self.annotations is None:
            return None
        return self.op.text, tuple([a.name for a in self.args]), tuple(self.annotations)

    @property
    def named(self) -> tuple[str | None, int]:
        """(the op name the name annotation gives, None if it is not a string; its line)."""
        lit, line = self.annotations["name"]
        return lit.string(), line

    @property
    def arguments(self) -> list[Arg]:
        """The arguments, then the annotations but the name (a const's value)."""
        return self.args if len(self.annotations) == 1 else list(self.args) + [
            Arg(k, lit, line) for k, (lit, line) in self.annotations.items() if k != "name"]

    @property
    def refs(self) -> list[str | None]:
        """Each of `arguments`' value name (None where it is not a name)."""
        return [a.value.name if type(a.value) is Ref else None for a in self.arguments]

    @property
    def types(self) -> list[TypeSpec]:
        return [t for t, _ in self.outputs]

    @property
    def results(self) -> list[tuple[str, int]]:
        """(name, line) of each result."""
        return [(tok.text, tok.line) for _, tok in self.outputs]


@dataclass
class FunctionSyntax:
    name: Token
    opset: Token
    params: list[tuple[TypeSpec, Token]]
    body: list[Statement]
    outputs: list[Ref]
    line: int
    return_line: int


@dataclass
class ProgramSyntax:
    version: str
    build_info: dict[str, str] | None
    functions: list[FunctionSyntax] = field(default_factory=list)
