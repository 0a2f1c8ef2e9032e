"""MIL text, in the format of the MIL primer (Apple's MIL as coremltools prints it):

    program(1.3)
    [buildInfo = dict<string, string>({{"coremlc-component-MIL", "3520.4.1"}, ...})]
    {
        func main<ios18>(tensor<fp16, [1, 4]> x_0) {
            tensor<fp16, [1, 4]> relu_1 = relu(x = x_0)[name = string("relu_1")];
        } -> (relu_1);
    }

Compile-time arguments are written inline (`axes = const(tensor<int32, [1]>([-1]))`,
`mode = string("EXACT")`), fp16 tensor constants as 16-bit hex literals.

`emit(program)` writes it; `parse(text)` reads it back (and what people and coremltools write
by hand: comments, literals bound where a tensor goes, consts bound to compile-time
arguments by name, BLOBFILE weights) into a validated Program. Errors are `MILSyntaxError`s
naming the line and the rule (resolve.RULES); docs/mil.md describes the grammar.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import math
import re
from itertools import repeat
from operator import itemgetter

import numpy as np

from ..errors import AneforgeError
from ..hardware.limits import MAX_RANK
from ..ops import REGISTRY
from .fast import FastStatements
from .resolve import resolve
from .syntax import (NUMBER_PATTERN, Arg, FunctionSyntax, Literal, MILSyntaxError, ProgramSyntax,
                     Ref, Statement, Token, TypeSpec, source_line)

INDENT = "    "


def _float(v) -> str:
    r = repr(float(v))
    return r[:-2] if r.endswith(".0") else r


def _scalar(v, dtype: str) -> str:
    if dtype == "bool":
        return "true" if v else "false"
    if dtype == "fp16":
        return f"0x{np.float16(v).view(np.uint16):04x}"
    if dtype in ("fp32", "fp64"):
        return _float(v)
    return str(int(v))


def _nested(a: np.ndarray, dtype: str) -> str:
    if a.ndim == 0:
        return _scalar(a.item(), dtype)
    return "[" + ", ".join(_nested(x, dtype) for x in a) + "]"


def _dtype_name(a: np.ndarray) -> str:
    from .. import dtypes
    return "fp32" if a.dtype == np.float64 else dtypes.from_numpy(a.dtype).name if a.dtype != np.float32 else "fp32"


def tensor_literal(a: np.ndarray) -> str:
    """`fp16(0.5)` for a scalar, `tensor<fp16, [2]>([0x3c00, 0x4000])` for a tensor."""
    dt = _dtype_name(a)
    if a.ndim == 0:
        v = a.item()
        body = _float(v) if dt in ("fp16", "fp32") else _scalar(v, dt)
        return f"{dt}({body})"
    shape = ", ".join(map(str, a.shape))
    return f"tensor<{dt}, [{shape}]>({_nested(a, dt)})"


def quote(s) -> str:
    """A MIL string literal, escaped as `unquote` reads it back."""
    s = str(s).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + s.replace("\n", "\\n").replace("\t", "\\t") + '"'


def attr_literal(kind: str, value, x_dtype: str | None) -> str:
    if kind == "str":
        return f"string({quote(value)})"
    if kind == "value":
        return tensor_literal(np.asarray(value))
    if kind == "bool":
        return f"const(bool({_scalar(value, 'bool')}))"
    if kind == "int":
        return f"const(int32({int(value)}))"
    if kind == "ints":
        return f"const({tensor_literal(np.asarray(value, np.int32).reshape(-1))})"
    if kind == "bools":
        return f"const({tensor_literal(np.asarray(value, bool).reshape(-1))})"
    if kind == "scalar":
        return f"const({x_dtype}({_float(value)}))"
    raise ValueError(f"unknown attribute kind {kind!r}")


def _arg(v) -> str:
    return "(" + ", ".join(u.name for u in v) + ")" if isinstance(v, tuple) else v.name


def statement(op) -> str:
    spec = REGISTRY[op.type]
    args = [f"{k} = {_arg(op.inputs[k])}" for k in spec.inputs if k in op.inputs]
    first = next(iter(op.input_vars()), None)
    x_dtype = first.dtype.name if first is not None else None
    for k, a in spec.attrs.items():
        if op.attrs.get(k) is not None:
            args.append(f"{k} = {attr_literal(a.kind, op.attrs[k], x_dtype)}")
    outs = ", ".join(f"{v.type} {v.name}" for v in op.outputs)
    return f"{outs} = {op.type}({', '.join(args)})[name = string({quote(op.name)})];"


def emit(program) -> str:
    """The program as MIL text."""
    f = program.main
    info = ", ".join(f"{{{quote(k)}, {quote(v)}}}" for k, v in program.build_info.items())
    params = ", ".join(f"{v.type} {v.name}" for v in f.inputs)
    lines = [f"program({program.version})",
             f"[buildInfo = dict<string, string>({{{info}}})]",
             "{",
             f"{INDENT}func main<{f.opset}>({params}) {{"]
    lines += [INDENT * 2 + statement(op) for op in f.block.operations]
    lines += [f"{INDENT}}} -> ({', '.join(v.name for v in f.outputs)});", "}", ""]
    return "\n".join(lines)


# =========================================================================== reader
#
# parse(text) -> Program. Two steps: the grammar below turns text into a small syntax tree
# (statements, typed names, literals as numpy arrays, each with its line); resolve.py turns
# the tree into the IR, checking every rule of the MIL primer with the line it breaks.

# The element types MIL text names; values of the first group can be tensors in a program.
NUMPY_OF = {"fp16": "float16", "fp32": "float32", "int8": "int8", "uint8": "uint8",
            "int16": "int16", "uint16": "uint16", "int32": "int32", "bool": "bool",
            "fp64": "float64", "int64": "int64", "uint32": "uint32", "uint64": "uint64",
            "string": "str"}
UNSUPPORTED_DTYPES = {"bf16": "bfloat16", "int4": "int4", "uint4": "uint4", "uint1": "uint1",
                      "uint2": "uint2", "uint3": "uint3", "uint6": "uint6", "fp8e4m3fn": "fp8",
                      "fp8e5m2": "fp8"}

_NUMBER = re.compile(NUMBER_PATTERN, re.X)
_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\f\v\n]+)
  | (?P<comment>//[^\n]*)
  | (?P<number>""" + NUMBER_PATTERN + r""")
  | (?P<name>@?[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<punct>->|[()\[\]{}<>,=;])
  | (?P<error>.)
""", re.X | re.S)


