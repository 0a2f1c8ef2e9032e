"""The plain tile 8 lanes at a time, for CPUs without AVX-512 (x86-64 with AVX2): LLVM code
numba inlines into the tile matmul (`compiled.py`), where `plain_block8` does a row block
`_plain_rows` cleared. Compiled in only where numba targets AVX2 (`EIGHT`) and not AVX-512
(whose 16-lane form, avx512.py, wins); bit-identical to `compiled._plain_tile` with its
saturation-free accumulator, which aneforge_tests/test_tile_speed_paths.py checks lane by lane.

The arithmetic is `compiled._sum_plain`'s, step for step (exponent fields, a power-of-two
scale, llvm.trunc, the scale back: each an exact float32 operation), in generic LLVM vector
operations. What the loop vectorizer's form of it lacked is independent work in flight: a
tile is a chain of ~50 cycles of latency, and its vectorized j loop ran one chain per
iteration, the output row loaded and stored per tile (~2 instructions a cycle). Here a call
does a strip of one output row, 4 vectors of 8 columns side by side, over a chunk of K's
tiles: the accumulators stay in registers across the tiles, and the loop is software
pipelined three deep (an iteration does the first add of tile t + 2, the second of t + 1,
the third and the accumulation of t): 12 independent chains, where two deep (the first add
of the next tile beside the rest of the current one) had 8. Each strip's rows of y over a
chunk of K are first copied into a contiguous buffer (`plain_block8`), which every row of
the block then reads, where y is wide (`COPY_COLUMNS`): rows of y 2048 columns apart (a
char-LM's weight) all fall in a few sets of the first- and second-level caches, and a strip
read in place went to the third level for every row of the block. On a 2-core AMD EPYC (Zen
3), minimum process time of 50 interleaved rounds: the char-LM's [64, 256] @ [256, 2048] and
[256, 64] @ [64, 2048] 1.25-1.35x faster (0.24 against 0.32, 0.22 against 0.29 ns a product),
the GPT-style ones (K and N of 64-256) 1.0-1.05x from the deeper pipeline. The masked
strips (the last n % 32 columns) run one tile an iteration instead: the deep loop's code in
them too cost the full tile matmul's compile ~25% more CPU (29-31 s against 36-39 s), and a
product with such a strip (a vocabulary of 65) ~3% of its time.

`tiles_along_k` / `tiles8` compute the tiles of one row of products side by side instead (lane
t = tile t, 8 tiles a vector), for single-column outputs (`compiled._thin_k`: BatchNorm's and
LayerNorm's sums, where lanes across rows left one vector of 8 rows waiting on its chain).

`transpose8` copies an 8 x 8 block transposed (`compiled.transpose`: a bound matmul's
transposed operand, copied into a buffer of its own each call): 8 row loads, three rounds
of two-input shuffles, 8 row stores. numpy's strided copy took ~1.4 ns a value for the
GPT-style step's [256, 256] weight-gradient operand and ~1.1 for [64, 256]; the blocks ~0.35
and ~0.2 (min process time of 30 rounds of 20, /tmp/gpt12/trt.py: 104 -> 23 us, 24.5 -> 3.5).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

_VEC = ir.VectorType(ir.FloatType(), 8)
_IVEC = ir.VectorType(ir.IntType(32), 8)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_F0 = ir.Constant(ir.FloatType(), 0.0)
RUNS = 4            # vectors of 8 columns per strip (more spill registers: slower)
GROUPS = 1
COPY_COLUMNS = 1024  # y this wide has its strips copied (`plain_block8`), in blocks of at
COPY_ROWS = 4       # least COPY_ROWS rows: narrower, a strip read in place stays in the
                    # second-level cache, and the copy cost more than it saved (1.05-1.15x
                    # slower at 64-512 columns, 1.5x for one row of [1, 256] @ [256, 64])
CHUNK = 128         # K per pass over a block: its strip of y (16 KB, copied) stays in the
                    # first-level cache across the block's rows


def _features() -> set:
    """numba's CPU feature string for its JIT target (NUMBA_CPU_FEATURES, else the host's)."""
    from numba.core import config
    from numba.core.codegen import get_host_cpu_features
    features = config.CPU_FEATURES
    if features is None:
        features = get_host_cpu_features()
    return set(features.split(","))


def _avx2() -> bool:
    """Whether numba compiles for a CPU with AVX2 (8 lanes of float32 and int32 per vector)."""
    return "+avx2" in _features()


EIGHT = _avx2()     # frozen into the compiled kernels (numba's cache is keyed by the CPU too)


def _i64(v):
    return ir.Constant(_I64, v)


def _lanes(value):
    value = value - 2 ** 32 if value >= 2 ** 31 else value
    return ir.Constant(_IVEC, [ir.Constant(_I32, value)] * 8)


def _int(b, v):
    return b.bitcast(v, _IVEC)


def _flt(b, v):
    return b.bitcast(v, _VEC)


def _declared(b, name, ret, args):
    fn = b.module.globals.get(name)
    if fn is None:
        fn = ir.Function(b.module, ir.FunctionType(ret, [a.type for a in args]), name)
    return b.call(fn, args)


def _trunc(b, v):
    """llvm.trunc on 8 floats (one vroundps)."""
    return _declared(b, "llvm.trunc.v8f32", _VEC, [v])


def _each(f, *vs):
    return [f(*v) for v in zip(*vs)]


def _cut_sum8(b, xs, ys):
    """`compiled._sum_plain` of each pair of vectors of xs and ys, step by step across the
    pairs (independent chains side by side)."""
    ex = _each(lambda x: b.and_(_int(b, x), _lanes(0x7F800000)), xs)
    ey = _each(lambda y: b.and_(_int(b, y), _lanes(0x7F800000)), ys)
    m = _each(lambda u, v: b.select(b.icmp_unsigned(">", u, v), u, v), ex, ey)
    scale = _each(lambda e: _flt(b, b.sub(_lanes(265 << 23), e)), m)
    q = _each(lambda e: _flt(b, b.sub(e, _lanes(11 << 23))), m)
    tx = _each(lambda x, s: _trunc(b, b.fmul(x, s)), xs, scale)
    ty = _each(lambda y, s: _trunc(b, b.fmul(y, s)), ys, scale)
    return _each(lambda u, v, w: b.fmul(b.fadd(u, v), w), tx, ty, q)


def _cut12(b, v):
    """The carry's cut (`compiled._carry_cut`): v's bits with the low 12 cleared."""
    return _flt(b, b.and_(_int(b, v), _lanes(0xFFFFF000)))


def _splat(b, v, vec=_VEC, i32=False):
    v = b.trunc(v, _I32) if i32 else v
    one = b.insert_element(ir.Constant(vec, None), v, ir.Constant(_I32, 0))
    return b.shuffle_vector(one, ir.Constant(vec, None), ir.Constant(_IVEC, [0] * 8))


class _Strip:
    """The code of one strip: o[i, j:j+8*runs] = the plain-tile matmul of x[i] and
    y[:, j:j+8*runs] (float32, C-contiguous, 2-D; row kk of y at row kk - y0 and column yj
    of the array `y`: the caller's copy of a chunk of K's rows of the strip, or y itself with
    y0 = 0 and yj = j) over the full tiles starting at
    live[first:end] (in order; the others' x lanes are all 0, products +-0 that leave the
    accumulator as it is: y is finite in a plain block), from +0 when `fresh`, else from o's
    values (a later chunk of K), then the last tile when K % 4 != 0 and `ends`; `masked`: one
    run, its lanes below `count` only (the others neither read nor written)."""

    def __init__(self, context, builder, sig, args, runs, masked):
        self.b, self.runs, self.masked = builder, runs, masked
        self.o, self.x, self.y, self.live = (context.make_array(t)(context, builder, v) for t, v
                                             in zip(sig.args[:4], args))
        self.i, self.j, count, self.first, self.end, self.fresh, self.ends, self.y0, \
            self.yj = args[4:]
        self.k = cgutils.unpack_tuple(builder, self.x.shape)[1]
        self.n = cgutils.unpack_tuple(builder, self.o.shape)[1]
        self.ny = cgutils.unpack_tuple(builder, self.y.shape)[1]
        if masked:
            index = ir.Constant(_IVEC, [ir.Constant(_I32, i) for i in range(8)])
            self.mask = builder.icmp_unsigned("<", index, _splat(builder, count, _IVEC, True))

    def _ptr(self, row, c):
        """Where o[row, j + 8c] is."""
        b = self.b
        at = b.add(b.mul(row, self.n), b.add(self.j, _i64(8 * c)))
        return b.bitcast(b.gep(self.o.data, [at]), _VEC.as_pointer())

    def _y_ptr(self, kk, c):
        """Where y's row kk, column j + 8c is (see the class)."""
        b = self.b
        at = b.add(b.mul(b.sub(kk, self.y0), self.ny), b.add(self.yj, _i64(8 * c)))
        return b.bitcast(b.gep(self.y.data, [at]), _VEC.as_pointer())

    def load(self, ptr):
        if self.masked:
            return _declared(self.b, "llvm.masked.load.v8f32.p0", _VEC,
                             [ptr, ir.Constant(_I32, 4), self.mask, ir.Constant(_VEC, None)])
        return self.b.load(ptr, align=4)

    def store(self, v, ptr):
        if self.masked:
            _declared(self.b, "llvm.masked.store.v8f32.p0", ir.VoidType(),
                      [v, ptr, ir.Constant(_I32, 4), self.mask])
        else:
            self.b.store(v, ptr, align=4)

    def x_at(self, kk):
        b = self.b
        return b.load(b.gep(self.x.data, [b.add(b.mul(self.i, self.k), kk)]), align=4)

    def products(self, a, kk):
        """a * y[kk, j + 8c] for each run c."""
        b = self.b
        return [b.fmul(_splat(b, a), self.load(self._y_ptr(kk, c)))
                for c in range(self.runs)]

    def lane(self, k0, lane):
        kk = self.b.add(k0, _i64(lane))
        return self.products(self.x_at(kk), kk)

    def head(self, k0):
        """The first add of the full tile at k0 (lanes 0, 1)."""
        return _cut_sum8(self.b, self.lane(k0, 0), self.lane(k0, 1))

    def middle(self, k0, s):
        """The second add of the full tile at k0, from its first add s (lane 2)."""
        return _cut_sum8(self.b, s, self.lane(k0, 2))

    def end_add(self, k0, s, accs):
        """accs + the carry-cut third add of the full tile at k0, from its second add s."""
        return self.add(accs, _cut_sum8(self.b, s, self.lane(k0, 3)))

    def add(self, accs, t):
        return _each(lambda acc, v: self.b.fadd(acc, _cut12(self.b, v)), accs, t)

    def rest(self, k0, s, accs):
        """accs + the carry-cut sum of the full tile at k0, from its first add s."""
        return self.end_add(k0, self.middle(k0, s), accs)

    def last(self, accs):
        """accs + the last tile when K % 4 != 0: x's missing lanes 0 against y's last row
        (products +-0: the same to the plain tile, whose sign of zero never reaches the
        accumulator)."""
        b = self.b
        k0, p = b.sub(self.k, b.srem(self.k, _i64(4))), []
        for lane in range(4):
            kk = b.add(k0, _i64(lane))
            inside = b.icmp_signed("<", kk, self.k)
            kk = b.select(inside, kk, b.sub(self.k, _i64(1)))
            p.append(self.products(b.select(inside, self.x_at(kk), _F0), kk))
        return self.add(accs, _cut_sum8(b, _cut_sum8(b, _cut_sum8(b, p[0], p[1]), p[2]), p[3]))

    def tile_at(self, idx):
        return self.b.load(self.b.gep(self.live.data, [idx]))

    def start(self):
        b, zero = self.b, ir.Constant(_VEC, [_F0] * 8)
        fresh = b.icmp_unsigned("!=", self.fresh, ir.Constant(self.fresh.type, 0))
        return [b.select(fresh, zero, self.load(self._ptr(self.i, c)))
                for c in range(self.runs)]

    def finish(self, accs):
        for c, v in enumerate(accs):
            self.store(v, self._ptr(self.i, c))


