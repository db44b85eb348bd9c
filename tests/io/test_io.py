"""sdc.io: reading every input format, every unusable-file error, deterministic bytes."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sdc
import sdc.io.write as write_mod
from sdc.io.read import read_input
from sdc.io.write import (
    HashingFile,
    parquet_bytes,
    sha256_bytes,
    sha256_file,
    start_writeback,
    written_sha256,
)

REPO = Path(__file__).resolve().parents[2]


def make_config(tmp_path: Path, file: str, **input_kw) -> sdc.ReleaseConfig:
    data = {
        "name": "t",
        "input": {"path": file, **input_kw},
        "key_variables": {
            "sex": {"categories": [1, 2]},
            "age": {"range": [0, 99]},
            "region": {"categories": ["01", "02", "10"]},
        },
        "risk": {"xi": 0.395},
        "seed": 1,
    }
    return sdc.parse_config(data, tmp_path)


GOOD = "id,sex,age,region,name\n1,1,34,01,Ann\n2,2,5,10,Bob\n3,1,77,02,Cy\n"


def test_csv_types_and_string_categories(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text(GOOD)
    df = read_input(make_config(tmp_path, "d.csv"))
    assert list(df.columns) == ["id", "sex", "age", "region", "name"]
    assert df["sex"].dtype == np.int64 and df["age"].dtype == np.int64
    # declared string categories keep their leading zeros
    assert df["region"].tolist() == ["01", "10", "02"]
    assert pd.api.types.is_string_dtype(df["name"].dtype)
    assert isinstance(df.index, pd.RangeIndex)


def test_bom_is_stripped(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    df = read_input(make_config(tmp_path, "d.csv"))
    assert df.columns[0] == "id"


def test_float_keys_with_missing_stay_float(tmp_path: Path) -> None:
    # float64 + NaN (not nullable Int64: the engine's integer fast path needs that)
    (tmp_path / "d.csv").write_text("sex,age,region\n1,34,01\n,5,10\n2,,02\n")
    df = read_input(make_config(tmp_path, "d.csv"))
    assert df["sex"].dtype == np.float64 and df["age"].dtype == np.float64
    assert df["sex"].isna().tolist() == [False, True, False]


def test_fractional_age_left_for_the_schema(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("sex,age,region\n1,34.5,01\n2,5,10\n")
    df = read_input(make_config(tmp_path, "d.csv"))
    assert df["age"].dtype == np.float64 and df["age"].iloc[0] == 34.5


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(sdc.InputError, match=r"does not exist.*input\.path"):
        read_input(make_config(tmp_path, "nope.csv"))


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_bytes(b"")
    with pytest.raises(sdc.InputError, match=r"is empty \(0 bytes\)"):
        read_input(make_config(tmp_path, "d.csv"))


def test_header_only(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("id,sex,age,region\n")
    with pytest.raises(sdc.InputError, match=r"header \(4 columns\) but no records"):
        read_input(make_config(tmp_path, "d.csv"))


def test_wrong_delimiter(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text(GOOD.replace(",", ";"))
    with pytest.raises(sdc.InputError) as e:
        read_input(make_config(tmp_path, "d.csv"))
    msg = str(e.value)
    assert "looks ;-separated" in msg and "input.delimiter: ';'" in msg and "'sex'" in msg


def test_tab_delimiter_named(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text(GOOD.replace(",", "\t"))
    with pytest.raises(sdc.InputError, match="looks tab-separated"):
        read_input(make_config(tmp_path, "d.csv"))


def test_non_utf8_bytes_offset_and_line(tmp_path: Path) -> None:
    raw = GOOD.encode() + "4,1,50,01,Zo\xe9\n".encode("latin-1")
    (tmp_path / "d.csv").write_bytes(raw)
    with pytest.raises(sdc.InputError) as e:
        read_input(make_config(tmp_path, "d.csv"))
    msg = str(e.value)
    bad = raw.index(b"\xe9")
    assert f"byte offset {bad}" in msg and "(line 5)" in msg
    assert "input.encoding" in msg
    # and the declared encoding fixes it
    df = read_input(make_config(tmp_path, "d.csv", encoding="latin-1"))
    assert df["name"].iloc[-1] == "Zo\u00e9"


def test_non_utf8_offset_after_bom_and_chunk_boundary(tmp_path: Path) -> None:
    # a bad byte beyond the first 1 MiB read chunk, in a file with a BOM
    body = GOOD + "".join(f"{i},1,30,01,N{i}\n" for i in range(4, 80_000))
    raw = b"\xef\xbb\xbf" + body.encode() + b"9,1,30,01,\xff\n"
    (tmp_path / "d.csv").write_bytes(raw)
    with pytest.raises(sdc.InputError) as e:
        read_input(make_config(tmp_path, "d.csv"))
    bad, lines = raw.index(b"\xff"), raw.count(b"\n")
    assert bad > 1 << 20
    assert f"byte offset {bad}" in str(e.value)
    assert f"(line {lines})" in str(e.value)


def test_duplicated_column_names(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("id,sex,age,region,age\n1,1,3,01,4\n")
    with pytest.raises(sdc.InputError) as e:
        read_input(make_config(tmp_path, "d.csv"))
    assert "duplicated column names" in str(e.value) and "'age' at columns [3, 5]" in str(e.value)


def test_ragged_line(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("sex,age,region\n1,3,01\n2,4,02,9,9\n")
    with pytest.raises(sdc.InputError, match=r"line 3.*as many fields as the header"):
        read_input(make_config(tmp_path, "d.csv"))


def test_unknown_encoding(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text(GOOD)
    with pytest.raises(sdc.InputError, match="not an encoding"):
        read_input(make_config(tmp_path, "d.csv", encoding="klingon-8"))


def test_parquet_roundtrip_and_errors(tmp_path: Path) -> None:
    df = pd.DataFrame({"sex": [1, 2], "age": [3, 4], "region": ["01", "02"]})
    (tmp_path / "d.parquet").write_bytes(parquet_bytes(df))
    got = read_input(make_config(tmp_path, "d.parquet"))
    pd.testing.assert_frame_equal(got, df, check_dtype=False)
    assert got["sex"].dtype == np.int64
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet at all")
    with pytest.raises(sdc.InputError, match="not a readable Parquet file"):
        read_input(make_config(tmp_path, "bad.parquet"))
    (tmp_path / "e.parquet").write_bytes(parquet_bytes(df.iloc[:0]))
    with pytest.raises(sdc.InputError, match="no records"):
        read_input(make_config(tmp_path, "e.parquet"))
    dup = pa.table([pa.array([1]), pa.array([2])], names=["age", "age"])
    pq.write_table(dup, tmp_path / "dup.parquet")
    with pytest.raises(sdc.InputError, match="duplicated column names"):
        read_input(make_config(tmp_path, "dup.parquet"))


@pytest.mark.parametrize("fmt", ["sav", "dta"])
def test_spss_and_stata(tmp_path: Path, fmt: str) -> None:
    import pyreadstat

    df = pd.DataFrame({"sex": [1.0, 2.0, np.nan], "age": [30.0, 4.0, 5.0],
                       "region": ["01", "", "10"], "name": ["a", "b", "c"]})
    path = tmp_path / f"d.{fmt}"
    (pyreadstat.write_sav if fmt == "sav" else pyreadstat.write_dta)(df, str(path))
    got = read_input(make_config(tmp_path, path.name))
    assert got["sex"].dtype == np.float64 and got["age"].dtype == np.int64
    assert got["region"].isna().tolist() == [False, True, False]  # "" is a missing string
    assert pd.api.types.is_string_dtype(got["name"].dtype)
    (tmp_path / f"bad.{fmt}").write_bytes(b"garbage" * 10)
    with pytest.raises(sdc.InputError, match="not a readable"):
        read_input(make_config(tmp_path, f"bad.{fmt}"))


def test_hashes(tmp_path: Path) -> None:
    data = b"abc" * 1_000_000
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest() == sha256_bytes(data)


def test_digest_taken_while_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file written through HashingFile has its digest without a second read (Parquet
    through pyarrow's writer, as the public and records files are); a later change of the
    file (its ctime moves) makes written_sha256 read the bytes again."""
    path = tmp_path / "t.parquet"
    table = pa.table({"a": np.arange(300_000), "b": np.random.default_rng(1).random(300_000)})
    with HashingFile(open(path, "wb"), path) as f:  # noqa: SIM115
        pq.write_table(table, f, row_group_size=50_000)
    want = hashlib.sha256(path.read_bytes()).hexdigest()
    with monkeypatch.context() as m:  # no read: the digest taken while writing
        m.setattr(write_mod, "sha256_file", lambda p: pytest.fail("read again"))
        assert written_sha256(path) == want
    with open(path, "ab") as f:  # changed after it was closed: read and hashed again
        f.write(b"x")
    assert written_sha256(path) == sha256_file(path) == hashlib.sha256(
        path.read_bytes()).hexdigest() != want
    other = tmp_path / "never-through-hashing"  # a file it did not write: read
    other.write_bytes(b"abc")
    assert written_sha256(other) == sha256_bytes(b"abc")


