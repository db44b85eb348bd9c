"""`sdc init` through the CLI: CSV, Parquet, SPSS and Stata inputs; the draft runs unchanged
through `sdc release`; SPSS/Stata outputs round-trip their labels against the Parquet file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest
import yaml
from conftest import run_cli
from typer.testing import CliRunner

import sdc

REPO = Path(__file__).resolve().parents[2]
CENSUS = REPO / "data_samples" / "census_sample.csv"
runner = CliRunner()


run = run_cli


def _survey(n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.DataFrame({
        "id": np.arange(1, n + 1), "full_name": [f"p{i}" for i in range(n)],
        "sex": rng.integers(1, 3, n), "age": rng.integers(0, 91, n),
        "race": rng.choice([1, 2, 3], n, p=[0.7, 0.2, 0.1]),
        "marital": rng.choice(["married", "single", "widowed"], n, p=[0.5, 0.4, 0.1]),
        "income": rng.gamma(2.0, 20000.0, n).round(0), "weight": rng.integers(50, 300, n)})


VALUE_LABELS = {"sex": {1: "Male", 2: "Female"}, "race": {1: "White", 2: "Black", 3: "Other"}}
COLUMN_LABELS = {"sex": "Sex", "age": "Age in years", "income": "Yearly income"}


def _write(frame: pd.DataFrame, path: Path) -> Path:
    fmt = path.suffix.lstrip(".")
    if fmt == "csv":
        frame.to_csv(path, index=False)
    elif fmt == "parquet":
        frame.to_parquet(path, index=False)
    else:
        writer = pyreadstat.write_sav if fmt == "sav" else pyreadstat.write_dta
        writer(frame, str(path), variable_value_labels=VALUE_LABELS, column_labels=COLUMN_LABELS)
    return path


def _init(data: Path, cfg: Path, *extra):
    return run("init", data, "--keys", "sex,age,race,marital", "--id", "id", "--drop",
               "full_name", "--weight", "weight", "-o", cfg, *extra)


@pytest.mark.parametrize("fmt", ["csv", "parquet", "sav", "dta"])
def test_init_writes_a_valid_commented_draft(tmp_path, fmt):
    data = _write(_survey(), tmp_path / f"survey.{fmt}")
    cfg = tmp_path / "configs" / "survey.yaml"
    r = _init(data, cfg)
    assert r.exit_code == 0, r.text
    assert "Config draft written to" in r.text and "OBSERVED" in r.text
    text = cfg.read_text()
    assert "OBSERVED DOMAINS" in text and "PUBLIC domain" in text
    c = sdc.load_config(cfg)                       # paths relative to the config's folder
    assert c.input_path == data.resolve() and c.input.id_column == "id"
    assert c.input.drop == ["full_name"] and c.input.weight == "weight"
    assert c.risk.weighted, "a draft with a survey weight uses the weighted mode"
    assert c.key_variables["marital"].categories == ["married", "single", "widowed"]
    assert c.key_variables["age"].range == (0, 90)
    if fmt in ("sav", "dta"):
        assert c.key_variables["sex"].labels == {1: "Male", 2: "Female"}
        assert c.key_variables["sex"].label == "Sex"
        assert c.input.labels == {"income": "Yearly income"}
        assert c.output.formats == ["parquet", fmt]
    r = run("validate", cfg)
    assert r.exit_code == 0, r.text


def test_init_refuses_to_overwrite(tmp_path):
    data = _write(_survey(500), tmp_path / "s.csv")
    cfg = tmp_path / "s.yaml"
    cfg.write_text("# mine\n")
    r = _init(data, cfg)
    assert r.exit_code == 2 and "already exists" in r.text and "--force" in r.text
    assert cfg.read_text() == "# mine\n"
    r = _init(data, cfg, "--force")
    assert r.exit_code == 0, r.text
    assert "OBSERVED DOMAINS" in cfg.read_text()


def test_init_errors_are_clean(tmp_path):
    data = _write(_survey(500), tmp_path / "s.csv")
    r = run("init", data, "--keys", "sex,nope", "-o", tmp_path / "x.yaml")
    assert r.exit_code == 2 and "nope" in r.text and "Traceback" not in r.text
    assert not (tmp_path / "x.yaml").exists()
    r = run("init", tmp_path / "missing.csv", "--keys", "sex", "-o", tmp_path / "x.yaml")
    assert r.exit_code == 2 and "does not exist" in r.text


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", ["csv", "sav", "dta"])
def test_init_then_release_unchanged(prefect_harness, tmp_path, fmt):
    """A newcomer's path: `sdc init` then `sdc release` on the draft as written."""
    data = _write(_survey(), tmp_path / f"survey.{fmt}")
    cfg = tmp_path / "survey.yaml"
    assert _init(data, cfg).exit_code == 0
    r = run("release", cfg)
    assert r.exit_code == 0, r.text
    out = tmp_path / "releases" / "survey"
    assert (out / "public" / "microdata.parquet").is_file()
    assert (tmp_path / "secrets" / "survey.seed").is_file()
    if fmt == "csv":
        return
    # the SPSS/Stata file holds the same records in the same order as the Parquet file,
    # with the config's value labels and variable labels
    pub = pd.read_parquet(out / "public" / "microdata.parquet")
    reader = pyreadstat.read_sav if fmt == "sav" else pyreadstat.read_dta
    back, meta = reader(str(out / "public" / f"microdata.{fmt}"))
    assert list(back["record_id"].astype(int)) == list(pub["record_id"])
    for col in ("sex", "age", "race"):
        assert back[col].astype(int).tolist() == pub[col].astype(int).tolist(), col
    codes = {"married": 1, "single": 2, "widowed": 3}            # text -> codes 1..K
    assert back["marital"].astype(int).tolist() == pub["marital"].map(codes).tolist()
    assert {int(k): v for k, v in meta.variable_value_labels["marital"].items()} == \
        {1: "married", 2: "single", 3: "widowed"}
    assert {int(k): v for k, v in meta.variable_value_labels["sex"].items()} == VALUE_LABELS["sex"]
    assert meta.column_names_to_labels["age"] == "Age in years"
    assert meta.column_names_to_labels["income"] == "Yearly income"
    np.testing.assert_allclose(back["income"], pub["income"])
    codebook = (out / "public" / "codebook.md").read_text()
    assert f"microdata.{fmt}" in codebook and "codes" in codebook
    assert yaml.safe_load(cfg.read_text())["output"]["formats"] == ["parquet", fmt]


def test_init_refuses_a_non_unique_id_and_a_float_key_with_exit_2(tmp_path):
    frame = _survey(400)
    frame["pid"] = np.arange(len(frame))
    frame.loc[5, "pid"] = 3
    frame["bmi"] = np.round(np.random.default_rng(1).normal(25, 4, len(frame)), 1)
    data = tmp_path / "s.csv"
    frame.to_csv(data, index=False)
    r = run("init", data, "--keys", "sex,age", "--id", "pid", "-o", tmp_path / "a.yaml")
    assert r.exit_code == 2, r.text
    assert "'pid' is not a unique record id" in r.text
    assert "2 rows share 1 id value(s) (first: 3 at rows [4, 6])" in r.text
    assert not (tmp_path / "a.yaml").exists()
    r = run("init", data, "--keys", "sex,age,bmi", "-o", tmp_path / "b.yaml")
    assert r.exit_code == 2, r.text
    assert "'bmi' holds non-whole numbers" in r.text and "band it in the data" in r.text
    assert not (tmp_path / "b.yaml").exists()
