"""Fuzz the MIL readers: mutated MIL text (aneforge/mil/text.py) and mutated MILSpec protobuf
bytes (aneforge/mil/proto.py) give a valid Program or an AneforgeError — never another
exception, never a hang. A program the text parser accepts also survives emit -> parse."""
from __future__ import annotations

import re
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aneforge as af
from aneforge.errors import AneforgeError
from aneforge.mil import proto, resolve
from aneforge.mil import text as text_reader
from aneforge.mil.syntax import Token
from aneforge.mil.text import emit, parse
from aneforge.ops import REGISTRY, validate
from aneforge.runtime.sim import SimBackend

SLOW = 1.0          # seconds: far above any example's parse time; more means a near-hang

PRIMER = '''program(1.3)
[buildInfo = dict<string, string>({{"coremlc-component-MIL", "3520.4.1"},
{"coremlc-version", "3520.5.1"}})]
{
func main<ios18>(tensor<fp16, [1, 4]> x, tensor<fp16, [1, 4]> b) {
tensor<fp16, [1, 4]> y_relu = relu(x = x)[name = string("y_relu")];
tensor<fp16, [1, 4]> y_neg = sub(x = const(val = fp16(0)), y = x)[name = string("y_neg")];
tensor<bool, [1, 4]> mask = less(x = y_neg, y = b)[name = string("mask")];
tensor<fp16, [1, 4]> y = select(cond = mask, a = y_relu, b = b)[name = string("y")];
tensor<fp16, [4, 3]> w = const(val = tensor<fp16, [4, 3]>(
    [[0x3c00, 0x4000, 0x4200], [0x4400, 0x4500, 0x4600],
     [0xbc00, 0x0001, 0x7bff], [0x8000, 0x3555, -1.5e-2]]
))[name = string("w")];
tensor<fp16, [1, 3]> m = matmul(
    x = y,  // [1, 4]
    y = w,  // [4, 3]
    transpose_x = const(bool(false)),
    transpose_y = const(bool(false))
)[name = string("m")];
} -> (y_relu, y_neg, m);
}
'''


def _traced() -> list[str]:
    x = af.randn(2, 6)
    a, b = x.split([2, 4], dim=1)
    y = af.cat([af.nn.functional.gelu(b), a.log_softmax(-1)], dim=1)
    y = y.reshape(3, 4).sum(0, keepdim=True)
    z = af.where(x > 0.5, x.exp(), x.clamp(-1, 1)).argmax(1)
    return [af.to_mil(y), af.to_mil((y, z)), af.to_mil(x.t() @ x)]


SEEDS = [PRIMER] + _traced()
TOKEN = re.compile(r'"[^"\n]*"|//[^\n]*|0x[0-9a-f.p+]+|-?\d+\.?\d*(?:e[-+]?\d+)?|\w+|->|\S')
NUMBERS = ["0", "1", "-1", "2", "3", "4", "5", "65536", "65537", "1e9", "0xffff", "0x7c00",
           "0x1p+0", "inf", "-inf", "nan", "0.5", "-0", "99999999999999999999"]
WORDS = ["relu", "log", "gelu", "exp", "add", "mul", "reduce_sum", "split", "concat", "const",
         "tensor", "fp16", "fp32", "int32", "int16", "uint8", "bool", "bf16", "string", "true",
         "false", "x", "y", "val", "name", "values", "axes", "axis", "mode", "epsilon", "main",
         "ios18", "BLOBFILE", "state", "program", "func"]
PUNCT = ["(", ")", "[", "]", "{", "}", "<", ">", ",", "=", ";", "->", '""', '"EXACT"', "//"]
CHARS = st.sampled_from(list('()[]{}<>,=;"-/.@x0123456789abcdefnp \n') + ["\t", "é", "\x00"])


def _pieces(text: str) -> list[str]:
    """The text as tokens, each followed by the whitespace after it (kept: comments end lines)."""
    out, at = [], 0
    for m in TOKEN.finditer(text):
        if out:
            out[-1] += text[at:m.start()]
        else:
            out.append(text[:m.start()])
        out.append(m.group())
        at = m.end()
    return out[:-1] + [out[-1] + text[at:]] if out else [text]


def _like(draw, tok: str, names: list[str]) -> str:
    """A replacement of the same class: numbers for numbers, names for names, ..."""
    core = tok.strip()
    if re.fullmatch(r"-?[\d.]+(e[-+]?\d+)?|0x\w+", core):
        return draw(st.sampled_from(NUMBERS))
    if re.fullmatch(r"\w+", core):
        return draw(st.sampled_from(WORDS + names))
    return draw(st.sampled_from(PUNCT))


