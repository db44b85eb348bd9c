"""The per-batch kernels and mergeable partials every batch executor shares.

The streaming executor (:mod:`sdc.executors.streaming`) runs them in a loop over record
batches, the Dask executor (:mod:`sdc.executors.dask`) as tasks over the pieces of the
input; the in-memory executor is the same steps on one batch (:mod:`sdc.executors.memory`):

- count pass: the pandera checks of a batch (:func:`batch_problems`, merged by
  :class:`Problems` with global row numbers), ``perturb:`` value counts, the whole-file id
  check (:func:`duplicate_identities`, :func:`repeated_ids`), then :func:`plan_cells` on the
  merged cell table (:class:`CellCount`);
- apply pass: :func:`release_batch` (released cells, values, DP-PRAM, order keys);
- public files: :func:`write_buckets_in_order` from the spilled buckets;
- the outcome: :class:`ReleaseOutcome`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.io.batches import (
    PUBLIC_ID,
    ROW_GROUP_ROWS,
    PublicWriter,
    frame_to_table,
    map_ahead,
    read_ahead_frames,
)
from sdc.io.spill import IdentitySpill, read_bucket
from sdc.io.write import HashingFile
from sdc.method.cell_passes import DependenceThread, decode_released, derived_cells
from sdc.method.cells import CellTable
from sdc.method.dependence import DependenceCounter, measure_dependence, raise_if_dependent
from sdc.method.derived import DerivedCollector
from sdc.method.designs import plan_release
from sdc.method.draws import DrawPlan, record_identity
from sdc.method.outcome import ReleasedRecords, ReleaseOutcome
from sdc.method.partition import partition_cells
from sdc.method.perturb import PerturbValues, perturb_batch, perturb_designs
from sdc.method.plan import ReleasePlan
from sdc.method.postrandomize import released_cells
from sdc.method.sorting import sort_inplace
from sdc.pipeline.key_spill import KeySpill
from sdc.pipeline.order import ORDER_COLUMNS, order_keys, sort_positions

__all__ = ["BatchPerturb", "CellCount", "Problems", "ReleaseOutcome", "ReleasedRecords",
           "add_perturb_counts",
           "batch_problems", "batch_schema", "check_dependence", "duplicate_identities",
           "duplicate_ids_table", "id_rows_with_identity", "plan_cells", "raise_duplicate_ids",
           "release_batch", "repeated_ids", "sorted_buckets", "write_buckets_in_order",
           "public_positions", "write_public_files", "write_table_in_order"]


@dataclass
class CellCount:
    """The count pass's result: the cell table and the number of records.

    ``identities_unique`` is True when the count pass checked that every record's identity
    (hash of ``input.id_column``) is distinct: then the draws need no global identity step.
    """

    cells: CellTable
    cell_codes: np.ndarray
    n_records: int
    columns: list[str]
    identities_unique: bool = False
    weight_max: float | None = None  # largest input.weight (the reports' exact-sum parameters)
    #: value counts of every ``perturb:`` variable over the file (the DP-PRAM designs)
    perturb_counts: dict[str, pd.Series] = field(default_factory=dict)
    #: ``{column: (min, max, integer-typed)}`` of the ``value_columns`` the pass was asked to
    #: measure (the reports' numeric variables without Parquet statistics)
    value_ranges: dict[str, tuple[float, float, bool]] = field(default_factory=dict)
    #: the dependence check's aggregates of the released non-key columns (None: not counted;
    #: a :class:`~sdc.method.cell_passes.DependenceThread` while still counting)
    dependence: DependenceCounter | DependenceThread | None = None
    #: the value of every ``derived:`` column per cell, as collected (None: no such column)
    derived: DerivedCollector | None = None
    #: W_j, the weights' sum of every cell (``risk.weighted``; None otherwise)
    weight_total: np.ndarray | None = None
    #: the records' raw identities (hash of the id column) in input order, kept when the
    #: count pass keeps its records (``keep``): the apply pass takes them instead of hashing
    raw_identity: np.ndarray | None = None
    #: every record's cell code in input order, kept when the count pass keeps its records
    #: (``keep``): the identity and apply passes locate them instead of coding the keys again
    record_codes: np.ndarray | None = None
    #: the positions that sort ``raw_identity`` (:func:`sdc.pipeline.order.argsort_u64`), made
    #: by the id check when a records file will be written: that file's order
    raw_order: np.ndarray | None = None


class Problems:
    """Merge the per-batch problems tables of the pandera input schema (global row numbers)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, table: pd.DataFrame, offset: int) -> None:
        for r in table.to_dict("records"):
            key = (r["column"], r["check"])
            first = r["first rows"]
            if first == "all":
                nums, all_rows = [], True
            else:
                nums = [int(x) + offset for x in first.replace(" ...", "").split(", ") if x]
                all_rows = False
            vals = [v for v in str(r["bad values"]).replace(" ...", "").split(", ") if v]
            cur = self.rows.setdefault(key, {"column": r["column"], "check": r["check"],
                                             "values": [], "count": 0, "first": [],
                                             "all": False, "fix": r["fix"]})
            cur["count"] += int(r["count"])
            cur["all"] = cur["all"] or all_rows
            cur["first"] = (cur["first"] + nums)[:5]
            cur["values"] = list(dict.fromkeys(cur["values"] + vals))[:6]

    def table(self) -> pd.DataFrame:
        out = []
        for r in self.rows.values():
            out.append({
                "column": r["column"], "check": r["check"],
                "bad values": ", ".join(r["values"][:5]) + (" ..." if len(r["values"]) > 5 else ""),
                "count": r["count"],
                "first rows": "all" if r["all"] else ", ".join(map(str, r["first"]))
                + (" ..." if r["count"] > len(r["first"]) else ""),
                "fix": r["fix"]})
        out.sort(key=lambda r: r["check"] != "column present")
        return pd.DataFrame(out, columns=["column", "check", "bad values", "count", "first rows",
                                          "fix"])


