"""Bit-level comparison of float32 results, shared by the kernel tests."""
import numpy as np


def assert_same_bits(a: np.ndarray, b: np.ndarray) -> None:
    """a and b hold the same float32 bits, NaN where a has NaN (any payload)."""
    nan = np.isnan(a)
    assert (nan == np.isnan(b)).all()
    bad = (a.view(np.uint32) != b.view(np.uint32)) & ~nan
    assert not bad.any(), f"{bad.sum()} differ, first at {np.argwhere(bad)[0]}"
