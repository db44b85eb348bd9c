"""The number a recoded numeric class is released as (``recode: {..., value: midpoint}``,
``top_value``, ``bottom_value``; docs/CONFIG.md "Recoding", docs/DESIGN.md).

Exact tests against the formula (midpoint = (lo + hi) / 2 of the declared values a closed class
holds; open classes keep their edge unless a value is declared), the refusals (a declared value
outside its class, Stata output of fractional codes, ``value`` in a partition rule), and a
release: the public column holds exactly the class midpoints, so its mean moves by the
within-class mean deviation only (a bound computed from the data, not a tolerance).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import run_cli

import sdc
from sdc.config.load import parse_config
from sdc.config.model import ConfigError


def _raw(data: Path, recode: dict, formats: list[str] | None = None) -> dict:
    return {"name": "mid",
            "input": {"path": str(data), "format": "parquet", "id_column": "pid"},
            "key_variables": {"sex": {"categories": [1, 2]},
                              "age": {"range": [17, 90], "recode": recode}},
            "partition": {"sex": "as_is"},
            "risk": {"xi": 0.395, "small_blocks": "merge"},
            "seed": 2 ** 40 + 7,
            "output": {"dir": str(data.parent / "rel"), "formats": formats or ["parquet"]}}


def _frame(n: int = 3000, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"pid": np.arange(n, dtype=np.int64) + 1,
                         "sex": rng.integers(1, 3, n),
                         "age": np.clip(rng.gamma(4, 9, n).astype(np.int64) + 17, 17, 90)})


def test_lower_edges_are_the_default_and_unchanged(tmp_path):
    cfg = parse_config(_raw(tmp_path / "d.parquet", {"bands": [15, 20, 30, 65]}), tmp_path)
    assert cfg.key_variables["age"].domain == [17, 20, 30, 65]
    assert cfg.key_variables["age"].labels == {17: "17-19", 20: "20-29", 30: "30-64",
                                               65: "65+"}
    assert "value" not in cfg.input_key_variables["age"].recode.model_dump(exclude_none=True)


def test_midpoints_of_closed_classes_and_edges_of_open_ones(tmp_path):
    cfg = parse_config(_raw(tmp_path / "d.parquet",
                            {"bands": [15, 20, 30, 65], "value": "midpoint"}), tmp_path)
    # 17..19 -> 18 (declared values 17, 18, 19: the band's edge 15 is not a value),
    # 20..29 -> 24.5, 30..64 -> 47, the open last band 65..90 keeps its edge 65
    assert cfg.key_variables["age"].domain == [18, 24.5, 47, 65]
    assert cfg.key_variables["age"].labels == {18: "17-19", 24.5: "20-29", 47: "30-64",
                                               65: "65+"}
    top = parse_config(_raw(tmp_path / "d.parquet", {"bands": [15, 20, 30, 65],
                                                     "value": "midpoint", "top_value": 70}),
                       tmp_path)
    assert top.key_variables["age"].domain == [18, 24.5, 47, 70]
    tb = parse_config(_raw(tmp_path / "d.parquet", {"top": 80, "bottom": 20,
                                                    "top_value": 83.5, "bottom_value": 18}),
                      tmp_path)
    dom = tb.key_variables["age"].domain
    assert dom[0] == 18 and dom[-1] == 83.5 and dom[1:-1] == list(range(21, 80))
    assert tb.key_variables["age"].labels == {18: "20 or less", 83.5: "80+"}


@pytest.mark.parametrize("recode, match", [
    ({"top": 80, "top_value": 95}, r"recode.top_value: 95 is outside the class '80\+'"),
    ({"top": 80, "bottom": 20, "bottom_value": 25}, r"bottom_value: 25 is outside"),
    ({"bottom": 20, "top_value": 85}, "'top_value' needs 'top'"),
    ({"bands": [15, 40], "value": "mean"}, "value"),
])
def test_bad_declared_values_are_refused(tmp_path, recode, match):
    with pytest.raises(ConfigError, match=match):
        parse_config(_raw(tmp_path / "d.parquet", recode), tmp_path)


def test_a_partition_rule_takes_no_value(tmp_path):
    raw = _raw(tmp_path / "d.parquet", {"bands": [15, 40]})
    raw["partition"]["age"] = {"bands": [15, 40], "value": "midpoint"}
    with pytest.raises(ConfigError, match="partition.age"):
        parse_config(raw, tmp_path)


def test_stata_output_of_fractional_midpoints_is_accepted(tmp_path):
    """Issue 47: every config `sdc init` drafts (value: midpoint) releases in every format;
    the .dta holds fractional midpoints as floats (test_cli_releases_stata_midpoints...)."""
    rc = {"bands": [15, 20, 30, 65], "value": "midpoint"}
    cfg = parse_config(_raw(tmp_path / "d.parquet", rc, ["parquet", "dta"]), tmp_path)
    assert cfg.key_variables["age"].domain == [18, 24.5, 47, 65]
    # whole midpoints (odd class widths) are integers: Stata labels them
    ok = parse_config(_raw(tmp_path / "d.parquet", {"bands": [17, 20, 31, 66],
                                                    "value": "midpoint"}, ["parquet", "dta"]),
                      tmp_path)
    assert ok.key_variables["age"].domain == [18, 25, 48, 66]


def test_release_holds_the_midpoints_and_they_are_unbiased_for_uniform_classes(tmp_path):
    """Every released age is a class midpoint (PRAM moves a record to another class's
    midpoint), the column is float64; recode alone on ages uniform within each closed class,
    the midpoint's deviation from the true age has mean 0: within every closed class
    |mean deviation| < 4 standard errors (sd of the deviations / sqrt(n_c), a fixed seed; a
    false alarm has probability < 1e-4 per class), while the lower edge is off by
    (hi - lo) / 2 exactly in expectation, far beyond that."""
    rng = np.random.default_rng(3)
    n = 3000
    frame = pd.DataFrame({"pid": np.arange(n, dtype=np.int64) + 1, "sex": rng.integers(1, 3, n),
                          "age": rng.integers(17, 71, n)})
    data = tmp_path / "d.parquet"
    frame.to_parquet(data)
    rc = {"bands": [15, 20, 30, 40, 50, 65], "value": "midpoint"}
    cfg = parse_config(_raw(data, rc, ["parquet", "csv"]), tmp_path)
    out = sdc.release_frame(sdc.read_input(cfg), cfg, seed=2 ** 40 + 11).frame
    assert out["age"].dtype == np.float64
    assert set(out["age"]) <= {18.0, 24.5, 34.5, 44.5, 57.0, 65.0}
    edges = np.array([17, 20, 30, 40, 50, 65])
    mids = np.array([18, 24.5, 34.5, 44.5, 57, 65])
    age = frame["age"].to_numpy()
    cls = np.searchsorted(edges, age, side="right") - 1
    for c in range(5):                      # the closed classes
        d_mid = mids[c] - age[cls == c]
        se = d_mid.std(ddof=1) / np.sqrt(d_mid.size)
        assert abs(d_mid.mean()) < 4 * se, (c, d_mid.mean(), se)
        d_low = edges[c] - age[cls == c]
        assert abs(d_low.mean()) > 10 * se, (c, d_low.mean(), se)


def test_spss_input_format_without_decimals_does_not_round_the_midpoints(tmp_path):
    """An SPSS input stores age as F8.0; released at midpoints (24.5) the .sav holds the
    fractions with a format showing decimals (keys take the writer's format, never the
    input's: sdc.release.stat_files), labelled 24.5 = "20-29"."""
    pyreadstat = pytest.importorskip("pyreadstat")
    rng = np.random.default_rng(5)
    n = 800
    frame = pd.DataFrame({"pid": np.arange(n, dtype=float) + 1, "sex": rng.integers(1, 3, n)
                          .astype(float), "age": rng.integers(17, 91, n).astype(float)})
    src = tmp_path / "d.sav"
    pyreadstat.write_sav(frame, str(src), variable_format={"age": "F8.0", "sex": "F8.0"})
    raw = _raw(src, {"bands": [15, 20, 30, 65], "value": "midpoint"}, ["parquet", "sav"])
    raw["input"]["format"] = "sav"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(raw))
    r = run_cli("release", path)
    assert r.exit_code == 0, r.text
    out, meta = pyreadstat.read_sav(str(next((tmp_path / "rel").rglob("microdata.sav"))))
    assert meta.original_variable_types["age"] != "F8.0"
    assert set(out["age"]) <= {18.0, 24.5, 47.0, 65.0} and 24.5 in set(out["age"])
    assert meta.variable_value_labels["age"][24.5] == "20-29"
    assert meta.original_variable_types["sex"] == "F8.0"      # whole numbers keep theirs


