"""What `af.export` writes: the Program of tensors, or of a function called on example inputs.

A function, an `nn.Module` or an `af.compile`d function is called once on `args` (without
gradients); the program computing its results has the arguments as inputs and every other
value it reads (parameters, buffers, tensors made before) baked in as constants, as
torch.export lifts them: the exported file is self-contained.
"""
from __future__ import annotations

import builtins

import numpy as np

from .autograd import no_grad
from .context import CTX
from .core.realization import Cut, program_for
from .errors import AneforgeError
from .ir import Block, Function, Operation, Program
from .replay import Compiled
from .tensor import Tensor
from .tensor.core import tensor


def export(obj, path: str, args=None, *, delegate: bool = True, dynamic_shapes=None) -> str:
    """Write `obj` as a Core ML package (`*.mlpackage`) or an ExecuTorch program (`*.pte`).

    `obj`: a Program, a `load_mil` function, tensor(s) (the program computing them), or a
    function / module / `af.compile`d function with its example `args` (a tuple). `delegate`
    (`.pte` only): the program as one Core ML delegate call (True) or on ExecuTorch's portable
    kernels (False). Shapes are static: `dynamic_shapes` is refused.

    >>> import aneforge as af, os, tempfile
    >>> model = af.nn.Linear(4, 2)
    >>> path = af.export(model, os.path.join(tempfile.mkdtemp(), "m.pte"), (af.ones(3, 4),),
    ...                  delegate=False)
    >>> os.path.getsize(path) > 0
    True
    """
    from .mil import package
    if dynamic_shapes is not None:
        raise AneforgeError("aneforge exports static shapes only (ANE programs are compiled per "
                            "shape): drop dynamic_shapes and export one program per input shape")
    if not str(path).endswith((".pte", ".mlpackage")):
        raise AneforgeError(f"export writes a Core ML package ('*.mlpackage') or an ExecuTorch "
                            f"program ('*.pte'): name it so, not {path!r}")
    obj = program_of(obj, args)
    if str(path).endswith(".pte"):
        from .mil.pte import export_pte
        return export_pte(package.program_of(obj), str(path), delegate)
    return package.export(obj, path)


def program_of(obj, args=None):
    """The Program (or `load_mil` function) `export` writes for `obj` and `args`."""
    tensors = obj if isinstance(obj, (tuple, list)) else (obj,)
    if args is None:
        if tensors and builtins.all(isinstance(t, Tensor) for t in tensors):
            return program_for([t.ref for t in tensors])
        if callable(obj) and not isinstance(getattr(obj, "program", None), Program):
            raise AneforgeError("exporting a function or module needs its example inputs: "
                                "af.export(fn, path, (x, ...))")
        return obj
    return program_of_call(obj, args)


def program_of_call(fn, args) -> Program:
    """Call `fn(*args)` without gradients; the program of its results, `args` as inputs."""
    if not callable(fn):
        raise AneforgeError(f"example inputs go with a function or module; got {type(fn).__name__}")
    args = args if isinstance(args, (tuple, list)) else (args,)
    inputs = [a if isinstance(a, Tensor) else tensor(np.asarray(a)) for a in args]
    thread, before = CTX.thread, CTX.thread.tracing
    thread.tracing = True               # no host shortcut may read the arguments' values
    try:
        with no_grad():
            result = (fn._fn if isinstance(fn, Compiled) else fn)(*inputs)
    finally:
        thread.tracing = before
    outs = result if isinstance(result, (tuple, list)) else (result,)
    if not outs or not builtins.all(isinstance(t, Tensor) for t in outs):
        raise AneforgeError(f"export needs a function returning a tensor or tuple of tensors; "
                            f"got {type(result).__name__}")
    refs = [t.ref for t in outs]
    if builtins.any(n.data is not None for n, _ in refs):
        raise AneforgeError("an output was computed on the host before export (.numpy(), "
                            ".item() or an input returned as is): return values the function "
                            "computes from its inputs")
    return _lifted(Cut(refs), refs, {id(t.ref[0]): k for k, t in enumerate(inputs)})


def _lifted(cut: Cut, refs: list, arg_nodes: dict) -> Program:
    """The cut's program with the leaves that are not arguments turned into constants;
    the arguments stay inputs, in argument order, and the outputs are `refs` (a cut gives
    every output of a multi-output op)."""
    program = cut.program(int32_out=True)        # ExecuTorch and Core ML take int32 results
    f = program.main
    consts, kept = [], {}
    for (node, i), var in zip(cut.leaves, f.inputs):
        k = arg_nodes.get(id(node))
        if k is None and arg_nodes:
            value = np.asarray(node.data[i]).astype(var.dtype.np).reshape(var.shape)
            consts.append(Operation("const", {}, {"val": value}, [var], var.name))
        else:
            kept.setdefault(len(kept) if k is None else k, var)
    unused = sorted(set(arg_nodes.values()) - set(kept))
    if unused:
        raise AneforgeError(f"argument(s) {unused} do not reach the outputs: an exported "
                            f"program takes only the inputs it reads; drop them")
    inputs = [kept[k] for k in sorted(kept)]
    outputs = [f.outputs[cut.outputs.index(ref)] for ref in refs]
    block = Block(inputs, consts + f.block.operations, outputs)
    return Program({"main": Function(block, f.opset)}, program.version, program.build_info)