def batch_schema(config: ReleaseConfig) -> Any:
    """The pandera schema a batch is validated with: the input schema without the id column's
    uniqueness, which the count pass checks over the whole file (:func:`_check_unique_ids`;
    a duplicate is reported with the batches' problems), not per batch."""
    from sdc.io.schemas import input_schema

    return input_schema(config, unique_id=False)


def batch_problems(frame: pd.DataFrame, config: ReleaseConfig,
                    schema: Any = None) -> pd.DataFrame | None:
    from pandera.errors import SchemaErrors

    from sdc.io.schemas import passes_schema, problems_table

    schema = schema if schema is not None else batch_schema(config)
    if passes_schema(frame, schema):  # nothing for pandera to find: its ~50 ms a batch saved
        return None
    local = frame.reset_index(drop=True)
    try:
        # inplace: pandera would otherwise copy the batch first (a third of its time); no
        # check coerces, so nothing is modified
        schema.validate(local, lazy=True, inplace=True)
    except SchemaErrors as err:
        return problems_table(err, local, config)
    return None


def add_perturb_counts(acc: dict[str, PerturbValues], frame: pd.DataFrame) -> None:
    """Add a batch's ``perturb:`` columns: value counts and problems (global row numbers: the
    batch's index); :meth:`PerturbValues.check` raises them once the whole file is read."""
    for pv in acc.values():
        pv.add(frame, frame.index.to_numpy())


@dataclass
class BatchPerturb:
    """What every batch needs for ``perturb:``: the designs (from the count pass's value
    counts) and the running count of changed records per variable."""

    designs: list
    changed: np.ndarray

    @classmethod
    def of(cls, count: CellCount, config: ReleaseConfig) -> BatchPerturb | None:
        if not config.perturb:
            return None
        designs = perturb_designs(config, count.perturb_counts, count.n_records)
        return cls(designs, np.zeros(len(designs), dtype=np.int64))

    def perturbations(self) -> list:
        return [d.perturbation(int(c)) for d, c in zip(self.designs, self.changed, strict=True)]


