"""All files of a release as bytes: the public files, the internal tables, reports and the audit record."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from sdc.config.model import ReleaseConfig
from sdc.io.json_text import dumps_indented
from sdc.io.write import parquet_bytes, sha256_bytes
from sdc.method.outcome import ReleaseOutcome
from sdc.release.public import codebook_markdown
from sdc.release.record import build_audit, package_version
from sdc.release.stat_files import (
    input_metadata,
    stat_codebook_lines,
    stat_public_files,
)
from sdc.release.uncertainty import misclassification_markdown, uncertainty_markdown
from sdc.series.guard import series_risk_vs_previous
from sdc.series.risk import RECORDS_FILE
from sdc.series.seeds import SeedInfo

__all__ = ["assemble_batch_release"]

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _expected_totals(reports: dict[str, bytes] | None) -> dict[str, Any] | None:
    """utility.json's ``expected_totals`` (None without it): the exact figures the codebook
    states for a file with a survey weight."""
    data = (reports or {}).get("utility.json")
    return json.loads(data).get("expected_totals") if data else None


def _codebook(config: ReleaseConfig, result: Any, schema: Any, stat_lines: list[str],
              n_records: int | None = None, expected: dict[str, Any] | None = None) -> bytes:
    """``codebook.md``: the codebook, the SPSS/Stata lines and the uncertainty section."""
    extra = (stat_lines + uncertainty_markdown(config, result)
             + misclassification_markdown(config, result))
    codebook = codebook_markdown(config, result, schema=schema, n_records=n_records,
                                 expected=expected).rstrip()
    return (codebook + "\n\n" + "\n".join(extra).rstrip() + "\n").encode("utf-8")


def _tables(result: ReleaseOutcome) -> dict[str, Any]:
    """The internal PRB and partition-set tables."""
    return {"blocks.parquet": parquet_bytes(result.blocks),
            "partition_sets.parquet": parquet_bytes(result.partition_sets)}


def _add_reports_and_audit(config: ReleaseConfig, result: ReleaseOutcome, seed_info: SeedInfo,
                           public: dict[str, Any], internal: dict[str, Any],
                           reports: dict[str, bytes] | None, *, n_rows: int, input_sha256: str,
                           config_text: str, series: dict, engine: str | None = None) -> None:
    """Add the ``reports`` files and, last, ``audit.json`` (with the SHA-256 of every other
    file: bytes, or the path of a file an executor wrote) to ``internal``."""
    from sdc.io.write import written_sha256

    for name, data in (reports or {}).items():
        if name in internal or name == "audit.json" or not _NAME_OK.match(name):
            raise ValueError(f"report name {name!r} is reserved or not a plain file name")
        internal[name] = bytes(data)

    def digest(v: Path | bytes) -> str:
        return written_sha256(v) if isinstance(v, Path) else sha256_bytes(v)

    audit = build_audit(
        config, result, input_path=config.input_path, input_sha256=input_sha256,
        n_rows=n_rows, seed_info=seed_info,
        public_hashes={k: digest(v) for k, v in public.items()},
        internal_hashes={k: digest(v) for k, v in internal.items()},
        config_text=config_text, package_version=package_version(),
    )
    if series:
        audit["series"] = series
    if engine is not None:
        audit["engine"] = engine  # `sdc audit` then re-counts source and public file in batches
    internal["audit.json"] = (dumps_indented(audit) + "\n").encode("utf-8")


def assemble_batch_release(config: ReleaseConfig, result: ReleaseOutcome, seed_info: SeedInfo,
                           *,
                           input_sha256: str, config_text: str, engine: str | None,
                           reports: dict[str, bytes] | None = None
                           ) -> tuple[dict[str, Path | bytes], dict[str, bytes]]:
    """The files of a release (``result``: any executor's outcome): ``(public, internal)``,
    each name -> bytes or the path of a file the pipeline wrote (moved into the release by
    :func:`sdc.publish.folder.write_release`). The public files are already written; the
    codebook (with the SPSS/Stata lines and the uncertainty section), the internal PRB and
    partition-set tables, the records file, the ``reports`` given (e.g. ``risk.json``,
    ``report.html``) and, last, ``audit.json`` (with the SHA-256 of every other file) are
    built from the outcome's aggregates; ``engine`` is recorded in the audit record (None:
    an in-memory release, recorded without it). Raises :class:`ValueError` if a report name
    is reserved or not a plain file name.
    """
    public: dict[str, Path | bytes] = dict(result.files)
    meta = input_metadata(config)  # SPSS/Stata input: its labels etc. (header only)
    layout = None
    table = getattr(result, "public_table", None)
    if table is not None:  # SPSS/Stata files: from the public records in one frame
        stat_files, layout = stat_public_files(table.to_pandas(), config, meta)
        public.update(stat_files)
    public["codebook.md"] = _codebook(
        config, result, result.schema,
        stat_codebook_lines(config, layout, meta, columns=list(result.schema.names)),
        n_records=result.n_records, expected=_expected_totals(reports))
    internal: dict[str, Path | bytes] = _tables(result)
    series = _batch_series(result, seed_info, internal)
    _add_reports_and_audit(config, result, seed_info, public, internal, reports,
                           n_rows=result.n_records, input_sha256=input_sha256,
                           config_text=config_text, series=series, engine=engine)
    return public, internal


def _batch_series(result, seed_info: SeedInfo, internal: dict[str, Path | bytes]
                  ) -> dict:
    """The records file a batch engine wrote (moved into ``internal/`` by
    :func:`sdc.publish.folder.write_release`) and the ``series`` entry of the audit record,
    with the comparison with the previous release of the series (computed once; the flow's
    report task usually did it already)."""
    path = getattr(result, "records_file", None)
    if path is not None:
        internal[RECORDS_FILE] = Path(path)
        series_risk_vs_previous(seed_info, result, Path(path))
    return dict(getattr(seed_info, "series", None) or {})

