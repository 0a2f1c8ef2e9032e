"""MIL syntax tree (text.py) -> IR Program, checking every rule with the line that breaks it.

The rules are RULES below (the `rule` of a MILSyntaxError), the MIL primer's "Validation
gotchas" first. They are checked statement by statement, in order, so the first error is the
one reported, with its line.
"""
from __future__ import annotations

import difflib
import functools
from typing import NamedTuple

import numpy as np

from .. import dtypes
from ..hardware import targets
from ..errors import AneforgeError, CompileWallError
from ..ir import Block, Function, Operation, Program, TensorType, Var
from ..ir.dag import fresh_name
from ..ops import REGISTRY
from ..ops.registry import REQUIRED, OpDef, apply_to_vars, is_literal
from ..ops.walls import check_walls
from .checks import RESERVED, as_name, io_problem, name_problem, shape_problem
from .proto import ATTR_FITS, ATTR_KINDS, STORED_AS_ATTRIBUTE
from .proto import OPSETS as PROTO_OPSETS
from .syntax import Arg, Literal, MILSyntaxError, Ref, Statement, TypeSpec, source_line

OPSETS = tuple(PROTO_OPSETS)          # the opsets the MILSpec writer names (ios15..ios18)

# Whether a statement of a form read before is added by `_FunctionResolver.quick`; the tests
# turn it off to compare.
QUICK_STATEMENTS = True

RULES = {
    "io-dtype": "program inputs and outputs are fp16, int8, uint8, int16 or uint16 (fp32, "
                "int32, bf16 and bool live only inside a program)",
    "io-rank": "program inputs and outputs have rank >= 1 (Core ML's function signature)",
    "axis-limit": "every axis is 1..65536, and a program input's within the chosen target's "
                  "caps (aneforge.hardware.targets)",
    "rank-limit": "rank <= 5",
    "required-argument": "every input and required argument is given; MIL text spells out "
                         "log's epsilon and gelu's mode although aneforge has defaults",
    "name-annotation": "every op ends in a non-empty [name = string(\"...\")]",
    "duplicate-name": "every value, op name and argument is defined once; no reserved words",
    "undefined-name": "a value is defined before it is used",
    "unknown-op": "the op is in aneforge's registry",
    "unknown-argument": "argument and annotation names are the op's own",
    "argument-type": "a compile-time argument has the kind and dtype the op takes",
    "op-check": "the op's own checks pass (broadcasting, dtypes, sizes)",
    "type-mismatch": "declared result types are the ones the op infers",
    "compile-wall": "not a graph the ANE compiler rejects (ops/walls.py)",
    "literal": "values are well formed and fit their type",
    "opset": "the function's opset is one aneforge writes (ios15..ios18)",
    "unsupported": "no construct aneforge cannot run (bf16 values, state types, BLOBFILE "
                   "without a weights directory)",
    "syntax": "the text follows the grammar",
}

# Arguments aneforge's registry defaults but MIL text must spell out: the MIL parser rejects
# log without epsilon and gelu without mode (MIL primer, "Validation gotchas"): the fix it gives.
TEXT_REQUIRED = {("log", "epsilon"): "const(fp16(0))", ("gelu", "mode"): 'string("EXACT")'}

# How each kind of compile-time argument is written, for messages: (what, example).
KIND_HELP = {
    "int": ("an int32 scalar", "const(int32(1))"),
    "ints": ("a 1-D int32 tensor", "const(tensor<int32, [1]>([-1]))"),
    "bool": ("a bool scalar", "const(bool(false))"),
    "bools": ("a 1-D bool tensor", "const(tensor<bool, [2]>([true, false]))"),
    "str": ("a string", 'string("EXACT")'),
    "dtype": ("a string naming a dtype", 'string("fp16")'),
    "scalar": ("a scalar of the first input's dtype", "const(fp16(0))"),
    "value": ("a tensor value", "fp16(0.5)"),
}