def test_hashing_file_writes_on_its_thread_and_reports_a_failed_write(tmp_path: Path) -> None:
    """The bytes reach the file in order through a raw file that takes part of each buffer
    (short writes); a write that fails on the thread (a full disk) is raised to the writer,
    by a later write or by close, and no digest is recorded for the file."""
    import errno

    class Short(io.FileIO):  # takes at most 7 bytes a call
        def write(self, b) -> int:
            return super().write(bytes(b[:7]))

    path = tmp_path / "short"
    data = [bytes([i]) * (3 + 5 * i) for i in range(40)]
    f = HashingFile(Short(path, "wb"), path)
    for d in data:
        assert f.write(d) == len(d)
    f.write(bytearray(b"tail"))  # a buffer that is not bytes: copied
    f.close()
    want = b"".join(data) + b"tail"
    assert path.read_bytes() == want
    assert written_sha256(path) == sha256_bytes(want)

    class Full(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, b) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    path = tmp_path / "full"
    f = HashingFile(Full(), path)
    with pytest.raises(OSError, match="No space left"):
        for _ in range(1000):  # the thread's failure reaches a later write, or close
            f.write(b"x" * 1000)
        f.close()
    f.close()  # raised once: closing after it does not raise again
    f = HashingFile(Full(), path)
    f.write(b"x")
    with pytest.raises(OSError, match="No space left"):
        f.close()  # the failure of the last write: raised by close
    path.write_bytes(b"other")
    assert written_sha256(path) == sha256_bytes(b"other")


