"""``internal/records.parquet``, the same bytes from every engine (docs/SERIES.md).

One row per record: ``identity`` (the record's draw identity after
:func:`sdc.method.draws.unique_identities` over all records, PRB records first), ``cell`` and
``released`` (:func:`sdc.method.draws.cell_identity` of its true and released cells), all
uint64. No key values, and not the input's row order: the rows are sorted by
(raw identity, identity, cell, released), where the raw identity is
:func:`sdc.method.draws.record_identity` before duplicates are separated. That is a total order
on the file's content (equal rows are interchangeable), so it does not depend on the row order
or on the batching, and it can be produced out of core:

- the batch engines spill (raw identity, true cell index, released cell index) of every record
  to 2**b bucket files by the top b bits of the raw identity (:class:`RecordsSpill`; a keyed
  hash, so the buckets are even). Records sharing a raw identity share a bucket, hence
  :func:`unique_identities` run per bucket gives exactly the global result (it only ranks
  records within a group of equal raw identities). Each bucket is then sorted in memory and
  appended (:func:`write_records_from_buckets`);
- the pandas engine sorts its whole table the same way (:func:`records_parquet_bytes`).

Both write through :class:`sdc.io.batches.PublicWriter` (fixed row groups), so the bytes do not
depend on where the bucket boundaries fall.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from sdc.io.batches import ROW_GROUP_ROWS, PublicWriter, map_ahead, read_ahead_frames
from sdc.io.spill import BucketSpill, read_bucket
from sdc.io.write import HashingFile
from sdc.method.draws import draw_tiebreak, unique_identities
from sdc.pipeline.order import argsort_u64

__all__ = ["RECORDS_SCHEMA", "RecordsSpill", "records_parquet_bytes", "sorted_records",
           "write_records", "write_records_from_buckets"]

RECORDS_SCHEMA = pa.schema([("identity", pa.uint64()), ("cell", pa.uint64()),
                            ("released", pa.uint64())])


def _spill_schema(cell: pa.DataType) -> pa.Schema:
    return pa.schema([("raw", pa.uint64()), ("cell", cell), ("released", cell)])


def sorted_records(raw: np.ndarray, identity: np.ndarray, cell: np.ndarray,
                   released: np.ndarray) -> pa.Table:
    """The records table sorted by (raw identity, identity, cell, released): one argsort of
    the raw identities when they are all distinct (that is then the order; measured 7x faster
    than the lexsort of four keys), else one lexsort."""
    raw = np.asarray(raw, np.uint64)
    order = argsort_u64(raw)
    srt = raw[order]
    if srt.size > 1 and bool((srt[1:] == srt[:-1]).any()):
        order = np.lexsort((released, cell, identity, raw))
    del srt
    return pa.table([pa.array(np.asarray(a, np.uint64)[order], pa.uint64())
                     for a in (identity, cell, released)], schema=RECORDS_SCHEMA)


def _write(sink, tables) -> None:
    writer = PublicWriter(RECORDS_SCHEMA, parquet=sink, plain=("identity",))
    for t in tables:
        writer.write_table(t)
    writer.close()


def records_parquet_bytes(raw: np.ndarray, identity: np.ndarray, cell: np.ndarray,
                          released: np.ndarray) -> bytes:
    """``records.parquet`` of an in-memory release (the pandas engine): the bytes the batch
    engines write for the same records."""
    buf = io.BytesIO()
    _write(buf, [sorted_records(raw, identity, cell, released)])
    return buf.getvalue()


class RecordsSpill(BucketSpill):
    """Spill (raw identity, true cell, released cell) of every record to bucket files by the
    top bits of the raw identity (:class:`sdc.io.spill.BucketSpill`: ``folder``, ``bits``,
    ``piece`` for a Dask task). ``n_cells``: the cell table's size, when known; below 2**31
    the cell indexes are spilled as int32 (16 bytes a record instead of 24: at 100M records
    0.8 GB less written and read back)."""

    def __init__(self, folder: Path, bits: int, piece: int | None = None,
                 n_cells: int | None = None) -> None:
        super().__init__(folder, bits, piece)
        self.cell_type = (np.int32 if n_cells is not None and n_cells < 2**31 else np.int64)

    def add(self, raw: np.ndarray, record_cell: np.ndarray,  # type: ignore[override]
            released_cell: np.ndarray) -> None:
        """Append a batch's records (whole columns; one gather per batch)."""
        raw = np.asarray(raw, np.uint64)
        t = self.cell_type
        table = pa.table([pa.array(raw), pa.array(np.asarray(record_cell, t)),
                          pa.array(np.asarray(released_cell, t))],
                         schema=_spill_schema(pa.from_numpy_dtype(t)))
        super().add(table, raw)


