"""reduce_transposes (exact; a simplified form of coremltools' pass)."""
from __future__ import annotations

from ..ops.registry import elementwise_ops
from .graph import producer, splat
from .registry import register

# Ops that act on each element alone: a permutation of the axes commutes with them.
UNARY = elementwise_ops(1)
BINARY = elementwise_ops(2)


@register("reduce_transposes", exact=True)
def reduce_transposes(graph) -> int:
    """Sink transposes below elementwise ops, so that a transpose meets its inverse (then
    merge_consecutive_transposes removes both) or a matmul (fuse_transpose_matmul absorbs it):
    op(transpose(x)) = transpose(op(x)) for a unary elementwise op, and
    op(transpose(a), transpose(b)) = transpose(op(a, b)) for one perm (one transpose fewer),
    or with a constant of one value. Only transposes nothing else reads are moved. coremltools'
    pass also moves transposes through concat, pad, reductions...; not done here.

        before                                       after
        %t = transpose(x=%x, perm=[1, 0])            %r = relu(x=%x)
        %r = relu(x=%t)                              (%r, then the two transposes cancel)
        %y = transpose(x=%r, perm=[1, 0])
    """
    n = 0
    for op in graph.walk(*(UNARY | BINARY)):
        if op.type in UNARY:
            ts = [_moved(graph, op.inputs["x"])]
        else:
            ts = [_moved(graph, op.inputs[k]) for k in ("x", "y")]
            if not _same_perm(ts):
                ts = [t for t in ts if t is not None and _other_is_splat(op, t)]
        if not ts or any(t is None for t in ts):
            continue
        perm = ts[0].attrs["perm"]
        args = {k: (t.inputs["x"] if (t := producer(v, "transpose")) in ts else v)
                for k, v in op.inputs.items()}
        if any(len(v.shape) != len(perm) for v in args.values() if splat(v) is None):
            continue
        inner = graph.add(op.type, args, before=op, **op.attrs)
        moved = graph.add("transpose", {"x": inner}, before=op, perm=perm)
        if moved.type == op.outputs[0].type and graph.replace_op(op, [moved]):
            n += 1
        else:
            graph.sweep([moved])
    return n


def _moved(graph, v):
    t = producer(v, "transpose")
    return t if t is not None and graph.only_use(v) is not None else None


def _same_perm(ts) -> bool:
    return all(t is not None for t in ts) and ts[0].attrs["perm"] == ts[1].attrs["perm"] and \
        ts[0].inputs["x"].shape == ts[1].inputs["x"].shape


def _other_is_splat(op, t) -> bool:
    other = op.inputs["y"] if op.inputs["x"] is t.outputs[0] else op.inputs["x"]
    return splat(other) is not None and all(d == 1 for d in other.shape)
