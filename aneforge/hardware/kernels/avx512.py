"""The tile datapath's AVX-512 forms, as LLVM code numba inlines into the tile matmul
(`compiled.py`): the plain tile 16 lanes at a time (`_plain32`, `_plain16` masked,
`_plain_wide` over a row) and 16 tiles side by side along K (`_tiles16`). Compiled in only
where numba targets AVX-512F and DQ (`WIDE`); bit-identical to `compiled._plain_tile`, which
aneforge_tests/test_kernels.py and test_tile_speed_paths.py check lane by lane.
"""
from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

# The plain tile 16 lanes at a time (x86-64 with AVX-512F and DQ).
# One add of the tile in 9 vector instructions (`_cut_sum` takes 11, 3 of them multiplies):
# L and S, the operands of larger and smaller magnitude, come from vrangeps (one instruction
# each); e is L's exponent, q = 2**(e - 11); M = sign(S) * 1.5 * 2**(e + 12), whose binade's
# floats are spaced exactly q apart. cut(L) is L's bits with the low 12 cleared; M + cut(L) is
# exact (a multiple of q inside M's binade, of S's sign), and adding S rounded toward zero (the
# instruction's own rounding: vaddps {rz-sae}, no mode switch) gives M + cut(L) + cut(S), S cut
# toward zero at q; subtracting M is exact. Every value stays inside the binade when e is in
# [-115, 114]: `_plain_rows` clears only such blocks (products at least 2**-104, all bounded by
# 2**100). A tie |L| == |S| still gives both operands (range's min and max take opposite ones).
_VEC = ir.VectorType(ir.FloatType(), 16)
_IVEC = ir.VectorType(ir.IntType(32), 16)


def _avx512() -> bool:
    """Whether numba compiles for a CPU with AVX-512F and DQ: the feature string its JIT
    target gets (NUMBA_CPU_FEATURES, else the host's, without AVX under NUMBA_ENABLE_AVX=0)."""
    from numba.core import config
    from numba.core.codegen import get_host_cpu_features
    features = config.CPU_FEATURES
    if features is None:
        features = get_host_cpu_features()
    return {"+avx512f", "+avx512dq"} <= set(features.split(","))


WIDE = _avx512()     # frozen into the compiled kernels (numba's cache is keyed by the CPU too)


def _lanes(value):
    return ir.Constant(_IVEC, [ir.Constant(ir.IntType(32), value)] * 16)


def _x86(builder, name, args):
    """A call of the x86 intrinsic `name` returning 16 floats."""
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(_VEC, [a.type for a in args]), name)
    return builder.call(fn, args)


def _range(builder, x, y, imm):
    """vrangeps: imm 7, the operand of larger magnitude; 6, of smaller (each with its sign)."""
    i32 = ir.IntType(32)
    return _x86(builder, "llvm.x86.avx512.mask.range.ps.512",
                [x, y, ir.Constant(i32, imm), ir.Constant(_VEC, None),
                 ir.Constant(ir.IntType(16), -1), ir.Constant(i32, 4)])


def _rz_add(b, x, y):
    """x + y rounded toward zero (vaddps {rz-sae}: the instruction's own rounding)."""
    return _x86(b, "llvm.x86.avx512.add.ps.512", [x, y, ir.Constant(ir.IntType(32), 11)])


def _magic(b, big, small):
    """M = sign(small) * 1.5 * 2**(e + 12), e the exponent of big."""
    c = b.add(b.and_(b.bitcast(big, _IVEC), _lanes(0x7F800000)), _lanes((12 << 23) | 0x400000))
    return b.bitcast(b.or_(c, b.and_(b.bitcast(small, _IVEC), _lanes(-2 ** 31))), _VEC)


def _cut12(b, v):
    """v's bits with the low 12 cleared: v cut toward zero to 12 significant bits."""
    return b.bitcast(b.and_(b.bitcast(v, _IVEC), _lanes(-4096)), _VEC)