def resolve(syntax, lines: list[str], walls: bool = True) -> Program:
    """The IR of a parsed program: validated, and checked against the ANE compiler walls."""
    functions, op_lines = {}, _OpLines()
    for f in syntax.functions:
        if f.name.text in functions:
            _fail(lines, f.line, "duplicate-name", f"function {f.name.text!r} is defined twice")
        functions[f.name.text] = _FunctionResolver(f, lines, op_lines).function()
    if "main" not in functions:
        line = syntax.functions[0].line if syntax.functions else 1
        _fail(lines, line, "syntax", "a program needs a function named main: "
              "func main<ios18>(...) { ... } -> (...);")
    program = Program(functions, syntax.version, syntax.build_info)
    _check_program(program, lines, op_lines, walls)
    return program


def _check_program(program, lines, op_lines, walls) -> None:
    """The whole program against the ANE compiler walls (`walls`). The IR's own invariants
    (`aneforge.ops.validate`: unique names, defined before use, types as each op infers them,
    I/O dtypes) are not checked again: the resolver checked each, with its line, as it read
    the statements (typing the ops once more was a tenth of a large text's parse; the tests
    validate what the reader accepts)."""
    if not walls:
        return
    try:
        check_walls(program)
    except CompileWallError as e:
        # The wall names the op; find its line (op names are unique, checked above).
        line = next((op_lines[id(op)] for op in program.operations
                     if f"{op.name!r}" in str(e)), min(op_lines.values(), default=1))
        _fail(lines, line, "compile-wall", str(e))


class _OpLines(dict):
    """id(op) -> its statement's line."""


def _fail(lines, line: int, rule: str, message: str):
    raise MILSyntaxError(line, rule, message, source_line(lines, line))


def _close(word: str, options) -> str:
    near = difflib.get_close_matches(word, list(options), n=3)
    return f" (did you mean {' or '.join(map(repr, near))}?)" if near else ""


