"""examples/check_ane.py's deciding probes, off the device: the programs build and run on the
simulator, the hypotheses' predictions reproduce the published M1 measurements, each open-point
probe separates its hypotheses, and the interpretation is checked on fake engine values."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples"))
import check_ane as C  # noqa: E402

M1 = C.M1
OPEN_POINTS = ("drop_toward_zero", "drop_negative", "carry", "tile_width", "exact_products")


@pytest.mark.parametrize("name", [n for n, row in C.DECIDING.items() if row[3] is not None])
def test_the_published_model_reproduces_each_measured_row(name):
    a, b, hypotheses, published, _ = C.DECIDING[name]
    assert C.predictions(a, b, hypotheses)[M1] == published


@pytest.mark.parametrize("name", OPEN_POINTS)
def test_each_open_point_probe_separates_its_hypotheses(name):
    a, b, hypotheses, _, _ = C.DECIDING[name]
    got = C.predictions(a, b, hypotheses)
    assert got[M1] != got[hypotheses[1]]


def test_predictions_of_the_open_points_are_the_published_ones():
    want = {"drop_toward_zero": (2, 4), "drop_negative": (-2, -4), "carry": (2, 4),
            "tile_width": (1, 0), "exact_products": (0.0473633, 0.046875)}
    for name, (m1, other) in want.items():
        a, b, hypotheses, _, _ = C.DECIDING[name]
        got = C.predictions(a, b, hypotheses)
        assert got[M1] == pytest.approx(m1, abs=1e-6) and got[hypotheses[1]] == pytest.approx(other)


def test_the_other_models_predict_what_they_say():
    assert C.tile_dot([4096] + [1] * 1024, [1] * 1025, narrow=True) == 4096      # stalls
    assert C.tile_dot([4096] + [1] * 1024, [1] * 1025, wide=True) == 5120        # exact
    assert C.tile_dot([16384, 16384], [1, 1]) == float("inf")                  # the port
    assert C.tile_dot([2 ** -20, 2 ** -20], [1, 1], flush=False) == 2 ** -19


def test_verdicts_on_fake_engine_values():
    predicted = {M1: 2.0, "adder rounds to nearest": 4.0, "fp16 products, fp32 sum": 3.0}
    assert C.verdict(2.0, predicted) == f"supports {M1}"
    assert C.verdict(4.0, predicted) == "supports adder rounds to nearest"
    assert C.verdict(5.0, predicted).startswith("none of the hypotheses")
    assert C.verdict(None, predicted).startswith("no value")
    assert C.verdict(16.0, {M1: 16.0, "x": 16.0}).startswith("consistent with all of")
    assert C.verdict(float("inf"), {M1: float("inf"), "y": 32768.0}) == f"supports {M1}"


def test_every_deciding_probe_runs_on_the_simulator_and_is_explained():
    rows = C.deciding_probes("sim")
    assert [r["probe"] for r in rows] == list(C.DECIDING)
    for r in rows:
        assert r["value"] == r["sim"] and "error" not in r
        assert not r["verdict"].startswith(("none", "no value")), C.describe(r)
        assert r["probe"] in C.describe(r)


def test_the_issue_block_is_json_with_every_probe():
    rows = [{"probe": n, "value": 1.0, "verdict": "supports x"} for n in C.DECIDING]
    report = {"machine": {"chip": "Apple M1", "macos": "15.1"},
              "results": {"coreml": {"deciding_probes": rows}}}
    block = C.issue_block(report)
    assert block.startswith("```json\n") and block.endswith("\n```")
    data = json.loads(block[len("```json\n"):-len("\n```")])
    assert data["chip"] == "Apple M1" and set(data["results"]["coreml"]) == set(C.DECIDING)


def test_the_sum_probes_of_softmax_and_layer_norm_tell_wide_from_narrow():
    rows = {r["probe"]: r for r in C.probes("sim")}
    assert rows["softmax_4096_zeros"]["sim"] == [2.0 ** -12]           # 1/4096: wide
    assert rows["layer_norm_4096"]["sim"] == [-1.0]
    assert rows["reduce_sum_2049_tie"]["sim"] == [2048.0]
    assert rows["reduce_sum_4096_ones"]["sim"] == [2048.0]              # MIL reduce_sum: narrow


def test_the_issue_block_is_strict_json_for_several_backends():
    rows = [{"probe": "port", "value": float("inf"), "verdict": "supports x"},
            {"probe": "tile", "value": None, "verdict": "no value (the probe failed)"}]
    report = {"machine": {"chip": None, "macos": ""},
              "results": {"ane": {"deciding_probes": rows}, "coreml": {"deciding_probes": rows}}}
    block = C.issue_block(report)
    data = json.loads(block[len("```json\n"):-len("\n```")], parse_constant=pytest.fail)
    assert data["results"]["coreml"]["port"] == ["inf", "supports x"]
    assert data["results"]["ane"]["tile"][0] is None
