"""Module: the base class of layers, with torch's registration, traversal and state_dict."""
from __future__ import annotations

from collections import OrderedDict, namedtuple
from typing import Iterator

import numpy as np

from .. import dtypes
from ..autograd import no_grad
from ..context import CTX
from ..core.scalar_consts import range_losses, report_range
from ..devices import use
from ..errors import AneforgeError
from ..tensor import Tensor
from ..tensor.casts import TYPE_DTYPES, placement
from .parameter import Parameter, assign as set_value, host_array

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _wraps(array: np.ndarray, into: np.dtype) -> bool:
    """Whether integer `array` holds values integer dtype `into` would wrap."""
    if array.dtype.kind not in "iu" or np.dtype(into).kind not in "iu" or not array.size:
        return False
    info = np.iinfo(into)
    return int(array.min()) < info.min or int(array.max()) > info.max


class Module:
    """Base class for layers: assign Parameters and Modules as attributes and they are registered.

    >>> import aneforge as af, aneforge.nn as nn
    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = nn.Linear(4, 2)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    >>> [name for name, _ in Net().named_parameters()]
    ['fc.weight', 'fc.bias']
    """

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "training", True)
        CTX.modules.add(self)          # parameter names for automatic scaling's warnings

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AneforgeError(f"call super().__init__() in {type(self).__name__}.__init__ "
                                f"before assigning attributes")
        if name in self._buffers and (value is None or isinstance(value, Tensor)):
            self._buffers[name] = value            # torch: assigning to a buffer updates it
            return
        for table in (self._parameters, self._modules, self._buffers):
            table.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        for table in ("_parameters", "_modules", "_buffers"):
            d = self.__dict__.get(table)
            if d is not None and name in d:
                return d[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if param is None:
            self._parameters.pop(name, None)
            object.__setattr__(self, name, None)
        else:
            self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A tensor the module keeps that is not a parameter (running statistics, masks): in
        state_dict unless persistent=False, and an attribute like a parameter.

        >>> import aneforge as af, aneforge.nn as nn
        >>> m = nn.Module()
        >>> m.register_buffer("mask", af.ones(2))
        >>> m.mask.tolist(), list(m.state_dict())
        ([1.0, 1.0], ['mask'])
        """
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: {name!r} must be a Tensor or None, got "
                            f"{type(tensor).__name__}")
        for table in (self._parameters, self._modules):
            table.pop(name, None)
        self.__dict__.pop(name, None)
        if tensor is not None and not tensor.requires_grad and CTX.thread.capture is None:
            tensor.realize()     # a value, as torch's storage is: computed once, here (left
        self._buffers[name] = tensor   # pending, `tril(ones(T, T))` was recomputed by every
        # step's program, and read from an older tape it broke each step's (trace.Tape): no
        # kept recording, the optimizer's Python update every step)
        (self._non_persistent.discard if persistent else self._non_persistent.add)(name)

    def named_buffers(self, prefix: str = "", recurse: bool = True):
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, b in m._buffers.items():
                if b is not None:
                    yield (f"{mprefix}.{name}" if mprefix else name), b

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def _state(self):
        """(name, tensor) in torch's state_dict order: each module's parameters, then its
        persistent buffers, then its children's. A tied parameter (one Parameter registered
        under two names, as GPT's `lm_head.weight = wte.weight`) is listed under each name, as
        torch's state_dict holds it."""
        for mprefix, m in self.named_modules():
            own = [(n, p) for n, p in m._parameters.items() if p is not None]
            own += [(n, b) for n, b in m._buffers.items()
                    if b is not None and n not in m._non_persistent]
            for name, t in own:
                yield (f"{mprefix}.{name}" if mprefix else name), t

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        capture = CTX.thread.capture
        if capture is not None:          # af.compile: a mode switch means capturing again
            capture.guard(lambda: self.training, ("training", id(self)))
        return self.forward(*args, **kwargs)

    # ---- traversal -------------------------------------------------------------------
    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        yield from self._modules.items()

    def children(self) -> Iterator["Module"]:
        for _, m in self.named_children():
            yield m

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self) -> Iterator["Module"]:
        for _, m in self.named_modules():
            yield m

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        """(name, parameter) pairs; a tied parameter once, under its first name (all its
        names with remove_duplicate=False, as torch)."""
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, p in m._parameters.items():
                if p is not None and (id(p) not in seen or not remove_duplicate):
                    seen.add(id(p))
                    yield (f"{mprefix}.{name}" if mprefix else name), p

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def apply(self, fn) -> "Module":
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- modes and grads -------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            p.grad = None

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    # ---- placement and dtype ---------------------------------------------------------
    def to(self, *args, device=None, dtype=None, non_blocking: bool = False,
           memory_format=None) -> "Module":
        """torch's `module.to(device)`, `.to(dtype)`, `.to(device, dtype)`, `.to(tensor)`: the
        device is checked ("cpu", "mps", "ane" are the one device; "cuda" raises, saying what
        to use); a dtype casts the floating parameters and buffers in place (torch's rule: integer
        buffers keep theirs). Returns the module.

        >>> import aneforge as af, aneforge.nn as nn
        >>> m = nn.Linear(2, 2).to("mps")
        >>> m.to(af.float32).weight.dtype, m.half().bias.dtype
        (aneforge.float32, aneforge.float16)
        """
        _, dtype = placement(args, device, dtype, f"{type(self).__name__}.to()")
        if dtype is not None:
            dtype = dtypes.as_dtype(dtype)
            if not dtype.is_float:
                raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got "
                                f"desired dtype={dtype}")
            self._cast(dtype)
        return self

    def _cast(self, dtype) -> "Module":
        """Each floating parameter and buffer holds its value as `dtype` (the handles stay, so
        optimizers built already keep working on them)."""
        with no_grad():
            for t in list(self.parameters()) + list(self.buffers()):
                if t.dtype.is_float and t.dtype != dtype:
                    t.set_(t.detach().to(dtype))
        return self

    def cpu(self) -> "Module":
        return self

    def cuda(self, device=None) -> "Module":
        """Raises: aneforge has no CUDA device (use "cpu", "mps" or "ane", or drop the call)."""
        use("cuda", f"{type(self).__name__}.cuda()")
        return self

    def half(self) -> "Module":
        return self._cast(dtypes.float16)

    def float(self) -> "Module":
        return self._cast(dtypes.float32)

    def type(self, dst_type) -> "Module":
        """Cast the floating parameters and buffers to `dst_type` (a dtype or a type string)."""
        dst_type = TYPE_DTYPES.get(dst_type, dst_type) if isinstance(dst_type, str) else dst_type
        return self._cast(dtypes.as_dtype(dst_type))

    # ---- state -----------------------------------------------------------------------
    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False):
        """Parameters and persistent buffers by torch's names, as detached tensors
        (`np.asarray`/`torch.as_tensor` work on them; `af.save` writes them in torch's format).

        >>> import aneforge as af, aneforge.nn as nn
        >>> {k: v.shape for k, v in nn.Linear(3, 2).state_dict().items()}
        {'weight': (2, 3), 'bias': (2,)}
        """
        out = OrderedDict() if destination is None else destination
        for name, t in self._state():
            out[prefix + name] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state_dict, strict: bool = True,
                        assign: bool = False) -> IncompatibleKeys:
        """Load values by torch's names from aneforge tensors, numpy arrays or torch tensors
        (a torch module's `state_dict()` loads directly). Every key and shape is checked before
        anything is assigned: an error leaves the module unchanged. With `strict=False`, keys
        missing or unexpected are returned (torch's `(missing_keys, unexpected_keys)`) instead
        of raising; a shape mismatch raises either way, as in torch. (`assign` is accepted for
        torch's signature: values are always copied into the module's existing tensors.)

        >>> import numpy as np, aneforge.nn as nn
        >>> m = nn.Linear(2, 1)
        >>> m.load_state_dict({"weight": np.ones((1, 2))}, strict=False)
        IncompatibleKeys(missing_keys=['bias'], unexpected_keys=[])
        >>> m.weight.tolist()
        [[1.0, 1.0]]
        """
        params = dict(self._state())
        missing = [k for k in params if k not in state_dict]
        unexpected = [k for k in state_dict if k not in params]
        errors = [f"missing keys {missing}, unexpected keys {unexpected} (pass strict=False to "
                  f"load the rest)"] if strict and (missing or unexpected) else []
        arrays, losses = {}, {}
        for name, value in state_dict.items():
            if name in params:
                arrays[name] = array = host_array(value)
                if array.dtype.kind not in "biuf":
                    errors.append(f"{name}: a {type(value).__name__} of dtype {array.dtype} is "
                                  f"not numeric data")
                elif array.shape != params[name].shape:
                    errors.append(f"{name}: copying a param with shape {array.shape}, "
                                  f"the shape in the current model is {params[name].shape}")
                elif _wraps(array, params[name].dtype.np):
                    errors.append(f"{name}: integers in [{array.min()}, {array.max()}] do not "
                                  f"fit the buffer's {params[name].dtype.np} (they would wrap)")
                elif params[name].dtype.is_float and array.dtype.kind == "f":
                    with np.errstate(over="ignore"):      # counted and reported below
                        arrays[name] = np.asarray(array, np.float16)
                    losses[name] = range_losses(array, arrays[name])
        if errors:
            raise AneforgeError(f"load_state_dict for {type(self).__name__}: "
                                f"{'; '.join(errors)}; nothing was loaded")
        report_range(f"load_state_dict for {type(self).__name__}", losses)
        for name, array in arrays.items():
            set_value(params[name], array)
        return IncompatibleKeys(missing, unexpected)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"({name}): {m!r}".replace("\n", "\n  ") for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n  " + "\n  ".join(lines) + "\n)" if lines else ")")


class Sequential(Module):
    """Modules applied in order.

    >>> import aneforge as af, aneforge.nn as nn
    >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> net(af.ones(3, 4)).shape
    (3, 2)
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            items = modules[0].items()
        else:
            items = ((str(i), m) for i, m in enumerate(modules))
        for name, m in items:
            self._modules[name] = m

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        mods = list(self._modules.values())
        return Sequential(*mods[i]) if isinstance(i, slice) else mods[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleList(Module):
    """A list of modules whose parameters are registered."""

    def __init__(self, modules=()):
        super().__init__()
        self.extend(modules)

    def append(self, module: Module) -> "ModuleList":
        self._modules[str(len(self._modules))] = module
        return self

    def extend(self, modules) -> "ModuleList":
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleDict(Module):
    """Modules by name, registered (their parameters are the dict's).

    >>> import aneforge as af, aneforge.nn as nn
    >>> heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})
    >>> heads["b"](af.ones(1, 4)).shape, list(heads)
    ((1, 3), ['a', 'b'])
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self._modules[key] = module

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def update(self, modules) -> None:
        for key, module in (modules.items() if hasattr(modules, "items") else modules):
            self._modules[key] = module
