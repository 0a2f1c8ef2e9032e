"""The Espresso `e5rt_*` C API as call sequences: data first, ctypes second.

Every call the `ane` backend makes is a `Call(fn, args)` built by the pure functions below
(`compile_calls`, `port_calls`, `stream_calls`, `release_calls`), so the exact sequence is
tested off-device. `Session.run(calls)` then makes each call: one ctypes line against Espresso.

Facts (public code, not yet run by aneforge; see docs/macos.md):
- The symbols are exported by /System/Library/PrivateFrameworks/Espresso.framework/Espresso
  (on disk only in the dyld shared cache: dlopen finds it). Each returns int64, 0 = success.
  No entitlement is needed (sbryngelson/ANEForge docs/e5rt-dispatch-reference.md).
- Create calls take their out-pointer first, all others last (tmc/apple x/ane/e5rt/e5rt.go,
  which drives this route from Go without cgo and matches a CPU reference on macOS 26).
- Compute-device mask 0x1 BNNS, 0x2 MPSGraph, 0x4 ANE; ports bind by name; fp16 ports are
  packed. `e5rt_execution_stream_submit_async` (an ObjC block) and
  `e5rt_error_code_get_string` (returns std::string) are never called.
- Integer arguments are passed as uint64: on arm64 (the only ANE host) every integer argument
  travels in its own 64-bit register, so a bool/int32 parameter reads the low bits.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

ESPRESSO = "/System/Library/PrivateFrameworks/Espresso.framework/Espresso"
ANE_MASK = 0x4
FUNCTION = "main"


@dataclass(frozen=True)
class Out:
    """A handle (or data pointer) the call writes through a void** argument."""
    name: str


@dataclass(frozen=True)
class Use:
    """A handle an earlier call wrote."""
    name: str


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple


# Argument kinds of every function the call sequences make: "out" void**, "handle" void*,
# "str" const char*, "u64" an integer (see the module docstring). Releases take the handle's
# address.
SIGNATURES: dict[str, tuple[str, ...]] = {
    "e5rt_e5_compiler_config_options_create": ("out",),
    "e5rt_e5_compiler_config_options_set_cache_bundle_location": ("handle", "str"),
    "e5rt_e5_compiler_create_with_config": ("out", "handle"),
    "e5rt_e5_compiler_options_create": ("out",),
    "e5rt_e5_compiler_options_set_compute_device_types_mask": ("handle", "u64"),
    "e5rt_e5_compiler_options_set_force_recompilation": ("handle", "u64"),
    "e5rt_e5_compiler_options_set_segmenter": ("handle", "str"),
    "e5rt_e5_compiler_compile": ("handle", "str", "handle", "out"),
    "e5rt_program_library_retain_program_function": ("handle", "str", "out"),
    "e5rt_precompiled_compute_op_create_options_create_with_program_function": ("out", "handle"),
    "e5rt_precompiled_compute_op_create_options_set_operation_name": ("handle", "str"),
    "e5rt_precompiled_compute_op_create_options_set_allocate_intermediate_buffers":
        ("handle", "u64"),
    "e5rt_execution_stream_operation_create_precompiled_compute_operation_with_options":
        ("out", "handle"),
    "e5rt_execution_stream_operation_retain_input_port": ("handle", "str", "out"),
    "e5rt_execution_stream_operation_retain_output_port": ("handle", "str", "out"),
    "e5rt_buffer_object_alloc": ("out", "u64", "u64"),
    "e5rt_buffer_object_get_data_ptr": ("handle", "out"),
    "e5rt_io_port_bind_buffer_object": ("handle", "handle"),
    "e5rt_execution_stream_create": ("out",),
    "e5rt_execution_stream_encode_operation": ("handle", "handle"),
    "e5rt_execution_stream_execute_sync": ("handle",),
}
# The release function of each kind of handle (a handle's name is "<kind>" or "<kind>:<port>").
# The names follow the `e5rt_<object>_release(&handle)` pattern of ANEForge's reference; they
# are not all confirmed, so a missing one is skipped (a leak for the process's life), never an
# error: only the SIGNATURES above decide whether the backend is available.
RELEASES = {
    "config": "e5rt_e5_compiler_config_options_release",
    "compiler": "e5rt_e5_compiler_release",
    "options": "e5rt_e5_compiler_options_release",
    "library": "e5rt_program_library_release",
    "function": "e5rt_program_function_release",
    "op_options": "e5rt_precompiled_compute_op_create_options_release",
    "op": "e5rt_execution_stream_operation_release",
    "port": "e5rt_io_port_release",
    "buffer": "e5rt_buffer_object_release",
    "stream": "e5rt_execution_stream_release",
}
REQUIRED = sorted(SIGNATURES)
SIGNATURES.update({fn: ("release",) for fn in RELEASES.values()})


def compile_calls(mil_path: str, bundle_dir: str, force: bool = False) -> list[Call]:
    """Compile `mil_path` (its weights/ beside it) for the ANE alone, and make one operation
    of its function `main` whose intermediate buffers e5rt allocates."""
    return [
        Call("e5rt_e5_compiler_config_options_create", (Out("config"),)),
        Call("e5rt_e5_compiler_config_options_set_cache_bundle_location", (Use("config"), bundle_dir)),
        Call("e5rt_e5_compiler_create_with_config", (Out("compiler"), Use("config"))),
        Call("e5rt_e5_compiler_options_create", (Out("options"),)),
        # ANE only: a multi-bit mask may fall back to BNNS (the CPU) silently.
        Call("e5rt_e5_compiler_options_set_compute_device_types_mask", (Use("options"), ANE_MASK)),
        Call("e5rt_e5_compiler_options_set_force_recompilation", (Use("options"), int(force))),
        Call("e5rt_e5_compiler_options_set_segmenter", (Use("options"), "graph")),
        Call("e5rt_e5_compiler_compile", (Use("compiler"), mil_path, Use("options"), Out("library"))),
        Call("e5rt_program_library_retain_program_function", (Use("library"), FUNCTION, Out("function"))),
        Call("e5rt_precompiled_compute_op_create_options_create_with_program_function",
             (Out("op_options"), Use("function"))),
        Call("e5rt_precompiled_compute_op_create_options_set_operation_name", (Use("op_options"), FUNCTION)),
        Call("e5rt_precompiled_compute_op_create_options_set_allocate_intermediate_buffers",
             (Use("op_options"), 1)),
        Call("e5rt_execution_stream_operation_create_precompiled_compute_operation_with_options",
             (Out("op"), Use("op_options"))),
    ]


def port_calls(inputs: list[tuple[str, int]], outputs: list[tuple[str, int]]) -> list[Call]:
    """Per port (name, bytes), inputs then outputs: retain the port by its MIL name, allocate a
    buffer of its packed size, take the buffer's data pointer, bind the buffer to the port."""
    calls = []
    for side, ports in (("input", inputs), ("output", outputs)):
        for name, nbytes in ports:
            calls += [
                Call(f"e5rt_execution_stream_operation_retain_{side}_port",
                     (Use("op"), name, Out(f"port:{name}"))),
                Call("e5rt_buffer_object_alloc", (Out(f"buffer:{name}"), nbytes, 0)),
                Call("e5rt_buffer_object_get_data_ptr", (Use(f"buffer:{name}"), Out(f"data:{name}"))),
                Call("e5rt_io_port_bind_buffer_object", (Use(f"port:{name}"), Use(f"buffer:{name}"))),
            ]
    return calls


