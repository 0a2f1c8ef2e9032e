"""The one table of aneforge's torch-named functions over tensors, and the writer of the surfaces.

Each row of TABLE names a torch function, where aneforge implements it (its home) and the
surfaces on which torch spells it: `torch.X` (af.X), `torch.Tensor.X` (Tensor.X) and
`torch.nn.functional.X` (F.X). aneforge has the name on exactly those surfaces, and
aneforge_tests/test_api_surfaces.py checks the table against torch itself.

Homes: `Tensor` (a method of aneforge.tensor.Tensor), `functions` (aneforge/functions.py) and
`F` (aneforge/nn/functional.py). A surface marked `*` has a hand-written adapter in that
surface's module (aneforge/adapters.py for torch.X), because torch's signature differs there (torch.embedding(weight, indices) against
F.embedding(input, weight)). Every other surface binds the home's implementation by a plain
statement that `python -m aneforge._api` writes into the marked blocks of

    aneforge/functions.py      af.X of a Tensor method: a def forwarding to the method; __all__
    aneforge/nn/functional.py  F.X homed elsewhere: imported from functions; __all__
    aneforge/__init__.py       af.X: imported from functions and nn.functional; __all__

so IDEs, static analyzers and help() see every name. Tensor.X is always a def (or a class-body
assignment) in tensor.py, written by hand: the methods are the implementations. Functions that
make tensors or set state (af.zeros, af.manual_seed, af.no_grad, ...) are on af only, as in
torch, and imported by hand in __init__.py.
"""
from __future__ import annotations

import inspect
import pathlib
from typing import NamedTuple

SURFACES = ("torch", "Tensor", "F")

