"""The tile matmul's paths added for the GPT-style and char-LM steps, bit-equal to the numpy
reference (`reference.tile_matmul`, the definition), each checked to be the path taken:
blocks of up to 64 rows for wide outputs in AVX2 strips (`compiled.rows_per_task`), whose
blocks may also fall back to the generic loop (a saturating row, an inf, a tiny product) with
all their rows; and the compiled transpose of a bound matmul's transposed operand
(`compiled.transpose`, 8 x 8 blocks by `avx2.transpose8` beside scalar edges)."""
import numpy as np
import pytest

from aneforge.hardware import kernels
from aneforge.hardware.kernels import reference

from bits import assert_same_bits


def _compiled():
    if not kernels.available():
        pytest.skip("numba is not installed")
    from aneforge.hardware.kernels import avx2, compiled
    return compiled, avx2


def _sixteen():
    """Whether the plain tile runs in 16 lanes (AVX-512), where the 8-lane strips are not used."""
    from aneforge.hardware.kernels import avx512
    return avx512.WIDE


def _fp16(a):
    return a.astype(np.float16).astype(np.float32)


def _wide_operands(m, k, n, seed):
    """fp16 operands of a wide output: dense rows, a row of zeros, rows with one live tile,
    and in the second block of rows a row that saturates (|x| 60000 against y ~1: the block
    fails the plain check and runs the generic loop, every row of it), an inf of x (the same
    block) and a tiny value of y (2**-24: a product below the plain tile's range, so every
    block whose row meets it is refused)."""
    rng = np.random.default_rng(seed)
    x = _fp16(rng.standard_normal((m, k)))
    y = _fp16(rng.standard_normal((k, n)) * 0.5)
    x[1] = 0.0
    x[2, 4:] = 0.0
    x[-1] = 0.0
    x[-1, -1] = 1.0
    if m > 40:
        x[40, :] = 60000.0
        x[m - 3, k // 2] = np.inf
        y[k - 1, n // 3] = 2.0 ** -24
    return x, y


@pytest.mark.parametrize("shape", [(64, 64, 2048), (130, 129, 1064), (70, 33, 1024),
                                   (200, 7, 1031), (16, 128, 1024), (9, 5, 1040)])
def test_wide_blocks_equal_reference(shape):
    """Wide outputs (>= COPY_COLUMNS columns) in blocks of m // 2 rows up to 64 (asserted),
    with K not a multiple of 4, N not a multiple of 32 or 8, and blocks that fall back to the
    generic loop: bit-equal to the reference under the saturation limit and without one."""
    compiled, avx2 = _compiled()
    m, k, n = shape
    if avx2.EIGHT and not _sixteen():
        assert compiled.rows_per_task(m, n, 0) == min(64, max(compiled.TILE_ROWS, m // 2))
    assert compiled.rows_per_task(m, n, 4) == compiled.TILE_ROWS
    x, y = _wide_operands(m, k, n, m * k + n)
    with kernels.using("numba"), np.errstate(all="ignore"):
        kernels.wait()
        for limit in (32768.0, np.inf):
            want = reference.tile_matmul(x, y, 0, 0, limit)
            assert_same_bits(kernels.tile_matmul(x, y, 0, 0, limit), want)
            out = np.empty((m, n), np.float32)
            kernels.tile_bound(x, y, out, 0, 0, limit)()
            assert_same_bits(out, want)


def test_wide_blocks_other_datapath():
    """A datapath other than the default (here products rounded to fp16, tmode 8) keeps blocks
    of TILE_ROWS for the same wide shapes, and equals the reference."""
    compiled, _ = _compiled()
    m, k, n = 66, 21, 1030
    assert compiled.rows_per_task(m, n, 8) == compiled.TILE_ROWS
    x, y = _wide_operands(m, k, n, 3)
    with kernels.using("numba"), np.errstate(all="ignore"):
        kernels.wait()
        assert_same_bits(kernels.tile_matmul(x, y, 0, 8, 32768.0),
                         reference.tile_matmul(x, y, 0, 8, 32768.0))


@pytest.mark.parametrize("shape", [(256, 256), (64, 256), (2048, 65), (9, 13), (8, 8), (7, 17),
                                   (1, 5), (16, 1), (3, 24, 40), (2, 2, 33, 31)])
def test_transposed_operand_copies_bits(shape):
    """`compiled.copy_call` of a transposed view (a matmul's transposed operand) runs the
    compiled `transpose` (asserted) and copies every bit: random float32 bit patterns,
    NaN payloads, infs, -0 and subnormals included, whole 8 x 8 blocks beside the edges."""
    compiled, _ = _compiled()
    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    a = rng.integers(0, 2 ** 32, shape, dtype=np.uint32).view(np.float32)
    a.reshape(-1)[:4] = [np.float32(-0.0), np.inf, np.float32(1e-45), np.nan]
    view = np.swapaxes(a, -1, -2)
    buf = np.full(view.shape, 7.0, np.float32)
    copy = compiled.copy_call(buf, view)
    assert copy.func is compiled.transpose
    copy()
    np.testing.assert_array_equal(buf.view(np.uint32), np.ascontiguousarray(view).view(np.uint32))


def test_transposed_operands_equal_reference():
    """Bound matmuls whose operands are transposed views (x^T @ y, x @ y^T, and a linear
    layer's x @ W^T that `tile_bound` swaps): bit-equal to the reference with the full
    stage in, as the GPT-style step's weight gradients and attention run them."""
    _compiled()
    rng = np.random.default_rng(5)
    with kernels.using("numba"), np.errstate(all="ignore"):
        kernels.wait()
        for xs, ys in (((64, 9), (64, 40)), ((8, 2, 32, 32), (8, 2, 32, 32)), ((5, 64), (33, 64))):
            x = _fp16(rng.standard_normal(xs))
            y = _fp16(rng.standard_normal(ys))
            for xv, yv in ((np.swapaxes(x, -1, -2), y), (x, np.swapaxes(y, -1, -2))):
                if xv.shape[-1] != yv.shape[-2]:
                    continue
                want = reference.tile_matmul(np.ascontiguousarray(xv), np.ascontiguousarray(yv),
                                             0, 0, 32768.0)
                out = np.empty(want.shape, np.float32)
                kernels.tile_bound(xv, yv, out, 0, 0, 32768.0)()
                assert_same_bits(out, want)
