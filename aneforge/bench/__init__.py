"""Benchmarks: `python -m aneforge.bench [section ...]`.

Each section measures aneforge and its reference (numpy, and torch when installed) in the same
run and prints ratios, so the numbers compare like with like on whatever machine runs them.
Later work adds sections to `SECTIONS`.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

class settings:
    """Problem sizes; `--quick` shrinks them (the test suite runs every section that way)."""
    matmul_size = 512
    steps = 200

    @classmethod
    def quick(cls) -> None:
        cls.matmul_size, cls.steps = 64, 12


SECTIONS: dict[str, Callable[[], list[tuple[str, float, str]]]] = {}


def section(name: str):
    def register(fn):
        SECTIONS[name] = fn
        return fn
    return register


def timeit(fn: Callable[[], object], repeat: int = 7, number: int = 1) -> float:
    """Median seconds per call over `repeat` rounds of `number` calls (after one warm-up)."""
    fn()
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - start) / number)
    return statistics.median(rounds)


def report(rows: list[tuple[str, float, str]]) -> str:
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"  {name:<{width}}  {value:>12.4g}  {unit}" for name, value, unit in rows)
