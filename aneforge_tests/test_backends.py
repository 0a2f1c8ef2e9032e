"""The macOS backends off-device: every file they write and every call they would make, as data.

Nothing here pretends to be the ANE or Core ML. What the `ane` backend writes (MIL text, the
weight file, the model directory), the ports it binds and the e5rt call plan are checked as
values; the weight file byte for byte against coremltools' own writer. What the `coreml`
backend builds is loaded by coremltools and saved as a package. The calls themselves run only
on a Mac (test_macos.py).
"""
import ctypes
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import aneforge as af
from aneforge.errors import BackendUnavailable
from aneforge.mil import text as mil_text
from aneforge.runtime import BACKENDS, DEFAULT_ORDER, ane, coreml, default_backend, e5rt
from conftest import load_in_coremltools, step_program

ON_MAC = sys.platform == "darwin"
CONSTS = """program(1.3)
{
    func main<ios18>(tensor<fp16, [2, 16]> x, tensor<int16, [4]> k) {
        tensor<fp16, [16]> w = const()[name = string("w"), val = tensor<fp16, [16]>([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16.5])];
        tensor<fp16, [3]> small = const()[name = string("small"), val = tensor<fp16, [3]>([1, 2, 3])];
        tensor<fp32, [16]> wide = const()[name = string("wide"), val = tensor<fp32, [16]>([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0.1])];
        tensor<fp16, [2, 16]> y = mul(x = x, y = w)[name = string("y")];
        tensor<fp32, [2, 16]> y32 = cast(x = y, dtype = string("fp32"))[name = string("y32")];
        tensor<fp32, [2, 16]> z32 = add(x = y32, y = wide)[name = string("z32")];
        tensor<fp16, [2, 16]> z = cast(x = z32, dtype = string("fp16"))[name = string("z")];
        tensor<fp16, [3]> s = add(x = small, y = small)[name = string("s")];
        tensor<int32, [4]> k32 = cast(x = k, dtype = string("int32"))[name = string("k32")];
        tensor<int32, [4]> kk = add(x = k32, y = k32)[name = string("kk")];
        tensor<int16, [4]> k2 = cast(x = kk, dtype = string("int16"))[name = string("k2")];
    } -> (z, s, k2);
}"""


@pytest.fixture
def consts():
    return mil_text.parse(CONSTS)


@pytest.fixture(scope="module")
def step():
    """A whole training step (forward, backward, AdamW update): parameters are inputs."""
    af.manual_seed(0)
    model = af.nn.Sequential(af.nn.Linear(8, 16), af.nn.ReLU(), af.nn.Linear(16, 4))
    x, y = af.randn(5, 8), af.randn(5, 4)
    return step_program(model, af.nn.functional.mse_loss, (x, y))


# --------------------------------------------------------------------------- selection


def test_backends_lists_every_backend_with_why():
    listed = af.backends()
    assert list(listed) == ["ane", "coreml", "sim"]
    assert listed["sim"][0] is True
    for name in ("ane", "coreml"):
        ok, why = listed[name]
        assert isinstance(why, str) and why
        if not ON_MAC:
            assert ok is False and "macOS" in why and os.uname().sysname in why


@pytest.mark.skipif(ON_MAC, reason="checks the reasons given off macOS")
@pytest.mark.parametrize("name", ["ane", "coreml"])
def test_unavailable_backends_refuse_early(name):
    with pytest.raises(BackendUnavailable, match=f"'{name}' cannot run here: .*macOS"):
        af.set_backend(name)
    with pytest.raises(BackendUnavailable, match="cannot run here"):
        BACKENDS[name].compile(mil_text.parse(CONSTS), af.get_numerics())
    assert af.get_backend().name == "sim"


def test_default_order():
    assert DEFAULT_ORDER == {"darwin": ("ane", "coreml", "sim")}
    assert default_backend(platform="linux", env={}) == "sim"
    # On a machine where neither macOS backend can run, macOS's order ends at sim too.
    expected = next(n for n in DEFAULT_ORDER["darwin"] if BACKENDS[n].available()[0])
    assert default_backend(platform="darwin", env={}) == expected
    assert default_backend(env={"ANEFORGE_BACKEND": "sim"}) == "sim"
    with pytest.raises(BackendUnavailable, match="ANEFORGE_BACKEND=tpu: no backend 'tpu'"):
        default_backend(env={"ANEFORGE_BACKEND": "tpu"})


