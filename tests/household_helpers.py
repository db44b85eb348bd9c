"""Household test helpers shared by the household tests (docs/HOUSEHOLDS.md): the generated
household file and its config, and a household release made through an executor without
Prefect (as ``sdc release`` and the audit's re-derivation make it), written as a release
folder."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

import sdc
from sdc.samples import generate_household_sample


def household_parquet(path: Path, n: int = 2500, seed: int = 8, n_regions: int = 12,
                      row_group_size: int = 450) -> Path:
    """:func:`generate_household_sample`'s file written to ``path`` as Parquet (row groups of
    ``row_group_size``: households split over pieces)."""
    frame = generate_household_sample(n, seed=seed, n_regions=n_regions)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                   row_group_size=row_group_size)
    return path


def household_job(tmp: Path, inp: Path, executor: Any = "pandas", name: str = "job",
                  **changes: Any) -> Path:
    """A config file in ``tmp/name`` releasing ``inp`` (:func:`engine_configs.household_config`,
    ``income`` dropped) with ``executor`` into ``tmp/name/release``; ``changes``: top-level
    sections replaced."""
    from engine_configs import household_config

    cfg = household_config()
    cfg["input"].update({"path": str(inp), "format": "parquet", "drop": ["income"]})
    cfg["output"] = {"dir": str(tmp / name / "release"), "formats": ["parquet", "csv"]}
    cfg["engine"] = executor
    cfg.update(changes)
    path = tmp / name / "job.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def release_folder(config_path: Path) -> Path:
    """Release ``config_path`` with its executor (:meth:`Executor.release`, no Prefect), its
    reports and every file assembled as ``sdc release`` assembles them, into the config's
    output folder; returns it."""
    from sdc.config.sections import executor_name
    from sdc.executors.registry import get_executor
    from sdc.io.batches import input_sha256
    from sdc.pipeline.report_parts import batch_reports
    from sdc.publish.folder import write_release
    from sdc.release.assemble import assemble_batch_release
    from sdc.series.seeds import load_seed

    cfg = sdc.load_config(config_path)
    info = load_seed(cfg)
    ex = get_executor(executor_name(cfg.executor.kind))
    tmp = Path(tempfile.mkdtemp(prefix="sdc-test-release-"))
    try:
        (tmp / "internal").mkdir()
        res = ex.release(cfg, info.value, tmp / "public", cfg.executor,
                         records_path=tmp / "internal" / "records.parquet")
        reports = batch_reports(res, cfg, seed=info.value).files()
        public, internal = assemble_batch_release(
            cfg, res, info, input_sha256=input_sha256(cfg.input_path),
            config_text=Path(config_path).read_text(),
            engine=ex.name if ex.in_audit_record else None, reports=reports)
        return write_release(cfg.output_dir, public, internal)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
