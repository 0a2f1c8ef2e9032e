"""Empty tensors (a size-0 axis) as host values: torch allows them, the ANE does not.

Every axis of an ANE tensor is 1..65536, so no program ever holds an empty tensor. torch code
makes them all the time (`x[5:10]` past the end, `cat` with an empty piece, a reduction over a
size-0 axis, `torch.zeros(0, 3)`), so aneforge keeps them on the host: an empty tensor is a
realized leaf, and an op with an empty operand or an empty result is evaluated at once, here,
by the op's own numpy kernel (`OpDef.simulate`) instead of being recorded:

    empty result          -> a new empty leaf of the inferred shape (no values to compute)
    empty operand, values -> the kernel on the operands' arrays: a sum over a size-0 axis is 0,
                             a mean NaN (torch's), a matmul with K = 0 zeros, a pad the pad value

Nothing is compiled. A result that needs a gradient keeps its op and sources (a realized node,
as one awaiting backward): the op's gradient rule runs on the empty values too, so the inputs
get torch's gradients (empty, or zeros where an empty value fed a non-empty result). An op
mixing an empty operand with a value still being computed, whose result is not empty, is
refused with what to do.

Data with an axis past 65536 (a tokenized corpus, a dataset's index table: `torch.tensor(
encode(text))` over a million characters) is a host value the same way: every op reading it, or
making a value that large from host values, runs here, by the same kernel the simulator runs,
so `data[i:i + block]`, `X[ix]`, `len`, `max`, a whole-split evaluation under no_grad give the
simulator's bits. What comes out small is an ordinary tensor. Such a value cannot take part in
a gradient (its backward would need a program that holds it): that is refused with what to do.
"""
from __future__ import annotations

import contextlib
import warnings
import weakref

import numpy as np

from ..context import CTX
from ..errors import LimitError
from ..hardware import limits
from ..hardware.numerics import get_numerics
from ..ops import REGISTRY
from ..ops.registry import is_literal
from .trace import Node, is_const, type_of


class _Context:
    """What a kernel may read besides its arrays (the simulator's OpContext, for one host op)."""
    __slots__ = ("numerics", "in_dtypes", "out_dtypes", "op_type", "op_name")

    def __init__(self, op: str, in_types: list, out_types: list):
        self.numerics, self.op_type, self.op_name = get_numerics(), op, f"{op} (empty)"
        self.in_dtypes = tuple(t.dtype for t in in_types)
        self.out_dtypes = tuple(t.dtype for t in out_types)


# realized nodes holding an oversized value (an axis past 65536), by id: every op reading one
# runs on the host. Empty in most programs, so recording asks only when it is not (`MAYBE` is
# the dict itself). A script with a tokenized corpus asks for every recorded operand: `id(node)
# in MAYBE` is one hash lookup (a WeakSet's `in` makes a weak reference per question). Each
# entry's weak reference drops it as its node goes, so a live entry's id is never reused.
MAYBE: dict = {}


def hold(node: Node) -> Node:
    """`node` (realized), noted as oversized when one of its values is."""
    if any(limits.oversized(t.shape) for t in node.types):
        key = id(node)
        MAYBE[key] = weakref.ref(node, lambda _, key=key: MAYBE.pop(key, None))
    return node


def is_oversized(node: Node) -> bool:
    return id(node) in MAYBE


def reads_oversized(refs) -> bool:
    """Whether any of the (node, index) references (or lists of them) is an oversized value."""
    for v in refs:
        if type(v) is tuple:
            if id(v[0]) in MAYBE:
                return True
        elif v:
            for node, _ in v:
                if id(node) in MAYBE:
                    return True
    return False


def has_empty(refs) -> bool:
    """Whether any of the (node, index) references (or lists of them) is an empty tensor."""
    for v in refs:
        for node, i in ([v] if type(v) is tuple else v or ()):
            if 0 in node.types[i].shape:
                return True
    return False


def evaluate(op: str, srcs: dict, attrs: dict, requires_grad: bool = False) -> Node | None:
    """`op` on `srcs` as a host value when an operand or the result is empty: a realized node
    holding every result; None when nothing is empty (a real limit was broken: the caller
    re-raises its error). With `requires_grad` the node keeps its op and sources, as a realized
    node awaiting backward does: gradients flow through it (torch's are zeros or empty)."""
    opdef = REGISTRY[op]
    with limits.host_allowed():
        full, types = opdef.apply(srcs, attrs, type_of, is_const)
    refs = [v for v in srcs.values() if v is not None]
    reads_big = reads_oversized(refs)
    big = reads_big or any(limits.oversized(t.shape) for t in types)
    if not big and not has_empty(refs) and not any(0 in t.shape for t in types):
        return None
    if big and not reads_big and not has_empty(refs) and not _all_host(refs):
        return None                # a computed value grows past 65536: the caller's limit error
    if big and requires_grad:
        raise LimitError(f"{op}: a value with an axis past 65536 ({_shapes(refs, types)}) is "
                         f"host data no ANE program holds, and this op needs a gradient; split "
                         f"the work along that axis (batches), or compute it under no_grad")
    if all(0 in t.shape for t in types):
        arrays = [np.empty(t.shape, t.dtype.np) for t in types]
    else:
        arrays = compute(opdef, srcs, full, types)
    if requires_grad and any(t.dtype.is_float for t in types):
        return Node(op, {k: v for k, v in srcs.items() if v is not None}, full, types, arrays,
                    True)
    return hold(Node(None, {}, {}, types, arrays, False, None, ()))


