"""The three torch surfaces: af.X, Tensor.X and af.nn.functional.X.

torch itself is the oracle of which surface spells which name; aneforge/_api.py's TABLE must
agree with it, the generated blocks must be up to date, every name must be bound by a statement
a static analyzer can see, and one name gives one result on every surface it is on.
"""
import ast
import inspect
import pathlib

import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.functions
import aneforge.nn.functional as F
from aneforge import _api

TORCH = {"torch": torch, "Tensor": torch.Tensor, "F": torch.nn.functional}
OURS = {"torch": af, "Tensor": af.Tensor, "F": F}
ROOT = pathlib.Path(af.__file__).parent


def torch_has(surface: str, name: str) -> bool:
    return inspect.isroutine(getattr(TORCH[surface], name, None))


def ours(surface: str) -> set[str]:
    """The public functions aneforge offers on a surface."""
    if surface == "Tensor":
        return {n for n in dir(af.Tensor)
                if not n.startswith("_") and inspect.isroutine(getattr(af.Tensor, n))}
    return {n for n in OURS[surface].__all__ if inspect.isroutine(getattr(OURS[surface], n))}


def has(surface: str, name: str) -> bool:
    if surface == "Tensor":
        return inspect.isroutine(getattr(af.Tensor, name, None))
    return name in OURS[surface].__all__ and inspect.isroutine(getattr(OURS[surface], name, None))


@pytest.mark.parametrize("surface", list(OURS))
def test_a_name_torch_spells_elsewhere_is_there_too(surface):
    missing = sorted(f"{other}.{n}" for n in ours(surface) for other in OURS
                     if other != surface and torch_has(other, n) and not has(other, n))
    assert not missing, f"torch spells these, aneforge lacks them: {missing}"


@pytest.mark.parametrize("row", _api.ROWS, ids=lambda r: r.name)
def test_table_row_is_torchs_and_bound_on_exactly_its_surfaces(row):
    assert set(row.surfaces) == {s for s in TORCH if torch_has(s, row.name)}
    assert {s for s in OURS if has(s, row.name)} == set(row.surfaces)
    assert row.home in ("Tensor", "functions", "F") and row.adapted <= set(row.surfaces)


def test_every_torch_name_on_the_three_surfaces_is_a_row():
    rows = {r.name for r in _api.ROWS}
    offered = {"torch": set(aneforge.functions.__all__), "Tensor": ours("Tensor"),
               "F": set(F.__all__)}
    strays = sorted(f"{s}.{n}" for s, names in offered.items() for n in names
                    if torch_has(s, n) and n not in rows)
    assert not strays, f"add these to aneforge/_api.py TABLE: {strays}"


@pytest.mark.parametrize("block", sorted(_api.blocks()), ids="/".join)
def test_generated_block_is_up_to_date(block):
    assert _api.read_block(*block) == _api.blocks()[block], \
        "run `python -m aneforge._api` and commit the result"


def _bound_names(body) -> set[str]:
    """Names bound by def, class, assignment or import statements in a module or class body."""
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


@pytest.mark.parametrize("module", [af, aneforge.functions, F], ids=lambda m: m.__name__)
def test_every_public_name_is_bound_by_a_statement(module):
    source = pathlib.Path(module.__file__).read_text()
    assert "globals()" not in source and "setattr(" not in source
    tree = ast.parse(source)
    assert set(module.__all__) <= _bound_names(tree.body)
    assert "*" not in {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                       for a in n.names}
    assert set(module.__all__) <= set(dir(module))