def duplicate_ids_table(rows: np.ndarray, values: pd.Series,
                         config: ReleaseConfig) -> pd.DataFrame:
    """The duplicated ids as a row of the problems table (1-based global rows)."""
    from sdc.io.schemas import check_fix, describe_check

    id_col = str(config.input.id_column)
    return pd.DataFrame([{
        "column": id_col, "check": describe_check("field_uniqueness", id_col, config),
        "bad values": ", ".join(str(v) for v in pd.unique(values)[:5])
        + (" ..." if values.nunique() > 5 else ""),
        "count": int(rows.size),
        "first rows": ", ".join(str(r + 1) for r in rows[:5]) + (" ..." if rows.size > 5 else ""),
        "fix": check_fix("field_uniqueness", id_col, config)}])


def raise_duplicate_ids(rows: np.ndarray, values: pd.Series, config: ReleaseConfig) -> None:
    id_col = config.input.id_column
    shown = ", ".join(str(r + 1) for r in rows[:5])
    examples = [str(v) for v in pd.unique(values)[:5]]
    raise InputError(
        f"column {id_col!r} (input.id_column) must be unique: {int(rows.size)} rows share "
        f"an id with another row, e.g. {examples} (rows {shown}{' ...' if rows.size > 5 else ''}; "
        "1-based data rows): make the ids unique (one row per respondent), or remove input.id_column"
    )


def duplicate_identities(identities: list[np.ndarray] | IdentitySpill) -> np.ndarray | None:
    """The 64-bit identities that occur more than once (sorted), or None when all differ.
    Consumes (clears) ``identities``; one sort of 8 bytes per record (of a spill: of one of
    its files at a time)."""
    if isinstance(identities, IdentitySpill):
        return identities.duplicates()
    allid = (identities[0] if len(identities) == 1 else
             np.concatenate(identities) if identities else np.zeros(0, np.uint64))
    identities.clear()
    sort_inplace(allid)
    dup_mask = allid[1:] == allid[:-1]
    if not dup_mask.any():
        return None
    return np.unique(allid[1:][dup_mask])


def id_rows_with_identity(frame: pd.DataFrame, dups: np.ndarray,
                          config: ReleaseConfig) -> tuple[np.ndarray, np.ndarray]:
    """(global rows, id values) of the batch's records whose identity is one of ``dups``
    (the batch's index holds its global 0-based row numbers)."""
    hit = np.isin(np.asarray(record_identity(frame, config), np.uint64), dups)
    return frame.index.to_numpy()[hit], frame[config.input.id_column].to_numpy()[hit]


def repeated_ids(hits) -> tuple[np.ndarray, pd.Series] | None:
    """Of the records that share a 64-bit identity (``hits``: (global rows, id values) pieces
    in any order), those whose actual id value another record has too: (rows sorted, values);
    None when there are none (hash collisions only). Empty ids (reported as such) never count."""
    rows, values = [], []
    for r, v in hits:
        if len(r):
            rows.append(np.asarray(r))
            values.append(np.asarray(v))
    if not rows:
        return None
    rows_a, vals = np.concatenate(rows), pd.Series(np.concatenate(values), copy=False)
    order = np.argsort(rows_a, kind="stable")  # pieces may arrive in any order
    rows_a, vals = rows_a[order], vals.iloc[order].reset_index(drop=True)
    repeated = (vals.duplicated(keep=False) & vals.notna()).to_numpy()
    if not repeated.any():
        return None
    return rows_a[repeated], vals[repeated].reset_index(drop=True)


def plan_cells(count: CellCount, config: ReleaseConfig) -> ReleasePlan:
    """The shared planning step on the counted cell table, then the dependence check of the
    released non-key columns when the count pass counted it (raises
    :class:`~sdc.method.dependence.DependenceError`); a check still counting on its thread
    (:class:`~sdc.method.cell_passes.DependenceThread`) measures there too and its verdict is
    left to :func:`check_dependence`, which the caller runs before any file is written."""
    count.cells = derived_cells(count.cells, count.cell_codes, count.derived, config)
    plan = plan_release(partition_cells(count.cells, config), config, count.weight_total)
    if isinstance(count.dependence, DependenceThread):
        count.dependence.measure_later(lambda dep: _measure(dep, plan, count, config))
        return plan
    return check_dependence(plan, count, config)


def _measure(dep: DependenceCounter, plan: ReleasePlan, count: CellCount,
             config: ReleaseConfig) -> list:
    codes = count.cell_codes
    return measure_dependence(dep, plan, config, lambda x: np.searchsorted(codes, x))


