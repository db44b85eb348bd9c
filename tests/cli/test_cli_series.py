"""``sdc release`` and ``sdc audit --series`` on a release series, through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from conftest import run_cli, series_seed_file
from typer.testing import CliRunner

runner = CliRunner()


run = run_cli


def test_series_release_refusal_and_audit(prefect_harness, make_small_job, tmp_path):
    seed = series_seed_file(tmp_path / "secrets" / "small.seed")  # conftest: why fixed
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
    seed = series_seed_file(tmp_path / "secrets" / "small.seed")  # conftest: why fixed
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
    seed = series_seed_file(tmp_path / "secrets" / "small.seed")  # conftest: why fixed
    cfg = make_small_job(seed={"file": str(seed)},
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


def test_per_month_folders_with_a_new_seed_file_each_month_are_one_series(
        prefect_harness, make_small_job, tmp_path):
    """The seed guard follows the job, not a folder pattern (issue 46): a config edited each
    month to write ``releases/small-2026-0N`` with a new seed file ``secrets/2026-0N.seed`` is
    refused in month 2 (exit 2, nothing written, no seed file left behind); renamed each month
    too, the records give it away (a release beside it under another seed holds its records).
    With one seed file the months are one series: month 2 names month 1 as its previous
    release and as a member of its series certificate."""
    releases = tmp_path / "releases"

    def month(m: int, seed_name: str, name: str = "small") -> tuple[Path, Path]:
        out = releases / f"small-2026-0{m}"
        return make_small_job(name=name, seed={"file": str(tmp_path / "secrets" / seed_name)},
                              output={"dir": str(out)}), out

    series_seed_file(tmp_path / "secrets" / "2026-01.seed")  # month 2 reuses it: a series
    cfg1, out1 = month(1, "2026-01.seed")
    assert run("release", cfg1).exit_code == 0
    cfg2, out2 = month(2, "2026-02.seed")
    r = run("release", cfg2)
    assert r.exit_code == 2, r.text
    assert "another seed" in r.text and str(out1) in r.text and not out2.exists()
    assert not (tmp_path / "secrets" / "2026-02.seed").exists()
    cfg2, out2 = month(2, "2026-02.seed", name="small-feb")
    r = run("release", cfg2)
    assert r.exit_code == 2, r.text
    assert "same records" in r.text and "100.0%" in r.text and not out2.exists()
    cfg2, out2 = month(2, "2026-01.seed")
    r = run("release", cfg2)
    assert r.exit_code == 0, r.text
    s = json.loads((out2 / "internal" / "audit.json").read_text())["series"]
    assert s["previous"]["dir"] == str(out1) and s["members"] == [str(out1)]
    assert s["certificate"]["passed"] and s["certificate"]["n_releases"] == 2


def test_the_next_member_is_refused_when_its_series_would_exceed_xi(prefect_harness,
                                                                    make_small_job, tmp_path):
    """Two earlier members of the series in which every record was released in its true cell
    (records files written by hand: what a series whose draws kept changing could come to):
    with this release, every record's modal cell is its true cell and the linking intruder
    picks right in class t_j = 1, a = 1 far above xi. The release is refused with exit 2,
    naming the class, and writes nothing."""
    from sdc.series.membership import series_id

    cfg = make_small_job(output={"dir": str(tmp_path / "releases" / "small-03")})
    assert run("release", cfg, "--force").exit_code == 0
    rel = tmp_path / "releases" / "small-03"
    rec = pd.read_parquet(rel / "internal" / "records.parquet")
    for m in ("small-01", "small-02"):
        d = tmp_path / "releases" / m / "internal"
        d.mkdir(parents=True)
        rec.assign(released=rec["cell"]).to_parquet(d / "records.parquet", index=False)
        (d / "audit.json").write_text(json.dumps({
            "risk": {"xi": 0.395},
            "series": {"id": series_id(20260101), "config_name": "small"}}))
    before = (rel / "internal" / "audit.json").read_bytes()
    r = run("release", cfg, "--force")
    assert r.exit_code == 2, r.text
    assert "class t_j = 1, a = 1" in r.text and "over xi" in r.text and "Nothing was written" in r.text
    assert (rel / "internal" / "audit.json").read_bytes() == before
