"""The public file the pipeline writes (batch by batch, through the bucket spill and
:class:`~sdc.io.batches.PublicWriter`) is the same bytes as the gathered public frame written
at once, also with nulls in a text and a float column; written in other row groups it holds the
same records in the same order; the output schema holds for it and catches a bad value."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sdc
from sdc.io.batches import PublicWriter, buffered_files, public_bytes
from sdc.io.read import read_input
from sdc.io.schemas import PUBLIC_ID, OutputSchemaError, validate_output

REPO = Path(__file__).resolve().parents[2]
SEED = 20240611


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    cfg = sdc.load_config(REPO / "configs" / "census_demo.yaml")
    frame = read_input(cfg)
    # a text column with missing values and a float column with NaN: nulls in the Arrow table
    rng = np.random.default_rng(4)
    frame["note"] = np.where(rng.random(len(frame)) < 0.1, None,
                             rng.choice(["a", "bb", "ccc"], len(frame))).astype(object)
    frame["score"] = np.where(rng.random(len(frame)) < 0.1, np.nan, rng.random(len(frame)))
    return cfg, sdc.release_frame(frame, cfg, SEED, out_dir=tmp_path_factory.mktemp("pub"))


@pytest.mark.parametrize("rows", [1000, 1 << 20])
def test_written_row_group_by_row_group_equals_the_gathered_frame(census, rows) -> None:
    cfg, res = census
    written = {n: p.read_bytes() for n, p in res.files.items()}
    table = pq.read_table(res.files["microdata.parquet"])
    assert table.schema.remove_metadata() == res.schema
    assert table.column("note").null_count > 0 and table.column("score").null_count > 0
    pub = table.to_pandas()
    assert pub[PUBLIC_ID].tolist() == list(range(1, len(pub) + 1))
    if rows == 1 << 20:  # the release's row groups: exactly the bytes of the gathered frame
        assert public_bytes(pub, res.schema, ["parquet", "csv"]) == written
    else:  # other row groups: same CSV, same records in the same order
        pq_buf, csv_buf = io.BytesIO(), io.BytesIO()
        w = PublicWriter(res.schema, parquet=pq_buf, csv=csv_buf, row_group_rows=rows)
        for batch in table.to_batches(max_chunksize=777):
            w.write_table(pa.Table.from_batches([batch], schema=table.schema))
        w.close()
        got = buffered_files(pq_buf, csv_buf)
        assert got["microdata.csv"] == written["microdata.csv"]
        assert pq.ParquetFile(io.BytesIO(got["microdata.parquet"])).num_row_groups > 1
        assert pq.read_table(io.BytesIO(got["microdata.parquet"])).equals(table)


def test_the_public_records_hold_the_output_schema(census) -> None:
    cfg, res = census
    pub = pd.read_parquet(res.files["microdata.parquet"])
    assert pub.columns[0] == PUBLIC_ID
    validate_output(pub, cfg)
    # the released records, gathered: the same multiset of rows as the public file
    released = res.frame.drop(columns=[cfg.input.id_column])

    def rows(df):
        return df.astype(str).sort_values(list(df.columns), kind="mergesort").reset_index(
            drop=True)

    pd.testing.assert_frame_equal(rows(pub.drop(columns=[PUBLIC_ID])), rows(released))
    # a bad released value is caught
    bad = pub.copy()
    bad.loc[bad.index[3], "sex"] = 7
    with pytest.raises(OutputSchemaError, match="sex"):
        validate_output(bad, cfg)


def test_release_frame_without_a_folder_holds_the_file_it_would_have_written(census) -> None:
    """Without ``out_dir`` no public file is written: ``public_table`` is the records the
    Parquet file holds (types, nulls, order, ``record_id``), and the released frame the same
    (issue 48: the throw-away Parquet file and its read back are gone)."""
    cfg, res = census
    frame = read_input(cfg)
    rng = np.random.default_rng(4)  # the fixture's extra columns, again
    frame["note"] = np.where(rng.random(len(frame)) < 0.1, None,
                             rng.choice(["a", "bb", "ccc"], len(frame))).astype(object)
    frame["score"] = np.where(rng.random(len(frame)) < 0.1, np.nan, rng.random(len(frame)))
    mem = sdc.release_frame(frame, cfg, SEED)
    assert mem.files == {}
    written = pq.read_table(res.files["microdata.parquet"]).replace_schema_metadata()
    assert mem.public_table.schema.equals(written.schema, check_metadata=True)
    assert mem.public_table.equals(written)
    assert mem.frame.equals(res.frame) and (mem.frame.dtypes == res.frame.dtypes).all()


def test_released_frame_keeps_the_input_columns_it_did_not_change(census) -> None:
    """A non-key column of the released frame is the input's own column (its values are the
    input's: no conversion of the table's, no copy); a key column that moved records holds
    the released values (those of the public file, checked above), the input untouched."""
    cfg, _ = census
    frame = read_input(cfg)
    frame["hours"] = np.arange(len(frame), dtype=np.int64) % 61
    frame["share"] = np.linspace(0.0, 1.0, len(frame))
    before = frame.copy(deep=True)
    res = sdc.release_frame(frame, cfg, SEED)
    assert res.n_changed > 0
    for c in ("hours", "share"):
        assert np.shares_memory(res.frame[c].to_numpy(), frame[c].to_numpy())
    moved = [k for k in cfg.key_names if not res.frame[k].equals(frame[k])]
    assert moved  # some key column released other values
    pd.testing.assert_frame_equal(frame, before)  # the input as it was
    released = res.public_table.to_pandas().sort_values(PUBLIC_ID)
    assert sorted(res.frame["share"]) == sorted(released["share"])
