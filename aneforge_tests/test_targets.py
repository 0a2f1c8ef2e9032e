"""ANE targets (aneforge/hardware/targets.py): the tables, the setting, caps at record time at their
boundaries per target, op support per family, the cross-compile report, the generated docs."""
from __future__ import annotations

import os
import re
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import aneforge as af
from aneforge.hardware import targets
from aneforge.context import CTX
from aneforge.mil.syntax import MILSyntaxError
from aneforge.tensor import const, record_op

ROOT = pathlib.Path(af.__file__).parent.parent


@pytest.fixture(autouse=True)
def _default_target():
    """Every test starts and ends on the default target."""
    prev = CTX.target
    CTX.target = None
    yield
    CTX.target = prev


# ---- the tables ------------------------------------------------------------------------------
@pytest.mark.parametrize("chip,name,family,spatial,kw", [
    ("M1", "h13", "A13", 16384, 13), ("M2", "h14", "A14", 16384, 13),
    ("M3", "h15", "A15", 16384, 13), ("M4", "h16", "A16", 65536, 15),
    ("M5", "h17s", "A16", 65536, 15)])
def test_chips_name_families_and_caps(chip, name, family, spatial, kw):
    t = targets.find(chip)
    assert (t.name, t.family, t.spatial_cap, t.channel_cap, t.conv_kw_max) == \
        (name, family, spatial, 65536, kw)
    assert targets.find(name) is t and targets.find(chip.lower()) is t and t.chip == chip


def test_every_mil_target_has_its_caps_and_a_catalog_column():
    assert {"h13", "h13g", "h14", "h14g", "h15", "h16", "h16s", "h17s", "h18"} <= set(targets.TARGETS)
    for t in targets.TARGETS.values():
        assert t.family in targets.COLUMNS
        assert t.spatial_cap in (16384, 65536) and t.channel_cap == 65536
        assert t.conv_kw_max in (13, 15) and t.reduce_transpose_at in (192, 384)


def test_the_numerics_that_differ_by_family():
    m1, m2, m3, m4 = (targets.find(c) for c in ("M1", "M2", "M3", "M4"))
    assert (m1.width_slice_clamp, m2.width_slice_clamp, m3.width_slice_clamp,
            m4.width_slice_clamp) == (True, True, None, False)   # None: unmeasured
    assert (m1.reduce_transpose_at, m3.reduce_transpose_at) == (192, 384)
    assert "int8" not in m1.weight_streams and "blockwise" in m3.weight_streams
    assert not m1.texture_engine and m2.texture_engine


@pytest.mark.parametrize("name,match", [
    ("h12", r"cannot run MIL programs.*MIL needs H13\+.*h13 \(M1\)"),
    ("u1", "cannot run MIL programs"),
    ("M0", r"no ANE target 'M0'; choose a chip \(M1, .*\) or a compiler target \(h13, ")])
def test_unknown_and_pre_mil_targets_are_refused(name, match):
    with pytest.raises(af.AneforgeError, match=match):
        af.set_target(name)
    assert CTX.target is None


# ---- the setting -----------------------------------------------------------------------------
def test_the_default_is_m1_reported_not_enforced():
    t = af.get_target()
    expected = targets.host_target() or targets.TARGETS["h13"]     # M1 off macOS
    assert t is targets.DEFAULT and (t.name, t.enforce_caps) == (expected.name, False)
    assert af.zeros(40000).shape == (40000,)          # today's limits: every axis 1..65536
    assert af.zeros(65537).shape == (65537,)          # host data (a dataset): no program holds it
    with pytest.raises(af.LimitError, match="1..65536"):
        af.cat([af.zeros(40000) + 1] * 2)             # a computed value would have to be held


def test_set_target_returns_the_previous_one_and_restores_it():
    first = af.set_target("M4")
    assert first is targets.DEFAULT and af.get_target().name == "h16"
    assert af.set_target("h13").name == "h16"
    assert af.get_target() is targets.TARGETS["h13"] and af.get_target().enforce_caps
    af.set_target(first)
    assert CTX.target is None and af.get_target() is targets.DEFAULT
    af.set_target("M5")
    af.set_target(None)
    assert CTX.target is None


def test_the_context_manager_restores_on_error():
    with pytest.raises(af.LimitError):
        with af.target("M1") as t:
            assert t is af.get_target() is targets.TARGETS["h13"]
            af.zeros(20000)
    assert CTX.target is None


