"""Exceptions the engine raises. All are ``ValueError`` subclasses whose message names the
column or key, the bad value (or a sample), how many rows, and what to do."""

from __future__ import annotations

__all__ = ["InputError", "SmallBlockError", "CertificationError", "HouseholdRiskError"]


class InputError(ValueError):
    """The microdata do not match the release config."""


class SmallBlockError(ValueError):
    """A post-randomization block is too small for the chosen policy (``small_blocks: fail``),
    or cannot be certified even after every allowed merge."""


class HouseholdRiskError(SmallBlockError):
    """A household file's composition intruder exceeds xi under ``risk.households: fail``
    (the user coarsens the keys: exit 2, like a block that cannot be certified)."""


class CertificationError(RuntimeError):
    """A block's exact maximum risk exceeds xi. Never released; indicates a bug."""
