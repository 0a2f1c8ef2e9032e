"""What the loader's lean stage compiles (kernels/__init__.py `_stages`): every kernel the
README's training loop calls, and nothing it does not that costs seconds of a fresh
install's wait (`LATE`)."""
from __future__ import annotations

import collections

import pytest

from aneforge.hardware import kernels

needs_numba = pytest.mark.skipif(not kernels.available(), reason="the compiled kernels need numba")


def test_late_kernels_compile_with_the_full_forms():
    lean, full = kernels._stages()
    names = {w[:2] for w in lean}
    assert kernels.LATE and not kernels.LATE & names
    assert kernels.LATE <= {w[:2] for w in full}
    assert {w[:2] for w in lean} | {w[:2] for w in full} == {w[:2] for w in kernels.WARM}


@needs_numba
def test_the_lean_stage_holds_every_kernel_the_readme_loop_calls(monkeypatch):
    """The MLP 64-128-10 step of batch 64 under af.compile (the README's job, what
    bench/startup.py times), run on the lean forms: each compiled kernel its steps call from
    their third on (the loop; the first two capture and plan the program) is in the lean
    stage. A kernel left out would be compiled by the caller at its first call (numba
    compiles on demand), a pause of a second or more in the middle of the loop."""
    kernels.wait()
    from aneforge.bench.workloads import mlp, train_step
    from aneforge.hardware.kernels import casts, compiled, fused
    warm = {(m, n) for m, n, _ in kernels.WARM}
    calls = collections.Counter()

    def counted(module, where, name, kernel):
        def call(*args):
            calls[(module, name)] += 1
            return kernel(*args)
        monkeypatch.setattr(where, name, call)
    for module, where in (("compiled", compiled), ("casts", casts), ("fused", fused)):
        for name in dir(where):
            kernel = getattr(where, name)
            if hasattr(kernel, "py_func"):
                home = kernel.py_func.__module__.rsplit(".", 1)[1]
                counted(home, where, name, kernel)
    with kernels.forms("lean"):
        step = train_step(*mlp(64), "aneforge", compiled=True)
        step()
        step()
        calls.clear()
        for _ in range(3):
            step()
    lean = {w[:2] for w in kernels._stages()[0]}
    called = {(module, name) for module, name in calls if (module, name) in warm}
    assert ("fused", "run_lean") in called and ("compiled", "_lean_tasks") in called
    assert called <= lean, called - lean
    # and no kernel outside WARM (each would compile at its first call)
    assert {key for key in calls if key not in warm} <= {("compiled", "default_tasks"),
                                                         ("fused", "run")}
