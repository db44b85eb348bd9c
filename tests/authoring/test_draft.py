"""The config draft of `sdc init` (sdc.authoring.draft): observed domains, labels from SPSS/Stata
metadata, the partition checked on the data, and YAML that parses to exactly the draft."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest
import yaml

import sdc
from sdc.authoring.draft import (
    RANGE_THRESHOLD,
    build_draft,
    draft_yaml,
    observe_key,
    read_for_draft,
)
from sdc.io.read import read_input
from tests.conftest import SHARED_DATA

REPO = Path(__file__).resolve().parents[2]
CENSUS = REPO / "data_samples" / "census_sample.csv"
CENSUS_KEYS = ["sex", "age", "race", "marital", "puma"]


def _census_draft(tmp_path: Path, **kw):
    frame, vl, varl, fmt = read_for_draft(CENSUS, CENSUS_KEYS, id_column="person_id",
                                          drop=["full_name"], weight="weight")
    return build_draft(frame, data_path=CENSUS, config_path=tmp_path / "census.yaml",
                       keys=CENSUS_KEYS, fmt=fmt, id_column="person_id", drop=["full_name"],
                       weight="weight", value_labels=vl, variable_labels=varl, **kw)


@pytest.fixture(scope="module")
def census_draft(tmp_path_factory) -> tuple:
    """The census sample's draft (~4 CPU s: its partition is checked by planning) made once
    for the two tests that read it: (draft, the folder of its config)."""
    folder = tmp_path_factory.mktemp("census-draft")
    return _census_draft(folder), folder


def test_census_draft_domains_partition_and_check(census_draft):
    d, _ = census_draft
    assert d.keys["sex"].categories == [1, 2]
    assert d.keys["age"].range == (0, 91)             # 92 distinct integers: a range
    assert d.keys["race"].categories == list(range(1, 10))
    assert d.keys["puma"].range == (101, 144)
    # bands for the widest range key, as_is for the small categorical ones, PUMA free
    assert d.partition["sex"] == "as_is" and "bands" in d.partition["age"]
    assert "puma" not in d.partition and "race" not in d.partition
    c = d.check
    assert c["small_prbs"] <= 0.10 * c["prbs"] and c["certificate"] <= 0.395
    assert c["records"] == 59033


def test_yaml_parses_to_the_draft_and_warns_about_observed_domains(census_draft):
    d, tmp_path = census_draft
    text = draft_yaml(d)
    assert yaml.safe_load(text) == d.as_dict()
    assert "OBSERVED DOMAINS" in text and "PUBLIC domain" in text and "rare" in text
    assert "released unchanged: [income, hours_worked]" in text
    cfg = sdc.parse_config(yaml.safe_load(text), tmp_path)
    assert cfg.input_path == CENSUS.resolve()        # path relative to the config's folder
    assert cfg.risk.small_blocks == "merge" and cfg.output.formats == ["parquet", "csv"]


def test_observe_key_kinds():
    s = pd.Series(np.arange(RANGE_THRESHOLD + 1))
    assert observe_key(s, "x").range == (0, RANGE_THRESHOLD)
    assert observe_key(pd.Series([3, 1, 3]), "x").categories == [1, 3]
    # text that is a canonical integer becomes integers; leading zeros stay text
    assert observe_key(pd.Series(["2", "10"]), "x").categories == [2, 10]
    assert observe_key(pd.Series(["02", "10"]), "x").categories == ["02", "10"]
    kd = observe_key(pd.Series(["b", None, "a"]), "x")
    assert kd.categories == ["a", "b"] and kd.missing
    kd = observe_key(pd.Series([1.0, 2.0]), "x", {1.0: "one", 2.0: "two", 9.0: "refused"})
    assert kd.categories == [1, 2, 9] and kd.labels == {1: "one", 2: "two", 9: "refused"}
    assert kd.unobserved_labelled == [9]
    with pytest.raises(sdc.InputError, match="non-whole numbers"):
        observe_key(pd.Series([1.5, 2.0]), "x")
    with pytest.raises(sdc.InputError, match="boolean"):
        observe_key(pd.Series([True, False]), "x")


def _small(n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({
        "id": np.arange(n), "sex": rng.integers(1, 3, n).astype(float),
        "age": rng.integers(0, 91, n).astype(float),
        "race": rng.choice([1.0, 2.0, 3.0], n, p=[0.7, 0.2, 0.1]),
        "region": rng.integers(1, 6, n).astype(float),
        "income": rng.gamma(2.0, 20000.0, n).round(0)})


@pytest.mark.parametrize("fmt", ["sav", "dta", "parquet"])
def test_labels_from_spss_stata_metadata(tmp_path, fmt):
    f = _small()
    path = tmp_path / f"survey.{fmt}"
    vlabels = {"sex": {1: "Male", 2: "Female"},
               "race": {1: "White", 2: "Black", 3: "Other", 9: "Refused"}}
    clabels = {"sex": "Sex", "age": "Age in years", "income": "Yearly income"}
    if fmt == "sav":
        pyreadstat.write_sav(f, str(path), variable_value_labels=vlabels, column_labels=clabels)
    elif fmt == "dta":
        pyreadstat.write_dta(f, str(path), variable_value_labels=vlabels, column_labels=clabels)
    else:
        f.to_parquet(path)
    keys = ["sex", "age", "race", "region"]
    frame, vl, varl, got_fmt = read_for_draft(path, keys, id_column="id")
    assert got_fmt == fmt
    d = build_draft(frame, data_path=path, config_path=tmp_path / "c.yaml", keys=keys,
                    fmt=fmt, id_column="id", value_labels=vl, variable_labels=varl)
    spec = d.as_dict()
    if fmt == "parquet":
        assert "labels" not in spec["key_variables"]["sex"]
        assert spec["output"]["formats"] == ["parquet", "csv"]
        return
    assert spec["key_variables"]["sex"] == {"label": "Sex", "categories": [1, 2],
                                            "labels": {1: "Male", 2: "Female"}}
    assert spec["key_variables"]["race"]["categories"] == [1, 2, 3, 9]   # labelled, unobserved
    assert spec["key_variables"]["age"]["label"] == "Age in years"
    assert spec["input"]["labels"] == {"income": "Yearly income"}
    assert spec["output"]["formats"] == ["parquet", fmt]
    assert yaml.safe_load(draft_yaml(d)) == spec


def test_missing_columns_are_named(tmp_path):
    with pytest.raises(sdc.InputError, match=r"--keys: \['nope'\] is not a column.*sex"):
        read_for_draft(CENSUS, ["sex", "nope"])
    with pytest.raises(sdc.InputError, match=r"--weight: \['w'\]"):
        read_for_draft(CENSUS, ["sex"], weight="w")


def test_a_long_list_of_released_columns_stays_a_comment(tmp_path):
    """Many non-key columns wrap the "released unchanged" comment over several lines; every
    continuation line must stay a comment (the free1 draft was invalid YAML: a bare line)."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"sex": rng.integers(1, 3, 400), "region": rng.integers(1, 5, 400)})
    for i in range(30):
        frame[f"VARIABLE_NUMBER_{i:02d}"] = rng.integers(0, 9, 400)
    path = tmp_path / "wide.csv"
    frame.to_csv(path, index=False)
    fr, vl, varl, fmt = read_for_draft(path, ["sex", "region"])
    d = build_draft(fr, data_path=path, config_path=tmp_path / "wide.yaml", keys=["sex", "region"],
                    fmt=fmt, value_labels=vl, variable_labels=varl)
    text = draft_yaml(d)
    block = [ln for ln in text.splitlines() if "VARIABLE_NUMBER_" in ln]
    assert len(block) > 1 and all(ln.lstrip().startswith("#") for ln in block)
    assert yaml.safe_load(text) == d.as_dict()