class _FunctionResolver:
    """One function's statements -> IR operations, in order, with a scope of defined names."""

    def __init__(self, f, lines: list[str], op_lines: dict):
        self.f, self.lines, self.op_lines = f, lines, op_lines
        self.scope: dict[str, Var] = {}
        self.kinds: dict = {}                       # name -> `_var_key` of its Var in scope
        self.defined_at: dict[str, int] = {}
        self.consts: dict[str, np.ndarray] = {}     # const statements: may bind attributes
        self.folded: set[str] = set()               # consts read as compile-time arguments
        self.op_names: dict[str, int] = {}
        self.ops: list[Operation] = []
        self.applied: dict = {}                     # `apply`'s answers, by `_apply_key`
        self.types: dict = {}                       # (dtype, shape) -> its checked TensorType
        self.forms: dict = {}                       # `Statement.form` -> its arguments, split

    def fail(self, line: int, rule: str, message: str):
        _fail(self.lines, line, rule, message)

    @functools.cached_property
    def later(self) -> dict[str, int]:
        """Every name the body defines -> its first line: for messages, and names a fresh
        one avoids (built when first asked: most programs never ask, and it is a walk over
        every statement)."""
        later: dict[str, int] = {}
        for st in self.f.body:
            for name, line in st.results:
                later.setdefault(name, line)
        return later

    # ---- the function
    def function(self) -> Function:
        f = self.f
        if f.opset.text not in OPSETS:
            self.fail(f.opset.line, "opset", f"opset {f.opset.text!r} is not one aneforge "
                      f"writes; use ios18 (func main<ios18>), or one of {', '.join(OPSETS)}")
        inputs = [self.param(t, tok) for t, tok in f.params]
        for st in f.body:
            self.statement(st)
        outputs = self.outputs()
        return Function(Block(inputs, self.live_ops(outputs), outputs), f.opset.text)

    def param(self, t: TypeSpec, tok) -> Var:
        self.check_io(t.dtype, t.shape, f"program input {tok.text!r}", t.line)
        v = Var(tok.text, TensorType(t.shape, self.ir_dtype(t)))
        chosen = targets.enforced()         # op results: their op-check applies the target's caps
        problems = targets.axis_problems(chosen, t.shape) if chosen else []
        if problems:
            self.fail(t.line, "axis-limit", f"program input {tok.text!r} has {problems[0]}")
        self.define(tok.text, tok.line, v)
        return v

    def outputs(self) -> list[Var]:
        out, seen = [], set()
        for ref in self.f.outputs:
            v = self.lookup(ref)
            if ref.name in seen:
                self.fail(ref.line, "duplicate-name", f"output {ref.name!r} is returned twice; "
                          f"each output needs its own name")
            seen.add(ref.name)
            self.check_io(v.dtype.name, v.shape, f"program output {ref.name!r}", ref.line)
            out.append(v)
        return out

    def live_ops(self, outputs: list[Var]) -> list[Operation]:
        """The ops, without consts that only bound compile-time arguments (now inline)."""
        if not self.folded:
            return self.ops
        used = {id(v) for op in self.ops for v in op.input_vars()} | {id(v) for v in outputs}
        return [op for op in self.ops if not (op.type == "const" and id(op.outputs[0]) not in used
                                              and op.outputs[0].name in self.folded)]

    # ---- types and names
    def check_io(self, dtype: str, shape: tuple, what: str, line: int) -> None:
        self.check(io_problem(dtype, shape, what), line)

    def check_shape(self, shape: tuple, what: str, line: int) -> None:
        self.check(shape_problem(shape, what), line)

    def check(self, problem, line: int) -> None:
        if problem is not None:
            self.fail(line, *problem)

    def tensor_type(self, t: TypeSpec) -> TensorType:
        """`t` checked, as the IR's type (each distinct type checked once)."""
        key = (t.dtype, t.shape)
        known = self.types.get(key)
        if known is None:
            known = self.types[key] = TensorType(t.shape, self.ir_dtype(t))
        return known

    def ir_dtype(self, t: TypeSpec):
        if t.dtype not in dtypes.BY_NAME:
            self.fail(t.line, "unsupported", f"aneforge has no {t.dtype} tensors; use fp16 (or "
                      f"one of {', '.join(dtypes.BY_NAME)})")
        self.check_shape(t.shape, str(t), t.line)
        return dtypes.BY_NAME[t.dtype]

    def define(self, name: str, line: int, v: Var | None,
               const: np.ndarray | None = None) -> None:
        if name in RESERVED:   # else an identifier: the text's names are (checks.NAME)
            self.check(name_problem(name, "the value name"), line)
        if name in self.defined_at:
            self.fail(line, "duplicate-name", f"{name!r} is already defined on line "
                      f"{self.defined_at[name]}; every value needs a unique name. Rename one: "
                      f"coremltools' loader does not catch this (it silently rebinds the name, "
                      f"so later uses read the wrong value).")
        self.defined_at[name] = line
        if v is not None:
            self.scope[name] = v
            self.kinds[name] = _var_key(v)
        if const is not None:
            self.consts[name] = const

    def lookup(self, ref: Ref) -> Var:
        if ref.name in self.scope:
            return self.scope[ref.name]
        if ref.name in self.consts:
            self.fail(ref.line, "argument-type", f"{ref.name!r} is a string constant; it can "
                      f"only bind a compile-time argument such as gelu's mode")
        where = self.later.get(ref.name)
        if where is not None:
            self.fail(ref.line, "undefined-name", f"{ref.name!r} is used before it is defined "
                      f"(on line {where}); statements run in order: move its definition up")
        self.fail(ref.line, "undefined-name", f"{ref.name!r} is not defined; define it in a "
                  f"statement above or as a function input{_close(ref.name, self.scope)}")

    # ---- statements
    def statement(self, st: Statement) -> None:
        key = st.form
        form = self.forms.get(key)
        if form is not None and form.quick and QUICK_STATEMENTS and self.quick(st, form):
            return
        opdef = REGISTRY.get(st.op.text)
        if opdef is None:
            self.fail(st.op.line, "unknown-op", f"unknown op {st.op.text!r}"
                      f"{_close(st.op.text, REGISTRY)}; aneforge runs "
                      f"{', '.join(sorted(REGISTRY))}")
        value = _value_attr(opdef)         # a const's value may bind compile-time arguments
        name = self.op_name(st, opdef, value)
        if value is not None and self.string_const(st, value):
            return
        inputs, found = self.bind(st, opdef, name, key, form)
        declared = self.declared(st)
        attrs, inferred = self.apply(st, opdef, inputs, found)
        self.compare(st, declared, inferred)
        outs = [Var(tok.text, t) for (_, tok), t in zip(st.outputs, declared)]
        self.new_op(Operation(opdef.name, inputs, attrs, outs, name), st.line, st.results,
                    attrs[value] if value else None)

    def quick(self, st: Statement, form: _Form) -> bool:
        """A statement of a form read before (`_Form.quick`) whose values are all ones met
        before (its inputs defined, its result types and `apply`'s answer known): added as
        `statement` adds it, by the same checks in the same order with fewer steps. False,
        having changed nothing (but `attr_arg`'s note of a const it read), when it is not that
        simple: `statement` then reads it, and says what is wrong."""
        name, line = st.named
        if not name or name in self.op_names:
            return False
        args = st.arguments if form.literals else None      # the value is one of them
        if form.value_at is not None and _is_string(args[form.value_at].value):
            return False
        refs, scope = st.refs, self.scope
        values = [scope.get(refs[i]) for i in form.tensors]
        if None in values:
            return False
        opdef, inputs = form.opdef, dict(zip(form.order, values))
        first = values[0] if values else None
        if form.literals:
            found = {args[i].name: self.attr_arg(opdef, args[i], first) for i in form.literals}
            key = _apply_key(opdef.name, inputs, found)
        else:                               # `_apply_key`'s without attributes
            found, kinds = {}, self.kinds
            key = opdef.name, tuple(zip(form.order, [kinds[refs[i]] for i in form.tensors])), ()
        known = self.known(key, found)
        declared = [self.types.get((t.dtype, t.shape)) for t in st.types]
        if known is None or declared != known[1]:
            return False
        self.op_names[name] = line
        attrs = known[0]
        results = st.results
        outs = [Var(out, t) for (out, _), t in zip(results, declared)]
        self.new_op(Operation(opdef.name, inputs, attrs, outs, name), st.line, results,
                    attrs[form.value] if form.value else None)
        return True

    def new_op(self, op: Operation, at: int, results: list, const=None) -> None:
        """`op`, read from the statement at line `at`, added; its results (`results`: the
        statement's) defined (`const`: the value a const's result has, for compile-time
        arguments it binds)."""
        self.ops.append(op)
        self.op_lines[id(op)] = at
        for (name, line), v in zip(results, op.outputs):
            self.define(name, line, v, const)

    def add(self, op: Operation, line: int) -> None:
        self.ops.append(op)
        self.op_lines[id(op)] = line

    def op_name(self, st: Statement, opdef, value: str | None) -> str:
        if st.annotations is None:
            self.fail(st.line, "name-annotation", f"{st.op.text} has no [name = ...] annotation; "
                      f"every op needs one (MIL primer): {_name_how(st)}")
        allowed = _ANNOTATIONS[value]                      # const()[val = ...]
        if not allowed.issuperset(st.annotations):
            key, line = next((k, line) for k, (_, line) in st.annotations.items()
                             if k not in allowed)
            self.fail(line, "unknown-argument", f"annotation {key!r} is not one aneforge "
                      f"reads; annotations are {sorted(allowed)}")
        lit, line = st.annotations.get("name", (None, st.line))
        name = lit.string() if lit is not None else None
        if not name:
            self.fail(line, "name-annotation", f"{st.op.text}'s name annotation is missing or "
                      f"empty; every op needs a non-empty name (MIL primer): {_name_how(st)}")
        if name in self.op_names:
            self.fail(line, "duplicate-name", f"op name {name!r} is already used on line "
                      f"{self.op_names[name]}; every op needs a unique name")
        self.op_names[name] = line
        return name

    def string_const(self, st: Statement, value: str) -> bool:
        """A string const (`string mode = const(...)`) only binds arguments: no op."""
        lit = self.value_literal(st, value)
        if not _is_string(lit):
            return False
        (t, tok), *rest = st.outputs
        if rest or t.dtype != "string" or t.shape:
            self.fail(st.line, "type-mismatch", f"a string const has one result, typed "
                      f"string: string {tok.text} = const(...)")
        self.define(tok.text, tok.line, None, lit.value)
        return True

    def value_literal(self, st: Statement, key: str | None) -> Literal | None:
        """The literal a const-like op's value argument holds, in its arguments or annotations."""
        arg = next((a.value for a in st.args if a.name == key), None)
        if arg is None and key in (st.annotations or {}):
            arg = st.annotations[key][0]
        return arg if isinstance(arg, Literal) else None

    def declared(self, st: Statement) -> list[TensorType]:
        return [self.tensor_type(t) for t, _ in st.outputs]

    # ---- arguments
    def bind(self, st: Statement, opdef, name: str, key: tuple, form: _Form | None):
        """(inputs, compile-time arguments) of the statement. A form of statement read before
        (`form`: the op, its argument and annotation names, `key`) had its names checked then:
        only its values are checked again (`bind_form`)."""
        args = st.arguments
        if form is not None:
            return self.bind_form(opdef, args, form, name)
        bound = self.bind_args(st, opdef, name, args)
        self.forms[key] = _Form.of(opdef, args)
        return bound

    def bind_form(self, opdef, args: list, form, name: str) -> tuple[dict, dict]:
        """`bind_args` for a form already read: the same checks on the values, in order."""
        _, tensors, order, literals, _, _, _ = form
        found = {args[i].name: self.tensor_arg(opdef, args[i], name) for i in tensors}
        inputs = {k: found[k] for k in order}
        first = next(iter(v for v in inputs.values() if isinstance(v, Var)), None)
        return inputs, {args[i].name: self.attr_arg(opdef, args[i], first) for i in literals}

    def bind_args(self, st: Statement, opdef, name: str, args: list) -> tuple[dict, dict]:
        inputs, literals, seen = {}, {}, set()
        for arg in args:
            if arg.name in seen:
                self.fail(arg.line, "duplicate-name", f"argument {arg.name!r} is given twice")
            seen.add(arg.name)
            if arg.name in opdef.inputs:
                inputs[arg.name] = self.tensor_arg(opdef, arg, name)
            elif arg.name in opdef.attrs:
                literals[arg.name] = arg
            else:
                takes = list(opdef.inputs) + list(opdef.attrs)
                self.fail(arg.line, "unknown-argument", f"{opdef.name} has no argument "
                          f"{arg.name!r}{_close(arg.name, takes)}; it takes "
                          f"{', '.join(takes) or 'no arguments'}")
        inputs = {k: inputs[k] for k in opdef.inputs if k in inputs}     # registry order
        first = next(iter(v for v in inputs.values() if isinstance(v, Var)), None)
        self.require(st, opdef, inputs, literals, first)
        return inputs, {k: self.attr_arg(opdef, a, first) for k, a in literals.items()}

    def require(self, st: Statement, opdef, inputs: dict, literals: dict, first) -> None:
        for k in opdef.inputs:
            if k not in inputs and k not in opdef.optional:
                self.fail(st.op.line, "required-argument", f"{opdef.name} needs input {k!r}; "
                          f"write {opdef.name}({', '.join(f'{i} = ...' for i in opdef.inputs)})")
        for k, a in opdef.attrs.items():
            primer = TEXT_REQUIRED.get((opdef.name, k))
            if k not in literals and (a.default is REQUIRED or primer):
                what, example = _kind_help(a.kind, first)
                why = " (the MIL parser rejects it without one, MIL primer)" if primer else ""
                self.fail(st.op.line, "required-argument", f"{opdef.name} needs argument {k!r}, "
                          f"{what}{why}: add {k} = {primer or example}")

    def tensor_arg(self, opdef, arg, op_name: str):
        items = arg.value if isinstance(arg.value, tuple) else (arg.value,)
        if arg.name in opdef.variadic:
            if not items:
                self.fail(arg.line, "op-check", f"{opdef.name}'s {arg.name} needs at least one "
                          f"tensor: {arg.name} = (a, b)")
            return tuple(self.tensor(opdef, arg, v, op_name) for v in items)
        if isinstance(arg.value, tuple):
            self.fail(arg.line, "argument-type", f"{opdef.name}'s {arg.name} takes one tensor, "
                      f"not a tuple: {arg.name} = a")
        return self.tensor(opdef, arg, arg.value, op_name)

    def tensor(self, opdef, arg, value, op_name: str) -> Var:
        if isinstance(value, Ref):
            return self.lookup(value)
        return self.literal_const(opdef, arg, value, op_name)

    def literal_const(self, opdef, arg, lit: Literal, op_name: str) -> Var:
        """A literal where a tensor goes (`sub(x = const(val = fp16(0)), y = x)`): a const op."""
        if lit.value.dtype not in dtypes.EXACT:
            self.fail(lit.line, "argument-type", f"{opdef.name}'s {arg.name} is a tensor input; "
                      f"a {lit.dtype} value cannot be one (aneforge tensors are "
                      f"{', '.join(dtypes.BY_NAME)})")
        self.check_shape(lit.value.shape, f"the value of {arg.name}", lit.line)
        name = self.fresh(as_name(f"{op_name}_{arg.name}"))     # op names may hold any character
        v = Var(name, TensorType(lit.value.shape, dtypes.EXACT[lit.value.dtype]))
        self.add(Operation("const", {}, {"val": lit.value}, [v], name), lit.line)
        self.defined_at[name] = lit.line
        return v

    def fresh(self, base: str) -> str:
        """A name no value or op of the function has, nor any the body defines later."""
        return fresh_name(base, _Names(self.later, self.defined_at, self.op_names))

    def attr_arg(self, opdef, arg, first: Var | None):
        kind = opdef.attrs[arg.name].kind
        what, example = _kind_help(kind, first)
        value = arg.value
        if isinstance(value, Ref):
            if value.name not in self.consts:
                self.lookup(value)            # undefined: say so; defined: not a constant
                self.fail(arg.line, "argument-type", f"{opdef.name}'s {arg.name} must be known "
                          f"when the program is built, not computed: write it inline, "
                          f"{arg.name} = {example}")
            self.folded.add(value.name)
            array = self.consts[value.name]
        elif isinstance(value, tuple):
            self.fail(arg.line, "argument-type", f"{opdef.name}'s {arg.name} is {what}, not a "
                      f"tuple: {arg.name} = {example}")
        else:
            array = value.value
        fits, convert = ATTR_FITS[kind], ATTR_KINDS[kind][1]
        # MIL types a scalar argument like the op's first input (`epsilon: const T`)
        typed = kind != "scalar" or first is None or array.dtype == first.dtype.np
        if not (typed and fits(array)):
            self.fail(arg.line, "argument-type", f"{opdef.name}'s {arg.name} must be {what}, "
                      f"found {_describe(array)}: write {arg.name} = {example}")
        return convert(array)

    # ---- types
    def apply(self, st: Statement, opdef, inputs: dict, attrs: dict):
        """(full attributes, inferred result types), the op's own errors as op-check. An op
        applied to the same input types (and constness) and attributes as before gets the
        answer it got then (`_applied`): a network repeats a few forms thousands of times."""
        key = _apply_key(opdef.name, inputs, attrs)
        known = self.known(key, attrs)
        if known is None:
            known = self.apply_once(st, opdef, inputs, attrs)
            # kept if it holds this statement's arrays as given (a const's value): the next
            # statement with equal ones gets its own in their place (`known`)
            if key is not None and all(known[0].get(k) is a for k, a in attrs.items()
                                       if type(a) is np.ndarray):
                self.applied[key] = known
        return dict(known[0]), list(known[1])

    def known(self, key, attrs: dict) -> tuple[dict, list] | None:
        """`apply`'s answer for `key` if it was met before: (full attributes, with the arrays
        of this statement's `attrs` in them: a copy; result types: the list kept); else
        None."""
        known = self.applied.get(key) if key is not None else None
        if known is None:
            return None
        full = dict(known[0])
        if attrs:
            full.update((k, a) for k, a in attrs.items() if type(a) is np.ndarray)
        return full, known[1]

    def apply_once(self, st: Statement, opdef, inputs: dict, attrs: dict):
        try:
            return apply_to_vars(opdef.name, inputs, attrs)
        except AneforgeError as e:
            self.fail(st.op.line, "op-check", str(e))
        except Exception as e:   # an op's own inference on arguments it did not expect
            self.fail(st.op.line, "op-check", f"{opdef.name} cannot take these arguments "
                      f"({type(e).__name__}: {e})")

    def compare(self, st: Statement, declared: list, inferred: list) -> None:
        if len(declared) != len(inferred):
            self.fail(st.line, "type-mismatch", f"{st.op.text} gives {len(inferred)} result(s) "
                      f"here ({', '.join(map(str, inferred))}); the statement declares "
                      f"{len(declared)}")
        for (t, tok), d, i in zip(st.outputs, declared, inferred):
            if d != i:
                self.fail(t.line, "type-mismatch", f"{tok.text!r} is declared {d} but "
                          f"{st.op.text} gives {i} for these arguments: declare {i}, or fix "
                          f"the arguments")