def _import_with(value: str):
    env = {**os.environ, "ANEFORGE_BACKEND": value, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run([sys.executable, "-c", "import aneforge as af; print(af.get_backend().name)"],
                          capture_output=True, text=True, env=env)


def test_environment_variable_chooses_the_backend():
    r = _import_with("sim")
    assert r.returncode == 0 and r.stdout.strip() == "sim", r.stderr
    r = _import_with("nope")
    assert r.returncode != 0 and "ANEFORGE_BACKEND=nope: no backend 'nope'; known: ane, coreml, sim" in r.stderr


@pytest.mark.skipif(ON_MAC, reason="checks the refusal given off macOS")
def test_environment_variable_naming_an_unavailable_backend_fails_at_import():
    r = _import_with("coreml")
    assert r.returncode != 0 and "backend 'coreml' cannot run here" in r.stderr


def test_import_stays_light():
    code = "import sys, aneforge; print(sorted(m for m in ('torch', 'coremltools') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.stdout.strip() == "[]", r.stderr


# --------------------------------------------------------------------------- ane: files


def test_mil_text_puts_large_constants_in_the_weight_file(consts, tmp_path):
    text, blob = ane.model_files(consts)
    assert [op.name for op in ane.blob_ops(consts)] == ["w", "wide"]
    assert ('tensor<fp16, [16]> w = const()[name = string("w"), val = tensor<fp16, [16]>(BLOBFILE('
            'path = string("@model_path/weights/weight.bin"), offset = uint64(64)))];') in text
    assert "offset = uint64(192)" in text                       # wide: 32 bytes of w padded to 64
    assert "tensor<fp16, [3]>([0x3c00, 0x4000, 0x4200])" in text  # small stays inline
    (tmp_path / "weight.bin").write_bytes(blob)
    back = mil_text.parse(text, weights_dir=str(tmp_path))
    assert back.signature() == consts.signature()
    for a, b in zip(back.operations, consts.operations):
        if a.type == "const":
            np.testing.assert_array_equal(a.attrs["val"], b.attrs["val"])
            assert a.attrs["val"].dtype == b.attrs["val"].dtype


def test_weight_file_layout(consts):
    _, blob = ane.model_files(consts)
    assert struct.unpack_from("<II", blob, 0) == (2, 2)           # count, version 2
    assert blob[8:64] == bytes(56)                                # reserved
    sentinel, dtype, size, offset = struct.unpack_from("<IIQQ", blob, 64)
    assert (sentinel, dtype, size, offset) == (0xDEADBEEF, 1, 32, 128)   # fp16 = 1, data at 128
    assert blob[96:128] == bytes(32)
    np.testing.assert_array_equal(np.frombuffer(blob, "<f2", 16, 128), np.r_[1:16, 16.5])
    assert struct.unpack_from("<IIQQ", blob, 192) == (0xDEADBEEF, 2, 64, 256)   # fp32 = 2
    assert len(blob) == 256 + 64


def test_weight_file_is_what_coremltools_writes(consts, tmp_path):
    from coremltools.libmilstoragepython import _BlobStorageWriter
    writer = _BlobStorageWriter(str(tmp_path / "weight.bin"))
    offsets = [writer.write_fp16_data(np.r_[1:16, 16.5].astype(np.float16).view(np.uint16)),
               writer.write_float_data(np.r_[1:16, 0.1].astype(np.float32))]
    del writer
    text, blob = ane.model_files(consts)
    assert blob == (tmp_path / "weight.bin").read_bytes()
    assert [f"offset = uint64({o})" in text for o in offsets] == [True, True]


def test_a_training_step_round_trips_through_the_files(step, tmp_path):
    path = ane.write_model(step, str(tmp_path))
    back = mil_text.parse(open(path).read(), weights_dir=os.path.join(os.path.dirname(path), "weights"))
    assert back.signature() == step.signature()
    assert sorted(os.listdir(os.path.dirname(path))) == ["model.mil", "weights"]
    assert os.listdir(os.path.join(os.path.dirname(path), "weights")) == ["weight.bin"]


def test_model_directory_is_named_by_content(consts, tmp_path):
    path = ane.write_model(consts, str(tmp_path))
    assert ane.write_model(mil_text.parse(CONSTS), str(tmp_path)) == path
    changed = mil_text.parse(CONSTS.replace("16.5", "17"))
    other = ane.write_model(changed, str(tmp_path))
    assert other != path and os.path.basename(path) == "model.mil"
    assert len(os.path.basename(os.path.dirname(path))) == 32


# --------------------------------------------------------------------------- ane: ports, plan


def test_ports_by_name_with_packed_sizes_in_program_order(consts, step):
    assert ane.ports(consts) == ([("x", 64), ("k", 8)], [("z", 64), ("s", 6), ("k2", 8)])
    ins, outs = ane.ports(step)
    f = step.main
    assert [n for n, _ in ins] == [v.name for v in f.inputs]
    assert [n for n, _ in outs] == [v.name for v in f.outputs]
    assert [b for _, b in ins] == [int(np.prod(v.shape)) * v.dtype.np.itemsize for v in f.inputs]


def test_the_call_sequence(consts):
    got = ane.setup_calls(consts, "/m/model.mil", "/m/bundle")
    O, U, C = e5rt.Out, e5rt.Use, e5rt.Call
    port = [
        C("e5rt_execution_stream_operation_retain_input_port", (U("op"), "x", O("port:x"))),
        C("e5rt_buffer_object_alloc", (O("buffer:x"), 64, 0)),
        C("e5rt_buffer_object_get_data_ptr", (U("buffer:x"), O("data:x"))),
        C("e5rt_io_port_bind_buffer_object", (U("port:x"), U("buffer:x")))]
    assert got[:13] == [
        C("e5rt_e5_compiler_config_options_create", (O("config"),)),
        C("e5rt_e5_compiler_config_options_set_cache_bundle_location", (U("config"), "/m/bundle")),
        C("e5rt_e5_compiler_create_with_config", (O("compiler"), U("config"))),
        C("e5rt_e5_compiler_options_create", (O("options"),)),
        C("e5rt_e5_compiler_options_set_compute_device_types_mask", (U("options"), 0x4)),
        C("e5rt_e5_compiler_options_set_force_recompilation", (U("options"), 0)),
        C("e5rt_e5_compiler_options_set_segmenter", (U("options"), "graph")),
        C("e5rt_e5_compiler_compile", (U("compiler"), "/m/model.mil", U("options"), O("library"))),
        C("e5rt_program_library_retain_program_function", (U("library"), "main", O("function"))),
        C("e5rt_precompiled_compute_op_create_options_create_with_program_function",
          (O("op_options"), U("function"))),
        C("e5rt_precompiled_compute_op_create_options_set_operation_name", (U("op_options"), "main")),
        C("e5rt_precompiled_compute_op_create_options_set_allocate_intermediate_buffers",
          (U("op_options"), 1)),
        C("e5rt_execution_stream_operation_create_precompiled_compute_operation_with_options",
          (O("op"), U("op_options")))]
    assert got[13:17] == port
    ports = [(c.args[1], c.fn.split("_")[-2]) for c in got if c.fn.endswith("_port")]
    assert ports == [("x", "input"), ("k", "input"), ("z", "output"), ("s", "output"), ("k2", "output")]
    sizes = [c.args[1] for c in got if c.fn == "e5rt_buffer_object_alloc"]
    assert sizes == [64, 8, 64, 6, 8]
    assert got[-2:] == [C("e5rt_execution_stream_create", (O("stream"),)),
                        C("e5rt_execution_stream_encode_operation", (U("stream"), U("op")))]
    assert e5rt.EXECUTE == C("e5rt_execution_stream_execute_sync", (U("stream"),))


def test_every_call_matches_its_signature_and_uses_only_handles_made_before(step):
    calls = ane.setup_calls(step, "/m/model.mil", "/m/bundle") + [e5rt.EXECUTE]
    calls += e5rt.release_calls(calls)
    made = set()
    kinds = {"out": e5rt.Out, "handle": e5rt.Use, "release": e5rt.Use, "str": str, "u64": int}
    for c in calls:
        sig = e5rt.SIGNATURES[c.fn]
        assert len(sig) == len(c.args), c
        for kind, a in zip(sig, c.args):
            assert isinstance(a, kinds[kind]), (c, kind)
            if isinstance(a, e5rt.Use):
                assert a.name in made, f"{c.fn} uses {a.name} before it is made"
                if kind == "release":
                    made.discard(a.name)
            elif isinstance(a, e5rt.Out):
                made.add(a.name)
    assert made == {n for n in made if n.startswith("data:")}     # all else released
    assert all(fn.startswith("e5rt_") for fn in e5rt.symbols())
    assert set(e5rt.symbols()) == {c.fn for c in calls} - set(e5rt.RELEASES.values())
    assert not {"e5rt_execution_stream_submit_async", "e5rt_error_code_get_string"} & set(e5rt.symbols())


def test_release_plan_releases_in_reverse_order_of_creation(consts):
    calls = ane.setup_calls(consts, "m", "b")
    released = [c.args[0].name for c in e5rt.release_calls(calls)]
    made = [a.name for c in calls for a in c.args if isinstance(a, e5rt.Out)]
    assert released == [n for n in reversed(made) if not n.startswith("data:")]
    assert released[-1] == "config" and released[0] == "stream"


def test_session_marshals_handles_strings_and_integers_through_ctypes():
    """The interpreter against C-callable functions made by ctypes that only record what
    arrives: out-pointers are written through, strings arrive as char*, handles come back."""
    seen = []
    VP = ctypes.POINTER(ctypes.c_void_p)

    def make(fn, kinds):
        types = {"out": VP, "release": VP, "handle": ctypes.c_void_p, "str": ctypes.c_char_p,
                 "u64": ctypes.c_uint64}
        proto = ctypes.CFUNCTYPE(ctypes.c_int64, *[types[k] for k in kinds])

        def body(*args):
            shown = []
            for k, a in zip(kinds, args):
                if k == "out":
                    a[0] = 0x1000 + len(seen)
                    shown.append("out")
                elif k == "release":
                    shown.append(("release", a[0]))
                else:
                    shown.append(a)
            seen.append((fn, tuple(shown)))
            return 0
        return proto(body)

    class Library:
        def __getattr__(self, fn):
            f = make(fn, e5rt.SIGNATURES[fn])
            setattr(self, fn, f)
            return f

    s = e5rt.Session(Library())
    s.run(e5rt.compile_calls("/m/model.mil", "/m/bundle")[:3])
    assert seen == [("e5rt_e5_compiler_config_options_create", ("out",)),
                    ("e5rt_e5_compiler_config_options_set_cache_bundle_location", (0x1000, b"/m/bundle")),
                    ("e5rt_e5_compiler_create_with_config", ("out", 0x1000))]
    assert s.handles == {"config": 0x1000, "compiler": 0x1002}
    s.close()
    assert seen[-2:] == [("e5rt_e5_compiler_release", (("release", 0x1002),)),
                         ("e5rt_e5_compiler_config_options_release", (("release", 0x1000),))]
    assert s.handles == {}


def test_a_missing_release_function_is_skipped_not_fatal():
    calls = []

    class Library:           # exports the creating call, none of the releases
        def __getattr__(self, fn):
            if fn.endswith("_release"):
                raise AttributeError(fn)
            return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p))(
                lambda p: calls.append(fn) or 0)
    s = e5rt.Session(Library())
    s.run(e5rt.compile_calls("m", "b")[:1])
    s.close()
    assert calls == ["e5rt_e5_compiler_config_options_create"] and s.made == []


