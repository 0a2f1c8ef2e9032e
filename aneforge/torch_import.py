"""`af.from_torch(module, example_inputs)`: a torch module as an aneforge Module, via torch.export.

torch.export traces the module into a graph of ATen ops; each op runs the aneforge function
whose row in aneforge/_api.py's TABLE lists it (or, where the ATen signature differs, the small
adapter below that the row names); `routes()` is that map, built from the table alone.
Parameters become aneforge Parameters under their torch names (so `state_dict()` keys match
torch's), buffers become state tensors. The result is an ordinary `af.nn.Module`: it runs,
trains with `af.optim`, replays under `af.compile`, and exports with `af.export`. An ATen op
no row lists is named in the error, with the node and the line of the torch source that
produced it.

This is the one runtime module that imports torch, and only when `from_torch` is called.
"""
from __future__ import annotations

import functools
import operator
from typing import Any, Callable

import numpy as np

from . import dtypes, functions
from .core.scalar_consts import range_losses, report_range
from .creation import tensor
from .errors import AneforgeError
from .nn import functional as F
from .nn.module import Module
from .nn.parameter import Parameter
from .tensor import Tensor


# The modules a row's home names (see aneforge/_api.py).
_HOMES = {"Tensor": Tensor, "functions": functions, "F": F}
_UNROUTED = object()        # an ATen op no row lists


@functools.cache
def routes() -> dict[str, Callable | None]:
    """ATen op (the name torch.export prints) -> how aneforge computes it, from aneforge/_api.py's
    TABLE and ATEN_ONLY; None for a runtime check that records nothing. _api is imported at
    the first from_torch, not while aneforge loads: `python -m aneforge._api` runs it as
    __main__ after importing aneforge, and would otherwise find it imported already."""
    from . import _api          # imports nothing of aneforge: no cycle
    return {op: _route(implementation, adapter)
            for op, implementation, adapter in _api.aten_routes()}


def _route(implementation: str, adapter: str) -> Callable | None:
    """A row's implementation (`Tensor.exp`) or, when the row names one, this module's adapter."""
    if adapter == "skip":
        return None
    if adapter:
        return globals()[adapter]
    home, name = implementation.split(".")
    return getattr(_HOMES[home], name)


# ---- adapters: the functions the table names where an ATen signature differs from aneforge's
def _axes(d) -> tuple | None:
    """An ATen `dim` argument as aneforge's: None or [] (every axis) is None."""
    if d is None or isinstance(d, (list, tuple)) and not d:
        return None
    return tuple(d) if isinstance(d, (list, tuple)) else (d,)


def _pair(v) -> tuple:
    return tuple(v) if isinstance(v, (list, tuple)) else (v, v)


def _same(x, *_, **__):
    """A copy or alias (clone, contiguous, alias, lift_fresh_copy): a lazy trace needs none."""
    return x


def _slice(x: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, None if end is not None and end >= 2 ** 62 else end, step)
    return x[tuple(index)]


def _conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    return F.conv2d(x, w, b, _pair(stride), _pair(padding), _pair(dilation), groups)


def _to(x: Tensor, dtype, *_, **__) -> Tensor:
    """A torch dtype cast: floating stays as aneforge computes it (fp16 storage), integers and
    bools cast."""
    if dtype.is_floating_point:
        return x
    return x.to(dtypes.bool_ if str(dtype) == "torch.bool" else dtypes.int32)


def _softmax(x, dim, *_, **__):
    """softmax.int (dtype) and _softmax (half_to_float): aneforge keeps its own compute type."""
    return x.softmax(dim)


def _log_softmax(x, dim, *_, **__):
    return x.log_softmax(dim)


def _mean(x, dims=None, keepdim=False, dtype=None):
    """mean.dim and mean.default (dtype is dropped, as in every reduction here)."""
    return x.mean(_axes(dims), keepdim)


def _sum(x, dims=None, keepdim=False, dtype=None):
    return x.sum(_axes(dims), keepdim)


def _amax(x, dims=(), keepdim=False):
    return x.amax(_axes(dims), keepdim)


def _expand(x, sizes, implicit=False):
    return x.expand(sizes)


def _layer_norm(x, shape, w=None, b=None, eps=1e-5, cudnn=True):
    return F.layer_norm(x, shape, w, b, eps)


def _embedding(w, idx, padding_idx=-1, *_):
    """aten.embedding takes (weight, indices), F.embedding (indices, weight)."""
    return F.embedding(idx, w)


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
    hosts = {s.target: _host(state[s.target] if s.target in state else ep.constants[s.target])
             for s in sig.input_specs if s.kind in
             (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)}
    report_range("from_torch: the module's weights", {k: range_losses(v) for k, v in hosts.items()})
    params = {s.target: Parameter(hosts[s.target])
              for s in sig.input_specs if s.kind == InputKind.PARAMETER}
    buffers = {s.target: tensor(hosts[s.target]) for s in sig.input_specs
               if s.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR)}
    kinds = {InputKind.PARAMETER: "PARAMETER", InputKind.BUFFER: "BUFFER",
             InputKind.CONSTANT_TENSOR: "BUFFER", InputKind.USER_INPUT: "USER"}
    inputs = [(s.arg.name, (kinds[s.kind], s.target)) for s in sig.input_specs]
    steps, unsupported = [], []
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        # getitem picks an element of a tuple-returning op's result: graph plumbing, no ATen op
        route = operator.getitem if node.target is operator.getitem else \
            routes().get(str(node.target), _UNROUTED)
        if route is _UNROUTED:
            unsupported.append(f"{node.target} (node {node.name!r}{_where(node)})")
        elif route is not None:
            steps.append(_Step(node.name, route, _refs(node.args), _refs(node.kwargs)))
    if unsupported:
        raise AneforgeError("from_torch: no aneforge route for these ATen ops: " +
                            "; ".join(unsupported) + ". List the op in the ATen column of its "
                            "function's row in aneforge/_api.py's TABLE (or in ATEN_ONLY), or "
                            "rewrite that part of the module.")
    outputs = [s.arg.name for s in sig.output_specs if s.kind == OutputKind.USER_OUTPUT]
    non_persistent = {s.target for s in sig.input_specs
                      if s.kind == InputKind.BUFFER and not s.persistent}
    return TorchModule(steps, params, buffers, inputs, outputs, non_persistent)


def _in_place(target) -> bool:
    parts = str(target).split(".")
    return len(parts) == 3 and parts[1].endswith("_") and not parts[1].startswith("_")


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
