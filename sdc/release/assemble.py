"""All files of a release as bytes: the public files, the internal tables, reports and the audit record."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.io.batches import public_bytes
from sdc.io.schemas import validate_output
from sdc.io.write import parquet_bytes, sha256_bytes
from sdc.method.apply import ReleaseResult
from sdc.method.outcome import ReleaseOutcome
from sdc.release.public import (
    PublicRecords,
    codebook_markdown,
    public_records,
    public_schema_for,
)
from sdc.release.record import build_audit, package_version
from sdc.release.stat_files import (
    STAT_FORMATS,
    input_metadata,
    stat_codebook_lines,
    stat_public_files,
)
from sdc.release.uncertainty import uncertainty_markdown
from sdc.series.risk import RECORDS_FILE, records_bytes, series_risk_vs_previous
from sdc.series.seeds import SeedInfo

__all__ = ["assemble_batch_release", "assemble_release"]

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def assemble_release(config: ReleaseConfig, original: pd.DataFrame, result: ReleaseResult,
                     seed_info: SeedInfo, *, input_sha256: str, config_text: str,
                     reports: dict[str, bytes] | None = None,
                     public_data: PublicRecords | pd.DataFrame | None = None
                     ) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """All files of a release as bytes: ``(public, internal)``, each name -> bytes.

    public: ``microdata.parquet``, ``.csv``, ``.sav``, ``.dta`` (per ``output.formats``; the frame of
    :func:`public_frame`, validated with :func:`sdc.io.schemas.validate_output` first) and
    ``codebook.md``. internal: ``blocks.parquet``, ``partition_sets.parquet``, the ``reports``
    given (e.g. ``risk.json``, ``report.html``) and ``audit.json`` (:func:`build_audit`, with
    the SHA-256 of every other file).

    ``public_data``: the public records when the caller already built them with
    :func:`public_records` and validated them (the release flow does, before the reports), so
    that this record-level step runs once per release (a public frame of :func:`public_frame`
    is accepted too).

    Raises :class:`~sdc.io.schemas.OutputSchemaError` if the public frame breaks the output
    schema, :class:`ValueError` if a report name is reserved or not a plain file name.
    """
    schema = public_schema_for(config, result.frame)
    if public_data is None:
        public_data = public_records(result, config, seed_info.value, schema=schema)
        validate_output(public_data.check_frame(), config)
    formats = list(config.output.formats if config.output is not None else ["parquet"])
    # written exactly as the streaming and Dask engines write them (same schema, row groups)
    if isinstance(public_data, PublicRecords):
        public: dict[str, bytes] = public_data.write(formats)
        # sav / dta: same records, same order (they need the whole frame)
        pub = public_data.frame() if any(f in STAT_FORMATS for f in formats) else None
    else:
        public = public_bytes(public_data, schema, formats)
        pub = public_data
    meta = input_metadata(config)       # SPSS/Stata input: its labels etc. (header only)
    if pub is not None:
        stat_files, layout = stat_public_files(pub, config, meta)
        public.update(stat_files)
        del pub
    else:
        layout = None
    if isinstance(public_data, PublicRecords):
        # the schema the public files were written with (a household file's pseudonyms are
        # integers whatever the input's household ids were)
        schema = public_data.schema
    public["codebook.md"] = _codebook(
        config, result, schema, stat_codebook_lines(config, layout, meta,
                                                    columns=list(schema.names)))
    internal: dict[str, bytes] = _tables(result)
    if result.cell_id is not None:
        # record-level internal data of the release series (identity, cell, released)
        internal[RECORDS_FILE] = records_bytes(result)
        # vs the previous release (the flow's report task may have computed it already)
        series_risk_vs_previous(seed_info, result, internal[RECORDS_FILE])
    series = dict(getattr(seed_info, "series", None) or {})
    _add_reports_and_audit(config, result, seed_info, public, internal, reports,
                           n_rows=len(original), input_sha256=input_sha256,
                           config_text=config_text, series=series)
    return public, internal


def _codebook(config: ReleaseConfig, result: Any, schema: Any, stat_lines: list[str],
              n_records: int | None = None) -> bytes:
    """``codebook.md``: the codebook, the SPSS/Stata lines and the uncertainty section."""
    extra = stat_lines + uncertainty_markdown(config, result)
    codebook = codebook_markdown(config, result, schema=schema, n_records=n_records).rstrip()
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
    from sdc.io.write import sha256_file

    for name, data in (reports or {}).items():
        if name in internal or name == "audit.json" or not _NAME_OK.match(name):
            raise ValueError(f"report name {name!r} is reserved or not a plain file name")
        internal[name] = bytes(data)

    def digest(v: Path | bytes) -> str:
        return sha256_file(v) if isinstance(v, Path) else sha256_bytes(v)

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
    internal["audit.json"] = (json.dumps(audit, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def assemble_batch_release(config: ReleaseConfig, result, seed_info: SeedInfo, *,
                           input_sha256: str, config_text: str, engine: str | None,
                           reports: dict[str, bytes] | None = None
                           ) -> tuple[dict[str, Path | bytes], dict[str, bytes]]:
    """The files of a release made by the streaming or Dask engine (``result`` is a
    :class:`sdc.pipeline.kernels.BatchRelease`): its public files are already written (paths,
    moved into the release by :func:`sdc.publish.folder.write_release`); the codebook, internal
    tables and audit record are built from aggregates exactly as :func:`assemble_release` does;
    ``engine`` ("streaming" / "dask") is recorded in the audit record (None: an in-memory
    release, recorded without it).
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
        n_records=result.n_records)
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