#  name                             home       surfaces torch spells it on (* = adapter there)
TABLE = """
abs                                 Tensor     torch Tensor
adaptive_avg_pool2d                 F          F
add                                 Tensor     torch Tensor
add_                                Tensor     Tensor
addcdiv                             Tensor     torch Tensor
addcmul                             Tensor     torch Tensor
addmm                               Tensor     torch Tensor
all                                 Tensor     torch Tensor
allclose                            Tensor     torch Tensor
amax                                Tensor     torch Tensor
amin                                Tensor     torch Tensor
any                                 Tensor     torch Tensor
argmax                              Tensor     torch Tensor
argmin                              Tensor     torch Tensor
argsort                             Tensor     torch Tensor
avg_pool1d                          F          torch F
avg_pool2d                          F          F
batch_norm                          F          torch* F
backward                            Tensor     Tensor
binary_cross_entropy_with_logits    F          torch* F
bmm                                 Tensor     torch Tensor
bool                                Tensor     Tensor
cat                                 functions  torch
ceil                                Tensor     torch Tensor
celu                                F          torch F
chunk                               Tensor     torch Tensor
clamp                               Tensor     torch Tensor
clamp_                              Tensor     torch Tensor
clamp_max                           Tensor     torch Tensor
clamp_min                           Tensor     torch Tensor
clip                                Tensor     torch Tensor
clone                               Tensor     torch Tensor
concat                              functions  torch
concatenate                         functions  torch
contiguous                          Tensor     Tensor
conv1d                              F          torch F
conv2d                              F          torch F
conv_transpose2d                    F          torch F
copy_                               Tensor     Tensor
copysign                            Tensor     torch Tensor
cos                                 Tensor     torch Tensor
cosine_similarity                   F          torch F
count_nonzero                       Tensor     torch Tensor
cpu                                 Tensor     Tensor
cross_entropy                       F          F
cummax                              Tensor     torch Tensor
cummin                              Tensor     torch Tensor
cumprod                             Tensor     torch Tensor
cumsum                              Tensor     torch Tensor
detach                              Tensor     torch Tensor
diag                                Tensor     torch Tensor
diagonal                            Tensor     torch Tensor
dim                                 Tensor     Tensor
div                                 Tensor     torch Tensor
div_                                Tensor     Tensor
dropout                             F          torch* F
einsum                              functions  torch
elu                                 F          F
embedding                           F          torch* F
eq                                  Tensor     torch Tensor
erf                                 Tensor     torch Tensor
exp                                 Tensor     torch Tensor
expand                              Tensor     Tensor
expand_as                           Tensor     Tensor
expm1                               Tensor     torch Tensor
fill_                               Tensor     torch Tensor
flatten                             Tensor     torch Tensor
flip                                Tensor     torch Tensor
float                               Tensor     Tensor
floor                               Tensor     torch Tensor
floor_divide                        Tensor     torch Tensor
fmod                                Tensor     torch Tensor
gather                              Tensor     torch Tensor
ge                                  Tensor     torch Tensor
gelu                                F          F
group_norm                          F          torch F
gt                                  Tensor     torch Tensor
half                                Tensor     Tensor
hardsigmoid                         F          F
hardswish                           F          F
hardtanh                            F          F
huber_loss                          F          F
index_select                        Tensor     torch Tensor
int                                 Tensor     Tensor
interpolate                         F          F
kl_div                              F          torch* F
isclose                             Tensor     torch Tensor
item                                Tensor     Tensor
l1_loss                             F          F
layer_norm                          F          torch F
le                                  Tensor     torch Tensor
leaky_relu                          F          F
lerp                                Tensor     torch Tensor
linear                              F          F
log                                 Tensor     torch Tensor
log1p                               Tensor     torch Tensor
log_softmax                         Tensor     torch Tensor F
logcumsumexp                        Tensor     torch Tensor
logical_not                         Tensor     torch Tensor
logsigmoid                          F          F
logsumexp                           Tensor     torch Tensor
long                                Tensor     Tensor
lt                                  Tensor     torch Tensor
masked_fill                         Tensor     torch Tensor
matmul                              Tensor     torch Tensor
max                                 Tensor     torch Tensor
max_pool1d                          F          torch F
max_pool2d                          F          torch F
maximum                             Tensor     torch Tensor
mean                                Tensor     torch Tensor
meshgrid                            functions  torch
min                                 Tensor     torch Tensor
minimum                             Tensor     torch Tensor
mish                                F          F
movedim                             Tensor     torch Tensor
mse_loss                            F          F
mul                                 Tensor     torch Tensor
mul_                                Tensor     Tensor
multiply                            Tensor     torch Tensor
nan_to_num                          Tensor     torch Tensor
narrow                              Tensor     torch Tensor
ne                                  Tensor     torch Tensor
neg                                 Tensor     torch Tensor
negative                            Tensor     torch Tensor
nll_loss                            F          F
norm                                Tensor     torch Tensor
normalize                           F          F
numel                               Tensor     torch Tensor
numpy                               Tensor     Tensor
one_hot                             F          F
outer                               Tensor     torch Tensor
pad                                 F          F
permute                             Tensor     torch Tensor
pow                                 Tensor     torch Tensor
prod                                Tensor     torch Tensor
reciprocal                          Tensor     torch Tensor
relu                                Tensor     torch Tensor F*
relu6                               F          F
remainder                           Tensor     torch Tensor
repeat                              Tensor     Tensor
requires_grad_                      Tensor     Tensor
reshape                             Tensor     torch Tensor
rms_norm                            F          torch F
roll                                Tensor     torch Tensor
rsqrt                               Tensor     torch Tensor
scaled_dot_product_attention        F          F
scatter                             Tensor     torch Tensor
scatter_add                         Tensor     torch Tensor
scatter_reduce                      Tensor     torch Tensor
select                              Tensor     torch Tensor
selu                                F          torch F
set_                                Tensor     Tensor
sigmoid                             Tensor     torch Tensor F
sign                                Tensor     torch Tensor
silu                                F          F
sin                                 Tensor     torch Tensor
size                                Tensor     Tensor
smooth_l1_loss                      F          F
softmax                             Tensor     torch Tensor F
softplus                            F          F
softsign                            F          F
sort                                Tensor     torch Tensor
split                               Tensor     torch Tensor
sqrt                                Tensor     torch Tensor
square                              Tensor     torch Tensor
squeeze                             Tensor     torch Tensor
stack                               functions  torch
std                                 Tensor     torch Tensor
std_mean                            functions  torch
sub                                 Tensor     torch Tensor
sub_                                Tensor     Tensor
subtract                            Tensor     torch Tensor
sum                                 Tensor     torch Tensor
swapaxes                            Tensor     torch Tensor
t                                   Tensor     torch Tensor
tanh                                Tensor     torch Tensor F
tile                                Tensor     torch Tensor
to                                  Tensor     Tensor
topk                                Tensor     torch Tensor
tolist                              Tensor     Tensor
transpose                           Tensor     torch Tensor
tril                                Tensor     torch Tensor
triu                                Tensor     torch Tensor
true_divide                         Tensor     torch Tensor
trunc                               Tensor     torch Tensor
type                                Tensor     Tensor
type_as                             Tensor     Tensor
unbind                              Tensor     torch Tensor
unflatten                           Tensor     torch Tensor
unsqueeze                           Tensor     torch Tensor
var                                 Tensor     torch Tensor
var_mean                            functions  torch
view                                Tensor     Tensor
where                               functions  torch Tensor*
zero_                               Tensor     torch Tensor
"""

