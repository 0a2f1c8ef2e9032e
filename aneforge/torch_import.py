"""`af.from_torch(module, example_inputs)`: a torch module as an aneforge Module, via torch.export.

torch.export traces the module into a graph of ATen ops; each op runs the aneforge function
whose row in aneforge/_api.py's TABLE lists it (or, where the ATen signature differs, the small
adapter below that the row names); `routes()` is that map, built from the table alone. A graph
with an op no row lists is lowered to torch's Core ATen opset first (docs/torch_coverage.md
lists which core ops have a route, and why the others have none); one that writes state in
place (batch norm's running statistics in training mode) is functionalized, so each buffer
update is an output the module stores, as torch updates the buffer.
Parameters become aneforge Parameters under their torch names (so `state_dict()` keys match
torch's; a tied parameter stays one), buffers become state tensors. The result is an ordinary
`af.nn.Module`: it runs, trains with `af.optim`, replays under `af.compile`, and exports with
`af.export`. An ATen op without a route, and an error while a node runs, name the node and the
user's own source line that produced it (the innermost frame outside torch).

This is the one runtime module that imports torch, and only when `from_torch` is called.
"""
from __future__ import annotations

import functools
import operator
import pathlib
import re
from typing import Any, Callable

import numpy as np

from . import creation, dtypes, functions
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


def _seq(v):
    """An ATen int[] argument as aneforge takes it: a tuple (an omitted default stays a number)."""
    return tuple(v) if isinstance(v, (list, tuple)) else v


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
        return x if x.dtype.is_float else x.to(dtypes.float16)
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
    training (a functionalized graph updates the running ones: _batch_norm_train), else by the
    running ones."""
    return _batch_norm_train(x, w, b, mean, var, training or mean is None, momentum, eps)[0]


def _batch_norm_train(x, w, b, running_mean, running_var, training, momentum, eps):
    """_native_batch_norm_legit_functional: (y, mean, invstd, new running mean, new running var),
    torch's update: running = (1 - momentum) * running + momentum * batch statistic, the
    variance's unbiased (n / (n - 1))."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    axes = (0,) + tuple(range(2, x.ndim))
    if training:
        mean, var = x.mean(axes), x.var(axes, correction=0)
    else:
        mean, var = running_mean, running_var
    invstd = (var + eps).rsqrt()
    y = (x - mean.reshape(shape)) * invstd.reshape(shape)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    if not training or running_mean is None:
        return y, mean, invstd, running_mean, running_var
    n = x.numel() // x.shape[1]
    new_mean = running_mean * (1 - momentum) + mean.detach() * momentum
    new_var = running_var * (1 - momentum) + var.detach() * (momentum * n / max(n - 1, 1))
    return y, mean, invstd, new_mean, new_var


def _batch_norm_eval(x, w, b, mean, var, momentum, eps):
    """_native_batch_norm_legit_no_training: (y, saved mean, saved invstd) with running stats."""
    return _batch_norm(x, w, b, mean, var, False, momentum, eps), mean, var


def _batch_norm_legit(x, w, b, running_mean, running_var, training, momentum, eps):
    """_native_batch_norm_legit.default: (y, mean, invstd). Its in-place running-statistics
    update never reaches here: from_torch functionalizes a graph that mutates state first."""
    return _batch_norm_train(x, w, b, running_mean, running_var, training, momentum, eps)[:3]


def _batch_norm_no_stats(x, w, b, training, momentum, eps):
    """_native_batch_norm_legit.no_stats: batch statistics, no running ones."""
    return _batch_norm_train(x, w, b, None, None, True, momentum, eps)[:3]


# ---- core ATen ops whose signature differs from aneforge's -------------------------------------
def _float(dtype):
    """A torch dtype for aneforge's creation functions: floating ones become float16 (the
    storage of every imported value), others keep their kind; None infers from the values."""
    return None if dtype is None else dtypes.float16 if dtype.is_floating_point else \
        dtypes.as_dtype(dtype)


def _arange(start, end=None, step=1, *, dtype=None, **_):
    return creation.arange(start, end, step, dtype=_float(dtype))


def _full(size, fill_value, *, dtype=None, **_):
    return creation.full(tuple(size), fill_value, dtype=_float(dtype))


