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