def test_a_failing_call_names_itself():
    class Library:
        def __getattr__(self, fn):
            return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p))(lambda p: 11)
    with pytest.raises(e5rt.E5RTError, match="e5rt_e5_compiler_config_options_create returned status 11"):
        e5rt.Session(Library()).run(e5rt.compile_calls("m", "b")[:1])


def test_run_copies_inputs_to_and_outputs_from_the_bound_buffers(consts):
    """run()'s data path with buffers in this process's memory and an execute call that does
    nothing: the input bytes land at their ports' data pointers, the output bytes are read
    back as the program's dtypes and shapes (no values are computed here)."""
    buffers = {n: np.zeros(b, np.uint8) for n, b in sum(ane.ports(consts), [])}
    executed = []

    class Library:
        def __getattr__(self, fn):
            return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(lambda s: executed.append(s) or 0)
    session = e5rt.Session(Library())
    session.handles = {"stream": 0x77, **{f"data:{n}": b.ctypes.data for n, b in buffers.items()}}
    exe = ane.AneExecutable(consts, session)
    x, k = np.arange(32, dtype=np.float16).reshape(2, 16), np.array([1, -2, 3, -4], np.int16)
    z, s_, k2 = np.full((2, 16), 0.5, np.float16), np.array([1, 2, 3], np.float16), -k
    for name, a in (("z", z), ("s", s_), ("k2", k2)):
        buffers[name][:] = np.frombuffer(a.tobytes(), np.uint8)
    out = exe.run([x, k.astype(np.int64)])
    assert executed == [0x77]
    assert buffers["x"].tobytes() == x.tobytes() and buffers["k"].tobytes() == k.tobytes()
    for got, want in zip(out, (z, s_, k2)):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_bundle_placement_reads_the_segment_directories(tmp_path):
    assert ane.bundle_placement(str(tmp_path)) == {"segments": [], "ane_only": False}
    (tmp_path / "x" / "main" / "main_ane").mkdir(parents=True)
    assert ane.bundle_placement(str(tmp_path)) == {"segments": ["ane"], "ane_only": True}
    (tmp_path / "x" / "main" / "main_bnns").mkdir()
    assert ane.bundle_placement(str(tmp_path)) == {"segments": ["ane", "cpu"], "ane_only": False}


