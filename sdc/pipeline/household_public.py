"""The public file of a household release in record batches (docs/HOUSEHOLDS.md, "Engines").

The pandas engine writes a household file's public records with the household column
replaced by keyed pseudonyms 1..H (:func:`sdc.method.households.pseudonyms`), households
contiguous in pseudonym order and the members of a household in the keyed public order
(``np.lexsort((order, pseudonym))``). Out of core:

* :func:`changed_household_codes` - the public order's salt is the digest of the release's
  cell table, which holds the released combinations of the changed households' persons
  (:func:`sdc.method.household_batches.extended_cells`). Those persons are few: the identity
  pass keeps them (their cell, household row and place among the drawing persons), and once
  the drawing identities are made distinct their released codes follow without another read.
* :func:`household_public_batch` - one batch's public table (released values, pseudonyms,
  the keyed order column), as :func:`sdc.pipeline.kernels.release_batch` for persons.
* :func:`household_bucket_keys` - a uint64 key per person, increasing with its pseudonym, whose
  top bits are the spill bucket (:mod:`sdc.io.spill`): a household never spans two buckets and
  the buckets come in pseudonym order; :func:`sorted_household_buckets` sorts each bucket by
  (pseudonym, order key), numbering ``record_id`` across the buckets.

Chained over shuffled batches they write the pandas engine's public files byte for byte
(``tests/pipeline/test_household_public.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.io.batches import PUBLIC_ID, PublicWriter, frame_to_table, read_ahead_frames
from sdc.io.spill import read_bucket
from sdc.method.cell_passes import decode_released
from sdc.method.cells import CellTable
from sdc.method.household_batches import (
    HouseholdStageResult,
    PersonStagePlan,
    person_draw_plan,
    released_person_codes,
)
from sdc.pipeline.order import ORDER_COLUMNS, order_keys

__all__ = ["ChangedHouseholdPersons", "household_bucket_keys", "household_cell_prb",
           "household_public_batch",
           "household_public_schema", "sorted_household_buckets", "write_household_buckets"]


def household_public_schema(schema: pa.Schema, config: ReleaseConfig) -> pa.Schema:
    """The public schema of a household file: ``schema`` (:func:`sdc.io.batches.public_schema`)
    with the household column as int64 (its pseudonyms), as the pandas engine writes it."""
    hid = config.input.household_id
    return schema.set(schema.get_field_index(hid), pa.field(hid, pa.int64()))


@dataclass
class ChangedHouseholdPersons:
    """The persons of the changed households, kept during the identity pass: per batch their
    cells (full cell table), household rows (aggregate) and drawing flags, and the place of
    the batch's drawing persons in the file-wide list of drawing identities."""

    cells: list[np.ndarray] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    ident_pos: list[np.ndarray] = field(default_factory=list)

    def add(self, cell: np.ndarray, household_row: np.ndarray, drawing: np.ndarray,
            changed: np.ndarray, first_ident: int) -> None:
        """Add a batch: ``cell`` and ``household_row`` of its persons, ``drawing``
        (:func:`~sdc.method.household_batches.drawing_persons`: whose identities the identity
        pass lists, in row order), ``changed`` (bool per household of the aggregate) and
        ``first_ident``, the number of drawing identities listed before this batch."""
        drawing = np.asarray(drawing, dtype=bool)
        keep = np.asarray(changed)[household_row]
        pos = first_ident + np.cumsum(drawing) - 1
        self.cells.append(np.asarray(cell)[keep])
        self.rows.append(np.asarray(household_row)[keep])
        self.ident_pos.append(pos[keep & drawing])

    def merge(self, other: ChangedHouseholdPersons, first_ident: int) -> None:
        """Add a partial kept elsewhere (a Dask task's piece, added with ``first_ident`` 0):
        ``first_ident``, the number of drawing identities listed before that piece."""
        self.cells.extend(other.cells)
        self.rows.extend(other.rows)
        self.ident_pos.extend(p + first_ident for p in other.ident_pos)

    def released_codes(self, identity: np.ndarray, cells: CellTable, ps: PersonStagePlan,
                       hs: HouseholdStageResult, config: ReleaseConfig,
                       seed: int) -> list[np.ndarray]:
        """Their released key codes (for :func:`~sdc.method.household_batches.extended_cells`)
        given the distinct drawing identities of the whole file."""
        identity = np.asarray(identity, np.uint64)
        return [released_person_codes(c, r, identity[p], cells, ps, hs, config, seed)
                for c, r, p in zip(self.cells, self.rows, self.ident_pos, strict=True)]