@st.composite
def char_edits(draw, text: str) -> str:
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(text)))
        how = draw(st.sampled_from(["delete", "insert", "replace"]))
        c = draw(CHARS)
        text = (text[:i] + text[i + 1:] if how == "delete" else
                text[:i] + c + text[i:] if how == "insert" else text[:i] + c + text[i + 1:])
    return text


@st.composite
def token_edits(draw, text: str) -> str:
    pieces = _pieces(text)
    names = sorted(set(re.findall(r"> (\w+)", text)))
    for _ in range(draw(st.integers(1, 3))):
        i, j = (draw(st.integers(0, len(pieces) - 1)) for _ in range(2))
        how = draw(st.sampled_from(["swap", "delete", "duplicate", "replace", "replace"]))
        tok, gap = pieces[i].strip(), pieces[i][len(pieces[i].rstrip()):]
        if how == "swap":
            other = pieces[j].strip()
            pieces[j] = tok + pieces[j][len(pieces[j].rstrip()):]
            pieces[i] = other + gap
        elif how == "delete" and len(pieces) > 1:
            del pieces[i]
        elif how == "duplicate":
            pieces.insert(j, tok + " ")
        else:
            pieces[i] = _like(draw, tok, names) + (gap or " ")
    return "".join(pieces)


@st.composite
def word_edits(draw, text: str) -> str:
    """Numbers and names replaced by others of their class: mostly well-formed text whose
    meaning is wrong (the validation rules' territory)."""
    pieces = _pieces(text)
    names = sorted(set(re.findall(r"> (\w+)", text)))
    words = [i for i, p in enumerate(pieces) if re.fullmatch(r"[-\w.+]+", p.strip())]
    for _ in range(draw(st.integers(1, 2))):
        i = draw(st.sampled_from(words))
        gap = pieces[i][len(pieces[i].rstrip()):]
        pieces[i] = _like(draw, pieces[i].strip(), names) + gap
    return "".join(pieces)


@st.composite
def mutated_text(draw) -> str:
    seed = draw(st.sampled_from(SEEDS))
    edit = draw(st.sampled_from([char_edits, token_edits, word_edits]))
    return draw(edit(seed))


def accepts_or_aneforge_error(read, data) -> None:
    start = time.perf_counter()
    try:
        program = read(data)
        validate(program)
    except AneforgeError:
        return
    finally:
        assert time.perf_counter() - start < SLOW, "a reader took too long"
    return program


FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _tokens_or_error(tokenize, text):
    try:
        return tokenize(text)
    except AneforgeError as e:
        return str(e)


def _one_match_at_a_time(text):
    tokens, line = text_reader._tokens(text, text.split("\n"), 1, arrays=True)
    return tokens + [Token("eof", "", line)]


@FUZZ
@given(mutated_text())
def test_the_line_tokenizer_gives_the_tokens_of_one_match_at_a_time(text):
    """`tokenize` reads most lines by one findall each: the same tokens (kinds, texts, lines,
    array tokens) or the same error as the match-at-a-time reader, on mutated text too."""
    assert _tokens_or_error(lambda t: text_reader.tokenize(t, t.split("\n")), text) == \
        _tokens_or_error(_one_match_at_a_time, text)


def test_a_short_array_before_more_array_characters_reads_the_same_by_lines():
    """Found by the fuzzer (a mutation dropped a '['): a balanced array shorter than
    ARRAY_MIN_CHARS followed, on the next lines, by more characters arrays are written with.
    Whether it is one array token was decided by that whole run, which `tokenize` cuts at the
    array's last line: the two readers disagreed. The array's own length decides now."""
    text = ("w = const(val = tensor<fp16, [4, 3]>(\n    [[0x3c00, 0x4000, 0x4200], 0x4400, 0x4500],"
            "\n     [0xbc00, 0x0001, 0x7bff], [0x8000, 0x3555, -1.5e-2]]\n))")
    assert text_reader.tokenize(text, text.split("\n")) == _one_match_at_a_time(text)
    assert "array" not in {t.kind for t in _one_match_at_a_time(text)}


def test_the_line_tokenizer_kinds():
    text = ('x = f(a = -inf, a2 = inf, b = nan, c = infx, d = +1.5e3, e = .5, g = 0x1.8p-1, h = @w, '
            'i = "s\\"q", j = 1abc) -> (y);\n  k = f([1, 2])  // c\n m = f(\n  [' +
            ', '.join(['0x3c00'] * 20) + ',\n 1])')
    assert text_reader.tokenize(text, text.split("\n")) == _one_match_at_a_time(text)
    for bad in ("x = a - b", "x = 'a'", 'x = "open', "x = a . b", "x = #", "x = @ y"):
        assert _tokens_or_error(lambda t: text_reader.tokenize(t, [t]), bad) == \
            _tokens_or_error(_one_match_at_a_time, bad)


