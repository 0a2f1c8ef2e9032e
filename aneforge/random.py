"""torch's random generators: `af.Generator`, the default one `af.manual_seed` seeds, and the
engine behind them.

Same seed, same numbers as torch: a Generator owns an *engine*, by default `TorchCPUEngine`,
which is torch's CPU generator (`aten/src/ATen/core/CPUGeneratorImpl.cpp`): a Mersenne
Twister (mt19937, seeded from its seed's low 32 bits as std::mt19937 is, its words drawn
by numpy's `np.random.MT19937` bit generator) and torch's transforms from its 32- and 64-bit
words to each distribution (`ATen/core/TransformationHelper.h`, `DistributionsHelper.h`,
`native/cpu/DistributionTemplates.h`), in torch's draw order, with torch's cached second
normal. `af.rand`, `af.randn`, `af.randint`, `af.randperm`, `normal_`, `uniform_`,
`bernoulli`, `multinomial`, dropout masks, `nn.init` and the layers' default initializers,
`DataLoader(shuffle=True)` and `random_split` draw what torch's CPU functions draw after the
same seed, in float32, before aneforge's float16 cast (docs/random.md). The engine's state is
torch's byte layout: `af.get_rng_state()` can be given to `torch.set_rng_state`, and back.

Where torch's own CPU numbers depend on the machine, the engine follows the machine torch
would run on, as `Generator.PLATFORM` says (see `TorchCPUEngine.NORMAL_KERNELS`):
normal_ of 16 or more float32 values runs Box-Muller through avx_mathfun.h's float
polynomials on x86-64 (torch's AVX2 kernel) and through the C library's logf / cosf / sinf
elsewhere (Apple silicon); and torch built with MKL on an *Intel* CPU draws `bernoulli_(p)`
with a float p (so dropout) from MKL's own stream, which is not reproduced (AMD CPUs and
Apple silicon use the generator's stream, reproduced here).

>>> import aneforge as af
>>> g = af.Generator().manual_seed(3)
>>> a = af.rand(2, generator=g).tolist()
>>> a == af.rand(2, generator=af.Generator().manual_seed(3)).tolist(), g.initial_seed()
(True, 3)
"""
from __future__ import annotations

import math
import platform
import secrets

import numpy as np

from .context import CTX
from .devices import use
from .hardware import kernels
from .random_kernels import box_muller_avx2, box_muller_scalar, fma

DEFAULT_SEED = 67280421310721      # torch's default_generator seed before any manual_seed

_N = 624                           # mt19937's state words
_F32 = np.float32
_ONE = _F32(1.0)


def _mt_key(seed: int) -> np.ndarray:
    """std::mt19937's state from a 32-bit seed (init_genrand: Knuth's multiplier 1812433253)."""
    key = [seed & 0xFFFFFFFF]
    for j in range(1, _N):
        prev = key[-1]
        key.append((1812433253 * (prev ^ (prev >> 30)) + j) & 0xFFFFFFFF)
    return np.array(key, np.uint32)


def _host_platform() -> str:
    return "x86_64" if platform.machine().lower() in ("x86_64", "amd64", "i686") else "other"


