"""Two questions every DAG of ops asks, answered once: a fresh name, and a topological order.

Used on the IR (passes, the MIL readers, the Core ML boundary) and on the trace's Nodes
(the compiler's cut, autograd's walk), which is why they take plain callables.
"""
from __future__ import annotations

from typing import Callable, Iterable


def fresh_name(base: str, taken: set, start: int | None = None) -> str:
    """A name not in `taken`, added to it: `base` itself if free, else the first free of
    base_1, base_2, ...; with `start`, the first free of base_{start}, base_{start+1}, ...
    (a start near len(taken) saves a long scan when many names share a base)."""
    i = start
    name = base if i is None else f"{base}_{i}"
    while name in taken:
        i = 1 if i is None else i + 1
        name = f"{base}_{i}"
    taken.add(name)
    return name


def topological(roots: Iterable, sources: Callable) -> list:
    """Every node reachable from `roots` through `sources(node)`, each after all of its
    sources: depth first, sources visited in the order `sources` gives them (iterative, so
    deep graphs do not hit the recursion limit)."""
    order, seen = [], set()
    stack = [(root, False) for root in reversed(list(roots))]   # the first root comes first
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))
            stack.extend([(s, False) for s in reversed(sources(node)) if id(s) not in seen])
    return order
