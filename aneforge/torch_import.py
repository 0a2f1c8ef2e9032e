"""`af.from_torch(module, example_inputs)`: a torch module as an aneforge Module, via torch.export.

torch.export traces the module into a graph of ATen ops; each op is looked up in `ATEN`, one
entry per op, which says how aneforge computes it (a torch-named aneforge function, or a short
decomposition into them). Parameters become aneforge Parameters under their torch names (so
`state_dict()` keys match torch's), buffers become state tensors. The result is an ordinary
`af.nn.Module`: it runs, trains with `af.optim`, replays under `af.compile`, and exports with
`af.export`. An ATen op with no entry is named in the error, with the node and the line of the
torch source that produced it.

This is the one runtime module that imports torch, and only when `from_torch` is called.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from . import functions as af_fn
from .creation import tensor
from .errors import AneforgeError
from .nn import functional as F
from .nn.module import Module
from .nn.parameter import Parameter
from .tensor import Tensor


def _dims(d) -> tuple:
    return tuple(d) if isinstance(d, (list, tuple)) else (d,)


def _pair(v) -> tuple:
    return tuple(v) if isinstance(v, (list, tuple)) else (v, v)


def _slice(x: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, None if end is not None and end >= 2 ** 62 else end, step)
    return x[tuple(index)]


def _select(x: Tensor, dim: int, i: int) -> Tensor:
    index = [slice(None)] * x.ndim
    index[dim] = i
    return x[tuple(index)]


def _conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    return F.conv2d(x, w, b, _pair(stride), _pair(padding), _pair(dilation), groups)


def _to(x: Tensor, dtype) -> Tensor:
    """A torch dtype cast: floating stays as aneforge computes it (fp16 storage), integers and
    bools cast."""
    if dtype.is_floating_point:
        return x
    from . import dtypes
    return x.to(dtypes.bool_ if str(dtype) == "torch.bool" else dtypes.int32)


def _batch_norm(x, w, b, mean, var, training, momentum, eps, cudnn_enabled=True):
    """aten.batch_norm: normalise over every axis but 1, by the batch's statistics when
    training (running statistics are not updated: from_torch refuses graphs that do), else by
    the running ones."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training or mean is None:
        axes = (0,) + tuple(range(2, x.ndim))
        mean, var = x.mean(axes), x.var(axes, correction=0)
    y = (x - mean.reshape(shape)) * (var.reshape(shape) + eps).rsqrt()
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y


def _batch_norm_eval(x, w, b, mean, var, momentum, eps):
    """_native_batch_norm_legit_no_training: (y, saved mean, saved invstd) with running stats."""
    return _batch_norm(x, w, b, mean, var, False, momentum, eps), mean, var