def test_outputs_must_be_distinct_computed_values():
    p = mil_text.parse("""program(1.3) { func main<ios18>(tensor<fp16, [2]> x) {
        tensor<fp16, [2]> y = relu(x = x)[name = string("y")]; } -> (y, x); }""")
    with pytest.raises(ane.CompileError, match="binds ports by name"):
        ane.check_ports(p)


def test_program_limit_refuses_before_any_call(consts):
    b = ane.AneBackend()
    b.compiled = {str(i): None for i in range(ane.PROGRAM_LIMIT)}
    with pytest.raises(ane.CompileError, match=r"compiled 100 programs .* about 110-128 per process"):
        b._compile(consts)
    assert ane.PROGRAM_LIMIT < 110


@pytest.mark.skipif(ON_MAC, reason="off macOS the probe process cannot load Espresso")
def test_probe_runs_in_a_child_and_reports_its_failure(consts, tmp_path):
    path = ane.write_model(consts, str(tmp_path))
    assert ane.probe_command(path, "B")[1:] == ["-m", "aneforge.runtime.e5rt", path, "B"]
    with pytest.raises(ane.CompileError, match=r"(?s)probe process exited 1.*Espresso"):
        ane.probe(path, str(tmp_path / "bundle"))
    assert not os.path.exists(ane.probe_marker(path))           # a failure is probed again
    open(ane.probe_marker(path), "w").close()                   # as a successful probe leaves it
    ane.probe(path, str(tmp_path / "bundle"))                   # no child process this time


