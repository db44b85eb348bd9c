"""Types that do not depend on the file format: the same data written as CSV, Parquet, SPSS
(.sav) and Stata (.dta) gives the same `sdc init` draft, the same key domains and the same
public records, byte for byte (pandas engine; streaming for the formats it reads).

The frame holds what tripped this before: an integer key with missing values (a CSV writer
prints it as '18.0' and it was drafted as 72 text categories), 32-bit integer columns (what
Stata and R write; Parquet kept int32 while CSV gave int64, and the public record order hashes
the public values), and integers that SPSS stores as doubles.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyreadstat
import pytest

import sdc
from sdc.authoring.draft import build_draft, observe_key, read_for_draft
from sdc.errors import InputError
from sdc.executors.streaming import stream_release
from sdc.io import spill
from sdc.io.batches import public_bytes
from sdc.io.read import read_input
from sdc.release.public import public_schema_for
from tests.conftest import SHARED_DATA
from tests.release_helpers import public_frame

FORMATS = ("csv", "parquet", "sav", "dta")
KEYS = ["age", "sex", "region"]
SEED = 11


def _frame(n: int = 2_500) -> pd.DataFrame:
    rng = np.random.default_rng(21)
    age = rng.integers(18, 90, n).astype(float)
    age[rng.random(n) < 0.03] = np.nan          # an integer key with missing values
    return pd.DataFrame({
        "pid": (rng.permutation(n) * 7 + 3).astype(np.int32),
        "age": age,
        "sex": rng.choice(["F", "M"], n),
        "region": rng.integers(1, 6, n).astype(np.int32),
        "income": np.round(rng.gamma(2.0, 900.0, n), 2),
        "hours": rng.integers(0, 60, n).astype(np.int32),
        "town": rng.choice(["Avon", "Bree", "Cole"], n),
    })


def _write(frame: pd.DataFrame, folder: Path, fmt: str) -> Path:
    path = folder / f"survey.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
    elif fmt == "parquet":
        frame.to_parquet(path, index=False)
    elif fmt == "sav":
        pyreadstat.write_sav(frame, str(path))    # int32 -> F8.0, float -> F8.2 doubles
    else:
        pyreadstat.write_dta(frame, str(path))    # int32 -> Stata long, float -> double
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("formats")
    frame = _frame()
    return {fmt: _write(frame, folder, fmt) for fmt in FORMATS}


def _draft(path: Path, fmt: str):
    frame, vl, varl, resolved = read_for_draft(path, KEYS, id_column="pid")
    assert resolved == fmt
    return build_draft(frame, data_path=path, config_path=path.parent / f"{fmt}.yaml",
                       keys=KEYS, fmt=resolved, id_column="pid", value_labels=vl,
                       variable_labels=varl, name="survey")


def _comparable(draft) -> dict:
    d = draft.as_dict()
    inp = {k: v for k, v in d["input"].items()
           if k not in ("path", "format", "delimiter", "encoding")}
    return {**{k: v for k, v in d.items() if k not in ("input", "output")}, "input": inp,
            "check": draft.check, "released_unchanged": draft.released_unchanged}


@pytest.fixture(scope="module")
def drafts(files) -> dict:
    return {fmt: _draft(path, fmt) for fmt, path in files.items()}


def test_same_draft_from_every_format(drafts):
    ref = _comparable(drafts["parquet"])
    assert drafts["parquet"].keys["age"].range == (18, 89)     # an integer key, not '18.0'
    assert drafts["parquet"].keys["age"].missing
    assert drafts["parquet"].keys["region"].categories == [1, 2, 3, 4, 5]
    for fmt in FORMATS:
        assert _comparable(drafts[fmt]) == ref, fmt


def _config(draft, path: Path, fmt: str, out: Path) -> sdc.ReleaseConfig:
    data = draft.as_dict()
    data["input"] = {**data["input"], "path": str(path), "format": fmt}
    data["seed"] = SEED
    data["output"] = {"dir": str(out), "formats": ["parquet", "csv"]}
    return sdc.parse_config(data, path.parent)


def _pandas_public(cfg: sdc.ReleaseConfig) -> dict[str, bytes]:
    frame = read_input(cfg)
    result = sdc.release_frame(frame, cfg, SEED)
    pub = public_frame(result)
    return public_bytes(pub, public_schema_for(cfg, result.frame), ["parquet", "csv"])


def test_same_public_records_from_every_format(files, drafts, tmp_path, monkeypatch):
    draft = drafts["csv"]
    got = {fmt: _pandas_public(_config(draft, files[fmt], fmt, tmp_path / fmt))
           for fmt in FORMATS}
    for fmt in FORMATS:
        for name in ("microdata.parquet", "microdata.csv"):
            assert got[fmt][name] == got["csv"][name], (fmt, name)
    pub = pd.read_csv(pd.io.common.BytesIO(got["sav"]["microdata.csv"]))
    assert pub["age"].dropna().map(float.is_integer).all()
    assert "18.0" not in got["csv"]["microdata.csv"].decode().split("\n")[1].split(",")
    # the formats the streaming engine reads give the same bytes
    monkeypatch.setattr(spill, "BUCKET_ROWS", 300)
    for fmt in ("csv", "parquet"):
        out = tmp_path / f"stream-{fmt}"
        stream_release(_config(draft, files[fmt], fmt, out), SEED, out, batch_rows=700)
        for name in ("microdata.parquet", "microdata.csv"):
            assert (out / name).read_bytes() == got["csv"][name], (fmt, name)


def test_free1_ages_are_integers():
    """free1 (sdcMicro) writes every number as '36.0': its keys are integers all the same."""
    shared = SHARED_DATA / "sdcmicro" / "free1.csv"
    if not shared.exists():
        pytest.skip(f"shared data not found at {shared}")
    frame, *_ = read_for_draft(shared, ["AGE", "SEX"])
    assert frame["AGE"].astype(str).str.endswith(".0").all()     # the file's own text
    kd = observe_key(frame["AGE"], "AGE")
    assert kd.range is not None and all(isinstance(v, int) for v in kd.range)
    assert observe_key(frame["SEX"], "SEX").categories == [1, 2]


def test_observe_key_text_numbers():
    s = pd.Series(["18.0", "19.0", None, "20.", "7"], dtype=object)
    assert observe_key(s, "age").categories == [7, 18, 19, 20]
    assert observe_key(pd.Series(["01", "02"]), "code").categories == ["01", "02"]
    with pytest.raises(InputError, match=r"non-whole numbers \(2 of 3 rows, e\.g\. 2\.5; 3 "
                                         r"distinct values.*band it"):
        observe_key(pd.Series(["2.5", "3", "4.75"]), "bmi")
    with pytest.raises(InputError, match="non-whole numbers"):
        observe_key(pd.Series([2.5, 3.0, np.nan]), "bmi")


def test_init_refuses_an_id_that_is_not_unique(tmp_path):
    frame = _frame(300)
    frame.loc[[10, 20, 30], "pid"] = frame.loc[[1, 2, 2], "pid"].to_numpy()
    path = _write(frame, tmp_path, "csv")
    with pytest.raises(InputError) as e:
        read_for_draft(path, KEYS, id_column="pid")
    msg = str(e.value)
    assert "--id 'pid' is not a unique record id" in msg
    assert "5 rows share 2 id value(s)" in msg
    assert f"{int(frame.loc[1, 'pid'])} at rows [2, 11]" in msg
    assert "leave out --id" in msg
