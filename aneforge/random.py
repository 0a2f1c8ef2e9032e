"""torch's random generators: `af.Generator`, the default one `af.manual_seed` seeds, and the
engine behind them.

A Generator owns an *engine*: the object that draws. The engine is numpy's PCG64
(`np.random.Generator`), and the draws aneforge makes go through the numpy Generator methods
`random`, `standard_normal`, `uniform`, `normal`, `integers`, `permutation` and `choice`, and
`get_state` / `set_state` save and restore the engine's `bit_generator.state` (a JSON-able
dict). An engine that reproduces torch's CPU stream (mt19937 and torch's transforms) plugs in
by providing those methods and setting `Generator.ENGINE` to its constructor from a seed;
nothing else changes.

>>> import aneforge as af
>>> g = af.Generator().manual_seed(3)
>>> a = af.rand(2, generator=g).tolist()
>>> a == af.rand(2, generator=af.Generator().manual_seed(3)).tolist(), g.initial_seed()
(True, 3)
"""
from __future__ import annotations

import json
import secrets

import numpy as np

from .context import CTX
from .devices import use

DEFAULT_SEED = 0


class Generator:
    """torch.Generator: a seeded stream of host random draws (`generator=` on af.rand,
    af.randn, af.randint, af.randperm, af.multinomial, Tensor.normal_ / uniform_ / bernoulli,
    DataLoader and random_split). `device` is accepted ("cpu", "mps", "ane")."""

    ENGINE = staticmethod(np.random.default_rng)     # seed -> engine (see the module's docstring)

    def __init__(self, device="cpu"):
        self.device = use(device, "af.Generator")
        self.manual_seed(DEFAULT_SEED)

    def manual_seed(self, seed: int) -> "Generator":
        """Restart the stream from `seed`; returns the generator (as torch's)."""
        seed = int(seed)
        if seed < 0:
            seed += 2 ** 64      # torch accepts negative seeds as their 64-bit pattern
        self._seed, self.engine = seed, self.ENGINE(seed)
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns that new seed."""
        seed = secrets.randbits(63)
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> np.ndarray:
        """The engine's state as bytes (a uint8 array, as torch's ByteTensor): `set_state`
        resumes the stream exactly there."""
        blob = json.dumps([self._seed, self.engine.bit_generator.state]).encode()
        return np.frombuffer(blob, np.uint8).copy()

    def set_state(self, new_state) -> "Generator":
        seed, state = json.loads(np.asarray(new_state, np.uint8).tobytes())
        self._seed, self.engine = seed, self.ENGINE(seed)
        self.engine.bit_generator.state = state
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
