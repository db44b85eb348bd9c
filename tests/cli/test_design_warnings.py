"""Warnings where a human should look: ``sdc plan``, ``sdc release`` and the report
say in words when a release changes more than 20% of the records (or of one key's values) and
point to ``sdc design``; the report's verdict box shows utility next to the certificate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from conftest import run_cli
from typer.testing import CliRunner

from sdc.reports.recoding import change_warnings

runner = CliRunner()


def run(*args):
    return run_cli(*args, columns=400)


def _job(tmp_path: Path, fine: bool) -> Path:
    """Ages 0..90 and 40 regions over 400 records: nearly every cell is rare (fine=True);
    or one 3-valued key (fine=False): nothing changes."""
    rng = np.random.default_rng(1)
    n = 400
    frame = pd.DataFrame({"age": rng.integers(0, 91, n), "region": rng.integers(1, 41, n),
                          "g": rng.integers(1, 4, n)})
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    keys = ({"age": {"range": [0, 90]}, "region": {"range": [1, 40]}} if fine
            else {"g": {"categories": [1, 2, 3]}})
    cfg = {"name": "w", "input": {"path": str(data)}, "key_variables": keys,
           "risk": {"xi": 0.395}, "seed": 3,
           "output": {"dir": str(tmp_path / f"rel-{fine}"), "formats": ["parquet"]}}
    path = tmp_path / f"w{fine}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_change_warnings_wording():
    assert change_warnings(0.1, {"a": 0.05}) == []
    w = change_warnings(0.74, config_hint="c.yaml")
    assert len(w) == 1 and "74.0%" in w[0] and "sdc design c.yaml" in w[0]
    w = change_warnings(0.1, {"age": 0.3})
    assert len(w) == 1 and "'age'" in w[0] and "sdc design" in w[0]


def test_plan_release_and_report_warn_when_most_records_change(tmp_path):
    path = _job(tmp_path, fine=True)
    p = run("plan", path)
    assert p.exit_code == 0, p.text
    assert "warning:" in p.text and f"sdc design {path}" in p.text
    r = run("release", path)
    assert r.exit_code == 0, r.text
    assert "more than 20%" in r.text and f"sdc design {path}" in r.text
    html = (tmp_path / "rel-True" / "internal" / "report.html").read_text()
    assert "of records changed" in html and "CERTIFIED" in html and "Warning:" in html
    assert ">PASS<" not in html


def test_no_warning_when_little_changes(tmp_path):
    path = _job(tmp_path, fine=False)
    assert "sdc design" not in run("plan", path).text
    r = run("release", path)
    assert r.exit_code == 0 and "sdc design" not in r.text
    html = (tmp_path / "rel-False" / "internal" / "report.html").read_text()
    assert "of records changed" in html and "Warning:" not in html
    risk = json.loads((tmp_path / "rel-False" / "internal" / "risk.json").read_text())
    assert risk["verdict"]["share_changed"] <= 0.2


def test_init_drafts_the_recommended_recoding_when_the_plain_draft_changes_too_much(tmp_path):
    rng = np.random.default_rng(4)
    n = 1500
    frame = pd.DataFrame({"age": np.clip(rng.normal(45, 18, n), 16, 95).astype(int),
                          "region": rng.integers(1, 31, n), "sex": rng.integers(1, 3, n),
                          "income": rng.lognormal(8, 1, n).round(2)})
    data = tmp_path / "survey.csv"
    frame.to_csv(data, index=False)
    out = tmp_path / "survey.yaml"
    r = run("init", data, "--keys", "age,region,sex", "-o", out)
    assert r.exit_code == 0, r.text
    assert "sdc design: unrecoded" in r.text
    text = out.read_text()
    assert "recode:" in text and "# sdc design: unrecoded" in text
    import sdc

    cfg = sdc.load_config(out)
    assert cfg.recoded_keys
    rel = run("release", out)
    assert rel.exit_code == 0, rel.text
