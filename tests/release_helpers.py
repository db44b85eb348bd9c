"""A release of an in-memory frame made as ``sdc release`` makes it: the one pipeline on the
in-memory runner (:func:`sdc.release_frame`), its reports from the aggregates the pipeline
accumulated (:func:`sdc.pipeline.report_parts.batch_reports`) and every file of the release
(:func:`sdc.release.assemble.assemble_batch_release`), as bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

import sdc
from sdc.config.model import ReleaseConfig


def as_bytes(files: dict[str, Path | bytes]) -> dict[str, bytes]:
    """A release's files (bytes, or the path of a file the pipeline wrote) as bytes."""
    return {k: (v.read_bytes() if isinstance(v, Path) else bytes(v)) for k, v in files.items()}


def release_files(config: ReleaseConfig, result: Any, seed_info: Any, *, input_sha256: str,
                  config_text: str, reports: dict[str, bytes] | None = None
                  ) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """``(public, internal)`` of ``result`` (a :func:`sdc.release_frame` outcome made with
    ``out_dir``), each name -> bytes."""
    from sdc.release.assemble import assemble_batch_release

    public, internal = assemble_batch_release(config, result, seed_info,
                                              input_sha256=input_sha256,
                                              config_text=config_text, engine=None,
                                              reports=reports)
    return as_bytes(public), as_bytes(internal)


def released(frame: pd.DataFrame, config: ReleaseConfig, seed: int, out_dir: Path) -> Any:
    """:func:`sdc.release_frame` with its public and records files kept in ``out_dir``."""
    return sdc.release_frame(frame, config, seed, out_dir=out_dir)


def reports_of(result: Any, config: ReleaseConfig, *, seed: int, n_sim: int = 200,
               series: dict[str, Any] | None = None) -> Any:
    """The reports (:class:`sdc.reports.build.Reports`) of a release, from its aggregates."""
    from sdc.pipeline.report_parts import batch_reports

    return batch_reports(result, config, seed=seed, n_sim=n_sim, series=series)


def public_frame(result: Any) -> pd.DataFrame:
    """The public microdata the pipeline wrote (public order, ``record_id`` first) of a
    :func:`sdc.release_frame` outcome, in the pandas types the SPSS/Stata writers get."""
    return result.public_table.to_pandas()