# One entry per ATen op (the name torch.export prints): how aneforge computes it.
ATEN: dict[str, Callable] = {
    # linear algebra
    "aten.linear.default": F.linear,
    "aten.matmul.default": lambda x, y: x @ y,
    "aten.mm.default": lambda x, y: x @ y,
    "aten.bmm.default": lambda x, y: x @ y,
    "aten.addmm.default": lambda b, x, y, beta=1, alpha=1: b * beta + (x @ y) * alpha,
    "aten.conv2d.default": _conv2d,
    # elementwise
    "aten.add.Tensor": lambda x, y, alpha=1: x + (y * alpha if alpha != 1 else y),
    "aten.sub.Tensor": lambda x, y, alpha=1: x - (y * alpha if alpha != 1 else y),
    "aten.mul.Tensor": lambda x, y: x * y,
    "aten.div.Tensor": lambda x, y: x / y,
    "aten.neg.default": lambda x: -x,
    "aten.pow.Tensor_Scalar": lambda x, e: x ** e,
    "aten.sqrt.default": Tensor.sqrt,
    "aten.rsqrt.default": Tensor.rsqrt,
    "aten.exp.default": Tensor.exp,
    "aten.log.default": Tensor.log,
    "aten.abs.default": Tensor.abs,
    "aten.relu.default": Tensor.relu,
    "aten.sigmoid.default": Tensor.sigmoid,
    "aten.tanh.default": Tensor.tanh,
    "aten.erf.default": Tensor.erf,
    "aten.gelu.default": lambda x, approximate="none": F.gelu(x, approximate=approximate),
    "aten.silu.default": F.silu,
    "aten.clamp.default": lambda x, min=None, max=None: x.clamp(min, max),
    "aten.where.self": lambda c, x, y: af_fn.where(c, x, y),
    "aten.masked_fill.Scalar": lambda x, m, v: x.masked_fill(m, v),
    # normalisation and activations over an axis
    "aten.softmax.int": lambda x, dim, dtype=None: x.softmax(dim),
    "aten._softmax.default": lambda x, dim, half_to_float=False: x.softmax(dim),
    "aten.log_softmax.int": lambda x, dim, dtype=None: x.log_softmax(dim),
    "aten.layer_norm.default": lambda x, shape, w=None, b=None, eps=1e-5, cudnn=True:
        F.layer_norm(x, shape, w, b, eps),
    "aten.batch_norm.default": _batch_norm,
    "aten._native_batch_norm_legit_no_training.default": _batch_norm_eval,
    "aten.dropout.default": lambda x, p, train: F.dropout(x, p, train),
    # reductions
    "aten.mean.dim": lambda x, dims, keepdim=False, dtype=None: x.mean(_dims(dims), keepdim),
    "aten.mean.default": lambda x, dtype=None: x.mean(),
    "aten.sum.dim_IntList": lambda x, dims, keepdim=False, dtype=None: x.sum(_dims(dims), keepdim),
    "aten.sum.default": lambda x, dtype=None: x.sum(),
    "aten.amax.default": lambda x, dims=(), keepdim=False: x.amax(_dims(dims) or None, keepdim),
    # shapes and moves
    "aten.view.default": lambda x, shape: x.reshape(shape),
    "aten.reshape.default": lambda x, shape: x.reshape(shape),
    "aten._unsafe_view.default": lambda x, shape: x.reshape(shape),
    "aten.flatten.using_ints": lambda x, s=0, e=-1: x.flatten(s, e),
    "aten.t.default": Tensor.t,
    "aten.transpose.int": lambda x, a, b: x.transpose(a, b),
    "aten.permute.default": lambda x, dims: x.permute(dims),
    "aten.unsqueeze.default": lambda x, d: x.unsqueeze(d),
    "aten.squeeze.dim": lambda x, d: x.squeeze(d),
    "aten.squeeze.dims": lambda x, d: x.squeeze(tuple(d)),
    "aten.expand.default": lambda x, sizes, implicit=False: x.expand(sizes),
    "aten.cat.default": lambda xs, dim=0: af_fn.cat(xs, dim),
    "aten.stack.default": lambda xs, dim=0: af_fn.stack(xs, dim),
    "aten.chunk.default": lambda x, n, dim=0: x.chunk(n, dim),
    "aten.split.Tensor": lambda x, size, dim=0: x.split(size, dim),
    "aten.split_with_sizes.default": lambda x, sizes, dim=0: x.split(list(sizes), dim),
    "aten.slice.Tensor": _slice,
    "aten.select.int": _select,
    "aten.embedding.default": lambda w, idx, padding_idx=-1, *_: F.embedding(idx, w),
    # no-ops for a lazy, copy-free trace
    "aten.contiguous.default": lambda x, memory_format=None: x,
    "aten.clone.default": lambda x, memory_format=None: x,
    "aten.detach.default": Tensor.detach,
    "aten.alias.default": lambda x: x,
    "aten.lift_fresh_copy.default": lambda x: x,
    "aten.to.dtype": lambda x, dtype, *a, **k: _to(x, dtype),
    "_operator.getitem": operator.getitem,
}
_SKIP = {"aten._assert_tensor_metadata.default", "aten._assert_scalar.default"}


class TorchModule(Module):
    """A torch module imported by `from_torch`: runs its exported ATen graph on aneforge ops.

    Parameters keep torch's names (`state_dict()` keys match the torch module's)."""

    def __init__(self, graph, params: dict, buffers: dict, inputs: list, outputs: list,
                 non_persistent=()):
        super().__init__()
        for name, p in params.items():
            self.register_parameter(name, p)
        for name, b in buffers.items():
            self.register_buffer(name, b, persistent=name not in non_persistent)
        object.__setattr__(self, "_graph", graph)
        object.__setattr__(self, "_inputs", inputs)      # placeholder names: (kind, target)
        object.__setattr__(self, "_outputs", outputs)

    def forward(self, *args):
        user = iter(args)
        env: dict[str, Any] = {}
        for name, (kind, target) in self._inputs:
            env[name] = (self._parameters[target] if kind == "PARAMETER" else
                         self._buffers[target] if kind == "BUFFER" else _as_tensor(next(user)))
        for node in self._graph:
            env[node.name] = node.fn(*_load(node.args, env), **_load(node.kwargs, env))
        out = [env[name] for name in self._outputs]
        return out[0] if len(out) == 1 else tuple(out)


class _Step:
    __slots__ = ("name", "fn", "args", "kwargs")

    def __init__(self, name, fn, args, kwargs):
        self.name, self.fn, self.args, self.kwargs = name, fn, args, kwargs


