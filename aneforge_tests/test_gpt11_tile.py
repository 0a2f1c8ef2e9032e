"""The 8-lane plain tile's strips as the GPT-style and char-LM products run them, bit-equal to
the numpy reference (`reference.tile_matmul`, the definition): each strip of 32 columns of y
copied chunk by chunk (CHUNK rows of K) into a buffer of its own before the block's rows read
it, and the strip's loop three tiles deep (a prologue of two tiles, a drain of two, a single
live tile on its own). The shapes put K around the chunk's edges, rows with 0, 1, 2 and 3
live tiles in a chunk, strips of 32 beside masked vectors of 8, and wide y (1024 columns
and more, whose strips are copied in blocks of 4 rows or more: the char-LM's weight has 2048). On a CPU where numba targets no AVX2 the 8-lane strips are not
compiled in; the tile matmul is still checked against the reference there."""
import numpy as np
import pytest

from aneforge.hardware import kernels
from aneforge.hardware.kernels import reference


def _same(a, b):
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def _operands(m, k, n, seed, chunk):
    """fp16 values inside the plain tile's domain (exact products, far from any limit). Rows
    0 .. 3 of x keep the first 0, 1, 2, 3 tiles of each chunk of K live (the others all
    zero: skipped), row 4 only each chunk's last tile and K's last; the rest stay dense."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(np.float16).astype(np.float32)
    y = (rng.standard_normal((k, n)) * 0.25).astype(np.float16).astype(np.float32)
    per, tiles = chunk // 4, (k + 3) // 4
    for i, live in enumerate((0, 1, 2, 3)[:m]):
        for t in range(tiles):
            if t % per >= live:
                x[i, 4 * t:4 * t + 4] = 0.0
    if m > 4:
        for t in range(tiles):
            if t % per != per - 1 and t != tiles - 1:
                x[4, 4 * t:4 * t + 4] = 0.0
    return x, y


SHAPES = [(8, 127, 32), (8, 128, 64), (9, 129, 40), (6, 130, 71), (5, 257, 96), (8, 300, 33),
          (7, 8, 32), (8, 4, 32), (8, 5, 65), (6, 3, 40), (8, 256, 2048), (16, 64, 256),
          (32, 32, 32), (8, 2048, 64), (6, 130, 1064), (9, 301, 1027), (4, 129, 1024),
          (2, 64, 1056)]


def _eight():
    from aneforge.hardware.kernels import avx2
    return kernels.available() and avx2.EIGHT


@pytest.mark.parametrize("shape", SHAPES)
def test_strips_equal_reference(shape):
    """`plain_block8` on rows 1 .. m-1 (an output prefilled with NaN, its buffer running past
    the end): those rows bit-equal to the reference, row 0 and the tail untouched; and the
    whole tile matmul (which hands such blocks to it) bit-equal too."""
    m, k, n = shape
    with np.errstate(all="ignore"):
        if _eight():
            from aneforge.hardware.kernels import avx2
            x, y = _operands(m, k, n, m * k + n, avx2.CHUNK)
            want = reference.tile_matmul(x, y, 0, 0, np.inf)
            buf = np.full(m * n + 16, np.nan, np.float32)
            out = buf[:m * n].reshape(m, n)
            avx2.plain_block8(x, y, out, 1, m)
            _same(out[1:], want[1:])
            assert np.isnan(out[0]).all() and np.isnan(buf[m * n:]).all()
        else:
            x, y = _operands(m, k, n, m * k + n, 128)
            want = reference.tile_matmul(x, y, 0, 0, np.inf)
        if kernels.available():
            with kernels.using("numba"):
                kernels.wait()
                _same(kernels.tile_matmul(x, y, 0, 0, 32768.0), want)


def test_strip_copies_are_of_the_chunk():
    """Each chunk's strip (copied: y of 1056 columns, 8 rows) reads y's rows of that chunk
    and its own columns: y's rows differ chunk to chunk and its strips column to column, so a
    strip copied from the wrong rows or columns (or a stale copy) changes the result."""
    rng = np.random.default_rng(7)
    k, n = 300, 1056
    y = np.zeros((k, n), np.float32)
    y[:, :] = (np.arange(k)[:, None] % 7 + 1) * (np.arange(n)[None, :] % 5 + 1)
    y *= np.float32(2.0 ** -6)
    x = rng.integers(-3, 4, (8, k)).astype(np.float32)
    y[:, 1000:] *= np.float32(-1.0)
    with np.errstate(all="ignore"):
        want = reference.tile_matmul(x, y, 0, 0, np.inf)
    if _eight():
        from aneforge.hardware.kernels import avx2
        out = np.empty((8, n), np.float32)
        avx2.plain_block8(x, y, out, 0, 8)
        _same(out, want)
    if kernels.available():
        with kernels.using("numba"):
            kernels.wait()
            _same(kernels.tile_matmul(x, y, 0, 0, 32768.0), want)
