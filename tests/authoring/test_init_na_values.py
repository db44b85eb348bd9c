"""``sdc init`` drafts ``input.na_values`` when a CSV column is numeric but for a missing-value
token (issue 44: R's ``NA`` made laeken's eusilc incomes text in every output format): the
columns then stay numbers (float64) in the Parquet, CSV, SPSS and Stata files, and every other
value comes out as read. A token another text column holds as a value (``NA`` for Namibia) is
not drafted: it would change that column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest
import yaml
from conftest import run_cli
from eusilc_helpers import export_eusilc

from sdc.authoring.draft import read_for_draft
from sdc.authoring.observe import missing_tokens, read_input

N = 600


def _written(tmp_path: Path, namibia: bool = False) -> Path:
    rng = np.random.default_rng(8)
    income = np.round(rng.lognormal(9, 1, N), 2).astype(object)
    income[rng.choice(N, 40, replace=False)] = "NA"
    hours = rng.integers(0, 60, N).astype(object)
    hours[rng.choice(N, 15, replace=False)] = "NA"
    frame = pd.DataFrame({"pid": np.arange(1, N + 1), "sex": rng.integers(1, 3, N),
                          "region": rng.integers(1, 5, N), "income": income, "hours": hours,
                          "note": rng.choice(["a", "b", "c"], N)})
    if namibia:
        frame["country"] = rng.choice(["NA", "ZA", "BW"], N)
    path = tmp_path / "survey.csv"
    frame.to_csv(path, index=False)
    return path


def test_a_numeric_column_with_na_is_drafted_with_na_values_and_released_numeric(tmp_path):
    src = _written(tmp_path)
    job = tmp_path / "job.yaml"
    r = run_cli("init", src, "--keys", "sex,region", "--id", "pid", "-o", job)
    assert r.exit_code == 0, r.text
    text = job.read_text()
    cfg = yaml.safe_load(text)
    assert cfg["input"]["na_values"] == ["NA"]
    assert "income, hours would be text" in " ".join(text.split())
    cfg["output"]["formats"] = ["parquet", "csv", "sav", "dta"]
    job.write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = run_cli("release", job)
    assert r.exit_code == 0, r.text
    pub = tmp_path / cfg["output"]["dir"] / "public"
    orig = pd.read_csv(src, keep_default_na=False, dtype=str)
    pq = pd.read_parquet(pub / "microdata.parquet")
    sav, _ = pyreadstat.read_sav(str(pub / "microdata.sav"))
    dta, _ = pyreadstat.read_dta(str(pub / "microdata.dta"))
    csv = pd.read_csv(pub / "microdata.csv", keep_default_na=False, dtype=str)
    want = pd.to_numeric(orig["income"].replace("NA", None))
    for name, f in (("parquet", pq), ("sav", sav), ("dta", dta)):
        for c in ("income", "hours"):
            assert pd.api.types.is_float_dtype(f[c]), (name, c, f[c].dtype)
        # the same multiset of values (the public row order is not the input's)
        assert np.array_equal(np.sort(f["income"].to_numpy(float)), np.sort(want.to_numpy(float)),
                              equal_nan=True), name
    # the CSV gives the numbers back as read; the token becomes an empty field
    assert sorted(csv["income"]) == sorted(orig["income"].replace("NA", ""))
    assert sorted(csv["hours"]) == sorted(orig["hours"].replace("NA", ""))
    assert sorted(csv["note"]) == sorted(orig["note"])


def test_a_token_another_column_holds_as_a_value_is_not_drafted(tmp_path):
    src = _written(tmp_path, namibia=True)
    frame, *_ = read_for_draft(src, ["sex", "region"], id_column="pid")
    assert "na_values" not in frame.attrs
    assert frame["country"].eq("NA").sum() > 0  # Namibia kept
    assert not pd.api.types.is_numeric_dtype(frame["income"])


def test_missing_tokens_finds_only_columns_numeric_but_for_tokens(tmp_path):
    from sdc.authoring.observe import _provisional

    path = tmp_path / "t.csv"
    pd.DataFrame({"k": [1, 2, 3, 4], "a": ["1.5", "NA", "2", "."], "b": ["x", "NA", "y", "z"],
                  "c": ["1", "2", "3", "4"], "d": ["NA", "NA", "NA", "NA"]}).to_csv(path,
                                                                                  index=False)
    cfg = _provisional(path, ["k"], fmt=None, delimiter=",", encoding="utf-8", id_column=None,
                       drop=[], weight=None)
    frame = read_input(cfg)
    # b holds NA among words: NA is a value there, so a's NA is not proposed; "." is
    assert missing_tokens(frame, cfg) == ([], [])
    frame = frame.drop(columns="b")
    assert missing_tokens(frame, cfg) == (["NA", "."], ["a"])


@pytest.fixture(scope="module")
def eusilc_csv(tmp_path_factory) -> Path:
    return export_eusilc(tmp_path_factory)


def test_eusilc_incomes_read_as_numbers(eusilc_csv):
    frame, *_ = read_for_draft(eusilc_csv, ["db040", "age", "rb090", "pb220a"],
                               id_column="rb030", drop=["db090"], weight="rb050")
    na = frame.attrs["na_values"]
    assert na["tokens"] == ["NA"]
    incomes = ["py010n", "py050n", "py090n", "py100n", "py110n", "py120n", "py130n", "py140n"]
    assert set(incomes) <= set(na["columns"])
    for c in incomes:
        assert frame[c].dtype == np.float64, c
        assert frame[c].isna().sum() > 0  # the persons under 16