def test_environment_variable_chooses_an_enforced_target():
    code = ("import aneforge as af; t = af.get_target(); print(t.name, t.enforce_caps)\n"
            "try:\n    af.zeros(20000)\nexcept af.LimitError as e:\n    print('rejected')")
    env = dict(os.environ, ANEFORGE_TARGET="M2", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["h14", "True", "rejected"]


def test_an_unknown_target_in_the_environment_fails_the_import_clearly():
    env = dict(os.environ, ANEFORGE_TARGET="M0", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", "import aneforge"], env=env, capture_output=True,
                         text=True)
    assert out.returncode != 0 and "ANEFORGE_TARGET: no ANE target 'M0'; choose a chip (M1, " in out.stderr


@pytest.mark.parametrize("system,brand,name", [
    ("Darwin", "Apple M1", "h13"), ("Darwin", "Apple M1 Max", "h13g"),
    ("Darwin", "Apple M2 Pro", "h14g"), ("Darwin", "Apple M3 Max", "h15"),
    ("Darwin", "Apple M4", "h16"), ("Darwin", "Apple M5 Pro", "h17s"),
    ("Darwin", "Intel(R) Core(TM) i7", None), ("Darwin", "Apple M9", None),
    ("Linux", "Apple M1", None)])
def test_host_detection(system, brand, name):
    t = targets.host_target(system, brand)
    assert (t and t.name) == name


# ---- caps at record time, at the boundaries --------------------------------------------------
CAPS = [("M1", 16384), ("M2", 16384), ("M3", 16384), ("h13g", 16384), ("M4", 65536),
        ("M5", 65536)]


@pytest.mark.parametrize("chip,cap", CAPS)
def test_a_leaf_at_the_spatial_cap_and_one_over(chip, cap):
    with af.target(chip) as t:
        assert af.zeros(cap).shape == (cap,)
        assert af.zeros(2, cap).shape == (2, cap)
        over = cap + 1
        match = (rf"tensor: shape \(2, {over}\) has axis 1 of size {over}, over the spatial cap .* "
                 rf"of {cap} on target {re.escape(t.describe())}\. Fix: tile it: split the work along "
                 rf"axis 1 into pieces of at most {cap}; or choose a later target: "
                 rf"af.set_target\('M4'\) \(h16\) allows axes of 65536")
        if cap == 65536:         # past every target's axis: host data (a dataset), held by no program
            assert af.zeros(2, over).shape == (2, over)
        else:
            with pytest.raises(af.LimitError, match=match):
                af.zeros(2, over)


@pytest.mark.parametrize("chip,cap", CAPS)
def test_an_op_result_at_the_spatial_cap_and_one_over(chip, cap):
    with af.target(chip):
        half = af.ones(1, cap // 2) * 2                # computed: a program holds the result
        assert af.cat([half, half], dim=1).shape == (1, cap)
        one = af.ones(1, 1) * 2
        with pytest.raises(af.LimitError, match=rf"concat: shape \(1, {cap + 1}\) \(inputs "
                                                rf"values=\[fp16\[1, {cap // 2}\], .*axis 1 of size "
                                                rf"{cap + 1}" if cap < 65536 else "1..65536"):
            af.cat([half, half, one], dim=1)


def test_the_channel_axis_of_a_rank4_tensor_has_the_channel_cap():
    with af.target("M1"):
        assert af.zeros(1, 65536, 1, 1).shape == (1, 65536, 1, 1)
        assert (af.zeros(1, 20000, 2, 2) + 1).shape == (1, 20000, 2, 2)
        with pytest.raises(af.LimitError, match=r"axis 2 of size 16385, over the spatial cap .*"
                                                r"or move this extent to axis 1 \(channel cap 65536\)"):
            af.zeros(1, 1, 16385, 1)
        with pytest.raises(af.LimitError, match=r"axis 1 of size 16385, over the spatial cap"):
            af.zeros(1, 16385, 1)                  # rank 3: every axis is spatial


def test_switching_targets_rechecks_a_memoized_op():
    with af.target("M4"):
        x = af.ones(1, 20000)
        assert (x + x).shape == (1, 20000)           # recorded (and remembered) on h16
    with af.target("M1"):
        with pytest.raises(af.LimitError, match=r"add: shape \(1, 20000\).*h13 \(M1\)"):
            x + x
    assert (x + x).shape == (1, 20000)               # the default records with 65536 again
    with af.target("M5"):
        assert (x + x).numpy().shape == (1, 20000)


def _conv(kw: int):
    x = af.ones(1, 1, 4, 20)
    return record_op("conv", {"x": x, "weight": const(np.ones((1, 1, 1, kw)), af.float16)},
                     dict(pad_type="valid"))


@pytest.mark.parametrize("chip,kw", [("M1", 13), ("M2", 13), ("M3", 13), ("M4", 15), ("M5", 15)])
def test_conv_kernel_width_at_the_cap_and_one_over(chip, kw):
    with af.target(chip) as t:
        assert _conv(kw).shape == (1, 1, 4, 20 - kw + 1)
        later = "; or choose a later target: af.set_target('M4') (h16) allows kernel widths " \
                "up to 15" if kw == 13 else ""
        with pytest.raises(af.LimitError) as e:
            _conv(kw + 1)
        assert f"conv: weight (inputs x=fp16[1, 1, 4, 20], weight=fp16[1, 1, 1, {kw + 1}]) " \
               f"has kernel width {kw + 1}, over the conv kernel-width cap of {kw} on target " \
               f"{t.name} ({chip}). Fix: tile it: split the kernel into column blocks of at " \
               f"most {kw} and add the convs' results{later}" == str(e.value)
    assert _conv(16).shape == (1, 1, 4, 5)          # the default: no kernel-width cap


def test_long_contractions_are_tiled_at_the_target_cap():
    x, w = af.ones(2, 20000), af.ones(20000, 3)       # recorded under the default (65536 axes)
    counts = {}
    for chip in (None, "M1", "M4"):
        with af.target(chip):
            report = af.passes.run(af.program(x @ w))
            counts[chip] = report.counts_after.get("matmul", 0)
    assert counts == {None: 2, "M1": 2, "M4": 1}
    with af.target("M4"):
        assert (x @ w).numpy().tolist() == [[20000.0] * 3] * 2


def test_the_target_is_part_of_the_compile_cache_key():
    af.clear_cache()
    x = af.ones(2, 3)
    for chip in ("M1", "M4", "M1"):
        with af.target(chip):
            (x * 2).numpy()
    info = af.cache_info()
    assert (info.misses, info.hits) == (2, 1)


def test_a_compiled_function_is_captured_again_on_another_target():
    calls = []

    @af.compile
    def f(x):
        calls.append(1)
        return x * 2

    x = af.ones(2, 3)
    f(x), f(x)
    with af.target("M4"):
        f(x)
    assert len(calls) == 2


# ---- op support ------------------------------------------------------------------------------
@pytest.mark.parametrize("op,native_from", [
    ("matmul", "M1"), ("sin", "M3"), ("cos", "M3"), ("topk", "M2"), ("crop_resize", "M2"),
    ("reduce_argmin", "M3"), ("argsort", "M2"), ("random_uniform", "M3"), ("mod", None)])
def test_is_native_per_family(op, native_from):
    chips = ["M1", "M2", "M3", "M4", "M5"]
    first = chips.index(native_from) if native_from else len(chips)
    assert [af.is_native(op, target=c) for c in chips] == [i >= first for i in range(5)]


def test_op_info_and_the_current_target():
    info = af.op_info("sin")
    assert info.support == {"A13": "decomposed", "A14": "decomposed", "A15": "native",
                            "A16": "native"}
    assert "Horner" in info.note and str(info).startswith("sin [Special / math; kernel ElementWise]")
    assert af.op_info("mod").support["A16"] == "rejected"
    with af.target("M1"):
        assert not af.is_native("sin")
    with af.target("M3"):
        assert af.is_native("sin")
    with pytest.raises(af.AneforgeError, match="no MIL op 'reduce_summ'.*did you mean reduce_sum"):
        af.op_info("reduce_summ")
    with pytest.raises(af.AneforgeError, match="no MIL op"):
        af.is_native("nope")


def test_every_registered_op_is_in_the_catalog():
    from aneforge.ops import REGISTRY
    assert sorted(set(REGISTRY) - set(targets.CATALOG)) == []


# ---- the cross-compile report ----------------------------------------------------------------
def test_report_op_by_op():
    x = af.ones(1, 20000)
    y = (x.sin() * 2).reshape(1, 1, 20000, 1)
    m1 = af.cross_compile_check(y, target="M1")
    assert not m1.ok and [(r.op, r.status) for r in m1.rows] == [
        ("input", "over a cap"), ("sin", "over a cap"), ("const", "decomposed"),
        ("mul", "over a cap"), ("reshape", "over a cap")]
    assert "axis 1 of size 20000, over the spatial cap" in m1.rows[1].reason
    text = str(m1)
    assert text.startswith("cross-compile check for h13 (M1), family A13: does NOT compile; "
                           "4 over a cap, 1 decomposed")
    assert "or move this extent to axis 1 (channel cap 65536)" in m1.rows[-1].reason
    m3 = af.cross_compile_check(y, target="M3")
    assert not m3.ok and {r.status for r in m3.rows} == {"over a cap", "decomposed"}
    m4 = af.cross_compile_check(y, target="M4")
    assert m4.ok and [r.status for r in m4.rows if r.op == "sin"] == ["native"]
    small = af.ones(2, 8).sin()
    rows = af.cross_compile_check(small, target="M1").rows
    assert [(r.op, r.status) for r in rows] == [("sin", "decomposed")]
    assert "Horner" in rows[0].reason
    assert af.cross_compile_check(small, target="M1").ok


def test_report_checks_conv_kernel_widths_and_programs():
    with af.target("M5"):
        y = _conv(15)
    assert af.cross_compile_check(y, target="M5").ok
    m1 = af.cross_compile_check(y, target="M1")
    (conv,) = [r for r in m1.rows if r.op == "conv"]
    assert conv.status == "over a cap" and "kernel width 15, over the conv kernel-width cap " \
        "of 13 on target h13 (M1)" in conv.reason
    program = af.program(y)
    assert [r.status for r in af.cross_compile_check(program, target="M1").rows
            if r.op == "conv"] == ["over a cap"]


def test_report_names_the_width_slice_hazard_on_pre_a16_families():
    y = af.ones(2, 8)[:, 1:]
    hazard = {c: [r.reason for r in af.cross_compile_check(y, target=c).rows
                  if r.op == "slice_by_index"][0] for c in ("M1", "M3", "M4")}
    assert "saturates values with |x| > 4094 to +-inf on h13 (M1)" in hazard["M1"]
    assert "may saturate (unmeasured on this family)" in hazard["M3"]
    assert "hazard" not in hazard["M4"]
    rows = af.cross_compile_check((af.ones(4, 8) * 2)[1:], target="M1").rows   # another axis
    assert "hazard" not in [r.reason for r in rows if r.op == "slice_by_index"][0]    # exact


# ---- the generated docs ----------------------------------------------------------------------
def test_capabilities_doc_is_in_sync_with_the_tables():
    from aneforge.docgen.capabilities import render
    path = ROOT / "docs" / "capabilities.md"
    assert path.read_text() == render(), \
        "docs/capabilities.md is stale: run `python -m aneforge.docgen.capabilities --write`"


def test_report_takes_a_load_mil_function():
    fn = af.load_mil("""program(1.3) {
  func main<ios18>(tensor<fp16, [1, 20000]> x) {
    tensor<fp16, [1, 20000]> y = exp(x = x)[name = string("y")];
  } -> (y);
}""")
    assert [(r.op, r.status) for r in af.cross_compile_check(fn, target="M1").rows] == [
        ("input", "over a cap"), ("exp", "over a cap")]
    assert af.cross_compile_check(fn, target="M5").ok
    with af.target("M1"), pytest.raises(MILSyntaxError, match=r"line \d \[axis-limit\]: program "
                                                            r"input 'x' has axis 1 of size 20000, "
                                                            r"over the spatial cap .*h13 \(M1\)"):
        af.load_mil(af.to_mil(fn.program))             # a chosen target checks parsed MIL too
    wide = """program(1.3) {
  func main<ios18>(tensor<fp16, [1, 8000]> x) {
    tensor<fp16, [1, 16000]> y = concat(values = (x, x), axis = const(int32(1)), interleave = const(bool(false)))[name = string("y")];
  } -> (y);
}"""
    with af.target("M1"):
        assert af.load_mil(wide)(np.ones((1, 8000))).shape == (1, 16000)
        with pytest.raises(MILSyntaxError, match=r"line 3 \[op-check\]: concat: shape \(1, 16386\)"):
            af.load_mil(wide.replace("8000", "8193").replace("16000", "16386"))