# A tensor value of numbers / bools (`([[0x3c00, 1.5], ...])`) is read as ONE "array" token and
# converted with numpy: per-token Python is what made large inline weights slow. Its text is a
# balanced bracketed list of the characters numbers and bools are written with; Parser.peek
# splits it into the plain tokens whenever the grammar wants those (a value that is not a
# well-formed array of its type, for the error message), so what is accepted does not change.
_ARRAY_CHARS = re.compile(r"[\[\],A-Za-z0-9_.+\- \t\r\f\v\n]*")
_SPACES = re.compile(r"[ \t\r\f\v\n]*")          # the tokenizer's whitespace, not \s
ARRAY_MIN_CHARS = 64             # shorter values go through the plain tokens


def _tokens(text: str, source_lines: list[str], line: int,
            arrays: bool) -> tuple[list[Token], int]:
    """The tokens of `text`, whose first line is `line`, and the line it ends on."""
    out, pos, n, match = [], 0, len(text), _TOKEN.match
    while pos < n:
        m = match(text, pos)
        kind, pos = m.lastgroup, m.end()
        if kind == "space":
            line += m.group().count("\n")
        elif kind == "error":
            what = ("an unterminated string (strings end with \" on the same line)"
                    if m.group() == '"' else f"unexpected character {m.group()!r}")
            raise MILSyntaxError(line, "syntax", what, source_line(source_lines, line))
        elif kind != "comment":
            out.append(Token(kind, m.group(), line))
            if arrays and m.group() == "(":
                gap = _SPACES.match(text, pos)
                array = _array_text(text, gap.end())
                if array:
                    line += gap.group().count("\n")
                    out.append(Token("array", array, line))
                    line += array.count("\n")
                    pos = gap.end() + len(array)
    return out, line


def _array_text(text: str, start: int) -> str | None:
    """The balanced bracketed list of number / bool characters at `start`, if there is one."""
    if text[start:start + 1] != "[":
        return None
    chars = text[start:_ARRAY_CHARS.match(text, start).end()]
    if len(chars) < ARRAY_MIN_CHARS:
        return None
    b = np.frombuffer(chars.encode("ascii"), np.uint8)
    closed = np.flatnonzero(np.cumsum((b == ord("[")).astype(np.int64) - (b == ord("]"))) == 0)
    # the array's own length decides, not the run of array characters after it: `tokenize`
    # reads a region ending on the array's last line, where that run is cut short
    return chars[:closed[0] + 1] if closed.size and closed[0] + 1 >= ARRAY_MIN_CHARS else None


def tokenize(text: str, source_lines: list[str],
             fast: FastStatements | None = None) -> list[Token]:
    """The tokens of `text` (`source_lines`: its lines). Lines no array token can touch (most
    of a program) are read a line at a time by one `findall` each (`_line_tokens`); the
    others by `_tokens`, a match at a time: the same tokens (per-match Python was half the
    parse of a large program). With `fast`, a line that is one statement of the common shape
    is one "statement" token instead (its Statement in `fast.by_line`)."""
    out, line = [], 1
    for first, last in _array_regions(text, source_lines):
        for n in range(line, first):
            text_n = source_lines[n - 1]
            out += (fast is not None and fast.line_tokens(text_n, n)) or \
                _line_tokens(text_n, n, source_lines)
        if last:
            out += _tokens("\n".join(source_lines[first - 1:last]), source_lines, first,
                           arrays=True)[0]
        line = last + 1
    out.append(Token("eof", "", len(source_lines)))
    return out


