"""The docs hold together: every relative link and every repository file they name exists,
docs/index.md maps every page and notebook, nothing tells users to install aneforge from the
package index (the name there belongs to another project: installs are `pip install -e .` from
a clone), and nothing points at files outside the repository or at internal fact numbers."""
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# Projects the docs cite by their own file paths (`docs/faq.md` of ANEForge is not ours).
EXTERNAL = ("ANEForge", "ane-guide", "coremltools", "tmc/apple", "Core ML's", "MIL.proto",
            "makemore", "nanoGPT", "pytorch/examples")     # (docs/torch_code.md's programs)
WINDOW = 80
TOP = {p.name for p in ROOT.iterdir() if not p.name.startswith(".") or p.name == ".ci"}
PACKAGE = {p.name for p in (ROOT / "aneforge").iterdir() if p.is_dir()}
GENERATED = ("examples/out/",)          # what the examples write when they run


def _rel(p: Path) -> str:
    return str(p.relative_to(ROOT))


def notebook_markdown(path: Path) -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                     if c["cell_type"] == "markdown")


def notebook_text(path: Path) -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])


def documents() -> list[tuple[str, Path, str]]:
    """(name, directory links resolve from, markdown text) for each page and notebook."""
    docs = [(_rel(p), p.parent, p.read_text()) for p in PAGES]
    return docs + [(_rel(p), p.parent, notebook_markdown(p)) for p in NOTEBOOKS]


DOCUMENTS = documents()


# ---- links --------------------------------------------------------------------------------
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    return {slug(m) for m in re.findall(r"^#+\s+(.*)$", text, re.M)}


def link_problems(text: str, base: Path) -> list[str]:
    """Relative links whose file (or #anchor in a markdown file) does not exist."""
    problems = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):            # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (base / path).resolve() if path else None
        if file is not None and not file.exists():
            problems.append(f"link {target!r}: no file {path}")
            continue
        if anchor and (file is None or file.suffix == ".md"):
            page = file.read_text() if file else text
            if anchor not in anchors(page):
                problems.append(f"link {target!r}: no heading with anchor #{anchor}")
    return problems


# ---- backticked repository paths ----------------------------------------------------------
BACKTICKED = re.compile(r"`([^`\s]+)`")


def blocks(text: str) -> list[str]:
    """Paragraphs, list items and table rows, each joined into one line."""
    out: list[list[str]] = []
    for line in text.splitlines():
        starts = not line.strip() or re.match(r"\s*([-*|]|\d+\.)\s", line) or not out
        if starts:
            out.append([])
        out[-1].append(line.strip())
    return [" ".join(b) for b in out]


def repo_path(token: str) -> str | None:
    """The repository path a backticked token names, or None when it names none: a path from
    the repository root (`docs/mil.md`, `.ci/run`), one inside the package (`runtime/sim.py`,
    `mil/`), or a file name (`test_step.py`)."""
    token = token.rstrip(".,:;)")
    if any(c in token for c in "<>*$~@(){}=\"'") or "..." in token or token.startswith(("/", "-")):
        return None
    first = token.split("/")[0]
    if "/" in token and first in TOP:
        return token
    if "/" in token and first in PACKAGE:
        return "aneforge/" + token
    if "/" not in token and re.fullmatch(r"[\w.-]+\.(py|md|csv|ipynb|toml)", token):
        return token
    return None


def _file_names() -> set[str]:
    """Every file name in the repository (not under hidden directories such as .venv, .git)."""
    names = set()
    for here, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        names.update(files)
    return names


FILE_NAMES = _file_names()


def exists(path: str) -> bool:
    """A file or directory; a module named without `.py` (`ir/validate`); a name inside a module
    (`ir/signature.structure`); a bare file name anywhere in the repository."""
    if path.startswith(GENERATED):
        return True
    if "/" not in path:
        return path in FILE_NAMES
    p = ROOT / path.rstrip("/")
    module = p.with_name(p.name.split(".")[0])
    return p.exists() or p.with_suffix(".py").exists() or module.with_suffix(".py").exists()


def path_problems(text: str) -> list[str]:
    """Backticked repository paths that do not exist. A path is another project's when one of
    the EXTERNAL names, or another such path, comes less than WINDOW characters before it in
    the same paragraph, list item or table row (ANEForge `docs/faq.md`, `docs/glossary.md`)."""
    problems = []
    for block in blocks(text):
        last_external = None
        for m in BACKTICKED.finditer(block):
            for name in EXTERNAL:
                at = block.rfind(name, 0, m.start())
                if at >= 0:
                    last_external = max(last_external or 0, at + len(name))
            if last_external is not None and m.start() - last_external < WINDOW:
                last_external = m.end()
                continue
            path = repo_path(m.group(1))
            if path and not exists(path):
                problems.append(f"`{m.group(1)}` names {path}, which does not exist")
    return problems


@pytest.mark.parametrize("name,base,text", DOCUMENTS, ids=[d[0] for d in DOCUMENTS])
def test_relative_links_exist(name, base, text):
    problems = link_problems(text, base)
    assert not problems, f"{name}: " + "; ".join(problems)


@pytest.mark.parametrize("name,base,text", DOCUMENTS, ids=[d[0] for d in DOCUMENTS])
def test_named_repository_files_exist(name, base, text):
    problems = path_problems(text)
    assert not problems, f"{name}: " + "; ".join(problems)


