"""The Tensor: `core.py` holds the handle (recording, operands, constants, realization, host
leaves) and composes the torch methods from one family module each, below it:

    elementwise.py  arithmetic, comparisons, logic, unary math, rounding, af.where
    products.py     matmul, bmm, outer, addmm
    reduce.py       the route of every torch-level sum, and the reductions (sum ... softmax)
    movement.py     reshape, permute, expand, split, flip, ..., af.cat, af.stack
    scan.py         cumsum, cummax, sort, topk, ...
    indexing.py     x[...], gather, index_select, scatter
    inplace.py      add_, mul_, zero_, copy_, ...
    casts.py        to, float, half, type, ...

The families build results only through `self` (base.py's protocol) and never import core.py;
args.py holds the argument rules they share.

>>> import numpy as np, aneforge as af
>>> x = af.tensor(np.arange(6.0).reshape(2, 3))
>>> y = (x * 2 + 1).relu().sum(dim=1)
>>> y.shape, y.dtype
((2,), aneforge.float16)
>>> y.tolist()
[9.0, 27.0]
"""
from .args import minmax, norm_dim
from .core import Tensor, const, operands, record_op, tensor_like

__all__ = ["Tensor", "const", "minmax", "norm_dim", "operands", "record_op", "tensor_like"]
