"""Batch reading and the public writer: same bytes whatever the batching."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sdc
from sdc.config.load import parse_config
from sdc.io.batches import (
    PublicWriter,
    input_arrow_schema,
    input_batches,
    public_schema,
    read_ahead_frames,
)


def _config(path, fmt="parquet", **inp):
    return parse_config({
        "name": "b", "input": {"path": str(path), "format": fmt, **inp},
        "key_variables": {"sex": {"categories": [1, 2]}, "region": {"categories": ["n", "s"]}},
        "risk": {"xi": 0.395}, "seed": 1,
    })


def _frame(n=1000):
    rng = np.random.default_rng(0)
    hours = rng.integers(0, 80, n).astype(float)
    hours[::97] = np.nan
    return pd.DataFrame({"pid": np.arange(n), "sex": rng.integers(1, 3, n),
                         "region": rng.choice(["n", "s"], n), "hours": hours,
                         "note": rng.choice(["a", "b", None], n)})


def _write(schema, frame, sizes, row_group_rows=128):
    pbuf, cbuf = io.BytesIO(), io.BytesIO()
    w = PublicWriter(schema, parquet=pbuf, csv=cbuf, row_group_rows=row_group_rows)
    start = 0
    for s in sizes:
        w.write_frame(frame.iloc[start:start + s])
        start += s
    w.close()
    return pbuf.getvalue(), cbuf.getvalue()


def test_public_writer_bytes_do_not_depend_on_batching(tmp_path):
    frame = _frame().rename(columns={"pid": "record_id"})
    schema = public_schema(_config(tmp_path / "x.parquet"),
                           pa.Schema.from_pandas(frame.drop(columns="record_id"),
                                                 preserve_index=False))
    one = _write(schema, frame, [1000])
    many = _write(schema, frame, [1, 300, 77, 0, 400, 222])
    assert one == many
    back = pq.read_table(io.BytesIO(one[0]))
    assert back.schema.metadata is None  # no pandas metadata: it depends on one engine's dtypes
    assert back.column("hours").type == pa.float64()
    assert pq.ParquetFile(io.BytesIO(one[0])).metadata.num_row_groups == 8  # 7 x 128 + 104
    text = one[1].decode()
    assert text.splitlines()[0] == "record_id,sex,region,hours,note"



def test_public_writer_keeps_dictionaries_for_codes_and_text_only(tmp_path):
    """Dictionary pages for the keys and the text columns; the record id and the floating-point
    columns plain (a dictionary tried on a column of distinct values is hashing for nothing);
    the values read back the same either way."""
    frame = _frame().rename(columns={"pid": "record_id"})
    schema = public_schema(_config(tmp_path / "x.parquet"),
                           pa.Schema.from_pandas(frame.drop(columns="record_id"),
                                                 preserve_index=False))
    data = _write(schema, frame, [1000], row_group_rows=1000)[0]
    meta = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: set(meta.column(i).encodings)
                 for i in range(meta.num_columns)}
    for name in ("sex", "region", "note"):
        assert "RLE_DICTIONARY" in encodings[name], (name, encodings[name])
    for name in ("record_id", "hours"):
        assert "RLE_DICTIONARY" not in encodings[name], (name, encodings[name])
    back = pq.read_table(io.BytesIO(data)).to_pandas()
    pd.testing.assert_series_equal(back["hours"], frame["hours"], check_names=False)
    assert back["record_id"].tolist() == frame["record_id"].tolist()


def test_records_file_keeps_the_identity_plain():
    """records.parquet: the identity hash (one value a record) without a dictionary, the cells
    with one."""
    from sdc.pipeline.records_file import records_parquet_bytes

    rng = np.random.default_rng(1)
    raw = rng.integers(0, 2**63, 5000, dtype=np.int64).astype(np.uint64)
    cell = rng.integers(0, 40, 5000)
    data = records_parquet_bytes(raw, raw, cell, cell[::-1].copy())
    meta = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: set(meta.column(i).encodings)
                 for i in range(meta.num_columns)}
    assert "RLE_DICTIONARY" not in encodings["identity"]
    assert "RLE_DICTIONARY" in encodings["cell"] and "RLE_DICTIONARY" in encodings["released"]

@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_input_batches_global_index_and_content(tmp_path, fmt):
    frame = _frame()
    path = tmp_path / f"in.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=90)
    else:
        frame.to_csv(path, index=False)
    cfg = _config(path, fmt)
    got = list(input_batches(cfg, batch_rows=333))
    assert [len(b) for b in got] == [333, 333, 333, 1]
    assert [b.index[0] for b in got] == [0, 333, 666, 999]
    whole = pd.concat(got)
    assert whole["pid"].tolist() == frame["pid"].tolist()
    assert whole["note"].isna().sum() == frame["note"].isna().sum()
    assert input_arrow_schema(cfg).field("region").type == pa.string()


@pytest.mark.parametrize("fmt", ["sav", "dta"])
def test_spss_and_stata_batches_are_the_whole_read(tmp_path, fmt):
    """An SPSS/Stata input read in chunks gives the whole read's values and types (the
    whole-column decisions taken once for the file): ``kids`` has an integer SPSS format and
    whole numbers in every chunk (int64), ``score`` is whole in the first chunks only (float64
    everywhere, as the whole read decides), ``note`` has empty strings (missing)."""
    pyreadstat = pytest.importorskip("pyreadstat")
    from sdc.io.stat_input import read_stat

    n = 1000
    frame = pd.DataFrame({"pid": np.arange(n), "sex": np.arange(n) % 2 + 1,
                          "region": np.where(np.arange(n) % 3, "n", "s"),
                          "kids": np.arange(n) % 4,
                          "score": np.where(np.arange(n) < 900, 2.0, 2.5),
                          "note": np.where(np.arange(n) % 7 == 0, "", "x")})
    path = tmp_path / f"in.{fmt}"
    if fmt == "sav":
        pyreadstat.write_sav(frame, str(path), variable_format={"kids": "F2.0", "score": "F3.0"})
    else:
        pyreadstat.write_dta(frame, str(path))
    cfg = _config(path, fmt, id_column="pid")
    whole = read_stat(path, fmt, cfg)  # before read_input's key conversions (every reader's)
    got = list(input_batches(cfg, batch_rows=300))
    assert [len(b) for b in got] == [300, 300, 300, 100]
    assert [b.index[0] for b in got] == [0, 300, 600, 900]
    joined = pd.concat(got)
    pd.testing.assert_frame_equal(joined, whole)
    if fmt == "sav":
        assert whole["kids"].dtype == np.int64 and whole["score"].dtype == np.float64
    assert joined["note"].isna().sum() == (frame["note"] == "").sum()
    assert input_arrow_schema(cfg).names == list(whole.columns)


@pytest.mark.parametrize("read_ahead", [0, 1, 3])
def test_read_ahead_gives_the_same_frames(tmp_path, read_ahead):
    frame = _frame()
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=90)
    got = list(input_batches(_config(path), batch_rows=250, read_ahead=read_ahead))
    assert [b.index[0] for b in got] == [0, 250, 500, 750]
    pd.testing.assert_frame_equal(pd.concat(got), frame, check_dtype=False)


def test_read_ahead_raises_the_producers_error_after_the_items_before_it():
    def source():
        yield 1
        yield 2
        raise ValueError("bad block")

    seen = []
    with pytest.raises(ValueError, match="bad block"):
        for x in read_ahead_frames(source(), 1):
            seen.append(x)
    assert seen == [1, 2]


def test_read_ahead_stops_its_thread_and_closes_the_source_when_the_consumer_stops():
    import threading

    produced, closed = [], []

    def source():
        try:
            for i in range(1000):
                produced.append(i)
                yield i
        finally:
            closed.append(True)

    frames = read_ahead_frames(source(), 2)
    for x in frames:
        if x == 3:
            break
    frames.close()
    assert closed == [True]
    # at most depth items ahead of the consumer (plus the one being put), never the whole source
    assert len(produced) <= 3 + 1 + 2 + 1
    assert not any(t.name == "sdc-read-ahead" for t in threading.enumerate())


def test_read_ahead_reports_a_missing_input_as_an_input_error(tmp_path):
    with pytest.raises(sdc.InputError, match="does not exist"):
        list(input_batches(_config(tmp_path / "missing.parquet")))


@pytest.mark.parametrize("batch_rows", [250, 20])  # row groups of 90: read whole / streamed
def test_parquet_row_groups_read_whole_or_streamed_give_the_same_frames(tmp_path, batch_rows):
    frame = _frame()
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=90)
    got = list(input_batches(_config(path), batch_rows=batch_rows))
    # batches of batch_rows, or a source batch of at least half of it as it is (the end of a
    # streamed row group: 90 = 4 x 20 + 10)
    assert all(batch_rows // 2 <= len(b) <= batch_rows for b in got[:-1])
    pd.testing.assert_frame_equal(pd.concat(got), frame, check_dtype=False)



def test_row_groups_of_about_a_batch_are_batches_as_they_are(tmp_path):
    """Row groups of between half and all of ``batch_rows`` records are read one per batch (no
    concatenation of two row groups: pandas views the numbers without a copy), smaller ones
    are gathered into batches of ``batch_rows``; the same records either way."""
    frame = _frame()
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=100)
    got = list(input_batches(_config(path), batch_rows=128))
    assert [len(b) for b in got] == [100] * 10
    assert [b.index[0] for b in got] == list(range(0, 1000, 100))
    pd.testing.assert_frame_equal(pd.concat(got), frame, check_dtype=False)
    assert not got[0]["pid"].to_numpy().flags.writeable  # a view of the Arrow buffer
    small = list(input_batches(_config(path), batch_rows=250))  # row groups under half
    assert [len(b) for b in small] == [250] * 4
    pd.testing.assert_frame_equal(pd.concat(small), frame, check_dtype=False)


def test_reading_a_parquet_file_does_not_keep_what_it_has_read(tmp_path):
    # pyarrow's default pre_buffer keeps every column chunk read so far cached: Arrow memory
    # then grows with the file. 64 row groups of 8 MB each; at most a few may be alive at once
    path = tmp_path / "big.parquet"
    n = 1 << 20
    table = pa.table({"x": np.arange(64 * n, dtype=np.int64)})
    pq.write_table(table, path, row_group_size=n, compression="none")
    del table
    from sdc.io.batches import _parquet_batches

    base = pa.total_allocated_bytes()
    batches = _parquet_batches(path, None, n)
    held = 0
    for i, batch in enumerate(batches):
        held = max(held, pa.total_allocated_bytes() - base)
        assert batch.num_rows == n
        del batch
        if i == 40:
            break
    assert held < 8 * (8 * n)  # a few row groups, not 41 of them (pre_buffer: 330 MB)


def test_value_ranges_come_from_the_parquet_statistics(tmp_path):
    """Every row group's minimum and maximum (a row group of nulls only is skipped); nothing
    for a CSV file, a column without statistics, or a NaN bound."""
    from sdc.io.batches import input_value_ranges

    t = pa.table({"a": pa.array([3, 9, None, None], pa.int64()),
                  "b": pa.array([0.5, -2.25, None, None]),
                  "c": pa.array([1.0, 2.0, 3.0, float("nan")])})
    path = tmp_path / "s.parquet"
    pq.write_table(t, path, row_group_size=2)  # the second row group: a and b all null
    cfg = _config(path)
    got = input_value_ranges(cfg, ["a", "b"])
    assert got == {"a": (3.0, 9.0, True), "b": (-2.25, 0.5, False)}
    # no statistics written: no range
    pq.write_table(t, path, write_statistics=["a"])
    assert input_value_ranges(cfg, ["a", "b"]) == {"a": (3.0, 9.0, True)}
    csv = tmp_path / "s.csv"
    t.to_pandas().to_csv(csv, index=False)
    assert input_value_ranges(_config(csv, fmt="csv"), ["a", "b"]) == {}


def test_parquet_copy_of_a_csv_reads_as_the_csv_batches(tmp_path):
    """The dask engine's Parquet copy of a CSV (copy_to_parquet) holds the streaming reader's
    records and types: read back in batches it gives the CSV's batches frame for frame (text
    keys, missing markers, ``input.na_values``, a value column typed without loss), one row
    group per ``batch_rows`` records."""
    from sdc.io.batches import copy_to_parquet

    frame = _frame(1000).assign(code=lambda f: np.where(f["pid"] % 3 == 0, "007", "12"),
                                amount=lambda f: np.where(f["pid"] % 5 == 0, "-99", "1.50"))
    path = tmp_path / "in.csv"
    frame.to_csv(path, index=False)
    cfg = _config(path, "csv", na_values=["-99"])
    dest = tmp_path / "copy.parquet"
    assert copy_to_parquet(cfg, dest, batch_rows=300) == 1000
    meta = pq.ParquetFile(dest).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [300, 300, 300, 100]
    copy = cfg.model_copy(update={"input": cfg.input.model_copy(
        update={"path": dest, "format": "parquet"})})
    a = list(input_batches(cfg, batch_rows=256))
    b = list(input_batches(copy, batch_rows=256))
    assert len(a) == len(b) == 4
    for x, y in zip(a, b, strict=True):
        pd.testing.assert_frame_equal(x, y)
    assert a[0]["code"].iloc[0] == "007" and pd.isna(a[0]["amount"].iloc[0])


@pytest.mark.parametrize("declared", ["none", "id_column", "drop"])
def test_an_input_column_named_record_id_is_refused_unless_it_is_the_id_or_dropped(declared):
    """Every executor's public schema comes from public_schema: an input column named
    record_id would have been written beside the public record id (two columns of one name
    on the batch engines); it is refused naming the three ways out, unless it is the id
    column or dropped."""
    from sdc.errors import InputError
    from sdc.io.batches import public_schema

    inp: dict = {"path": "in.parquet", "format": "parquet"}
    if declared == "id_column":
        inp["id_column"] = "record_id"
    elif declared == "drop":
        inp["drop"] = ["record_id"]
    cfg = parse_config({"name": "r", "input": inp, "key_variables": {"sex": {"categories": [1, 2]}},
                        "risk": {"xi": 0.5}, "seed": 1})
    schema = pa.schema([("record_id", pa.int64()), ("sex", pa.int64()), ("x", pa.float64())])
    if declared == "none":
        with pytest.raises(InputError, match="'record_id' in the input clashes.*input.drop"):
            public_schema(cfg, schema)
    else:
        assert public_schema(cfg, schema).names == ["record_id", "sex", "x"]


def test_map_ahead_keeps_the_order_and_raises_at_the_failing_item() -> None:
    """map_ahead gives fn(item) in the items' order whatever thread finishes first; a failure
    is raised when its item is reached (the earlier results came out first), and closing the
    generator early leaves no thread running."""
    import threading
    import time

    from sdc.io.batches import map_ahead

    def slow_first(i: int) -> int:
        time.sleep(0.05 if i % 3 == 0 else 0.0)
        return i * i

    assert list(map_ahead(slow_first, range(10))) == [i * i for i in range(10)]

    def fails_at_4(i: int) -> int:
        if i == 4:
            raise ValueError("item 4")
        return i

    got = []
    with pytest.raises(ValueError, match="item 4"):
        for x in map_ahead(fails_at_4, range(8)):
            got.append(x)
    assert got == [0, 1, 2, 3]
    before = set(threading.enumerate())
    gen = map_ahead(slow_first, range(100))
    assert next(gen) == 0
    gen.close()
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()
            and t.name.startswith("sdc-read-ahead")]
    assert left == []


@pytest.mark.parametrize(("ahead", "drawn"), [(None, 3), (2, 2), (1, 1)])
def test_map_ahead_draws_at_most_ahead_items_before_the_first_result(ahead, drawn) -> None:
    """``ahead`` bounds the items submitted and not yet consumed (the streaming runner keeps
    ``workers`` batches in memory, the records file ``workers`` + 1 buckets); the threads
    carry ``name``."""
    import threading

    from sdc.io.batches import map_ahead

    taken: list[int] = []
    names: set[str] = set()

    def items():
        for i in range(6):
            taken.append(i)
            yield i

    def fn(i: int) -> int:
        names.add(threading.current_thread().name)
        return -i

    gen = map_ahead(fn, items(), 2, ahead=ahead, name="sdc-test-pool")
    assert next(gen) == 0
    assert len(taken) == drawn
    assert list(gen) == [-1, -2, -3, -4, -5]
    assert names and all(n.startswith("sdc-test-pool") for n in names)


def test_read_bucket_consume_deletes_what_it_read(tmp_path) -> None:
    """``read_bucket(consume=True)`` gives the same table and deletes the bucket's files (a
    file, or a Dask folder's pieces) once read; without it they stay."""
    import numpy as np
    import pyarrow as pa

    from sdc.io.spill import BucketSpill, discarded, read_bucket, remove_spills

    table = pa.table({"k": np.arange(64, dtype=np.uint64) << np.uint64(58),
                      "v": np.arange(64, dtype=np.int64)})
    for piece in (None, 3):
        spill = BucketSpill(tmp_path / f"spill{piece}", 2, piece=piece)
        spill.add(table, table.column("k").to_numpy())
        spill.close()
        for path in spill.buckets():
            kept = read_bucket(path)
            assert path.exists()
            got = read_bucket(path, consume=True)
            assert got is not None and got.equals(kept)
            discarded()  # deleted on the discard thread
            assert not list(path.glob("*.arrow")) if path.is_dir() else not path.exists()
            assert read_bucket(path) is None
        remove_spills(spill.folder)
        assert not spill.folder.exists()


def test_discard_works_in_a_forked_child(tmp_path) -> None:
    """A process forked after the discard pool started (``sdc design``'s workers) makes its
    own pool: the parent's has no thread in the child, and its work would never run
    (``discarded`` would wait for ever)."""
    import multiprocessing as mp
    import sys

    if sys.platform != "linux":
        pytest.skip("fork start method: Linux only")
    from sdc.io.spill import discard, discarded

    first = tmp_path / "parent.bin"
    first.write_bytes(b"x")
    discard(first)
    discarded()  # the parent's pool exists from here on
    assert not first.exists()
    child_file = tmp_path / "child.bin"
    child_file.write_bytes(b"y")

    proc = mp.get_context("fork").Process(target=_discard_in_child, args=(str(child_file),))
    proc.start()
    proc.join(30)
    alive = proc.is_alive()
    if alive:
        proc.kill()
    assert not alive and proc.exitcode == 0
    assert not child_file.exists()


def _discard_in_child(path: str) -> None:
    from pathlib import Path

    from sdc.io.spill import discard, discarded

    discard(Path(path))
    discarded()