class _Names:
    """Names looked up in several tables (`fresh_name`'s taken set, without copying them
    into one); a name added is recorded by its definition (`defined_at`) right after."""

    def __init__(self, *tables):
        self.tables = tables

    def __contains__(self, name: str) -> bool:
        return any(name in t for t in self.tables)

    def add(self, name: str) -> None:
        pass


def _name_how(st: Statement) -> str:
    return f'end the statement with [name = string("{st.outputs[0][1].text}")]'


def _apply_key(op: str, inputs: dict, attrs: dict):
    """What `OpDef.apply` reads of a use of `op`: each input's type and whether a const makes
    it, each attribute's type and value (a small array's dtype, shape and bytes: a const's
    scalar value); None if an attribute is not hashable (a large array)."""
    key = (op, tuple([(k, _var_key(v)) for k, v in inputs.items()]),
           tuple([(k, type(v), _array_key(v) if type(v) is np.ndarray else v)
                  for k, v in attrs.items()]) if attrs else ())
    if not attrs:           # types and bools: hashable
        return key
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _var_key(v):
    if type(v) is not Var:
        return v if v is None else tuple(map(_var_key, v))
    return v.type, v.op is not None and is_literal(v.op.type)


def _array_key(a: np.ndarray):
    """A small array by value (hashable), a large one itself (not hashable: not worth it)."""
    return (a.dtype.str, a.shape, a.tobytes()) if a.size <= 64 and a.dtype.kind in "biufU" \
        else a


