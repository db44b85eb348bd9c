"""``sdc release`` and ``sdc audit --series`` on a release series, through the CLI."""

from __future__ import annotations

import json

import pandas as pd
from conftest import run_cli
from typer.testing import CliRunner

runner = CliRunner()


run = run_cli


def test_series_release_refusal_and_audit(prefect_harness, make_small_job, tmp_path):
    seed = tmp_path / "secrets" / "small.seed"
    cfg = make_small_job(seed={"file": str(seed)},
                         output={"dir": str(tmp_path / "releases" / "small-{month}")})
    r = run("release", cfg)
    assert r.exit_code == 0, r.text
    (this,) = list((tmp_path / "releases").iterdir())
    last = this.with_name("small-0000-01")          # pretend it was last month's release
    this.rename(last)
    r = run("release", cfg)
    assert r.exit_code == 0, r.text
    audit = json.loads((this / "internal" / "audit.json").read_text())
    s = audit["series"]
    assert s["previous"]["dir"] == str(last) and not s["new_series"]
    assert s["seed_file_sha256"] == audit["seed"]["sha256"] and s["config_name"] == "small"
    # same input, same seed: no record's released key values changed
    assert s["risk_vs_previous"]["changed_share"] == 0.0
    rec = pd.read_parquet(this / "internal" / "records.parquet")
    assert list(rec.columns) == ["identity", "cell", "released"]
    assert oct((this / "internal" / "records.parquet").stat().st_mode & 0o777) == "0o600"
    assert run("audit", this).exit_code == 0          # the records file is hashed and listed
    r = run("audit", "--series", last, this)
    assert r.exit_code == 0, r.text
    assert "series risk within xi" in r.text and "0.00%" in r.text
    r = run("audit", "--series", last, this, "--json")
    doc = json.loads(r.stdout)
    assert doc["passed"] and doc["max_changed_share"] == 0.0
    # a new seed for the same output pattern is refused (exit 2), nothing written
    seed.unlink()
    r = run("release", cfg, "--force")
    assert r.exit_code == 2, r.text
    assert "another seed" in r.text and "--new-series" in r.text
    assert json.loads((this / "internal" / "audit.json").read_text()) == audit
    r = run("release", cfg, "--force", "--new-series")
    assert r.exit_code == 0, r.text
    s2 = json.loads((this / "internal" / "audit.json").read_text())["series"]
    assert s2["new_series"] and s2["previous"] is None and s2["id"] != s["id"]
    r = run("audit", this, last)
    assert r.exit_code == 2 and "--series" in r.text


def _month_pair(cfg, tmp_path, first_engine, second_engine):
    """Release with ``first_engine``, rename it to last month's folder, release again with
    ``second_engine`` (same seed file, same input): (last, this)."""
    r = run("release", cfg, "--engine", first_engine)
    assert r.exit_code == 0, r.text
    (this,) = list((tmp_path / "releases").iterdir())
    last = this.with_name("small-0000-01")
    this.rename(last)
    r = run("release", cfg, "--engine", second_engine)
    assert r.exit_code == 0, r.text
    return last, this


def test_two_streaming_releases_then_audit_series(prefect_harness, make_small_job, tmp_path):
    seed = tmp_path / "secrets" / "small.seed"
    cfg = make_small_job(seed={"file": str(seed)},
                         output={"dir": str(tmp_path / "releases" / "small-{month}")})
    last, this = _month_pair(cfg, tmp_path, "streaming", "streaming")
    audit = json.loads((this / "internal" / "audit.json").read_text())
    assert audit["engine"] == "streaming"
    s = audit["series"]
    assert s["previous"]["dir"] == str(last) and not s["new_series"]
    assert s["risk_vs_previous"]["changed_share"] == 0.0
    assert s["risk_vs_previous"]["n_common"] == 3000
    path = this / "internal" / "records.parquet"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert "records.parquet" in json.dumps(audit)          # hashed in the audit record
    assert pd.read_parquet(path).columns.tolist() == ["identity", "cell", "released"]
    assert run("audit", this).exit_code == 0
    r = run("audit", "--series", last, this, "--json")
    assert r.exit_code == 0, r.text
    doc = json.loads(r.stdout)
    assert doc["passed"] and doc["max_changed_share"] == 0.0 and doc["n_releases"] == 2
    risk = this / "internal" / "risk.json"
    # the batch engines' reports: the "Release series" section
    assert json.loads(risk.read_text())["series"]["changed_share"] == 0.0
    assert "Release series" in (this / "internal" / "report.html").read_text()
    # a new seed for the pattern is refused for a batch-engine release too
    seed.unlink()
    r = run("release", cfg, "--force", "--engine", "streaming")
    assert r.exit_code == 2 and "--new-series" in r.text, r.text
    r = run("release", cfg, "--force", "--engine", "streaming", "--new-series")
    assert r.exit_code == 0, r.text
    assert json.loads((this / "internal" / "audit.json").read_text())["series"]["new_series"]


def test_pandas_release_then_streaming_release_in_one_series(prefect_harness, make_small_job,
                                                             tmp_path):
    cfg = make_small_job(seed={"file": str(tmp_path / "secrets" / "small.seed")},
                         output={"dir": str(tmp_path / "releases" / "small-{month}")})
    last, this = _month_pair(cfg, tmp_path, "pandas", "streaming")
    # same input, seed and config: the records files are the same bytes whatever the engine
    assert (last / "internal" / "records.parquet").read_bytes() == \
        (this / "internal" / "records.parquet").read_bytes()
    s = json.loads((this / "internal" / "audit.json").read_text())["series"]
    assert s["previous"]["dir"] == str(last)
    assert s["risk_vs_previous"]["changed_share"] == 0.0
    r = run("audit", "--series", last, this)
    assert r.exit_code == 0 and "series risk within xi" in r.text, r.text
    # the streaming release measured the series out of core from the two records files; the
    # pandas engine from its records in memory: the same figures
    r = run("release", cfg, "--force", "--engine", "pandas")
    assert r.exit_code == 0, r.text
    again = json.loads((this / "internal" / "audit.json").read_text())["series"]
    assert again["risk_vs_previous"] == s["risk_vs_previous"]
    assert again["risk_vs_previous"]["intruder"]
