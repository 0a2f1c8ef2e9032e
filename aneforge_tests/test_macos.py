"""On a Mac: the op table and a training step on each available hardware backend (`ane`,
`coreml`), against torch (the op table's tolerances) and the simulator.

Skipped elsewhere: these backends call macOS frameworks. Nothing here has run on hardware yet
(docs/macos.md says how to run it and report results).
"""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(sys.platform != "darwin",
                                reason="runs the coreml and ane backends: needs macOS (Apple Silicon)")

if sys.platform == "darwin":
    import torch

    import aneforge as af
    from aneforge.runtime import BACKENDS
    from optable import CASES, arrays, call, torch_inputs
    from test_ops import abs_reference, check, run_af
else:
    CASES = []

# The ane backend refuses more than ~100 programs per process (the OS limit is about 110-128),
# so its op-table run happens in child processes of BATCH cases each.
BATCH = 80
ONLY = os.environ.get("ANEFORGE_MACOS_BACKEND")         # set in those children
IN_BATCH = os.environ.get("ANEFORGE_OPTABLE_BATCH")
TABLE = CASES if IN_BATCH is None else CASES[int(IN_BATCH) * BATCH:(int(IN_BATCH) + 1) * BATCH]


@pytest.fixture(params=[ONLY] if ONLY else ["ane", "coreml"])
def backend(request):
    name = request.param
    ok, why = BACKENDS[name].available()
    if not ok:
        pytest.skip(f"backend {name!r} unavailable: {why}")
    af.set_backend(name)
    yield name
    af.set_backend("sim")


def _on(name, fn):
    af.set_backend(name)
    try:
        return fn()
    finally:
        af.set_backend("sim")


@pytest.mark.parametrize("case", TABLE, ids=lambda c: c.name)
def test_op_table_against_torch_and_the_simulator(backend, case):
    if backend == "ane" and IN_BATCH is None:
        pytest.skip("on ane the op table runs in child processes: test_op_table_on_ane_in_batches")
    xs = arrays(case)
    got = run_af(case)
    want = call(case, torch, torch_inputs(xs))
    for i, (g, w, r) in enumerate(zip(got, want, abs_reference(case, xs))):
        check(case, i, g, w, r)
    sim = _on("sim", lambda: [t.numpy() for t in run_af(case)])
    af.set_backend(backend)
    for i, (g, s) in enumerate(zip(got, sim)):
        a, b = g.numpy().astype(np.float64), s.astype(np.float64)
        np.testing.assert_allclose(a, b, rtol=2 ** -9, atol=2 ** -14, equal_nan=True,
                                   err_msg=f"{case.name} output {i}: {backend} vs the simulator")


@pytest.mark.parametrize("batch", range(math.ceil(len(CASES) / BATCH)))
def test_op_table_on_ane_in_batches(batch):
    ok, why = BACKENDS["ane"].available()
    if not ok:
        pytest.skip(f"backend 'ane' unavailable: {why}")
    env = {**os.environ, "ANEFORGE_OPTABLE_BATCH": str(batch), "ANEFORGE_MACOS_BACKEND": "ane"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q",
                        f"{__file__}::test_op_table_against_torch_and_the_simulator"],
                       cwd=os.path.dirname(os.path.dirname(__file__)), env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-2000:]


def _train(steps=3):
    af.manual_seed(0)
    model = af.nn.Sequential(af.nn.Linear(16, 32), af.nn.ReLU(), af.nn.Linear(32, 4))
    opt = af.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = af.randn(8, 16), af.randn(8, 4)
    losses = []
    for _ in range(steps):
        loss = af.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, [p.numpy() for p in model.parameters()]


def test_training_step_matches_the_simulator(backend):
    losses, params = _train()
    sim_losses, sim_params = _on("sim", _train)
    af.set_backend(backend)
    np.testing.assert_allclose(losses, sim_losses, rtol=2e-2)
    for p, q in zip(params, sim_params):
        np.testing.assert_allclose(p.astype(np.float64), q.astype(np.float64), rtol=2e-2, atol=2e-3)


def test_changing_one_input_element_changes_only_its_output(backend):
    fn = af.load_mil("""program(1.3) { func main<ios18>(tensor<fp16, [1, 64, 1, 64]> x) {
        tensor<fp16, [1, 64, 1, 64]> y = add(x = x, y = x)[name = string("y")]; } -> (y); }""")
    x = np.random.default_rng(0).standard_normal((1, 64, 1, 64)).astype(np.float16)
    np.testing.assert_array_equal(fn(x), 2 * x)
    x[0, 5, 0, 7] = 3
    np.testing.assert_array_equal(fn(x), 2 * x)


def test_coreml_reports_placement_and_reuses_its_compiled_model():
    if not BACKENDS["coreml"].available()[0]:
        pytest.skip(f"coreml unavailable: {BACKENDS['coreml'].available()[1]}")
    from aneforge.mil.text import parse
    p = parse(RELU)
    exe = BACKENDS["coreml"].compile(p, af.get_numerics())
    assert os.path.isdir(exe.path) and exe.path.endswith(".mlmodelc")
    report = exe.placement()
    assert [r.op for r in report["rows"] if r.outputs == "y"] == ["relu"]
    again = BACKENDS["coreml"].compile(p, af.get_numerics())
    assert again.path == exe.path


RELU = """program(1.3) { func main<ios18>(tensor<fp16, [1, 256, 32, 32]> x) {
    tensor<fp16, [1, 256, 32, 32]> y = relu(x = x)[name = string("y")]; } -> (y); }"""


def test_coreml_compiled_model_is_reused_across_processes(tmp_path, monkeypatch):
    ok, why = BACKENDS["coreml"].available() if sys.platform == "darwin" else (False, "")
    if not ok:
        pytest.skip(f"coreml unavailable: {why}")
    from aneforge.mil.text import parse
    from aneforge.runtime import coreml
    monkeypatch.setenv("ANEFORGE_CACHE_DIR", str(tmp_path))
    code = ("import aneforge as af; from aneforge.runtime import BACKENDS; from aneforge.mil.text import parse; "
            f"BACKENDS['coreml'].compile(parse({RELU!r}), af.get_numerics())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr

    def recompile(*args):
        raise AssertionError("compiled again although another process left the .mlmodelc")
    monkeypatch.setattr(coreml._CoreML, "compile_to", recompile)
    exe = BACKENDS["coreml"].compile(parse(RELU), af.get_numerics())
    assert exe.path.startswith(str(tmp_path))
    x = np.random.default_rng(1).standard_normal((1, 256, 32, 32)).astype(np.float16)
    np.testing.assert_array_equal(exe.run([x])[0], np.maximum(x, 0))


def test_ane_compiles_for_the_neural_engine_alone():
    ok, why = BACKENDS["ane"].available() if sys.platform == "darwin" else (False, "")
    if not ok:
        pytest.skip(f"ane unavailable: {why}")
    from aneforge.mil.text import parse
    exe = BACKENDS["ane"].compile(parse(RELU), af.get_numerics())
    assert exe.placement() == {"segments": ["ane"], "ane_only": True}
    x = np.random.default_rng(1).standard_normal((1, 256, 32, 32)).astype(np.float16)
    np.testing.assert_array_equal(exe.run([x])[0], np.maximum(x, 0))