class _Form(NamedTuple):
    """A checked form of statement (`Statement.form`: its names were checked when first read) and
    its arguments (`Statement.arguments`), split: what a statement of the form still checks is its
    values."""
    opdef: OpDef
    tensors: tuple[int, ...]    # the inputs' indices, in the text's order (as they are checked)
    order: tuple[str, ...]      # their names, in the registry's order
    literals: tuple[int, ...]   # the compile-time arguments' indices
    value: str | None           # the argument holding a const's value (`_value_attr`)
    value_at: int | None        # its index
    quick: bool                 # one tensor per input, in the registry's order: `quick` reads it

    @classmethod
    def of(cls, opdef, args: list) -> "_Form":
        names = {a.name for a in args}
        tensors = tuple(i for i, a in enumerate(args) if a.name in opdef.inputs)
        order = tuple(k for k in opdef.inputs if k in names)
        quick = not names & opdef.variadic and order == tuple(args[i].name for i in tensors)
        value = _value_attr(opdef)
        return cls(opdef, tensors, order,
                   tuple(i for i, a in enumerate(args) if a.name in opdef.attrs), value,
                   next((i for i, a in enumerate(args) if a.name == value), None), quick)


def _is_string(lit) -> bool:
    """Whether `lit` (a Literal, or an argument's other value, or None) holds strings."""
    return type(lit) is Literal and lit.value.dtype.kind == "U"


