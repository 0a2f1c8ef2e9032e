"""The compiled kernels of a fresh numba cache (a fresh clone: CI), compiled while the
pytest-xdist workers start (aneforge_tests/conftest.py calls `start` from the controller's
pytest_configure and `wait_for_test_kernels` from each worker's first fixture).

Before, the compile started only at each worker's first test, after its imports and
collection (~15-20 s of wall time), a stage at a time (the library's loader: the lean forms,
then the full ones niced below the workers, which sat idle waiting for them), and the kernels
of `TEST_WARM` compiled at their first call in every worker that called them."""
import os
import subprocess
import sys

# Kernels no WARM stage compiles that tests in every worker call: the tile matmul's generic form
# (`_any_tasks`: the datapath's open points, tmode != 0; test_datapath, test_kernels), the
# per-product matmul of the other numerics models (`_matmul_*_tasks`) and the rounding of the
# modes other than the default (`_round16_any`). numba compiles a kernel at its first call in
# the calling process (CPU measured in one process: ~17.5 s, 2.7 + 3.1 s, 0.25 s), without the
# cross-process lock of the loader's children: each worker compiled them.
TILE = ("f4:3", "f4:3", "i8:1r", "i8:1r", "f4:3", "int64", "int64", "float32", "int64", "int64")
MATMUL = ("f4:3", "f4:3", "i8:1r", "i8:1r", "b1:2", "f4:3", "int64", "int64", "int64")
TEST_WARM = (
    ("compiled", "_any_tasks", TILE),
    ("compiled", "_matmul_ieee_tasks", MATMUL),
    ("compiled", "_matmul_any_tasks", MATMUL),
    ("compiled", "_round16_any", ("f4:1", "f4:1", "int64")),
)
TEST_GROUPS = [[f"{module}.{name}" for module, name, _ in TEST_WARM]]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start() -> list:
    """Start compiling, in child processes at once, what a fresh numba cache lacks: both WARM
    stages side by side (the workers' `kernels.wait()` waits for the full one anyway; the
    lean forms only serve a program that cannot wait) at normal priority, and TEST_WARM.
    The workers' own loaders find the loader's locks held (`kernels._one_at_a_time`, keyed
    by the same groups), wait, and load what these children wrote. Returns the children."""
    from aneforge.hardware import kernels
    if not kernels.available() or os.environ.get("ANEFORGE_KERNELS") == "numpy":
        return []
    kernels._drop_stale(kernels._place())   # the loader's first step (writes the stamp)
    lean, full = kernels._stages()
    children = [kernels._compile_elsewhere(stage) for stage in (full, lean)
                if kernels._uncached(stage)]
    if kernels._uncached(TEST_WARM):
        children.append(_compile_test_kernels(kernels))
    return children


def _compile_test_kernels(kernels) -> subprocess.Popen:
    """`kernels._spawn`'s child for TEST_WARM: WARM extended in the child only (the library's
    loader never compiles these), under the same one-compile-at-a-time lock; niced below the
    WARM stages (the fused VM's full form, the longest compile, goes first)."""
    program = kernels._CHILD.format(nice=5, package=os.path.join(ROOT, "aneforge"),
                                    groups=TEST_GROUPS)
    program = program.replace("kernels.compile_groups(",
                              f"kernels.WARM += {TEST_WARM!r}\nkernels.compile_groups(")
    path = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    return subprocess.Popen([sys.executable, "-c", program],
                            env=dict(os.environ, ANEFORGE_KERNELS="numba", PYTHONPATH=path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for_test_kernels() -> None:
    """Wait while another process compiles TEST_WARM (the controller's child): its lock taken
    and let go; at once when nobody holds it. The first call then loads them from the cache."""
    from aneforge.hardware import kernels
    with kernels._one_at_a_time(TEST_GROUPS):
        pass
