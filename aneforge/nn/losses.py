"""torch.nn.functional's losses (F.cross_entropy, F.nll_loss, F.mse_loss, ...) and the class
encoding they share (F.one_hot), imported into aneforge.nn.functional: each loss a composite of
recorded ops, with torch's reductions and legacy `size_average` / `reduce` arguments.

>>> import aneforge as af
>>> import aneforge.nn.functional as F
>>> F.mse_loss(af.tensor([1.0, 3.0]), af.tensor([1.0, 1.0])).item()
2.0
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..creation import tensor
from ..context import CTX
from ..errors import AneforgeError
from ..functions import log_softmax
from ..ops._grad import zeros
from ..tensor import Tensor, const
from ..tensor.elementwise import where
from ..tensor.args import host_values


# ---- class indices -------------------------------------------------------------------------
def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """Class indices -> one-hot rows (int32, as torch's int64), built as equal(idx, arange).
    Without num_classes (-1) there are max + 1 classes, as in torch: the width depends on the
    values, so the rows are made on the host between ANE segments (a host segment).

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.one_hot(af.tensor([0, 2]), 3).tolist()
    [[1, 0, 0], [0, 0, 1]]
    >>> F.one_hot(af.tensor([1, 0])).tolist()
    [[0, 1], [1, 0]]
    """
    if num_classes == -1 and not tensor.dtype.is_float:
        return tensor._host("one_hot", "without num_classes its width is the largest class + 1",
                            _one_hot_rows, (tensor,), (dtypes.int32,))[0]
    return _one_hot_mask(tensor, num_classes).int()


def _one_hot_rows(indices: np.ndarray) -> list:
    """one_hot's rows for max + 1 classes, with torch's checks (numpy, on the host)."""
    if not indices.size:
        raise RuntimeError("one_hot: cannot infer the number of classes from an empty tensor; "
                           "pass num_classes")
    if indices.min() < 0:
        raise RuntimeError("one_hot: class values must be non-negative")
    return [indices[..., None] == np.arange(int(indices.max()) + 1)]


def _one_hot_mask(indices: Tensor, num_classes: int) -> Tensor:
    if indices.dtype.is_float:
        raise AneforgeError(f"class indices must be an integer tensor, got {indices.dtype}")
    if num_classes < 1:
        raise AneforgeError(f"one_hot: num_classes must be positive (or -1: the largest class "
                            f"+ 1), got {num_classes}")
    classes = const(np.arange(num_classes), indices.dtype)
    return indices.unsqueeze(-1) == classes


# ---- losses ----------------------------------------------------------------------------------
def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _legacy(size_average, reduce, reduction: str) -> str:
    """torch's deprecated size_average / reduce flags, mapped as torch maps them."""
    if size_average is None and reduce is None:
        return reduction
    if reduce is False:
        return "none"
    return "sum" if size_average is False else "mean"


def _class_loss(loss: Tensor, target: Tensor, weight, ignore_index: int, reduction: str,
                every: bool = False):
    """Weight each sample by weight[target] and drop ignore_index, then reduce as torch: the
    mean divides by the kept samples' weights. `every` (`_every_counts`): nothing is dropped,
    so, unweighted, the mask and the count are left out (the count's mean is 1.0, and x / 1.0
    is x: the same values). A computed target is data the program reads: always masked."""
    if every and weight is None:
        return loss.float().mean().to(loss.dtype) if reduction == "mean" else \
            _reduce(loss, reduction)
    keep = target != ignore_index
    w = None if weight is None else select_class(_per_class(weight, loss.dtype, loss.shape),
                                                 target)
    loss = loss if w is None else loss * w
    loss = where(keep, loss, zeros(loss))
    if reduction != "mean":
        return _reduce(loss, reduction)
    count = keep.to(loss.dtype) if w is None else where(keep, w, zeros(w))
    # means, not sums: the same ratio, and a count of 140616 samples (makemore's whole training
    # split) would pass the matmul port's range as a sum (inf / inf reads 0 on the engine)
    return (loss.float().mean() / count.float().mean()).to(loss.dtype)


def _per_class(weight: Tensor, dtype, sample_shape) -> Tensor:
    """Class weights [C] laid out like log-probabilities [N, C, ...] (classes on axis 1)."""
    w = weight.to(dtype).reshape((1, -1) + (1,) * (len(sample_shape) - 1))
    return w.expand((sample_shape[0], weight.shape[0]) + tuple(sample_shape[1:]))


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log likelihood of class indices `target` under log-probabilities `input`
    [N, C, ...], with torch's class `weight` and `ignore_index`.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.nll_loss(af.tensor([[-1.0, -2.0]]), af.tensor([1])).item()
    2.0
    """
    every = _every_counts(input, target, ignore_index)
    picked = select_class(input, target)
    return _class_loss(-picked, target, weight, ignore_index,
                       _legacy(size_average, reduce, reduction), every)


def _check_classes(target: Tensor, classes: int, ignore_index: int) -> bool:
    """Class indices outside [0, classes) raise as in torch, checked on the host when the target
    is host data (an af.tensor of labels, the usual case); a computed target is not run for it.
    On the engine an out-of-range index would silently select nothing. Returns whether the
    target is host data every value of which lies in [0, classes)."""
    values = host_values(target)
    if values is None:
        return False
    if not values.size or (values.min() >= 0 and values.max() < classes):
        return True                     # (two reductions: the usual in-range labels, each step)
    bad = values[(values != ignore_index) & ((values < 0) | (values >= classes))]
    if bad.size:
        raise IndexError(f"Target {int(bad.flat[0])} is out of bounds (classes are 0..{classes - 1}"
                         f"{'' if ignore_index < 0 else f', ignore_index {ignore_index}'})")
    return False                        # (some are ignore_index)


def _every_counts(input: Tensor, target: Tensor, ignore_index: int) -> bool:
    """Whether a class-index loss may leave out its ignore_index mask (`_class_loss`): the
    labels are host data in [0, classes) (checked now: `_check_classes`) and ignore_index is
    none of them, and the call is a training step's, recorded for gradients outside
    af.compile's capture: a program run again only after this Python runs again, not one a
    replay or an export (recorded without gradients) runs on other labels."""
    classes = input.shape[1]
    return _check_classes(target, classes, ignore_index) and not 0 <= ignore_index < classes \
        and input.requires_grad and CTX.thread.grad_enabled and CTX.thread.capture is None


def select_class(values: Tensor, target: Tensor) -> Tensor:
    """values[n, target[n]] over the class axis 1, as a masked sum (no gather)."""
    mask = _one_hot_mask(target, values.shape[1])             # [N, ..., C]
    mask = mask if values.ndim == 2 else mask.movedim(-1, 1)   # classes on axis 1
    return where(mask, values, zeros(values)).sum(1)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  size_average=None, ignore_index: int = -100, reduce=None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """torch's cross_entropy: class indices (int) or class probabilities (float) as target,
    with class `weight`, `ignore_index` and label smoothing. Classes on axis 1.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.cross_entropy(af.zeros(2, 4), af.tensor([1, 3])).item()   # ln 4 = 1.3863 in fp16
    1.38...
    """
    reduction = _legacy(size_average, reduce, reduction)
    # values: checked each call (and whether any sample is dropped: part of the kind)
    every = not target.dtype.is_float and _every_counts(input, target, ignore_index)
    # a function of its inputs' values: recorded once per kind, then re-recorded
    return input._kept(("cross_entropy", weight is None, ignore_index, reduction,
                        label_smoothing, every),
                       [t for t in (input, target, weight) if t is not None],
                       lambda: _cross_entropy(input, target, weight, ignore_index, reduction,
                                              label_smoothing, every))


def _cross_entropy(input: Tensor, target: Tensor, weight, ignore_index: int, reduction: str,
                   label_smoothing: float, every: bool) -> Tensor:
    """cross_entropy's recording, its targets' values checked (`every`: none is ignored)."""
    logp = log_softmax(input, 1)
    classes = input.shape[1]
    wshape = (1, classes) + (1,) * (input.ndim - 2)
    if target.dtype.is_float:
        if target.shape != input.shape:
            raise AneforgeError(f"probability targets need the input's shape {input.shape}, "
                                f"got {target.shape}")
        soft = target if not label_smoothing else \
            target * (1 - label_smoothing) + label_smoothing / classes
        terms = logp * soft if weight is None else logp * soft * weight.reshape(wshape)
        loss = -terms.sum(1)
        return _reduce(loss, reduction)
    loss = -select_class(logp, target)
    if label_smoothing:
        spread = logp if weight is None else logp * weight.to(logp.dtype).reshape(wshape)
        smooth = -spread.mean(1)
        if weight is None:
            loss = loss * (1 - label_smoothing) + smooth * label_smoothing
            return _class_loss(loss, target, None, ignore_index, reduction, every)
        # torch: the smoothing term is not weighted by weight[target] again, but the mean
        # divides both terms by the kept samples' summed weight[target]
        main = _class_loss(loss, target, weight, ignore_index, reduction)
        keep = target != ignore_index
        smooth = where(keep, smooth, zeros(smooth))
        if reduction == "mean":
            wt = select_class(_per_class(weight, logp.dtype, loss.shape), target)
            smooth = (smooth.float().mean() / where(keep, wt, zeros(wt)).float().mean()).to(
                logp.dtype)                                 # means: see _class_loss
        else:
            smooth = _reduce(smooth, reduction)
        return main * (1 - label_smoothing) + smooth * label_smoothing
    return _class_loss(loss, target, weight, ignore_index, reduction, every)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    return _reduce((input - target).abs(), reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average=None, reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """torch's (1 - y) x + L (log1p(exp(-|x|)) + max(-x, 0)), L = 1 + (pos_weight - 1) y,
    times `weight`, written as a sum of non-negative terms: (1 - y) x + L log1p(exp(-x)) for
    x >= 0, -pos_weight y x + L log1p(exp(x)) below (torch's form cancels for negative x:
    13 ulps at x = -11.6). No exp overflows; `pos_weight` broadcasts over the last (class)
    axis.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> x, y = af.tensor([0.0, 2.0]), af.tensor([1.0, 0.0])
    >>> F.binary_cross_entropy_with_logits(x, y, pos_weight=af.tensor([3.0, 3.0])).item()
    2.10...
    """
    x, y = input, target
    up = x >= 0
    soft = where(up, -x, x).exp().log1p()                 # log1p(exp(-|x|)), torch's gradient at 0
    y_pos = y if pos_weight is None else pos_weight * y
    loss = where(up, x * (1.0 - y), -(x * y_pos))
    loss = loss + (soft if pos_weight is None else soft * ((pos_weight - 1.0) * y + 1.0))
    loss = loss if weight is None else loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction))


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """-(y log(x) + (1 - y) log(1 - x)) of probabilities x, each log clamped at -100 as
    torch (so x = 0 or 1 gives a finite loss), times `weight`; log(1 - x) is log1p(-x).

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.binary_cross_entropy(af.tensor([0.5, 1.0]), af.tensor([1.0, 1.0])).item()
    0.346...
    """
    log_p = input.log().clamp(min=-100.0)
    log_q = (-input).log1p().clamp(min=-100.0)
    loss = -(target * log_p + (1.0 - target) * log_q)
    loss = loss if weight is None else loss * weight
    return _reduce(loss, _legacy(size_average, reduce, reduction))



def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target).

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.smooth_l1_loss(af.tensor([0.5, 3.0]), af.zeros(2), reduction="none").tolist()
    [0.125, 2.5]
    """
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0) -> Tensor:
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta).

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> F.huber_loss(af.tensor([0.5, 3.0]), af.zeros(2), reduction="sum").item()
    2.625
    """
    d = (input - target).abs()
    return _reduce(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction)




def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """KL divergence with `input` as log-probabilities: target * (log(target) - input),
    0 where target is 0 (torch's xlogy), or exp(target) * (target - input) with log_target.
    reduction: 'mean' (over elements, as torch), 'batchmean' (the KL divergence: sum / batch
    size), 'sum' or 'none'.

    >>> import aneforge as af, aneforge.nn.functional as F
    >>> logp = af.tensor([[0.5, 0.5]]).log()
    >>> F.kl_div(logp, af.tensor([[0.5, 0.5]]), reduction="batchmean").item()
    0.0
    """
    reduction = _legacy(size_average, reduce, reduction)
    dtype = input._floating().dtype
    x = input.float()             # fp32 inside: t*log(t) - t*x cancels, and the sum is long
    t = (target if isinstance(target, Tensor) else tensor(target)).float()
    if log_target:
        loss = t.exp() * (t - x)
    else:
        positive = t > 0
        safe = where(positive, t, zeros(t) + 1.0)       # log(1) = 0: no -inf * 0 in the gradient
        loss = where(positive, t * (safe.log() - x), zeros(t))
    if reduction == "batchmean":
        return (loss.sum() / (x.shape[0] if x.ndim else 1)).to(dtype)
    return _reduce(loss, reduction).to(dtype)