@FUZZ
@given(mutated_text())
def test_mutated_text_gives_a_program_or_an_aneforge_error(text):
    program = accepts_or_aneforge_error(parse, text)
    if program is not None:
        validate(program)          # the reader's checks left no IR invariant broken
        again = parse(emit(program))
        assert again.signature() == program.signature()
        try:
            SimBackend().compile(program, af.get_numerics())
        except AneforgeError:
            pass


def _read(text: str, fast: bool) -> str:
    """The program as MIL text, or the error, read with both fast paths (`fast`) or neither."""
    old = text_reader.FAST_STATEMENTS, resolve.QUICK_STATEMENTS
    text_reader.FAST_STATEMENTS = resolve.QUICK_STATEMENTS = fast
    try:
        return emit(parse(text))
    except AneforgeError as e:
        return f"{type(e).__name__}: {e}"
    finally:
        text_reader.FAST_STATEMENTS, resolve.QUICK_STATEMENTS = old


@FUZZ
@given(mutated_text())
def test_mutated_text_reads_the_same_by_the_fast_path(text):
    """A line of the common statement shape is read by one regular expression (mil/fast.py),
    a statement of a form read before is added by resolve.py's quick path: the same program,
    or the same error, as the grammar token by token and every check in full."""
    assert _read(text, True) == _read(text, False)


@st.composite
def mutated_bytes(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(PROTO_SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        i = draw(st.integers(0, len(data)))
        how = draw(st.sampled_from(["flip", "delete", "insert", "truncate"]))
        b = draw(st.integers(0, 255))
        if how == "flip" and i < len(data):
            data[i] ^= 1 << (b % 8)
        elif how == "delete":
            del data[i:i + 1 + b % 4]
        elif how == "insert":
            data[i:i] = bytes([b]) * (1 + b % 3)
        else:
            del data[i:]
    return bytes(data)


PROTO_SEEDS = [proto.to_proto_bytes(parse(t)) for t in SEEDS]


@FUZZ
@given(mutated_bytes())
def test_mutated_protobuf_gives_a_program_or_an_aneforge_error(data):
    accepts_or_aneforge_error(proto.from_proto_bytes, data)


@pytest.mark.parametrize("text", SEEDS, ids=range(len(SEEDS)))
def test_seeds_are_valid(text):
    assert validate(parse(text)) is not None


@pytest.mark.parametrize("text", ["", "program", "program(", "}" * 5000, "[" * 5000,
                                  "program(1.3) {" + " func" * 3000, "\x00\xff", "//" * 9000],
                         ids=range(8))
def test_degenerate_text(text):
    with pytest.raises(AneforgeError):
        parse(text)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff" * 64, b"\x0a\x05hello",
                                  np.random.default_rng(0).bytes(512)], ids=range(5))
def test_degenerate_bytes(data):
    try:
        validate(proto.from_proto_bytes(data))
    except AneforgeError:
        pass


# ---------------------------------------------------------------------------- protobuf semantics
# Programs that still decode, with one to three semantic mutations: wrong dtypes, shapes, ranks,
# names, op types, bindings, attribute values, element fields, outputs. The reader's checks
# (not protobuf's decoding) must catch each: a Program or an AneforgeError. And what the protobuf
# reader accepts, the text reader accepts too, as the same program (the readers share their
# type and name rules, aneforge/mil/checks.py) — a Program accepted by one reader only is a
# silently wrong result of the other.

SIZES = [0, 1, 2, 3, 4, 6, 12, 65536, 65537, 2 ** 31, 2 ** 40, 2 ** 64 - 1]
NAMES = ["x", "x_1", "y", "fp16", "const", "", "1x", "a b", "@w", "name", "main", "_"]
FIELDS = ["floats", "ints", "bools", "strings", "longInts", "doubles", "bytes"]


def _named_types(m, block):
    f = m.functions["main"]
    return list(f.inputs) + [o for op in block.operations for o in op.outputs]


def _values(block):
    """Every Value in the block's ops: attributes, and arguments bound to values."""
    out = [v for op in block.operations for v in op.attributes.values()]
    return out + [b.value for op in block.operations for a in op.inputs.values()
                  for b in a.arguments if b.WhichOneof("binding") == "value"]


