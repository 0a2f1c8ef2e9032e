"""The `ane` backend (experimental, macOS on Apple Silicon): MIL text and a weight file handed
to Espresso's private `e5rt_*` C API through ctypes, compiled for the ANE alone (device mask
0x4), ports bound by name to buffers, executed synchronously. Pure Python, no build step.

    program ─ model_files ─► <cache>/<content hash>/model.mil + weights/weight.bin
            ─ probe (child process) ─ compile_calls, port_calls, stream_calls (e5rt.py) ─► run

What is verifiable off-device is data and is tested on Linux: the MIL text, the weight file
(Core ML's blob storage v2, byte for byte as coremltools writes it), the port names, sizes
and order, the exact call sequence. The calls themselves run only on a Mac.

Limits (public reports, docs/macos.md): about 110-128 programs per process, past which
compiles fail silently or the process dies, so this backend refuses to compile beyond
`PROGRAM_LIMIT`; some compile failures throw C++ exceptions, so every new program is
compiled once in a child process first. The documented alternative when e5rt is missing is
`_ANEInMemoryModel` (docs/macos.md); it is not implemented.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import numpy as np

from ..errors import AneforgeError
from ..mil import text as mil_text
from ..mil.proto import WEIGHT_FILE, WEIGHT_PATH, WeightFile
from . import e5rt
from .base import Backend, cache_root, macos_version, this_machine

MIN_MACOS = (14, 0)          # ANEForge's claim for e5rt; verified by it on 26.5 only
PROGRAM_LIMIT = 100          # below the ~110-128 programs per process reported (libane caps at 115)
PROBE_SECONDS = 600


class CompileError(AneforgeError):
    """The ANE compiler rejected a program (or died on it)."""


# --------------------------------------------------------------------------- files (pure)


def blob_ops(program) -> list:
    """The const ops whose values go to the weight file: >= 10 elements of a blob dtype, as
    coremltools decides (proto.WeightFile.takes)."""
    w = WeightFile()
    return [op for op in program.operations if op.type == "const"
            and w.takes(np.asarray(op.attrs["val"]), np.asarray(op.attrs["val"]).dtype.name)]


def _blob_statement(op, offset: int) -> str:
    v = op.outputs[0]
    blob = f'BLOBFILE(path = string("{WEIGHT_PATH}"), offset = uint64({offset}))'
    return f"{v.type} {v.name} = const()[name = string({mil_text.quote(op.name)}), val = {v.type}({blob})];"


def model_files(program) -> tuple[str, bytes]:
    """(MIL text, weight file bytes): the text is `mil.text.emit`'s, except that large constants
    are BLOBFILE references into the weight file, at the offset of their metadata record."""
    text, weights = mil_text.emit(program), WeightFile()
    for op in blob_ops(program):
        a = np.asarray(op.attrs["val"])
        line = mil_text.INDENT * 2 + mil_text.statement(op)
        text = text.replace(line, mil_text.INDENT * 2 + _blob_statement(op, weights.add(a, a.dtype.name)), 1)
    return text, weights.to_bytes()


def write_model(program, root: str) -> str:
    """Write `root/<content hash>/model.mil` and its `weights/weight.bin`; returns the MIL
    path. The directory is named by the content, so a changed program never meets a stale
    compiled bundle."""
    text, blob = model_files(program)
    digest = hashlib.sha256(text.encode() + b"\0" + blob).hexdigest()[:32]
    path = os.path.join(root, digest, "model.mil")
    if not os.path.exists(path):
        os.makedirs(os.path.join(root, digest, "weights"), exist_ok=True)
        _write(os.path.join(root, digest, "weights", WEIGHT_FILE), blob)
        _write(path, text.encode())          # the .mil last: its presence means complete
    return path


def _write(path: str, data: bytes) -> None:
    """Whole or not at all, also with another process writing the same file."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def ports(program) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(inputs, outputs) as (MIL name, packed bytes), in the Program's order."""
    def nbytes(v):
        return int(np.prod(v.shape, dtype=np.int64)) * v.dtype.np.itemsize
    f = program.main
    return [(v.name, nbytes(v)) for v in f.inputs], [(v.name, nbytes(v)) for v in f.outputs]


def check_ports(program) -> None:
    """Ports bind by name: each output must be a distinct value made by an op."""
    f = program.main
    names = [v.name for v in f.outputs]
    if len(set(names)) != len(names) or any(v.op is None for v in f.outputs):
        raise CompileError(f"the ane backend binds ports by name: outputs {names} must be distinct "
                           f"values computed by the program (not inputs returned as they are)")


def setup_calls(program, mil_path: str, bundle_dir: str) -> list[e5rt.Call]:
    """Every call that makes `program` runnable, in order (the execute call is e5rt.EXECUTE)."""
    ins, outs = ports(program)
    return (e5rt.compile_calls(mil_path, bundle_dir) + e5rt.port_calls(ins, outs)
            + e5rt.stream_calls())


# --------------------------------------------------------------------------- the backend


