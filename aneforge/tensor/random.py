"""torch's random Tensor methods: normal_, uniform_, bernoulli, bernoulli_, exponential_,
random_, multinomial.

Draws are made on the host from a generator (`generator=`, else the default one that
`af.manual_seed` seeds), by torch's CPU kernels (aneforge.random: the same values as torch's
after the same seed, float32 before the cast to the tensor's dtype), and enter programs as
inputs. bernoulli and multinomial of a tensor of probabilities read those probabilities first
(one realization), as their result depends on every value; their results are ordinary leaves,
with no gradient (torch's have none either).
"""
from __future__ import annotations

import numpy as np

from ..errors import AneforgeError
from ..random import engine
from .base import TensorBase


class RandomMixin(TensorBase):
    """Host random draws shaped like the tensor."""
    __slots__ = ()

    def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None) -> "Tensor":
        """Fill with samples of N(mean, std^2), in place.

        >>> import aneforge as af
        >>> x = af.zeros(2, 3).normal_(generator=af.Generator().manual_seed(0))
        >>> x.shape, x.dtype
        ((2, 3), aneforge.float16)
        """
        eng, shape = engine(generator), self.shape
        return self._refill(lambda: eng.normal(shape, mean, std))

    def uniform_(self, from_: float = 0.0, to: float = 1.0, *, generator=None) -> "Tensor":
        """Fill with samples of U[from_, to), in place.

        >>> import aneforge as af
        >>> x = af.zeros(1000).uniform_(-2, 2)
        >>> bool((x >= -2).all()) and bool((x <= 2).all())
        True
        """
        eng, shape = engine(generator), self.shape
        return self._refill(lambda: eng.uniform(shape, from_, to))

    def bernoulli_(self, p=0.5, *, generator=None) -> "Tensor":
        """Fill with 1 where a draw falls below `p` (a number, or a tensor of probabilities),
        0 elsewhere, in place."""
        eng, shape = engine(generator), self.shape
        if isinstance(p, TensorBase):
            probs = np.broadcast_to(_probabilities(p, "bernoulli_"), shape)
            return self._inplace(
                lambda: self._as_tensor(eng.bernoulli_probs(probs)).to(self.dtype))
        if not 0 <= p <= 1:
            raise ValueError(f"bernoulli_: p must be in [0, 1], got {p}")
        return self._refill(lambda: eng.bernoulli(shape, p).astype(np.float32))

    def bernoulli(self, p=None, *, generator=None) -> "Tensor":
        """1 with probability self (elementwise), else 0; self's dtype. With `p` (a number),
        every element has probability p instead.

        >>> import aneforge as af
        >>> af.tensor([0.0, 1.0, 1.0]).bernoulli().tolist()
        [0.0, 1.0, 1.0]
        """
        eng, shape = engine(generator), self.shape
        if p is not None:
            return self._draw(lambda: eng.bernoulli(shape, p).astype(np.float32), self.dtype)
        probs = _probabilities(self, "bernoulli")
        return self._as_tensor(eng.bernoulli_probs(probs)).to(self.dtype)

    def exponential_(self, lambd: float = 1.0, *, generator=None) -> "Tensor":
        """Fill with samples of the exponential distribution of rate `lambd`, in place.

        >>> import aneforge as af
        >>> bool((af.zeros(100).exponential_(2.0) >= 0).all())
        True
        """
        if not lambd > 0:
            raise ValueError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
        eng, shape = engine(generator), self.shape
        return self._refill(lambda: eng.exponential(shape, lambd))

    def random_(self, from_: int = 0, to: int | None = None, *, generator=None) -> "Tensor":
        """Fill with integers drawn uniformly from [from_, to) (`random_(to)`: [0, to)), in
        place, as torch's word % range. Without bounds: [0, 2**24] for a float tensor (torch's
        float32 rule), [0, 2**31) for int32, 0 or 1 for bool.

        >>> import aneforge as af
        >>> x = af.zeros(50, dtype=af.int32).random_(3, 7)
        >>> 3 <= x.min().item() and x.max().item() < 7
        True
        """
        eng, shape = engine(generator), self.shape
        if to is None and from_ != 0:
            from_, to = 0, from_                                  # random_(to)
        if to is None:
            modulus = _FULL_RANGE.get(self.dtype.name, (1 << 24) + 1)
            return self._refill(lambda: (eng.random(self.numel()) % np.uint64(modulus))
                                .reshape(shape).astype(np.int64))
        return self._refill(lambda: eng.random_from_to(shape, from_, to))

    def multinomial(self, num_samples: int, replacement: bool = False, *,
                    generator=None) -> "Tensor":
        """Indices of `num_samples` draws from each row of (unnormalized) weights, with or
        without replacement (int32, torch's int64); a 1-D or 2-D tensor, as torch.

        >>> import aneforge as af
        >>> af.tensor([0.0, 5.0, 0.0]).multinomial(2, replacement=True).tolist()
        [1, 1]
        """
        if self.ndim not in (1, 2):
            raise AneforgeError(f"multinomial: prob_dist must be 1 or 2 dim, got {self.ndim} dims")
        weights = _probabilities(self, "multinomial").astype(np.float64)
        rows = weights.reshape(-1, weights.shape[-1])
        if not replacement and num_samples > int((rows > 0).sum(-1).min()):
            raise AneforgeError(
                f"multinomial: cannot draw {num_samples} samples without replacement from a row "
                f"with fewer nonzero weights; pass replacement=True or draw fewer")
        if (rows.sum(-1) <= 0).any():
            raise AneforgeError("multinomial: a row of weights sums to 0; every row needs a "
                                "positive weight")
        picks = engine(generator).multinomial(rows.astype(np.float32), num_samples, replacement)
        return self._as_tensor(picks.reshape(weights.shape[:-1] + (num_samples,))
                               .astype(np.int32))

    def _refill(self, draw) -> "Tensor":
        return self._inplace(lambda: self._draw(draw, self.dtype))


# random_() without bounds: word % (the dtype's max + 1), as torch's uniform_int
_FULL_RANGE = {"int32": 1 << 31, "int16": 1 << 15, "int8": 1 << 7, "uint8": 1 << 8,
               "bool": 2}


def _probabilities(t, name: str) -> np.ndarray:
    """The realized values of probability tensor `t` (float64), checked as torch checks them."""
    values = np.asarray(t.numpy(), np.float64)
    if not np.isfinite(values).all() or (values < 0).any():
        raise AneforgeError(f"{name}: probabilities must be finite and >= 0 (got "
                            f"{values.min()} ... {values.max()})")
    if name.startswith("bernoulli") and (values > 1).any():
        raise AneforgeError(f"{name}: probabilities must be in [0, 1], got a maximum of "
                            f"{values.max()}")
    return values