# --------------------------------------------------------------------------- coreml


def test_coreml_package_loads_in_coremltools_and_saves(ct, step, tmp_path):
    pkg = coreml.package(step)
    assert pkg.spec.specificationVersion == 9
    f = step.main
    assert [i.name for i in pkg.spec.description.input] == [v.name for v in f.inputs]
    assert [o.name for o in pkg.spec.description.output] == [v.name for v in f.outputs]
    fp16 = ct.proto.FeatureTypes_pb2.ArrayFeatureType.FLOAT16
    assert {i.type.multiArrayType.dataType for i in pkg.spec.description.input} == {fp16}
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "weight.bin").write_bytes(pkg.weights)
    load_in_coremltools(pkg.spec.mlProgram.SerializeToString(), str(tmp_path / "w"))   # Apple's loader
    model = ct.models.MLModel(pkg.spec, weights_dir=str(tmp_path / "w"), skip_model_load=True)
    model.save(str(tmp_path / "m.mlpackage"))
    files = {str(p.relative_to(tmp_path / "m.mlpackage")) for p in (tmp_path / "m.mlpackage").rglob("*")
             if p.is_file()}
    assert files == {"Manifest.json", "Data/com.apple.CoreML/model.mlmodel",
                     "Data/com.apple.CoreML/weights/weight.bin"}
    assert (tmp_path / "m.mlpackage/Data/com.apple.CoreML/weights/weight.bin").read_bytes() == pkg.weights