def check_dependence(plan: ReleasePlan, count: CellCount, config: ReleaseConfig) -> ReleasePlan:
    """``plan`` with the dependence check's figures (raises
    :class:`~sdc.method.dependence.DependenceError`); the count's thread joined first when it
    counted on one (nothing to do without the check)."""
    if count.dependence is None:
        return plan
    figures = None
    if isinstance(count.dependence, DependenceThread):
        count.dependence, figures = count.dependence.result()
    if figures is None:
        figures = _measure(count.dependence, plan, count, config)
    raise_if_dependent(figures, plan, config)
    return dataclasses.replace(plan, dependence=figures)


def release_batch(frame: pd.DataFrame, record_cell: np.ndarray, cells: CellTable,
                  dplan: DrawPlan, identity: np.ndarray, config: ReleaseConfig, seed: int,
                  schema: pa.Schema, salt: int, perturb: BatchPerturb | None = None,
                  all_identity: np.ndarray | None = None) -> tuple[pa.Table, np.ndarray]:
    """Release one batch: (public table without ``record_id`` plus the two order columns,
    released_cell). ``record_cell`` is the global cell of every record of the batch;
    ``identity`` holds the unique identities of the batch's drawing records, in row order.
    With ``perturb``, the DP-PRAM of the ``perturb:`` variables follows (``all_identity``: the
    unique identities of all the batch's records; ``perturb.changed`` is added to)."""
    released = record_cell.copy()
    drawing = np.flatnonzero(dplan.cell_prb[record_cell] >= 0)
    if drawing.size:
        released[drawing] = released_cells(dplan, record_cell[drawing], identity, seed)
    out = decode_released(frame, record_cell, released, cells, config)
    if perturb is not None:
        out, ch = perturb_batch(frame, out, perturb.designs, all_identity, seed)
        perturb.changed += ch
    body = pa.schema([f for f in schema if f.name != PUBLIC_ID])
    from sdc.io.schemas import validate_public_batch

    validate_public_batch(out[body.names], config)  # the output schema, before any byte
    table = frame_to_table(out, body)
    # order determines content: only order travels; the key columns hashed once per cell
    order, _ = order_keys(table, seed, salt, frozenset(config.key_names), released)
    table = table.append_column(ORDER_COLUMNS[0], pa.array(order, pa.uint64()))
    return table, released


def sorted_buckets(bucket_files: list[Path], keys: KeySpill | None = None) -> Iterator[pa.Table]:
    """Each non-empty bucket sorted by its order key, order column dropped, ``record_id``
    numbered from 1 on across the buckets: the public records in their public order (``keys``:
    the key columns spilled as the released cell, rebuilt)."""
    next_id = 1
    for path in bucket_files:
        table = read_bucket(path, consume=True)
        if table is None or table.num_rows == 0:
            continue
        positions = pa.array(sort_positions(table.column(ORDER_COLUMNS[0]).to_numpy()))
        # the order columns are dropped before the gather, not after: 2 columns fewer to take
        table = table.drop_columns(list(ORDER_COLUMNS)).take(positions)
        ids = pa.array(np.arange(next_id, next_id + table.num_rows, dtype=np.int64))
        next_id += table.num_rows
        table = table.add_column(0, PUBLIC_ID, ids)
        yield table if keys is None else keys.rebuild(table)
        del table


def write_buckets_in_order(bucket_files: list[Path], writer: PublicWriter,
                           keys: KeySpill | None = None) -> None:
    """Sort each bucket by its order key in memory and append it; number ``record_id``.
    The next bucket is read and sorted by a background thread while this one is encoded
    (:func:`sdc.io.batches.read_ahead_frames`: one sorted bucket ahead at most)."""
    for table in read_ahead_frames(sorted_buckets(bucket_files, keys), 1):
        writer.write_table(table)
        del table