def _phis(b, values, *incoming):
    """A phi per value, its incoming (values, block) pairs given."""
    out = [b.phi(v.type) for v in values]
    for vals, block in incoming:
        for phi, v in zip(out, vals):
            phi.add_incoming(v, block)
    return out


def _deep(s, b, accs, tail):
    """The loop over the strip's live tiles first .. end, three deep: with two or more, the
    prologue starts tiles 0 and 1 (two adds of the first, one of the second), each iteration
    starts tile t + 2, continues t + 1 and ends t (accumulated in order), the drain ends the
    last two; a single tile runs on its own. Branches to `tail`; returns the (accumulators,
    block) pairs arriving there."""
    pro, loop, drain, few, one = (b.append_basic_block(name) for name in (
        "pro", "loop", "drain", "few", "one"))
    b.cbranch(b.icmp_signed(">=", b.sub(s.end, s.first), _i64(2)), pro, few)
    b.position_at_end(pro)                     # tiles 0 and 1 started
    k0, k1 = s.tile_at(s.first), s.tile_at(b.add(s.first, _i64(1)))
    s2, s1 = s.middle(k0, s.head(k0)), s.head(k1)
    after = b.add(s.first, _i64(2))
    b.cbranch(b.icmp_signed("<", after, s.end), loop, drain)
    b.position_at_end(loop)        # start t + 2, continue t + 1, end t
    idx, kc, kn = _phis(b, [after, k0, k1], ([after, k0, k1], pro))
    p2, p1, acc = (_phis(b, v, (v, pro)) for v in (s2, s1, accs))
    knew = s.tile_at(idx)
    h, m, new = s.head(knew), s.middle(kn, p1), s.end_add(kc, p2, acc)
    idx2 = b.add(idx, _i64(1))
    for phi, v in zip([idx, kc, kn] + p2 + p1 + acc, [idx2, kn, knew] + m + h + new):
        phi.add_incoming(v, loop)
    b.cbranch(b.icmp_signed("<", idx2, s.end), loop, drain)
    b.position_at_end(drain)                   # end the last two
    dc, dn = _phis(b, [k0, k1], ([k0, k1], pro), ([kn, knew], loop))
    d2, d1 = _phis(b, s2, (s2, pro), (m, loop)), _phis(b, s1, (s1, pro), (h, loop))
    dacc = _phis(b, accs, (accs, pro), (new, loop))
    drained = s.rest(dn, d1, s.end_add(dc, d2, dacc))
    b.branch(tail)
    b.position_at_end(few)                     # no live tile, or one
    b.cbranch(b.icmp_signed("<", s.first, s.end), one, tail)
    b.position_at_end(one)
    k = s.tile_at(s.first)
    alone = s.rest(k, s.head(k), accs)
    b.branch(tail)
    return [(drained, drain), (accs, few), (alone, one)]