_ARRAY_START = re.compile(r"\([ \t\r\f\v\n]*\[")


def _array_regions(text: str, source_lines: list[str]):
    """(first, last) line ranges that may hold an array token (a '(' then '[': from its line
    to the line its array ends on), merged, in order; then (len + 1, 0) to end with."""
    regions: list[list[int]] = []
    if _ARRAY_START.search(text):
        starts = np.cumsum([len(x) + 1 for x in source_lines])      # each line's end + 1
        for m in _ARRAY_START.finditer(text):
            array = _array_text(text, m.end() - 1) or "["
            first = int(np.searchsorted(starts, m.start(), side="right")) + 1
            last = int(np.searchsorted(starts, m.end() - 1 + len(array) - 1, side="right")) + 1
            if regions and first <= regions[-1][1] + 1:
                regions[-1][1] = max(regions[-1][1], last)
            else:
                regions.append([first, last])
    return [tuple(r) for r in regions] + [(len(source_lines) + 1, 0)]


# `_TOKEN`'s alternatives in its order, whitespace skipped, the text of each token captured:
# the same tokens, their kinds told by their text (`_kind`)
_LINE_TOKEN = re.compile(r"""[ \t\r\f\v]*(//[^\n]*|""" + NUMBER_PATTERN + r"""
    |@?[A-Za-z_][A-Za-z0-9_]*|"(?:[^"\\\n]|\\.)*"|->|[()\[\]{}<>,=;]|.)""", re.X | re.S)
_KIND_OF_FIRST = {c: "name" for c in "@_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"}
_KIND_OF_FIRST.update({c: "number" for c in "0123456789+-."})
_KIND_OF_FIRST.update({c: "punct" for c in "()[]{}<>,=;"})
_KIND_OF_FIRST['"'] = "string"
_KIND_OF_TEXT = {"inf": "number", "nan": "number", "->": "punct", "-": "error", "+": "error",
                 ".": "error", '"': "error", "@": "error"}
_new_token = tuple.__new__


def _line_tokens(text: str, line: int, source_lines: list[str]) -> list[Token]:
    """The tokens of one line that holds no array token (`_tokens` reads a line with a
    comment or an error, which then raises). Only C calls per token: a kind from the first
    character, a few whole texts (`_KIND_OF_TEXT`) fixed up where the line has them."""
    texts = _LINE_TOKEN.findall(text)
    kinds = list(map(_KIND_OF_FIRST.get, map(itemgetter(0), texts)))
    if not _KIND_OF_TEXT.keys().isdisjoint(texts):
        kinds = [_KIND_OF_TEXT.get(t, k) for k, t in zip(kinds, texts)]
    if None in kinds or "error" in kinds:       # a comment, or an error
        return _tokens(text, source_lines, line, arrays=False)[0]
    return list(map(_new_token, repeat(Token), zip(kinds, texts, repeat(line))))


# tokens that stand for several: how to split one into the plain tokens, for the grammar
_SPLIT = {"array": lambda tok, lines: _tokens(tok.text, lines, tok.line, arrays=False)[0],
          "statement": lambda tok, lines: _line_tokens(tok.text, tok.line, lines)}


def _read_piece(text: str, what: str):
    """fast.py's reader: `text` read by the grammar as one type or literal (at line 1), or
    None if it is not exactly one (the statement is then read token by token, and the
    grammar says what is wrong with the line it is on)."""
    parser = Parser(text, fast=False)
    try:
        piece = parser.type_spec() if what == "type" else parser.literal()
    except MILSyntaxError:
        return None
    return piece if parser.peek().kind == "eof" else None


# --------------------------------------------------------------------------- grammar

MAX_NESTING = MAX_RANK + 1       # deeper brackets cannot be an ANE tensor (and bound recursion)


_BY_TEXT = frozenset(("punct", "name"))    # the kinds `at` and `expect` match by text


# Whether the parser reads statements of the common shape by one regular expression (fast.py);
# the tests turn it off to compare.
FAST_STATEMENTS = True


