"""The compiled tile matmuls inline avx2.py's and avx512.py's code, which numba's cache key
(compiled.py's own stamp) does not see: kernels._drop_stale drops compiled.py's cache entries
when those files changed since the cache was made, and keeps them otherwise."""
import os

from aneforge.hardware import kernels


def _cache(tmp_path, stamp):
    names = ["compiled._default_tasks-847.py311.nbi", "compiled._default_tasks-847.py311.1.nbc",
             "fused.run_full-600.py311.nbi", "casts.move-100.py311.nbi"]
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    if stamp is not None:
        (tmp_path / kernels._INLINED_STAMP).write_text(stamp)
    return names


def test_a_changed_avx2_drops_the_compiled_entries_only(tmp_path):
    _cache(tmp_path, "0" * 40)
    kernels._drop_stale(str(tmp_path))
    left = sorted(os.listdir(tmp_path))
    assert left == sorted(["fused.run_full-600.py311.nbi", "casts.move-100.py311.nbi",
                           kernels._INLINED_STAMP])
    assert (tmp_path / kernels._INLINED_STAMP).read_text() == kernels._inlined_hash()


def test_a_cache_without_a_stamp_is_treated_as_stale(tmp_path):
    _cache(tmp_path, None)
    kernels._drop_stale(str(tmp_path))
    assert not [n for n in os.listdir(tmp_path) if n.startswith("compiled.")]


def test_a_current_cache_is_kept(tmp_path):
    names = _cache(tmp_path, kernels._inlined_hash())
    kernels._drop_stale(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == sorted(names + [kernels._INLINED_STAMP])


def test_the_hash_follows_the_inlined_files():
    here = os.path.dirname(kernels.__file__)
    assert set(kernels.INLINED) == {"avx2.py", "avx512.py"}
    assert all(os.path.exists(os.path.join(here, n)) for n in kernels.INLINED)
    assert len(kernels._inlined_hash()) == 40


def test_a_new_cache_place_gets_the_stamp_first(tmp_path):
    """A cache directory numba has not made yet (NUMBA_CACHE_DIR's subdirectory on a fresh
    install) gets the hash before any kernel is compiled into it, so the next process does
    not take that first cache for a stale one."""
    kernels._drop_stale(None)
    place = tmp_path / "new"
    kernels._drop_stale(str(place))
    assert (place / kernels._INLINED_STAMP).read_text() == kernels._inlined_hash()
    names = _cache(place, None)
    kernels._drop_stale(str(place))
    assert sorted(os.listdir(place)) == sorted(names + [kernels._INLINED_STAMP])