def write_table_in_order(table: pa.Table, writer: PublicWriter,
                         positions: np.ndarray | None = None) -> None:
    """The public records of ``table`` (the whole file's, with its order column) in public
    order, ``record_id`` numbered from 1: what :func:`write_buckets_in_order` writes for the
    same records (its buckets are ranges of the same order key), without the spill. One
    argsort (``positions``: :func:`public_positions` of the table, when the caller made it);
    the rows are gathered one row group at a time, the next two groups by two background
    threads while this one is encoded (:func:`sdc.io.batches.map_ahead`; kept in memory,
    ``release_frame``, the gathers are all the work)."""
    if positions is None:
        positions = public_positions(table)
    body = table.drop_columns(list(ORDER_COLUMNS))
    del table  # the order column is freed (the caller holds no other reference)

    def group(start: int) -> pa.Table:
        part = body.take(pa.array(positions[start:start + ROW_GROUP_ROWS]))
        ids = pa.array(np.arange(start + 1, start + 1 + part.num_rows, dtype=np.int64))
        return part.add_column(0, PUBLIC_ID, ids)

    for part in map_ahead(group, range(0, positions.size, ROW_GROUP_ROWS), 2, ahead=2,
                          name="sdc-public-rows"):
        writer.write_table(part)
        del part


def public_positions(table: pa.Table) -> np.ndarray:
    """The positions that put ``table``'s records (with their order column) in public order."""
    return sort_positions(table.column(ORDER_COLUMNS[0]).to_numpy())


class _Keeping:
    """A public writer that also keeps every table it writes (the SPSS/Stata files)."""

    def __init__(self, writer: PublicWriter) -> None:
        self.writer, self.tables = writer, []

    def write_table(self, table: pa.Table) -> None:
        self.writer.write_table(table)
        self.tables.append(table)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.writer, name)


def write_public_files(config: ReleaseConfig, schema: pa.Schema, buckets: list[Path],
                       out_dir: Path,
                       write: Callable[[list[Path], Any], Any] | None = None,
                       in_memory: bool = False, keys: KeySpill | None = None,
                       ) -> tuple[dict[str, Path], pa.Table | None]:
    """The public files (``microdata.parquet`` / ``.csv`` per ``output.formats``) written into
    ``out_dir`` from the spilled buckets by ``write(buckets, writer)`` (default: in public
    order, :func:`write_buckets_in_order`; a household release passes its own): public file
    name -> path, and the public records as written (``record_id`` first) when
    ``output.formats`` asks for SPSS/Stata files, else None.

    The SPSS/Stata files are written by pyreadstat from one frame
    (:func:`sdc.release.stat_files.stat_public_files`, the in-memory release's function), so
    every executor holds the public table in memory once for them, here: the Arrow tables
    of the buckets as they are written (then, in the assembler, one pandas frame of them).

    ``in_memory``: no file is written; ``({}, the public records)``, the tables the writer
    would have written (``release_frame`` without an output folder, when the public schema
    reads back from Parquet unchanged: :func:`sdc.io.public_files.parquet_keeps_types`);
    ``keys``: the key columns the buckets hold as the released cell (the default writer
    rebuilds them)."""
    if write is None:
        def write(bucket_files: list[Path], writer: Any) -> None:
            write_buckets_in_order(bucket_files, writer, keys)
    if in_memory:
        keeper = PublicWriter(schema, keep=True)
        write(buckets, keeper)
        if not keeper.kept:  # no records: the schema as written
            keeper.write_table(schema.empty_table())
        keeper.close()
        return {}, pa.concat_tables(keeper.kept)
    formats = config.output.formats if config.output is not None else ["parquet"]
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    handles: dict[str, Any] = {}
    try:
        for fmt, name in (("parquet", "microdata.parquet"), ("csv", "microdata.csv")):
            if fmt in formats:
                files[name] = out_dir / name
                # the digest for the audit record taken while the bytes are written
                handles[fmt] = HashingFile(open(files[name], "wb"), files[name])  # noqa: SIM115
        writer = PublicWriter(schema, parquet=handles.get("parquet"), csv=handles.get("csv"))
        keeping = _Keeping(writer) if {"sav", "dta"} & set(formats) else None
        try:
            write(buckets, keeping or writer)
        finally:  # also after a failure: the writer must not outlive its file handles
            writer.close()
    finally:
        for h in handles.values():
            h.close()
    if keeping is None:
        return files, None
    kept = keeping.tables
    return files, (pa.concat_tables(kept) if kept else schema.empty_table())