def household_cell_prb(ps: PersonStagePlan, cells: CellTable, extended: CellTable,
                       orig: np.ndarray, config: ReleaseConfig) -> np.ndarray:
    """The person PRB of every cell of the release's extended cell table (``orig``: the row of
    every cell of the counted table ``cells`` in it; -1 for the left-out small classes and the
    released combinations the count did not see), as the pandas engine's
    ``ReleaseOutcome.cell_prb``. With :func:`sdc.method.draws.cell_identity` of ``extended``
    it is what :func:`sdc.pipeline.records_file.write_records_from_buckets` needs for the
    internal records file (the batches spill (raw identity, ``orig[cell]``, released row))."""
    full = person_draw_plan(ps, cells, config).cell_prb
    out = np.full(extended.n_cells, -1, dtype=np.int64)
    out[np.asarray(orig, dtype=np.int64)] = full
    return out


def household_public_batch(frame: pd.DataFrame, record_cell: np.ndarray,
                           released_cell: np.ndarray, cells: CellTable, pseudonym: np.ndarray,
                           config: ReleaseConfig, seed: int, schema: pa.Schema,
                           salt: int) -> pa.Table:
    """One batch's public table without ``record_id``, plus the order column: ``frame``'s
    released values (``record_cell`` / ``released_cell`` index ``cells``, the release's
    extended cell table), the household column replaced by ``pseudonym`` (per person), the
    original id dropped; the keyed order of :func:`sdc.pipeline.order.order_keys`."""
    out = decode_released(frame, record_cell, released_cell, cells, config)
    id_col = config.input.id_column
    if id_col is not None and id_col in out.columns:
        out = out.drop(columns=[id_col])
    out = out.assign(**{config.input.household_id: np.asarray(pseudonym, dtype=np.int64)})
    body = pa.schema([f for f in schema if f.name != PUBLIC_ID])
    from sdc.io.schemas import validate_public_batch

    validate_public_batch(out[body.names], config)  # the output schema, before any byte
    table = frame_to_table(out, body)
    order, _ = order_keys(table, seed, salt)
    return table.append_column(ORDER_COLUMNS[0], pa.array(order, pa.uint64()))


def household_bucket_keys(pseudonym: np.ndarray, n_households: int) -> np.ndarray:
    """(n,) uint64 spill keys: pseudonym - 1 in the top bits (as many as ``n_households``
    needs), so that :func:`sdc.io.spill.bucket_of` puts whole households in buckets of
    increasing pseudonyms."""
    k = max(1, int(np.ceil(np.log2(max(int(n_households), 2)))))
    p = np.asarray(pseudonym, dtype=np.int64) - 1
    return p.astype(np.uint64) << np.uint64(64 - k)


def sorted_household_buckets(bucket_files: list[Path], household_id: str) -> Iterator[pa.Table]:
    """Each non-empty bucket sorted by (pseudonym, order key), the order column dropped,
    ``record_id`` numbered from 1 across the buckets: the pandas engine's public order
    (``np.lexsort((order, pseudonym))``; records equal in both are identical records)."""
    next_id = 1
    for path in bucket_files:
        table = read_bucket(path, consume=True)
        if table is None or table.num_rows == 0:
            continue
        order = table.column(ORDER_COLUMNS[0]).to_numpy()
        hh = table.column(household_id).to_numpy()
        positions = pa.array(np.lexsort((order, hh)))
        table = table.drop_columns(list(ORDER_COLUMNS)).take(positions)
        ids = pa.array(np.arange(next_id, next_id + table.num_rows, dtype=np.int64))
        next_id += table.num_rows
        yield table.add_column(0, PUBLIC_ID, ids)
        del table


def write_household_buckets(bucket_files: list[Path], writer: PublicWriter,
                            household_id: str) -> None:
    """Append the sorted buckets to ``writer`` (one bucket read ahead)."""
    for table in read_ahead_frames(sorted_household_buckets(bucket_files, household_id), 1):
        writer.write_table(table)
        del table
