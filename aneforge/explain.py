"""`af.explain(fn, *args)`: what ran where when `fn(*args)` ran — its ANE segments (one per
program, several where a program is over one ANE program's budget) and host segments, in
order, with their sizes and why each one ends (docs/plans.md)."""
from __future__ import annotations

from typing import NamedTuple

from .context import CTX
from .core import realization
from .core.plan import HostStep, Plan
from .ir import Program
from .replay import _flatten
from .runtime import get_backend
from .tensor import Tensor


class Segment(NamedTuple):
    """One segment of a call: where it ran (the ANE backend's name, or host), its size (ops and
    baked weight bytes; a host segment: the shapes it read and made) and why it ends."""
    kind: str               # "ane" or "host"
    name: str               # the backend, or the host op
    ops: int
    weight_bytes: int
    shapes: str
    cut: str


class Explanation:
    """The segments of one call, printable as a table (`str`), iterable as `Segment`s."""

    def __init__(self, segments: list[Segment]):
        self.segments = segments

    def __iter__(self):
        return iter(self.segments)

    def __len__(self) -> int:
        return len(self.segments)

    def __str__(self) -> str:
        head = f"{'#':>2}  {'runs on':<18} {'ops':>5} {'weights':>9}  {'shapes':<24} ends because"
        rows = [f"{k:>2}  {s.kind + ' ' + s.name:<18} {s.ops:>5} {s.weight_bytes:>8}B  "
                f"{s.shapes:<24} {s.cut}" for k, s in enumerate(self.segments)]
        return "\n".join([head] + rows)

    __repr__ = __str__


def explain(fn, *args, **kwargs) -> Explanation:
    """Run `fn(*args, **kwargs)` (as usual: values computed, programs cached) and list its
    segments in order: each ANE program (or, over the budget, each of its segments, with the
    budget that cut it), each host segment (an op with a data-dependent result shape, with the
    reason it left the ANE), their sizes, and why each segment ends.

    >>> import aneforge as af, warnings
    >>> warnings.simplefilter("ignore", af.HostSegmentNotice)
    >>> def positive_sum(x):
    ...     return (x[x > 0] * 2).sum()
    >>> print(af.explain(positive_sum, af.tensor([1.0, -2.0, 3.0])))   # doctest: +NORMALIZE_WHITESPACE
     #  runs on              ops   weights  shapes                   ends because
     0  ane sim                2        2B  in (3,) out (3,)         x[mask] reads its values on the host
     1  host x[mask]           0        0B  (3,) -> (2,)             its result's shape depends on the values of the mask
     2  ane sim               10       16B  in (2,),(3,) out (1,)    the call returns
    """
    log: list = []
    CTX.explainers.append(log)
    try:
        flat, _ = _flatten(fn(*args, **kwargs))
        realization.realize([t.ref for t in flat if isinstance(t, Tensor)])
    finally:
        CTX.explainers.remove(log)
    backend = get_backend().name
    out: list[Segment] = []
    for k, item in enumerate(log):
        if isinstance(item, HostStep):
            shapes = ",".join(map(str, item.in_shapes)) + " -> " + ",".join(map(str, item.out_shapes))
            out.append(Segment("host", item.name, 0, 0, shapes, item.reason))
            continue
        after = log[k + 1] if k + 1 < len(log) else None
        end = (f"{after.name} reads its values on the host" if isinstance(after, HostStep)
               else "the next program" if after is not None else "the call returns")
        exe = item.executable
        if isinstance(exe, Plan):
            for j, seg in enumerate(exe.segments):
                out.append(Segment("ane", backend, seg.ops, seg.weight_bytes, _io(seg.program),
                                   end if j == len(exe.segments) - 1 else seg.cut))
        else:
            ops = item.program.operations
            out.append(Segment("ane", backend, sum(o.type != "const" for o in ops),
                               sum(_bytes(o) for o in ops if o.type == "const"),
                               _io(item.program), end))
    return Explanation(out)


def _bytes(op) -> int:
    v = op.outputs[0]
    size = 1
    for n in v.shape:
        size *= n
    return size * v.dtype.np.itemsize


def _io(program: Program) -> str:
    f = program.main
    return (f"in {','.join(str(v.shape) for v in f.inputs)} "
            f"out {','.join(str(v.shape) for v in f.outputs)}")