def _empty(size, *_, dtype=None, **__):
    """empty.memory_format and empty_strided: zeros (aneforge has no uninitialized memory)."""
    return creation.zeros(*size, dtype=_float(dtype))


def _full_like(x, fill_value, *, dtype=None, **_):
    return creation.full_like(x, fill_value, dtype=_float(dtype))


def _fill(x, value):
    return creation.full_like(x, value)


def _scalar_tensor(s, *, dtype=None, **_):
    return creation.full((), s, dtype=_float(dtype))


def _random(draw):
    def make(*args, dtype=None, generator=None, **_):
        return draw(*args, generator=generator, dtype=_float(dtype))
    return make


_rand = _random(lambda size, **kw: creation.rand(*size, **kw))
_randn = _random(lambda size, **kw: creation.randn(*size, **kw))
_randperm = _random(creation.randperm)


def _to_copy(x, *, dtype=None, **_):
    return x if dtype is None else _to(x, dtype)


def _copy(x, src, non_blocking=False):
    """copy.default: src's values in x's shape and dtype."""
    return src.to(x.dtype).expand(x.shape)


def _amin(x, dims=(), keepdim=False):
    return x.amin(_axes(dims), keepdim)


def _any(x, dims=None, keepdim=False):
    return x.any(_axes(dims), keepdim)


def _prod(x, dim=None, keepdim=False, *, dtype=None):
    return x.prod(dim, keepdim)


def _var(x, dims=None, unbiased=True, keepdim=False, *, correction=None):
    """var.dim (unbiased) and var.correction (correction, default 1)."""
    if correction is None:
        correction = 1 if unbiased is True or unbiased is None else int(unbiased)
    return x.var(_axes(dims), keepdim, correction=correction)


def _var_correction(x, dims=None, *, correction=None, keepdim=False):
    return _var(x, dims, keepdim=keepdim, correction=1 if correction is None else correction)


def _cumsum(x, dim, *, dtype=None):
    return x.cumsum(dim)


def _sort(x, dim=-1, descending=False):
    return x.sort(dim, descending)


def _gather(x, dim, index, sparse_grad=False):
    return x.gather(dim, index)


def _scatter_value(x, dim, index, value):
    return x.scatter(dim, index, value=value)


def _rpow(base, exponent):
    """pow.Scalar: a number raised to a tensor."""
    return exponent.__rpow__(base)


def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    """elu.default (selu's core form): scale * (x if x > 0 else alpha * (exp(input_scale x) - 1))."""
    if input_scale == 1:
        return F.elu(x, alpha) * scale if scale != 1 else F.elu(x, alpha)
    return functions.where(x > 0, x, F.elu(x * input_scale, alpha)) * scale


def _pad(x, pad, value=0.0):
    return F.pad(x, tuple(pad), "constant", value)


def _padder(mode):
    def pad(x, padding):
        return F.pad(x, tuple(padding), mode)
    return pad


_reflection_pad = _padder("reflect")
_replication_pad = _padder("replicate")


def _convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    """convolution.default: the conv of the weight's rank, transposed or not."""
    if transposed:
        if w.ndim != 4:
            raise AneforgeError(f"from_torch: a transposed convolution of rank {w.ndim - 2}: "
                                f"aneforge has conv_transpose2d only")
        return F.conv_transpose2d(x, w, b, tuple(stride), tuple(padding), tuple(output_padding),
                                  groups, tuple(dilation))
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[w.ndim]
    return conv(x, w, b, tuple(stride), tuple(padding), tuple(dilation), groups)


def _pool_stride(kernel, stride):
    return tuple(stride) if stride else tuple(kernel)


def _avg_pool(pool):
    """avg_pool{1,2,3}d: ATen's empty stride means the kernel's (ceil_mode, count_include_pad
    and divisor_override pass through)."""
    def run(x, kernel, stride=(), padding=0, *flags):
        return pool(x, tuple(kernel), _pool_stride(kernel, stride), _seq(padding), *flags)
    return run


_avg_pool1d = _avg_pool(F.avg_pool1d)
_avg_pool2d = _avg_pool(F.avg_pool2d)
_avg_pool3d = _avg_pool(F.avg_pool3d)


def _max_pool2d(x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool2d(x, tuple(kernel), _pool_stride(kernel, stride), _pair(padding),
                        _pair(dilation), ceil_mode)


def _max_pool2d_with_indices(x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    return F.max_pool2d(x, tuple(kernel), _pool_stride(kernel, stride), _pair(padding),
                        _pair(dilation), ceil_mode, return_indices=True)


def _upsample(mode):
    def run(x, output_size, *args):
        scales, corners = args[-1], (args[0] if len(args) == 2 else None)
        return F.interpolate(x, size=None if output_size is None else tuple(output_size),
                             scale_factor=None if output_size is not None else tuple(scales),
                             mode=mode, align_corners=corners)
    return run


_upsample_bilinear = _upsample("bilinear")
_upsample_nearest = _upsample("nearest")


def _native_dropout(x, p, train):
    """native_dropout: (y, keep mask); eval (train False) keeps everything."""
    if not train or p == 0:
        return x, x == x
    keep = creation.rand(*x.shape) >= p
    return functions.where(keep, x / (1 - p), x - x), keep


def _layer_norm_stats(x, shape, w=None, b=None, eps=1e-5):
    """native_layer_norm: (y, mean, rstd), the statistics over the trailing `shape` axes."""
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    mean, var = x.mean(axes, keepdim=True), x.var(axes, keepdim=True, correction=0)
    return F.layer_norm(x, tuple(shape), w, b, eps), mean, (var + eps).rsqrt()


def _group_norm_stats(x, w, b, n, c, hw, group, eps):
    """native_group_norm: (y, mean, rstd), the statistics per (sample, group)."""
    flat = x.reshape(n, group, -1)
    mean, var = flat.mean(-1), flat.var(-1, correction=0)
    return F.group_norm(x, group, w, b, eps), mean, (var + eps).rsqrt()


def _index(x, indices):
    """index.Tensor: advanced indexing with one entry per leading axis (None: the whole axis)."""
    return x[tuple(slice(None) if i is None else i for i in indices)]


def _scattered(x, src, dim, start, end, step):
    """x with positions start:end:step along `dim` taken from src in order (slice_scatter),
    as a gather of src and a select: no in-place write."""
    n = x.shape[dim]
    picked = range(n)[slice(start, None if end is not None and end >= 2 ** 62 else end, step)]
    where_from = np.zeros(n, np.int32)
    where_from[list(picked)] = np.arange(len(picked))
    hit = np.zeros(n, bool)
    hit[list(picked)] = True
    view = [1] * x.ndim
    view[dim] = n
    taken = src.index_select(dim, tensor(where_from))
    return functions.where(tensor(hit.reshape(view)), taken, x)


def _slice_scatter(x, src, dim=0, start=None, end=None, step=1):
    return _scattered(x, src, dim, start, end, step)


def _select_scatter(x, src, dim, index):
    index = index % x.shape[dim]
    return _scattered(x, src.unsqueeze(dim), dim, index, index + 1, 1)


def _sym_size(x, dim):
    return x.shape[dim]


def _sym_numel(x):
    return x.numel()


def _sym_stride(x, dim):
    """A contiguous tensor's stride (aneforge tensors have no other layout)."""
    return int(np.prod(x.shape[dim:][1:], dtype=np.int64))


def _sym_storage_offset(x):
    return 0


def _sym_is_contiguous(x, memory_format=None):
    return True             # aneforge tensors are always contiguous


def _cross_entropy(x, target, weight=None, reduction=1, ignore_index=-100,
                   label_smoothing=0.0):
    """cross_entropy_loss: ATen's reduction is an enum (0 none, 1 mean, 2 sum), which torch's
    legacy flags spell: reduce=False is none, size_average=False sum."""
    return F.cross_entropy(x, target, weight, size_average=reduction != 2,
                           ignore_index=ignore_index, reduce=reduction != 0,
                           label_smoothing=label_smoothing)


class TorchModule(Module):
    """A torch module imported by `from_torch`: runs its exported ATen graph on aneforge ops.

    Parameters keep torch's names (`state_dict()` keys match the torch module's); a parameter
    torch ties under two names (`lm_head.weight = wte.weight`) is one Parameter here too. Each
    train/eval mode runs the graph torch.export recorded in that mode: the first call in a
    mode the module was not exported in exports the torch module again (its graph only: the
    weights stay this module's). A training-mode graph that updates buffers (batch norm's
    running statistics, num_batches_tracked) updates this module's buffers as torch does."""

    def __init__(self, graph: "_Graph", params: dict, buffers: dict, non_persistent=(),
                 source=None):
        super().__init__()
        for name, p in params.items():
            self.register_parameter(name, p)
        for name, b in buffers.items():
            self.register_buffer(name, b, persistent=name not in non_persistent)
        object.__setattr__(self, "_graphs", {graph.training: graph})
        object.__setattr__(self, "_source", source)     # (torch module, inputs, export kwargs)
        self.train(graph.training)

    def forward(self, *args):
        graph = self._graph()
        user = iter(args)
        env: dict[str, Any] = {}
        for name, (kind, target) in graph.inputs:
            env[name] = (self._parameters[target] if kind == "PARAMETER" else
                         self._buffers[target] if kind == "BUFFER" else _as_tensor(next(user)))
        for step in graph.steps:
            env[step.name] = step.run(env)
        for name, target in graph.mutations:            # torch updates buffers without grad
            self._buffers[target] = env[name].detach()
        out = _load(graph.outputs, env)
        return out[0] if len(out) == 1 else tuple(out)

    def _graph(self) -> "_Graph":
        if self.training not in self._graphs:
            module, inputs, kwargs = self._source
            was = module.training
            try:
                ep = _export(module.train(self.training), inputs, kwargs)
            finally:
                module.train(was)
            for name, value in _constants(ep).items():
                if name not in self._buffers and name not in self._parameters:
                    self.register_buffer(name, tensor(value), persistent=False)
            self._graphs[self.training] = _Graph(ep, self.training)
        return self._graphs[self.training]


class _Step:
    """One ATen node: the aneforge function it runs, its arguments, and the user's line that
    produced it (named in any error the function raises)."""
    __slots__ = ("name", "fn", "args", "kwargs", "op", "line")

    def __init__(self, node, fn):
        self.name, self.fn, self.op, self.line = node.name, fn, str(node.target), _where(node)
        self.args, self.kwargs = _refs(node.args), _refs(node.kwargs)

    def run(self, env):
        try:
            return self.fn(*_load(self.args, env), **_load(self.kwargs, env))
        except (AneforgeError, ValueError, TypeError) as e:
            e.add_note(f"from_torch: in {self.op} (node {self.name!r}{self.line})")
            raise


class _Ref:
    """A reference to an earlier node's value in a step's arguments."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class _Graph:
    """An exported program as aneforge steps: the placeholders (name, (kind, target)), the
    steps, the user outputs and the buffer updates (output name, buffer)."""

    def __init__(self, ep, training: bool):
        from torch.export.graph_signature import ConstantArgument, InputKind, OutputKind
        kinds = {InputKind.PARAMETER: "PARAMETER", InputKind.BUFFER: "BUFFER",
                 InputKind.CONSTANT_TENSOR: "BUFFER", InputKind.USER_INPUT: "USER"}
        sig = ep.graph_signature
        self.training = training
        self.inputs = [(s.arg.name, (kinds[s.kind], s.target)) for s in sig.input_specs]
        # a user output is a node's value, or a constant (nanoGPT's `loss = None`)
        self.outputs = [s.arg.value if isinstance(s.arg, ConstantArgument) else _Ref(s.arg.name)
                        for s in sig.output_specs if s.kind == OutputKind.USER_OUTPUT]
        self.mutations = [(s.arg.name, s.target) for s in sig.output_specs
                          if s.kind == OutputKind.BUFFER_MUTATION]
        unsupported = _unrouted(ep)
        if unsupported:
            raise AneforgeError("from_torch: no aneforge route for these ATen ops: " +
                                "; ".join(f"{n.target} (node {n.name!r}{_where(n)})"
                                          for n in unsupported) +
                                ". List the op in the ATen column of its function's row in "
                                "aneforge/_api.py's TABLE (or in ATEN_ONLY), or rewrite that "
                                "part of the module.")
        self.steps = [_Step(n, _route_of(n)) for n in _calls(ep)
                      if _route_of(n) is not None]


def _route_of(node):
    # getitem picks an element of a tuple-returning op's result: graph plumbing, no ATen op
    return operator.getitem if node.target is operator.getitem else \
        routes().get(str(node.target), _UNROUTED)


def _calls(ep) -> list:
    """The graph's operator calls (torch.fx's `call_function` nodes: not inputs, attributes
    or the output)."""
    return [n for n in ep.graph.nodes if n.op == "call_function"]


def _unrouted(ep) -> list:
    return [n for n in _calls(ep) if _route_of(n) is _UNROUTED]


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


def from_torch(module, example_inputs, *, core_aten: bool = False, **export_kwargs) -> TorchModule:
    """A torch `nn.Module` as an aneforge Module, through `torch.export.export(module,
    example_inputs)`. Parameters are copied (rounded to fp16), tied ones stay one Parameter;
    buffers become state tensors. The module's train/eval mode at export is the graph's; the
    imported module's `.train()` / `.eval()` switch to the graph of that mode (batch norm in
    training mode updates its running statistics, dropout draws masks). Shapes are those of
    `example_inputs`; other shapes of the same rank work where the ops allow.

    A graph with an op no route covers is lowered to torch's Core ATen opset
    (`ep.run_decompositions()`), which `core_aten=True` asks for up front; docs/torch_coverage.md
    lists which Core ATen ops have a route.

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
    from torch.export.graph_signature import InputKind
    export_kwargs["core_aten"] = core_aten
    ep = _export(module, example_inputs, export_kwargs)
    sig = ep.graph_signature
    hosts = _constants(ep)
    report_range("from_torch: the module's weights", {k: range_losses(v) for k, v in hosts.items()})
    params, by_identity = {}, {}
    for s in sig.input_specs:
        if s.kind == InputKind.PARAMETER:          # tied: torch hands the same tensor twice
            source = ep.state_dict[s.target]
            params[s.target] = by_identity.setdefault(id(source), Parameter(hosts[s.target]))
    buffers = {s.target: tensor(hosts[s.target]) for s in sig.input_specs
               if s.kind in (InputKind.BUFFER, InputKind.CONSTANT_TENSOR)}
    non_persistent = {s.target for s in sig.input_specs if s.kind == InputKind.CONSTANT_TENSOR
                      or s.kind == InputKind.BUFFER and not s.persistent}
    return TorchModule(_Graph(ep, module.training), params, buffers, non_persistent,
                       (module, tuple(example_inputs), export_kwargs))


def _export(module, example_inputs, kwargs):
    """torch.export's program, functionalized where it writes state in place (so a buffer
    update is an output), lowered to Core ATen where an op has no route or when asked."""
    import torch
    kwargs = dict(kwargs)
    core = kwargs.pop("core_aten", False)
    ep = torch.export.export(module, tuple(example_inputs), **kwargs)
    if core or _unrouted(ep):
        return ep.run_decompositions()
    if any(_writes(n.target) for n in _calls(ep)):
        return ep.run_decompositions({})
    return ep


def _writes(target) -> bool:
    """Whether an ATen op writes one of its arguments (its schema marks it `(a!)`)."""
    schema = getattr(target, "_schema", None)
    return bool(schema) and any(a.alias_info is not None and a.alias_info.is_write
                                for a in schema.arguments)


def _constants(ep) -> dict:
    """The host arrays of the program's parameters, buffers and lifted constants."""
    from torch.export.graph_signature import InputKind
    return {s.target: _host(ep.state_dict[s.target] if s.target in ep.state_dict
                            else ep.constants[s.target])
            for s in ep.graph_signature.input_specs if s.kind in
            (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)}


def _where(node) -> str:
    """The user's line that produced a node: the innermost frame of its stack trace outside
    torch's own source (a layer's forward inside torch.nn is not the user's line)."""
    import torch
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)',
                        node.meta.get("stack_trace") or "")
    inside = str(pathlib.Path(torch.__file__).parent)
    own = [f for f in frames if not f[0].startswith(inside)] or frames
    if not own:
        return ""
    file, line, fn, code = own[-1]
    return f", from {file}:{line} in {fn}: {code.strip()}"


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
