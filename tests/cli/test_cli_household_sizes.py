"""Exposed household sizes through the command line (issue 44, docs/HOUSEHOLDS.md "Exposed
sizes"): a household size held by fewer than 1/xi households of the file is shown by every
release with household pseudonyms. ``risk.exposed_sizes: refuse`` (the default) stops the
release (exit 2) naming the size, its households and the fix; ``drop`` leaves those households
out of the public file (every certificate over the released households, the exposed size
absent), states it in risk.json, audit.json, the codebook and the run summary, gives the same
files on every executor, and ``sdc audit`` re-derives it; ``report`` (which published them) is
refused naming the fix."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
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


def test_refuse_is_the_default_and_names_size_households_and_fix(tmp_path):
    r = run("release", _config(tmp_path))
    assert_clean_error(r, 2, "household size 8 (2 households)", "fewer than 1/xi",
                       "risk.exposed_sizes: drop", "release without input.household_id")
    assert not (tmp_path / "out").exists()


def test_report_is_refused_naming_the_fix(tmp_path):
    r = run("release", _config(tmp_path, exposed_sizes="report"))
    assert_clean_error(r, 2, "risk.exposed_sizes: report", "risk.exposed_sizes: drop")
    assert not (tmp_path / "out").exists()


def test_drop_leaves_the_exposed_households_out(prefect_harness, tmp_path):
    """The two 8-person households (16 persons) are not in the public file; no public size
    is held by fewer than 1/xi households; the household keys x size certificate is over
    every released household and <= xi; stated everywhere; the audit re-derives it."""
    src = tmp_path / "hh.csv"
    r = run("release", _config(tmp_path, exposed_sizes="drop"))
    assert r.exit_code == 0, r.text
    assert "left out" in r.text and "2 households, 16 persons" in r.text  # the run summary
    out = tmp_path / "out"
    hh = json.loads((out / "internal" / "risk.json").read_text())["households"]
    size = hh["composition"]["size_level"]
    assert size["exposed_sizes"] == [] and size["policy"] == "drop"
    assert size["enforced"] == size["certificate"] <= 0.395 + 1e-12
    left = hh["left_out"]
    assert left["sizes"] == [{"size": 8, "households": 2}]
    assert (left["households"], left["persons"]) == (2, 16)
    orig = pd.read_csv(src)
    assert left["of_persons"] == len(orig) and left["of_households"] == orig.hh_id.nunique()
    pub = pd.read_parquet(out / "public" / "microdata.parquet")
    assert len(pub) == len(orig) - 16
    sizes = pub.groupby("hh_id").size()
    assert sizes.max() < 8 and (sizes.value_counts() * 0.395 >= 1).all()
    audit = json.loads((out / "internal" / "audit.json").read_text())
    assert audit["households"]["left_out"] == left
    assert "Households left out (exposed sizes)" in (out / "public" / "codebook.md").read_text()
    a = run("audit", out)
    assert a.exit_code == 0, a.text
    assert "households left out" in a.text and "no exposed size" in a.text


def test_design_says_the_config_as_written_refuses_and_what_drop_leaves_out(tmp_path):
    """`sdc design` of a config that refuses exposed sizes (the default) judges its candidates
    without those households (`drop`), so it must say that the config as written is refused
    and how many households and persons every candidate leaves out (table and JSON)."""
    cfg = _config(tmp_path)
    n = len(pd.read_csv(tmp_path / "hh.csv"))
    r = run("design", cfg, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    cur = doc["current"]
    assert cur["status"] == "refused"
    assert "exposed household sizes 8 (2 households)" in cur["note"]
    assert "risk.exposed_sizes: refuse" in cur["note"]
    assert f"2 households, 16 persons ({16 / n:.2%}) left out" in cur["note"]
    assert doc["left_out"] == {"households": 2, "persons": 16, "share": 16 / n,
                               "sizes": {"8": 2}}
    assert doc["frontier"] and all(p["left_out"] == doc["left_out"] for p in doc["frontier"])
    r = run("design", cfg)
    text = " ".join(r.output.split())
    assert "left out" in text and "2 hh, 16 p" in text
    assert (f"the candidates leave 2 households, 16 persons ({16 / n:.2%}) out of the public "
            "file") in text