_VALUE_ATTRS: dict[str, str | None] = {}


def _value_attr(opdef) -> str | None:
    """The argument holding a const's value (MIL keeps it among the op's attributes)."""
    if opdef.name not in _VALUE_ATTRS:
        _VALUE_ATTRS[opdef.name] = next((k for k, a in opdef.attrs.items()
                                         if a.kind in STORED_AS_ATTRIBUTE), None)
    return _VALUE_ATTRS[opdef.name]


# the annotations a statement may carry, by its op's value argument (`_value_attr`)
class _Annotations(dict):
    def __missing__(self, value: str | None) -> frozenset:
        self[value] = frozenset({"name"} | {value} - {None})
        return self[value]


_ANNOTATIONS = _Annotations()


def _kind_help(kind: str, first: Var | None) -> tuple[str, str]:
    """(what an argument of this kind is, how to write one), for messages."""
    if kind == "scalar" and first is not None:
        return (f"a scalar of dtype {first.dtype.name} (like {first.name!r})",
                f"const({first.dtype.name}(0))")
    return KIND_HELP[kind]


def _describe(a: np.ndarray) -> str:
    kind = {"U": "string", "b": "bool", "f": "float", "i": "int", "u": "uint"}.get(a.dtype.kind, "")
    return f"a {kind} {'scalar' if a.ndim == 0 else f'tensor of shape {list(a.shape)}'}"
