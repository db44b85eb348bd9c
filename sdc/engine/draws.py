"""Random streams: one numpy Generator per named unit of work, from the release seed.

``stream(seed, key)`` is ``Generator(PCG64(SeedSequence(seed, spawn_key=H(key))))`` where H is
the first 128 bits of SHA-256 of the key's UTF-8 bytes, as four 32-bit words. The stream of a
partition set therefore depends only on the seed and the partition set's own key: not on row
order, on which other partition sets exist, on processing order or on global numpy state.
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["key_words", "stream"]


def key_words(key: str) -> tuple[int, ...]:
    """Stable 4 x 32-bit words of SHA-256(key)."""
    d = hashlib.sha256(key.encode("utf-8")).digest()[:16]
    return tuple(int.from_bytes(d[i : i + 4], "little") for i in range(0, 16, 4))


def stream(seed: int, key: str) -> np.random.Generator:
    """The random stream for ``key`` under release seed ``seed`` (a non-negative integer)."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    ss = np.random.SeedSequence(int(seed), spawn_key=key_words(key))
    return np.random.Generator(np.random.PCG64(ss))