def test_sparse_integer_codes_are_categories_not_a_range():
    """An integer key whose distinct values fill less than half of their span (PUMA codes
    100..8200) is drafted as nominal categories, never as a range to band; ages stay a range."""
    puma = pd.Series(np.repeat(np.arange(100, 8200, 200), 3))  # 41 codes over 8,100
    kd = observe_key(puma, "puma")
    assert kd.range is None and kd.categories[:2] == [100, 300]
    ages = pd.Series(np.r_[np.arange(15, 50), 15])
    assert observe_key(ages, "age").range == (15, 49)


def _missing_draft(tmp_path: Path, frame: pd.DataFrame, keys: list[str]):
    """The draft of ``frame`` written as CSV (read back with the release's reader)."""
    path = tmp_path / "miss.csv"
    frame.to_csv(path, index=False)
    fr, vl, varl, fmt = read_for_draft(path, keys)
    return build_draft(fr, data_path=path, config_path=tmp_path / "miss.yaml", keys=keys,
                       fmt=fmt, value_labels=vl, variable_labels=varl)


def test_draft_keeps_the_default_missing_policy_when_it_certifies(tmp_path):
    """Many records with an empty age: the default policy (a blank stays a real blank) is
    drafted, with a comment; the draft releases with every blank where it was."""
    rng = np.random.default_rng(3)
    n = 4000
    age = rng.integers(18, 80, n).astype(float)
    age[rng.random(n) < 0.05] = np.nan
    frame = pd.DataFrame({"age": age, "sex": rng.choice(["F", "M"], n),
                          "income": rng.lognormal(8, 1, n).round(2)})
    d = _missing_draft(tmp_path, frame, ["age", "sex"])
    spec = d.as_dict()["key_variables"]["age"]
    assert spec["missing"] == "category" and "missing_moves" not in spec
    text = draft_yaml(d)
    assert "missing_moves: false (default)" in text
    cfg = sdc.parse_config({**yaml.safe_load(text), "seed": 1}, tmp_path)
    assert cfg.key_variables["age"].missing_moves is False
    res = sdc.release_frame(read_input(cfg), cfg, seed=1)
    assert np.array_equal(res.frame["age"].isna().to_numpy(), np.isnan(age))