def _one_by_one(s, b, accs, tail):
    """The loop over the strip's live tiles one tile an iteration (the masked strips: a few
    columns past the last strip of 32, not worth the deep loop's code, ~1/4 of the tile
    matmul's compile). Branches to `tail`; returns the (accumulators, block) pairs arriving
    there."""
    entry, loop = b.block, b.append_basic_block("each")
    b.cbranch(b.icmp_signed("<", s.first, s.end), loop, tail)
    b.position_at_end(loop)
    idx = _phis(b, [s.first], ([s.first], entry))[0]
    acc = _phis(b, accs, (accs, entry))
    k = s.tile_at(idx)
    new = s.rest(k, s.head(k), acc)
    idx2 = b.add(idx, _i64(1))
    for phi, v in zip([idx] + acc, [idx2] + new):
        phi.add_incoming(v, loop)
    b.cbranch(b.icmp_signed("<", idx2, s.end), loop, tail)
    return [(accs, entry), (new, loop)]


def _strip_codegen(runs, masked):
    """The strip: its accumulators, the loop over its live tiles (`_deep`, or `_one_by_one`
    for a masked strip), then the last partial tile (K % 4 != 0) and the store."""
    def codegen(context, builder, sig, args):
        if not EIGHT:                # never called then (`plain_block8`); nothing to emit
            return context.get_dummy_value()
        s, b = _Strip(context, builder, sig, args, runs, masked), builder
        accs = s.start()
        tail, last, done = (b.append_basic_block(name) for name in ("tail", "last", "done"))
        arriving = (_one_by_one if masked else _deep)(s, b, accs, tail)
        b.position_at_end(tail)
        tacc = _phis(b, accs, *arriving)
        odd = b.icmp_signed("!=", b.srem(s.k, _i64(4)), _i64(0))
        ends = b.icmp_unsigned("!=", s.ends, ir.Constant(s.ends.type, 0))
        b.cbranch(b.and_(odd, ends), last, done)
        b.position_at_end(last)
        ended = s.last(tacc)
        b.branch(done)
        b.position_at_end(done)
        s.finish(_phis(b, accs, (tacc, tail), (ended, last)))
        return context.get_dummy_value()
    return codegen


