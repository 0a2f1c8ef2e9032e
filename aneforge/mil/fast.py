"""The common statement, read by one regular expression: a fast path for the MIL text parser.

A network's text is mostly lines of one shape,

    tensor<fp16, [1, 64]> v1 = add(x = v0, y = c0)[name = string("v1")];
    fp16 c0 = const()[name = string("c0"), val = fp16(0x1.8p-1)];

one result, arguments that are names, tuples of names or scalar literals, annotations that are
scalar literals. Read token by token, such a line costs ~100 Python calls (peek, expect,
accept ... a few per token); `FastStatements` matches the whole line once (`_STATEMENT`) and
builds its `Statement` directly. Types and literals are read by the parser's own grammar (the
`read` text.py passes in), once per distinct text, and reused; a name annotation's string (one
per statement) is read in place.

The commonest lines, whose arguments are all names and whose first annotation is the name (both
above), become a `Line` instead: the pieces resolve.py's quick path reads, the syntax
tree built only if a check asks for it (a network's text is mostly such lines; building their
trees was a fifth of its parse).

Whatever the expression does not match, or whose pieces the grammar rejects, the parser reads
token by token as before, and says what is wrong there: the fast path only takes lines the
grammar reads to the same Statement (aneforge_tests/test_mil_parse.py and test_mil_fuzz.py
check both ways give the same programs and the same errors).
"""
from __future__ import annotations

import re
from typing import Callable, NamedTuple

import numpy as np

from .syntax import NUMBER_PATTERN, Arg, Literal, Ref, Statement, Token, TypeSpec

_W = r"[ \t\r\f\v]*"            # the tokenizer's whitespace within a line
_NAME = r"(?!(?:inf|nan)(?![A-Za-z0-9_]))[A-Za-z_][A-Za-z0-9_]*"   # inf, nan: numbers
_STRING = r'"(?:[^"\\\n]|\\.)*"'
# a scalar value, `fp16(0.5)` or `string("EXACT")`, bare or in const(...) / const(val = ...)
_SCALAR = rf"{_NAME}{_W}\({_W}(?:{NUMBER_PATTERN}|{_STRING}|true|false){_W}\)"
_LITERAL = rf"const{_W}\({_W}(?:val{_W}={_W})?{_SCALAR}{_W}\)|{_SCALAR}"
_TUPLE = rf"\({_W}(?:{_NAME}(?:{_W},{_W}{_NAME})*)?{_W}\)"
_TYPE = rf"tensor{_W}<{_W}{_NAME}{_W},{_W}\[[0-9 \t\r\f\v,]*\]{_W}>"
# an argument, `key = (tuple) | literal | name`: the literal is tried before the name it starts
# with, as the grammar reads a name followed by '(' as a literal
_ARG_FORM = rf"({_NAME}){_W}={_W}(?:({_TUPLE})|({_LITERAL})|({_NAME}))"
_ANNOTATION_FORM = rf"({_NAME}){_W}={_W}({_LITERAL})"


def _plain(form: str) -> str:
    """`form` without capturing groups (every unescaped '(' not starting '(?' made '(?:')."""
    return re.sub(r"(?<!\\)\((?!\?)", "(?:", form)


_ARGS = rf"(?:{_plain(_ARG_FORM)}(?:{_W},{_W}{_plain(_ARG_FORM)})*)?"
_ANNOTATIONS = rf"{_plain(_ANNOTATION_FORM)}(?:{_W},{_W}{_plain(_ANNOTATION_FORM)})*"
_NAME_STRING = rf'string{_W}\({_W}"([^"\\\n]*)"{_W}\)'      # no escapes to undo
# the annotations: `name = string("...")` first, then any others (groups: the name, the
# others), or others only (the last group)
_STATEMENT = re.compile(
    rf"""{_W}(?:({_TYPE}){_W}|({_NAME})[ \t\r\f\v]+)({_NAME}){_W}={_W}({_NAME}){_W}
    \({_W}({_ARGS}){_W}\){_W}\[{_W}(?:name{_W}={_W}{_NAME_STRING}(?:{_W},{_W}({_ANNOTATIONS}))?
    |({_ANNOTATIONS})){_W}\]{_W};{_W}\Z""", re.X)
_ARG = re.compile(_ARG_FORM, re.X)
_ANNOTATION = re.compile(_ANNOTATION_FORM, re.X)
_NAMED_ARG = re.compile(rf"({_NAME}){_W}={_W}({_NAME})")    # `key = name`: args without '('
_TUPLE_NAMES = re.compile(_NAME)
_token = tuple.__new__          # Token(...) without NamedTuple's Python-level __new__
_NAME_LITERAL = re.compile(_NAME_STRING + r"\Z", re.X)
_NAME_ONLY = ("name",)          # the annotations of most `Line`s