class TorchCPUEngine:
    """torch's CPU generator: mt19937 words and torch's transforms over them.

    Each method is the torch CPU kernel of the same name (float32 results for float
    distributions, int64 for integers), drawing exactly the words torch draws, so the
    stream stays in step with torch's through any interleaving of calls."""

    # normal_ of >= 16 contiguous float32 values: Box-Muller on blocks of 16 uniforms, through
    # avx_mathfun.h's polynomials where torch dispatches its AVX2 kernel (x86-64; AVX-512
    # machines fall back to it: DistributionKernels.cpp's REGISTER_NO_AVX512_DISPATCH), else
    # through the C library's functions.
    NORMAL_KERNELS = {"x86_64": box_muller_avx2, "other": box_muller_scalar}

    def __init__(self, seed: int, platform: str | None = None):
        self.seed = seed
        self.platform = platform or _host_platform()
        self.bits = np.random.MT19937()
        self.bits.state = {"bit_generator": "MT19937",
                           "state": {"key": _mt_key(seed), "pos": _N}}
        self.fresh = True                    # no word drawn since seeding (torch's next_ = 0)
        self.next_double_normal = None       # Box-Muller's cached second value (double path)
        self.next_float_normal = None        # kept for torch's state layout

    # -- words --------------------------------------------------------------------------
    def random(self, n: int) -> np.ndarray:
        """n 32-bit words (as uint64)."""
        if n:
            self.fresh = False
        return self.bits.random_raw(n) if n else np.zeros(0, np.uint64)

    def random64(self, n: int) -> np.ndarray:
        """n 64-bit words, each from two 32-bit ones, the first high (make64BitsFrom32Bits)."""
        w = self.random(2 * n).reshape(n, 2)
        return (w[:, 0] << np.uint64(32)) | w[:, 1]

    def _unit_float(self, n: int) -> np.ndarray:
        """uniform_real_distribution<float>(0, 1): 24 bits of a 32-bit word."""
        low24 = self.random(n).astype(np.uint32) & np.uint32(0xFFFFFF)
        return low24.view(np.int32).astype(_F32) * _F32(2.0 ** -24)   # int32: numpy's fast cast

    def _unit_double(self, n: int) -> np.ndarray:
        """uniform_real_distribution<double>(0, 1): 53 bits of a 64-bit word."""
        return (self.random64(n) & np.uint64((1 << 53) - 1)).astype(np.float64) * 2.0 ** -53

    # -- distributions --------------------------------------------------------------------
    def uniform(self, shape, from_: float = 0.0, to: float = 1.0) -> np.ndarray:
        """uniform_kernel: x * (to - from) + from in float32; a value rounding up to `to`
        becomes `from`."""
        lo, hi = _F32(from_), _F32(to)
        if lo == 0 and hi == 1:
            return self._unit_float(math.prod(shape)).reshape(shape)     # x * 1 + 0 is x
        value = fma(self._unit_float(math.prod(shape)), hi - lo, lo)   # contracted
        return np.where(value == hi, lo, value).reshape(shape)

    def normal(self, shape, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
        """normal_kernel: 16 or more values run Box-Muller on blocks of 16 uniforms (the last
        block redrawn when the size is not a multiple of 16); fewer run the double-precision
        scalar path, one pair at a time, keeping the second value for the next call."""
        n = math.prod(shape)
        if n < 16:
            return np.array([self._scalar_normal(mean, std) for _ in range(n)],
                            _F32).reshape(shape)
        data = self._unit_float(n)
        whole = n // 16 * 16
        data[:whole] = self._box_muller(data[:whole], mean, std)
        if n % 16:
            data[n - 16:] = self._box_muller(self._unit_float(16), mean, std)
        return data.reshape(shape)

    def _box_muller(self, uniforms: np.ndarray, mean: float, std: float) -> np.ndarray:
        """Blocks of 16 uniforms -> 16 normals each: the cosines from the first 8 (as 1 - u)
        paired with the last 8, then the sines."""
        blocks = uniforms.reshape(-1, 2, 8)
        u1, u2 = _ONE - blocks[:, 0], np.ascontiguousarray(blocks[:, 1])
        fill = self.NORMAL_KERNELS[self.platform]
        if fill is box_muller_avx2 and kernels.active() == "numba":
            from . import random_compiled                       # numba: imported on first use
            fill = random_compiled.box_muller_avx2
        cos, sin = fill(u1.reshape(-1), u2.reshape(-1), _F32(mean), _F32(std))
        return np.stack([cos.reshape(-1, 8), sin.reshape(-1, 8)], 1).reshape(-1)

    def _scalar_normal(self, mean: float, std: float) -> float:
        """normal_distribution<double>: Box-Muller on two 53-bit uniforms; sin's value waits."""
        if self.next_double_normal is not None:
            value, self.next_double_normal = self.next_double_normal, None
            return value * std + mean
        u1, u2 = self._unit_double(2)
        r = math.sqrt(-2.0 * math.log1p(-u2))
        theta = 2.0 * math.pi * u1
        self.next_double_normal = r * math.sin(theta)
        return r * math.cos(theta) * std + mean

    def random_from_to(self, shape, low: int, high: int) -> np.ndarray:
        """random_(low, high) / randint: word % range + low; ranges of 2**28 or more take
        64-bit words (uniform_int_from_to_distribution)."""
        span, n = high - low, math.prod(shape)
        if span <= 0:
            raise ValueError(f"random_ expects 'from' to be less than 'to', but got "
                             f"from={low} >= to={high}")
        if span >= 1 << 28:
            offsets = self.random64(n) % np.uint64(span)
        else:                                           # 32-bit words: a faster modulo
            offsets = self.random(n).astype(np.uint32) % np.uint32(span)
        return (offsets.astype(np.int64) + low).reshape(shape)

    def random_int64(self, shape=()) -> np.ndarray:
        """random_() of an int64 tensor: a 64-bit word % 2**63."""
        n = math.prod(shape)
        return (self.random64(n) % np.uint64(1 << 63)).astype(np.int64).reshape(shape)

    def randperm(self, n: int) -> np.ndarray:
        """randperm_cpu: Fisher-Yates from the front, swapping i with i + word % (n - i)."""
        if n >= 0xFFFFFFFF // 20:
            raise ValueError(f"randperm: n={n} is over torch's small-n algorithm "
                             f"(n < {0xFFFFFFFF // 20}), the only one reproduced")
        perm = np.arange(n, dtype=np.int64)
        if n > 1:
            steps = (self.random(n - 1) % np.arange(n, 1, -1, dtype=np.uint64)).tolist()
            out = perm.tolist()
            for i, z in enumerate(steps):
                out[i], out[i + z] = out[i + z], out[i]
            perm = np.array(out, np.int64)
        return perm

    def bernoulli(self, shape, p: float) -> np.ndarray:
        """bernoulli_(p) with a float p: a 53-bit uniform < p per element."""
        return (self._unit_double(math.prod(shape)) < p).reshape(shape)

    def bernoulli_probs(self, probs: np.ndarray) -> np.ndarray:
        """bernoulli of a float tensor of probabilities: a 24-bit uniform < p per element."""
        probs = np.asarray(probs, _F32)
        return (self._unit_float(probs.size).reshape(probs.shape) < probs)

    def exponential(self, shape, lambd: float = 1.0, dtype=_F32) -> np.ndarray:
        """exponential_: -1/lambda * log1p(-u) of a 53-bit uniform, in double, then `dtype`."""
        u = self._unit_double(math.prod(shape))
        return (-1.0 / lambd * np.log1p(-u)).astype(dtype).reshape(shape)

    def multinomial(self, rows: np.ndarray, num_samples: int, replacement: bool) -> np.ndarray:
        """torch.multinomial of weight rows [n, k], float32 or float64, computed in their
        dtype (int64 [n, num_samples]). One
        sample, or any without replacement: the exponential trick, the largest weight /
        Exp(1) draws (one exponential per weight, all rows first: Distributions.cpp). With
        replacement: per row, a float32 running sum divided by the total, then per sample a
        53-bit uniform located by binary search (MultinomialKernel.cpp)."""
        rows = np.asarray(rows)
        if num_samples == 1 or not replacement:
            keys = rows / self.exponential(rows.shape, 1.0, rows.dtype)
            return np.argsort(-keys, axis=-1, kind="stable")[:, :num_samples]
        cum = np.cumsum(rows, axis=-1, dtype=rows.dtype)
        cum = cum / cum[:, -1:]
        cum[:, -1] = 1
        return np.stack([np.searchsorted(c.astype(np.float64), self._unit_double(num_samples))
                         for c in cum])

    # -- state (torch's CPUGeneratorImplState byte layout) --------------------------------
    _LAYOUT = np.dtype([("seed", "<u8"), ("left", "<i4"), ("seeded", "<i4"), ("next", "<u8"),
                        ("state", "<u8", _N), ("normal_x", "<f8"), ("normal_y", "<f8"),
                        ("normal_rho", "<f8"), ("normal_is_valid", "<i4"),
                        ("next_float", "<f4"), ("next_float_valid", "u1"), ("pad", "u1", 7)])

    def get_state(self) -> np.ndarray:
        st = self.bits.state["state"]
        pos = int(st["pos"])
        rec = np.zeros((), self._LAYOUT)
        rec["seed"], rec["seeded"], rec["state"] = self.seed, 1, st["key"]
        rec["left"], rec["next"] = (1, 0) if self.fresh else (625 - pos, pos)
        if self.next_double_normal is not None:
            rec["normal_is_valid"], rec["normal_y"] = 1, self.next_double_normal
        if self.next_float_normal is not None:
            rec["next_float_valid"], rec["next_float"] = 1, self.next_float_normal
        return np.frombuffer(rec.tobytes(), np.uint8).copy()

    @classmethod
    def from_state(cls, state: np.ndarray, platform: str | None = None) -> "TorchCPUEngine":
        blob = np.asarray(state, np.uint8)
        if blob.size != cls._LAYOUT.itemsize:
            raise ValueError(f"set_state: expected a state of {cls._LAYOUT.itemsize} bytes "
                             f"(torch's CPU generator state), got {blob.size}; pass what "
                             f"get_state / torch.get_rng_state returned")
        rec = np.frombuffer(blob.tobytes(), cls._LAYOUT)[0]
        engine = cls(int(rec["seed"]), platform)
        left, nxt = int(rec["left"]), int(rec["next"])
        engine.bits.state = {"bit_generator": "MT19937", "state": {
            "key": rec["state"].astype(np.uint32), "pos": _N if left <= 1 else nxt}}
        engine.fresh = left == 1 and nxt == 0
        engine.next_double_normal = float(rec["normal_y"]) if rec["normal_is_valid"] else None
        engine.next_float_normal = float(rec["next_float"]) if rec["next_float_valid"] else None
        return engine


class Generator:
    """torch.Generator: a seeded stream of host random draws (`generator=` on af.rand,
    af.randn, af.randint, af.randperm, af.multinomial, Tensor.normal_ / uniform_ / bernoulli,
    nn.init, DataLoader and random_split), the same stream as torch's CPU generator with the
    same seed. `device` is accepted ("cpu", "mps", "ane").

    >>> import aneforge as af
    >>> g = af.Generator().manual_seed(0)
    >>> # torch.rand(3, generator=torch.Generator().manual_seed(0)): [0.4963, 0.7682, 0.0885]
    >>> [round(v, 3) for v in af.rand(3, generator=g).tolist()]
    [0.496, 0.768, 0.089]
    """

    ENGINE = TorchCPUEngine           # seed -> engine (see the module's docstring)
    PLATFORM = None      # torch's machine: None for this one, or "x86_64" / "other" (read
                         # by manual_seed and set_state)

    def __init__(self, device="cpu"):
        self.device = use(device, "af.Generator")
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed: int) -> "Generator":
        """Restart the stream from `seed`; returns the generator (as torch's)."""
        seed = int(seed)
        if seed < 0:
            seed += 2 ** 64      # torch accepts negative seeds as their 64-bit pattern
        self._seed, self.engine = seed, self.ENGINE(seed, self.PLATFORM)
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns that new seed."""
        seed = secrets.randbits(63)
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> np.ndarray:
        """The engine's state as bytes (a uint8 array, torch's ByteTensor layout: torch's
        `Generator.set_state` accepts it as a tensor): `set_state` resumes the stream there."""
        return self.engine.get_state()

    def set_state(self, new_state) -> "Generator":
        """Resume from `get_state()`'s bytes (or torch's `get_rng_state()`, as numpy)."""
        self.engine = self.ENGINE.from_state(new_state, self.PLATFORM)
        self._seed = self.engine.seed
        return self

    def __repr__(self) -> str:
        return f"<af.Generator seed={self._seed}>"


def default_generator() -> Generator:
    """The generator draws use when no `generator=` is given (`af.manual_seed` seeds it)."""
    if CTX.rng is None:
        CTX.rng = Generator()
    return CTX.rng


def engine(generator: Generator | None = None):
    """The engine to draw from: `generator`'s, else the default generator's."""
    if generator is None:
        return default_generator().engine
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an af.Generator, got {type(generator).__name__}")
    return generator.engine


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (rand, randn, nn.init, dropout masks, DataLoader shuffles);
    returns it, as torch's."""
    return default_generator().manual_seed(seed)


def seed() -> int:
    return default_generator().seed()


def initial_seed() -> int:
    return default_generator().initial_seed()


def get_rng_state() -> np.ndarray:
    return default_generator().get_state()


def set_rng_state(new_state) -> None:
    default_generator().set_state(new_state)