def _strip(runs, masked):
    @intrinsic
    def strip(typingctx, o, x, y, live, i, j, count, first, end, fresh, ends, y0, yj):
        """See `_Strip`."""
        if not all(isinstance(t, types.Array) and t.dtype == types.float32 and t.ndim == 2
                   and t.layout == "C" for t in (o, x, y)):
            return None
        sig = types.none(o, x, y, live, i, j, count, first, end, fresh, ends, y0, yj)
        return sig, _strip_codegen(runs, masked)
    return strip


_strip32 = _strip(RUNS, False)
_strip8 = _strip(1, True)


def _row_vec(b, arr, at):
    return b.load(b.bitcast(b.gep(arr.data, [at]), _VEC.as_pointer()), align=4)


def _shuffle(b, u, v, order):
    return b.shuffle_vector(u, v, ir.Constant(_IVEC, [ir.Constant(_I32, i) for i in order]))


def _tile_lanes(b, q):
    """Four vectors of 8 products (two tiles each: tiles 0 .. 7) as four vectors, lane l of
    every tile, by the 4 x 4 transpose inside each 128-bit half (unpcklps, unpckhps, movlhps,
    movhlps: no shuffle across the halves): the tiles come out in the order 0, 2, 4, 6, 1, 3,
    5, 7 (`_TILE_ORDER` puts them back)."""
    lo, hi = (0, 8, 1, 9, 4, 12, 5, 13), (2, 10, 3, 11, 6, 14, 7, 15)
    t0, t1 = _shuffle(b, q[0], q[1], lo), _shuffle(b, q[0], q[1], hi)
    t2, t3 = _shuffle(b, q[2], q[3], lo), _shuffle(b, q[2], q[3], hi)
    low, high = (0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15)
    return [_shuffle(b, t0, t2, low), _shuffle(b, t0, t2, high), _shuffle(b, t1, t3, low),
            _shuffle(b, t1, t3, high)]


