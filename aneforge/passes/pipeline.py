"""The ordered pipeline, the setting that chooses it, and the report of one run.

Every pass has one place in `ORDER`; a pipeline is a subsequence of it (or, if a user lists
passes explicitly, their order). The pipeline repeats until a whole round rewrites nothing, so
a program that went through it is a fixed point: running it again changes nothing.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field, replace

from ..context import CTX
from ..errors import AneforgeError
from .graph import Graph
from .registry import PASSES, get_pass

# (pass, in the default pipeline, why it sits here)
ORDER: tuple[tuple[str, bool, str], ...] = (
    ("sanitize_input_output_names", True,
     "first: names are not structure, and later passes mint fresh names next to these"),
    ("dedup_op_and_var_names", True,
     "first: fresh names and output renaming rely on every name being unique"),
    ("decompose_masked_attention", True,
     "a legalization (the engine ignores sdpa masks): before cleanup, so its parts are cleaned "
     "and no fusion sees the fused op"),
    ("const_elimination", True,
     "early: folding turns computed constants into consts, which every matcher below tests for"),
    ("const_deduplication", True,
     "after folding (which makes new consts), before CSE: equal values become one var"),
    ("noop_elimination", True,
     "before matching: identities, same-shape reshapes, x+0, x*1 would break up patterns"),
    ("cast_optimization", True, "with the no-ops: a cast to the same dtype is one"),
    ("replace_stack_reshape", True,
     "before merge_consecutive_reshapes, which would turn its expand_dims into reshapes"),
    ("detect_concat_interleave", True, "with replace_stack_reshape, before the merges"),
    ("concat_to_pixel_shuffle", True,
     "after detect_concat_interleave, which makes interleaved concats; before CSE, which "
     "could merge an inner concat into two readers"),
    ("concat_zeros_to_pad", True,
     "before the merges and CSE: a zero-concat (conv padding) becomes one pad to merge"),
    ("use_reflection_padding", True, "with concat_zeros_to_pad"),
    ("merge_consecutive_paddings", True, "after the pads above exist"),
    ("merge_consecutive_reshapes", True, "chains of moves collapse before patterns are matched"),
    ("reduce_transposes", True,
     "before merge_consecutive_transposes: sunk transposes meet their inverses there"),
    ("merge_consecutive_transposes", True, "as reshapes; an identity result is removed at once"),
    ("merge_consecutive_relus", True, "as reshapes"),
    ("select_optimization", True, "a select on a folded condition is a move; after folding"),
    ("fold_negation", True, "canonicalization: y + (0 - x) is y - x; before CSE"),
    ("remove_redundant_broadcasts", True,
     "after the merges (an expand is a reshape + tile), before CSE: an operand read before "
     "its expansion lets equal ops meet"),
    ("remove_redundant_ops", True,
     "CSE after canonicalization (deduplicated consts, no no-ops), so equal ops look equal"),
    ("fuse_reduce_mean", True,
     "before divide_to_multiply: it matches the exact form reduce_sum / N"),
    ("divide_to_multiply", True,
     "after fuse_reduce_mean; before fusions, which then only look for mul by a constant"),
    ("fold_scalar_multiplies", True,
     "after divide_to_multiply, whose multiplies it folds (a wide sum's x2 and a mean's 1/n)"),
    ("fuse_gelu_exact", True, "fusions run on the cleaned graph, each on single-use chains"),
    ("fuse_gelu_tanh_approximation", True, "as fuse_gelu_exact"),
    ("fuse_leaky_relu", True, "as fuse_gelu_exact"),
    ("fuse_prelu", True, "as fuse_gelu_exact"),
    ("fuse_layernorm_or_instancenorm", True, "as fuse_gelu_exact"),
    ("fuse_conv_scale", True,
     "after divide_to_multiply (a real_div by a constant is a mul by then) and before "
     "fuse_conv_bias, so conv -> mul -> add folds both; before fuse_elementwise_to_batchnorm, "
     "which would otherwise take the mul + add that a conv's weight and bias can absorb"),
    ("fuse_conv_bias", True, "after fuse_conv_scale; before fuse_elementwise_to_batchnorm"),
    ("fuse_elementwise_to_batchnorm", True,
     "after the norm fusions, which fold their own constant gamma / beta mul and add"),
    ("fuse_conv_batchnorm", True,
     "after fuse_elementwise_to_batchnorm: a batch_norm after a conv, recorded or made from a "
     "mul + add that the conv fusions above did not take, folds into the conv"),
    ("fuse_transpose_matmul", True, "before the linear fusions, which need a plain matmul"),
    ("fuse_matmul_weight_bias", True, "makes the linear that fuse_linear_bias extends"),
    ("fuse_linear_bias", True, "after fuse_matmul_weight_bias"),
    ("split_long_matmul", True,
     "a legalization after the fusions: contractions beyond the engine's cap become tiles"),
    ("reduce_sum_to_matmul", False,
     "opt-in (changes the simulated fp16 running sum, which docs/numerics.md pins): after "
     "fuse_reduce_mean so that means stay means"),
    ("rewrite_reduce_times_zero", False,
     "opt-in (the default keeps the compile wall visible so sources get fixed): after folding, "
     "which turns a computed zero into a const"),
    ("rank0_expand_dims_swap", True,
     "late: it only re-ranks scalar arithmetic at the boundary, after everything folded it"),
    ("dead_code_elimination", True, "after every pass that leaves orphans"),
    ("topological_reorder", True, "last: it only moves ops, so it sees the final op list"),
)
MAX_ROUNDS = 8


def _names(presence) -> tuple[str, ...]:
    return tuple(name for name, default, _ in ORDER if name in PASSES and presence(name, default))


DEFAULT = _names(lambda n, d: d)
FULL = _names(lambda n, d: True)
PRESETS = {
    "default": DEFAULT,
    "exact": _names(lambda n, d: d and PASSES[n].exact),
    "ane": FULL,
    "none": (),
}


@dataclass(frozen=True)
class Pipeline:
    """Which passes run, in order, and their options (hashable: it is part of the cache key)."""
    passes: tuple[str, ...] = DEFAULT
    contraction_cap: int | None = None   # split_long_matmul; None: the target's (16384 on h13-h15)

    @staticmethod
    def build(passes=None, add=(), remove=(), **options) -> "Pipeline":
        if passes is None or isinstance(passes, str):
            name = passes or "default"
            if name not in PRESETS:
                raise AneforgeError(f"no pass preset {name!r}; choose one of {sorted(PRESETS)} "
                                    f"or give a list of pass names")
            names = PRESETS[name]
        else:
            names = tuple(passes)
        wanted = set(names) | set(add)
        names = tuple(n for n in (FULL if add else names) if n in wanted and n not in set(remove))
        for n in names:
            get_pass(n)
        return replace(Pipeline(), passes=names, **options)


DEFAULT_PIPELINE = Pipeline()


def get_pipeline() -> Pipeline:
    return DEFAULT_PIPELINE if CTX.pipeline is None else CTX.pipeline


def set_pipeline(passes=None, *, add=(), remove=(), **options) -> Pipeline:
    """Choose the passes new programs compile with; returns the previous setting.

    `passes`: a preset name ("default", "exact", "ane", "none") or a list of pass names (run
    in that order); `add` / `remove` adjust it (added passes take their place in ORDER);
    options: `contraction_cap`. The setting is part of the compile-cache key.

    >>> import aneforge.passes as P
    >>> old = P.set_pipeline("exact", remove=["topological_reorder"])
    >>> "divide_to_multiply" in P.get_pipeline().passes
    False
    >>> _ = P.set_pipeline(old)
    """
    prev = get_pipeline()
    CTX.pipeline = passes if isinstance(passes, Pipeline) else Pipeline.build(passes, add, remove,
                                                                            **options)
    return prev


@contextlib.contextmanager
def pipeline(passes=None, *, add=(), remove=(), **options):
    """Compile with another pipeline inside a `with` block.

    >>> import aneforge as af, aneforge.passes as P
    >>> with P.pipeline("none"):
    ...     (af.ones(2) * 1.0).numpy().tolist()
    [1.0, 1.0]
    >>> P.last_report().ops_after          # const, mul: nothing removed
    2
    """
    prev = set_pipeline(passes, add=add, remove=remove, **options)
    try:
        yield get_pipeline()
    finally:
        set_pipeline(prev)


def debug(on: bool = True) -> None:
    """Print each compiled program's pass report (on every compile-cache miss)."""
    CTX.pass_debug = on


