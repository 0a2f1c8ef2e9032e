"""fp32 BLAS matmuls (`accumulator="blas"`, fp32 programs) run on aneforge's thread count, and
leave numpy's BLAS setting as they found it."""
from __future__ import annotations

import numpy as np
import pytest

import aneforge as af
from aneforge.hardware import kernels


class FakeLibrary:
    """A threadpoolctl controller that records the thread counts it is given."""

    def __init__(self, n):
        self.n, self.seen = n, []

    def get_num_threads(self):
        return self.n

    def set_num_threads(self, n):
        self.n = n
        self.seen.append(n)


def _spy(monkeypatch, n=8):
    lib = FakeLibrary(n)
    monkeypatch.setattr(kernels, "_blas_libraries", lambda: (lib,))
    calls = []
    matmul = np.matmul
    monkeypatch.setattr(np, "matmul", lambda x, y: calls.append(lib.n) or matmul(x, y))
    return lib, calls


def test_a_small_matmul_runs_on_one_blas_thread_and_restores(monkeypatch):
    lib, calls = _spy(monkeypatch)
    x, y = np.ones((64, 64), np.float32), np.ones((64, 128), np.float32)
    np.testing.assert_array_equal(kernels.blas_matmul(x, y), np.full((64, 128), 64.0))
    assert calls == [1] and lib.seen == [1, 8] and lib.n == 8


@pytest.mark.parametrize("env, want", [("3", 3), ("1", 1)])
def test_a_large_matmul_runs_on_aneforge_threads(monkeypatch, env, want):
    monkeypatch.setenv("ANEFORGE_THREADS", env)
    lib, calls = _spy(monkeypatch, n=1)
    x, y = np.ones((256, 256), np.float32), np.ones((256, 256), np.float32)
    kernels.blas_matmul(x, y)
    assert calls == [want] and lib.n == 1
    assert lib.seen == ([] if want == 1 else [want, 1])


def test_the_setting_is_restored_when_the_matmul_fails(monkeypatch):
    lib, _ = _spy(monkeypatch)
    with pytest.raises(ValueError):
        kernels.blas_matmul(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))
    assert lib.n == 8


def test_blas_steps_of_a_program_go_through_it(monkeypatch):
    """The BLAS accumulator's matmul and linear use blas_matmul."""
    lib, calls = _spy(monkeypatch)
    x = af.tensor(np.ones((4, 8), np.float16))
    with af.numerics(accumulator="blas"):
        np.testing.assert_array_equal((x @ x.t()).numpy(), np.full((4, 4), 8.0, np.float16))
        af.nn.functional.linear(x, x, af.ones(4, dtype=af.float16)).numpy()
    assert len(calls) == 2 and set(calls) == {1} and lib.n == 8


def test_real_blas_setting_unchanged():
    pytest.importorskip("threadpoolctl")
    libraries = kernels._blas_libraries()
    before = [lib.get_num_threads() for lib in libraries]
    kernels.blas_matmul(np.ones((300, 300), np.float32), np.ones((300, 300), np.float32))
    assert [lib.get_num_threads() for lib in libraries] == before


def test_a_block_of_calls_sets_the_count_once_and_restores_it_at_its_end(monkeypatch):
    """Inside blas_calls() the count changes only when a call needs another one, and is put
    back once, when the (outermost) block ends."""
    monkeypatch.setenv("ANEFORGE_THREADS", "2")
    lib, calls = _spy(monkeypatch)
    small = np.ones((64, 64), np.float32), np.ones((64, 128), np.float32)
    large = np.ones((256, 256), np.float32), np.ones((256, 256), np.float32)
    with kernels.blas_calls():
        kernels.blas_matmul(*small)
        with kernels.blas_calls():
            kernels.blas_matmul(*small)
        assert lib.n == 1                       # the inner block's end restores nothing
        kernels.blas_matmul(*large)
        kernels.blas_matmul(*small)
        assert lib.n == 1
    assert calls == [1, 1, 2, 1] and lib.seen == [1, 2, 1, 8] and lib.n == 8


def test_a_block_restores_the_count_when_a_call_fails(monkeypatch):
    lib, _ = _spy(monkeypatch)
    with pytest.raises(ValueError), kernels.blas_calls():
        kernels.blas_matmul(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
        kernels.blas_matmul(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32))
    assert lib.n == 8 and not kernels._CALLS.depth and kernels._CALLS.saved is None
    kernels.blas_matmul(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))   # the turn
    assert lib.n == 8                                                          # was given back


def test_a_block_without_blas_calls_changes_nothing(monkeypatch):
    lib, _ = _spy(monkeypatch)
    with kernels.blas_calls():
        pass
    assert lib.seen == [] and kernels._CALLS.saved is None


def test_a_program_run_restores_the_count_once(monkeypatch):
    """A BLAS program's run (interpreted, then by its plan) is one block: its matmuls set
    the count once and the run restores it once."""
    lib, calls = _spy(monkeypatch)
    w = af.tensor(np.ones((8, 8), np.float16))
    with af.numerics(accumulator="blas"):
        step = af.compile(lambda x: ((x @ w) @ w.t()).sum())
        for _ in range(3):
            lib.seen.clear()
            assert step(af.tensor(np.ones((4, 8), np.float16))).item() == 2048.0
            assert lib.seen == [1, 8]
    assert len(calls) >= 6 and set(calls) == {1}     # two matmuls a run (and the sum's)


@pytest.mark.parametrize("blocks", [False, True], ids=["single calls", "blocks and calls"])
def test_threads_calling_blas_at_once_get_the_right_products_and_setting(blocks):
    """Concurrent BLAS matmuls (each changing the library's thread count), single calls on
    every thread or `blas_calls()` blocks on every other one, stay correct and leave the
    setting as it was when all are done."""
    import threading
    pytest.importorskip("threadpoolctl")
    libraries = kernels._blas_libraries()
    before = [lib.get_num_threads() for lib in libraries]
    rng = np.random.default_rng(0)
    pairs = [(rng.standard_normal((s, 40)).astype(np.float32),
              rng.standard_normal((40, s)).astype(np.float32)) for s in (8, 64, 300)]
    errors = []

    def work(block):
        for _ in range(30):
            with kernels.blas_calls() if block else _Nothing():
                for x, y in pairs:
                    if not np.allclose(kernels.blas_matmul(x, y), x @ y, rtol=1e-5, atol=1e-4):
                        errors.append((x.shape, y.shape))
    runners = [threading.Thread(target=work, args=(blocks and i % 2 == 0,)) for i in range(4)]
    for t in runners:
        t.start()
    for t in runners:
        t.join()
    assert not errors
    assert [lib.get_num_threads() for lib in libraries] == before


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
