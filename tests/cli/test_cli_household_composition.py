"""The composition intruder through the command line (issue 32), on sdcMicro's testdata
(4,580 persons in 1,000 households): ``risk.households: fail`` is the default and refuses a
release whose composition risk exceeds xi before anything is written; ``warn`` publishes it,
saying "household composition not protected" in the codebook and on the report page."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli.test_cli import assert_clean_error, run
from tests.conftest import SHARED_DATA

TESTDATA = SHARED_DATA / "sdcmicro" / "testdata.csv"


def _config(tmp_path: Path, **risk) -> Path:
    """The issue's config: household keys urbrur, water, walls; person keys sex, age (bands
    for the partition); xi 0.395, small_blocks calibrate; ``risk`` added."""
    if not TESTDATA.is_file():
        pytest.skip(f"sdcMicro testdata not found at {TESTDATA} (shared data folder absent)")
    cfg = {
        "name": "testdata",
        "input": {"path": str(TESTDATA), "household_id": "ori_hid",
                  "drop": ["relat", "hhcivil", "income", "expend", "savings"]},
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
    path = tmp_path / "testdata.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.mark.e2e
def test_the_default_refuses_an_unprotected_household_file(tmp_path):
    cfg = _config(tmp_path)
    r = run("release", cfg)
    # exit 2, the figure, the riskiest class (F = 1: unique compositions), the fixes
    assert_clean_error(r, 2, "composition intruder", "riskiest class", "class F = 1",
                       "exceeds xi = 0.395", "Fixes:", "risk.households: warn")
    assert not (tmp_path / "out").exists()  # nothing written


@pytest.mark.e2e
def test_warn_publishes_and_says_composition_is_not_protected(prefect_harness, tmp_path):
    cfg = _config(tmp_path, households="warn")
    r = run("release", cfg)
    assert r.exit_code == 0, r.text
    out = tmp_path / "out"
    codebook = (out / "public" / "codebook.md").read_text()
    assert "Household composition not protected" in codebook
    assert "risk.households: warn" in codebook
    html = (out / "internal" / "report.html").read_text()
    assert "Household composition not protected" in html