def debugging() -> bool:
    return CTX.pass_debug


# ---- the report ---------------------------------------------------------------------------
@dataclass
class PassStat:
    name: str
    kind: str
    runs: int = 0
    rewrites: int = 0
    removed: int = 0          # ops it removed (net; negative if it added)
    seconds: float = 0.0


@dataclass
class Report:
    """Per pass: rewrites and ops removed; overall: op counts before and after (consts counted)."""
    ops_before: int
    ops_after: int = 0
    counts_before: dict = field(default_factory=dict)
    counts_after: dict = field(default_factory=dict)
    stats: list[PassStat] = field(default_factory=list)
    rounds: int = 0
    seconds: float = 0.0

    def __str__(self) -> str:
        width = max([len(s.name) for s in self.stats] + [4])
        lines = [f"{'pass':<{width}}  kind     rewrites  ops removed"]
        lines += [f"{s.name:<{width}}  {s.kind:<7}  {s.rewrites:>8}  {s.removed:>11}"
                  for s in self.stats if s.rewrites]
        nonconst = f"{_nonconst(self.counts_before)} -> {_nonconst(self.counts_after)}"
        lines.append(f"ops {self.ops_before} -> {self.ops_after} (non-const {nonconst}) "
                     f"in {self.rounds} round(s), {self.seconds * 1e3:.1f} ms")
        return "\n".join(lines)

    def removed(self, name: str) -> int:
        return next((s.removed for s in self.stats if s.name == name), 0)

    def rewrites(self, name: str) -> int:
        return next((s.rewrites for s in self.stats if s.name == name), 0)


