"""The package's layers import one way (docs/architecture.md, "Layers").

The import graph is read from the source (every `import` and `from ... import`, including the
lazy ones inside functions: a lazy import is still a dependency). No cycle is allowed anywhere
in the package; the only edges left out are those of a package `__init__` that only re-exports
(its body is imports, `__all__` and a docstring), since importing a name through a package is
not a dependency of the package on its importers.
"""
from __future__ import annotations

import ast
import functools
import pathlib
import subprocess
import sys

import pytest

import aneforge

ROOT = pathlib.Path(aneforge.__file__).parent
BELOW_THE_FRONT = ("aneforge.ir", "aneforge.passes", "aneforge.runtime", "aneforge.mil")

# docs/architecture.md's layer drawing, bottom to top: a module imports only from its own layer
# or below (the longest matching prefix names a module's layer).
LAYERS = (
    ("aneforge.errors", "aneforge.dtypes", "aneforge.context", "aneforge.hardware",
     "aneforge.devices", "aneforge.random", "aneforge.absent",
     "aneforge.random_kernels", "aneforge.random_compiled"),
    ("aneforge.ir",),
    ("aneforge.ops",),
    ("aneforge.core.trace",),
    ("aneforge.core.boundary",),
    ("aneforge.passes", "aneforge.runtime", "aneforge.mil"),
    ("aneforge.core", "aneforge.core.plan"),
    ("aneforge.tensor.elementwise", "aneforge.tensor.composites", "aneforge.tensor.products",
     "aneforge.tensor.reduce",
     "aneforge.tensor.movement", "aneforge.tensor.scan", "aneforge.tensor.indexing",
     "aneforge.tensor.inplace", "aneforge.tensor.casts", "aneforge.tensor.random",
     "aneforge.tensor.args", "aneforge.tensor.assign", "aneforge.tensor.highrank",
     "aneforge.tensor.base", "aneforge.tensor.grad_fn"),
    ("aneforge.autograd",),
    ("aneforge.tensor",),
    ("aneforge.nn", "aneforge.optim", "aneforge.amp", "aneforge.functions",
     "aneforge.forwarders", "aneforge.adapters",
     "aneforge.creation", "aneforge.linalg", "aneforge._api", "aneforge.cuda",
     "aneforge.utils", "aneforge.backends", "aneforge.distributed", "aneforge.onnx"),
    ("aneforge.replay", "aneforge.explain", "aneforge.serialization", "aneforge.torch_import",
     "aneforge.testing", "aneforge.bench", "aneforge.docgen", "aneforge", "aneforge.exported"),
)


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    """Module name -> (file, is a package)."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


def _imported(node, package: str, modules) -> list[str]:
    """The dotted names one import statement reaches (`from a import b`: a.b if that is a
    module, else a); `package` is the package the importing module lives in."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]


def import_graph() -> dict[str, set[str]]:
    """aneforge module -> the aneforge modules it imports (a fresh copy each call: tests plant
    edges in theirs)."""
    return {m: set(deps) for m, deps in _read_graph().items()}


@functools.cache
def _read_graph() -> dict[str, frozenset[str]]:
    """The graph read from the source once a session (parsing every file takes seconds)."""
    modules = _modules()
    graph = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                deps.update(_imported(node, package, modules))
        graph[name] = frozenset(d for d in deps if d in modules and d != name)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while not comp or comp[-1] != v:
                        comp.append(stack.pop())
                        on_stack.discard(comp[-1])
                    out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                on_stack.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on_stack:
                low[v] = min(low[v], index[w])
    return out


def _in(module: str, layers) -> bool:
    return any(module == p or module.startswith(p + ".") for p in layers)


