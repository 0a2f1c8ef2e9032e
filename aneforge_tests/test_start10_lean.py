"""A fresh install's lean stage (kernels/__init__.py `_stages`): the lean tile matmul, one loop
nest, bit-equal to the reference on every path it has (tails of K, tiles of zeros against
inf and NaN, saturation, subnormals); the kernels left to the full stage (`LATE`) running the
reference until it is in; and the README loop calling only kernels and argument types the lean
stage compiles (a type it does not stops the loop while numba compiles it in the caller)."""
from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest

from aneforge.hardware import kernels
from aneforge.hardware.kernels import reference
from bits import assert_same_bits

pytestmark = pytest.mark.skipif(not kernels.available(), reason="the lean forms need numba")

# fp16 values through every path of the tile's adder: zeros of both signs, subnormals, the
# carry edge, values whose products reach the saturation limit, infinities and NaN
SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 2049.0, 65504.0, -65504.0, 6e-8, -6e-8, 3e-5,
                     2.0 ** -14, 1 + 2.0 ** -10, -(1 + 3 * 2.0 ** -10), 181.0, -181.0, np.inf,
                     -np.inf, np.nan], np.float32)


def _lean_and_reference(x, y, limit=32760.0):
    """The lean tile matmul's result (bound as the loader binds it before the full stage) and
    the reference's, tmode 0 (the datapath the lean form runs)."""
    with np.errstate(all="ignore"):
        ref = reference.tile_matmul(x, y, 0, 0, limit)
        with kernels.using("numba"), kernels.forms("lean"):
            lean = kernels.tile_matmul(x, y, 0, 0, limit)
    return lean, ref


