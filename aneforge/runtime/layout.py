"""The run plan's inline views: an op that writes its result straight into its arena place
(`OpDef.into`: concat, pad) reads its inputs through the slices and reshapes that make them,
computed as numpy views when it runs, instead of a step (and a copy into the arena) for each.

conv2d's im2col is the case that pays: the kh*kw shifted slices of the padded input, each
given an axis and stacked by one concat, are 2 * kh*kw + 1 steps (19 for a 3x3 kernel) and
become one; max-pool's gradient (a slice of an interleaving concat, padded) and conv's
column gradient (a split part reshaped, padded) lose a step per pad. Every absorbed op is an
exact one (`OpDef.exact`: its values are stored as they are) run by its own kernel, the
width-slice crop included, so the written values are the ones the steps would have placed.
"""
from __future__ import annotations

from ..ops import REGISTRY
from ..ops.registry import layout_ops

# single-input exact ops whose result is a view of their input (numpy's basic indexing and
# reshapes): what an `into` op may read through
VIEWS = layout_ops("same_order", "part")


def absorptions(exe, keep: set, made: dict) -> dict:
    """step -> (its reads with every viewed input replaced by the value the views start from,
    the chains of steps from that value in the same nesting (None: read as is)), for each
    step whose op writes into its place and reads at least one input through views. A chain
    holds steps whose results only the next step reads and that no one else keeps."""
    out = {}
    for k, step in enumerate(exe.steps):
        if REGISTRY[step.ctx.op_type].into is None or step.store is not None or \
                len(step.outs) != 1:
            continue
        reads, chains = [], []
        for p in step.reads:
            if isinstance(p, tuple):
                found = [_chain(exe, keep, made, s, k) for s in p]
                reads.append(tuple(s for s, _ in found))
                chains.append(tuple(c for _, c in found))
            else:
                s, c = (None, None) if p is None else _chain(exe, keep, made, p, k)
                reads.append(s)
                chains.append(c)
        if any(each(chains)):
            out[k] = (reads, chains)
    return out


def _chain(exe, keep, made, s, reader) -> tuple:
    """(the value s is a view chain of, the chain's step numbers in order; None if s is read
    as is)."""
    chain = []
    while s not in keep and exe.readers.get(s) == [reader] and s in made:
        j = made[s]
        step = exe.steps[j]
        ins = [p for p in step.reads if p is not None]
        if step.ctx.op_type not in VIEWS or step.store is not None or len(step.outs) != 1 or \
                len(ins) != 1 or isinstance(ins[0], tuple):
            break
        chain.append(j)
        s, reader = ins[0], j
    return s, (chain[::-1] or None)


def each(chains):
    """Every chain in a step's `chains` (one entry per read: None, a chain, or a tuple of
    those for a variadic input)."""
    for c in chains:
        for d in (c if isinstance(c, tuple) else (c,)):
            if d is not None:
                yield d


def steps_of(exe, chains) -> list:
    """`chains` with each step number replaced by its step."""
    def steps(d):
        return None if d is None else [exe.steps[j] for j in d]
    return [tuple(map(steps, c)) if isinstance(c, tuple) else steps(c) for c in chains]


def inline(into, chains, ctx, out, *args, **attrs) -> None:
    """`into(ctx, out, ...)` with each input first taken through its chain of view steps."""
    into(ctx, out, *[_through(c, a) for c, a in zip(chains, args)], **attrs)


def _through(chain, a):
    if chain is None:
        return a
    if isinstance(chain, tuple):                  # a variadic input: one chain per value
        return tuple(_through(c, v) for c, v in zip(chain, a))
    for step in chain:
        a = step.simulate(step.ctx, *[None if p is None else a for p in step.reads],
                          **step.attrs)
    return a
