"""Writes docs/torch_coverage.md from the API tables: `python -m aneforge.coverage_doc --write`.

The torch names come from aneforge/_api.py's TABLE (af.X, Tensor.X, F.X), `aneforge.nn`,
`aneforge.optim` and `aneforge.__all__`; how each runs comes from the tables below (which MIL op a
name records when it is one op, which names are host values or bookkeeping); what is absent on
purpose, and why, from ABSENT. aneforge_tests/test_coverage_doc.py checks that the page equals
`render()`, that each "native" name records its MIL op, and that each absent name is torch's and
not aneforge's, so the page and the code never drift apart.
"""
from __future__ import annotations

import inspect
import sys

from . import _api

# torch name -> the one MIL op it records (besides reshapes/casts that only move or retype data).
NATIVE = {
    "abs": "abs", "add": "add", "add_": "add", "sub": "sub", "sub_": "sub", "subtract": "sub",
    "mul": "mul", "mul_": "mul", "multiply": "mul", "square": "mul", "div": "real_div",
    "div_": "real_div", "true_divide": "real_div", "pow": "pow", "maximum": "maximum",
    "minimum": "minimum", "clamp": "clip", "clamp_": "clip", "clip": "clip", "clamp_min": "maximum",
    "clamp_max": "minimum", "hardtanh": "clip", "relu6": "clip", "exp": "exp", "log": "log",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "erf": "erf", "sin": "sin", "cos": "cos", "tanh": "tanh",
    "sigmoid": "sigmoid", "relu": "relu", "gelu": "gelu", "silu": "silu",
    "leaky_relu": "leaky_relu", "softmax": "softmax", "matmul": "matmul", "bmm": "matmul",
    "sum": "reduce_sum", "mean": "reduce_mean", "amax": "reduce_max",
    "max": "reduce_max", "amin": "reduce_min", "min": "reduce_min", "argmax": "reduce_argmax",
    "argmin": "reduce_argmin", "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
    "gt": "greater", "ge": "greater_equal", "logical_not": "logical_not", "reshape": "reshape",
    "view": "reshape", "flatten": "reshape", "unflatten": "reshape", "transpose": "transpose",
    "permute": "transpose", "t": "transpose", "swapaxes": "transpose", "movedim": "transpose",
    "unsqueeze": "expand_dims", "squeeze": "squeeze", "split": "split", "chunk": "split",
    "cat": "concat", "concat": "concat", "concatenate": "concat", "narrow": "slice_by_index",
    "clone": "identity", "float": "cast", "half": "cast", "int": "cast", "long": "cast",
    "bool": "cast", "to": "cast", "type_as": "cast", "where": "select", "masked_fill": "select",
    "pad": "pad", "tile": "tile", "repeat": "tile", "expand": "tile", "expand_as": "tile",
    "scaled_dot_product_attention": "scaled_dot_product_attention",
}

# Names whose result is a Python value read back to the host, or host-side work.
HOST = {
    "allclose": "a Python bool: the comparison runs as a program, the answer is read back",
    "item": "reads one value back to Python", "tolist": "reads the values back to Python",
    "numpy": "reads the values back as a numpy array", "size": "the static shape (no program)",
    "dim": "the static rank (no program)", "numel": "the static element count (no program)",
    "type": "with no argument: the type string (no program); with a dtype: a cast",
    "backward": "records the gradient ops (autograd); they run with the next realization",
}

# Names that change only the handle or its bookkeeping: no op is recorded.
NO_OP = {
    "contiguous": "tensors are always contiguous", "cpu": "one device",
    "detach": "a new handle without gradient history", "requires_grad_": "a leaf's flag",
    "set_": "the handle takes another value", "copy_": "the handle takes `src`'s value",
}

# torch names left out on purpose: (surface, name, why).
ABSENT = [
    ("torch", "float64", "the ANE computes in fp16 (fp32 inside a program); float64 host data is "
                         "rounded to fp16 when it becomes a tensor"),
    ("torch", "int64", "the widest integer a program holds is int32; int64 host data is checked "
                       "to fit (`af.long` is int32)"),
    ("torch", "complex64", "no complex arithmetic on the ANE"),
    ("torch", "inverse", "no matrix factorization or solve op on the ANE (inverse and "
                         "torch.linalg's solve, svd, eig, qr, cholesky; af.linalg has "
                         "vector_norm only); compute them on the host"),
    ("torch", "fft", "no FFT op on the ANE"),
    ("torch", "nonzero", "the result's shape depends on the data; ANE programs have static "
                         "shapes (use masks: where, masked_fill)"),
    ("torch", "unique", "data-dependent output shape (see nonzero)"),
    ("torch", "masked_select", "data-dependent output shape (see nonzero)"),
    ("torch", "multinomial", "random draws are made on the host and fed to the program "
                             "(af.rand, af.randn, dropout masks); sampling is left to numpy"),
    ("torch", "sparse_coo_tensor", "no sparse storage on the ANE"),
    ("torch", "cuda", "one device: the ANE (or its simulator); `.to(device)` and `.cpu()` are "
                      "accepted and ignored"),
    ("Tensor", "index_put_", "programs are static SSA: build the new value with where, scatter "
                             "or cat (`x[i] = v` raises with that advice)"),
    ("Tensor", "exp_", "in-place versions exist for add_, sub_, mul_, div_, clamp_, zero_, "
                       "fill_, copy_; others say to write x = x.op()"),
    ("F", "ctc_loss", "a dynamic-programming recursion over the sequence; not implemented"),
    ("F", "grid_sample", "a data-dependent gather (the ANE has no dynamic gather); not "
                         "implemented"),
    ("nn", "LSTM", "recurrent layers unroll into one program per sequence length; not "
                   "implemented yet (write the cell with Linear and the step loop)"),
    ("nn", "GRU", "see LSTM"),
    ("nn", "Conv3d", "not implemented: 3-D inputs are rank 5, at the ANE's rank cap"),
    ("optim", "LBFGS", "re-evaluates the closure a data-dependent number of times per step, "
                       "which one compiled step program cannot express"),
]

