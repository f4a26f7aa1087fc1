"""Every seed of a run, derived from the master seed: the one place ``SeedSequence`` is used.

A seed for a purpose is ``SeedSequence(seed, spawn_key=keys).generate_state(1)[0]``, with a
text key hashed by :func:`stable_hash` (CRC-32, the same in every process). Streams that
differ in any key are independent, so drawing more for one purpose never shifts another's
draws, and a claim's numbers do not depend on which claims ran before it.
:meth:`sim.claims.base.Context.seed_for` keys by (claim id, purpose); the paper homes key
their runs' streams (data, init, evaluation) by purpose under a run's own seed.
"""
from __future__ import annotations

import zlib
from typing import Union

import numpy as np

__all__ = ["stable_hash", "derive_seed", "derive_seeds", "stream"]

Key = Union[int, str]


def stable_hash(text: str) -> int:
    """A hash of ``text`` that is the same in every process (unlike ``hash``): CRC-32 of its UTF-8."""
    return zlib.crc32(text.encode("utf-8"))


def _sequence(seed: int, keys: tuple[Key, ...]) -> np.random.SeedSequence:
    return np.random.SeedSequence(int(seed), spawn_key=tuple(stable_hash(k) if isinstance(k, str) else int(k)
                                                             for k in keys))


def derive_seed(seed: int, *keys: Key) -> int:
    """The 32-bit seed of ``keys`` under ``seed`` (reported next to the numbers it produced)."""
    return int(_sequence(seed, keys).generate_state(1)[0])


def derive_seeds(seed: int, *keys: Key, n: int) -> list[int]:
    """``n`` 32-bit seeds of ``keys`` under ``seed`` (one state of length ``n``: the first ``m``
    do not depend on ``n``)."""
    return [int(v) for v in _sequence(seed, keys).generate_state(int(n))]


def stream(seed: int, *keys: Key) -> np.random.Generator:
    """A generator seeded by the sequence of ``keys`` under ``seed`` itself (not by a derived
    32-bit seed)."""
    return np.random.default_rng(_sequence(seed, keys))
