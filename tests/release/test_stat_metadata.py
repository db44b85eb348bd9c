"""SPSS/Stata public files keep the input's metadata: variable labels,
value labels of every variable (non-keys included), user-missing definitions, measurement
levels, formats and integer types; recoded keys say what a released value stands for.

Inputs are real SPSS/Stata files written by pyreadstat, released in memory (the same
functions the release flow calls: read_input, release_frame, public_frame, assemble) and read
back with pyreadstat.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest

import sdc
from sdc.config import parse_config
from sdc.io.read import read_input
from sdc.io.stat_meta import read_stat_metadata
from sdc.release.stat_files import input_metadata, stat_codebook_lines, stat_public_files
from tests.release_helpers import public_frame

READ = {"sav": pyreadstat.read_sav, "dta": pyreadstat.read_dta}
N = 900


def survey(n: int = N, seed: int = 5) -> pd.DataFrame:
    """An election-survey-like file: 6 labelled variables (2 keys, 4 non-keys)."""
    rng = np.random.default_rng(seed)
    vote = rng.integers(1, 4, n).astype(float)
    vote[rng.random(n) < 0.05] = 9                         # 9 = no answer (user-missing)
    hours = rng.integers(0, 60, n).astype(float)
    hours[rng.random(n) < 0.03] = np.nan
    return pd.DataFrame({
        "pid": np.arange(1, n + 1, dtype=float),
        "sex": rng.integers(1, 3, n).astype(float),
        "educ": rng.integers(1, 6, n).astype(float),
        "age": rng.integers(18, 90, n).astype(float),
        "vote": vote,
        "party": rng.integers(1, 8, n).astype(float),
        "trust": rng.integers(0, 11, n).astype(float),
        "hours": hours,
        "income": rng.lognormal(9, 1, n).round(2),
        "town": rng.choice(["Ashby", "Brook", "Carlton"], n),
    })


LABELS = {
    "sex": {1: "Male", 2: "Female"},
    "educ": {1: "None", 2: "Primary", 3: "Secondary", 4: "Bachelor", 5: "Master or more"},
    "vote": {1: "Yes", 2: "No", 3: "Undecided", 9: "No answer"},
    "party": {i: f"Party <b>{i}</b>" if i == 7 else f"Party {i}" for i in range(1, 8)},
    "trust": {0: "No trust at all", 10: "Complete trust"},
    "town": {"Ashby": "Ashby (north)"},
}
VAR_LABELS = {"pid": "Person", "sex": "Sex of respondent", "educ": "Highest education",
              "age": "Age in years", "vote": "Voted in the last election",
              "party": "Party identification", "trust": "Trust in parliament",
              "hours": "Hours worked per week", "income": "Yearly income",
              "town": "Town of residence"}
MEASURE = {"sex": "nominal", "educ": "ordinal", "age": "scale", "vote": "nominal",
           "party": "nominal", "trust": "ordinal", "hours": "scale", "income": "scale",
           "town": "nominal"}


def write_input(path: Path, fmt: str, frame: pd.DataFrame) -> None:
    if fmt == "sav":
        pyreadstat.write_sav(
            frame, str(path), column_labels=VAR_LABELS, variable_value_labels=LABELS,
            missing_ranges={"vote": [9]}, variable_measure=MEASURE,
            variable_format={"pid": "F6.0", "sex": "F1.0", "educ": "F1.0", "age": "F3.0",
                             "vote": "F1.0", "party": "F2.0", "trust": "F2.0",
                             "hours": "F3.0", "income": "F10.2"},
            variable_display_width={"income": 12})
    else:
        ints = frame.copy()
        for c in ("pid", "sex", "educ", "age", "vote", "party", "trust"):
            ints[c] = ints[c].astype(np.int32)
        pyreadstat.write_dta(ints, str(path), column_labels=VAR_LABELS,
                             variable_value_labels={k: v for k, v in LABELS.items()
                                                    if k != "town"})


def config(path: Path, fmt: str, out_formats=("parquet", "sav", "dta"), recode: bool = True):
    keys = {"sex": {"categories": [1, 2]},
            "educ": {"categories": [1, 2, 3, 4, 5]},
            "age": {"range": [18, 89]}}
    if recode:
        keys["educ"]["recode"] = {"groups": {"Basic": [1, 2]}}
        keys["age"]["recode"] = {"bands": [18, 30, 45, 60, 75]}
        keys["age"]["label"] = "Age group"            # the config's label wins
    return parse_config({
        "name": "survey", "input": {"path": str(path), "format": fmt, "id_column": "pid"},
        "key_variables": keys, "risk": {"xi": 0.395, "small_blocks": "merge"}, "seed": 3,
        "output": {"dir": str(path.parent / "out"), "formats": list(out_formats)},
    })


def release(tmp_path: Path, fmt: str, **kw):
    path = tmp_path / f"survey.{fmt}"
    write_input(path, fmt, survey())
    cfg = config(path, fmt, **kw)
    frame = read_input(cfg)
    result = sdc.release_frame(frame, cfg, 3)
    pub = public_frame(result)
    meta = input_metadata(cfg)
    files, layout = stat_public_files(pub, cfg, meta)
    codebook = "\n".join(stat_codebook_lines(cfg, layout, meta, columns=list(pub.columns)))
    back = {}
    for out, data in files.items():
        p = tmp_path / out
        p.write_bytes(data)
        back[out.rsplit(".", 1)[1]] = READ[out.rsplit(".", 1)[1]](str(p), user_missing=True)
    return cfg, pub, files, back, codebook


def _labels(meta, col):
    return {int(k) if float(k).is_integer() else k: v
            for k, v in meta.variable_value_labels.get(col, {}).items()}


@pytest.mark.parametrize("fmt_in", ["sav", "dta"])
def test_every_labelled_variable_keeps_its_labels(tmp_path, fmt_in):
    cfg, pub, files, back, codebook = release(tmp_path, fmt_in)
    for fmt_out, (df, meta) in back.items():
        # non-key variables: value labels exactly as in the input (dta: integers only)
        assert _labels(meta, "vote") == LABELS["vote"]
        assert _labels(meta, "party") == LABELS["party"]   # text, markup included, as given
        assert _labels(meta, "trust") == LABELS["trust"]
        town = meta.variable_value_labels.get("town", {})
        assert town == ({"Ashby": "Ashby (north)"} if fmt_in == fmt_out == "sav" else {})
        # keys: released values keep theirs; recoded values say what they stand for
        assert _labels(meta, "sex") == LABELS["sex"]
        educ = _labels(meta, "educ")     # the group is its smallest member, the rest themselves
        assert educ == {1: "Basic = None, Primary", 3: "Secondary", 4: "Bachelor",
                        5: "Master or more"}
        age = _labels(meta, "age")       # a numeric key in bands keeps its numbers
        assert age == {18: "18-29", 30: "30-44", 45: "45-59", 60: "60-74", 75: "75+"}
        assert set(df["age"].astype(int)) <= set(age)
        # variable labels: the input's, the config's where it gives one
        want = {**VAR_LABELS, "age": "Age group"}
        for c in ("sex", "educ", "age", "vote", "party", "trust", "hours", "income", "town"):
            assert meta.column_names_to_labels[c] == want[c], c
        assert "pid" not in df.columns
        # integers stay integers (Stata: long; SPSS: no decimals)
        if fmt_out == "dta":
            for c in ("sex", "vote", "party", "trust", "record_id"):
                assert meta.readstat_variable_types[c] == "int32", c
            if fmt_in == "sav":       # F3.0 in the SPSS input, 3% missing
                assert meta.readstat_variable_types["hours"] == "int32"
            assert meta.readstat_variable_types["income"] == "double"
        else:
            for c in ("sex", "vote", "party", "trust", "record_id"):
                assert meta.original_variable_types[c].endswith(".0") or \
                    meta.original_variable_types[c] in ("F1", "F2", "F3", "F6"), c
    # the codebook lists what the files carry, markup escaped
    assert "Party &lt;b&gt;7&lt;/b&gt;" in codebook and "<b>" not in codebook
    assert "Voted in the last election (from the input file)" in codebook
    assert "Basic = None, Primary" in codebook


def test_spss_to_spss_keeps_missing_measure_formats(tmp_path):
    cfg, pub, files, back, codebook = release(tmp_path, "sav")
    df, meta = back["sav"]
    assert meta.missing_ranges == {"vote": [{"lo": 9.0, "hi": 9.0}]}
    assert int((df["vote"] == 9).sum()) == int((survey()["vote"] == 9).sum())  # values kept
    for c in ("sex", "vote", "party", "trust", "hours", "income", "town"):
        assert meta.variable_measure[c] == MEASURE[c], c
    assert meta.variable_measure["educ"] == "nominal"      # groups: nominal classes
    assert meta.variable_measure["age"] == "ordinal"       # bands: ordered classes
    assert meta.original_variable_types["income"] == "F10.2"
    assert meta.original_variable_types["party"] == "F2.0"
    assert meta.variable_display_width["income"] == 12
    # the non-key values are exactly the input's, record for record (as a multiset)
    src, _ = pyreadstat.read_sav(str(tmp_path / "survey.sav"), user_missing=True)
    for c in ("vote", "party", "trust", "hours", "income"):
        a = np.sort(src[c].to_numpy(dtype=float))
        b = np.sort(df[c].to_numpy(dtype=float))
        assert np.array_equal(a, b, equal_nan=True), c


def test_unrecoded_keys_take_the_file_labels_and_the_config_wins(tmp_path):
    path = tmp_path / "survey.sav"
    write_input(path, "sav", survey())
    cfg = config(path, "sav", recode=False)
    cfg.key_variables["educ"].labels = {5: "Postgraduate"}
    frame = read_input(cfg)
    result = sdc.release_frame(frame, cfg, 3)
    files, _ = stat_public_files(public_frame(result), cfg)
    (tmp_path / "m.sav").write_bytes(files["microdata.sav"])
    _, meta = pyreadstat.read_sav(str(tmp_path / "m.sav"))
    assert _labels(meta, "educ") == {**LABELS["educ"], 5: "Postgraduate"}
    assert meta.variable_measure["educ"] == "ordinal"      # as the input says


def test_same_release_same_bytes(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert release(tmp_path / "a", "sav")[2] == release(tmp_path / "b", "sav")[2]


def test_long_labels_from_the_file_are_cut_not_refused(tmp_path):
    frame = survey(200)
    path = tmp_path / "long.dta"
    ints = frame.copy()
    ints["vote"] = ints["vote"].astype(np.int32)
    long = "a" * 200
    pyreadstat.write_dta(ints, str(path), column_labels={"income": "b" * 79},
                         variable_value_labels={"vote": {1: long}})
    cfg = config(path, "dta", recode=False)
    files, _ = stat_public_files(public_frame(sdc.release_frame(read_input(cfg), cfg, 3)),
                                 cfg)
    (tmp_path / "m.sav").write_bytes(files["microdata.sav"])
    _, meta = pyreadstat.read_sav(str(tmp_path / "m.sav"))
    got = meta.variable_value_labels["vote"][1.0]
    assert got.endswith("…") and len(got.encode()) <= 120 and got[:-1] == long[:len(got) - 1]


def test_metadata_reads_no_records(tmp_path):
    path = tmp_path / "s.sav"
    write_input(path, "sav", survey(50))
    m = read_stat_metadata(path, "sav")
    assert m.fmt == "sav" and m.value_labels["vote"][9] == "No answer"
    assert m.missing_ranges == {"vote": [{"lo": 9.0, "hi": 9.0}]}
    assert "hours" in m.integer and "income" not in m.integer
    assert read_stat_metadata(path, "csv").fmt is None
