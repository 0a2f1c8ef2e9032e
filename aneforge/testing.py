"""Comparing aneforge with a reference: `assert_close` (torch.testing's name) and `compare`.

The tolerance rule, for an aneforge result `a` against a reference `e` (say torch fp32):

    |a - e| <= atol + rtol * max(|e|, scale)        elementwise, scale = max |e| * rel_scale

fp16 keeps 11 significant bits, so one rounding moves a value by up to 2^-11 of itself; a
result a few ops deep carries a few such errors. The default `rtol` is 2^-7 (eight fp16
roundings at the value). A value computed from sums or differences of larger terms (a gradient,
a normalised activation) carries errors proportional to those terms, not to itself: entries
below `rel_scale` = 1/8 of the tensor's largest magnitude are measured against that eighth.
`atol` (default 2^-24, fp16's smallest step) covers exact zeros. A transformer block's output
and every parameter gradient meet this rule against torch fp32 under the per-product matmul
model (`af.numerics("per_product")`); the ANE's own MAC datapath, the default, cuts partial sums
toward zero at 12 bits, and its gradients need rtol = 2^-5 (tested).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .creation import tensor
from .tensor import Tensor

RTOL = 2.0 ** -7
ATOL = 2.0 ** -24
REL_SCALE = 2.0 ** -3


def _host(x) -> np.ndarray:
    if isinstance(x, Tensor):
        return x.numpy().astype(np.float64)
    if hasattr(x, "detach") and hasattr(x, "cpu"):          # torch, without importing it
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


@dataclass
class Agreement:
    """How one aneforge value agrees with its reference."""
    name: str
    shape: tuple
    max_abs: float
    max_rel: float          # relative to max(|e|, scale), as the rule measures it
    cosine: float
    ok: bool

    def __str__(self) -> str:
        mark = "ok  " if self.ok else "DIFF"
        return (f"{mark} {self.name:<32} {str(self.shape):<16} max|a-e| {self.max_abs:9.3g}  "
                f"rel {self.max_rel:9.3g}  cos {self.cosine:.6f}")


def agreement(actual, expected, name: str = "value", rtol: float = RTOL, atol: float = ATOL,
              rel_scale: float = REL_SCALE) -> Agreement:
    """Measure `actual` (aneforge) against `expected` (a reference) by the module's rule."""
    a, e = _host(actual), _host(expected)
    if a.shape != e.shape:
        raise AssertionError(f"{name}: shape {a.shape} differs from the reference's {e.shape}")
    scale = rel_scale * (np.abs(e).max() if e.size else 0.0)
    both_nan = np.isnan(a) & np.isnan(e)
    diff = np.where(both_nan, 0.0, np.abs(a - e))
    diff = np.where(np.isinf(a) & (a == e), 0.0, diff)
    bound = atol + rtol * np.maximum(np.abs(e), scale)
    denom = np.maximum(np.abs(e), scale) if e.size else e
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(denom > 0, diff / np.where(denom > 0, denom, 1), np.where(diff > 0, np.inf, 0))
    na, ne = np.linalg.norm(np.nan_to_num(a)), np.linalg.norm(np.nan_to_num(e))
    cos = float(np.vdot(np.nan_to_num(a), np.nan_to_num(e)) / (na * ne)) if na and ne else \
        (1.0 if na == ne else 0.0)
    ok = bool(np.all(diff <= bound)) and not np.any(np.isnan(diff))
    return Agreement(name, a.shape, float(diff.max()) if diff.size else 0.0,
                     float(rel.max()) if rel.size else 0.0, cos, ok)


def assert_close(actual, expected, *, rtol: float | None = None, atol: float | None = None,
                 msg: str | None = None) -> None:
    """Raise AssertionError unless `actual` (an aneforge tensor, or anything array-like) agrees
    with `expected` (a torch tensor, numpy array, ...) within fp16-aware tolerances (see the
    module docstring for the rule; `rtol`/`atol` override it, as in torch.testing).

    >>> import numpy as np, aneforge as af
    >>> x = np.linspace(-3, 3, 7)
    >>> af.testing.assert_close(af.tensor(x).exp(), np.exp(x))
    >>> af.testing.assert_close(af.tensor(x) * 1.02, x)
    Traceback (most recent call last):
    ...
    AssertionError: Tensor-likes are not close! ...
    """
    r = agreement(actual, expected, rtol=RTOL if rtol is None else rtol,
                  atol=ATOL if atol is None else atol)
    if not r.ok:
        raise AssertionError(msg or f"Tensor-likes are not close! greatest absolute difference "
                                    f"{r.max_abs:.4g}, greatest relative difference "
                                    f"{r.max_rel:.4g} (rtol {rtol or RTOL:g}, fp16-aware rule: "
                                    f"see aneforge.testing)")