# Ops that move values without arithmetic. On integer and bool host data each gives the same
# array on the host as on the engine (for floats a slice can pass the width crop's gain, and
# stays recorded), so there it runs at once: a dataset built with cat / view / t() (pytorch
# examples' word_language_model: `torch.cat` of each line's ids, then `batchify`) is data in
# hand that later slices read on the host, not a recording every step's program repeats, with
# the slice's bounds baked in: a new program per batch.
MOVES = frozenset({"concat", "reshape", "transpose", "expand_dims", "squeeze", "slice_by_index",
                   "identity", "tile", "split"})


def on_host_now() -> bool:
    """Whether data in hand may be worked on the host now: not inside af.compile's capture or
    af.export's trace (their programs read the arguments), nor a kept recording (whose inputs
    vary)."""
    thread = CTX.thread
    tape = thread.tape
    return thread.capture is None and not thread.tracing and (tape is None or tape.log is None)


def moved(op: str, srcs: dict, attrs: dict) -> Node | None:
    """`op` of MOVES on integer or bool host data, run on the host: a realized node; None when
    an operand is a float, a literal or still being computed (then it records)."""
    refs = [r for v in srcs.values() if v is not None for r in ([v] if type(v) is tuple else v)]
    if not refs or any(n.data is None or n.types[i].dtype.is_float for n, i in refs):
        return None
    opdef = REGISTRY[op]
    with limits.host_allowed():
        full, types = opdef.apply(srcs, attrs, type_of, is_const)
    return hold(Node(None, {}, {}, types, compute(opdef, srcs, full, types), False, None, ()))


def _all_host(refs) -> bool:
    """Whether every operand is host data (realized, or a literal)."""
    return all(node.data is not None or is_literal(node.op)
               for v in refs for node, _ in ([v] if type(v) is tuple else v))


def _shapes(refs, types) -> str:
    shapes = [node.types[i].shape for v in refs for node, i in ([v] if type(v) is tuple else v)]
    return f"operands {shapes}, result {[t.shape for t in types]}"


def compute(opdef, srcs: dict, attrs: dict, types: list, known: dict | None = None) -> list:
    """Run the op's numpy kernel on its operands' arrays (every operand must hold one, or have
    its arrays in `known`, by node: values computed here but not kept, core/hostints.py)."""
    args, in_types = [], []
    for k in opdef.inputs:
        v = srcs.get(k)
        if v is None:
            args.append(None)
            continue
        group = [v] if type(v) is tuple else v
        if known:
            group = [(_Held(known[node]) if node in known else node, i) for node, i in group]
        if any(node.data is None and not is_literal(node.op) for node, _ in group):
            raise LimitError(f"{opdef.name}: an empty operand, or one with an axis past 65536, "
                             f"meets a value still being computed; the ANE holds neither, so "
                             f"aneforge evaluates such ops on the host. Drop an empty operand "
                             f"(torch gives the same result without it), index a batch out of "
                             f"the large one first, or realize the other operand (.numpy())")
        arrays = [np.asarray(node.attrs["val"] if node.data is None else node.data[i])
                  for node, i in group]                    # a literal: its value
        in_types += [node.types[i] for node, i in group]
        args.append(tuple(arrays) if type(v) is not tuple else arrays[0])
    hushed = _hushed() if any(0 in t.shape for t in in_types + list(types)) \
        else contextlib.nullcontext()       # (catching warnings costs more than most ops here)
    try:
        with hushed, np.errstate(all="ignore"):
            out = opdef.simulate(_Context(opdef.name, in_types, types), *args, **attrs)
    except ValueError as e:                  # a max/min over a size-0 axis: no identity
        raise IndexError(f"{opdef.name}: Expected reduction dim to have non-zero size "
                         f"(torch's rule: max, min, argmax over an empty axis have no value)") from e
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [np.asarray(a).astype(t.dtype.np).reshape(t.shape) for a, t in zip(outs, types)]



class _Held:
    """A pending node's arrays computed on the host, as `compute` reads an operand."""
    __slots__ = ("data", "types", "op")

    def __init__(self, data_and_types):
        self.data, self.types = data_and_types
        self.op = None


@contextlib.contextmanager
def _hushed():
    """numpy's RuntimeWarnings off (its "mean of empty slice": torch's NaN needs no warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield
