"""torch names aneforge does not have: the table of those left out on purpose (ABSENT, with
why) and the AttributeError every surface raises for a missing name, with advice.

It sits below every layer and imports nothing of aneforge, so `af.X`, `Tensor.X`, `F.X` and
`nn.X` all raise the same error from it (module `__getattr__`, PEP 562, and
`Tensor.__getattr__`); aneforge/_api.py re-exports ABSENT beside its TABLE, and
docs/torch_coverage.md shows it.
"""
from __future__ import annotations

import difflib

# torch names aneforge leaves out on purpose, and why (docs/torch_coverage.md shows them; the
# coverage test checks each is torch's and not aneforge's). An indented line continues the row.
#  surface name              why
ABSENT_TABLE = """
torch   float64            the ANE computes in fp16 (fp32 inside a program); float64 host data is
                           rounded to fp16 when it becomes a tensor
torch   complex64          no complex arithmetic on the ANE
torch   inverse            no matrix factorization or solve op on the ANE (inverse and
                           torch.linalg's solve, svd, eig, qr, cholesky; af.linalg has vector_norm
                           only); compute them on the host
torch   fft                no FFT op on the ANE
torch   sparse_coo_tensor  no sparse storage on the ANE
Tensor  exp_               in-place versions exist for add_, sub_, mul_, div_, clamp_, zero_, fill_,
                           copy_; others say to write x = x.op()
F       ctc_loss           a dynamic-programming recursion over the sequence; not implemented
F       grid_sample        a data-dependent gather (the ANE has no dynamic gather); not implemented
optim   LBFGS              re-evaluates the closure a data-dependent number of times per step, which
                           one compiled step program cannot express
"""

# How torch spells each surface, and how aneforge does.
TORCH = {"torch": "torch", "Tensor": "torch.Tensor", "F": "torch.nn.functional", "nn": "torch.nn",
         "optim": "torch.optim"}
OURS = {"torch": "aneforge", "Tensor": "Tensor", "F": "aneforge.nn.functional",
        "nn": "aneforge.nn", "optim": "aneforge.optim"}


def lines(table: str) -> list[str]:
    """A table's rows, each with the indented lines under it joined on."""
    rows: list[str] = []
    for line in table.strip("\n").splitlines():
        if line[:1].isspace():
            rows[-1] += " " + line.strip()
        else:
            rows.append(line)
    return rows


ABSENT = tuple(tuple(line.split(None, 2)) for line in lines(ABSENT_TABLE))
_WHY = {(surface, name): why for surface, name, why in ABSENT}


def _defined(namespace, name: str) -> bool:
    """`name` is defined on a module or a class, read without `getattr` (which would run that
    namespace's own missing-name hook: two surfaces asking each other would never end)."""
    spaces = namespace.__mro__ if isinstance(namespace, type) else (namespace,)
    return any(name in vars(space) for space in spaces)


def error(surface: str, name: str, namespace, elsewhere: dict | None = None,
          hint: str = "") -> AttributeError:
    """The AttributeError for `name` missing from `surface` (a key of TORCH; `namespace` is
    its module or class): why, if it is left out on purpose (ABSENT); otherwise that it is not
    in aneforge (yet), where aneforge has it instead (`elsewhere`: surface -> namespace),
    similar names, and `hint`.

    >>> import aneforge as af
    >>> af.fft
    Traceback (most recent call last):
    AttributeError: module 'aneforge' has no attribute 'fft': torch.fft is not in aneforge: no FFT op on the ANE...
    >>> hasattr(af, "fft")
    False
    """
    head = (f"'Tensor' object has no attribute {name!r}" if surface == "Tensor" else
            f"module {OURS[surface]!r} has no attribute {name!r}")
    if name.startswith("_"):                    # dunders and privates: probes, not torch names
        return AttributeError(head, name=name)
    why = _WHY.get((surface, name))
    if why is not None:
        return AttributeError(f"{head}: {TORCH[surface]}.{name} is not in aneforge: {why}"
                              + (f"; {hint}" if hint else ""), name=name)
    advice = [f"{TORCH[surface]}.{name} is not in aneforge (yet)"]
    homes = [f"{OURS[other]}.{name}" for other, space in (elsewhere or {}).items()
             if _defined(space, name)]
    if homes:
        advice.append("aneforge has " + " and ".join(homes))
    if hint:
        advice.append(hint)
    close = difflib.get_close_matches(name, [n for n in dir(namespace) if not n.startswith("_")],
                                      n=3, cutoff=0.8)
    if close:
        advice.append("similar: " + ", ".join(close))
    advice.append("docs/torch_coverage.md lists what aneforge has")
    return AttributeError(f"{head}: " + "; ".join(advice), name=name)