class AneExecutable:
    """One compiled program: buffers bound once, each run copies in, executes, copies out."""

    def __init__(self, program, session: e5rt.Session, bundle: str | None = None):
        self.session, self.bundle = session, bundle
        f = program.main
        self.inputs = [(v.name, v.dtype.np, n) for v, (_, n) in zip(f.inputs, ports(program)[0])]
        self.outputs = [(v.name, v.dtype.np, v.shape, n) for v, (_, n) in zip(f.outputs, ports(program)[1])]
        self.execute = session.function(e5rt.EXECUTE.fn)
        self.stream = session.handles["stream"]
        self.seconds = []

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        memmove, h = self.session.ctypes.memmove, self.session.handles
        for (name, dtype, n), a in zip(self.inputs, inputs):
            a = np.ascontiguousarray(a, dtype)
            memmove(h[f"data:{name}"], a.ctypes.data, n)
        start = time.perf_counter()
        status = self.execute(self.stream)
        self.seconds.append(time.perf_counter() - start)
        if status != 0:
            raise AneforgeError(f"e5rt_execution_stream_execute_sync returned status {status}")
        out = []
        for name, dtype, shape, n in self.outputs:
            a = np.empty(shape, dtype)
            memmove(a.ctypes.data, h[f"data:{name}"], n)
            out.append(a)
        return out

    def placement(self) -> dict:
        """Which engines e5rt compiled segments for, read from the bundle cache."""
        return bundle_placement(self.bundle)


# The bundle cache holds one directory per compiled segment: main/main_ane/model.anehash when
# the ANE runs it, main_bnns (CPU) or main_mps_graph (GPU) otherwise (tmc/apple e5rtdispatch).
SEGMENTS = {"main_ane": "ane", "main_bnns": "cpu", "main_mps_graph": "gpu"}


def bundle_placement(bundle: str | None) -> dict:
    """{"segments": sorted device names found in the bundle directory, "ane_only": bool}."""
    found = set()
    for _, dirs, _ in os.walk(bundle or ""):
        found.update(SEGMENTS[d] for d in dirs if d in SEGMENTS)
    return {"segments": sorted(found), "ane_only": found == {"ane"}}


class AneBackend(Backend):
    name = "ane"

    def __init__(self):
        self.compiled: dict[str, AneExecutable] = {}     # by program signature, for the process
        self._available = None

    def available(self) -> tuple[bool, str]:
        if self._available is None:
            self._available = self._check()
        return self._available

    def _check(self) -> tuple[bool, str]:
        v = macos_version()
        if v is None:
            return False, (f"the direct ANE route needs macOS {MIN_MACOS[0]}+ on Apple Silicon "
                           f"(Espresso's e5rt API); this is {this_machine()}")
        if v < MIN_MACOS or os.uname().machine != "arm64":
            return False, f"needs macOS {MIN_MACOS[0]}+ on Apple Silicon; this is {this_machine()}"
        try:
            import ctypes
            lib = ctypes.CDLL(e5rt.ESPRESSO)
        except OSError as e:
            return False, f"cannot load Espresso.framework ({e})"
        missing = [s for s in e5rt.symbols() if not hasattr(lib, s)]
        if missing:
            return False, (f"this macOS's Espresso lacks {', '.join(missing[:3])}"
                           f"{' ...' if len(missing) > 3 else ''}; use the coreml backend (the "
                           f"_ANEInMemoryModel route of docs/macos.md is not implemented)")
        return True, "Espresso e5rt C API, ANE only (device mask 0x4); experimental"

    def compile(self, program, numerics) -> AneExecutable:
        self.admit(program)
        check_ports(program)
        key = program.signature()
        if key not in self.compiled:
            self.compiled[key] = self._compile(program)
        return self.compiled[key]

    def _compile(self, program) -> AneExecutable:
        if len(self.compiled) >= PROGRAM_LIMIT:
            raise CompileError(
                f"this process has compiled {len(self.compiled)} programs on the ANE (e5rt); the OS "
                f"allows about 110-128 per process and past that compiles fail silently or the "
                f"process dies. Each new shape signature is a new program: keep shapes fixed, or "
                f"restart the process, or use af.set_backend('coreml').")
        root = cache_root("e5rt")
        mil_path = write_model(program, root)
        bundle = os.path.join(os.path.dirname(mil_path), "bundle")
        probe(mil_path, bundle)
        session = e5rt.Session()
        session.run(setup_calls(program, mil_path, bundle))
        return AneExecutable(program, session, bundle)


def probe_command(mil_path: str, bundle_dir: str) -> list[str]:
    return [sys.executable, "-m", "aneforge.runtime.e5rt", mil_path, bundle_dir]


def probe_marker(mil_path: str) -> str:
    """Left beside the MIL once a child compiled it on this macOS version: later processes
    skip the child (a macOS update brings a new compiler, so a new probe)."""
    import platform
    return os.path.join(os.path.dirname(mil_path), f"probed-macos-{platform.mac_ver()[0] or 'none'}")


def probe(mil_path: str, bundle_dir: str) -> None:
    """Compile in a child process first: a C++ exception there kills the child, not the user's
    process. Raises CompileError with what the child said."""
    if os.path.exists(probe_marker(mil_path)):
        return
    env = {**os.environ, "ANEFORGE_BACKEND": "sim"}
    r = subprocess.run(probe_command(mil_path, bundle_dir), capture_output=True, text=True,
                       timeout=PROBE_SECONDS, env=env)
    if r.returncode != 0:
        how = f"died of signal {-r.returncode}" if r.returncode < 0 else f"exited {r.returncode}"
        raise CompileError(f"the ANE compiler rejected {mil_path} (the probe process {how}):\n"
                           f"{r.stderr.strip()[-2000:]}\nThe MIL text and weights are kept there; "
                           f"please attach them to a report (docs/macos.md).")
    _write(probe_marker(mil_path), b"")