@functools.cache
def _reexports_only(path: pathlib.Path) -> bool:
    """A package `__init__` whose body is imports, `__all__` and a docstring."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            continue
        return False
    return True


def cycles() -> list[list[str]]:
    """The import cycles (strongly connected groups of more than one module), the edges of
    re-export-only package `__init__` files left out."""
    modules, graph = _modules(), import_graph()
    graph = {m: set() if modules[m][1] and _reexports_only(modules[m][0]) else deps
             for m, deps in graph.items()}
    return [c for c in strongly_connected(graph) if len(c) > 1]


def test_the_graph_sees_lazy_imports(tmp_path):
    graph = import_graph()
    assert "aneforge.autograd" in graph["aneforge.tensor.core"]
    assert "aneforge.ops.registry" in graph["aneforge.ops"]     # `from .registry import ...`
    lazy = tmp_path / "m.py"
    lazy.write_text("def f():\n    from .x import y\n")
    assert [type(n).__name__ for n in ast.walk(ast.parse(lazy.read_text()))
            if isinstance(n, (ast.Import, ast.ImportFrom))] == ["ImportFrom"]


def test_no_import_cycle_anywhere():
    found = cycles()
    assert not found, "import cycles (a lazy import inside a function counts too):\n" + "\n".join(
        f"  {len(c)} modules: {', '.join(c)}" for c in found)


def test_the_cycle_check_sees_a_cycle(monkeypatch):
    real = import_graph()
    knot = {**real, "aneforge.tensor.movement": real["aneforge.tensor.movement"] | {
        "aneforge.tensor.core"}}
    monkeypatch.setitem(globals(), "import_graph", lambda: knot)
    assert any("aneforge.tensor.core" in c and "aneforge.tensor.movement" in c for c in cycles())


def test_tensor_families_never_import_the_tensor_class():
    graph = import_graph()
    families = [m for m in graph if m.startswith("aneforge.tensor.") and m != "aneforge.tensor.core"]
    up = {m: sorted(d for d in graph[m] if d in ("aneforge.tensor", "aneforge.tensor.core"))
          for m in families}
    assert not {m: d for m, d in up.items() if d}, up


def test_no_cycle_runs_through_ir_passes_runtime_or_mil():
    cycles = [c for c in strongly_connected(import_graph()) if len(c) > 1]
    bad = [c for c in cycles if any(_in(m, BELOW_THE_FRONT) for m in c)]
    assert not bad, "import cycles through ir/passes/runtime/mil:\n" + "\n".join(
        f"  {len(c)} modules: {', '.join(c)}" for c in bad)


def layer_of(module: str) -> int | None:
    best = None
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if _in(module, (prefix,)) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    return None if best is None else best[0]


def test_every_module_has_a_layer_and_imports_only_downward():
    graph = import_graph()
    assert not [m for m in graph if layer_of(m) is None], "modules missing from LAYERS"
    up = sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps
                if layer_of(d) > layer_of(m))
    assert not up, "imports up the layers (docs/architecture.md, Layers):\n  " + "\n  ".join(up)


def test_ir_imports_nothing_from_ops():
    graph = import_graph()
    reach = {m: sorted(d for d in deps if _in(d, ("aneforge.ops",)))
             for m, deps in graph.items() if _in(m, ("aneforge.ir",))}
    reach = {m: d for m, d in reach.items() if d}
    assert not reach, f"aneforge.ir reaches up to the op registry: {reach}"


def test_passes_runtime_and_mil_stay_below_the_front():
    front = ("aneforge.tensor", "aneforge.autograd", "aneforge.core.realization", "aneforge.optim",
             "aneforge.nn", "aneforge.functions", "aneforge.creation", "aneforge.core.trace",
             "aneforge.adapters")
    graph = import_graph()
    up = {m: sorted(d for d in deps if _in(d, front) or d == "aneforge")
          for m, deps in graph.items() if _in(m, BELOW_THE_FRONT[1:])}
    up = {m: d for m, d in up.items() if d}
    assert not up, f"passes/runtime/mil import the torch-facing front: {up}"


def test_import_aneforge_does_not_import_torch():
    code = "import sys, aneforge; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=str(ROOT.parent))
    assert out.stdout.strip() == "False"


def test_the_layer_check_sees_an_upward_import(monkeypatch):
    real = import_graph()
    planted = {**real, "aneforge.ops.registry": real["aneforge.ops.registry"] | {
        "aneforge.tensor.core"}}
    monkeypatch.setitem(globals(), "import_graph", lambda: planted)
    with pytest.raises(AssertionError, match="aneforge.ops.registry -> aneforge.tensor.core"):
        test_every_module_has_a_layer_and_imports_only_downward()