def test_coreml_package_weights_and_cache_name(consts):
    pkg = coreml.package(consts)
    assert pkg.weights == ane.model_files(consts)[1]            # one weight writer for both routes
    assert pkg.digest == coreml.package(mil_text.parse(CONSTS)).digest
    assert pkg.digest != coreml.package(mil_text.parse(CONSTS.replace("16.5", "17"))).digest
    assert coreml.cached_model_path(pkg, "/c") == f"/c/{pkg.digest}.mlmodelc"


def test_coreml_feed_and_fetch_keep_fp16_and_widen_integer_transports(consts):
    pkg = coreml.package(consts)
    x, k = np.arange(32, dtype=np.float16).reshape(2, 16) / 3, np.array([1, -2, 300, -32768], np.int16)
    d = coreml.feed(pkg, [x, k])
    assert list(d) == ["x", "k"] and d["x"].dtype == np.float16 and d["k"].dtype == np.int32
    np.testing.assert_array_equal(d["k"], k)
    # predict() returns fp16 outputs as float32 and Core ML's int32 for the int16 output
    z, s, k2 = x.astype(np.float32), np.ones(3, np.float32), (2 * k).astype(np.int32)
    got = coreml.fetch(pkg, {"k2": k2, "z": z, "s": s})
    assert [a.dtype for a in got] == [np.float16, np.float16, np.int16]
    np.testing.assert_array_equal(got[0], x)              # exact: fp16 -> fp32 -> fp16
    assert [i.name for i in pkg.spec.description.output] == ["z", "s", "k2"]
    int32 = 131104       # ArrayFeatureType.INT32: the int16 output is widened at the boundary
    assert pkg.spec.description.output[2].type.multiArrayType.dataType == int32


def test_placement_summary():
    P = coreml.OpPlacement
    rows = [P("const", "w", "-", (), None), P("matmul", "y", "ane", ("ane", "cpu"), 0.7),
            P("softmax", "p", "cpu", ("cpu",), 0.2), P("add", "z", "ane", ("ane",), 0.1)]
    s = coreml.placement_summary(rows)
    assert s["devices"]["ane"] == {"ops": 2, "cost": pytest.approx(0.8)}
    assert s["ane_share"] == pytest.approx(0.8)
    assert s["cpu_ops"] == ["softmax->p"]
    assert coreml.placement_summary([])["ane_share"] is None


def test_device_names_are_coremltools_classes(ct):
    from coremltools.models import compute_device
    assert set(coreml.DEVICES) <= set(dir(compute_device))
    assert coreml.device_name(None) == "-"


def test_check_ane_writes_its_report(tmp_path):
    """examples/check_ane.py end to end on the simulator (the only backend here)."""
    import json
    script = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples", "check_ane.py")
    out = tmp_path / "report.json"
    r = subprocess.run([sys.executable, script, "--backends", "sim", "--limit", "3", "--out", str(out)],
                       capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report["backends"]) == {"ane", "coreml", "sim"}
    sim = report["results"]["sim"]
    assert [c["name"] for c in sim["op_table"]] == ["add", "add_scalar", "radd_scalar"]
    assert all(c["within_torch_tolerance"] and c["equal_to_sim"] for c in sim["op_table"])
    assert sim["training"]["losses"] == sim["training"]["sim_losses"]
    assert {p["probe"] for p in sim["probes"]} >= {"reduce_sum_4096_ones", "matmul_4096_ones"}
    assert all(p["engine"] == p["sim"] for p in sim["probes"])
