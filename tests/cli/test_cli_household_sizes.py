"""Exposed household sizes through the command line (issue 44, docs/HOUSEHOLDS.md "Risk"): a
household size held by fewer than 1/xi households of the file is shown by every release with
household pseudonyms. ``risk.exposed_sizes: refuse`` stops the release (exit 2) naming the
size, its households and the fixes; ``report`` (the default) publishes it with the household
keys x size certificate of every other size <= xi, and names the exposed sizes in risk.json,
the codebook and the report page."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from sdc.samples import generate_household_sample
from tests.cli.test_cli import assert_clean_error, run


def _config(tmp_path: Path, **risk) -> Path:
    """The generated sample's 1,000 persons in 4 regions (two 8-person households: size 8 is
    exposed at xi 0.395), region the household key, sex and age in 3 bands, protect with the
    matching kernel."""
    src = tmp_path / "hh.csv"
    generate_household_sample(1000, seed=4, n_regions=4).to_csv(src, index=False)
    cfg = {"name": "hh",
           "input": {"path": str(src), "household_id": "hh_id", "id_column": "person_id",
                     "drop": ["income", "relation", "urbrur", "dwelling", "water", "hh_weight"]},
           "key_variables": {"region": {"range": [1, 4], "level": "household"},
                             "sex": {"categories": [1, 2]},
                             "age": {"range": [0, 95], "recode": {"bands": [0, 15, 65]}}},
           "risk": {"xi": 0.395, "composition": "protect", "theta": "calibrated",
                    "destinations": "near", "near": {"neighbours": 4, "kernel": "matching"},
                    **risk},
           "seed": 3, "output": {"dir": str(tmp_path / "out"), "formats": ["parquet"]}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_refuse_stops_a_release_with_an_exposed_size(tmp_path):
    r = run("release", _config(tmp_path, exposed_sizes="refuse"))
    assert_clean_error(r, 2, "household keys x size certificate", "household size 8 (2 households)",
                       "leave those households out of the input",
                       "release without the household id")
    assert not (tmp_path / "out").exists()


def test_report_publishes_and_names_the_exposed_size(prefect_harness, tmp_path):
    r = run("release", _config(tmp_path))
    assert r.exit_code == 0, r.text
    assert "exposed sizes" in r.text and "household keys x size" in r.text  # the run summary
    out = tmp_path / "out"
    size = json.loads((out / "internal" / "risk.json").read_text())[
        "households"]["composition"]["size_level"]
    assert size["exposed_sizes"] == [{"size": 8, "households": 2}]
    assert size["protectable_certificate"] <= 0.395 + 1e-12 < size["certificate"]
    assert size["policy"] == "report" and size["enforced"] == size["protectable_certificate"]
    assert "Household sizes not protected" in (out / "public" / "codebook.md").read_text()
    html = (out / "internal" / "report.html").read_text()
    assert "Household keys × size" in html and "Not bounded by ξ: household size 8" in html
    a = run("audit", out)
    assert a.exit_code == 0, a.text
    assert "household keys x size: exact certificate &lt;= xi" in a.text or \
        "household keys x size: exact certificate <= xi" in a.text
