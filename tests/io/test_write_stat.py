"""SPSS/Stata public files (sdc.io.write_stat): names, codes, labels, limits, stable bytes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyreadstat
import pytest

from sdc.errors import InputError
from sdc.io.write_stat import stat_bytes, stat_layout, stat_name

READ = {"sav": pyreadstat.read_sav, "dta": pyreadstat.read_dta}


def _frame() -> pd.DataFrame:
    return pd.DataFrame({
        "record_id": np.arange(1, 6, dtype=np.int64),
        "sex": np.array([1, 2, 2, 1, 2], dtype=np.int64),
        "marital-status": ["Divorced", "Married", None, "Divorced", "Never"],
        "income": [1.5, 2.0, np.nan, 3.0, 4.25],
        "note": pd.Series(["a", None, "c", "é", "e"], dtype="str"),
        "if": [True, False, True, True, False],
    })


def _layout(fmt):
    return stat_layout(
        _frame(), fmt,
        categories={"sex": [1, 2], "marital-status": ["Married", "Divorced", "Never"]},
        value_labels={"sex": {1: "Male", 2: "Female"},
                      "marital-status": {"Married": "Married (civil)"}},
        variable_labels={"sex": "Sex of the person", "marital-status": "Marital status",
                         "income": "Yearly income"})


def test_names_valid_in_both_formats_and_unique():
    taken: set[str] = set()
    got = [stat_name(n, taken) for n in ("age", "marital-status", "1st", "if", "AGE",
                                         "x" * 40, "with", "é")]
    assert got == ["age", "marital_status", "v1st", "if_", "AGE_2", "x" * 32, "with_", "v_"]


@pytest.mark.parametrize("fmt", ["sav", "dta"])
def test_round_trip_values_and_labels(tmp_path, fmt):
    lay = _layout(fmt)
    path = tmp_path / f"m.{fmt}"
    path.write_bytes(stat_bytes(lay, fmt, file_label="demo"))
    back, meta = READ[fmt](str(path))
    assert list(back.columns) == ["record_id", "sex", "marital_status", "income", "note", "if_"]
    assert back["record_id"].tolist() == [1, 2, 3, 4, 5]            # same records, same order
    assert back["sex"].tolist() == [1, 2, 2, 1, 2]
    codes = back["marital_status"].tolist()
    assert codes[:2] == [2, 1] and np.isnan(codes[2]) and codes[3:] == [2, 3]
    assert {int(k): v for k, v in meta.variable_value_labels["marital_status"].items()} == \
        {1: "Married (civil)", 2: "Divorced", 3: "Never"}
    assert {int(k): v for k, v in meta.variable_value_labels["sex"].items()} == \
        {1: "Male", 2: "Female"}
    assert meta.column_names_to_labels["sex"] == "Sex of the person"
    assert meta.column_names_to_labels["income"] == "Yearly income"
    assert back["note"].tolist() == ["a", "", "c", "é", "e"]         # missing text -> ""
    assert back["if_"].tolist() == [1, 0, 1, 1, 0]
    assert lay.codes["marital-status"] == {"Married": 1, "Divorced": 2, "Never": 3}
    assert lay.renamed == {"marital-status": "marital_status", "if": "if_"}


@pytest.mark.parametrize("fmt", ["sav", "dta"])
def test_bytes_do_not_depend_on_the_clock(fmt, monkeypatch):
    lay = _layout(fmt)
    a = stat_bytes(lay, fmt)
    import time

    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 86_400 * 400)  # no effect on readstat...
    b = stat_bytes(lay, fmt)
    assert a == b
    stamp = b"01 Jan 7000:00:00" if fmt == "sav" else b"01 Jan 1970 00:00"
    assert stamp in a  # ...because the header time stamp is replaced by a fixed one


def test_label_limits_are_clear_errors():
    long = "x" * 81
    with pytest.raises(InputError, match=r"variable label of 'sex' is 81 characters.*Stata allows 80"):
        stat_layout(_frame(), "dta", variable_labels={"sex": long})
    stat_layout(_frame(), "sav", variable_labels={"sex": long})  # SPSS: 256 bytes
    with pytest.raises(InputError, match=r"label of sex=1 is 121 bytes.*SPSS allows 120"):
        stat_layout(_frame(), "sav", value_labels={"sex": {1: "y" * 121}})


def test_undeclared_text_value_and_huge_integers():
    with pytest.raises(InputError, match=r"'marital-status': 1 rows hold values \['Never'\]"):
        stat_layout(_frame(), "dta", categories={"marital-status": ["Married", "Divorced"]})
    f = pd.DataFrame({"big": np.array([1, 2**60], dtype=np.int64)})
    with pytest.raises(InputError, match="beyond 2\\^53"):
        stat_layout(f, "sav")


def test_stat_formats_need_parquet_or_csv():
    import sdc

    base = {"name": "x", "input": {"path": "a.csv"}, "key_variables": {"a": {"categories": [1]}},
            "risk": {"xi": 0.4}}
    with pytest.raises(sdc.ConfigError, match=r"needs parquet or csv as well.*sdc audit"):
        sdc.parse_config({**base, "output": {"dir": "r", "formats": ["sav", "dta"]}})
    cfg = sdc.parse_config({**base, "output": {"dir": "r", "formats": ["parquet", "sav", "dta"]}})
    assert cfg.output.formats == ["parquet", "sav", "dta"]


def test_key_label_and_input_labels_in_the_config():
    import sdc

    base = {"name": "x", "input": {"path": "a.csv", "labels": {"income": "Yearly income"}},
            "key_variables": {"a": {"categories": [1], "label": "A variable"}},
            "risk": {"xi": 0.4}}
    cfg = sdc.parse_config(base)
    assert cfg.key_variables["a"].label == "A variable"
    assert cfg.input.labels == {"income": "Yearly income"}
    bad = {**base, "input": {"path": "a.csv", "labels": {"a": "x"}}}
    with pytest.raises(sdc.ConfigError, match=r"input.labels: \['a'\] are key variables.*key_variables.a.label"):
        sdc.parse_config(bad)


@pytest.mark.parametrize("fmt", ["sav", "dta"])
def test_integers_stay_integers(tmp_path, fmt):
    """Integer columns (and float columns that hold integers, with missing values) are written
    as 32-bit integers when they fit; larger integers and fractions stay doubles."""
    f = pd.DataFrame({"small": np.array([1, 2, 3], dtype=np.int64),
                      "big": np.array([1, 2, 2**40], dtype=np.int64),
                      "gappy": [1.0, np.nan, 3.0], "frac": [1.0, 2.5, np.nan]})
    lay = stat_layout(f, fmt, integer_columns=["gappy", "frac"])
    path = tmp_path / f"m.{fmt}"
    path.write_bytes(stat_bytes(lay, fmt))
    back, meta = READ[fmt](str(path))
    if fmt == "dta":
        assert meta.readstat_variable_types == {"small": "int32", "big": "double",
                                                "gappy": "int32", "frac": "double"}
    else:
        assert meta.original_variable_types["small"] == "F8.0"
        assert meta.original_variable_types["gappy"] == "F8.0"
        assert meta.original_variable_types["frac"] == "F8.2"
    assert back["big"].tolist() == [1, 2, 2**40]
    assert back["gappy"].isna().tolist() == [False, True, False]


def test_numeric_classes_keep_their_numbers():
    """A numeric key recoded into text classes keeps its numbers in SPSS/Stata: top/bottom
    coding and bands; a category of another form means codes 1..K."""
    f = pd.DataFrame({"age": ["<=21", "22", "77+", "22"], "grp": ["18-29", "30+", "30+", "18-29"],
                      "mix": ["Other", "3", "3", "4"]})
    lay = stat_layout(f, "dta", categories={"age": ["<=21", "22", "77+"],
                                            "grp": ["18-29", "30+"], "mix": ["Other", "3", "4"]})
    assert lay.frame["age"].tolist() == [21, 22, 77, 22]
    assert lay.value_labels["age"] == {21: "<=21", 77: "77+"}      # 22 is itself
    assert lay.frame["grp"].tolist() == [18, 30, 30, 18]
    assert lay.value_labels["grp"] == {18: "18-29", 30: "30+"}
    assert lay.codes["mix"] == {"Other": 1, "3": 2, "4": 3}       # not all numeric: 1..K
    hinted = stat_layout(f, "dta", categories={"mix": ["Other", "3", "4"]},
                         key_codes={"mix": {"Other": 1}})
    assert hinted.codes["mix"] == {"Other": 1, "3": 3, "4": 4}    # a group: its smallest member