def test_start_writeback_syncs_the_large_files_only(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow's early writeback: an fsync of each large file on a thread; small, missing
    or None paths are skipped without an error (the publish step's fsync is the guarantee)."""
    import threading

    synced = []
    real = write_mod.os.fsync
    monkeypatch.setattr(write_mod.os, "fsync",
                        lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    big, small = tmp_path / "big", tmp_path / "small"
    big.write_bytes(b"x" * 3000)
    small.write_bytes(b"x")
    start_writeback([big, None, small, tmp_path / "missing"], min_bytes=2000)
    for t in threading.enumerate():
        if t.name == "sdc-writeback":
            t.join(10)
    # os.fsync is the process's: keep only this test's files (another thread may sync)
    assert [f for f in synced if f.startswith(str(tmp_path))] == [str(big)]


def _frame() -> pd.DataFrame:
    return pd.DataFrame({
        "record_id": np.arange(1, 6, dtype=np.int64),
        "sex": [1, 2, 1, 2, 1],
        "w": [1.5, 2.25, 0.1, 3.0, 1e-7],
        "label": pd.array(["a", "é", None, "ü", "x"], dtype="str"),
    })


def test_parquet_bytes_deterministic_and_index_free() -> None:
    f = _frame()
    g = f.iloc[::-1].iloc[::-1]  # same content, different index object
    g.index = g.index + 100
    assert parquet_bytes(f) == parquet_bytes(g)
    back = pq.read_table(pa.BufferReader(parquet_bytes(g)))
    assert back.column_names == list(f.columns)  # no __index_level_0__
    md = back.schema.metadata or {}
    assert not any(b"time" in k.lower() for k in md)


def test_bytes_identical_in_a_fresh_process() -> None:
    # a different interpreter, hash seed and time must give the same bytes
    code = (
        f"import sys, hashlib; sys.path.insert(0, {str(REPO)!r}); from tests.io.test_io import _frame;"
        "from sdc.io.write import parquet_bytes;"
        "print(hashlib.sha256(parquet_bytes(_frame())).hexdigest())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"}, cwd=REPO)
    expected = sha256_bytes(parquet_bytes(_frame()))
    assert out.stdout.strip() == expected


def test_a_few_non_numbers_in_an_integer_key(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("sex,age,region\n1,34,01\nx,5,10\n2,?,02\n")
    df = read_input(make_config(tmp_path, "d.csv"))
    assert df["sex"].tolist() == [1, "x", 2] and df["age"].tolist() == [34, 5, "?"]
    from sdc.io.schemas import validate_input

    with pytest.raises(sdc.InputError) as e:
        validate_input(df, make_config(tmp_path, "d.csv"))
    msg = str(e.value)
    assert "2 problems" in msg  # only the bad values, not every row of the column
    assert "'x'" in msg and "'?'" in msg and "'1'" not in msg


def test_na_is_a_category_in_text_keys_but_missing_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("sex,age,region,x\n1,NA,NA,NA\n2,5,,null\n")
    data = {"name": "t", "input": {"path": "d.csv"},
            "key_variables": {"sex": {"categories": [1, 2]}, "age": {"range": [0, 9]},
                              "region": {"categories": ["NA", "US"], "missing": "category"}},
            "risk": {"xi": 0.395}}
    df = read_input(sdc.parse_config(data, tmp_path))
    assert df["region"].iloc[0] == "NA" and pd.isna(df["region"].iloc[1])
    assert pd.isna(df["age"].iloc[0])
    # a non-key column keeps "NA" and "null" as text unless input.na_values says
    # they mean missing
    assert df["x"].tolist() == ["NA", "null"]
    data["input"]["na_values"] = ["NA", "null"]
    df = read_input(sdc.parse_config(data, tmp_path))
    assert df["x"].isna().all()
