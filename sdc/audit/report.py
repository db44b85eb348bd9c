"""The outcome of ``sdc audit``: one :class:`Check` per invariant, an :class:`AuditReport` per
release folder, :class:`AuditError` for a folder that cannot be audited at all; the slack the
checks allow."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["AuditError", "AuditReport", "Check", "REL", "TOL"]


TOL = 1e-12      # same slack the engine allows when it certifies (risk <= xi + 1e-12)
REL = 1e-9       # recomputed vs recorded floats


class AuditError(ValueError):
    """The release folder cannot be audited at all (missing or unreadable audit.json)."""


@dataclass
class Check:
    """One audit check: its name, whether it passed, and what was found."""

    name: str
    ok: bool
    detail: str


@dataclass
class AuditReport:
    """All checks of one release folder; ``ok`` iff every check passed."""

    release_dir: Path
    checks: list[Check] = field(default_factory=list)
    #: the dependence check recomputed from the source (None: not recomputed)
    dependence: list | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def add(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append(Check(name, bool(ok), detail))
        return bool(ok)
