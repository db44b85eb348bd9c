"""Named random streams for work that is not a record's outcome (the public row order, the
intruder simulation of the report)."""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["key_words", "stream"]

# -- named streams (work that is not per record) ------------------------------------------------
def key_words(key: str) -> tuple[int, ...]:
    """Stable 4 x 32-bit words of SHA-256(key)."""
    d = hashlib.sha256(key.encode("utf-8")).digest()[:16]
    return tuple(int.from_bytes(d[i : i + 4], "little") for i in range(0, 16, 4))


def stream(seed: int, key: str) -> np.random.Generator:
    """The random stream for ``key`` under release seed ``seed`` (a non-negative integer).

    ``Generator(PCG64(SeedSequence(seed, spawn_key=H(key))))``, H = the first 128 bits of
    SHA-256 of the key. Used for work that is not a record's outcome (the public row order, the
    intruder simulation of the report); a record's outcome never uses a stream.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    ss = np.random.SeedSequence(int(seed), spawn_key=key_words(key))
    return np.random.Generator(np.random.PCG64(ss))