_TILE_ORDER = (0, 4, 1, 5, 2, 6, 3, 7)   # where tile t sits in `_tile_lanes`' vectors


def _tiles(groups):
    @intrinsic
    def tiles(typingctx, out, x, y, k0, t0):
        """out[t0:t0+8*groups] = the plain tiles of x[k0:k0+32*groups] * y[...] (tile t: lanes
        4t .. 4t + 3), with the carry's cut: `groups` vectors of 8 tiles side by side
        (independent chains), each tile's lanes gathered by `_tile_lanes`; float32 rows,
        C-contiguous; the caller keeps the products within x and y."""
        if not all(isinstance(t, types.Array) and t.dtype == types.float32 and t.ndim == 1
                   and t.layout == "C" for t in (out, x, y)):
            return None
        return types.none(out, x, y, k0, t0), _tiles_codegen(groups)
    return tiles


def _tiles_codegen(groups):
    def codegen(context, builder, sig, args):
        if not EIGHT:                # never called then (`compiled._row_tiles`): emit nothing
            return context.get_dummy_value()
        b = builder
        o, xr, yr = [context.make_array(t)(context, b, v) for t, v in zip(sig.args[:3], args)]
        k0, t0 = args[3], args[4]
        p = [b.fmul(_row_vec(b, xr, b.add(k0, _i64(8 * c))), _row_vec(b, yr, b.add(k0, _i64(8 * c))))
             for c in range(4 * groups)]
        lanes = [_tile_lanes(b, p[4 * g:4 * g + 4]) for g in range(groups)]
        t = _cut_sum8(b, _cut_sum8(b, _cut_sum8(b, [v[0] for v in lanes], [v[1] for v in lanes]),
                                   [v[2] for v in lanes]), [v[3] for v in lanes])
        for g in range(groups):
            ptr = b.bitcast(b.gep(o.data, [b.add(t0, _i64(8 * g))]), _VEC.as_pointer())
            b.store(_shuffle(b, _cut12(b, t[g]), t[g], _TILE_ORDER), ptr, align=4)
        return context.get_dummy_value()
    return codegen


