"""Graph passes: the MIL pass catalogue (coremltools' MIL graph passes) and ANE-specific rewrites, in
one explicit, ordered pipeline that every program runs through before it compiles (on a
compile-cache miss only: a hit reuses the optimized program).

    import aneforge.passes as P
    P.set_pipeline("exact")                  # presets: default, exact, ane, none
    with P.pipeline(remove=["divide_to_multiply"]):
        ...
    print(P.last_report())                   # per pass: rewrites, ops removed; ops before/after
    P.run(program, ["noop_elimination"])     # one program, in place; returns the report

One pass per module, each registered by name with whether it is exact (`PASSES[name].exact`);
`pipeline.ORDER` is the order, with the reason for each place written beside it; shared
matching and editing helpers live in `graph.py`. See docs/passes.md.
"""
from __future__ import annotations

from . import (  # noqa: F401  (each module registers its pass)
    cast_optimization, concat_to_pixel_shuffle, concat_zeros_to_pad, const_deduplication, const_elimination,
    dead_code_elimination, decompose_masked_attention, dedup_op_and_var_names,
    detect_concat_interleave, divide_to_multiply, fold_negation, fold_scalar_multiplies, fuse_conv_batchnorm,
    fuse_conv_bias, fuse_conv_scale,
    fuse_elementwise_to_batchnorm, fuse_gelu_exact, fuse_gelu_tanh_approximation,
    fuse_layernorm_or_instancenorm, fuse_leaky_relu, fuse_linear_bias,
    fuse_matmul_weight_bias, fuse_prelu, fuse_reduce_mean, fuse_transpose_matmul,
    merge_consecutive_paddings, merge_consecutive_relus, merge_consecutive_reshapes,
    merge_consecutive_transposes, noop_elimination, rank0_expand_dims_swap,
    reduce_sum_to_matmul, reduce_transposes, remove_redundant_broadcasts,
    remove_redundant_ops, replace_stack_reshape, rewrite_reduce_times_zero,
    sanitize_input_output_names, select_optimization, split_long_matmul,
    topological_reorder, use_reflection_padding)
from .graph import Graph
from .pipeline import (DEFAULT, ORDER, PRESETS, Pipeline, Report, debug, debugging, get_pipeline,
                       last_report, pipeline, run, set_pipeline)
from .registry import PASSES, Pass, register

__all__ = ["PASSES", "Pass", "register", "Graph", "Pipeline", "Report", "DEFAULT", "ORDER",
           "PRESETS", "run", "set_pipeline", "get_pipeline", "pipeline", "last_report", "debug",
           "debugging"]