def stream_calls() -> list[Call]:
    return [Call("e5rt_execution_stream_create", (Out("stream"),)),
            Call("e5rt_execution_stream_encode_operation", (Use("stream"), Use("op")))]


EXECUTE = Call("e5rt_execution_stream_execute_sync", (Use("stream"),))


def release_calls(calls: list[Call]) -> list[Call]:
    """Release every handle `calls` created, last created first (data pointers belong to their
    buffers and are not released)."""
    made = [a.name for c in calls for a in c.args if isinstance(a, Out)]
    return [Call(RELEASES[n.split(":")[0]], (Use(n),)) for n in reversed(made)
            if n.split(":")[0] in RELEASES]


def symbols() -> list[str]:
    """The symbols compiling and running need: all must resolve before the backend says it is
    available (releases are optional, see RELEASES)."""
    return list(REQUIRED)


class E5RTError(RuntimeError):
    pass


class Session:
    """Makes call sequences against the loaded Espresso library and holds the handles
    they wrote. macOS only: nothing here runs off-device."""

    def __init__(self, lib=None):
        import ctypes
        self.ctypes = ctypes
        self.lib = lib if lib is not None else ctypes.CDLL(ESPRESSO)
        self.handles: dict[str, int] = {}
        self.made: list[Call] = []

    def function(self, fn: str):
        c = self.ctypes
        f = getattr(self.lib, fn)
        kinds = {"out": c.POINTER(c.c_void_p), "release": c.POINTER(c.c_void_p),
                 "handle": c.c_void_p, "str": c.c_char_p, "u64": c.c_uint64}
        f.argtypes, f.restype = [kinds[k] for k in SIGNATURES[fn]], c.c_int64
        return f

    def run(self, calls: list[Call]) -> None:
        for call in calls:
            slots: dict = {}
            args = [self._arg(a, kind, slots) for a, kind in zip(call.args, SIGNATURES[call.fn])]
            status = self.function(call.fn)(*args)
            if status != 0:
                raise E5RTError(f"{call.fn} returned status {status}")
            self.handles.update((n, s.value) for n, s in slots.items())
            self.made.append(call)

    def _arg(self, a, kind: str, slots: dict):
        c = self.ctypes
        if kind == "release":
            return c.byref(c.c_void_p(self.handles.pop(a.name)))
        if isinstance(a, Out):
            slots[a.name] = c.c_void_p()
            return c.byref(slots[a.name])
        if isinstance(a, Use):
            return self.handles[a.name]
        return a.encode() if isinstance(a, str) else a

    def close(self) -> None:
        calls, self.made = release_calls(self.made), []
        self.run([c for c in calls if hasattr(self.lib, c.fn)])
        self.made = []


def probe(mil_path: str, bundle_dir: str) -> None:
    """Compile in this process and exit: run by the backend in a child process first, because
    some compile failures throw C++ exceptions that kill the process (tmc/apple `slotgauge`)."""
    s = Session()
    s.run(compile_calls(mil_path, bundle_dir))
    s.close()


if __name__ == "__main__":       # python -m aneforge.runtime.e5rt MIL_PATH BUNDLE_DIR
    probe(*sys.argv[1:3])
    sys.stdout.write("compiled " + os.path.basename(os.path.dirname(sys.argv[1])) + "\n")