tiles_along_k = _tiles(GROUPS)     # GROUPS vectors: 4 ran 1.4x faster than 1, 1.2x than 2
tiles8 = _tiles(1)                 # the last multiple of 32 products of a row


@njit(cache=True)
def _live_tiles(xr, live, at):
    """live[at:] = the starts of the full tiles of row xr with a nonzero x lane, in order;
    returns where they end."""
    for k0 in range(0, xr.size - 3, 4):
        if xr[k0] != 0 or xr[k0 + 1] != 0 or xr[k0 + 2] != 0 or xr[k0 + 3] != 0:
            live[at] = k0
            at += 1
    return at


@njit(cache=True)
def _chunk_ends(live, first, count, end, below):
    """end[r] = the first of row r's live tiles from first[r] that starts at or past
    `below`."""
    for r in range(first.size):
        e = first[r]
        while e < count[r] and live[e] < below:
            e += 1
        end[r] = e


@njit(cache=True, inline="always")
def _copy_strip(yb, strip, kb, j):
    """strip[:kn] = yb[kb:kb + kn, j:j + 8 * RUNS], kn the rows of the chunk from kb (a loop of
    a constant width, inlined: a call with the strip's width as a variable ran the char-LM's
    [64, 256] @ [256, 2048] 1.4x slower). Prefetching the next strip's rows here made that
    product slower, not faster."""
    for kk in range(min(CHUNK, yb.shape[0] - kb)):
        src, dst = yb[kb + kk], strip[kk]
        for c in range(8 * RUNS):
            dst[c] = src[j + c]


