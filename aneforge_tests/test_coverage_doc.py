"""docs/torch_coverage.md is generated from aneforge/_api.py's tables and says true things: each
"native" name records its one MIL op, and each name listed as absent is torch's and not
aneforge's."""
import pathlib

import numpy as np
import pytest
import torch

import aneforge as af
import aneforge.nn as nn
import aneforge.nn.functional as F
from aneforge import _api
from aneforge.core import boundary
from aneforge.docgen import torch_coverage as coverage_doc
from test_api_surfaces import _args

ROOT = pathlib.Path(af.__file__).parent.parent
GLUE = {"reshape", "cast", "const", "expand_dims", "squeeze"}     # moves or retypes data only
ALSO = {"max": {"reduce_argmax"}, "min": {"reduce_argmin"}}      # (values, indices)


def test_the_page_is_in_sync_with_the_tables():
    page = (ROOT / "docs" / "torch_coverage.md").read_text()
    assert page == coverage_doc.render(), \
        "docs/torch_coverage.md is stale: run `python -m aneforge.docgen.torch_coverage --write`"


def sample(name):
    """A call of `name` on fresh leaves (test_api_surfaces' arguments, plus a few more)."""
    x = af.tensor(np.random.default_rng(0).standard_normal((2, 3)))
    extra = {"add_": (x, 1.0), "sub_": (x, 1.0), "mul_": (x, 2.0), "div_": (x, 2.0),
             "clamp_": (x, -0.5, 0.5), "hardtanh": (x,), "relu6": (x,), "gelu": (x,),
             "silu": (x,), "leaky_relu": (x,), "linear": (x, x), "view": (x, 3, 2),
             "float": (x.int(),), "half": (x.int(),), "int": (x,), "long": (x,), "bool": (x,),
             "to": (x, af.int32), "type_as": (x, x.int()), "pad": (x, (1, 1)),
             "repeat": (x, 2, 1), "expand": (x.reshape(1, 2, 3), 4, 2, 3),
             "expand_as": (x.reshape(1, 2, 3), af.zeros(4, 2, 3)), "where": (x, x > 0, 1.0),
             "scaled_dot_product_attention": (x.reshape(1, 2, 3),) * 3,
             "cat": ((x, x),), "concat": ((x, x),), "concatenate": ((x, x),)}
    args = extra.get(name) or _args(name)
    return [af.tensor(a.numpy()) if isinstance(a, af.Tensor) else a for a in args]   # leaves


def call(name, args):
    row = next(r for r in _api.ROWS if r.name == name)
    if "Tensor" in row.surfaces:
        return getattr(args[0], name)(*args[1:])
    return getattr(F if row.home == "F" else af, name)(*args)


NATIVE = {r.name: r.runs for r in _api.ROWS if r.kind == "native"}


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_native_names_record_their_one_mil_op(name):
    out = call(name, sample(name))
    outs = [o for o in (out if isinstance(out, tuple) else (out,)) if not o.is_leaf]
    ops = {op.type for op in af.program(*outs).main.block.operations      # an int32 result's
           if not boundary.made_here(op)}                               # two-part exit aside
    op = NATIVE[name]
    assert op in ops and ops <= GLUE | {op} | ALSO.get(name, set()), ops


def test_every_row_is_classified_once():
    sets = [{r.name for r in _api.ROWS if r.kind == kind} for kind in ("native", "host", "no op")]
    rows = {r.name for r in _api.ROWS}
    for s in sets:
        assert s <= rows
    assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])
    assert all(r.kind in ("native", "decomposed", "host", "no op") for r in _api.ROWS)


SURFACES = {"torch": (torch, af), "Tensor": (torch.Tensor, af.Tensor),
            "F": (torch.nn.functional, F), "nn": (torch.nn, nn), "optim": (torch.optim, af.optim)}


@pytest.mark.parametrize("surface,name,why", _api.ABSENT, ids=lambda v: str(v)[:20])
def test_absent_names_are_torchs_and_not_ours(surface, name, why):
    theirs, ours = SURFACES[surface]
    assert hasattr(theirs, name) and not hasattr(ours, name)


def test_totals_add_up():
    t = coverage_doc.totals()
    assert t["native"] + t["decomposed"] + t["host"] + t["no op"] == len(_api.ROWS)
