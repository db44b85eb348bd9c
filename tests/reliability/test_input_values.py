"""Input values and types: non-key columns come out exactly as they
went in, and ordinary column types release instead of crashing.

Every release runs through the CLI (``sdc release``, in-process) on each engine that reads
the input's format (pandas: every format; streaming: CSV and Parquet; dask: Parquet), and
every non-key column is compared as text before and after, as a multiset of records (the
public order is new and the ids are gone, so rows cannot be paired one by one; the tuple of
all non-key values of a record must survive whole).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sdc.io.values import csv_float_text

from .conftest import JobBuilder

ENGINES_CSV = ["pandas", "streaming"]
ENGINES_PARQUET = ["pandas", "streaming", "dask"]


def _engine(job: JobBuilder, engine: str) -> None:
    job.config["engine"] = {"kind": engine, "workers": 1} if engine == "dask" else {"kind": engine}


def _as_parquet(job: JobBuilder) -> None:
    job.config["input"]["path"] = "data/input.parquet"
    job.config["input"]["format"] = "parquet"


def _text(values: pa.ChunkedArray | pa.Array) -> list[str | None]:
    """A column's values as the text a CSV file holds (None = missing)."""
    t = values.type
    if pa.types.is_floating(t):
        arr = values.to_numpy(zero_copy_only=False).astype(np.float64)
        valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        text = csv_float_text(arr)
        return [s if ok else None for s, ok in zip(text, valid, strict=True)]
    if pa.types.is_boolean(t) or pa.types.is_temporal(t) or pa.types.is_nested(t):
        return [None if v is None else str(v) for v in values.to_pylist()]
    return [None if v is None else str(v) for v in values.cast(pa.string()).to_pylist()]


def _records(columns: dict[str, list]) -> list[tuple]:
    """The multiset (sorted list) of records over ``columns``."""
    rows = list(zip(*columns.values(), strict=True))
    return sorted(rows, key=lambda r: tuple("\0" if v is None else v for v in r))