@njit(cache=True)
def plain_block8(xb, yb, ob, i0, i1):
    """Rows i0 .. i1 of ob = xb @ yb by the plain tile, in strips (see the module's docstring):
    K in chunks of CHUNK, each chunk's strips of 32 columns row after row (for y of at least
    COPY_COLUMNS columns and blocks of at least COPY_ROWS rows, the strip's rows of y copied
    into one contiguous buffer first, which stays in cache), the last n % 32 columns by
    masked strips of 8 reading y in place. A row's tiles whose x lanes are all 0 are
    skipped (one-hot and relu'd operands)."""
    n, k, r = ob.shape[1], xb.shape[1], i1 - i0
    tiles = r * (k // 4)                # one allocation for the four index arrays (a task
    ints = np.empty(tiles + 3 * r, np.int64)    # of GPT-style shapes is ~10 us; each ~0.1)
    live, first = ints[:tiles], ints[tiles:tiles + r]
    count, end = ints[tiles + r:tiles + 2 * r], ints[tiles + 2 * r:]
    for i in range(r):
        first[i] = i * (k // 4)
        count[i] = _live_tiles(xb[i0 + i], live, first[i])
    wide = n - n % (8 * RUNS)
    copied = wide > 0 and r >= COPY_ROWS and n >= COPY_COLUMNS
    strip = np.empty((min(CHUNK, k) if copied else 0, 8 * RUNS), np.float32)
    for kb in range(0, max(k, 1), CHUNK):
        fresh, ends = kb == 0, kb + CHUNK >= k
        _chunk_ends(live, first, count, end, kb + CHUNK)
        for j in range(0, wide, 8 * RUNS):
            if copied:
                _copy_strip(yb, strip, kb, j)
                for i in range(r):
                    _strip32(ob, xb, strip, live, i0 + i, j, 8 * RUNS, first[i], end[i], fresh,
                             ends, kb, 0)
            else:
                for i in range(r):
                    _strip32(ob, xb, yb, live, i0 + i, j, 8 * RUNS, first[i], end[i], fresh,
                             ends, 0, j)
        for j in range(wide, n, 8):
            for i in range(r):
                _strip8(ob, xb, yb, live, i0 + i, j, min(8, n - j), first[i], end[i], fresh,
                        ends, 0, j)
        first[:] = end


def _transpose8_codegen(context, builder, sig, args):
    """dst[j0:j0+8, i0:i0+8] = src[i0:i0+8, j0:j0+8] transposed: 8 row loads, the 8 x 8
    transpose in three rounds of two-input shuffles (unpcklps / unpckhps, shufps within the
    128-bit halves, then vperm2f128 across them), 8 row stores."""
    if not EIGHT:                    # never called then (`compiled.transpose`): emit nothing
        return context.get_dummy_value()
    b = builder
    src, dst = [context.make_array(t)(context, b, v) for t, v in zip(sig.args[:2], args)]
    i0, j0 = args[2], args[3]
    cols = cgutils.unpack_tuple(b, src.shape)[1]
    rows = cgutils.unpack_tuple(b, dst.shape)[1]
    r = [_row_vec(b, src, b.add(b.mul(b.add(i0, _i64(i)), cols), j0)) for i in range(8)]
    lo, hi = (0, 8, 1, 9, 4, 12, 5, 13), (2, 10, 3, 11, 6, 14, 7, 15)
    t = [_shuffle(b, r[i], r[i + 1], order) for i in range(0, 8, 2) for order in (lo, hi)]
    low, high = (0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15)
    u = [_shuffle(b, t[g + p], t[g + p + 2], order) for g in (0, 4) for p in (0, 1)
         for order in (low, high)]
    first, second = (0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15)
    for c in range(4):
        for half, order in ((0, first), (4, second)):
            at = b.add(b.mul(b.add(j0, _i64(c + half)), rows), i0)
            ptr = b.bitcast(b.gep(dst.data, [at]), _VEC.as_pointer())
            b.store(_shuffle(b, u[c], u[c + 4], order), ptr, align=4)
    return context.get_dummy_value()


@intrinsic
def transpose8(typingctx, src, dst, i0, j0):
    """See `_transpose8_codegen` (float32 2-D C-contiguous src [R, C] and dst [C, R]; the
    caller keeps the block inside both)."""
    if not all(isinstance(t, types.Array) and t.dtype == types.float32 and t.ndim == 2
               and t.layout == "C" for t in (src, dst)):
        return None
    return types.none(src, dst, i0, j0), _transpose8_codegen