SURFACE_TITLES = {"torch": "`torch.X` as `af.X`", "Tensor": "`torch.Tensor.X` as `Tensor.X`",
                  "F": "`torch.nn.functional.X` as `af.nn.functional.X`"}

INTRO = """\
# torch coverage

<!-- generated by `python -m aneforge.coverage_doc --write` from aneforge/_api.py's TABLE,
aneforge.nn, aneforge.optim and the tables in aneforge/coverage_doc.py: edit those, not this
page -->

Which torch names aneforge has, on which surface, and how each one runs. Every tensor function
records MIL ops into a program that runs on the ANE (or on the fp16-faithful simulator off
macOS):

- **native**: one MIL op the ANE runs (named), plus at most reshapes or casts that only move
  or retype data;
- **decomposed**: several MIL ops (a sort from pairwise comparisons, a log_softmax through the
  wide matmul accumulator, a loss from its formula); still one program on the ANE;
- **host**: a Python value read back, or a static fact (shape, rank) that needs no program;
- **no op**: only the handle or its bookkeeping changes.

Values and gradients of each name are tested against torch (aneforge_tests/optable.py and the
layer, checkpoint and transformer tests).
"""


def how(name: str) -> tuple[str, str]:
    if name in NATIVE:
        return "native", f"`{NATIVE[name]}`"
    if name in HOST:
        return "host", HOST[name]
    if name in NO_OP:
        return "no op", NO_OP[name]
    return "decomposed", ""


def _public(module) -> list[str]:
    return sorted(n for n in module.__all__ if inspect.isclass(getattr(module, n)))


def _others() -> list[str]:
    """af.* names that are not tensor functions of the table: creation, modes, tools."""
    import aneforge as af
    rows = {r.name for r in _api.ROWS}
    return [n for n in af.__all__ if n not in rows and not inspect.ismodule(getattr(af, n))
            and not isinstance(getattr(af, n), af.dtypes.DType)]


def _surface_table(surface: str) -> list[str]:
    out = [f"## {SURFACE_TITLES[surface]}", "", "| name | how | MIL op / note |", "|---|---|---|"]
    for row in sorted(_api.on(surface), key=lambda r: r.name):
        kind, note = how(row.name)
        out.append(f"| `{row.name}` | {kind} | {note} |")
    return out + [""]


def _names_section(title: str, names: list[str], text: str) -> list[str]:
    return [f"## {title}", "", text, "", ", ".join(f"`{n}`" for n in names), ""]


def totals() -> dict[str, int]:
    import aneforge.nn as nn
    import aneforge.optim as optim
    kinds = [how(r.name)[0] for r in _api.ROWS]
    return {"torch-named tensor functions": len(_api.ROWS),
            **{f"on {SURFACE_TITLES[s]}": len(_api.on(s)) for s in _api.SURFACES},
            **{k: kinds.count(k) for k in ("native", "decomposed", "host", "no op")},
            "`nn` classes (layers, losses, containers)": len(_public(nn)),
            "`optim` classes": len(_public(optim)),
            "other `af.*` functions and classes": len(_others()),
            "absent on purpose": len(ABSENT)}


def render() -> str:
    import aneforge.nn as nn
    import aneforge.optim as optim
    lines = INTRO.splitlines() + ["", "## Totals", "", "| | count |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in totals().items()] + [""]
    lines += ["(native + decomposed + host + no op = the torch-named tensor functions; a name "
              "on several surfaces counts once.)", ""]
    for surface in _api.SURFACES:
        lines += _surface_table(surface)
    lines += _names_section(
        "`torch.nn` modules as `af.nn`", _public(nn),
        "torch's constructor arguments, parameter names and weight layouts, so "
        "`load_state_dict(torch_module.state_dict())` works; each runs the functions above.")
    lines += _names_section(
        "`torch.optim` as `af.optim`", _public(optim) + ["lr_scheduler"],
        "torch's update formulas, recorded into the training step's program; `state_dict()` "
        "and `load_state_dict()` resume training bit-equal.")
    lines += _names_section(
        "Other `af.*` names", _others(),
        "Creation (host data becomes program inputs), grad modes, checkpoints (`save`/`load` "
        "in torch's file format), compilation, targets and backends.")
    lines += ["## Absent on purpose", "", "| surface | torch name | why |", "|---|---|---|"]
    lines += [f"| {s} | `{n}` | {why} |" for s, n, why in ABSENT]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> None:
    from .targets_doc import generate
    generate(render, "torch_coverage.md", argv)


if __name__ == "__main__":
    main(sys.argv[1:])