@pytest.mark.parametrize("recode", [{"bands": [15, 20, 30, 65], "value": "midpoint"},
                                    {"bands": [15, 20, 30, 65], "top_value": 72.5}])
def test_cli_releases_stata_midpoints_as_floats_named_in_the_variable_label(tmp_path, recode):
    """Issue 47: a Stata release of a config `sdc init` drafted with value: midpoint was refused
    ("Stata attaches value labels to integers only"), and a fractional top_value was blamed on
    value: midpoint. Now the .dta holds the numbers as floats (no value labels: Stata labels
    whole numbers only), its variable label names the classes, the codebook says so."""
    import pyreadstat

    data = tmp_path / "d.parquet"
    _frame().to_parquet(data)
    raw = _raw(data, recode, ["parquet", "dta", "sav"])
    raw["key_variables"]["age"]["label"] = "Age"
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(raw))
    r = run_cli("release", path)
    assert r.exit_code == 0, r.text
    pub = tmp_path / "rel" / "public"
    dta, meta = pyreadstat.read_dta(str(pub / "microdata.dta"))
    parquet = pd.read_parquet(pub / "microdata.parquet")
    assert dta["age"].tolist() == parquet["age"].astype(float).tolist()   # the same numbers
    frac = [v for v in set(parquet["age"]) if not float(v).is_integer()]
    assert frac and all(v not in (meta.variable_value_labels.get("age") or {}) for v in frac)
    label = meta.column_names_to_labels["age"]
    assert label.startswith("Age: ") and len(label) <= 80
    assert ("24.5 = 20-29" in label) if "value" in recode else ("72.5 = 65+" in label)
    sav, smeta = pyreadstat.read_sav(str(pub / "microdata.sav"))
    assert smeta.column_names_to_labels["age"] == "Age"                   # SPSS: unchanged
    book = (pub / "codebook.md").read_text()
    assert "`microdata.dta` holds them as floating-point numbers without value labels" in book
