"""MIL text, in the format of the MIL primer (shared/seeds/001):

    program(1.3)
    [buildInfo = dict<string, string>({{"coremlc-component-MIL", "3520.4.1"}, ...})]
    {
        func main<ios18>(tensor<fp16, [1, 4]> x_0) {
            tensor<fp16, [1, 4]> relu_1 = relu(x = x_0)[name = string("relu_1")];
        } -> (relu_1);
    }

Compile-time arguments are written inline (`axes = const(tensor<int32, [1]>([-1]))`,
`mode = string("EXACT")`), fp16 tensor constants as 16-bit hex literals.
"""
from __future__ import annotations

import numpy as np

from ..ops import REGISTRY

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


def attr_literal(kind: str, value, x_dtype: str | None) -> str:
    if kind == "str":
        return f'string("{value}")'
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
    return f"{outs} = {op.type}({', '.join(args)})[name = string(\"{op.name}\")];"


def emit(program) -> str:
    """The program as MIL text."""
    f = program.main
    info = ", ".join(f'{{"{k}", "{v}"}}' for k, v in program.build_info.items())
    params = ", ".join(f"{v.type} {v.name}" for v in f.inputs)
    lines = [f"program({program.version})",
             f"[buildInfo = dict<string, string>({{{info}}})]",
             "{",
             f"{INDENT}func main<{f.opset}>({params}) {{"]
    lines += [INDENT * 2 + statement(op) for op in f.block.operations]
    lines += [f"{INDENT}}} -> ({', '.join(v.name for v in f.outputs)});", "}", ""]
    return "\n".join(lines)
