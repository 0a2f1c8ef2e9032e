"""The tensor API's argument checking, fuzzed against torch's accept/reject decision.

Random calls (dims in and out of range, floats where ints belong, zero and negative sizes, shapes of
rank 0..4, float/int/bool inputs, broadcasting partners) go to torch and to aneforge. Four outcomes count as bugs:
- internal: aneforge raised something other than its own errors or the built-in error torch users
  expect (IndexError/TypeError/ValueError/RuntimeError from an aneforge frame, not numpy's);
- silent accept: torch rejected the call and aneforge returned a result;
- wrong: both accepted and the shape, dtype kind or values differ;
- false reject: torch accepted and aneforge refused, unless with an engine limit (LimitError,
  DTypeError: rank above 5, int64, ... are the ANE's, documented).
"""
import os
import traceback

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import aneforge as af
import aneforge.nn.functional as AF

dims = st.one_of(st.integers(-6, 6), st.just(1.5), st.none())
shapes = st.lists(st.integers(1, 4), min_size=0, max_size=4).map(tuple)
small = st.integers(-2, 5)


def _listing(draw, n):
    return [draw(st.integers(-5, 5)) for _ in range(n)]


# name -> strategy of an argument tuple, and how to call it on a tensor of either library
CALLS = {
    "sum": (st.tuples(dims, st.booleans()), lambda x, d, k: x.sum(dim=d, keepdim=k) if d is not None else x.sum()),
    "mean": (st.tuples(dims, st.booleans()), lambda x, d, k: x.mean(dim=d, keepdim=k) if d is not None else x.mean()),
    "amax": (st.tuples(st.integers(-6, 6)), lambda x, d: x.amax(dim=d)),
    "amin": (st.tuples(st.integers(-6, 6)), lambda x, d: x.amin(dim=d)),
    "argmax": (st.tuples(st.integers(-6, 6), st.booleans()), lambda x, d, k: x.argmax(dim=d, keepdim=k)),
    "var": (st.tuples(st.integers(-6, 6), st.integers(0, 2)), lambda x, d, c: x.var(dim=d, correction=c)),
    "softmax": (st.tuples(st.integers(-6, 6)), lambda x, d: x.softmax(d)),
    "log_softmax": (st.tuples(st.integers(-6, 6)), lambda x, d: x.log_softmax(d)),
    "cumsum": (st.tuples(st.integers(-6, 6)), lambda x, d: x.cumsum(d)),
    "flip": (st.tuples(st.lists(st.integers(-6, 6), max_size=3)), lambda x, d: x.flip(d)),
    "roll": (st.tuples(st.integers(-7, 7), st.integers(-6, 6)), lambda x, s, d: x.roll(s, d)),
    "squeeze": (st.tuples(st.integers(-6, 6)), lambda x, d: x.squeeze(d)),
    "unsqueeze": (st.tuples(st.integers(-7, 7)), lambda x, d: x.unsqueeze(d)),
    "transpose": (st.tuples(st.integers(-6, 6), st.integers(-6, 6)), lambda x, a, b: x.transpose(a, b)),
    "movedim": (st.tuples(st.integers(-6, 6), st.integers(-6, 6)), lambda x, a, b: x.movedim(a, b)),
    "permute": (st.tuples(st.lists(st.integers(-5, 5), max_size=5)), lambda x, p: x.permute(*p)),
    "flatten": (st.tuples(st.integers(-6, 6), st.integers(-6, 6)), lambda x, a, b: x.flatten(a, b)),
    "reshape": (st.tuples(st.lists(st.integers(-1, 6), max_size=4)), lambda x, s: x.reshape(*s) if s else x.reshape(())),
    "expand": (st.tuples(st.lists(st.integers(-1, 4), max_size=5)), lambda x, s: x.expand(*s)),
    "repeat": (st.tuples(st.lists(st.integers(0, 3), max_size=5)), lambda x, s: x.repeat(*s)),
    "narrow": (st.tuples(st.integers(-6, 6), st.integers(-5, 5), st.integers(-1, 5)),
               lambda x, d, s, n: x.narrow(d, s, n)),
    "select": (st.tuples(st.integers(-6, 6), st.integers(-5, 5)), lambda x, d, i: x.select(d, i)),
    "split": (st.tuples(small, st.integers(-6, 6)), lambda x, s, d: x.split(s, d)),
    "chunk": (st.tuples(small, st.integers(-6, 6)), lambda x, n, d: x.chunk(n, d)),
    "tril": (st.tuples(st.integers(-4, 4)), lambda x, k: x.tril(k)),
    "triu": (st.tuples(st.integers(-4, 4)), lambda x, k: x.triu(k)),
    "size": (st.tuples(dims), lambda x, d: x.size(d) if d is not None else x.size()),
    "cat": (st.tuples(st.integers(-6, 6)), lambda x, d: _lib(x).cat([x, x], d)),
    "stack": (st.tuples(st.integers(-7, 7)), lambda x, d: _lib(x).stack([x, x], d)),
    "index": (st.tuples(st.integers(-6, 6)), lambda x, i: x[i]),
    "add": (st.tuples(shapes), lambda x, s: x + _ones(x, s)),
    "mul_rev": (st.tuples(shapes), lambda x, s: _ones(x, s) * x),
    "where": (st.tuples(shapes), lambda x, s: _lib(x).where(_ones(x, s) > 0, x, 0.0)),
    "matmul": (st.tuples(shapes), lambda x, s: x @ _ones(x, s)),
    "bmm": (st.tuples(shapes), lambda x, s: _lib(x).bmm(x, _ones(x, s))),
    "cat_shapes": (st.tuples(shapes, st.integers(-5, 5)), lambda x, s, d: _lib(x).cat([x, _ones(x, s)], d)),
    "index_list": (st.tuples(st.lists(st.integers(-5, 5), min_size=1, max_size=3)), lambda x, L: x[L]),
    "index_list_dim1": (st.tuples(st.lists(st.integers(-5, 5), min_size=1, max_size=3)),
                        lambda x, L: x[:, L]),
    "index_select": (st.tuples(st.integers(-3, 3), st.lists(st.integers(-1, 4), min_size=1, max_size=3)),
                     lambda x, d, L: x.index_select(d, _lib(x).tensor(L))),
    "mask": (st.tuples(st.floats(-2, 2)), lambda x, c: x[x > c]),
    "softmax_F": (st.tuples(st.integers(-6, 6)), lambda x, d: _F(x).softmax(x, dim=d)),
    "normalize": (st.tuples(st.integers(-6, 6)), lambda x, d: _F(x).normalize(x, dim=d)),
}