def _tensor_type(draw, t) -> None:
    how = draw(st.sampled_from(["dtype", "size", "add", "drop", "rank"]))
    if how == "dtype":
        t.dataType = draw(st.sampled_from(sorted(proto.DATA_TYPES.values()) + [99]))
    elif how == "size" and len(t.dimensions):
        t.dimensions[draw(st.integers(0, len(t.dimensions) - 1))].constant.size = \
            draw(st.sampled_from(SIZES))
    elif how == "add":
        for _ in range(draw(st.integers(1, 5))):
            t.dimensions.add().constant.size = draw(st.sampled_from(SIZES[:4]))
        t.rank = len(t.dimensions) if draw(st.booleans()) else t.rank
    elif how == "drop" and len(t.dimensions):
        del t.dimensions[-1]
        t.rank = len(t.dimensions) if draw(st.booleans()) else t.rank
    else:
        t.rank = draw(st.integers(0, 7))


def _value(draw, v) -> None:
    """A Value's type, or its elements' field and count, changed."""
    if draw(st.booleans()):
        _tensor_type(draw, v.type.tensorType)
        return
    tv = v.immediateValue.tensor
    field = draw(st.sampled_from(FIELDS))
    n = draw(st.integers(0, 5))
    if field == "bytes":
        tv.bytes.values = bytes(draw(st.integers(0, 255)) for _ in range(n))
    else:
        item = {"floats": 1.5, "doubles": -2.0, "ints": 7, "longInts": 2 ** 40, "bools": True,
                "strings": "EXACT"}[field]
        getattr(tv, field).values.extend([item] * n)
        getattr(tv, field).SetInParent()


def _mutate(draw, m) -> None:
    f = m.functions["main"]
    block = f.block_specializations[f.opset]
    ops, first = list(block.operations), f.inputs[0].name if len(f.inputs) else "x"
    how = draw(st.sampled_from(["type", "type", "name", "op", "outputs", "binding", "value",
                                "value", "attribute", "returns", "build_info", "inputs"]))
    if how == "type":
        _tensor_type(draw, draw(st.sampled_from(_named_types(m, block))).type.tensorType)
    elif how == "name":
        draw(st.sampled_from(_named_types(m, block))).name = draw(st.sampled_from(NAMES + [
            o.name for o in _named_types(m, block)]))
    elif how == "op":
        draw(st.sampled_from(ops)).type = draw(st.sampled_from(sorted(REGISTRY)))
    elif how == "outputs":
        op = draw(st.sampled_from(ops))
        if draw(st.booleans()):
            del op.outputs[:]
        elif len(op.outputs):
            op.outputs.add().CopyFrom(op.outputs[0])
    elif how == "binding":
        op = draw(st.sampled_from(ops))
        if len(op.inputs):
            arg = op.inputs[draw(st.sampled_from(sorted(op.inputs)))]
            choice = draw(st.sampled_from(["rename", "clear", "add", "unknown"]))
            if choice == "rename" and len(arg.arguments):
                arg.arguments[0].name = draw(st.sampled_from(NAMES + [
                    o.name for o in _named_types(m, block)]))
            elif choice == "clear":
                del arg.arguments[:]
            elif choice == "add":
                arg.arguments.add().name = first
            else:
                op.inputs["alpha"].arguments.add().name = first
    elif how in ("value", "attribute"):
        values = _values(block)
        if values and how == "value":
            _value(draw, draw(st.sampled_from(values)))
        elif values:
            draw(st.sampled_from(values)).CopyFrom(draw(st.sampled_from(values)))
    elif how == "returns":
        outs = block.outputs
        if draw(st.booleans()) and len(outs):
            outs.append(outs[0])
        else:
            outs.append(draw(st.sampled_from(NAMES)))
    elif how == "build_info":
        kv = m.attributes["buildInfo"].immediateValue.dictionary.values
        if len(kv):
            _value(draw, kv[0].value if draw(st.booleans()) else kv[0].key)
    elif len(f.inputs):
        del f.inputs[draw(st.integers(0, len(f.inputs) - 1))]


@st.composite
def mutated_messages(draw) -> bytes:
    m = proto.message_class("Program").FromString(draw(st.sampled_from(PROTO_SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        _mutate(draw, m)
    return m.SerializeToString()


def same_program_in_both_readers(program) -> None:
    """What the protobuf reader accepted, the text reader accepts as the same program, and it
    survives the protobuf writer too."""
    text = emit(program)
    assert parse(text).signature() == program.signature(), text
    assert proto.from_proto_bytes(proto.to_proto_bytes(program)).signature() == program.signature()


@FUZZ
@given(mutated_messages())
def test_semantic_protobuf_mutations_give_a_program_or_an_aneforge_error(data):
    program = accepts_or_aneforge_error(proto.from_proto_bytes, data)
    if program is not None:
        same_program_in_both_readers(program)
        try:
            SimBackend().compile(program, af.get_numerics())
        except AneforgeError:
            pass