def _fp16(rng, shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float16).astype(np.float32)


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6, 7, 8, 13, 64, 66])
@pytest.mark.parametrize("n", [1, 10, 33])
def test_lean_tile_matmul_is_the_reference_for_every_tail(k, n):
    """K % 4 = 0..3 (the last tile's missing lanes are products +0), a thin output and wide
    ones, rows across task boundaries (8 and 32 rows a task), rows of zeros of x (tiles
    skipped) against y with and without inf and NaN, values from every family."""
    kernels.wait()
    rng = np.random.default_rng(k * 100 + n)
    x = rng.choice(np.concatenate([SPECIALS, _fp16(rng, 64, 4.0)]), (37, k)).astype(np.float32)
    y = _fp16(rng, (k, n), 8.0)
    x[rng.random(37) < 0.4] = 0.0               # tiles of zeros, skipped while y is finite
    for y_case in (y, np.where(rng.random((k, n)) < 0.1, np.float32(np.inf), y)):
        assert_same_bits(*_lean_and_reference(x, y_case))
    y[k // 2, 0] = np.nan                      # a zero tile against a NaN of y: not skipped
    assert_same_bits(*_lean_and_reference(x, y))


@pytest.mark.parametrize("limit", [32760.0, 1024.0, np.inf])
def test_lean_tile_matmul_saturates_as_the_reference(limit):
    """Partials past the limit become +-inf in the accumulator, as the reference's, in full
    tiles and in the last one; batches against one matrix and broadcast."""
    kernels.wait()
    rng = np.random.default_rng(7)
    x = _fp16(rng, (3, 9, 22), 60.0)
    y = _fp16(rng, (1, 22, 12), 60.0)
    assert_same_bits(*_lean_and_reference(x, y, limit))
    assert_same_bits(*_lean_and_reference(x[:1], np.repeat(y, 3, axis=0), limit))


def test_lean_tile_matmul_is_one_loop_nest():
    """The lean form calls no `_block`/`_block_tail` with tile functions and none of the
    full form's paths: each function numba compiles is compiled on its own and again into
    its callers (the calls took the lean stage ~4.3 CPU-s against ~2.1)."""
    from aneforge.hardware.kernels import compiled
    tree = ast.parse(inspect.getsource(compiled._lean_tasks.py_func))
    called = {node.func.id for node in ast.walk(tree)
              if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert {"_default_tile", "_saturate"} <= called
    assert not called & {"_block", "_block_tail", "_thin", "_thin_k", "_rows", "_plain_rows",
                         "tile_tasks"}


def test_late_kernels_run_the_reference_until_the_full_stage(monkeypatch):
    """With only the lean stage in, the NaN check, the cast from fp16 and the output port
    (`LATE`) run the numpy reference (numba would compile them in this process at their first
    call: ~0.2-0.4 s each, in the middle of a loop); with the full stage in, the compiled
    kernels. The results are the same bits either way."""
    kernels.wait()
    from aneforge.hardware.kernels import compiled       # (the casts' kernels re-exported)
    calls = []
    for name in ("has_nan", "from_float16", "port"):
        kernel = getattr(compiled, name)
        monkeypatch.setattr(compiled, name,
                            lambda *a, _k=kernel, _n=name: calls.append(_n) or _k(*a))
    rng = np.random.default_rng(3)
    acc = rng.choice(SPECIALS, 200).astype(np.float32) * np.float32(300.0)
    half = rng.choice(SPECIALS, 200).astype(np.float16)

    def run():
        a = acc.copy()
        return kernels.port(a, 32760.0, True), a, kernels.has_nan(acc), \
            kernels.astype(half, np.float32)
    monkeypatch.setattr(kernels, "_FULL", type(kernels._FULL)())      # the lean stage only
    with kernels.using("numba"), np.errstate(all="ignore"):
        lean = run()
        assert calls == []
        kernels._FULL.set()
        full = run()
    assert sorted(calls) == ["from_float16", "has_nan", "port"]
    assert lean[0] == full[0] and lean[2] == full[2] is True
    assert_same_bits(lean[1], full[1])
    assert_same_bits(lean[3], full[3])


def test_the_readme_loop_calls_only_what_the_lean_stage_compiles(monkeypatch):
    """The MLP 64-128-10 step of batch 64 under af.compile (the README's job, bench/startup.py's
    first run) on the lean forms with only the lean stage in: each compiled kernel its steps
    call from the second on (the run plan's build, then the loop) is in the lean stage with
    the very argument types it is called with. A type not there (a read-only batch given to
    the cast to fp16) is compiled by numba in the caller at its first call, mid-loop."""
    import numba
    kernels.wait()
    from aneforge.bench.workloads import mlp, train_step
    from aneforge.hardware.kernels import casts, compiled, fused
    lean = {}
    for (kernel, sig), (module, name, _) in zip(kernels._kernels(kernels._stages()[0]),
                                               kernels._stages()[0]):
        lean.setdefault((module, name), set()).add(sig)
    called = set()

    def counted(module, where, name, kernel):
        def call(*args):
            called.add(((module, name), tuple(numba.typeof(a) for a in args)))
            return kernel(*args)
        monkeypatch.setattr(where, name, call)
    for where in (compiled, casts, fused):
        for name in dir(where):
            kernel = getattr(where, name)
            if hasattr(kernel, "py_func") and name not in ("run", "default_tasks"):
                home = kernel.py_func.__module__.rsplit(".", 1)[1]   # (casts re-exported)
                counted(home, where, name, kernel)          # (run, default_tasks: forms())
    monkeypatch.setattr(kernels, "_FULL", type(kernels._FULL)())      # the lean stage only
    with kernels.forms("lean"):
        step = train_step(*mlp(64), "aneforge", compiled=True)
        step()                              # (on a fresh install: on the reference)
        called.clear()
        for _ in range(4):
            step()
    assert {key for key, _ in called} >= {("fused", "run_lean"), ("compiled", "_lean_tasks")}
    # rows_per_task: the lean tile's callee, compiled with it for these very types
    missing = {(key, types) for key, types in called
               if types not in lean.get(key, ()) and key != ("compiled", "rows_per_task")}
    assert not missing, missing
