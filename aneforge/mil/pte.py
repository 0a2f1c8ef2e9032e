"""`.pte` export: a Program as an ExecuTorch program (`af.export(obj, "m.pte")`).

The program is cut into segments, each run by one executor:

    Segment(backend="CoreMLBackend", ...)  one DelegateCall: ExecuTorch's Core ML backend loads
                                           the segment's Core ML package (the payload below)
    Segment(backend=None, ...)             portable-kernel calls, one MIL op at a time
                                           (`KERNELS`: MIL op -> the aten `.out` calls it becomes)

`segments(program, delegate)` makes them; today a program is one segment, the whole program
(delegated, or on portable kernels with `delegate=False`). A multi-segment plan hands the writer
its own list: each segment is a Program whose inputs and outputs are named like the values
they carry between segments (`Segment.program.main.inputs[i].name`), the first segment's inputs
being the method's inputs and the last outputs named as the method's outputs (`lower`).

Every tensor that is not a constant gets a place in one planned buffer (memory id 1), placed by
lifetime over the instruction list (`_plan_memory`: first fit, runtime/plan.py's `Arena`).
Constants are in the constant segment (pte_format.py). The Core ML payload is what ExecuTorch's
`CoreMLBackend.preprocess` produces (backends/apple/coreml/compiler/coreml_preprocess.py): the
directory {model.mlpackage/, metadata.json (inputNames, outputNames, identifier)} flattened by
its `flatten_directory_contents` (`flatten_directory`: file bytes one after the other, then the
file tree as JSON, reversed).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from typing import Callable, NamedTuple

import numpy as np

from ..errors import AneforgeError
from ..ir import Program, TensorType, Var
from ..ops import validate
from ..ops.conv import paddings
from ..ops.padding import widths
from ..ops.shape import slices
from . import pte_format as fmt

CORE_ML = "CoreMLBackend"
MEMORY_ID = 1                     # planned memory: ExecuTorch keeps buffer 0 for constants
COMPILE_SPECS = (("model_type", b"model"), ("compute_units", b"cpu_and_ne"))


class Segment(NamedTuple):
    backend: str | None           # a delegate's backend id, or None: portable kernels
    program: Program


def segments(program: Program, delegate: bool) -> list[Segment]:
    """How `program` is run: today one segment, delegated to Core ML or on portable kernels."""
    return [Segment(CORE_ML if delegate else None, program)]


def export_pte(program: Program, path: str, delegate: bool = True) -> str:
    """Write `program` as an ExecuTorch `.pte` at `path`; returns the path.

    >>> import aneforge as af, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "m.pte")
    >>> _ = export_pte(af.program(af.ones(2, 3).relu() * 2), path, delegate=False)
    >>> open(path, "rb").read()[4:8]
    b'ET12'
    """
    program = validate(program, ane_io=False)     # ExecuTorch and Core ML take int32 I/O
    data = to_pte_bytes(segments(program, delegate))
    tmp = f"{path}.partial"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return str(path)


def to_pte_bytes(segs: list[Segment]) -> bytes:
    lowering = Lowering()
    plan = lowering.lower(segs)
    return fmt.serialize([plan], lowering.constants, lowering.delegate_data)


class Lowering:
    """Builds one ExecutionPlan: values, kernel and delegate calls, constants."""

    def __init__(self):
        self.values: list = []
        self.instructions: list = []
        self.operators: list = []
        self.delegates: list = []
        self.constants: list[bytes] = [b""]       # buffer 0: what non-constants point at
        self.delegate_data: list[bytes] = []
        self.named: dict[str, int] = {}           # value name -> value index, across segments
        self._interned: dict = {}

    # ---- values -------------------------------------------------------------------------
    def add(self, value: tuple) -> int:
        self.values.append(value)
        return len(self.values) - 1

    def scalar(self, kind: str, x) -> int:
        """An int, bool, double, string or null value (one per distinct value)."""
        key = (kind, x, type(x))
        if key not in self._interned:
            self._interned[key] = self.add((kind,) if kind == "null" else (kind, x))
        return self._interned[key]

    def ints(self, items) -> int:
        return self.add(("ints", tuple(self.scalar("int", int(i)) for i in items)))

    def tensor(self, type: TensorType, dtype: str | None = None) -> int:
        """A non-constant tensor of `type` (`dtype`: a scalar type name aneforge has no dtype
        for, e.g. "int64")."""
        return self.add(("tensor", fmt.Tensor(tuple(type.shape), dtype or type.dtype.name)))

    def constant(self, array: np.ndarray, type: TensorType) -> int:
        data = np.ascontiguousarray(np.asarray(array).astype(type.dtype.np).reshape(type.shape))
        self.constants.append(data.tobytes())
        t = fmt.Tensor(tuple(type.shape), type.dtype.name, buffer=len(self.constants) - 1)
        return self.add(("tensor", t))

    def of(self, var: Var) -> int:
        """The value a Var reads (made when first asked for: an op's result, a segment input)."""
        if var.name not in self.named:
            self.named[var.name] = self.tensor(var.type)
        return self.named[var.name]

    # ---- instructions -----------------------------------------------------------------
    def call(self, name: str, overload: str, args: list[int]) -> None:
        """A kernel call. ExecuTorch's unboxed kernels take their arguments and then one slot
        for their result: the (last) `out` again, one slot even for several results."""
        key = (name, overload)
        if key not in self.operators:
            self.operators.append(key)
        args = list(args) + [args[-1]]
        self.instructions.append(("kernel", self.operators.index(key), args))

    def lower(self, segs: list[Segment], name: str = "forward") -> fmt.Plan:
        first, last = segs[0].program.main, segs[-1].program.main
        for seg in segs:
            (self._host if seg.backend is None else self._delegated)(seg)
        inputs = [self.of(v) for v in first.inputs]       # a delegate's typed them already
        outputs = [self.of(v) for v in last.outputs]
        size = _plan_memory(self.values, self.instructions, inputs, outputs)
        return fmt.Plan(name, self.values, inputs, outputs, self.instructions, self.operators,
                        self.delegates, [0, size])

    def _host(self, seg: Segment) -> None:
        for op in seg.program.operations:
            rule = KERNELS.get(op.type)
            if rule is None:
                raise AneforgeError(
                    f"MIL op {op.type!r} ({op.name}) has no ExecuTorch portable kernel here; "
                    f"export with delegate=True to run it inside the Core ML delegate, or "
                    f"express it with the ops {sorted(KERNELS)}")
            rule(self, op)

    def _delegated(self, seg: Segment) -> None:
        from .package import core_ml_boundary
        f = core_ml_boundary(seg.program).main      # the I/O dtypes Core ML's interface has
        args = [self.of(v) for v in f.inputs] + [self.of(v) for v in f.outputs]
        self.delegate_data.append(core_ml_payload(seg.program))
        self.delegates.append(fmt.Delegate(seg.backend, len(self.delegate_data) - 1, COMPILE_SPECS))
        self.instructions.append(("delegate", len(self.delegates) - 1, args))


# ---- the memory plan ------------------------------------------------------------------------
def _tensor_bytes(t: fmt.Tensor) -> int:
    return math.prod(t.sizes) * fmt.ITEMSIZE[t.dtype]


def _plan_memory(values: list, instructions: list, inputs: list, outputs: list) -> int:
    """Give every non-constant tensor a place (memory id 1, byte offset) by lifetime, in place
    in `values`; returns the buffer's size. Inputs live from the start, outputs to the end."""
    from ..runtime.plan import Arena
    planned = {k for k, v in enumerate(values) if v[0] == "tensor" and not v[1].buffer}
    born, dies = {k: -1 for k in inputs}, {k: len(instructions) for k in outputs}
    for step, (_, _, args) in enumerate(instructions):
        for k in _tensors_read(values, args):
            born.setdefault(k, step)
            dies[k] = max(dies.get(k, step), step)
    arena, place = Arena(), {}
    for step in range(-1, len(instructions)):
        for k in sorted(k for k in planned if born.get(k) == step):
            place[k] = arena.take(_tensor_bytes(values[k][1]))
        for k in sorted(k for k in place if dies.get(k) == step):
            arena.give(place[k], _tensor_bytes(values[k][1]))
    for k, offset in place.items():
        values[k] = ("tensor", values[k][1]._replace(alloc=(MEMORY_ID, offset)))
    return arena.size


def _tensors_read(values: list, args: list) -> list[int]:
    out = []
    for k in args:
        out += list(values[k][1]) if values[k][0] == "tensors" else [k]
    return [k for k in out if values[k][0] == "tensor"]


# ---- MIL op -> portable kernels --------------------------------------------------------------
# Each rule emits the aten `.out` calls of one MIL op, with the argument lists of ExecuTorch's
# portable kernels (kernels/portable/functions.yaml; the signatures are ATen's
# native_functions.yaml): inputs, then the non-tensor arguments, then `out`.

def _unary(name: str) -> Callable:
    def rule(L: Lowering, op) -> None:
        L.call(name, "out", [L.of(op.inputs["x"]), L.of(op.outputs[0])])
    return rule


def _binary(name: str, overload: str = "out", alpha: bool = False) -> Callable:
    def rule(L: Lowering, op) -> None:
        extra = [L.scalar("int", 1)] if alpha else []
        L.call(name, overload, [L.of(op.inputs["x"]), L.of(op.inputs["y"]), *extra,
                                L.of(op.outputs[0])])
    return rule


def _epsilon_first(name: str) -> Callable:
    """log / rsqrt: MIL adds `epsilon` to x first; aten has no epsilon (added where nonzero in
    the op's dtype)."""
    def rule(L: Lowering, op) -> None:
        x, out = op.inputs["x"], op.outputs[0]
        src = L.of(x)
        eps = np.asarray(op.attrs.get("epsilon", 0.0), x.dtype.np)
        if eps != 0:
            shifted = L.tensor(x.type)
            L.call("aten::add", "out", [src, L.constant(eps, TensorType((), x.dtype)),
                                        L.scalar("int", 1), shifted])
            src = shifted
        L.call(name, "out", [src, L.of(out)])
    return rule


def _const(L: Lowering, op) -> None:
    out = op.outputs[0]
    L.named[out.name] = L.constant(op.attrs["val"], out.type)


def _view(L: Lowering, op) -> None:
    """reshape, expand_dims, squeeze: a copy with the result's sizes."""
    out = op.outputs[0]
    L.call("aten::view_copy", "out", [L.of(op.inputs["x"]), L.ints(out.shape), L.of(out)])


def _stages(L: Lowering, src: int, dtype, stages: list, out: int) -> None:
    """Calls that each read the previous result: (name, overload, extra args, result shape);
    the last writes `out` (none at all: a copy)."""
    if not stages:
        L.call("aten::clone", "out", [src, L.scalar("null", None), out])
    for k, (name, overload, extra, shape) in enumerate(stages):
        dst = out if k == len(stages) - 1 else L.tensor(TensorType(tuple(shape), dtype))
        L.call(name, overload, [src, *extra, dst])
        src = dst


def _transpose(L: Lowering, op) -> None:
    L.call("aten::permute_copy", "out",
           [L.of(op.inputs["x"]), L.ints(op.attrs["perm"]), L.of(op.outputs[0])])


def _slice(L: Lowering, op) -> None:
    """One slice_copy per sliced axis (a negative stride: slice, then flip), then a view
    dropping the squeezed axes."""
    x, out = op.inputs["x"], op.outputs[0]
    keys = ("begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask")
    shape, stages = list(x.shape), []
    for axis, sl in enumerate(slices(x.shape, *(op.attrs[k] for k in keys))):
        picked = range(x.shape[axis])[sl]
        if len(picked) == x.shape[axis] and picked.step == 1:
            continue
        lo, step = min(picked[0], picked[-1]), abs(picked.step)
        shape[axis] = len(picked)
        stages.append(("aten::slice_copy", "Tensor_out",
                       [L.scalar("int", axis), L.scalar("int", lo),
                        L.scalar("int", lo + step * (len(picked) - 1) + 1), L.scalar("int", step)],
                       list(shape)))
        if picked.step < 0:
            stages.append(("aten::flip", "out", [L.ints([axis])], list(shape)))
    if tuple(shape) != tuple(out.shape) or not stages:
        stages.append(("aten::view_copy", "out", [L.ints(out.shape)], out.shape))
    _stages(L, L.of(x), x.dtype, stages, L.of(out))


def _concat(L: Lowering, op) -> None:
    parts = L.add(("tensors", tuple(L.of(v) for v in op.inputs["values"])))
    L.call("aten::cat", "out", [parts, L.scalar("int", op.attrs["axis"]), L.of(op.outputs[0])])


def _pad(L: Lowering, op) -> None:
    x = op.inputs["x"]
    if op.attrs["mode"] != "constant":
        raise AneforgeError(f"pad mode {op.attrs['mode']!r} ({op.name}) has no portable kernel "
                            f"here (constant only); export with delegate=True")
    pad = [p for b, e in reversed(widths(len(x.shape), op.attrs["pad"])) for p in (b, e)]  # last axis first
    L.call("aten::constant_pad_nd", "out", [L.of(x), L.ints(pad),
                                            L.scalar("double", float(op.attrs["constant_val"])),
                                            L.of(op.outputs[0])])


def _axes(op) -> list[int]:
    axes = op.attrs.get("axes")
    return list(range(len(op.inputs["x"].shape))) if axes is None else list(axes)


def _reduce(name: str, overload: str, dtype_arg: bool) -> Callable:
    """reduce_*: aten's (self, dim, keepdim[, dtype], out)."""
    def rule(L: Lowering, op) -> None:
        extra = [L.scalar("null", None)] if dtype_arg else []
        L.call(name, overload, [L.of(op.inputs["x"]), L.ints(_axes(op)),
                                L.scalar("bool", bool(op.attrs["keep_dims"])), *extra,
                                L.of(op.outputs[0])])
    return rule


def _softmax(L: Lowering, op) -> None:
    L.call("aten::_softmax", "out", [L.of(op.inputs["x"]), L.scalar("int", op.attrs["axis"]),
                                     L.scalar("bool", False), L.of(op.outputs[0])])


def _cast(L: Lowering, op) -> None:
    L.call("aten::_to_copy", "out", [L.of(op.inputs["x"]), L.scalar("bool", False),
                                     L.scalar("null", None), L.of(op.outputs[0])])


def _select(L: Lowering, op) -> None:
    L.call("aten::where", "self_out", [L.of(op.inputs[k]) for k in ("cond", "a", "b")]
           + [L.of(op.outputs[0])])


def _clip(L: Lowering, op) -> None:
    L.call("aten::clamp", "out", [L.of(op.inputs["x"]), L.scalar("double", float(op.attrs["alpha"])),
                                  L.scalar("double", float(op.attrs["beta"])), L.of(op.outputs[0])])


def _leaky_relu(L: Lowering, op) -> None:
    L.call("aten::leaky_relu", "out", [L.of(op.inputs["x"]), L.scalar("double", float(op.attrs["alpha"])),
                                       L.of(op.outputs[0])])


GELU_MODES = {"EXACT": "none", "TANH_APPROXIMATION": "tanh"}


def _gelu(L: Lowering, op) -> None:
    mode = op.attrs["mode"]
    if mode not in GELU_MODES:
        raise AneforgeError(f"gelu mode {mode!r} ({op.name}) has no portable kernel; "
                            f"use {sorted(GELU_MODES)} or export with delegate=True")
    L.call("aten::gelu", "out", [L.of(op.inputs["x"]), L.scalar("string", GELU_MODES[mode]),
                                 L.of(op.outputs[0])])


def _silu(L: Lowering, op) -> None:
    """x * sigmoid(x): the portable kernels have no silu."""
    x = op.inputs["x"]
    gate = L.tensor(x.type)
    L.call("aten::sigmoid", "out", [L.of(x), gate])
    L.call("aten::mul", "out", [L.of(x), gate, L.of(op.outputs[0])])


def _split(L: Lowering, op) -> None:
    """split_with_sizes_copy writes a list of tensors (passed twice, as every `out`)."""
    axis = op.attrs["axis"]
    parts = L.add(("tensors", tuple(L.of(v) for v in op.outputs)))
    L.call("aten::split_with_sizes_copy", "out",
           [L.of(op.inputs["x"]), L.ints([v.shape[axis] for v in op.outputs]),
            L.scalar("int", axis), parts])


def _arg_reduce(name: str) -> Callable:
    """reduce_argmax / argmin: aten's kernels write int64 indices; cast to the op's dtype."""
    def rule(L: Lowering, op) -> None:
        out = op.outputs[0]
        wide = L.tensor(out.type, "int64")
        L.call(name, "out", [L.of(op.inputs["x"]), L.scalar("int", op.attrs["axis"]),
                             L.scalar("bool", bool(op.attrs["keep_dims"])), wide])
        L.call("aten::_to_copy", "out", [wide, L.scalar("bool", False), L.scalar("null", None),
                                         L.of(out)])
    return rule


def _optional(L: Lowering, op, name: str) -> int:
    v = op.inputs.get(name)
    return L.scalar("null", None) if v is None else L.of(v)


def _layer_norm(L: Lowering, op) -> None:
    """native_layer_norm over the trailing axes; it also writes the mean and 1/std (unused)."""
    x, out = op.inputs["x"], op.outputs[0]
    rank = len(x.shape)
    axes = sorted(a % rank for a in op.attrs["axes"])
    if axes != list(range(rank - len(axes), rank)):
        raise AneforgeError(f"layer_norm over axes {op.attrs['axes']} ({op.name}): the portable "
                            f"kernel normalizes trailing axes only; export with delegate=True")
    stats = TensorType(tuple(x.shape[:rank - len(axes)]) + (1,) * len(axes), x.dtype)
    L.call("aten::native_layer_norm", "out",
           [L.of(x), L.ints(x.shape[rank - len(axes):]), _optional(L, op, "gamma"),
            _optional(L, op, "beta"), L.scalar("double", float(op.attrs["epsilon"])),
            L.of(out), L.tensor(stats), L.tensor(stats)])


def _conv(L: Lowering, op) -> None:
    """convolution.out; padding aten cannot express (unequal before/after) is a
    constant_pad_nd first."""
    x, w, out = op.inputs["x"], op.inputs["weight"], op.outputs[0]
    a = op.attrs
    pads = paddings(a["pad_type"], a["pad"], x.shape[2:], w.shape[2:], a["strides"], a["dilations"])
    src = L.of(x)
    if any(p0 != p1 for p0, p1 in pads):
        shape = tuple(x.shape[:2]) + tuple(n + p0 + p1 for n, (p0, p1) in zip(x.shape[2:], pads))
        padded = L.tensor(TensorType(shape, x.dtype))
        L.call("aten::constant_pad_nd", "out", [src, L.ints([p for p0, p1 in reversed(pads) for p in (p0, p1)]),
                                                L.scalar("double", 0.0), padded])
        src, pads = padded, [(0, 0)] * len(pads)
    L.call("aten::convolution", "out",
           [src, L.of(w), _optional(L, op, "bias"), L.ints(a["strides"]), L.ints([p for p, _ in pads]),
            L.ints(a["dilations"]), L.scalar("bool", False), L.ints([0] * len(pads)),
            L.scalar("int", a["groups"]), L.of(out)])


def _softsign(L: Lowering, op) -> None:
    """x / (1 + |x|)."""
    x = op.inputs["x"]
    size, one = L.tensor(x.type), L.constant(np.ones((), x.dtype.np), TensorType((), x.dtype))
    L.call("aten::abs", "out", [L.of(x), size])
    L.call("aten::add", "out", [size, one, L.scalar("int", 1), size])
    L.call("aten::div", "out", [L.of(x), size, L.of(op.outputs[0])])


def _tile(L: Lowering, op) -> None:
    L.call("aten::repeat", "out", [L.of(op.inputs["x"]), L.ints(op.attrs["reps"]), L.of(op.outputs[0])])


def _matmul(L: Lowering, op) -> None:
    x, y = op.inputs["x"], op.inputs["y"]
    a = _transposed(L, x, op.attrs["transpose_x"])
    b = _transposed(L, y, op.attrs["transpose_y"])
    _product(L, a, b, op.outputs[0])


def _transposed(L: Lowering, v: Var, flip: bool) -> tuple[int, tuple]:
    """(value, shape) of v, its last two axes swapped when `flip`."""
    if not flip:
        return L.of(v), tuple(v.shape)
    shape = tuple(v.shape[:-2]) + (v.shape[-1], v.shape[-2])
    dst = L.tensor(TensorType(shape, v.dtype))
    L.call("aten::transpose_copy", "int_out", [L.of(v), L.scalar("int", -2), L.scalar("int", -1), dst])
    return dst, shape


def _product(L: Lowering, a: tuple, b: tuple, out: Var) -> None:
    """mm for two matrices; otherwise both broadcast to the batch, flattened to 3-D for bmm."""
    (xa, sa), (xb, sb) = a, b
    if len(sa) == len(sb) == 2:
        L.call("aten::mm", "out", [xa, xb, L.of(out)])
        return
    batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    n = math.prod(batch)
    flat = [_batched(L, x, s, batch, n, out.dtype) for x, s in ((xa, sa), (xb, sb))]
    res = L.tensor(TensorType((n, sa[-2], sb[-1]), out.dtype))
    L.call("aten::bmm", "out", [*flat, res])
    L.call("aten::view_copy", "out", [res, L.ints(out.shape), L.of(out)])


def _batched(L: Lowering, x: int, shape: tuple, batch: tuple, n: int, dtype) -> int:
    stages = []
    if tuple(shape[:-2]) != batch:
        full = batch + tuple(shape[-2:])
        stages.append(("aten::expand_copy", "out", [L.ints(full), L.scalar("bool", False)], full))
    flat = (n,) + tuple(shape[-2:])
    stages.append(("aten::view_copy", "out", [L.ints(flat)], flat))
    dst = L.tensor(TensorType(flat, dtype))
    _stages(L, x, dtype, stages, dst)
    return dst


def _linear(L: Lowering, op) -> None:
    """x @ weight.T + bias (the portable kernels' linear is addmm on matrices only)."""
    x, w, out = op.inputs["x"], op.inputs["weight"], op.outputs[0]
    bias = op.inputs.get("bias")
    prod = out if bias is None else Var(f"{out.name}_matmul", out.type)
    _product(L, (L.of(x), tuple(x.shape)), _transposed(L, w, True), prod)
    if bias is not None:
        L.call("aten::add", "out", [L.of(prod), L.of(bias), L.scalar("int", 1), L.of(out)])


COMPARE = {"equal": "aten::eq", "not_equal": "aten::ne", "greater": "aten::gt",
           "greater_equal": "aten::ge", "less": "aten::lt", "less_equal": "aten::le"}
UNARY = {"relu": "aten::relu", "exp": "aten::exp", "sqrt": "aten::sqrt", "sin": "aten::sin",
         "cos": "aten::cos", "erf": "aten::erf", "tanh": "aten::tanh", "sigmoid": "aten::sigmoid",
         "abs": "aten::abs", "logical_not": "aten::logical_not"}

KERNELS: dict[str, Callable] = {
    **{mil: _unary(aten) for mil, aten in UNARY.items()},
    **{mil: _binary(aten, "Tensor_out") for mil, aten in COMPARE.items()},
    "add": _binary("aten::add", alpha=True),
    "sub": _binary("aten::sub", alpha=True),
    "mul": _binary("aten::mul"),
    "real_div": _binary("aten::div"),
    "maximum": _binary("aten::maximum"),
    "minimum": _binary("aten::minimum"),
    "pow": _binary("aten::pow", "Tensor_Tensor_out"),
    "log": _epsilon_first("aten::log"),
    "rsqrt": _epsilon_first("aten::rsqrt"),
    "identity": lambda L, op: _stages(L, L.of(op.inputs["x"]), op.inputs["x"].dtype, [],
                                      L.of(op.outputs[0])),
    "const": _const,
    "reshape": _view, "expand_dims": _view, "squeeze": _view,
    "transpose": _transpose,
    "slice_by_index": _slice,
    "concat": _concat,
    "pad": _pad,
    "tile": _tile,
    "layer_norm": _layer_norm,
    "conv": _conv,
    "softsign": _softsign,
    "split": _split,
    "reduce_argmax": _arg_reduce("aten::argmax"),
    "reduce_argmin": _arg_reduce("aten::argmin"),
    "reduce_mean": _reduce("aten::mean", "out", dtype_arg=True),
    "reduce_sum": _reduce("aten::sum", "IntList_out", dtype_arg=True),
    "reduce_max": _reduce("aten::amax", "out", dtype_arg=False),
    "reduce_min": _reduce("aten::amin", "out", dtype_arg=False),
    "softmax": _softmax,
    "cast": _cast,
    "select": _select,
    "clip": _clip,
    "leaky_relu": _leaky_relu,
    "gelu": _gelu,
    "silu": _silu,
    "matmul": _matmul,
    "linear": _linear,
}


# ---- the Core ML delegate's payload -----------------------------------------------------------
def core_ml_payload(program: Program) -> bytes:
    """The bytes ExecuTorch's Core ML backend loads: the program as `model.mlpackage` and
    `metadata.json`, flattened as its `flatten_directory_contents` does."""
    from .package import write_package
    identifier = "executorch_" + hashlib.sha256(program.signature().encode()).hexdigest()[:32]
    meta = {"inputNames": [v.name for v in program.main.inputs],
            "outputNames": [v.name for v in program.main.outputs], "identifier": identifier}
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "lowered_module")
        os.makedirs(root)
        write_package(program, os.path.join(root, "model.mlpackage"))
        with open(os.path.join(root, "metadata.json"), "w") as f:
            json.dump(meta, f)
        return flatten_directory(root)


