"""End to end: the digits MLP trains to torch's accuracy with one compile for the step."""
import importlib.util
from pathlib import Path

import numpy as np

import aneforge as af

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train_mlp.py"


def load_example():
    spec = importlib.util.spec_from_file_location("train_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_digits_mlp_matches_torch_with_one_compile():
    ex = load_example()
    train, test = ex.load_data(0)
    af.manual_seed(0)
    model = ex.make_model(64)
    twin = ex.torch_twin(model)
    hp = (6, 64, 3e-3, 1e-2, False)
    af.clear_cache()
    a = ex.train_aneforge(model, train, test, *hp)
    t = ex.train_torch(twin, train, test, *hp)
    assert a["compiles"] == 1                # every training step runs one compiled program
    assert af.cache_info().hits == a["steps"] - 1
    assert af.cache_info().misses == 2       # + the evaluation forward
    assert abs(a["accuracy"] - t["accuracy"]) <= 0.02, (a["accuracy"], t["accuracy"])
    assert a["accuracy"] > 0.9
    np.testing.assert_allclose(np.mean(a["losses"][-22:]), np.mean(t["losses"][-22:]), rtol=0.05)
