"""``sdc init --household-id``: a household file drafted as one (sdc.authoring.draft_households).

Before, `sdc init` drafted a household file as a person file: it dropped the household id (it
gives the household keys away) and the public file lost its households. Now the keys with one
value per household are household-level, the household columns are listed, the draft is
judged as `sdc release` judges it (both stages, the composition intruder) and replaced by the
household design's recommendation when refused; `sdc plan` of the written draft passes."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import run_cli

from sdc.authoring.draft_households import household_levels
from sdc.samples import generate_household_sample


def test_household_levels_is_the_brute_force_answer():
    """One value per household, by brute force over the households (missing is a value)."""
    rng = np.random.default_rng(3)
    n = 400
    hh = rng.integers(0, 60, n)
    region = (hh * 7) % 5  # constant within households
    noisy = region.astype(float)
    noisy[rng.integers(0, n)] = 99.0  # one member differs
    blank = np.where(hh % 3 == 0, np.nan, 1.0)  # constant (missing in some households)
    frame = pd.DataFrame({"hh": hh, "region": region, "noisy": noisy, "age": rng.integers(0, 90, n),
                          "blank": blank, "name": [f"h{h}" for h in hh]})
    cols = ["region", "noisy", "age", "blank", "name"]
    got = household_levels(frame, "hh", cols)
    for c in cols:
        brute = all(len({repr(v) for v in g[c]}) <= 1 for _, g in frame.groupby("hh"))
        assert got[c] == brute, c
    assert got == {"region": True, "noisy": False, "age": False, "blank": True, "name": True}


@pytest.fixture(scope="module")
def household_csv(tmp_path_factory) -> Path:
    frame = generate_household_sample(1500, seed=11, n_regions=4)
    path = tmp_path_factory.mktemp("hh-init") / "hh.csv"
    frame.to_csv(path, index=False)
    return path


def _draft(tmp_path: Path, csv: Path, *opts: str):
    out = tmp_path / "job.yaml"
    r = run_cli("init", csv, "-o", out, *opts)
    return r, out


@pytest.mark.xdist_group("hh-init")
def test_a_generated_household_file_is_drafted_as_one_and_plans(household_csv, tmp_path):
    r, out = _draft(tmp_path, household_csv, "--keys", "region,dwelling,sex,age", "--id",
                    "person_id", "--weight", "hh_weight", "--household-id", "hh_id")
    assert r.exit_code == 0, r.text
    cfg = yaml.safe_load(out.read_text())
    assert cfg["input"]["household_id"] == "hh_id"
    levels = {k: v.get("level", "person") for k, v in cfg["key_variables"].items()}
    assert levels == {"region": "household", "dwelling": "household", "sex": "person",
                      "age": "person"}
    # urbrur and water have one value per household; income does not (a person column)
    assert set(cfg["input"]["household_columns"]) == {"urbrur", "water"}
    assert "hh_id" not in cfg["input"]["drop"]
    assert "household file (hh_id)" in r.text and "certificate 0.3" in r.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yaml"]  # no judge file left
    plan = run_cli("plan", out)
    assert plan.exit_code == 0, plan.text


@pytest.mark.parametrize("case", ["missing-id", "id-is-key", "no-household-key"])
def test_household_drafts_refused_with_the_fix(tmp_path, case):
    rng = np.random.default_rng(1)
    n = 300
    hh = np.repeat(np.arange(100), 3)
    frame = pd.DataFrame({"hh": hh.astype(float), "region": hh % 4, "sex": rng.integers(1, 3, n),
                          "age": rng.integers(0, 90, n)})
    keys = "region,sex,age"
    if case == "missing-id":
        frame.loc[[5, 17], "hh"] = np.nan
    elif case == "id-is-key":
        keys = "hh,sex,age"
    else:
        keys = "sex,age"
    csv = tmp_path / "in.csv"
    frame.to_csv(csv, index=False)
    r, out = _draft(tmp_path, csv, "--keys", keys, "--household-id", "hh")
    assert r.exit_code == 2, r.text
    expected = {"missing-id": "2 of 300 records have no household id",
                "id-is-key": "--household-id hh is also a key",
                "no-household-key": "no key has one value per household"}[case]
    assert expected in r.text
    assert not out.exists()


def test_levels_cover_every_combination_of_constant_columns():
    """Exhaustive over which of three columns vary within a household (2^3 cases)."""
    hh = np.repeat(np.arange(4), 2)
    for vary in itertools.product([False, True], repeat=3):
        cols = {}
        for i, v in enumerate(vary):
            base = hh * 10 + i
            cols[f"c{i}"] = base + (np.arange(8) % 2 if v else 0)
        frame = pd.DataFrame({"hh": hh, **cols})
        got = household_levels(frame, "hh", list(cols))
        assert got == {f"c{i}": not v for i, v in enumerate(vary)}


@pytest.mark.xdist_group("hh-init")
def test_a_dropped_copy_of_the_weight_keeps_the_weight_recalibrated(tmp_path):
    """A calibrated household weight (a function of region and household size: it gives the
    region away) and a dropped copy of it (eusilc's db090 = rb050): the copy is rebuilt from
    the weight, and that figure names the weight as its pair. Before, init fixed the weight
    once for its own figure (recalibrated) and again for the copy's, and the second fix
    dropped the weight (`drop: [db090, pl030, rb050]`: a survey without its weight)."""
    frame = generate_household_sample(1500, seed=11, n_regions=4)
    size = frame.groupby("hh_id")["hh_id"].transform("size")
    frame["hh_weight"] = 100.0 + 10 * pd.factorize(frame["region"])[0] + size
    frame["w_copy"], frame["hsize"] = frame["hh_weight"], size
    csv = tmp_path / "hh.csv"
    frame.to_csv(csv, index=False)
    r, out = _draft(tmp_path, csv, "--keys", "region,hsize,sex,age", "--id", "person_id",
                    "--weight", "hh_weight", "--household-id", "hh_id", "--drop", "w_copy")
    assert r.exit_code == 0, r.text
    inp = yaml.safe_load(out.read_text())["input"]
    assert inp["weight"] == "hh_weight" and inp["weight_release"] == "recalibrated"
    assert "w_copy" in inp["drop"] and "hh_weight" not in inp["drop"], inp["drop"]