def _nonconst(counts: dict) -> int:
    return sum(n for t, n in counts.items() if t != "const")


def last_report() -> Report | None:
    """The pass report of the most recently compiled program (a compile-cache miss)."""
    return CTX.last_report


def run(program, passes=None, numerics=None, **options) -> Report:
    """Run a pipeline over `program` IN PLACE until nothing changes; returns the report.

    `passes`: a Pipeline, a preset name or a list of names (default: the current setting).

    >>> import aneforge as af, aneforge.passes as P
    >>> p = af.program(af.ones(3).relu().relu() * 1.0)
    >>> report = P.run(p)
    >>> sorted(p.op_counts().items())
    [('relu', 1)]
    >>> report.ops_before, report.ops_after
    (4, 1)
    """
    from ..hardware.numerics import get_numerics
    from ..hardware.targets import get_target
    spec = passes if isinstance(passes, Pipeline) else (
        get_pipeline() if passes is None and not options else Pipeline.build(passes, **options))
    start = time.perf_counter()
    report = Report(len(program.operations), counts_before=program.op_counts())
    if spec.contraction_cap is None:        # the target's spatial cap bounds matmul K too
        spec = replace(spec, contraction_cap=get_target().spatial_cap)
    graph = Graph(program, numerics or get_numerics(), spec)
    stats = {n: PassStat(n, get_pass(n).kind) for n in spec.passes}
    report.stats = list(stats.values())
    for report.rounds in range(1, MAX_ROUNDS + 1):
        changed = 0
        for name in spec.passes:
            changed += _run_one(get_pass(name), graph, stats[name])
        if not changed:
            break
    report.ops_after, report.counts_after = len(program.operations), program.op_counts()
    report.seconds = time.perf_counter() - start
    CTX.last_report = report
    return report


def _run_one(p, graph, stat: PassStat) -> int:
    before, start = len(graph.ops), time.perf_counter()
    n = p(graph)
    stat.runs += 1
    stat.rewrites += n
    stat.removed += before - len(graph.ops)
    stat.seconds += time.perf_counter() - start
    return n