class Line(NamedTuple):
    """A statement of one result whose arguments are all names and whose first annotation is
    the name, as `_STATEMENT` read it: what `Statement` tells resolve.py's checks (`form`,
    `named`, `arguments`, `refs`, `types`, `results`), read from the text; its syntax tree
    (`outputs`, `op`, `args`, `annotations`) is built when a check asks for it (`tree`)."""
    form: tuple
    named: tuple[str, int]
    refs: list[str | None]
    types: tuple[TypeSpec]          # its result's type as the grammar read it (at line 1)
    line: int
    out: str
    text: str
    reader: "FastStatements"
    annotated: list[Arg]            # the annotations but the name (a const's value), as Args

    @property
    def results(self) -> list[tuple[str, int]]:
        return [(self.out, self.line)]

    @property
    def arguments(self) -> list[Arg]:
        line = self.line
        return [Arg(k, Ref(r, line), line) for k, r in zip(self.form[1], self.refs)] + \
            self.annotated

    @property
    def tree(self) -> Statement:
        return self.reader.tree(self.text, self.line)

    outputs = property(lambda self: self.tree.outputs)
    op = property(lambda self: self.tree.op)
    args = property(lambda self: self.tree.args)
    annotations = property(lambda self: self.tree.annotations)


class FastStatements:
    """Statements of the common shape, by line. `read(text, what)` is the parser's grammar on a
    piece of text (`what`: "type" or "literal"), the TypeSpec / Literal it reads at line 1, or
    None if the grammar rejects it."""

    def __init__(self, read: Callable[[str, str], object]):
        self.read = read
        self.by_line: dict[int, Statement | Line] = {}
        self.types: dict[str, TypeSpec | None] = {}
        self.literals: dict[str, Literal | None] = {}
        self.trees: dict[int, Statement] = {}

    def line_tokens(self, text: str, line: int) -> list[Token] | None:
        """One "statement" token for a line of the common shape (its Statement or Line kept in
        `by_line`), else None."""
        m = _STATEMENT.match(text)
        if m is None:
            return None
        st = self.line(m, text, line) or self.statement(m, line)
        if st is None:
            return None
        self.by_line[line] = st
        return [_token(Token, ("statement", text, line))]

    def line(self, m: re.Match, text: str, line: int) -> Line | None:
        """The `Line` of a matched statement if it is one (else None)."""
        tensor_type, scalar_type, out, op, args, name, others, _ = m.groups()
        if name is None or "(" in args:
            return None
        t = self.piece(self.types, tensor_type or scalar_type, "type")
        annotated = self.annotated(others, line) if others else []
        if t is None or annotated is None:
            return None
        names = _TUPLE_NAMES.findall(args)          # key, value, key, value ...
        if annotated:
            form = (op, tuple(names[0::2]), _NAME_ONLY + tuple(a.name for a in annotated))
            refs = names[1::2] + [None] * len(annotated)
        else:
            form, refs = (op, tuple(names[0::2]), _NAME_ONLY), names[1::2]
        return _token(Line, (form, (name, line), refs, (t,), line, out, text, self, annotated))

    def annotated(self, others: str, line: int) -> list[Arg] | None:
        """A `Line`'s annotations after the name, as arguments (None as `annotations` gives)."""
        out, keys = [], {"name"}
        for key, lit in _ANNOTATION.findall(others):
            value = self.literal(lit, line)
            if value is None or key in keys:
                return None
            keys.add(key)
            out.append(Arg(key, value, line))
        return out

    def tree(self, text: str, line: int) -> Statement:
        """A `Line`'s Statement (read once)."""
        if line not in self.trees:
            self.trees[line] = self.statement(_STATEMENT.match(text), line)
        return self.trees[line]

    def statement(self, m: re.Match, line: int) -> Statement | None:
        tensor_type, scalar_type, out, op, args, name, others, annotations = m.groups()
        t = self.piece(self.types, tensor_type or scalar_type, "type")
        parsed = self.annotations(name, others or annotations, line)
        arguments = self.arguments(args, line)
        if t is None or parsed is None or arguments is None:
            return None
        return Statement([(TypeSpec(t.dtype, t.shape, line), _token(Token, ("name", out, line)))],
                         _token(Token, ("name", op, line)), arguments, parsed, line)

    def annotations(self, name: str | None, others: str | None, line: int) -> dict | None:
        parsed = {} if name is None else {"name": (Literal("string", np.array(name), line), line)}
        for key, lit in _ANNOTATION.findall(others) if others else ():
            value = self.literal(lit, line)
            if value is None or key in parsed:       # a repeated key: the grammar says so
                return None
            parsed[key] = (value, line)
        return parsed

    def arguments(self, args: str, line: int) -> list[Arg] | None:
        if "(" not in args:                 # names only (most statements): a simpler expression
            return [Arg(key, Ref(ref, line), line) for key, ref in _NAMED_ARG.findall(args)]
        arguments = []
        for key, names, lit, ref in _ARG.findall(args):
            if ref:
                value = Ref(ref, line)
            elif lit:
                value = self.literal(lit, line)
                if value is None:
                    return None
            else:
                value = tuple(Ref(n, line) for n in _TUPLE_NAMES.findall(names))
            arguments.append(Arg(key, value, line))
        return arguments

    def literal(self, text: str, line: int) -> Literal | None:
        name = _NAME_LITERAL.match(text)
        if name is not None:                # a name annotation: its own string, read here
            return Literal("string", np.array(name.group(1)), line)
        lit = self.piece(self.literals, text, "literal")
        # each statement its own array, as the grammar gives (a pass may change one in place)
        return None if lit is None else Literal(lit.dtype, lit.value.copy(), line)

    def piece(self, cache: dict, text: str, what: str):
        if text not in cache:
            cache[text] = self.read(text, what)
        return cache[text]