class Comparison(list):
    """A list of `Agreement`s (outputs, then each parameter's gradient), printable as a table."""

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self)

    def __str__(self) -> str:
        return "\n".join(str(r) for r in self)


def compare(af_model, torch_model, inputs, loss=None, **tolerances) -> Comparison:
    """Run both models on the same inputs and report forward and gradient agreement.

    `inputs`: a tuple of arrays given to both; float arrays run as float32 in torch, integer
    and bool ones keep their kind (token ids stay integers). The gradients are of
    `loss(outputs)` with respect to each parameter, matched by `named_parameters()` name; the
    default loss is `projection_loss`, a fixed random projection of every float output, whose
    gradient reaches every parameter (a mean of squares behind a final LayerNorm is nearly
    constant, and its near-zero gradients would compare noise). The models should hold the
    same weights (e.g. one made with `af.from_torch`, or `load_state_dict` of the other's).

    >>> import torch, numpy as np, aneforge as af
    >>> net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
    >>> report = af.testing.compare(af.from_torch(net, (torch.ones(2, 4),)), net,
    ...                             (np.random.default_rng(0).random((2, 4)),))
    >>> report.ok, [r.name for r in report]
    (True, ['output 0', 'grad 0.weight', 'grad 0.bias'])
    """
    import torch
    arrays = [_input(x) for x in inputs]
    a_out = _outputs(af_model(*[tensor(x) for x in arrays]))
    t_out = _outputs(torch_model(*[torch.from_numpy(x) for x in arrays]))
    report = Comparison(agreement(a, t.detach(), f"output {i}", **tolerances)
                        for i, (a, t) in enumerate(zip(a_out, t_out)))
    loss = loss or projection_loss
    for p in af_model.parameters():
        p.grad = None
    torch_model.zero_grad()
    loss(a_out).backward()
    loss(t_out).backward()
    ref = dict(torch_model.named_parameters())
    for name, p in af_model.named_parameters():
        if name in ref and ref[name].grad is not None and p.grad is not None:
            report.append(agreement(p.grad, ref[name].grad, f"grad {name}", **tolerances))
    return report


def _input(x) -> np.ndarray:
    """An input array as both models get it: floats as float32, other kinds as they are."""
    a = np.asarray(x)
    return a.astype(np.float32) if a.dtype.kind in "fc" else a


def projection_loss(outputs, seed: int = 0):
    """`sum_i (outputs[i] * W_i).sum()` with W_i fixed normal draws (seeded, scaled by
    1/sqrt(size)): the same numbers for aneforge and torch outputs, so both sides differentiate
    one loss. Integer and bool outputs are left out.

    >>> import numpy as np, aneforge as af
    >>> y = af.tensor([1.0, 2.0], requires_grad=True)
    >>> af.testing.projection_loss([y]).backward()
    >>> bool(np.all(y.grad.numpy() != 0))
    True
    """
    rng = np.random.default_rng(seed)
    total = 0
    for out in filter(_is_float, outputs):
        w = (rng.standard_normal(tuple(out.shape)) / np.sqrt(max(out.numel(), 1)))
        w = w.astype(np.float32)        # new_tensor: a torch tensor without importing torch
        total = total + (out * (tensor(w) if isinstance(out, Tensor) else out.new_tensor(w))).sum()
    return total


def _is_float(out) -> bool:
    return out.dtype.is_float if isinstance(out, Tensor) else out.dtype.is_floating_point


def _outputs(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


__all__ = ["assert_close", "compare", "projection_loss", "agreement", "Agreement", "Comparison", "RTOL", "ATOL"]
