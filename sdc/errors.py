"""Exceptions the engine raises. All are ``ValueError`` subclasses whose message names the
column or key, the bad value (or a sample), how many rows, and what to do. Also the record of
Ctrl-C in this process, which the publish step reads (:func:`raise_if_interrupted`)."""

from __future__ import annotations

__all__ = ["CertificationError", "HouseholdRiskError", "INTERRUPTS", "InputError",
           "SmallBlockError", "raise_if_interrupted"]

#: SIGINTs this process received (the command's handler, :mod:`sdc.cli.thin`, appends them)
INTERRUPTS: list[int] = []


def raise_if_interrupted() -> None:
    """Raise KeyboardInterrupt when Ctrl-C reached this process. The handler raises it where
    the signal lands, but a library can swallow it there (a Cython callback prints "Exception
    ignored in" and goes on): the publish step calls this right before its rename, so an
    interrupted run never publishes."""
    if INTERRUPTS:
        raise KeyboardInterrupt


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
