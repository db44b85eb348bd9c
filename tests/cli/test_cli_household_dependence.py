"""Person columns against household keys through ``sdc release`` and ``sdc audit`` on sdcMicro's
testdata (households by ori_hid; household keys urbrur, water, walls; issue 34): a planted
person column that gives a household key away (a copy of ``water`` in every member, or two
person columns summing to it) is refused with exit 2 on every executor, naming the column, the
household key, the figure and the fixes; the file as it is releases and ``sdc audit`` recomputes
the person columns' figures (``level: person`` in audit.json's ``households.dependence``, on
the report page and in risk.json's ``dependence.households``).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml
from household_helpers import testdata

import sdc
from tests.cli.test_cli import assert_clean_error, run


def _job(tmp_path, name: str, frame: pd.DataFrame, engine: str = "pandas"):
    data = tmp_path / f"{name}.csv"
    frame.to_csv(data, index=False)
    cfg = {
        "name": name,
        "input": {"path": str(data), "household_id": "ori_hid",
                  "household_columns": ["roof", "electcon", "household_weights"],
                  "weight": "sampling_weight", "drop": ["relat", "hhcivil"]},
        "key_variables": {"urbrur": {"categories": [1, 2], "level": "household"},
                          "water": {"categories": list(range(1, 10)), "level": "household"},
                          "walls": {"categories": [1, 2, 3, 9], "level": "household"},
                          "sex": {"categories": [1, 2]}, "age": {"range": [0, 110]}},
        "partition": {"age": {"bands": [0, 15, 30, 45, 60, 75]}, "sex": "as_is"},
        "risk": {"households": "warn", "xi": 0.5},
        "seed": 5,
        "output": {"dir": str(tmp_path / name / "release")},
        "engine": {"pandas": "pandas", "streaming": {"kind": "streaming", "batch_rows": 777},
                   "dask": {"kind": "dask", "workers": 2}}[engine],
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.mark.parametrize("engine", ["pandas", "streaming", "dask"])
def test_a_person_copy_of_a_household_key_is_refused_on_every_executor(prefect_harness,
                                                                       tmp_path, engine):
    df = testdata()
    r = run("release", _job(tmp_path, "copy", df.assign(water_copy=df["water"]), engine))
    assert_clean_error(r, 2, "'water_copy' (a person column) reveals the original household "
                       "key(s) water", "against xi = 0.5",
                       "Fix each person column that gives a household key away (water_copy)",
                       "input.household_columns", "nothing was released")
    assert not (tmp_path / "copy" / "release" / "public").exists()


def test_a_pair_of_person_columns_and_the_file_as_it_is(prefect_harness, tmp_path):
    df = testdata()
    a = np.random.default_rng(1).integers(0, 10, len(df))
    r = run("release", _job(tmp_path, "pair", df.assign(pa=a, pb=df["water"] - a)))
    assert_clean_error(r, 2, "'pa + pb' (a person column) reveals the original household "
                       "key(s) water", "together, pa and pb (neither alone)", "Fix each pair")

    cfg = _job(tmp_path, "plain", df)
    r = run("release", cfg)
    assert r.exit_code == 0, r.text
    out = sdc.load_config(cfg).output_dir
    a = run("audit", out)
    assert a.exit_code == 0, a.text
    assert "household stage: dependence check: recomputed = recorded" in a.text
    audit = json.loads((out / "internal" / "audit.json").read_text())
    figs = audit["households"]["dependence"]
    person = [f["column"] for f in figs if f.get("level") == "person"]
    assert person == ["sex", "age", "expend", "income", "savings", "sampling_weight"]
    assert not any(f["flagged"] for f in figs)
    # the report: risk.json's dependence.households (schema-checked) and its table on the page
    risk = json.loads((out / "internal" / "risk.json").read_text())
    assert risk["dependence"]["households"] == figs
    page = (out / "internal" / "report.html").read_text()
    assert "Household stage (one unit per household, against the household keys)" in page
    assert "<td>sampling_weight</td><td>person</td>" in page