class Parser:
    """Recursive descent over the primer's grammar (see docs/mil.md for the grammar)."""

    def __init__(self, text: str, weights_dir: str | None = None, fast: bool = True):
        self.lines = text.split("\n")       # as tokenize counts lines
        self.fast = FastStatements(_read_piece) if fast and FAST_STATEMENTS else None
        self.tokens = tokenize(text, self.lines, self.fast)
        self.i = 0
        self.weights_dir = weights_dir
        self._weights = None

    # ---- token helpers (called a few times per token: fields by index, one lookup each)
    def peek(self, k: int = 0) -> Token:
        try:
            tok = self.tokens[self.i + k]
        except IndexError:
            return self.tokens[-1]
        if tok[0] in _SPLIT:                           # the grammar wants its pieces
            i = self.i + k
            self.tokens[i:i + 1] = _SPLIT[tok[0]](tok, self.lines)
            tok = self.tokens[i]
        return tok

    def take(self) -> Token:
        tok = self.peek()
        self.i += tok[0] != "eof"
        return tok

    def at(self, text: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok[1] == text and tok[0] in _BY_TEXT

    def accept(self, text: str) -> bool:
        tok = self.peek()
        if tok[1] == text and tok[0] in _BY_TEXT:
            self.i += 1
            return True
        return False

    def expect(self, text: str, where: str) -> Token:
        tok = self.peek()
        if tok[1] != text or tok[0] not in _BY_TEXT:
            self.fail(tok.line, f"expected {text!r} {where}, found {tok}")
        self.i += 1
        return tok

    def name(self, where: str) -> Token:
        tok = self.peek()
        if tok[0] != "name":
            self.fail(tok.line, f"expected a name {where}, found {tok}")
        self.i += 1
        return tok

    def fail(self, line: int, message: str, rule: str = "syntax"):
        raise MILSyntaxError(line, rule, message, source_line(self.lines, line))

    def comma_list(self, close: str, item, where: str) -> list:
        items = []
        if not self.at(close):
            items.append(item())
            while self.accept(","):
                items.append(item())
        self.expect(close, where)
        return items

    # ---- program structure
    def program(self) -> ProgramSyntax:
        self.expect("program", "at the start of a MIL program")
        self.expect("(", "after 'program'")
        version = self.take()
        if version.kind != "number":
            self.fail(version.line, f"expected a version number such as 1.3, found {version}")
        self.expect(")", "after the program version")
        build_info = self.program_attributes() if self.accept("[") else None
        prog = ProgramSyntax(version.text, build_info)
        self.expect("{", "to open the program body")
        while not self.at("}") and self.peek().kind != "eof":
            prog.functions.append(self.function())
        self.expect("}", "to close the program")
        if self.peek().kind != "eof":
            self.fail(self.peek().line,
                      f"unexpected {self.peek()} after the program's closing '}}'")
        return prog

    def program_attributes(self) -> dict[str, str]:
        key = self.name("for a program attribute")
        if key.text != "buildInfo":
            self.fail(key.line, f"unknown program attribute {key.text!r}; MIL programs carry "
                      f"only [buildInfo = dict<string, string>({{...}})]")
        self.expect("=", "after buildInfo")
        for text, where in (("dict", "(buildInfo is a dict<string, string>)"), ("<", "after dict"),
                            ("string", "as the key type"), (",", "in dict<string, string>"),
                            ("string", "as the value type"), (">", "after dict<string, string"),
                            ("(", "to open the dict"), ("{", "to open the dict's entries")):
            self.expect(text, where)
        pairs = self.comma_list("}", self.string_pair, "to close the dict's entries")
        self.expect(")", "to close the dict")
        self.expect("]", "after buildInfo")
        return dict(pairs)

    def string_pair(self) -> tuple[str, str]:
        self.expect("{", "to open a {\"key\", \"value\"} pair")
        key = self.string("as a buildInfo key")
        self.expect(",", "between a buildInfo key and its value")
        value = self.string("as a buildInfo value")
        self.expect("}", "to close a {\"key\", \"value\"} pair")
        return key, value

    def string(self, where: str) -> str:
        tok = self.take()
        if tok.kind != "string":
            self.fail(tok.line, f"expected a \"string\" {where}, found {tok}")
        return unquote(tok.text)

    def function(self) -> FunctionSyntax:
        start = self.expect("func", "to start a function (func main<ios18>(...) { ... })")
        name = self.name("after 'func'")
        self.expect("<", "before the function's opset (func main<ios18>)")
        opset = self.name("as the function's opset")
        self.expect(">", "after the function's opset")
        self.expect("(", "to open the function's parameters")
        params = self.comma_list(")", self.typed_name, "to close the function's parameters")
        self.expect("{", "to open the function body")
        body = []
        while True:
            tok = self.tokens[self.i]
            if tok[0] == "statement":                   # read whole by fast.py
                body.append(self.fast.by_line[tok.line])
                self.i += 1
            elif self.at("}") or self.peek().kind == "eof":
                break
            else:
                body.append(self.statement())
        self.expect("}", "to close the function body")
        ret = self.expect("->", "after the function body (} -> (outputs);)")
        self.expect("(", "to open the function's outputs")
        outs = self.comma_list(")", self.ref, "to close the function's outputs")
        self.expect(";", "after the function's outputs")
        return FunctionSyntax(name, opset, params, body, outs, start.line, ret.line)

    def typed_name(self) -> tuple[TypeSpec, Token]:
        t = self.type_spec()
        return t, self.name(f"after the type {t}")

    def ref(self) -> Ref:
        tok = self.name("(a value's name)")
        return Ref(tok.text, tok.line)

    def type_spec(self) -> TypeSpec:
        tok = self.peek()
        if tok.text == "state":
            self.fail(tok.line, "state<...> types are not supported; pass state as paired "
                      "tensor inputs and outputs (the primer's streaming pattern)", "unsupported")
        if tok.kind == "name" and (tok.text in NUMPY_OF or tok.text in UNSUPPORTED_DTYPES):
            self.take()                                        # a scalar: fp16 x
            return TypeSpec(tok.text, (), tok.line)
        self.expect("tensor", "(a type: tensor<fp16, [1, 4]>)")
        self.expect("<", "after 'tensor'")
        dtype = self.dtype()
        self.expect(",", "after the element type")
        self.expect("[", "to open the shape")
        shape = self.comma_list("]", self.dimension, "to close the shape")
        self.expect(">", "to close the tensor type")
        return TypeSpec(dtype, tuple(shape), tok.line)

    def dtype(self) -> str:
        tok = self.name("as an element type")
        if tok.text not in NUMPY_OF and tok.text not in UNSUPPORTED_DTYPES:
            self.fail(tok.line, f"unknown element type {tok.text!r}; MIL names "
                      f"{', '.join(NUMPY_OF)}")
        return tok.text

    def dimension(self) -> int:
        tok = self.take()
        if tok.kind != "number" or not tok.text.isdigit():
            self.fail(tok.line, f"a shape needs integer sizes, found {tok}; aneforge programs "
                      f"have static shapes")
        return int(tok.text)

    # ---- statements
    def statement(self) -> Statement:
        line = self.peek().line
        outs = [self.typed_name()]
        while self.accept(","):
            outs.append(self.typed_name())
        self.expect("=", "after the statement's result names")
        op = self.name("(the op) after '='")
        self.expect("(", f"after the op name {op.text!r}")
        args = self.comma_list(")", self.argument, f"to close {op.text}'s arguments")
        annotations = self.annotations() if self.at("[") else None
        self.expect(";", "at the end of the statement")
        return Statement(outs, op, args, annotations, line)

    def argument(self) -> Arg:
        key = self.name("(an argument name: op(x = a, y = b))")
        self.expect("=", f"after the argument name {key.text!r}")
        if self.accept("("):
            value = tuple(self.comma_list(")", self.value, "to close the tuple"))
        else:
            value = self.value()
        return Arg(key.text, value, key.line)

    def value(self):
        """A name bound to a value, or a literal (a name followed by '(' or '<')."""
        tok = self.peek()
        if tok.kind == "name" and not (self.at("(", 1) or self.at("<", 1)):
            return self.ref()
        return self.literal()

    def annotations(self) -> dict[str, tuple[Literal, int]]:
        self.expect("[", "to open the statement's annotations")
        out: dict[str, tuple[Literal, int]] = {}

        def item():
            key = self.name("in the annotations ([name = string(\"y\")])")
            self.expect("=", f"after {key.text!r}")
            if key.text in out:
                self.fail(key.line, f"annotation {key.text!r} is given twice")
            out[key.text] = (self.literal(), key.line)
        self.comma_list("]", item, "to close the annotations")
        return out

    # ---- literals
    def literal(self, depth: int = 0) -> Literal:
        tok = self.peek()
        if depth > 2:
            self.fail(tok.line, "const(...) wrappers nest too deeply")
        if tok.text == "const" and self.at("(", 1):
            self.take(), self.take()
            if self.at("val") and self.at("=", 1):
                self.take(), self.take()
            lit = self.literal(depth + 1)
            self.expect(")", "to close const(...)")
            return lit
        if tok.text == "tensor" and tok.kind == "name":
            t = self.type_spec()
            self.expect("(", f"after {t} to give its value")
            value = self.elements(t) if self.tokens[self.i].kind == "array" else \
                self.blobfile(t) if self.at("BLOBFILE") else self.elements(t)
            self.expect(")", "to close the tensor value")
            return Literal(t.dtype, value, tok.line)
        if tok.kind == "name" and (tok.text in NUMPY_OF or tok.text in UNSUPPORTED_DTYPES):
            dtype = self.dtype()
            self.expect("(", f"after {dtype} (a scalar: {dtype}(value))")
            value = self.elements(TypeSpec(dtype, (), tok.line))
            self.expect(")", f"to close {dtype}(...)")
            return Literal(dtype, value, tok.line)
        self.fail(tok.line, f"expected a name or a value, found {tok}; values are written "
                  f"fp16(0.5), int32(3), bool(true), string(\"EXACT\"), "
                  f"tensor<int32, [2]>([1, 2]) or const(...)")

    def elements(self, t: TypeSpec) -> np.ndarray:
        if t.dtype in UNSUPPORTED_DTYPES:
            self.fail(t.line, f"aneforge has no {t.dtype} values; use fp16 (the ANE's native "
                      f"type)", "unsupported")
        tok = self.tokens[self.i]
        if tok.kind == "array":
            value = _array_value(tok.text, t)
            if value is not None:
                self.i += 1
                return value
        line = self.peek().line
        nested = self.nested(0)
        shape = _nested_shape(nested)
        if shape is None:
            self.fail(line, f"the value of {t} is ragged: every row needs the same length",
                      "literal")
        if shape != t.shape:
            self.fail(line, f"{t} is given a value of shape {list(shape)}; write exactly "
                      f"{int(np.prod(t.shape))} elements nested as {list(t.shape)}", "literal")
        try:
            return to_array(_flatten(nested), t.dtype).reshape(t.shape)
        except ValueError as e:
            self.fail(line, f"in the value of {t}: {e}", "literal")

    def nested(self, depth: int):
        if self.at("["):
            if depth >= MAX_NESTING:
                self.fail(self.peek().line, f"values nest deeper than rank {MAX_RANK}, the "
                          f"ANE's limit", "rank-limit")
            self.take()
            return self.comma_list("]", lambda: self.nested(depth + 1), "to close a list")
        tok = self.take()
        if tok.kind not in ("number", "string") and tok.text not in ("true", "false"):
            self.fail(tok.line, f"expected a number, true/false, a \"string\" or '[', found {tok}")
        return tok

    def blobfile(self, t: TypeSpec) -> np.ndarray:
        """BLOBFILE(@path="weights1.bin", offset=0), or coremltools' BLOBFILE(path =
        string("@model_path/weights/weight.bin"), offset = uint64(64)): a blob of Core ML's
        weight file, read from `weights_dir`."""
        line = self.take().line
        self.expect("(", "after BLOBFILE")
        args = dict(self.comma_list(")", self.blob_arg, "to close BLOBFILE(...)"))
        if "path" not in args or "offset" not in args:
            self.fail(line, "BLOBFILE needs path and offset: BLOBFILE(@path=\"weight.bin\", "
                      "offset=0)", "literal")
        if self.weights_dir is None:
            self.fail(line, "a BLOBFILE value needs the directory holding its weight file: pass "
                      "weights_dir= (load_mil does it for a file), or inline the weights as "
                      "hex literals", "unsupported")
        return self.read_blob(line, t, str(args["path"]), args["offset"])

    def blob_arg(self):
        key = self.name("in BLOBFILE(...)").text.lstrip("@")
        self.expect("=", f"after {key!r}")
        tok = self.peek()
        if tok.kind in ("string", "number"):
            self.take()
            value = unquote(tok.text) if tok.kind == "string" else tok.text
        else:
            value = self.literal().value.item()
        return key, value

    def read_blob(self, line: int, t: TypeSpec, path: str, offset) -> np.ndarray:
        from types import SimpleNamespace

        from .proto import WeightReader
        if not (isinstance(offset, str) and re.fullmatch("[0-9]+", offset)) and not (
                isinstance(offset, (int, np.integer)) and not isinstance(offset, bool)):
            self.fail(line, f"BLOBFILE's offset is a byte offset (a non-negative integer), "
                      f"found {offset!r}", "literal")
        self._weights = self._weights or WeightReader(self.weights_dir)
        blob = SimpleNamespace(fileName=path, offset=int(offset))
        try:
            return self._weights.read(blob, NUMPY_OF.get(t.dtype, t.dtype), t.shape)
        except AneforgeError as e:
            self.fail(line, f"cannot read {t} from BLOBFILE {path!r} at offset {offset}: {e}",
                      "literal")


def _array_value(text: str, t: TypeSpec) -> np.ndarray | None:
    """An array token's value as a `t` array, vectorized; None if it is not exactly a
    well-formed value of `t` (the plain tokens then say what is wrong, with the line)."""
    skeleton = _array_skeleton(text) if 0 < len(t.shape) <= MAX_RANK else ""
    if skeleton.count("E") != math.prod(t.shape) or skeleton != _skeleton(t.shape):
        return None                           # (counted first: a huge shape is never built)
    elements = text.translate(_DROP_BRACKETS).split(",")
    letters = set("".join(elements))
    np_name = NUMPY_OF.get(t.dtype)
    try:
        if np_name == "bool":
            flat = np.array(elements) == "true" if set(elements) <= {"true", "false"} else None
        elif np_name is None or np_name == "str":
            flat = None
        elif np_name.startswith("float"):
            flat = _float_array(elements, letters, np.dtype(np_name))
        else:
            flat = _int_array(elements, letters, np.dtype(np_name))
    except (ValueError, OverflowError):
        return None
    return None if flat is None else flat.reshape(t.shape)


_DROP_BRACKETS = str.maketrans("", "", "[] \t\r\f\v\n")
_BRACKETS = np.zeros(256, bool)
_BRACKETS[[ord(c) for c in "[],"]] = True
_SPACE_BYTES = np.zeros(256, bool)
_SPACE_BYTES[[ord(c) for c in " \t\r\f\v\n"]] = True


def _array_skeleton(text: str) -> str:
    """The brackets and commas of an array token, each run of element characters an E."""
    b = np.frombuffer(text.encode("ascii"), np.uint8)
    element = ~_BRACKETS[b] & ~_SPACE_BYTES[b]
    starts = element & ~np.concatenate(([False], element[:-1]))
    keep = _BRACKETS[b] | starts
    return np.where(starts, np.uint8(ord("E")), b)[keep].tobytes().decode("ascii")


@functools.lru_cache(maxsize=64)
def _skeleton(shape: tuple[int, ...]) -> str:
    """A value's brackets and commas with each element an E: [[E,E],[E,E]] for [2, 2]."""
    inner = "E" if len(shape) == 1 else _skeleton(shape[1:])
    return "[" + ",".join([inner] * shape[0]) + "]"


_DECIMAL_CHARS = frozenset("0123456789.eE+-")
_WORDS = frozenset({"inf", "+inf", "-inf", "nan", "+nan", "-nan"})


def _float_array(elements: list[str], letters: set, dt: np.dtype) -> np.ndarray | None:
    """As _float_elements, vectorized for the usual all-bit-pattern / all-decimal cases.
    numpy reads a decimal as float() does (correctly rounded, then rounded once to `dt`);
    the characters are held to the tokenizer's number grammar first."""
    if letters <= _DECIMAL_CHARS | set("infa"):
        if not letters <= _DECIMAL_CHARS and not all(
                e in _WORDS for e in elements if not set(e) <= _DECIMAL_CHARS):
            return None
        wide = np.array(elements).astype(np.float64)
        with np.errstate(all="ignore"):
            out = wide.astype(dt)
        return None if (np.isinf(out) & ~np.isinf(wide)).any() else out
    bits = _hex_bits(elements, dt.itemsize) if letters <= _HEX_CHARS else None
    if bits is not None:
        return bits.view(dt)
    if not all(_NUMBER.fullmatch(e) for e in elements):
        return None
    return _float_elements([Token("number", e, 0) for e in elements], dt)


def _int_array(elements: list[str], letters: set, dt: np.dtype) -> np.ndarray | None:
    if letters <= set("0123456789+-"):
        wide, info = np.array(elements).astype(np.int64), np.iinfo(dt)
        return None if wide.min() < info.min or wide.max() > info.max else wide.astype(dt)
    if not all(_NUMBER.fullmatch(e) for e in elements):
        return None
    return _int_elements([Token("number", e, 0) for e in elements], dt)


_HEX_CHARS = frozenset("0123456789abcdefABCDEFxX")
_HEX_DIGIT = np.full(256, -1, np.int64)
for _i, _c in enumerate("0123456789abcdef"):
    _HEX_DIGIT[ord(_c)] = _HEX_DIGIT[ord(_c.upper())] = _i


def _hex_bits(elements: list[str], itemsize: int) -> np.ndarray | None:
    """0x3c00-style bit patterns as uint(8 * itemsize), vectorized: None unless every element
    is 0x / 0X and 1..2 * itemsize hex digits."""
    chars = np.array(elements, "S").view(np.uint8).reshape(len(elements), -1)
    if not 3 <= chars.shape[1] <= 2 + 2 * itemsize or (chars[:, 0] != ord("0")).any() or \
            ((chars[:, 1] != ord("x")) & (chars[:, 1] != ord("X"))).any():
        return None
    digits, pad = _HEX_DIGIT[chars[:, 2:]], chars[:, 2:] == 0     # "S" pads with NULs
    if ((digits < 0) & ~pad).any() or pad[:, 0].any():
        return None
    value = np.zeros(len(elements), np.int64)
    for d, p in zip(digits.T, pad.T):
        value = np.where(p, value, value * 16 + d)
    return value.astype(f"uint{itemsize * 8}")


def unquote(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s[1:-1])


def _nested_shape(nested) -> tuple[int, ...] | None:
    """The rectangular shape of a nested list of tokens, or None if it is ragged."""
    if not isinstance(nested, list):
        return ()
    inner = [_nested_shape(x) for x in nested]
    if any(s is None or s != inner[0] for s in inner):
        return None
    return (len(nested),) + (inner[0] if inner else ())


def _flatten(nested) -> list[Token]:
    if not isinstance(nested, list):
        return [nested]
    return [tok for x in nested for tok in _flatten(x)]


# --------------------------------------------------------------------------- element values

_HEX_BITS = re.compile(r"[-+]?0[xX][0-9a-fA-F]+$")


def to_array(tokens: list[Token], dtype: str) -> np.ndarray:
    """Element tokens as a flat numpy array of MIL type `dtype`; ValueError says what is wrong.
    Floats are exact: a 0x3c00-style hex integer is the value's bit pattern, decimals and
    hex floats (0x1.8p+0) are rounded once to the element type."""
    np_name = NUMPY_OF[dtype]
    if np_name == "str":
        return np.array([_string_element(t) for t in tokens], dtype=str)
    if np_name == "bool":
        return np.array([_bool_element(t) for t in tokens], dtype=bool)
    if np_name.startswith("float"):
        return _float_elements(tokens, np.dtype(np_name))
    return _int_elements(tokens, np.dtype(np_name))


def _string_element(tok: Token) -> str:
    if tok.kind != "string":
        raise ValueError(f"expected a \"string\", found {tok}")
    return unquote(tok.text)


def _bool_element(tok: Token) -> bool:
    if tok.text not in ("true", "false"):
        raise ValueError(f"a bool is true or false, found {tok}")
    return tok.text == "true"


def _float_elements(tokens: list[Token], dt: np.dtype) -> np.ndarray:
    bits_dtype = np.dtype(f"uint{dt.itemsize * 8}")
    bits, top = np.empty(len(tokens), bits_dtype), np.iinfo(bits_dtype).max
    for i, tok in enumerate(tokens):
        if tok.kind != "number":
            raise ValueError(f"expected a number, found {tok}")
        if _HEX_BITS.match(tok.text):
            b = int(tok.text, 16)
            if not 0 <= b <= top:
                raise ValueError(f"{tok.text} is not a {dt.itemsize * 8}-bit pattern of a "
                                 f"{dt.name} value")
            bits[i] = b
        else:
            bits[i] = _rounded(tok.text, dt).view(bits_dtype)
    return bits.view(dt)


def _rounded(text: str, dt: np.dtype) -> np.ndarray:
    value = float.fromhex(text) if "x" in text.lower() else float(text)
    with np.errstate(all="ignore"):
        out = np.array(value, dt)
    if np.isinf(out) and not np.isinf(value):
        raise ValueError(f"{text} is beyond the range of {dt.name} "
                         f"(largest {float(np.finfo(dt).max):g})")
    return out


def _int_elements(tokens: list[Token], dt: np.dtype) -> np.ndarray:
    info, out = np.iinfo(dt), []
    for tok in tokens:
        if tok.kind != "number" or not re.fullmatch(r"[-+]?(0[xX][0-9a-fA-F]+|[0-9]+)", tok.text):
            raise ValueError(f"expected an integer, found {tok}")
        v = int(tok.text, 0) if "x" in tok.text.lower() else int(tok.text)
        if not info.min <= v <= info.max:
            raise ValueError(f"{tok.text} does not fit {dt.name} ([{info.min}, {info.max}])")
        out.append(v)
    return np.array(out, dt)


def parse(text: str, weights_dir: str | None = None, walls: bool = True):
    """MIL text (the primer's format) as a validated Program.

    Every rule of the MIL primer is checked with the line that breaks it: a
    `MILSyntaxError` names the line, the rule and what to do. `weights_dir` is the directory
    of BLOBFILE weight files; `walls=False` skips the ANE compiler walls.

    >>> from aneforge.mil.text import parse
    >>> p = parse('''program(1.3) {
    ...   func main<ios18>(tensor<fp16, [1, 4]> x) {
    ...     tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")];
    ...   } -> (y);
    ... }''')
    >>> [op.type for op in p.operations], [v.name for v in p.main.outputs]
    (['relu'], ['y'])
    """
    if not isinstance(text, str):
        raise AneforgeError(f"parse takes MIL text (a str), got {type(text).__name__}")
    with _no_collection():
        parser = Parser(text, weights_dir)
        return resolve(parser.program(), parser.lines, walls)


@contextlib.contextmanager
def _no_collection():
    """Python's cyclic garbage collector paused: a parse allocates millions of small objects
    (tokens, tuples) that all live until it ends, and each collection walks the ones already
    made, ~30% of a 10 MB program's parse; they hold no cycles, so nothing is left for later.
    On the way out the survivors (the program) go straight to the oldest generation
    (`gc.freeze` then `gc.unfreeze`, which only moves lists): else the first collection after
    the parse walks them all as new objects, ~0.8 s for 130k statements.
    (The switch is the process's: a collection another thread would have started waits.)"""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()