def flatten_directory(root: str) -> bytes:
    """A directory as one byte string, in the layout of ExecuTorch Core ML's in-memory file
    system: every file's bytes in tree order (depth first, names sorted, a directory after its
    entries), then the tree {"nodes": [{children: {name: node index}, dataRegion: {offset,
    size}, kind: 0 file / 1 directory, name}, ...]} (root last) as compact JSON, reversed, so a
    reader finds it from the end. The backend lists a directory in the file system's order;
    nodes refer to each other by index, so sorting names only makes the bytes reproducible."""
    nodes, chunks = [], []

    def visit(path: str) -> int:
        name = os.path.basename(path)
        if os.path.isdir(path):
            children = {n: visit(os.path.join(path, n)) for n in sorted(os.listdir(path))}
            nodes.append({"children": children, "dataRegion": {"offset": 0, "size": 0},
                          "kind": 1, "name": name})
        else:
            with open(path, "rb") as f:
                data = f.read()
            offset = sum(len(c) for c in chunks)
            chunks.append(data)
            nodes.append({"children": {}, "dataRegion": {"offset": offset, "size": len(data)},
                          "kind": 0, "name": name})
        return len(nodes) - 1

    visit(root)
    tree = json.dumps({"nodes": nodes}, sort_keys=True, separators=(",", ":")).encode()
    return b"".join(chunks) + tree[::-1]
