"""Release series: reruns of one job under one seed, and the risk of the series as a whole.

**The seed file is the series.** Every run of a job with the same seed file belongs to one
series. Because a record's draws are a keyed function of (seed, its identity) (see
:mod:`sdc.method.draws`), a record whose cell frequency t_j, PRB and theta did not change is
released with the *same* key values in every release of the series, so linking releases by
their (public, unchanged) non-key values shows the intruder nothing new about it.

**A new seed starts an independent randomization.** Records released under the old seed and
again under the new one are then two independent draws of the same NZY law: an intruder who
links the two releases by the non-key values sees two outcomes, and the modal released cell
over several independent releases converges to the true one. That is a leak for every record
released before. ``sdc release`` therefore refuses to start a new seed for a job that already
has releases under another seed, unless told to (``--new-series``): those of its output pattern
(e.g. ``releases/lfs-{month}``) and those beside its output folder made by a config of the same
name; a release beside it under another name is compared by its records
(:mod:`sdc.series.guard`). The series follows the job, not a folder pattern (docs/SERIES.md).

What the audit records (``internal/audit.json``, key ``series``): the series id (a keyed
64-bit fingerprint of the seed: ``keyed_hash(seed, "series-id", 0)``, which reveals nothing
about the seed, and also exists for integer seeds), the seed file's SHA-256, the config name,
the output pattern, whether this run started a new series, and the previous release of the
series (its folder and the SHA-256 of its ``audit.json``) when the pattern has one.

The records file and the risk of a series measured from it: :mod:`sdc.series.risk`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sdc.config.model import ConfigError, ReleaseConfig
from sdc.method.draws import keyed_hash

__all__ = ["SeriesError", "SeriesInfo", "audit_of", "find_series", "pattern_glob", "series_for",
           "series_id"]

_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")


class SeriesError(ConfigError):
    """A release would start a new seed for an output pattern with releases under another, or a
    series cannot be measured (CLI exit 2)."""


def pattern_glob(pattern: Path) -> str:
    """The output pattern with its placeholders as ``*`` (``releases/lfs-{month}`` ->
    ``releases/lfs-*``)."""
    return _PLACEHOLDER_RE.sub("*", str(pattern))


def audit_of(d: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((d / "internal" / "audit.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _same_series(audit: dict[str, Any], series_id: str, seed_file_sha256: str | None) -> bool | None:
    """True/False if ``audit`` is/is not of the series; None when it records no seed at all."""
    s = audit.get("series") or {}
    if s.get("id"):
        return str(s["id"]) == series_id
    sha = (audit.get("seed") or {}).get("sha256")
    if sha is None:
        return None
    return seed_file_sha256 is not None and sha == seed_file_sha256


@dataclass
class SeriesInfo:
    """Where this run stands in its series (goes to ``internal/audit.json`` as ``series``).

    ``members``: the earlier releases of the series (same seed) in order, the folders the
    series certificate is computed over with this release; ``lineage``: releases beside the
    output folder under another seed and another config name, whose records are compared with
    this release's (:func:`sdc.series.guard.check_series`)."""

    id: str
    seed_file_sha256: str | None
    config_name: str
    output_pattern: str
    new_series: bool
    previous: dict[str, Any] | None = None
    other_series: list[str] = field(default_factory=list)
    members: list[str] = field(default_factory=list)
    lineage: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "seed_file_sha256": self.seed_file_sha256,
                "config_name": self.config_name, "output_pattern": self.output_pattern,
                "new_series": self.new_series, "previous": self.previous,
                "releases_under_other_seeds": self.other_series, "members": self.members,
                "lineage_candidates": self.lineage}


def _config_name(audit: dict[str, Any]) -> str | None:
    s = audit.get("series") or {}
    name = s.get("config_name") or (audit.get("config") or {}).get("name")
    return None if name is None else str(name)