def _group_table(raw: np.ndarray, rc: np.ndarray, rel: np.ndarray, cell_id: np.ndarray,
                 in_prb_cell: np.ndarray) -> pa.Table:
    """The sorted records of a group of records holding every record of its raw identities
    (a bucket, or the whole file): :func:`unique_identities` (tiebreak
    :func:`draw_tiebreak`: PRB records first, as the draws), the cell ids, one sort."""
    order = argsort_u64(raw)
    srt = raw[order]
    if srt.size < 2 or not bool((srt[1:] == srt[:-1]).any()):
        # all distinct (the usual case): the raw identities are the identities and their
        # order is the file's; one sort instead of unique_identities' and sorted_records'
        return pa.table([pa.array(srt, pa.uint64()), pa.array(cell_id[rc[order]], pa.uint64()),
                         pa.array(cell_id[rel[order]], pa.uint64())], schema=RECORDS_SCHEMA)
    del order, srt
    ident = unique_identities(raw, lambda: draw_tiebreak(cell_id[rc], in_prb_cell[rc]))
    return sorted_records(raw, ident, cell_id[rc], cell_id[rel])


def _write_file(path: Path, tables) -> Path:
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with HashingFile(os.fdopen(fd, "wb"), path) as f:  # the audit record's digest
        _write(f, tables)
    return path


def write_records_from_buckets(buckets: list[Path], path: Path, cell_id: np.ndarray,
                               cell_prb: np.ndarray) -> Path:
    """Write ``records.parquet`` (mode 0600) from the spilled buckets, one bucket in memory at a
    time (and the next one being prepared): per bucket :func:`_group_table`, appended in
    bucket order."""
    cell_id = np.asarray(cell_id, np.uint64)
    in_prb_cell = np.asarray(cell_prb) >= 0

    def table(b: Path) -> pa.Table | None:
        t = read_bucket(b, consume=True)
        if t is None or t.num_rows == 0:
            return None
        raw = t.column("raw").to_numpy()
        rc = t.column("cell").to_numpy()
        rel = t.column("released").to_numpy()
        del t
        return _group_table(raw, rc, rel, cell_id, in_prb_cell)

    # the next buckets are read and sorted by two background threads while this one is
    # encoded: one thread sorting was this step's bottleneck (100M records: 13.7 CPU s of
    # sorts and gathers against the writer's ~0.6 core)
    return _write_file(path, (t for t in map_ahead(table, buckets) if t is not None))


def write_records(raw: np.ndarray, record_cell: np.ndarray, released_cell: np.ndarray,
                  path: Path, cell_id: np.ndarray, cell_prb: np.ndarray,
                  distinct: bool = False, order: np.ndarray | None = None) -> Path:
    """Write ``records.parquet`` (mode 0600) of records held in memory (the whole file: raw
    identities, true and released cell indexes, in input order): the bytes
    :func:`write_records_from_buckets` writes for the same records, without the spill (its
    buckets partition the raw identities, so one group of all of them gives the same
    identities and the same total order). With distinct raw identities (the usual case;
    ``distinct``: known so, by the count pass's id check) one sort of them is the order and
    the columns are gathered one row group at a time (the next by a background thread while
    this one is encoded: 24 bytes a record are never built whole); else
    :func:`_group_table` of all of them. ``order``: ``argsort_u64(raw)`` when the caller has
    it (the count pass's id check made it)."""
    raw = np.asarray(raw, np.uint64)
    rc, rel = np.asarray(record_cell, np.int64), np.asarray(released_cell, np.int64)
    cell_id = np.asarray(cell_id, np.uint64)
    order = argsort_u64(raw) if order is None else order
    if not distinct:
        srt = raw[order]
        same = srt.size > 1 and bool((srt[1:] == srt[:-1]).any())
        del srt
        if same:
            del order
            return _write_file(path, [_group_table(raw, rc, rel, cell_id,
                                                   np.asarray(cell_prb) >= 0)])

    def tables():
        for start in range(0, order.size, ROW_GROUP_ROWS):
            o = order[start:start + ROW_GROUP_ROWS]
            yield pa.table([pa.array(raw[o], pa.uint64()), pa.array(cell_id[rc[o]], pa.uint64()),
                            pa.array(cell_id[rel[o]], pa.uint64())], schema=RECORDS_SCHEMA)

    return _write_file(path, read_ahead_frames(tables(), 1))
