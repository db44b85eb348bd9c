"""PublicRecords (the release's write path): ordered once, written one row group at a time from
Arrow, the same bytes as writing the gathered public frame; its check frame holds the same
records."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import sdc
from sdc.io.batches import public_bytes
from sdc.io.read import read_input
from sdc.io.schemas import PUBLIC_ID, OutputSchemaError, validate_output
from sdc.release.public import public_frame, public_records

REPO = Path(__file__).resolve().parents[2]
SEED = 20240611


@pytest.fixture(scope="module")
def census():
    cfg = sdc.load_config(REPO / "configs" / "census_demo.yaml")
    frame = read_input(cfg)
    # a text column with missing values and a float column with NaN: nulls in the Arrow table
    rng = np.random.default_rng(4)
    frame["note"] = np.where(rng.random(len(frame)) < 0.1, None,
                             rng.choice(["a", "bb", "ccc"], len(frame))).astype(object)
    frame["score"] = np.where(rng.random(len(frame)) < 0.1, np.nan, rng.random(len(frame)))
    return cfg, sdc.release_frame(frame, cfg, SEED)


@pytest.mark.parametrize("rows", [1000, 1 << 20])
def test_written_row_group_by_row_group_equals_the_gathered_frame(census, rows) -> None:
    cfg, res = census
    rec = public_records(res, cfg, SEED)
    pub = public_frame(res, cfg, SEED)
    want = public_bytes(pub, rec.schema, ["parquet", "csv"])
    got = rec.write(["parquet", "csv"], row_group_rows=rows)
    if rows == 1 << 20:  # the release's row groups: exactly the bytes of the gathered frame
        assert got == want
    else:  # other row groups: same CSV, same records in the same order
        assert got["microdata.csv"] == want["microdata.csv"]
        a = pq.read_table(io.BytesIO(got["microdata.parquet"]))
        assert pq.ParquetFile(io.BytesIO(got["microdata.parquet"])).num_row_groups > 1
        assert a.equals(pq.read_table(io.BytesIO(want["microdata.parquet"])))
    assert rec.frame().equals(pub)


def test_check_frame_holds_the_public_records(census) -> None:
    cfg, res = census
    rec = public_records(res, cfg, SEED)
    check, pub = rec.check_frame(), rec.frame()
    assert list(check.columns) == list(pub.columns) and check.columns[0] == PUBLIC_ID
    def rows(df):
        return df.sort_values(list(df.columns)[1:], kind="mergesort").drop(columns=[PUBLIC_ID])
    pd.testing.assert_frame_equal(rows(check).reset_index(drop=True),
                                  rows(pub).reset_index(drop=True))
    assert sorted(check[PUBLIC_ID]) == list(range(1, len(pub) + 1))
    validate_output(check, cfg)
    # a bad released value is caught on the check frame as on the public frame
    bad = check.copy()
    bad.loc[bad.index[3], "sex"] = 7
    with pytest.raises(OutputSchemaError, match="sex"):
        validate_output(bad, cfg)
