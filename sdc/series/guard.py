"""What the release of a series member checks before anything is written (docs/SERIES.md).

1. **Lineage**: a release beside the output folder made under another seed by a config of
   another name (``SeriesInfo.lineage``) is compared with this release by the records'
   identities (``internal/records.parquet``; an identity is an unkeyed hash of the id column or
   of the non-key values, the same under every seed). When it holds at least
   :data:`LINEAGE_SHARE` of this release's records, it is the same population randomized under
   another seed: refused (:class:`SeriesError`, exit 2) unless ``--new-series``.
2. **The series certificate** (:mod:`sdc.series.certificate`) of the series' earlier members
   and this release: a (t, a) class above xi refuses the release, naming the class.

Both go to ``audit.json``'s ``series`` (``lineage``, ``certificate``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from sdc.method.sorting import distinct
from sdc.series.membership import SeriesError
from sdc.series.risk import Records, records_path, risk_vs_previous, series_risk_of_files

__all__ = ["LINEAGE_EXACT", "LINEAGE_SHARE", "check_series", "identity_overlap", "lineage_identities",
           "series_risk_vs_previous"]

#: Share of this release's records found in a release under another seed from which the two
#: are one population (a new seed for them leaks: docs/SERIES.md).
LINEAGE_SHARE = 0.10


#: a records file of at most this many records is compared whole; a larger one by the
#: identities whose top 8 bits are zero (1/256 of them: the identities are hashes, so a
#: uniform sample, the same predicate on both files), read a row group at a time
LINEAGE_EXACT = 1 << 22
_SAMPLE_SHIFT = np.uint64(56)


def _records_file(source: Path | bytes) -> pq.ParquetFile:
    import io

    return pq.ParquetFile(io.BytesIO(source) if isinstance(source, bytes) else source)


def _identities(source: Path | bytes, sample: bool = False) -> np.ndarray:
    """The records file's distinct identities (``sample``: only those whose top 8 bits are
    zero), read a batch at a time: memory for the kept identities only."""
    parts = []
    for batch in _records_file(source).iter_batches(batch_size=1 << 20, columns=["identity"]):
        ident = batch.column(0).to_numpy()
        parts.append(ident[(ident >> _SAMPLE_SHIFT) == 0] if sample else ident)
    return distinct(np.concatenate(parts)) if parts else np.zeros(0, np.uint64)


def identity_overlap(records: Path | bytes, other: Path,
                     mine: np.ndarray | None = None) -> float:
    """Share of the records of ``records`` whose identity is also in the records file
    ``other``: exact up to :data:`LINEAGE_EXACT` records, else measured on the 1/256 sample of
    identities whose top 8 bits are zero (binomial SD below 0.003 at 2^22 records; the test
    is 10% against the ~0% or ~100% that two populations or one give). ``mine``: this
    release's identities as :func:`lineage_identities` gives them, when already read (several
    candidates)."""
    if mine is None:
        mine = lineage_identities(records)
    if mine.size == 0:
        return 0.0
    sample = _records_file(records).metadata.num_rows > LINEAGE_EXACT
    return float(np.isin(mine, _identities(other, sample), assume_unique=True).mean())


def lineage_identities(records: Path | bytes) -> np.ndarray:
    """This release's identities compared with each lineage candidate (the sample of
    :func:`identity_overlap` for a file over :data:`LINEAGE_EXACT` records)."""
    return _identities(records, _records_file(records).metadata.num_rows > LINEAGE_EXACT)


def _lineage(series: dict[str, Any], records: Path | bytes) -> list[dict[str, Any]]:
    out = []
    mine = None  # this release's identities, read once for every candidate
    for d in series.get("lineage_candidates") or []:
        f = Path(d) / "internal" / "records.parquet"
        if not f.is_file():
            continue
        if mine is None:
            mine = lineage_identities(records)
        share = identity_overlap(records, f, mine)
        if share >= LINEAGE_SHARE:
            out.append({"dir": str(d), "share": share})
    if out and not series.get("allow_new_series"):
        first = out[0]
        raise SeriesError(
            f"{len(out)} release(s) beside this one were made under another seed from the same "
            f"records: {first['dir']!r} holds {first['share']:.1%} of this release's records "
            f"(by their identities; {LINEAGE_SHARE:.0%} or more makes them one population). "
            "Releasing them again under a new seed gives an intruder who links the releases by "
            "the non-key values two independent draws of every such record, and the modal "
            "released cell converges to the true one. Nothing was written. Continue the series "
            "with the seed file that release used (its internal/audit.json names it and its "
            "SHA-256), or rerun with --new-series to start a new series deliberately")
    return out


def check_series(series: dict[str, Any], records: Path | bytes, xi: float) -> None:
    """The checks of the module docstring for the run's ``series`` entry (set by
    :func:`sdc.series.membership.series_for`); records ``lineage`` and ``certificate`` in it.

    Raises
    ------
    SeriesError
        A lineage release under another seed (without ``--new-series``), or a class of the
        series above xi.
    """
    if "lineage" not in series:
        series["lineage"] = _lineage(series, records)
    members = [Path(d) for d in series.get("members") or []]
    if not members or "certificate" in series:
        return
    scratch = Path(records).parent if isinstance(records, Path) else None
    risk = series_risk_of_files([records_path(d) for d in members] + [records], xi,
                                scratch=scratch)
    cert = risk.certificate()
    series["certificate"] = cert.to_dict()
    if not cert.passed:
        row = cert.exceeding.to_dict(orient="records")[0]
        raise SeriesError(
            f"this release would take its series over xi: with the {len(members)} earlier "
            f"release(s) of the series ({members[0].name} ... {members[-1].name}), the linking "
            f"intruder (records linked by identity, modal released cell) is in "
            f"{cert.describe(row)}. Nothing was written. Fixes: keep the cells stable from "
            "month to month (a partition or recoding under which fewer cells change their "
            "frequency t_j), or lower risk.xi for the series so that its classes keep a margin "
            "(the series certificate is measured: docs/SERIES.md). A new seed does not help: it "
            "leaks more")


def series_risk_vs_previous(seed_info: Any, result: Any,
                            records: Records | None = None) -> dict[str, Any] | None:
    """:func:`risk_vs_previous` for the run placed by :func:`series_for`, computed once and kept
    in ``seed_info.series["risk_vs_previous"]``: the audit record and the report both use it.

    ``result`` is the run's release (any executor's :class:`~sdc.method.outcome.
    ReleaseOutcome`); ``records`` its records file (a path or bytes; default: the file the
    pipeline wrote, ``result.records_file``). None when the series has no previous release
    or the release wrote no records file.

    Runs :func:`sdc.series.guard.check_series` first (lineage, the series certificate over
    the series' members and this release): raises :class:`SeriesError` when the release would
    take the series over xi or re-randomize released records under another seed.
    """
    series = getattr(seed_info, "series", None) or {}
    if records is None and getattr(result, "records_file", None) is not None:
        records = Path(result.records_file)
    if records is not None and series:
        check_series(series, records, float(result.xi))
    if "risk_vs_previous" in series:
        return series["risk_vs_previous"]
    prev = (series.get("previous") or {}).get("dir")
    if not prev or records is None:
        return None
    series["risk_vs_previous"] = risk_vs_previous(Path(prev), records, float(result.xi))
    return series["risk_vs_previous"]