def find_series(pattern: Path, target: Path, *, series_id: str, seed_file_sha256: str | None,
                config_name: str, new_series: bool = False) -> SeriesInfo:
    """Check the release folders of this job and find this run's series.

    The series follows the job, not a folder pattern (docs/SERIES.md, "Which releases are one
    series"): the releases looked at are those of the output ``pattern`` **and** every release
    folder beside the output folder (its parent's children: per-month folders such as
    ``releases/lfs-2026-01``, ``releases/lfs-2026-02`` written by a config edited each month).
    A release of the pattern, or one beside it made by a config of the same name, is of this
    job: under the same seed a member of the series, under another seed another randomization
    of the same records, refused unless ``new_series``. A release beside it under another seed
    and another config name is a *lineage candidate*: the release compares its records'
    identities with it (:func:`sdc.series.guard.check_series`); one under the same seed and
    another config name is left alone.

    Parameters
    ----------
    pattern : Path
        The resolved ``output.dir`` with its placeholders (``releases/lfs-{month}``).
    target : Path
        This run's release folder (the pattern filled in).
    series_id : str
        This run's series id (keyed fingerprint of the seed).
    seed_file_sha256 : str or None
    config_name : str
    new_series : bool
        Allow starting a new seed where releases under another seed exist.

    Returns
    -------
    SeriesInfo; ``members`` are the releases of the same series other than ``target`` whose
    names sort before ``target``'s (all of them if none does), in name order; ``previous`` is
    the last of them.

    Raises
    ------
    SeriesError
        Releases of the job were made under another seed and ``new_series`` is False.
    """
    target = Path(target).absolute()
    of_pattern = {Path(p).absolute() for p in _glob(pattern)}
    beside = ({q.absolute() for q in target.parent.iterdir() if q.is_dir()}
              if target.parent.is_dir() else set())
    same, other, lineage = [], [], []
    for d in sorted(of_pattern | beside):
        audit = audit_of(d)
        verdict = None if audit is None else _same_series(audit, series_id, seed_file_sha256)
        job = d in of_pattern or _config_name(audit or {}) == str(config_name)
        if verdict is True and d != target and job:
            same.append(d)
        elif verdict is False:
            (other if job else lineage).append(d)
    if other and not new_series:
        names = ", ".join(str(d) for d in other[:3])
        raise SeriesError(
            f"the release job {config_name!r} (output {str(pattern)!r}) already has "
            f"{len(other)} release(s) made under another seed ({names}); this run's seed "
            "differs. A new seed starts an independent randomization: every record released "
            "before would be released again with fresh draws, and linking the releases by their "
            "non-key values reveals its true key values (the modal released cell). To continue "
            "the series, restore the seed file the earlier releases used (their "
            "internal/audit.json names it and its SHA-256) and keep one seed file for every "
            "month. To start a new series deliberately, rerun with --new-series"
        )
    members = [x for x in same if x.name < target.name] or same
    previous = None
    if members:
        d = members[-1]
        previous = {"dir": str(d), "audit_sha256": hashlib.sha256(
            (d / "internal" / "audit.json").read_bytes()).hexdigest()}
    return SeriesInfo(series_id, seed_file_sha256, config_name, str(pattern),
                      bool(new_series and other), previous, [str(d) for d in other],
                      [str(d) for d in members], [str(d) for d in lineage])


def series_id(seed: int) -> str:
    """The series id of a seed: ``keyed_hash(seed, "series-id", 0)`` as 16 hex digits (a keyed
    pseudo-random fingerprint: equal seeds agree, the seed cannot be recovered from it)."""
    return f"{int(keyed_hash(int(seed), 'series-id', np.zeros(1, dtype=np.uint64))[0]):016x}"


def series_for(config: ReleaseConfig, seed_info: Any, *, new_series: bool = False) -> SeriesInfo:
    """:func:`find_series` for a release job: its output pattern, target folder and seed.

    Sets ``seed_info.series`` (what ``internal/audit.json`` records) and returns the info.
    Raises :class:`SeriesError` as :func:`find_series`.
    """
    if config.output is None:
        raise ConfigError("output: the config has no output section; add output: {dir: ...}")
    info = find_series(config.resolve(config.output.dir), config.output_dir,
                       series_id=series_id(seed_info.value),
                       seed_file_sha256=seed_info.sha256, config_name=config.name,
                       new_series=new_series)
    seed_info.series = {**info.to_dict(), "allow_new_series": bool(new_series)}
    return info


def _glob(pattern: Path) -> list[Path]:
    g = pattern_glob(pattern)
    p = Path(g)
    if "*" not in g:
        return [p] if p.is_dir() else []
    anchor = Path(p.anchor) if p.is_absolute() else Path(".")
    rel = p.relative_to(p.anchor) if p.is_absolute() else p
    return [q for q in anchor.glob(str(rel)) if q.is_dir()]
