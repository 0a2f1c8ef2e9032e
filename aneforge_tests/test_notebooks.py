"""Every notebook in notebooks/ runs top to bottom in a fresh kernel, and is stored without
outputs (so the repository shows code, not stale results).

A new notebook is picked up by name: nothing to register. Each one gets TIMEOUT seconds for
the whole run (and per cell); keep a notebook well under a minute on two cores.
"""
import json
import os
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TIMEOUT = 180           # seconds per notebook; the notebooks aim for < 60 s on a loaded 2-core CI


def _ids(paths):
    return [p.stem for p in paths]


def test_there_are_notebooks():
    assert {"quickstart", "training_vs_torch", "mil_by_hand", "targets"} <= {
        p.stem for p in NOTEBOOKS}


def stored_output_problems(nb: dict) -> list[str]:
    """What a committed notebook should not carry: outputs, execution counts."""
    problems = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        if cell.get("outputs"):
            problems.append(f"cell {i} has {len(cell['outputs'])} output(s)")
        if cell.get("execution_count") is not None:
            problems.append(f"cell {i} has execution_count {cell['execution_count']}")
    return problems


def test_stored_output_check_catches_outputs():
    cell = {"cell_type": "code", "source": "1", "outputs": [{"output_type": "stream"}],
            "execution_count": 3, "metadata": {}}
    assert stored_output_problems({"cells": [cell]}) == [
        "cell 0 has 1 output(s)", "cell 0 has execution_count 3"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_outputs_are_stripped(path):
    problems = stored_output_problems(json.loads(path.read_text()))
    assert not problems, (f"{path.name}: {'; '.join(problems)}. Strip outputs before "
                          "committing (Jupyter: Edit > Clear All Outputs, or "
                          "`jupyter nbconvert --clear-output --inplace`)")


def _kernel_env() -> dict:
    """The kernel imports aneforge from this checkout (plots use ipykernel's inline backend,
    which needs no display)."""
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), path]))}


# Shorter training runs under test: a cell with these assignments runs after the notebook's
# cell tagged "parameters" (papermill's convention). Each notebook still trains both
# frameworks, compares them, plots and decodes as users see it, in fewer steps: what this test
# checks is that every cell runs, which no step count past the first few changes (measured,
# CPU of the notebook's cells, A/B: train_charlm 19-21 s at 100 steps, 14-14.5 s at 40;
# train_cnn 16.5 s at 5 epochs, 15.6 s at 1). train_charlm's 20 steps are one logging window
# (log_every=20): its loss table keeps a row, and its steps after the first cost ~80 ms each.
SHORTER = {"train_charlm": "STEPS = 20", "train_cnn": "EPOCHS = 1",
           "training_vs_torch": "EPOCHS = 1"}


def shortened(nb, name: str):
    """`nb` with SHORTER's cell after its parameters cell (notebooks not in SHORTER as they
    are)."""
    import nbformat
    if name in SHORTER:
        (at,) = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
        nb.cells.insert(at + 1, nbformat.v4.new_code_cell(SHORTER[name]))
    return nb


@pytest.mark.parametrize("name", SHORTER)
def test_the_shorter_runs_set_the_notebooks_parameters(name):
    """Each override assigns only names the notebook's parameters cell assigns (a renamed
    parameter would otherwise leave the full run under test, or fail late)."""
    nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
    (cell,) = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    assigned = {n.strip() for n in "".join(cell["source"]).split("=")[0].split(",")}
    assert {n.strip() for n in SHORTER[name].split("=")[0].split(",")} <= assigned


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs(path, monkeypatch):
    import nbclient                     # the test extra installs nbclient, nbformat, ipykernel
    import nbformat
    monkeypatch.delenv("MPLBACKEND", raising=False)
    for k, v in _kernel_env().items():
        monkeypatch.setenv(k, v)
    nb = shortened(nbformat.read(path, as_version=4), path.stem)
    client = nbclient.NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3",   # cwd: as
                                     resources={"metadata": {"path": str(path.parent)}})  # Jupyter
    start = time.perf_counter()
    client.execute()                    # raises CellExecutionError naming the failing cell
    seconds = time.perf_counter() - start
    assert seconds < TIMEOUT, f"{path.name} took {seconds:.0f} s (limit {TIMEOUT} s)"