def _ones(x, shape):
    return _lib(x).ones(*shape) if shape else _lib(x).ones(())


def _lib(x):
    return torch if isinstance(x, torch.Tensor) else af


def _F(x):
    return torch.nn.functional if isinstance(x, torch.Tensor) else AF


ENGINE_LIMITS = (af.LimitError, af.DTypeError)
USER_ERRORS = (af.AneforgeError, IndexError, TypeError, ValueError, RuntimeError, OverflowError)


def _internal(e: BaseException) -> bool:
    """An exception a user should never see: not ours, or raised inside numpy/protobuf."""
    if isinstance(e, af.AneforgeError):
        return False
    if not isinstance(e, USER_ERRORS):
        return True
    innermost = traceback.extract_tb(e.__traceback__)[-1].filename
    return f"{os.sep}aneforge{os.sep}" not in innermost


def _outcome(fn, x, args):
    try:
        return fn(x, *args), None
    except Exception as e:             # noqa: BLE001 - classifying is the point
        return None, e


def _warned_outcome(fn, x, args):
    """_outcome, and whether aneforge warned (torch's NaN cases: the engine never emits NaN, so
    aneforge warns as torch does and returns the engine's value)."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res, err = _outcome(fn, x, args)
    return res, err, bool(caught)


def _flat(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _compare(t_res, a_res, warned=False) -> str | None:
    """Why the two results differ, or None."""
    if isinstance(t_res, (int, torch.Size)) or isinstance(a_res, (int, tuple)) and not \
            isinstance(t_res, (tuple, list)):
        return None if tuple(_flat(t_res)) == tuple(_flat(a_res)) else f"{t_res} vs {a_res}"
    ts, as_ = _flat(t_res), _flat(a_res)
    if len(ts) != len(as_):
        return f"{len(ts)} results vs {len(as_)}"
    for t, a in zip(ts, as_):
        if tuple(t.shape) != tuple(a.shape):
            return f"shape {tuple(t.shape)} vs {tuple(a.shape)}"
        want = t.detach().double().numpy()
        got = np.asarray(a.numpy(), dtype=np.float64)
        if t.dtype.is_floating_point != a.dtype.is_float:
            return f"dtype {t.dtype} vs {a.dtype}"
        if warned:                     # a warned-about NaN of torch's is not compared
            got, want = got[~np.isnan(want)], want[~np.isnan(want)]
        if not np.allclose(got, want, rtol=2e-2, atol=2e-2, equal_nan=True):
            return f"values differ by {np.nanmax(np.abs(got - want))}"
    return None


@pytest.fixture(scope="module")
def tally():
    counts = {"calls": 0, "internal": 0, "silent accept": 0, "wrong": 0, "false reject": 0,
              "wrong error": 0}
    yield counts
    print("\ntensor API fuzz:", counts)


KINDS = {   # input kind -> (numpy values from normal draws, torch dtype, aneforge dtype)
    "float": (lambda v: v.astype(np.float16), torch.float32, af.float16),
    "int": (lambda v: np.round(v * 3).astype(np.int32), torch.int32, af.int32),
    "bool": (lambda v: v > 0, torch.bool, af.bool),
}


def _check(name, shape, data_seed, args, tally, kind="float"):
    strategy, fn = CALLS[name]
    make, t_dtype, a_dtype = KINDS[kind]
    values = make(np.random.default_rng(data_seed).standard_normal(shape))
    t_res, t_err = _outcome(fn, torch.tensor(values, dtype=t_dtype), args)
    a_res, a_err, warned = _warned_outcome(fn, af.tensor(values, dtype=a_dtype), args)
    if a_err is None and not isinstance(a_res, (int, tuple, list)) and hasattr(a_res, "numpy"):
        a_res, a_err = _outcome(lambda r: (r.numpy(), r)[1], a_res, ())      # run it: late errors count
    tally["calls"] += 1
    call = f"{name}{args} on {kind} shape {shape}"
    if a_err is not None and _internal(a_err):
        tally["internal"] += 1
        raise AssertionError(f"internal exception from {call}: {a_err!r}") from a_err
    if t_err is not None and a_err is None:
        tally["silent accept"] += 1
        raise AssertionError(f"torch rejects {call} ({t_err}); aneforge returned a result")
    if t_err is not None and a_err is not None and isinstance(t_err, (IndexError, TypeError)) \
            and not isinstance(a_err, type(t_err)):
        tally["wrong error"] += 1
        raise AssertionError(f"{call}: torch raises {t_err!r}, aneforge {a_err!r}")
    if t_err is None and a_err is not None and not isinstance(a_err, ENGINE_LIMITS):
        tally["false reject"] += 1
        raise AssertionError(f"torch accepts {call}; aneforge raised {a_err!r}")
    if t_err is None and a_err is None:
        why = _compare(t_res, a_res, warned)
        if why:
            tally["wrong"] += 1
            raise AssertionError(f"{call}: {why}")


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data(), name=st.sampled_from(sorted(CALLS)), kind=st.sampled_from(sorted(KINDS)),
       shape=st.lists(st.integers(1, 4), min_size=0, max_size=4), seed=st.integers(0, 2 ** 16))
def test_tensor_api_accepts_and_rejects_as_torch_does(data, name, kind, shape, seed, tally):
    args = data.draw(CALLS[name][0])
    _check(name, tuple(shape), seed, args, tally, kind)
