"""const and cast."""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import DTypeError
from ._common import same_type
from ._grad import attach
from .registry import Attr, define


def _const_infer(t, attrs):
    val = attrs["val"]
    dt = dtypes.EXACT.get(val.dtype)
    if dt is None:
        raise DTypeError(f"const: numpy dtype {val.dtype} has no MIL dtype; use one of "
                         f"{', '.join(d.np_name for d in dtypes.ALL)}")
    return same_type(val.shape, dt)


define("identity", ("x",), lambda t, attrs: t["x"], lambda nm, x: x, exact=True,
       layout="same_order", elementwise=1, fused=("copy", "copy"))

define("const", (), _const_infer, lambda nm, val: val, attrs={"val": Attr("value")}, literal=True)

CASTABLE = ("fp16", "fp32", "int8", "uint8", "int16", "uint16", "int32", "bool")


def _cast_infer(t, attrs):
    if attrs["dtype"] not in CASTABLE:
        raise DTypeError(f"cast: dtype {attrs['dtype']!r} is not one of {CASTABLE}")
    return same_type(t["x"].shape, dtypes.BY_NAME[attrs["dtype"]])


def _cast_sim(ctx, x, dtype):
    out = dtypes.BY_NAME[dtype].np
    if out.kind in "iu" and x.dtype.kind == "f":
        return np.trunc(x)                    # MIL cast to int truncates toward zero
    return x                                  # the simulator stores it in `dtype`


# not `fused`: whether it runs as a copy depends on its dtypes (the run plan decides)
define("cast", ("x",), _cast_infer, _cast_sim, attrs={"dtype": Attr("str")}, elementwise=1)


# ---- gradient rules ----------------------------------------------------------------------
attach("identity", lambda g, ins, a, out: {"x": g})
attach("cast", lambda g, ins, a, out: {"x": g.to(ins["x"].dtype)} if ins["x"].dtype.is_float else {})