def _class_body_names(cls) -> set[str]:
    """Names bound by statements in `cls`'s body, read from the source file that defines it."""
    tree = ast.parse(pathlib.Path(inspect.getsourcefile(cls)).read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    return _bound_names(node.body)


def test_every_tensor_method_of_the_table_is_in_the_class_body():
    """In the body of Tensor or of the base class (a mixin) that defines it, wherever that is."""
    owners = {r.name: next(c for c in af.Tensor.__mro__ if r.name in vars(c))
              for r in _api.on("Tensor")}
    bodies = {c: _class_body_names(c) for c in set(owners.values())}
    assert {n for n, c in owners.items() if n not in bodies[c]} == set()


def test_the_all_lists_hold_the_table():
    assert {r.name for r in _api.on("torch")} <= set(af.__all__) & set(dir(af))
    assert {r.name for r in _api.on("F")} == set(F.__all__)


# ---- adding a name is one row ------------------------------------------------------------------
NEW_ROW = "frobnicate    Tensor    torch Tensor    exp             frobnicate.default"


def test_adding_a_name_is_one_row(monkeypatch):
    """A new Tensor method plus its row gives the af.X forwarder and __all__ entries, the
    coverage page's lines and the ATen route: nothing else is edited."""
    from aneforge.docgen import torch_coverage as coverage_doc
    from aneforge import torch_import
    row = _api._row(NEW_ROW)
    monkeypatch.setattr(af.Tensor, "frobnicate", af.Tensor.exp, raising=False)
    monkeypatch.setattr(_api, "ROWS", _api.ROWS + (row,))
    blocks = _api.blocks()
    assert "def frobnicate(input: Tensor):" in blocks["forwarders.py", "forwarders"]
    assert "frobnicate" in blocks["functions.py", "forwarders"]          # re-exported
    assert '"frobnicate"' in blocks["__init__.py", "__all__"]
    assert coverage_doc.render().count("| `frobnicate` | native | `exp` |") == 2
    route = ("aten.frobnicate.default", "Tensor.frobnicate", "")
    assert route in _api.aten_routes()
    assert torch_import._route(*route[1:]) is af.Tensor.exp


@pytest.mark.parametrize("line", [
    "frobnicate    Tensor    torch Tensor    host",                 # a host row says why
    "frobnicate    Tensor    torch Tensor    exp  -- why",          # only host / no-op rows do
    "frobnicate    Module    torch           exp",                  # a home that is none
    "frobnicate    Tensor    torch Tensor",                         # how it runs is missing
])
def test_a_malformed_row_is_refused(line):
    with pytest.raises(ValueError, match="bad row"):
        _api._row(line)


def test_an_indented_line_continues_the_row_above():
    rows = _api._lines("""
a    Tensor  Tensor  host
     -- one
        two
b    F       F       decomposed
""")
    assert rows == ["a    Tensor  Tensor  host -- one two", "b    F       F       decomposed"]


def _strings(module) -> set[str]:
    """The string constants of a module's code, docstrings left out."""
    tree = ast.parse(pathlib.Path(module.__file__).read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return {n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs}


def test_the_readers_of_the_table_name_no_torch_name_of_their_own():
    """coverage_doc and torch_import take every torch name and ATen op from the table: a second
    map (`NATIVE = {"abs": "abs", ...}`, `"aten.exp.default": ...`) would show up here."""
    from aneforge.docgen import torch_coverage as coverage_doc
    from aneforge import torch_import
    names = {r.name for r in _api.ROWS} | {n for _, n, _ in _api.ABSENT}
    for module in (coverage_doc, torch_import):
        strings = _strings(module)
        assert not strings & names, module.__name__
        assert not {s for s in strings if s.startswith("aten.")}, module.__name__
    assert set(torch_import.routes()) == {op for op, _, _ in _api.aten_routes()}


# ---- one name, one result: smoke calls on every surface a row is on --------------------------
def _inputs():
    rng = np.random.default_rng(0)
    x = af.tensor(rng.standard_normal((2, 3)))
    y = af.tensor(rng.standard_normal((2, 3)))
    return x, y, x.abs() + 0.5, x > 0


def _args(name):
    x, y, pos, mask = _inputs()
    idx = af.tensor([[0, 2, 1], [1, 1, 0]])
    return {
        "abs": (x,), "add": (x, y), "all": (mask,), "amax": (x, 1), "amin": (x, 1),
        "any": (mask,), "argmax": (x, 1), "argmin": (x, 1), "chunk": (x, 2, 1),
        "clamp": (x, -0.5, 0.5), "clip": (x, -0.5, 0.5), "clone": (x,), "cos": (x,),
        "detach": (x,), "div": (x, pos), "eq": (x, y), "erf": (x,), "exp": (x,),
        "flatten": (x,), "ge": (x, y), "gt": (x, y), "le": (x, y), "log": (pos,),
        "log_softmax": (x, 1), "logical_not": (mask,), "lt": (x, y), "masked_fill": (x, mask, 0.0),
        "matmul": (x, y.t()), "max": (x, 1), "maximum": (x, y), "mean": (x, 1), "min": (x, 1),
        "minimum": (x, y), "movedim": (x, 0, 1), "mul": (x, y), "narrow": (x, 1, 0, 2),
        "ne": (x, y), "neg": (x,), "numel": (x,), "permute": (x, (1, 0)), "pow": (pos, 1.5),
        "reciprocal": (pos,), "relu": (x,), "reshape": (x, (3, 2)), "rsqrt": (pos,),
        "sigmoid": (x,), "sin": (x,), "softmax": (x, 1), "split": (x, 1, 1), "sqrt": (pos,),
        "square": (x,), "squeeze": (x.unsqueeze(0), 0), "std": (x, 1), "sub": (x, y),
        "sum": (x, 1), "swapaxes": (x, 0, 1), "t": (x,), "tanh": (x,), "transpose": (x, 0, 1),
        "unbind": (x, 1), "unsqueeze": (x, 0), "var": (x, 1),
        "conv2d": (x.reshape(1, 1, 2, 3), pos.reshape(1, 1, 2, 3)[..., :2]),
        "layer_norm": (x, (3,)), "rms_norm": (x, (3,)),
        "allclose": (x, y), "argsort": (x, 1), "avg_pool1d": (x.reshape(1, 2, 3), 2),
        "bmm": (x.reshape(1, 2, 3), y.reshape(1, 3, 2)), "mm": (x, y.reshape(3, 2)),
        "ceil": (x,), "clamp_": (x, -0.5, 0.5),
        "conv1d": (x.reshape(1, 2, 3), pos.reshape(1, 2, 3)[..., :2]),
        "conv_transpose2d": (x.reshape(1, 1, 2, 3), pos.reshape(1, 1, 2, 3)),
        "conv_transpose3d": (x.reshape(1, 1, 1, 2, 3), pos.reshape(1, 1, 1, 2, 3)),
        "copysign": (x, y), "cosine_similarity": (x, y), "cummax": (x, 1), "cummin": (x, 1),
        "cumprod": (x, 1), "cumsum": (x, 1), "diagonal": (x,), "fill_": (x, 2.0),
        "flip": (x, (0,)), "floor": (x,), "floor_divide": (x, pos), "fmod": (x, pos),
        "gather": (x, 1, idx), "group_norm": (x.reshape(1, 2, 3), 2), "isclose": (x, y),
        "logcumsumexp": (x, 1), "logsumexp": (x, 1), "max_pool1d": (x.reshape(1, 2, 3), 2),
        "max_pool2d": (x.reshape(1, 1, 2, 3), 2), "norm": (x,), "prod": (x, 1),
        "remainder": (x, pos), "roll": (x, 1, 1), "scatter": (x, 1, idx, y),
        "scatter_add": (x, 1, idx, y), "scatter_reduce": (x, 1, idx, y, "amax"), "sort": (x, 1),
        "tril": (x,), "triu": (x,), "trunc": (x,), "zero_": (x,),
        "addmm": (pos[:, :2], x, y.t()), "celu": (x,), "clamp_max": (x, 0.5), "clamp_min": (x, 0.5),
        "expm1": (x,), "log1p": (pos,), "multiply": (x, y), "negative": (x,),
        "outer": (x[0], y[1]), "selu": (x,), "sign": (x,), "subtract": (x, y), "tile": (x, (2,)),
        "true_divide": (x, pos), "addcdiv": (x, y, pos), "addcmul": (x, y, pos),
        "count_nonzero": (mask, 1), "diag": (x[0],), "lerp": (x, y, 0.25), "nan_to_num": (x,),
        "unflatten": (x, 1, (3, 1)), "select": (x, 1, -1), "index_select": (x, 1, af.tensor([2, 0])),
        "index_put": (x, (af.tensor([0, 1]),), y[0]), "index_put_": (x * 1, (af.tensor([0, 1]),), y[0]),
        "topk": (x, 2, 1),
        # random draws: probabilities of 0 and 1 only, so every surface draws the same
        "bernoulli": (mask.half(),), "multinomial": (af.tensor([[0.0, 2.0, 0.0], [1.0, 0, 0]]), 1),
        "tan": (x,), "atan": (x,), "asin": (x * 0.4,), "acos": (x * 0.4,), "sinh": (x,),
        "cosh": (x,), "asinh": (x,), "acosh": (pos + 1.0,), "atanh": (x * 0.4,), "log2": (pos,),
        "log10": (pos,), "exp2": (x,), "logaddexp": (x, y), "logaddexp2": (x, y),
        "round": (x * 4,), "isnan": (x,), "isinf": (x,), "isfinite": (x,),
        "bitwise_and": (idx, idx.flip(0)), "bitwise_or": (idx, idx.flip(0)),
        "bitwise_xor": (idx, idx.flip(0)), "bitwise_not": (idx,),
        "bitwise_left_shift": (idx, 3), "bitwise_right_shift": (idx - 2, 1), "logical_and": (x, y),
        "logical_or": (x, mask), "logical_xor": (mask, y),
        "repeat_interleave": (x, 2, 1),
        "argwhere": (x,), "nonzero": (x,), "masked_select": (x, mask),
        "masked_scatter": (x, mask, y), "unique": (idx,),
        "conv3d": (x.reshape(1, 1, 1, 2, 3), pos.reshape(1, 1, 1, 2, 3)[..., :2]), "view_as": (x, y.t()), "unfold": (x, 1, 2, 1),
    }[name]


def _adapted_calls(name):
    """Rows whose surfaces take torch's different signatures: surface -> call."""
    x, y, pos, mask = _inputs()
    idx, w = af.tensor([2, 0]), x.t()
    return {
        "where": {"torch": lambda: af.where(mask, x, y), "Tensor": lambda: x.where(mask, y)},
        "embedding": {"torch": lambda: af.embedding(w, idx), "F": lambda: F.embedding(idx, w)},
        "dropout": {"torch": lambda: af.dropout(x, 0.25, False),
                    "F": lambda: F.dropout(x, 0.25, training=False)},
        "binary_cross_entropy_with_logits": {
            "torch": lambda: af.binary_cross_entropy_with_logits(x, mask.half(), reduction=2),
            "F": lambda: F.binary_cross_entropy_with_logits(x, mask.half(), reduction="sum")},
        "kl_div": {"torch": lambda: af.kl_div(x, pos, reduction=2),
                   "F": lambda: F.kl_div(x, pos, reduction="sum")},
        "unfold": {"Tensor": lambda: x.reshape(1, 2, 1, 3).unfold(3, 2, 1).squeeze(2).transpose(
                       -1, -2).reshape(1, 4, 2),
                   "F": lambda: F.unfold(x.reshape(1, 2, 1, 3), (1, 2))},
        "batch_norm": {
            "torch": lambda: af.batch_norm(x, pos[0], y[0], None, None, True, 0.1, 1e-5),
            "F": lambda: F.batch_norm(x, None, None, pos[0], y[0], training=True)},
    }.get(name)


def _call(surface, name):
    args = _args(name)
    if surface == "Tensor":
        return getattr(args[0], name)(*args[1:])
    return getattr(OURS[surface], name)(*args)


def _values(result) -> list[np.ndarray]:
    if isinstance(result, tuple):
        return [v for r in result for v in _values(r)]
    return [result.numpy() if isinstance(result, af.Tensor) else np.asarray(result)]


@pytest.mark.parametrize("row", [r for r in _api.ROWS if len(r.surfaces) > 1],
                         ids=lambda r: r.name)
def test_one_name_gives_one_result_on_every_surface(row):
    calls = _adapted_calls(row.name) or {s: (lambda s=s: _call(s, row.name))
                                         for s in row.surfaces}
    assert set(calls) == set(row.surfaces)
    results = {s: _values(call()) for s, call in calls.items()}
    first = next(iter(results.values()))
    for surface, values in results.items():
        assert len(values) == len(first), f"{surface}.{row.name}"
        for value, expected in zip(values, first):
            np.testing.assert_array_equal(value, expected, err_msg=f"{surface}.{row.name}")