def test_link_and_path_checks_catch_what_is_missing():
    docs = ROOT / "docs"
    assert link_problems("[m](mil.md) [x](https://example.com) [s](#a-b)\n## A, b", docs) == []
    assert link_problems("[gone](nothere.md)", docs) == ["link 'nothere.md': no file nothere.md"]
    assert link_problems("[a](macos.md#no-such-heading)", docs) == [
        "link 'macos.md#no-such-heading': no heading with anchor #no-such-heading"]
    fine = ("`docs/mil.md`, `runtime/sim.py`, `ir/validate`, `ir/signature.structure`, `mil/`, "
            "`test_step.py`, `examples/out/x.png`, ANEForge `docs/faq.md`, `~/Library/x.py`\n"
            "- ANEForge (its site): the numerics (`docs/numeric-cliffs.md`,\n  `docs/a.md`), "
            "and the caps (`docs/b.md`)")
    assert path_problems(fine) == []
    assert path_problems("- ANEForge `docs/faq.md`\n- ours: `docs/nothere.md`") == [
        "`docs/nothere.md` names docs/nothere.md, which does not exist"]
    assert path_problems("see `docs/nothere.md` and `runtime/gone.py` and `gone.py`") == [
        "`docs/nothere.md` names docs/nothere.md, which does not exist",
        "`runtime/gone.py` names aneforge/runtime/gone.py, which does not exist",
        "`gone.py` names gone.py, which does not exist"]


# ---- the map ------------------------------------------------------------------------------
def test_index_maps_every_page_and_notebook():
    index = (ROOT / "docs" / "index.md").read_text()
    missing = [p.name for p in PAGES[:-1] if p.name != "index.md" and f"({p.name})" not in index]
    missing += [_rel(p) for p in NOTEBOOKS if p.name not in index]
    assert not missing, f"docs/index.md does not list {missing}: add a line for each"


def test_readme_links_the_index_and_the_examples():
    readme = (ROOT / "README.md").read_text()
    assert "(docs/index.md)" in readme
    for example in ("examples/train_mlp.py", "notebooks/"):
        assert example in readme


# ---- what the text may not say ------------------------------------------------------------
def user_facing_files() -> list[Path]:
    """Docs, notebooks, examples and the package's own source (docstrings)."""
    files = PAGES + NOTEBOOKS + sorted((ROOT / "examples").rglob("*.py"))
    return files + sorted((ROOT / "aneforge").rglob("*.py"))


def text_of(path: Path) -> str:
    return notebook_text(path) if path.suffix == ".ipynb" else path.read_text()


PIP_FROM_INDEX = re.compile(r"""pip3? install\s+(?:-{1,2}[\w-]+\s+)*["']?aneforge\b""")
INTERNAL = [(re.compile(p), why) for p, why in [
    (r"\bshared/", "a file outside the repository"),
    (r"DESIGN\.md|ANE_FACTS|facts_(?:numerics|limits|datapath)|macos_routes\.md",
     "an internal design or fact file"),
    (r"(?i)\bseeds?/|\bseed \d{3}\b|\bthe seed'?s?\b", "an internal seed reference"),
    (r"\b[NDLQRS]\d{1,2}\b|\bfacts? [A-Z]\d", "an internal fact number"),
]]


def text_problems(text: str) -> list[str]:
    problems = [f"tells users to install from the package index: {m.group(0)!r} (the name "
                "belongs to another project; write `pip install -e .` from a clone)"
                for m in PIP_FROM_INDEX.finditer(text)]
    return problems + [f"{m.group(0)!r}: {why}; state the fact and its public source instead"
                       for pattern, why in INTERNAL for m in pattern.finditer(text)]


@pytest.mark.parametrize("path", user_facing_files(), ids=_rel)
def test_no_index_installs_or_internal_references(path):
    problems = text_problems(text_of(path))
    assert not problems, f"{_rel(path)}: " + "; ".join(problems)


def test_text_checks_catch_what_they_should():
    for bad in ('pip install aneforge', 'pip install "aneforge[fast]"', "pip install -U aneforge",
                "see shared/ANE_FACTS.md", "as in DESIGN.md", "fact N23", "(N5)", "D3", "seed 001",
                "Seed 003", "the seed's passes"):
        assert text_problems(bad), bad
    for fine in ('pip install -e ".[test]"', "pip install -e .", "af.manual_seed(0)", "M1 and M4",
                 "A13 family", "h13", "F0 DMA", "the dyld shared cache"):
        assert not text_problems(fine), fine


def test_ci_runs_the_readme_test_command():
    """.ci/run is the README's test command, word for word (pip's -q aside)."""
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1].replace(" -q ", " ")
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert ci in [b.strip() for b in blocks], f".ci/run runs {ci!r}, not a README command"


def test_the_longest_tests_first_table_names_tests_that_exist():
    """conftest.py's LONGEST_FIRST orders the suite by node-id prefixes: a renamed test would
    drop out of it silently and run late again."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    for prefix in conftest.LONGEST_FIRST:
        path, name = prefix.split("::")
        assert re.search(rf"^def {re.escape(name)}", (ROOT / path).read_text(), re.M), prefix