class _Ref:
    """A reference to an earlier node's value in a step's arguments."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


def _load(value, env):
    if isinstance(value, _Ref):
        return env[value.name]
    if isinstance(value, (list, tuple)):
        return type(value)(_load(v, env) for v in value)
    if isinstance(value, dict):
        return {k: _load(v, env) for k, v in value.items()}
    return value


def _as_tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else tensor(x)


def from_torch(module, example_inputs, **export_kwargs) -> TorchModule:
    """A torch `nn.Module` as an aneforge Module, through `torch.export.export(module,
    example_inputs)`. Parameters are copied (rounded to fp16); buffers become state tensors.
    The module's train/eval mode at export is the one the graph records (export dropout and
    batch norm in the mode you want); shapes are those of `example_inputs`, and other shapes
    of the same rank work where the ops allow.

    >>> import torch, numpy as np, aneforge as af
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    >>> model = af.from_torch(net, (torch.randn(3, 4),))
    >>> x = np.random.default_rng(0).random((3, 4)).astype(np.float32)
    >>> y = model(af.tensor(x)).numpy()
    >>> bool(np.allclose(y, net(torch.from_numpy(x)).detach().numpy(), atol=1e-2))
    True
    >>> sorted(model.state_dict()) == sorted(net.state_dict())
    True
    """
    import torch
    from torch.export.graph_signature import InputKind, OutputKind
    ep = torch.export.export(module, tuple(example_inputs), **export_kwargs)
    sig = ep.graph_signature
    buffer_args = {s.arg.name: s.target for s in sig.input_specs if s.kind == InputKind.BUFFER}
    mutated = [s.target for s in sig.output_specs if s.kind == OutputKind.BUFFER_MUTATION] + [
        buffer_args[n.args[0].name] for n in ep.graph.nodes if n.op == "call_function"
        and _in_place(n.target) and n.args and getattr(n.args[0], "name", None) in buffer_args]
    if mutated:
        raise AneforgeError(f"from_torch: the module updates buffers {sorted(set(mutated))} in its "
                            f"forward (batch norm running statistics in training mode); export "
                            f"it in eval mode (module.eval()), or use af.nn layers for training")
    state = ep.state_dict
    params = {s.target: Parameter(state[s.target].detach().float().numpy())
              for s in sig.input_specs if s.kind == InputKind.PARAMETER}
    buffers = {}
    for s in sig.input_specs:
        if s.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            value = state[s.target] if s.target in state else ep.constants[s.target]
            buffers[s.target] = tensor(_host(value))
    kinds = {InputKind.PARAMETER: "PARAMETER", InputKind.BUFFER: "BUFFER",
             InputKind.CONSTANT_TENSOR: "BUFFER", InputKind.USER_INPUT: "USER"}
    inputs = [(s.arg.name, (kinds[s.kind], s.target)) for s in sig.input_specs]
    steps, unsupported = [], []
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        name = _aten_name(node.target)
        if name in _SKIP:
            continue
        fn = ATEN.get(name)
        if fn is None:
            unsupported.append(f"{name} (node {node.name!r}{_where(node)})")
            continue
        steps.append(_Step(node.name, fn, _refs(node.args), _refs(node.kwargs)))
    if unsupported:
        raise AneforgeError("from_torch: no aneforge route for these ATen ops: " +
                            "; ".join(unsupported) + ". Add an entry to "
                            "aneforge.torch_import.ATEN, or rewrite that part of the module.")
    outputs = [s.arg.name for s in sig.output_specs if s.kind == OutputKind.USER_OUTPUT]
    non_persistent = {s.target for s in sig.input_specs
                      if s.kind == InputKind.BUFFER and not s.persistent}
    return TorchModule(steps, params, buffers, inputs, outputs, non_persistent)


def _in_place(target) -> bool:
    parts = str(target).split(".")
    return len(parts) == 3 and parts[1].endswith("_") and not parts[1].startswith("_")


def _aten_name(target) -> str:
    if target is operator.getitem:
        return "_operator.getitem"
    return str(target)


def _where(node) -> str:
    trace = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip()]
    return f", from: {lines[-1]}" if lines else ""


def _refs(value):
    import torch.fx
    if isinstance(value, torch.fx.Node):
        return _Ref(value.name)
    if isinstance(value, (list, tuple)):
        return type(value)(_refs(v) for v in value)
    if isinstance(value, dict):
        return {k: _refs(v) for k, v in value.items()}
    return value


def _host(value) -> np.ndarray:
    v = value.detach().cpu()
    return (v.float() if v.is_floating_point() else v).numpy()
