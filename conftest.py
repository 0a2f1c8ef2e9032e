"""pytest, for the whole tree: without numba, do not collect the modules that need it (the
doctest collection imports every module; the numba kernels' tests skip with a reason)."""
try:
    import numba  # noqa: F401
except ImportError:
    collect_ignore = ["aneforge/kernels/compiled.py", "aneforge_tests/exhaustive16.py"]
