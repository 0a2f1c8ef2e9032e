"""pytest, for the whole tree.

The suite pins the simulator: unless ANEFORGE_BACKEND says otherwise, every test (and doctest)
runs on `sim`, also on a Mac; aneforge_tests/test_macos.py picks the hardware backends itself.
Without numba, the modules that need it are not collected (the doctest collection imports
every module; the numba kernels' tests skip with a reason)."""
import os

os.environ.setdefault("ANEFORGE_BACKEND", "sim")

try:
    import numba  # noqa: F401
except ImportError:
    collect_ignore = ["aneforge/hardware/kernels/compiled.py", "aneforge_tests/exhaustive16.py"]


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_auto_scale():
    """Each test (and doctest) starts from automatic gradient scaling's defaults: its scale
    adapts across backward passes, and tests stay independent of the order they run in."""
    from aneforge.context import CTX
    CTX.auto_scale, CTX.model_scales[:] = None, []
    yield


# The suite's longest tests (seconds of one worker in a full run under pytest-xdist at load
# 8), run first: handed out in collection order, they came late, and the run ended with one
# worker on a notebook or a sweep while the other sat idle. First, they go to the first
# worker's queue while the other works from the middle of the collection; when it runs dry it
# takes the far end of that queue, short tests, so both end together. A node id's prefix
# names a test and all its cases.
LONGEST_FIRST = (
    "aneforge_tests/test_memory.py::test_memory_stays_flat_over_a_thousand_replayed_steps",  # 157
    "aneforge_tests/test_notebooks.py::test_notebook_runs",                 # 181 for the six
    "aneforge_tests/test_kernels.py::test_round16_compiled_every_float32",  # 160 for the five
    "aneforge_tests/test_kernels.py::test_a_fresh_numba_cache",             # 123 for the two
    "aneforge_tests/test_bench.py::test_every_section_runs_quick",          # 87
    "aneforge_tests/test_memory.py::test_memory_stays_flat_over_eager_steps",  # 74
    # not long itself: 1.0 s of CPU alone, 6.6-8.2 when it came late in a full run's worker
    # (its six gc.collect() calls walk the heap the tests before it left)
    "aneforge_tests/test_memory.py::test_the_flatness_check_sees_a_leak",
    "aneforge_tests/test_datapath.py::test_probe",                          # 68
    "aneforge_tests/test_tensor_chains_fuzz.py::test_random_op_chains_agree_with_torch",  # 39
    "aneforge_tests/test_kernels.py::test_a_programs_second_run_waits",     # 39
    "aneforge_tests/test_backends.py::test_check_ane_writes_its_report",    # 35
    "aneforge_tests/test_checkpoint_fuzz.py::test_checkpoint_fuzz",         # 28
)


def pytest_collection_modifyitems(items):
    """The tests of LONGEST_FIRST to the front, in its order (the rest keep theirs)."""
    def rank(item):
        return next((i for i, p in enumerate(LONGEST_FIRST) if item.nodeid.startswith(p)),
                    len(LONGEST_FIRST))
    items.sort(key=rank)                # stable: the others stay in collection order