# Doctest bodies for the generated af.X forwarders (after `>>> import aneforge as af`).
EXAMPLES = {
    "add": ">>> af.add(af.tensor([1.0, 2.0]), 1.0, alpha=2).tolist()\n[3.0, 4.0]",
    "all": ">>> af.all(af.tensor([True, False])).item()\nFalse",
    "any": ">>> af.any(af.tensor([True, False])).item()\nTrue",
    "clone": ">>> af.clone(af.tensor([1.0, 2.0])).tolist()\n[1.0, 2.0]",
    "detach": (">>> w = af.ones(2, requires_grad=True)\n"
               ">>> af.detach(w * 2).requires_grad\nFalse"),
    "div": ">>> af.div(af.tensor([1.0, 3.0]), 2).tolist()\n[0.5, 1.5]",
    "eq": ">>> af.eq(af.tensor([1, 2]), 2).tolist()\n[False, True]",
    "erf": ">>> af.erf(af.tensor([0.0, 3.0])).tolist()\n[0.0, 1.0]",
    "ge": ">>> af.ge(af.tensor([1, 2]), 2).tolist()\n[False, True]",
    "gt": ">>> af.gt(af.tensor([1, 2]), 1).tolist()\n[False, True]",
    "le": ">>> af.le(af.tensor([1, 2]), 1).tolist()\n[True, False]",
    "logical_not": ">>> af.logical_not(af.tensor([True, False])).tolist()\n[False, True]",
    "lt": ">>> af.lt(af.tensor([1, 2]), 2).tolist()\n[True, False]",
    "masked_fill": (">>> x = af.tensor([-1.0, 2.0])\n"
                    ">>> af.masked_fill(x, x < 0, 0.0).tolist()\n[0.0, 2.0]"),
    "movedim": ">>> af.movedim(af.zeros(2, 3, 4), 0, -1).shape\n(3, 4, 2)",
    "mul": ">>> af.mul(af.tensor([1.0, 2.0]), 3).tolist()\n[3.0, 6.0]",
    "narrow": ">>> af.narrow(af.arange(5), 0, 1, 3).tolist()\n[1, 2, 3]",
    "ne": ">>> af.ne(af.tensor([1, 2]), 2).tolist()\n[True, False]",
    "numel": ">>> af.numel(af.zeros(2, 3))\n6",
    "std": ">>> af.std(af.tensor([1.0, 3.0])).item()\n1.4140625",
    "sub": ">>> af.sub(af.tensor([1.0, 2.0]), 1.0).tolist()\n[0.0, 1.0]",
    "swapaxes": ">>> af.swapaxes(af.zeros(2, 3), 0, 1).shape\n(3, 2)",
    "unbind": ">>> [t.tolist() for t in af.unbind(af.tensor([[1, 2], [3, 4]]), 1)]\n[[1, 3], [2, 4]]",
    "var": ">>> af.var(af.tensor([1.0, 3.0])).item()\n2.0",
}

# torch's name for the tensor argument where it is not `input`.
FIRST_ARGUMENT = {"split": "tensor"}


class Row(NamedTuple):
    name: str
    home: str                   # "Tensor", "functions" or "F"
    surfaces: tuple[str, ...]   # where torch spells the name: "torch", "Tensor", "F"
    adapted: frozenset[str]     # surfaces with a hand-written adapter (torch's signature differs)


def _parse(table: str) -> tuple[Row, ...]:
    rows = []
    for line in table.strip().splitlines():
        name, home, *surfaces = line.split()
        rows.append(Row(name, home, tuple(s.rstrip("*") for s in surfaces),
                        frozenset(s.rstrip("*") for s in surfaces if s.endswith("*"))))
    return tuple(rows)


ROWS = _parse(TABLE)


def on(surface: str) -> list[Row]:
    return [r for r in ROWS if surface in r.surfaces]


def _bound_from(row: Row, surface: str) -> str:
    """The module that defines `row.name` for `surface`: its own module when home, its
    adapter module when adapted (torch.X adapters live in adapters.py)."""
    own = {"torch": "functions", "Tensor": "Tensor", "F": "F"}[surface]
    if surface in row.adapted:
        return "adapters" if surface == "torch" else own
    if row.home == own:
        return own
    return "functions" if row.home == "Tensor" else row.home