def _add12_16(b, xs, ys):
    """One add of the plain tile on 16 lanes (see above), for each pair of vectors of xs and
    ys, step by step across the pairs: independent chains side by side keep the pipes busy
    (one chain is ~45 cycles long). A carry's extra bit is left for the next add's cut, as in
    `_cut_sum`."""
    each = lambda f, *vs: [f(*v) for v in zip(*vs)]                         # noqa: E731
    big = each(lambda x, y: _range(b, x, y, 7), xs, ys)
    small = each(lambda x, y: _range(b, x, y, 6), xs, ys)
    m = each(lambda u, v: _magic(b, u, v), big, small)
    n = each(lambda u, v: b.fadd(u, _cut12(b, v)), m, big)               # M + cut(L), exact
    return each(b.fsub, each(lambda u, v: _rz_add(b, u, v), n, small), m)


def _splat(builder, v):
    vec = builder.insert_element(ir.Constant(_VEC, None), v, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(vec, ir.Constant(_VEC, None), _lanes(0))


def _masked(builder, name, ret, args):
    """A call of llvm.masked.load / llvm.masked.store on 16 floats (lanes off the mask are not
    touched: a row's last lanes read nothing past its end)."""
    full = f"{name}.v16f32.p0"
    fn = builder.module.globals.get(full)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(ret, [a.type for a in args]), full)
    return builder.call(fn, args)


def _lanes_below(builder, count):
    """The mask of lanes 0 .. count - 1 (count an integer, at most 16)."""
    i32 = ir.IntType(32)
    index = ir.Constant(_IVEC, [ir.Constant(i32, i) for i in range(16)])
    vec = builder.insert_element(ir.Constant(_IVEC, None), builder.trunc(count, i32),
                                 ir.Constant(i32, 0))
    return builder.icmp_unsigned("<", index, builder.shuffle_vector(
        vec, ir.Constant(_IVEC, None), _lanes(0)))


def _plain_codegen(runs, masked):
    """The code of o[j:j+16*runs] += the plain tile of (a_k * y_k[j:j+16*runs]), k = 0 .. 3,
    as `runs` runs of 16 side by side; `masked`: one run, lanes below `count` only."""
    def codegen(context, builder, sig, args):
        if not WIDE:                 # never called then (`_plain_wide`); nothing to emit
            return context.get_dummy_value()
        rows = [context.make_array(t)(context, builder, v) for t, v in zip(sig.args[:5], args)]
        j, scalars = args[5], args[6 + masked:]
        at = [builder.add(j, ir.Constant(j.type, 16 * c)) for c in range(runs)]
        ptrs = [[builder.bitcast(builder.gep(r.data, [i]), _VEC.as_pointer()) for i in at]
                for r in rows]
        i32 = ir.IntType(32)
        if masked:
            mask, four, zero = _lanes_below(builder, args[6]), ir.Constant(i32, 4), \
                ir.Constant(_VEC, None)
            load = lambda ptr: _masked(builder, "llvm.masked.load", _VEC,       # noqa: E731
                                       [ptr, four, mask, zero])
            store = lambda v, ptr: _masked(builder, "llvm.masked.store",        # noqa: E731
                                           ir.VoidType(), [v, ptr, four, mask])
        else:
            load = lambda ptr: builder.load(ptr, align=4)                       # noqa: E731
            store = lambda v, ptr: builder.store(v, ptr, align=4)               # noqa: E731
        a = [_splat(builder, v) for v in scalars]
        p = [[builder.fmul(a[k], load(ptr)) for ptr in ptrs[k + 1]] for k in range(4)]
        t = _add12_16(builder, _add12_16(builder, _add12_16(builder, p[0], p[1]), p[2]), p[3])
        for v, ptr in zip(t, ptrs[0]):                        # the carry's cut, then acc +=
            store(builder.fadd(load(ptr), _cut12(builder, v)), ptr)
        return context.get_dummy_value()
    return codegen


def _float_rows(*arrays):
    return all(isinstance(t, types.Array) and t.dtype == types.float32 and t.ndim == 1
               and t.layout == "C" for t in arrays)


