"""Household test helpers shared by the household tests (docs/HOUSEHOLDS.md): the generated
household file and its configs (:data:`GEN`), sdcMicro's ``testdata`` household file and its
config (:func:`testdata_config`), and a household release made through an executor without
Prefect (as ``sdc release`` and the audit's re-derivation make it), written as a release
folder."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

import sdc
from sdc.samples import generate_household_sample
from tests.conftest import SHARED_DATA

#: :func:`generate_household_sample`'s file with 40 regions: household keys region, urbrur,
#: dwelling (``level: household``), person keys sex, age, relation; household columns water,
#: hh_weight; income dropped (it gives children's age away)
GEN: dict[str, Any] = {
    "name": "gen",
    "input": {"path": "x.csv", "household_id": "hh_id", "id_column": "person_id",
              "household_columns": ["water", "hh_weight"], "drop": ["income"]},
    "key_variables": {"region": {"range": [1, 40], "level": "household"},
                      "urbrur": {"categories": [1, 2], "level": "household"},
                      "dwelling": {"range": [1, 6], "level": "household"},
                      "sex": {"categories": [1, 2]}, "age": {"range": [0, 95]},
                      "relation": {"range": [1, 5]}},
    "partition": {"age": {"bands": [0, 15, 30, 45, 60, 75]}, "sex": "as_is",
                  "relation": "as_is"},
    "risk": {"households": "warn", "xi": 0.5},
    "seed": 11,
}

#: sdcMicro's household test file (persons of 1,000 households, ``ori_hid``)
TESTDATA = SHARED_DATA / "sdcmicro" / "testdata.csv"


def testdata() -> pd.DataFrame:
    """sdcMicro's ``testdata`` (skips the test when the shared data folder is absent)."""
    if not TESTDATA.is_file():
        pytest.skip(f"sdcMicro testdata not found at {TESTDATA} (shared data folder absent)")
    return pd.read_csv(TESTDATA)


def testdata_config(tmp_path: Path, path: Path = TESTDATA, weight: str | None = None,
                    **risk: Any) -> Path:
    """A release config of sdcMicro's ``testdata`` written to ``tmp_path/testdata.yaml``:
    household keys urbrur, water, walls; person keys sex, age (bands for the partition);
    xi 0.395, ``small_blocks: calibrate``; ``weight``: ``input.weight``; ``risk`` added
    (skips the test when the file is absent)."""
    if not TESTDATA.is_file():
        pytest.skip(f"sdcMicro testdata not found at {TESTDATA} (shared data folder absent)")
    inp: dict[str, Any] = {"path": str(path), "household_id": "ori_hid"}
    if weight is not None:
        inp["weight"] = weight
    inp["drop"] = ["relat", "hhcivil", "income", "expend", "savings"]
    cfg = {
        "name": "testdata",
        "input": inp,
        "key_variables": {
            "urbrur": {"categories": [1, 2], "level": "household"},
            "water": {"categories": list(range(1, 10)), "level": "household"},
            "walls": {"categories": [2, 3, 9], "level": "household"},
            "sex": {"categories": [1, 2]}, "age": {"range": [0, 95]}},
        "partition": {"age": {"bands": [0, 15, 30, 45, 65]}},
        "risk": {"xi": 0.395, "small_blocks": "calibrate", **risk},
        "seed": 20261126,
        "output": {"dir": str(tmp_path / "out"), "formats": ["parquet"]},
    }
    out = tmp_path / "testdata.yaml"
    out.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return out


# helpers, not tests: a test module that imports them must not collect them (pytest would
# call them as tests: a warning and a wasted read of the file)
testdata.__test__ = testdata_config.__test__ = False  # type: ignore[attr-defined]


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


def streaming_release_of(tmp: Path, frame: pd.DataFrame, config_text: str) -> Path:
    """The release folder of ``frame`` (written as Parquet in row groups of 700) under the key
    variables and risk section of ``config_text`` (a YAML job), on the streaming executor in
    batches of 700 rows, ``relation`` dropped."""
    inp = tmp / "h.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), inp, row_group_size=700)
    raw = yaml.safe_load(config_text)
    job = household_job(tmp, inp, {"kind": "streaming", "batch_rows": 700},
                        key_variables=raw["key_variables"], risk=raw["risk"])
    cfg = yaml.safe_load(job.read_text())
    cfg["input"]["drop"] = ["relation"]
    cfg.pop("partition", None)
    job.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return release_folder(job)