# ---- writing the blocks -------------------------------------------------------------------------
ROOT = pathlib.Path(__file__).parent
BEGIN = "# ---- generated by `python -m aneforge._api` from its TABLE, do not edit: {} ----"
END = "# ---- end of generated block: {} ----"


def _names(names: list[str], head: str, tail: str) -> str:
    """`head` names `tail` on one line if it fits, else one indented run of lines."""
    if len(head + ", ".join(names) + tail) <= 100:
        if head.endswith("import ("):           # a one-line import needs no parentheses
            head, tail = head[:-1], tail[1:]
        return head + ", ".join(names) + tail
    lines, line = [], "   "
    for n in names:
        if len(line) + len(n) + 2 > 100:
            lines.append(line.rstrip())
            line = "   "
        line += f" {n},"
    return "\n".join([head, *lines, line.rstrip(",") + tail])


class _Written(str):
    """An annotation shown as written: tensor.py's are strings (`from __future__ import
    annotations`), which inspect would print quoted."""
    def __repr__(self) -> str:
        return self.replace('"', "").replace("'", "")


def _written(annotation):
    return annotation if annotation is inspect.Parameter.empty else _Written(annotation)


def _forwarder(name: str) -> str:
    """`def name(input, ...)` calling the Tensor method, with the method's own parameters."""
    from .tensor import Tensor
    sig = inspect.signature(getattr(Tensor, name))
    params = [p.replace(annotation=_written(p.annotation)) for p in sig.parameters.values()][1:]
    call = ", ".join({p.VAR_POSITIONAL: f"*{p.name}", p.VAR_KEYWORD: f"**{p.name}",
                      p.KEYWORD_ONLY: f"{p.name}={p.name}"}.get(p.kind, p.name) for p in params)
    tensor = FIRST_ARGUMENT.get(name, "input")
    first = inspect.Parameter(tensor, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              annotation=_Written("Tensor"))
    sig = sig.replace(parameters=[first, *params],
                      return_annotation=_written(sig.return_annotation))
    doc = f"torch.{name}: `{tensor}.{name}({call})`; see Tensor.{name}."
    if name in EXAMPLES:
        body = "\n".join(f"    {line}" for line in EXAMPLES[name].splitlines())
        doc += f"\n\n    >>> import aneforge as af\n{body}\n    "
    line = f"def {name}{sig}:"
    if len(line) > 100:                     # wrap the parameters under the opening parenthesis
        cut = line.rindex(", ", 0, 100)
        line = f"{line[:cut + 1]}\n{' ' * (len(name) + 5)}{line[cut + 2:]}"
    return f'{line}\n    """{doc}"""\n    return {tensor}.{name}({call})'


def blocks() -> dict[tuple[str, str], str]:
    """(file, block name) -> the text the table puts there."""
    af_rows = on("torch")
    in_functions = [r.name for r in af_rows if _bound_from(r, "torch") == "functions"]
    from_f = [r.name for r in af_rows if _bound_from(r, "torch") == "F"]
    adapted = [r.name for r in af_rows if _bound_from(r, "torch") == "adapters"]
    f_imports = [r.name for r in on("F") if _bound_from(r, "F") == "functions"]
    forwarders = [r.name for r in af_rows if r.home == "Tensor" and "torch" not in r.adapted]
    return {
        ("functions.py", "forwarders"): "\n\n\n".join(_forwarder(n) for n in forwarders),
        ("functions.py", "__all__"): _names([f'"{n}"' for n in in_functions], "__all__ = [", "]"),
        ("nn/functional.py", "imports"):
            _names(f_imports, "from ..functions import (", ")") + "\n\n" +
            _names([f'"{r.name}"' for r in on("F")], "__all__ = [", "]"),
        ("__init__.py", "imports"):
            _names(in_functions, "from .functions import (", ")") + "\n" +
            _names(adapted, "from .adapters import (", ")") + "\n" +
            _names(from_f, "from .nn.functional import (", ")"),
        ("__init__.py", "__all__"):
            _names([f'"{r.name}"' for r in af_rows], "__all__ += [", "]"),
    }


def read_block(path: str, name: str) -> str:
    text = (ROOT / path).read_text()
    begin, end = BEGIN.format(name), END.format(name)
    return text[text.index(begin) + len(begin):text.index(end)].strip("\n")


def write_blocks() -> None:
    for (path, name), body in blocks().items():
        file = ROOT / path
        text = file.read_text()
        begin, end = BEGIN.format(name), END.format(name)
        start, stop = text.index(begin) + len(begin), text.index(end)
        file.write_text(f"{text[:start]}\n{body}\n{text[stop:]}")


if __name__ == "__main__":
    write_blocks()
