"""The op categories in each OpDef (`layout`, `elementwise`, `fused`, `fold`) agree with what the
ops compute and with the fused VM's opcodes: the passes, the run plan and the compile walls
read them instead of their own op-name sets."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from aneforge import dtypes
from aneforge.errors import AneforgeError
from aneforge.hardware.kernels import fused
from aneforge.hardware.numerics import Numerics
from aneforge.ops import REGISTRY
from aneforge.ops.registry import LAYOUTS, OpDef, elementwise_ops, layout_ops

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4)).astype(np.float16).astype(np.float32)

# attributes for one use of each data-movement op on X, and of each elementwise op that needs
# some (the others take their defaults)
ATTRS = {
    "reshape": {"shape": (6, 4)}, "expand_dims": {"axes": (1,)}, "identity": {},
    "transpose": {"perm": (2, 0, 1)}, "tile": {"reps": (1, 2, 3)},
    "slice_by_index": {"begin": (0, 1, 0), "end": (2, 3, 4), "stride": (1, 1, 2),
                       "begin_mask": (False,) * 3, "end_mask": (False,) * 3,
                       "squeeze_mask": (False,) * 3},
    "split": {"num_splits": 2, "axis": 2}, "concat": {"axis": 0}, "pad": {"pad": (1, 1)},
    "clip": {"alpha": -0.5, "beta": 0.5}, "leaky_relu": {"alpha": 0.1},
    "cast": {"dtype": "fp32"},
}
# inputs of shape (1, ...) for the ops that need one there
ONE_LEADING = {"squeeze": {"axes": (0,)}, "pixel_shuffle": {"upscale_factor": 2}}


def ctx(name, dtype=dtypes.float16, out=dtypes.float16):
    return SimpleNamespace(numerics=Numerics(), in_dtypes=(dtype,), out_dtypes=(out,),
                           op_type=name, op_name=name)


def run(name, *xs, **attrs):
    op = REGISTRY[name]
    with np.errstate(all="ignore"):
        return op.simulate(ctx(name), *xs, **op.full_attrs(attrs))


def moved(name):
    """(input, result values flattened) of data-movement op `name`."""
    if name in ONE_LEADING:
        x = RNG.standard_normal((1, 8, 2, 2)).astype(np.float32)
        return x, np.ravel(run(name, x, **ONE_LEADING[name]))
    args = (X, X) if name == "concat" else X
    out = run(name, args, **ATTRS[name])
    out = np.concatenate([np.ravel(o) for o in out]) if isinstance(out, tuple) else out
    return X, np.ravel(out)


@pytest.mark.parametrize("name", sorted(layout_ops(*LAYOUTS)))
def test_a_layout_kind_says_what_the_result_holds(name):
    x, out = moved(name)
    kind, values = REGISTRY[name].layout, np.ravel(x)
    assert REGISTRY[name].exact and REGISTRY[name].elementwise in (0, 1)
    if kind == "same_order":
        assert np.array_equal(out, values)
    elif kind == "reorder":
        assert not np.array_equal(out, values) and np.array_equal(np.sort(out), np.sort(values))
    elif kind == "repeat":
        assert set(out) == set(values) and out.size > values.size
    elif kind == "part":                    # (split's parts together hold them all)
        assert set(out) <= set(values)
    else:                                   # assemble: every value, and more
        assert set(values) <= set(out) and out.size > values.size


def _flip(a):
    return np.ascontiguousarray(a[::-1, ::-1, ::-1])


@pytest.mark.parametrize("name", sorted(elementwise_ops()))
def test_an_elementwise_op_computes_each_element_alone(name):
    """Reordering the elements of every input reorders the result the same way."""
    op = REGISTRY[name]
    x = np.abs(X) + 0.25 if name in ("log", "rsqrt", "sqrt", "pow") else X
    ins = {"logical_not": [x > 0], "select": [x > 0, x, -x]}.get(name, [x] * op.elementwise)
    attrs = ATTRS.get(name, {})
    got, want = run(name, *map(_flip, ins), **attrs), _flip(run(name, *ins, **attrs))
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("name", sorted(n for n, op in REGISTRY.items() if op.fused))
def test_fused_ops_are_elementwise_or_same_order_with_known_opcodes(name):
    op = REGISTRY[name]
    assert op.elementwise or op.layout == "same_order"
    assert all(fused.OP[code] < fused.REDUCE for code in op.fused)
    if op.layout == "same_order":
        assert op.fused == ("copy", "copy")


@pytest.mark.parametrize("name", sorted(n for n, op in REGISTRY.items() if op.fold))
def test_fold_ops_are_reductions_with_reduction_opcodes(name):
    op = REGISTRY[name]
    assert name.startswith("reduce_") and op.fused is None and not op.elementwise
    assert all(fused.OP[code] >= fused.REDUCE for code in op.fold)


def test_every_opcode_is_named_by_an_op_or_the_run_plan():
    """No opcode is dead: the OpDefs name most, the run plan the ones it picks per step (a
    cast to bool runs as `nonzero`, a pointwise op as `lookup`, reduce_max over abs's
    result as `absmax`)."""
    named = {c for op in REGISTRY.values() for c in (op.fused or ()) + (op.fold or ())}
    assert set(fused.OPCODES) - named == {"nonzero", "lookup", "absmax"}


def test_a_category_the_registry_does_not_know_is_refused():
    with pytest.raises(AneforgeError, match="layout"):
        OpDef("x", ("x",), None, None, layout="shuffled")
    with pytest.raises(AneforgeError, match="elementwise"):
        OpDef("x", ("x",), None, None, elementwise=2)
    with pytest.raises(AneforgeError, match="no layout kind"):
        layout_ops("shuffled")