@intrinsic
def _plain32(typingctx, o, y0, y1, y2, y3, j, a0, a1, a2, a3):
    """o[j:j+32] += the plain tile of (a_k * y_k[j:j+32]), k = 0 .. 3 (`_plain_tile`, its
    saturation-free accumulator `_unlimited`), as two runs of 16 side by side; float32 rows,
    C-contiguous."""
    if not _float_rows(o, y0, y1, y2, y3):
        return None
    return types.none(o, y0, y1, y2, y3, j, a0, a1, a2, a3), _plain_codegen(2, False)


@intrinsic
def _plain16(typingctx, o, y0, y1, y2, y3, j, count, a0, a1, a2, a3):
    """`_plain32` on lanes j .. j + count - 1 only (count <= 16), one masked run of 16: the
    lanes past count are neither read nor written."""
    if not _float_rows(o, y0, y1, y2, y3):
        return None
    return types.none(o, y0, y1, y2, y3, j, count, a0, a1, a2, a3), _plain_codegen(1, True)


# inlined by numba (LLVM would not inline it with its masked loop, and a call per tile and
# row costs ~1.3x)
@njit(cache=True, inline="always")
def _plain_wide(o, y0, y1, y2, y3, a0, a1, a2, a3):
    """o[j] += the plain tile of (a_k * y_k[j]) for every lane j: 32 at a time (two runs of 16
    side by side), the last n % 32 by masked runs of 16 (`_plain16`); returns how many lanes
    it did: all, or 0 without AVX-512 (the caller's loop, which LLVM vectorizes, then does
    them all)."""
    n = o.size
    if not WIDE:
        return 0
    for j in range(0, n - 31, 32):
        _plain32(o, y0, y1, y2, y3, j, a0, a1, a2, a3)
    for j in range(n - n % 32, n, 16):
        _plain16(o, y0, y1, y2, y3, j, min(16, n - j), a0, a1, a2, a3)
    return n


def _gather(builder, vec, start):
    """Lanes start, start + 4, ..., start + 60 of a 64-lane vector (a tile's lane `start`
    for 16 consecutive tiles)."""
    i32 = ir.IntType(32)
    return builder.shuffle_vector(vec, vec, ir.Constant(
        ir.VectorType(i32, 16), [ir.Constant(i32, 4 * t + start) for t in range(16)]))


@intrinsic
def _tiles16(typingctx, out, x, y, k0, t0):
    """out[t0:t0+16] = the plain tiles of x[k0:k0+64] * y[k0:k0+64] (tile t: lanes 4t ..
    4t + 3), with the carry's cut: 16 tiles of one output side by side (float32 rows,
    C-contiguous; the caller keeps k0 + 64 within x and y)."""
    if not _float_rows(out, x, y):
        return None

    def codegen(context, builder, sig, args):
        if not WIDE:                 # never called then (`_thin_k`); nothing to emit
            return context.get_dummy_value()
        o, xr, yr = [context.make_array(t)(context, builder, v)
                     for t, v in zip(sig.args[:3], args)]
        k0, t0 = args[3], args[4]
        i32 = ir.IntType(32)

        def vec(r, c):
            at = builder.add(k0, ir.Constant(k0.type, 16 * c))
            return builder.load(builder.bitcast(builder.gep(r.data, [at]), _VEC.as_pointer()),
                                align=4)
        p = [builder.fmul(vec(xr, c), vec(yr, c)) for c in range(4)]
        half = ir.Constant(ir.VectorType(i32, 32), [ir.Constant(i32, i) for i in range(32)])
        whole = ir.Constant(ir.VectorType(i32, 64), [ir.Constant(i32, i) for i in range(64)])
        lanes = builder.shuffle_vector(builder.shuffle_vector(p[0], p[1], half),
                                       builder.shuffle_vector(p[2], p[3], half), whole)
        q = [[_gather(builder, lanes, c)] for c in range(4)]
        t = _add12_16(builder, _add12_16(builder, _add12_16(builder, q[0], q[1]), q[2]), q[3])
        ptr = builder.bitcast(builder.gep(o.data, [t0]), _VEC.as_pointer())
        builder.store(_cut12(builder, t[0]), ptr, align=4)
        return context.get_dummy_value()
    return types.none(out, x, y, k0, t0), codegen
