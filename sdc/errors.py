"""Exceptions the engine raises. All are ``ValueError`` subclasses whose message names the
column or key, the bad value (or a sample), how many rows, and what to do."""

from __future__ import annotations

__all__ = ["InputError", "SmallBlockError", "CertificationError"]


class InputError(ValueError):
    """The microdata do not match the release config."""


class SmallBlockError(ValueError):
    """A post-randomization block is too small for the chosen policy (``small_blocks: fail``),
    or cannot be certified even after every allowed merge."""


class CertificationError(RuntimeError):
    """A block's exact maximum risk exceeds xi. Never released; indicates a bug."""
