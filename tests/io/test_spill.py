"""sdc.io.spill: records spilled by the top bits of a 64-bit key come back whole, each bucket
holding exactly the records of its key range in their original order (one file a bucket, or
a folder of pieces a bucket for Dask)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from sdc.io.spill import BucketSpill, bucket_bits, bucket_of, read_bucket, split_by_bucket


def _table(n, seed):
    rng = np.random.default_rng(seed)
    key = rng.integers(0, 2**64, n, dtype=np.uint64)
    return pa.table({"key": pa.array(key), "row": pa.array(np.arange(n, dtype=np.int64))})


def test_bucket_bits():
    assert bucket_bits(0) == 0 and bucket_bits(100, 100) == 0
    assert bucket_bits(101, 100) == 1 and bucket_bits(1000, 100) == 4


def test_split_by_bucket_groups_by_the_top_bits_and_keeps_row_order():
    t = _table(1000, 1)
    grouped, bounds = split_by_bucket(t, t.column("key").to_numpy(), 3)
    assert bounds[0] == 0 and bounds[-1] == 1000 and bounds.size == 9
    keys = grouped.column("key").to_numpy()
    rows = grouped.column("row").to_numpy()
    for b in range(8):
        part = slice(bounds[b], bounds[b + 1])
        assert (bucket_of(keys[part], 3) == b).all()
        assert (np.diff(rows[part]) > 0).all()  # stable: input order within a bucket


@pytest.mark.parametrize("piece", [None, "pieces"])
def test_spill_and_read_back(tmp_path, piece):
    bits = 2
    batches = [_table(300, s) for s in range(3)]
    if piece is None:
        spill = BucketSpill(tmp_path / "s", bits)
        for t in batches:
            spill.add(t, t.column("key").to_numpy())
        spill.close()
        paths = spill.buckets()
    else:  # one spill a Dask task, each writing its piece of every bucket
        for i, t in enumerate(batches):
            BucketSpill(tmp_path / "s", bits, piece=i).add(t, t.column("key").to_numpy())
        paths = BucketSpill(tmp_path / "s", bits, piece=0).buckets()
    assert len(paths) == 4
    got = [read_bucket(p) for p in paths]
    total = sum(g.num_rows for g in got if g is not None)
    assert total == 900
    for b, g in enumerate(got):
        if g is not None:
            assert (bucket_of(g.column("key").to_numpy(), bits) == b).all()
    every = np.sort(np.concatenate([g.column("key").to_numpy() for g in got if g is not None]))
    want = np.sort(np.concatenate([t.column("key").to_numpy() for t in batches]))
    assert np.array_equal(every, want)
    assert read_bucket(tmp_path / "absent.arrow") is None
