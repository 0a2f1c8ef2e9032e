"""End to end: the digits CNN of examples/train_cnn.py trains side by side with torch (same
initial weights, same batches) to torch's accuracy and loss curve, with one compile for the
training step and one for the evaluation."""
import importlib.util
import io
from pathlib import Path

import numpy as np

import aneforge as af

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_cnn.py"
EPOCHS = 5                    # 110 steps of batch 64: both reach ~91% test accuracy


def load_example():
    spec = importlib.util.spec_from_file_location("train_cnn", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_digits_cnn_matches_torch_with_one_compile(tmp_path, capsys):
    ex = load_example()
    af.clear_cache()
    r = ex.main(["--epochs", str(EPOCHS), "--out", str(tmp_path)])
    a, t = r["aneforge"], r["torch"]
    assert a["steps"] == t["steps"] == EPOCHS * (1437 // 64)
    assert a["compiles"] == 1                # every training step runs one compiled program
    assert af.cache_info().hits == a["steps"] - 1
    assert af.cache_info().misses == 2       # + the evaluation forward
    assert abs(a["accuracy"] - t["accuracy"]) <= 0.01, (a["accuracy"], t["accuracy"])
    assert a["accuracy"] > 0.85
    # the loss at every step, fp16 engine vs fp32 torch: measured within 1.4% over 110 steps
    np.testing.assert_allclose(a["losses"], t["losses"], rtol=0.03)
    assert np.mean(np.abs(np.subtract(a["losses"], t["losses"])) / t["losses"]) < 0.01
    out = capsys.readouterr().out
    assert "test accuracy" in out and "compiles" in out
    assert (tmp_path / "train_cnn_loss.png").stat().st_size > 10_000


def test_progress_is_one_line_per_epoch_off_a_terminal(capsys):
    """Captured stdout is not a terminal: no bar redraws, one line per epoch and framework."""
    ex = load_example()
    train, test = ex.load_data(0)
    af.manual_seed(0)
    model = ex.make_model(2, 4)
    small = (train[0][:256], train[1][:256])
    ex.train_aneforge(model, small, test, 3, 64, 3e-3, 1e-2, True)
    ex.train_torch(ex.torch_twin(model), small, test, 3, 64, 3e-3, 1e-2, True)
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":")[0].strip() for ln in lines] == (
        [f"aneforge epoch {e}/3" for e in (1, 2, 3)] + [f"torch epoch {e}/3" for e in (1, 2, 3)])
    assert "\r" not in "".join(lines)


def test_progress_draws_a_bar_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True
    load_example()                      # puts examples/ (and its _common.py) on sys.path
    common = importlib.import_module("_common")
    stream = Terminal()
    log = common.Progress("aneforge", total=6, epochs=3, stream=stream)
    for k in range(6):
        log.step(1.0 / (k + 1))
    log.close()
    assert "\r" in stream.getvalue() and "epoch" not in stream.getvalue()
    assert "6/6" in stream.getvalue()


def test_profile_shows_the_im2col_route():
    """The step program trains the convolutions without a conv op (whose weight the engine
    needs constant): im2col slices and matmuls, weights as program inputs, M1-compilable."""
    from aneforge.hardware import kernels
    kernels.wait()          # both programs on the full kernels, no compile beside the timing
    ex = load_example()
    p = ex.profile(batch_size=16, repeat=3)
    assert "conv" not in p["step_ops"] and "conv" not in p["conv_ops"]
    assert p["step_ops"]["matmul"] >= 6 and p["conv_ops"]["slice_by_index"] >= 9
    assert p["compiles_on_m1"]
    assert 0 < p["conv_ms"] < p["step_ms"]
    assert "of the step" in ex.profile_text(p)