def test_draft_lets_missing_move_when_too_few_records_miss_it(tmp_path):
    """One record with an empty region: a singleton that cannot be certified on its own, so
    the draft says missing_moves: true for region, with the reason, and it releases."""
    rng = np.random.default_rng(4)
    n = 3000
    region = rng.integers(1, 6, n).astype(float)
    region[17] = np.nan
    frame = pd.DataFrame({"region": region, "sex": rng.choice(["F", "M"], n),
                          "age": rng.integers(18, 80, n)})
    d = _missing_draft(tmp_path, frame, ["region", "sex", "age"])
    spec = d.as_dict()["key_variables"]["region"]
    assert spec["missing"] == "category" and spec["missing_moves"] is True
    text = draft_yaml(d)
    assert "missing_moves: true" in text and "too few records miss it" in text
    assert any("missing_moves: true" in h for h in d.history)
    cfg = sdc.parse_config({**yaml.safe_load(text), "seed": 1}, tmp_path)
    sdc.release_frame(read_input(cfg), cfg, seed=1)


def test_design_step_drops_a_derived_column_the_recoded_keys_cannot_give(tmp_path):
    """census2000's case: the draft puts agesq (= age^2) under derived:, then the design step
    recodes age into bands; agesq is no function of the bands, so the draft moves it to
    input.drop with the reason, and the final draft releases (it was refused before)."""
    from sdc.authoring.draft import apply_design

    rng = np.random.default_rng(8)
    n = 3000
    age = rng.integers(16, 80, n)
    frame = pd.DataFrame({"age": age, "sex": rng.integers(1, 3, n),
                          "region": rng.integers(1, 30, n), "agesq": age * age})
    path = tmp_path / "sq.csv"
    frame.to_csv(path, index=False)
    keys = ["age", "sex", "region"]
    fr, vl, varl, fmt = read_for_draft(path, keys)
    out = tmp_path / "sq.yaml"
    d = build_draft(fr, data_path=path, config_path=out, keys=keys, fmt=fmt, value_labels=vl,
                    variable_labels=varl)
    assert "agesq" in d.derived
    out.write_text(draft_yaml(d), encoding="utf-8")
    assert apply_design(d, out, budget=20.0)
    assert d.keys["age"].recode is not None
    assert "agesq" not in d.derived and "agesq" in d.input["drop"]
    assert "cannot be recomputed from the released keys" in d.dependent["agesq"]
    text = draft_yaml(d)
    # its comment says how to get it back, not that it is no function of the keys (it was one)
    line = next(ln for ln in text.splitlines() if "dropped by sdc init: agesq" in ln)
    assert "keep its keys unrecoded and list it under derived:" in line
    assert "not a function of the" not in line
    cfg = sdc.parse_config({**yaml.safe_load(text), "seed": 1}, tmp_path)
    res = sdc.release_frame(read_input(cfg), cfg, seed=1)
    assert "agesq" not in res.frame and res.certificate <= cfg.risk.xi


def test_a_weight_that_gives_a_key_away_is_never_drafted_as_derived(tmp_path):
    """free1 (sdcMicro): WEIGHT takes one value per REGION, so it gives REGION away. sdc init
    keeps REGION as is and, when merged small PRBs still move records across regions, drops the
    weight; it never writes `derived: [WEIGHT]` (refused: a weight is not a derived column), and
    the draft it writes releases (before the fix, init refused its own draft)."""
    free1 = SHARED_DATA / "sdcmicro" / "free1.csv"
    if not free1.is_file():
        pytest.skip(f"{free1} absent (the shared sdcMicro data sit beside the project)")
    keys = ["REGION", "SEX", "AGE", "MARSTAT"]
    frame, vl, varl, fmt = read_for_draft(free1, keys, weight="WEIGHT")
    draft = build_draft(frame, data_path=free1, config_path=tmp_path / "free1.yaml", keys=keys,
                        fmt=fmt, weight="WEIGHT", value_labels=vl, variable_labels=varl)
    assert "WEIGHT" not in draft.derived
    kept = draft.input.get("weight") == "WEIGHT"
    assert (kept and draft.partition.get("REGION") == "as_is") or \
        (not kept and "WEIGHT" in draft.input["drop"])
    # the weighted mode follows the weight: on while it is kept, gone with it
    assert draft.risk.get("weighted", False) == kept
    assert ("weighted: true" in draft_yaml(draft)) == kept
    from sdc.config.load import parse_config
    from sdc.io.read import read_input

    cfg = yaml.safe_load(draft_yaml(draft))
    cfg["seed"] = 1
    config = parse_config(cfg, tmp_path)
    sdc.release_frame(read_input(config), config, seed=1)  # releases, no refusal