def _csv_text(path: Path, columns: list[str]) -> dict[str, list]:
    """Every field of ``columns`` exactly as in the file (the empty field: None)."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    return {c: [None if pd.isna(v) else v for v in df[c]] for c in columns}


def _parquet_text(path: Path, columns: list[str]) -> dict[str, list]:
    return _table_text(pq.read_table(path, columns=columns), columns)


def _table_text(table: pa.Table, columns: list[str]) -> dict[str, list]:
    return {c: _text(table.column(c)) for c in columns}


def _stat_text(frame: pd.DataFrame, columns: list[str]) -> dict[str, list]:
    """Values read by pyreadstat as text (SPSS/Stata store a missing string as "")."""
    out = _table_text(pa.Table.from_pandas(frame[columns], preserve_index=False), columns)
    return {c: [None if v == "" else v for v in vals] for c, vals in out.items()}


def _release(cli, job: JobBuilder, engine: str) -> None:
    _engine(job, engine)
    res = cli("release", job.write(), "--force")
    assert res.exit_code == 0, res.output


def _non_key(job: JobBuilder) -> list[str]:
    inp = job.config["input"]
    skip = set(job.config["key_variables"]) | {inp["id_column"], *inp["drop"]}
    return [c for c in job.frame.columns if c not in skip]


# ---------------------------------------------------------------------------------------------
# item 6: CSV text values
# ---------------------------------------------------------------------------------------------
def _csv_text_columns(frame: pd.DataFrame) -> pd.DataFrame:
    n = len(frame)
    i = np.arange(n)
    frame["zip"] = np.char.zfill((i % 50).astype(str), 5)                  # 00001 is not 1
    frame["word"] = np.array(["NA", "None", "n/a", "null", "x", ""])[i % 6]  # words, one empty
    frame["mixed"] = np.where(i % 2 == 0, "22", "22.5")                      # 22 is not 22.0
    frame["share"] = np.where(i % 3 == 0, "0.25", "1e+20")                   # floats as written
    frame["flag"] = np.where(i % 3 == 0, "true", "False")                    # not booleans
    frame["day"] = np.char.add("2020-01-0", (i % 9 + 1).astype(str))        # text, not a date
    frame["clock"] = np.char.add("12:0", (i % 10).astype(str))              # text, not a time
    return frame


@pytest.mark.parametrize("engine", ENGINES_CSV)
def test_csv_non_key_columns_keep_their_text(cli, job: JobBuilder, engine: str) -> None:
    """Old code: zip 00001 -> 1, NA/None/n/a/null -> empty, 22 -> 22.0 (and dates crashed the
    public order hash). Now every non-key field is written back as it was read, in the CSV
    and (typed where the text is a number) in the Parquet file; a column of whole numbers
    written as integers among decimals is float64 there, its CSV text as read."""
    _csv_text_columns(job.frame)
    _release(cli, job, engine)
    cols = _non_key(job)
    before = _records(_csv_text(job.data_path, cols))
    pub = job.out_dir / "public"
    assert _records(_csv_text(pub / "microdata.csv", cols)) == before
    # numbers stay numbers (issue 44): 22 among 22.5 is float64 in the Parquet file (the
    # value 22.0) and "22" in the CSV file, as read
    text_cols = [c for c in cols if c != "mixed"]
    assert (_records(_parquet_text(pub / "microdata.parquet", text_cols))
            == _records(_csv_text(job.data_path, text_cols)))
    mixed = pq.read_table(pub / "microdata.parquet", columns=["mixed"]).column(0)
    assert sorted(mixed.to_pylist()) == sorted(
        float(x) for x in _csv_text(job.data_path, ["mixed"])["mixed"])
    types = pq.read_schema(pub / "microdata.parquet")
    assert types.field("income").type == pa.int64()          # whole numbers stay numbers
    assert types.field("share").type == pa.float64()
    assert types.field("mixed").type == pa.float64()
    for c in ("zip", "word", "flag", "day", "clock"):
        assert types.field(c).type == pa.string(), c


def test_csv_na_values_declared(cli, job: JobBuilder) -> None:
    """``input.na_values`` names the markers that mean missing in non-key CSV columns."""
    n = len(job.frame)
    job.frame["score"] = np.where(np.arange(n) % 4 == 0, "NA", (np.arange(n) % 7).astype(str))
    job.config["input"]["na_values"] = ["NA"]
    _release(cli, job, "pandas")
    got = pq.read_table(job.out_dir / "public" / "microdata.parquet").column("score")
    assert got.type == pa.int64() and got.null_count == (np.arange(n) % 4 == 0).sum()


def test_csv_engines_write_the_same_bytes(cli, job: JobBuilder, tmp_path: Path) -> None:
    """The text-read columns give byte-identical public files on pandas and streaming."""
    _csv_text_columns(job.frame)
    files = {}
    for engine in ENGINES_CSV:
        job.config["output"]["dir"] = f"releases/{engine}"
        _release(cli, job, engine)
        files[engine] = {p.name: p.read_bytes() for p in (job.out_dir / "public").iterdir()}
    assert files["pandas"] == files["streaming"]


def test_streaming_refuses_a_late_value_its_type_would_change(cli, job: JobBuilder) -> None:
    """The streaming reader types a column from the first 16 MB block; a later ``007`` in a
    column of integers would become 7: refused (exit 2) with the fix, never changed."""
    n = 120_000
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({
        "id": np.arange(n), "sex": rng.integers(1, 3, n), "age": rng.integers(0, 91, n),
        "race": rng.integers(1, 4, n), "region": rng.integers(1, 6, n),
        "code": rng.integers(100, 10**9, n).astype(str), "weight": 1,
        "pad": "x" * 150,
    })
    frame.loc[n - 1, "code"] = "007"
    job.frame = frame
    job.config["input"]["drop"] = []
    job.write()
    assert job.data_path.stat().st_size > (1 << 24)
    job.skip_data = True  # the 20 MB file is written once (only the config changes below)
    _engine(job, "streaming")
    res = cli("release", job.write(), "--force")
    assert res.exit_code == 2, res.output
    assert "'007'" in res.text and "--engine pandas" in res.text
    _release(cli, job, "pandas")  # the whole file typed at once: text
    got = pq.read_table(job.out_dir / "public" / "microdata.parquet").column("code")
    assert got.type == pa.string() and "007" in got.to_pylist()


# ---------------------------------------------------------------------------------------------
# item 9: booleans, dates, times, nested columns in Parquet
# ---------------------------------------------------------------------------------------------
def _typed_parquet_columns(job: JobBuilder, nested: bool = False) -> None:
    n = len(job.frame)
    i = np.arange(n)
    f = job.frame
    f["flag"] = pd.array(np.where(i % 7 == 0, None, i % 3 == 0), dtype="boolean")
    f["day"] = [None if k % 11 == 0 else dt.date(2020, 1, 1) + dt.timedelta(days=int(k))
                for k in i]
    f["clock"] = [None if k % 13 == 0 else dt.time(k % 24, k % 60) for k in i]
    f["stamp"] = pd.to_datetime(1_600_000_000 + i * 3600, unit="s", utc=True)
    if nested:
        f["pair"] = [None if k % 17 == 0 else {"a": int(k % 5), "b": f"v{k % 3}"} for k in i]
        f["items"] = [None if k % 19 == 0 else [int(k % 4)] * int(k % 3) for k in i]


@pytest.mark.parametrize("engine", ENGINES_PARQUET)
def test_parquet_boolean_date_time_columns_release_unchanged(cli, job: JobBuilder,
                                                             engine: str) -> None:
    """Old code: exit 1 (order._column_hash filled boolean nulls with 0; date32 -> int64 cast
    unsupported). Now released with their type and values."""
    _as_parquet(job)
    _typed_parquet_columns(job)
    _release(cli, job, engine)
    cols = _non_key(job)
    before = _records(_parquet_text(job.data_path, cols))
    pub = job.out_dir / "public"
    assert _records(_parquet_text(pub / "microdata.parquet", cols)) == before
    schema = pq.read_schema(pub / "microdata.parquet")
    src = pq.read_schema(job.data_path)
    for c in ("flag", "day", "clock", "stamp"):
        assert schema.field(c).type == src.field(c).type, c


def test_nested_parquet_columns_release_in_parquet(cli, job: JobBuilder) -> None:
    """Struct and list columns: released unchanged in Parquet on every engine (old code:
    exit 1 in the public order hash); a format that cannot hold them is refused by
    ``release`` and ``validate`` alike (exit 2, naming the column and the fix)."""
    _as_parquet(job)
    _typed_parquet_columns(job, nested=True)
    job.config["output"]["formats"] = ["parquet"]
    cols = _non_key(job)
    job.write()
    before = _records(_parquet_text(job.data_path, cols))
    files = {}
    for engine in ENGINES_PARQUET:
        job.config["output"]["dir"] = f"releases/{engine}"
        _release(cli, job, engine)
        pub = job.out_dir / "public" / "microdata.parquet"
        assert _records(_parquet_text(pub, cols)) == before, engine
        assert pq.read_schema(pub).field("pair").type == pq.read_schema(job.data_path).field(
            "pair").type
        files[engine] = pub.read_bytes()
    assert files["pandas"] == files["streaming"] == files["dask"]
    job.config["output"]["formats"] = ["parquet", "csv"]
    job.config["output"]["dir"] = "releases/csv"
    for args in (("release", "--engine", "pandas"), ("release", "--engine", "streaming"),
                 ("validate",)):
        res = cli(args[0], job.write(), *args[1:])
        assert res.exit_code == 2, (args, res.output)
        assert "'pair'" in res.text and "output.formats: [parquet]" in res.text, res.output
    assert not job.out_dir.exists()


@pytest.mark.parametrize("fmt", ["sav", "dta"])
def test_spss_stata_non_key_values_and_user_missing_kept(cli, job: JobBuilder, fmt: str) -> None:
    """SPSS/Stata input, every public format: each non-key value comes out as read; an SPSS
    user-missing code (9, declared missing, in 200 of 600 rows) stays 9 and ``microdata.sav``
    declares it missing again (old code: the 200 values became empty)."""
    import pyreadstat

    i = np.arange(len(job.frame))
    f = job.frame
    f["q"] = np.where(i % 3 == 0, 9, i % 5).astype(float)
    f["zip"] = np.char.zfill((i % 50).astype(str), 5)
    f["mixed"] = np.where(i % 2 == 0, 22.0, 22.5)
    f["word"] = np.array(["NA", "None", "x", "null"])[i % 4]
    job.config["input"].update(path=f"data/input.{fmt}", format=fmt)
    job.config["output"]["formats"] = ["parquet", "csv", "sav", "dta"]
    job.skip_data = True
    job.data_path.parent.mkdir(parents=True)
    if fmt == "sav":
        pyreadstat.write_sav(f, str(job.data_path), missing_ranges={"q": [9]})
    else:
        pyreadstat.write_dta(f, str(job.data_path))
    _release(cli, job, "pandas")
    cols = _non_key(job)
    src, _ = (pyreadstat.read_sav(str(job.data_path), user_missing=True) if fmt == "sav"
              else pyreadstat.read_dta(str(job.data_path)))
    before = _records(_stat_text(src, cols))
    pub = job.out_dir / "public"
    assert _records(_csv_text(pub / "microdata.csv", cols)) == before
    assert _records(_parquet_text(pub / "microdata.parquet", cols)) == before
    sav, meta = pyreadstat.read_sav(str(pub / "microdata.sav"), user_missing=True)
    dta, _ = pyreadstat.read_dta(str(pub / "microdata.dta"))
    for out in (sav, dta):
        assert _records(_stat_text(out, cols)) == before
    assert int((sav["q"] == 9).sum()) == 200
    if fmt == "sav":
        assert meta.missing_ranges == {"q": [{"lo": 9.0, "hi": 9.0}]}
        assert "User-missing" in (pub / "codebook.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("engine", ENGINES_CSV)
def test_infinite_value_in_a_numeric_column(cli, job: JobBuilder, engine: str) -> None:
    """One ``inf`` in a non-key numeric column: old code exit 1 ("weights must be finite",
    blaming the weights). Now released as collected; the numeric summaries leave it out like
    a missing value."""
    job.frame["income"] = job.frame["income"].astype(float) + 0.5
    job.frame.loc[5, "income"] = np.inf
    _release(cli, job, engine)
    text = _csv_text(job.out_dir / "public" / "microdata.csv", ["income"])["income"]
    assert text.count("inf") == 1
    utility = json.loads((job.out_dir / "internal" / "utility.json").read_text())
    by_sex = next(e for e in utility["numeric"] if e["variable"] == "income" and e["by"] == "sex")
    assert sum(r["before"]["n"] for r in by_sex["rows"]) == len(job.frame) - 1


def _huge_weights(job: JobBuilder) -> None:
    job.frame["weight"] = 1e308


REFUSED = {
    # case: (change, fragment of the message)
    "weights_1e308": (_huge_weights, "at most 1e+15"),
    "categories_1_and_text_1": (
        lambda j: j.config["key_variables"].update(region={"categories": [1, "1", 2, 3, 4, 5]}),
        "lists both 1 and '1'"),
    "id_column_under_drop": (lambda j: j.config["input"]["drop"].append("id"),
                             "input.drop lists the id column 'id'"),
    "range_0_to_1e10": (lambda j: j.config["key_variables"].update(age={"range": [0, 10**10]}),
                        "declares 10,000,000,001 values"),
    "range_int64_limits": (
        lambda j: j.config["key_variables"].update(age={"range": [-(2**63), 2**63 - 1]}),
        "at most 10,000,000"),
    "range_beyond_int64": (
        lambda j: j.config["key_variables"].update(age={"range": [2**63 - 90, 2**63]}),
        "beyond 64-bit integers"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_with_exit_2_by_release_and_validate(cli, job: JobBuilder, case: str) -> None:
    """Old code: exit 1 (overflow in the report sums, ArrowTypeError, KeyError 'id',
    MemoryError) and ``validate`` passed. Now ``release`` (pandas and streaming) and
    ``validate`` refuse with exit 2 and the fix; nothing is written."""
    change, fragment = REFUSED[case]
    change(job)
    if case != "weights_1e308":
        job.config["partition"].pop("age", None)
    path = job.write()
    for args in (("validate",), ("release", "--engine", "pandas"),
                 ("release", "--engine", "streaming")):
        res = cli(args[0], path, *args[1:])
        assert res.exit_code == 2, (args, res.output)
        assert fragment in res.text, (args, res.output)
    assert not job.out_dir.exists()
