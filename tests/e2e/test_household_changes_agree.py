"""``sdc init``, ``sdc design`` and ``sdc release`` of a household file print the same expected
records changed (issue 44): init and design the recommended design's exact expectation under
its plan (:func:`sdc.method.household_composition.expected_persons_changed`, with its SD), the
release its one draw beside the same expectation.

On real files as a new user runs them: sdcMicro's testdata (../shared/data) and R laeken's
synthetic EU-SILC (exported by Rscript when laeken is installed, else skipped). Checked:

- init's printed expectation (rounded to a record) equals design's (the same plan, seed-free);
- the release prints design's expectation and SD (to the printed 0.1);
- the release's count lies within 4 SD of the expectation: households draw independently and
  the SD is the exact one of one release (a two-sided normal tail of 6e-5).

On eusilc also: the person incomes are released as numbers in the four formats (init drafts
``input.na_values: [NA]``), and the weighted poverty rate by region, sex and age group
and the weighted household size distribution (utility.json ``households.survey``) stay within
2 SE of the original (one release; measured |z| <= 0.9 on 17 groups).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyreadstat
import pytest
import yaml
from conftest import SHARED_DATA, run_cli
from eusilc_helpers import export_eusilc

TESTDATA = SHARED_DATA / "sdcmicro" / "testdata.csv"
INCOMES = ["py010n", "py050n", "py090n", "py100n", "py110n", "py120n", "py130n", "py140n"]

INIT = re.compile(r"([\d,]+) records \([\d.]+%\) expected to change \(SD ([\d,]+)\)")
RELEASE = re.compile(r"records changed ([\d,]+) \(expected ([\d,.]+), SD ([\d,.]+)\)")


@pytest.fixture(scope="module")
def eusilc_csv(tmp_path_factory) -> Path:
    return export_eusilc(tmp_path_factory)


def _num(s: str) -> float:
    return float(s.replace(",", ""))


def _agree(tmp_path: Path, data: Path, *init_args: str, formats: list[str] | None = None,
           utility: dict[str, Any] | None = None) -> dict[str, Any]:
    job, d = tmp_path / "job.yaml", tmp_path / "d.yaml"
    r = run_cli("init", data, *init_args, "-o", job)
    assert r.exit_code == 0, r.text
    m = INIT.search(r.text)
    assert m, r.text[-800:]
    init_e, init_sd = _num(m.group(1)), _num(m.group(2))
    assert yaml.safe_load(job.read_text())["risk"]["composition"] == "protect"
    r = run_cli("design", job, "-o", d, "--json")
    assert r.exit_code == 0, r.text
    rec = json.loads(r.stdout)["recommended"]
    design_e, design_sd = float(rec["expected_changed"]), float(rec["sd_changed"])
    assert abs(init_e - design_e) <= 0.5 and abs(init_sd - design_sd) <= 0.5
    assert rec["changed"] != design_e  # the expectation, not the search's one draw
    if formats or utility:
        cfg = yaml.safe_load(d.read_text())
        cfg["output"]["formats"] = formats or cfg["output"]["formats"]
        if utility:
            cfg["utility"] = utility
        d.write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = run_cli("release", d)
    assert r.exit_code == 0, r.text
    m = RELEASE.search(r.text)
    assert m, r.text[-800:]
    changed, rel_e, rel_sd = (_num(g) for g in m.groups())
    assert abs(rel_e - design_e) <= 0.05 and abs(rel_sd - design_sd) <= 0.05
    assert abs(changed - design_e) <= 4 * design_sd, (changed, design_e, design_sd)
    public = tmp_path / yaml.safe_load(d.read_text())["output"]["dir"] / "public"
    return {"init": init_e, "design": design_e, "release": changed, "sd": design_sd,
            "public": public}


@pytest.mark.skipif(not TESTDATA.is_file(), reason="sdcMicro testdata absent (../shared/data)")
def test_testdata_init_design_release_print_the_same_expectation(tmp_path):
    _agree(tmp_path, TESTDATA, "--keys", "urbrur,water,sex,age", "--household-id", "ori_hid",
           "--weight", "household_weights")


@pytest.mark.slow
def test_eusilc_init_design_release_print_the_same_expectation(eusilc_csv, tmp_path):
    """eusilc with region the only household key (household size is refused as a key by the
    exact certificates: docs/HOUSEHOLDS.md). Its person incomes hold R's ``NA`` (persons under
    16): init drafts ``input.na_values: [NA]`` and they are released as numbers in every
    format, equal to the original's (as multisets)."""
    got = _agree(tmp_path, eusilc_csv, "--household-id", "db030", "--weight", "rb050",
                 "--keys", "db040,age,rb090,pb220a", "--id", "rb030", "--drop", "db090",
                 formats=["parquet", "csv", "sav", "dta"],
                 utility={"household_income": "eqIncome"})
    assert got["design"] < 0.15 * 14827
    # the weighted poverty rate by region within 2 SE of the original (issue 44's done-when;
    # utility.json households.survey, SE over households); by sex and age group too
    u = json.loads((got["public"].parent / "internal" / "utility.json").read_text())
    survey = u["households"]["survey"]
    region = next(g for g in survey["by_household_key"] if g["key"] == "db040")
    assert len(region["values"]) == 9
    for g in [region, *survey["by_person_key"]]:
        for e in g["values"]:
            assert abs(e["poverty_rate"]["z"]) <= 2, (g["key"], e)
    # the weighted household size distribution within 2 SE too: the recalibrated weight is
    # raked to the household sizes' totals as well (docs/METHOD.md 7.13; post-stratified to
    # region alone, single-person households moved by -7.7 SE)
    sizes = survey["size_distribution"]
    assert len(sizes) >= 5
    for e in sizes:
        assert abs(e["share"]["z"]) <= 2, e
    orig = pd.read_csv(eusilc_csv)
    pub = got["public"]
    files = {"parquet": pd.read_parquet(pub / "microdata.parquet"),
             "sav": pyreadstat.read_sav(str(pub / "microdata.sav"))[0],
             "dta": pyreadstat.read_dta(str(pub / "microdata.dta"))[0],
             "csv": pd.read_csv(pub / "microdata.csv")}
    for name, f in files.items():
        for c in INCOMES:
            assert f[c].dtype == np.float64, (name, c, f[c].dtype)
            assert np.array_equal(np.sort(f[c].to_numpy(float)),
                                  np.sort(orig[c].to_numpy(float)), equal_nan=True), (name, c)
