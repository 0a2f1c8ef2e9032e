"""`af.load_mil`: a MIL program written by hand (or by another tool), callable on numpy arrays.

The program is parsed and validated (text.parse), then compiled by the current backend
exactly as a traced program is — `backend.compile(program, numerics)`, which validates it again
and checks the ANE compiler walls — once per (backend, numerics), and run.
"""
from __future__ import annotations

import os
import re

import numpy as np

from ..errors import AneforgeError, DTypeError, ShapeError
from ..ir import Program


class MILFunction:
    """A parsed MIL program's `main`, called like a Python function.

    Inputs are numpy arrays (positionally, or by their MIL names); the result is one array, or
    a tuple for several outputs. `.program` is the IR, `.inputs`/`.outputs` its Vars (name,
    shape, dtype).

    >>> import numpy as np, aneforge as af
    >>> fn = af.load_mil('''program(1.3) {
    ...   func main<ios18>(tensor<fp16, [1, 4]> x, tensor<fp16, [1, 4]> y) {
    ...     tensor<fp16, [1, 4]> z = add(x = x, y = y)[name = string("z")];
    ...   } -> (z);
    ... }''')
    >>> [(v.name, v.shape, v.dtype.name) for v in fn.inputs]
    [('x', (1, 4), 'fp16'), ('y', (1, 4), 'fp16')]
    >>> fn(np.ones((1, 4)), y=np.full((1, 4), 0.5))
    array([[1.5, 1.5, 1.5, 1.5]], dtype=float16)
    """

    def __init__(self, program: Program, source: str | None = None):
        self.program = program
        self.source = source
        self._compiled: dict = {}

    @property
    def inputs(self):
        return list(self.program.main.inputs)

    @property
    def outputs(self):
        return list(self.program.main.outputs)

    def __call__(self, *args, **kwargs):
        from ..hardware.numerics import get_numerics
        from ..runtime import get_backend
        from ..hardware.targets import get_target
        backend, numerics = get_backend(), get_numerics()
        key = (backend.name, numerics, get_target().name)
        if key not in self._compiled:
            self._compiled[key] = backend.compile(self.program, numerics)
        results = self._compiled[key].run(self._bind(args, kwargs))
        return results[0] if len(results) == 1 else tuple(results)

    def _bind(self, args: tuple, kwargs: dict) -> list[np.ndarray]:
        names = [v.name for v in self.inputs]
        if len(args) > len(names):
            raise AneforgeError(f"{self} takes {len(names)} input(s) ({', '.join(names)}), "
                                f"got {len(args)} positional arrays")
        given = dict(zip(names, args))
        for k, a in kwargs.items():
            if k not in names:
                raise AneforgeError(f"{self} has no input {k!r}; its inputs are {names}")
            if k in given:
                raise AneforgeError(f"input {k!r} is given both by position and by name")
            given[k] = a
        missing = [n for n in names if n not in given]
        if missing:
            raise AneforgeError(f"{self} needs input(s) {missing}; it takes {names}")
        return [_check_input(v, given[v.name]) for v in self.inputs]

    def __repr__(self) -> str:
        ins = ", ".join(f"{v.type} {v.name}" for v in self.inputs)
        return f"MILFunction(main({ins}) -> ({', '.join(v.name for v in self.outputs)}))"


def _check_input(var, value) -> np.ndarray:
    """`value` as the input's dtype: floats for a float input, integers (in range) for an
    integer one; anything else, or another shape, is an error naming the input."""
    a = np.asarray(value)
    want = var.dtype.np
    if tuple(a.shape) != var.shape:
        raise ShapeError(f"input {var.name!r} has shape {list(var.shape)} ({var.type}); got an "
                         f"array of shape {list(a.shape)}")
    if a.dtype == want:
        return a
    if want.kind == "f" and a.dtype.kind in "fiub":
        return a.astype(want)
    if want.kind in "iu" and a.dtype.kind in "iub":
        info = np.iinfo(want)
        if a.size and (a.min() < info.min or a.max() > info.max):
            raise DTypeError(f"input {var.name!r} is {var.dtype.name}; values in "
                             f"[{a.min()}, {a.max()}] do not fit [{info.min}, {info.max}]")
        return a.astype(want)
    raise DTypeError(f"input {var.name!r} is {var.dtype.name}; got {a.dtype} data. Pass "
                     f"{'floating-point' if want.kind == 'f' else 'integer'} data.")


def load_mil(text_or_path, weights_dir: str | None = None) -> MILFunction:
    """Parse MIL text (the MIL primer's format), or the file at a path, into a callable.

    Runs on the current backend through the same compile path as traced programs. A file's
    BLOBFILE weights are read from its directory unless `weights_dir` says otherwise.
    Errors name the line and the rule broken (`aneforge.mil.syntax.MILSyntaxError`).

    >>> import numpy as np, aneforge as af
    >>> relu = af.load_mil('''program(1.3) {
    ...   func main<ios18>(tensor<fp16, [1, 4]> x) {
    ...     tensor<fp16, [1, 4]> y = relu(x = x)[name = string("y")];
    ...   } -> (y);
    ... }''')
    >>> relu(np.array([[-1.0, 0.0, 1.5, 2.0]]))
    array([[0. , 0. , 1.5, 2. ]], dtype=float16)
    """
    from .text import parse
    text, path = _read(text_or_path)
    if path is not None and weights_dir is None:
        weights_dir = os.path.dirname(os.path.abspath(path))
    return MILFunction(parse(text, weights_dir=weights_dir), path)


def _read(text_or_path) -> tuple[str, str | None]:
    """(the MIL text, the path it came from or None). A str is text if it holds a newline or
    starts with `program(`, else a path."""
    if isinstance(text_or_path, str) and ("\n" in text_or_path or re.match(
            r"\s*(//[^\n]*)?\s*program\s*\(", text_or_path)):
        return text_or_path, None
    if not isinstance(text_or_path, (str, os.PathLike)):
        raise AneforgeError(f"load_mil takes MIL text or a path, got "
                            f"{type(text_or_path).__name__}")
    path = os.fspath(text_or_path)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except (OSError, UnicodeDecodeError) as e:
        raise AneforgeError(f"cannot read MIL text from {path!r}: {e}. Pass a path to a MIL "
                            f"file, or MIL text starting with program(...)") from None
