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
