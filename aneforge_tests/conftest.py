"""Shared fixtures: coremltools, imported once, quietly and lazily (it is slow and chatty)."""
import logging
import os

import pytest
from hypothesis import settings

import kernel_warm

# The same examples every run: a CI run never meets a case no local run met (an exploring run
# is `--hypothesis-profile=explore`, and what it finds is pinned as its own test).
settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("deterministic")

IOS18 = 9          # coremltools' specification version for iOS18 / MIL opset CoreML8


@pytest.fixture(scope="session")
def ct():
    """coremltools is a test dependency: a missing install fails loudly, never skips."""
    os.environ["TQDM_DISABLE"] = "1"
    logging.getLogger("coremltools").setLevel(logging.ERROR)
    import coremltools
    return coremltools


def load_in_coremltools(data: bytes, weights_dir: str = ""):
    """Apple's protobuf loader: re-runs Core ML's type inference on every op."""
    from coremltools.converters.mil.frontend.milproto.load import load_mil_proto
    from coremltools.proto import MIL_pb2
    return load_mil_proto(MIL_pb2.Program.FromString(data), IOS18, weights_dir)


def coremltools_types(pymil) -> dict:
    """Output types by name of the ops coremltools read from ours (not the consts it makes for
    literal arguments, whose automatic names may repeat ours)."""
    from coremltools.converters.mil.mil import types

    from aneforge.ops import REGISTRY
    ops = pymil.functions["main"].operations
    literals = {id(v.op) for op in ops for k, v in op.inputs.items()
                if op.op_type in REGISTRY and k in REGISTRY[op.op_type].attrs}
    return {v.name: (tuple(int(d) for d in v.shape), types.builtin_to_string(v.dtype))
            for op in ops if id(op) not in literals for v in op.outputs}


def step_program(model, loss_fn, inputs):
    """The traced program of one optimizer step (forward, backward, update, loss) of `model`."""
    import aneforge as af
    from aneforge.core.realization import recording
    opt = af.optim.AdamW(model.parameters(), lr=1e-3)
    with recording() as runs:
        loss_fn(model(inputs[0]), *inputs[1:]).backward()
        opt.step()
    (run,) = runs
    return run.traced


@pytest.fixture(scope="session", autouse=True)
def torch_on_one_thread():
    """torch, the reference, computes on one thread in each test process and in the processes
    tests start (notebooks, scripts). Its default, a thread per core, under pytest-xdist's
    process per core put two OpenMP threads per process on two cores, and their barriers'
    spin-waits made torch's 5 ms MLP training step take 250-420 ms (measured at load 8)."""
    os.environ["OMP_NUM_THREADS"] = "1"     # read when a child process imports torch
    import sys
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """The compiled kernels in before the first test: under "auto" they load in the background
    on a fresh numba cache (the numpy reference runs meanwhile), and the tests that compare the
    two implementations or run the run plan need them in."""
    from aneforge.hardware import kernels
    kernels.wait()
    kernel_warm.wait_for_test_kernels()


def pytest_configure(config):
    """The pytest-xdist controller starts a fresh numba cache's compile before its workers
    exist (kernel_warm.py); they wait for it in `compiled_kernels`."""
    if hasattr(config, "workerinput") or config.getoption("dist", "no") == "no" \
            or config.getoption("collectonly"):
        return
    # (not waited for at exit: like the loader's, a compile a stopped run leaves goes on and
    # fills the cache for the next run)
    config.stash[_CHILDREN] = kernel_warm.start()


_CHILDREN = pytest.StashKey[list]()
