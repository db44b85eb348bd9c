"""The release of a person file as one pipeline, run by any runner (docs/ARCHITECTURE.md).

Every pass is a per-batch function whose parts are merged here in input order, so every
runner gives the same files: the in-memory runner (the whole file as one batch), local
record batches (streaming) and Dask tasks on Parquet pieces. A runner has
``map(fn, shared, per_piece=None, columns=None)`` (the parts of ``fn(frame, index, *shared,
*per_piece(index))`` over the batches, in input order), ``frames(columns=None)`` (the
batches, for the rare re-reads) and the input's description (:class:`Runner`).

1. **count** (:func:`count_batch`, merged by :func:`count_cells`): the pandera checks of a
   batch, its cells, the dependence counts, ``derived:`` values, ``perturb:`` value counts,
   the identities of the id check, value ranges and the largest weight; then the shared
   plan (:func:`sdc.pipeline.kernels.plan_cells`).
2. **identities** (:func:`identity_batch`): the drawing records' identities, made distinct
   once (skipped when the count pass found the ids unique).
3. **apply** (:func:`apply_batch`): released cells and values, public order keys, spilled to
   bucket files by the top bits of the order key (piece ``index`` of every bucket), the
   records file's spill, the report aggregates; then the report refinement passes
   (:func:`refine_batch`) while the records and public files are written.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.io.spill import BucketSpill, bucket_bits
from sdc.method.cell_passes import (
    CellLocator,
    add_dependence,
    cell_table,
    new_dependence_counter,
)
from sdc.method.cells import CellTable, cell_codes, cell_key_codes, code_counts, radix_sizes
from sdc.method.dependence import checked_columns as dependence_columns
from sdc.method.dependence import schema_kinds
from sdc.method.derived import DerivedCollector
from sdc.method.designs import design_of
from sdc.method.draws import (
    DrawPlan,
    all_identities,
    drawing_identities,
    record_identity,
    unique_identities,
)
from sdc.method.partition import check_columns
from sdc.method.perturb import PerturbValues
from sdc.method.plan import draw_plan
from sdc.method.weighted import WeightSums
from sdc.pipeline.count_parts import CountMerge, raise_problems
from sdc.pipeline.count_parts import CountPart as BatchCountPart
from sdc.pipeline.kernels import (
    BatchPerturb,
    CellCount,
    ReleasedRecords,
    ReleaseOutcome,
    add_perturb_counts,
    duplicate_identities,
    duplicate_ids_table,
    id_rows_with_identity,
    plan_cells,
    raise_duplicate_ids,
    release_batch,
    repeated_ids,
    write_public_files,
    write_table_in_order,
)
from sdc.pipeline.order import ORDER_COLUMNS, order_salt
from sdc.pipeline.records_file import RecordsSpill, write_records, write_records_from_buckets
from sdc.pipeline.report_parts import add_apply_batch, add_refine_batch, new_accumulator
from sdc.reports.intruder import plan_design, start_intruder

__all__ = ["CountPart", "Runner", "apply_batch", "count_batch", "count_cells",
           "identity_batch", "read_columns", "refine_batch", "release_persons"]


class Runner(Protocol):
    """What the pipelines need of an executor's runner."""

    #: how the problems message says the input was checked ("in batches", "per partition";
    #: empty: as one frame)
    checked: str
    #: where the passes run, for the progress messages ("": here; " on the cluster")
    where: str
    #: the folder the spills go to (None: the system's temporary folder)
    scratch: str | None
    #: one batch holds the whole file in memory: the apply pass keeps its records there and
    #: the files are written from them (the same bytes, no spill); absent means False
    whole: bool

    def map(self, fn: Callable[..., Any], shared: tuple,
            per_piece: Callable[[int], tuple] | None = None,
            columns: list[str] | None = None) -> Iterator[Any]: ...

    def frames(self, columns: list[str] | None = None) -> Iterator[pd.DataFrame]: ...

    def input_columns(self) -> list[str]: ...

    def row_count(self) -> int | None: ...

    def public_schema(self) -> pa.Schema: ...

    def numeric_columns(self) -> list[str]: ...

    def value_ranges(self, columns: list[str]) -> dict[str, tuple[float, float, bool]]: ...

    def is_integer(self, column: str) -> bool: ...


# -- pass 1: count -------------------------------------------------------------------------------
@dataclass
class CountPart(BatchCountPart):
    """One batch's part of the person count pass: the shared part
    (:class:`sdc.pipeline.count_parts.CountPart`), the dependence counts and W_j per cell."""

    dependence: Any = None
    weight_sums: WeightSums | None = None  #: W_j per cell code (``risk.weighted``)


def read_columns(config: ReleaseConfig, names: list[str], dependence: bool = False,
                 value_columns: list[str] | None = None) -> list[str]:
    """The columns the count pass reads: those the input schema checks (keys, id, weight,
    dropped identifiers), ``perturb:`` and ``derived:`` columns, with ``dependence`` every
    released non-key column, and ``value_columns``, in input order."""
    need = [*config.key_names, config.input.id_column, config.input.weight, *config.input.drop,
            *(config.perturb or {}), *config.derived, *(value_columns or [])]
    if dependence:
        need += dependence_columns(names, config)
    keep = {n for n in need if n}
    return [c for c in names if c in keep]


def count_batch(frame: pd.DataFrame, index: int, config: ReleaseConfig, columns: list[str],
                measure: list[str], dependence: bool, validate: bool,
                kinds: dict[str, str] | None = None) -> CountPart:
    """Pass 1 on one batch: its pandera problems, or its cell counts, dependence counts,
    ``derived:`` values, ``perturb:`` value counts, ranges of ``measure`` and largest weight;
    with an id column its identities (also from a batch with problems)."""
    weight = config.input.weight
    part = CountPart.start(frame, config, validate)
    if part.problems is not None:
        return part
    # with the dependence check, the key codes of every record are kept for it
    codes, keys = (cell_key_codes(frame, config) if dependence
                   else (cell_codes(frame, config), None))
    part.codes, part.counts = code_counts(codes, radix_sizes(config))
    if dependence:
        part.dependence = new_dependence_counter(columns, config, kinds)
        add_dependence(part.dependence, frame, codes, config, keys)
        del keys
    if config.derived:
        part.derived = DerivedCollector(list(config.derived))
        part.derived.add(frame, codes)
    part.perturb = {v: PerturbValues(v, config) for v in (config.perturb or {})}
    add_perturb_counts(part.perturb, frame)
    part.measure(frame, measure, weight)
    if design_of(config).weighted and weight is not None:
        part.weight_sums = WeightSums.of(codes, frame[weight].to_numpy(np.float64))
    return part


def count_cells(runner: Runner, config: ReleaseConfig, *, validate: bool = True,
                value_columns: list[str] | None = None, dependence: bool = True) -> CellCount:
    """The count pass: :func:`count_batch` over every batch, merged in input order.

    Raises :class:`InputError` with every problem of the whole file (global 1-based rows, the
    duplicated ids among them), for an empty file, or for equal ids; ``value_columns``: numeric
    columns whose smallest and largest value are measured (:attr:`CellCount.value_ranges`)."""
    columns = runner.input_columns()
    measure = [c for c in (value_columns or []) if c in columns]
    id_col, weight = config.input.id_column, config.input.weight
    # 8 bytes per record for the id check, preallocated when the row count is known
    merged = CountMerge({v: PerturbValues(v, config) for v in (config.perturb or {})},
                        DerivedCollector(list(config.derived)) if config.derived else None,
                        runner.row_count() if id_col is not None else None)
    # the columns that pair in the dependence check: from the public schema, the same on
    # every executor (never from a batch's types)
    kinds = schema_kinds(runner.public_schema()) if dependence else None
    dep = new_dependence_counter(columns, config, kinds) if dependence else None
    wsums = WeightSums() if design_of(config).weighted and weight is not None else None
    read = read_columns(config, columns, dependence, measure)
    for part in runner.map(count_batch, (config, columns, measure, dependence, validate, kinds),
                           columns=read):
        if merged.add(part):
            if dep is not None:
                dep.merge(part.dependence)
            if wsums is not None and part.weight_sums is not None:
                wsums.merge(part.weight_sums)
    merged.end()
    if merged.problems.rows:
        found = _duplicated(runner, config, merged.idents)
        if found is not None and found is not True:
            merged.problems.add(duplicate_ids_table(*found, config), 0)
        raise_problems(merged.problems, config, runner.checked)
    if merged.counted:
        check_columns(pd.DataFrame(columns=columns), config)
    if merged.n == 0:
        raise InputError(f"input file {str(config.input_path)!r} has no records; nothing to "
                         "release")
    for pv in merged.perturb.values():
        pv.check()
    unique = _unique_ids(runner, config, merged.idents)
    idents, n = merged.idents, merged.n
    raw = (idents[0] if getattr(runner, "whole", False) and len(idents) == 1
           and idents[0].size == n else None)  # one batch: its identities, in input order
    idents.clear()
    codes, counts = merged.counter.result()
    ranges = {c: (lo, hi, runner.is_integer(c)) for c, (lo, hi) in merged.ranges().items()}
    return CellCount(cell_table(codes, counts, config), codes, n, columns,
                     id_col is not None and unique,
                     merged.weight_max if weight is not None else None,
                     {v: pv.value_counts() for v, pv in merged.perturb.items()}, ranges, dep,
                     merged.derived, None if wsums is None else wsums.result(codes), raw)


def _duplicated(runner: Runner, config: ReleaseConfig,
                idents: list[np.ndarray]) -> tuple[np.ndarray, pd.Series] | None | bool:
    """The duplicated ids (rows, values): the ids must be unique over the whole file, so the
    64-bit identities are sorted and equal ones confirmed on the id values (one more read of
    the id column): a hash collision is never reported as a duplicate. True: all identities
    differ; None: equal identities of different ids only."""
    id_col = config.input.id_column
    if id_col is None or not idents or not sum(i.size for i in idents):
        return True
    dups = duplicate_identities(idents)
    if dups is None:
        return True
    return repeated_ids(id_rows_with_identity(f, dups, config)
                        for f in runner.frames(columns=[id_col]))


def _unique_ids(runner: Runner, config: ReleaseConfig, idents: list[np.ndarray]) -> bool:
    """Raise for duplicated ids; True when every record's identity is distinct (False: 64-bit
    collisions only, the draws need the global identity step, or no id column)."""
    if config.input.id_column is None:
        return True
    found = _duplicated(runner, config, idents)
    if found is None:
        return False
    if found is not True:
        raise_duplicate_ids(*found, config)
    return True


# -- pass 2: identities --------------------------------------------------------------------------
def identity_batch(frame: pd.DataFrame, index: int, config: ReleaseConfig, locate: CellLocator,
                   dplan: DrawPlan, every: bool) -> tuple[np.ndarray, np.ndarray]:
    """Pass 2 on one batch: the identities (and tiebreaks) of its drawing records, of all
    its records with ``every`` (``perturb:`` draws for every record)."""
    rc = locate(cell_codes(frame, config))
    return (all_identities if every else drawing_identities)(frame, rc, dplan, config)


def _identity_columns(config: ReleaseConfig, columns: list[str]) -> list[str] | None:
    """Columns pass 2 reads: the keys and the id column when there is one (else all)."""
    if config.input.id_column is None:
        return None
    need = set(config.key_names) | {config.input.id_column}
    return [c for c in columns if c in need]


# -- pass 3: apply -------------------------------------------------------------------------------
@dataclass
class ApplyPart:
    """One batch's part of the apply pass (its records are in the spill files, or with
    ``keep`` in ``kept``)."""

    frequency: np.ndarray
    changed: np.ndarray
    accumulator: Any
    perturb_changed: np.ndarray | None
    #: (record cell, released cell, public table in input order): only when asked to keep
    kept: tuple[np.ndarray, np.ndarray, pa.Table] | None = None
    #: (public table with its order column, raw identities or None, true cells, released
    #: cells) of a runner that holds the whole file (:attr:`Runner.whole`): not spilled
    whole_kept: tuple | None = None


def apply_batch(frame: pd.DataFrame, index: int, config: ReleaseConfig, seed: int,
                locate: CellLocator, cells: CellTable, dplan: DrawPlan, schema: pa.Schema,
                salt: int, bits: int, scratch: str, records: bool, whole: bool, template: Any,
                perturb: BatchPerturb | None, keep: bool,
                identity: np.ndarray | None, raw_identity: np.ndarray | None = None
                ) -> ApplyPart:
    """Pass 3 on one batch: its released records spilled into ``scratch/public`` by the top
    bits of the public order key (and ``scratch/records`` for the records file) as piece
    ``index``, or with ``whole`` (a runner holding the whole file) returned in the part;
    returns its released frequencies, changed records per PRB, report part and ``perturb:``
    changes. ``identity``: the batch's distinct identities from pass 2 (of all records with
    ``perturb``, else of the drawing ones); None: the raw ones (checked unique);
    ``raw_identity``: the batch's raw identities when the count pass kept them.
    ``keep``: the part also holds the batch's cells and public table (:attr:`ApplyPart.kept`)."""
    rc = locate(cell_codes(frame, config))
    drawing = dplan.cell_prb[rc] >= 0
    raw = None
    if records or identity is None:
        raw = np.asarray(record_identity(frame, config) if raw_identity is None
                         else raw_identity, np.uint64)
    every_ident = None
    if perturb is not None:
        perturb = BatchPerturb(perturb.designs, np.zeros_like(perturb.changed))
        every_ident = raw if identity is None else identity
        ident = every_ident[drawing]
    elif identity is not None:
        ident = identity
    else:
        ident = raw[drawing] if drawing.any() else np.zeros(0, np.uint64)
    table, rel = release_batch(frame, rc, cells, dplan, ident, config, seed, schema, salt,
                               perturb, every_ident)
    kept = (rc, rel, table.drop_columns(list(ORDER_COLUMNS))) if keep else None
    whole_kept = None
    if whole:
        whole_kept = (table, raw if records else None, rc, rel)
    else:
        BucketSpill(Path(scratch) / "public", bits, piece=index).add(
            table, table.column(ORDER_COLUMNS[0]).to_numpy())
        if records:
            RecordsSpill(Path(scratch) / "records", bits, piece=index).add(raw, rc, rel)
    del table
    part = template.spawn()
    add_apply_batch(part, frame, rc, rel, config)
    n_prb = dplan.prb_theta.size
    moved = rel != rc
    changed = (np.bincount(dplan.cell_prb[rc[moved]], minlength=n_prb) if moved.any()
               else np.zeros(n_prb, dtype=np.int64))
    return ApplyPart(np.bincount(rel, minlength=cells.n_cells), changed, part,
                     perturb.changed if perturb is not None else None, kept, whole_kept)


def refine_batch(frame: pd.DataFrame, index: int, config: ReleaseConfig, locate: CellLocator,
                 template: Any, moved_rows: np.ndarray, moved_cells: np.ndarray) -> Any:
    """One batch of a report refinement pass (:mod:`sdc.pipeline.report_parts`): a partial
    accumulator, given the kept moved records of the batch's rows."""
    part = template.spawn()
    part.moved_rows, part.moved_cells = [moved_rows], [moved_cells]
    add_refine_batch(part, frame, locate, config)
    part.moved_rows, part.moved_cells = [], []
    return part


class _Refinement:
    """The report refinement passes in a thread, so that they read the input (or wait for
    the cluster) while the records and public files are written; the accumulator belongs to
    the thread until :meth:`result`."""

    def __init__(self, runner: Runner, acc: Any, locate: CellLocator, config: ReleaseConfig,
                 offsets: list[int]) -> None:
        from sdc.pipeline.report_parts import refine_columns

        self._stop = threading.Event()
        self._error: BaseException | None = None

        def run() -> None:
            try:
                more = acc.start_refinement()
                while more and not self._stop.is_set():
                    template = acc.spawn()
                    parts = runner.map(refine_batch, (config, locate, template),
                                       lambda k: acc.moved_slice(offsets[k], offsets[k + 1]),
                                       columns=refine_columns(acc, config))
                    for part in parts:
                        if self._stop.is_set():
                            return
                        acc.merge(part)
                    more = acc.end_refine_pass()
            except BaseException as exc:  # re-raised by result() in the caller's thread
                self._error = exc

        self._thread = threading.Thread(target=run, name="sdc-report-refinement", daemon=True)
        self._thread.start()

    def result(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error

    def cancel(self) -> None:
        self._stop.set()
        self._thread.join()


def _write_kept(box: list[tuple], config: ReleaseConfig, schema: pa.Schema, dplan: DrawPlan,
                out_dir: Path, records_path: Path | None,
                say: Callable[[str], None]) -> tuple[dict[str, Path], Any, Path | None]:
    """The public files and the records file from the records the apply pass kept in memory
    (:attr:`Runner.whole`; ``box`` holds them and is emptied, so the public table is freed
    once written): the bytes the spilled buckets give, without the spill."""
    table, raw, rc, rel = box.pop()
    tables = [table]
    del table
    say("writing the public file in order")
    files, public_table = write_public_files(
        config, schema, [], out_dir, lambda _, writer: write_table_in_order(tables.pop(), writer))
    records_file = None
    if records_path is not None:
        say("writing the internal records file")
        records_file = write_records(raw, rc, rel, records_path, dplan.cell_id, dplan.cell_prb)
    return files, public_table, records_file


def release_persons(runner: Runner, config: ReleaseConfig, seed: int, out_dir: Path, *,
                    tmp_dir: Path | str | None = None,
                    progress: Callable[[str], None] | None = None,
                    records_path: Path | None = None, where: str = "",
                    keep: bool = False, intruder: bool = True) -> ReleaseOutcome:
    """Release the person file of ``config`` with ``runner``: the public files into
    ``out_dir`` (``microdata.parquet`` / ``.csv`` per ``output.formats``), the internal
    ``records.parquet`` to ``records_path`` when given; ``keep``: the outcome also holds the
    released records in input order (:attr:`ReleaseOutcome.released`, the library's
    ``release_frame``). ``intruder``: a release (``records_path`` given) starts risk.json's
    intruder simulation in a thread; False when no report will take it (``release_frame``).

    Raises :class:`InputError` (every input problem with global rows), ``SmallBlockError``
    and ``DependenceError`` as the plan says."""
    if config.input.household_id is not None:
        raise InputError("a household file is released by sdc.pipeline.households, not "
                         "by release_persons")
    say = progress or (lambda s: None)
    say(f"counting cells{where} (pass 1 of 3)")
    numeric = runner.numeric_columns()
    stats = runner.value_ranges(numeric)
    count = count_cells(runner, config, value_columns=[c for c in numeric if c not in stats])
    plan = plan_cells(count, config)
    cells = count.cells
    dplan = draw_plan(plan, config)
    if records_path is not None and intruder:  # a release (not a plan): risk.json's intruder, from
        # the plan alone, runs in a thread while the records are released and written
        start_intruder(plan.partitioned.cells.frequency, plan.cell_prb, plan.blocks, seed=seed,
                       xi=float(plan.partitioned.xi), **plan_design(plan, plan.cell_prb))
    schema = runner.public_schema()
    salt = order_salt(cells)
    locate = CellLocator(count.cell_codes, config)
    perturb = BatchPerturb.of(count, config)
    every = perturb is not None  # perturb: draws for every record

    say(f"record identities{where}" + ("" if count.identities_unique else " (pass 2 of 3)"))
    identity_of = _identity_pass(runner, config, count, locate, dplan, every)

    say(f"releasing records{where} (pass 3 of 3)")
    bits = bucket_bits(count.n_records)
    tmp = Path(tempfile.mkdtemp(prefix="sdc-buckets-", dir=tmp_dir))
    refinement = None
    try:
        acc = new_accumulator(cells, config, count.weight_max, {**stats, **count.value_ranges},
                              numeric)
        whole = bool(getattr(runner, "whole", False))
        shared = (config, seed, locate, cells, dplan, schema, salt, bits, str(tmp),
                  records_path is not None, whole, acc.spawn(), perturb, keep)
        released_frequency, changed, offsets, kept, box = _apply_pass(
            runner, shared, identity_of, acc, perturb, cells.n_cells,
            len(plan.block_plan.blocks))
        # the report refinement passes run while the files below are written
        refinement = _Refinement(runner, acc, locate, config, offsets)
        if whole:  # the public file first: its table's memory is free for the records file's
            files, public_table, records_file = _write_kept(box, config, schema, dplan,
                                                            out_dir, records_path, say)
        else:
            files, public_table, records_file = _write_spilled(tmp, bits, config, schema,
                                                               dplan, out_dir, records_path, say)
    except BaseException:
        if refinement is not None:
            refinement.cancel()
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if acc.numeric:
        say("numeric summaries for the reports (finishing the passes run alongside the writing)")
    refinement.result()
    return ReleaseOutcome.of_plan(plan, count.n_records, released_frequency, changed, schema,
                                files=files, accumulator=acc, records_file=records_file,
                                dp_perturbations=perturb.perturbations() if perturb else [],
                                public_table=public_table, config=config,
                                released=ReleasedRecords.of(kept) if keep else None,
                                counted=count)


def _identity_pass(runner: Runner, config: ReleaseConfig, count: CellCount,
                   locate: CellLocator, dplan: DrawPlan,
                   every: bool) -> Callable[[int], tuple]:
    """Pass 2 (:func:`identity_batch`, skipped when the count pass found the ids unique):
    the drawing records' identities (all records' with ``every``) made distinct once;
    returns batch ``k``'s ``(distinct identities or None, raw identities or None)``."""
    sizes: list[int] = []
    identity = None
    if (every or (dplan.cell_prb >= 0).any()) and not count.identities_unique:
        ids, ties = [], []
        for i, t in runner.map(identity_batch, (config, locate, dplan, every),
                               columns=_identity_columns(config, count.columns)):
            ids.append(i)
            ties.append(t)
            sizes.append(i.size)
        identity = unique_identities(np.concatenate(ids), np.concatenate(ties))
        del ids, ties
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)

    def identity_of(k: int) -> tuple:
        raw = count.raw_identity  # kept only by a runner of one batch
        if identity is None:
            return (None, raw)
        return (identity[starts[k]:starts[k + 1]], raw)

    return identity_of


def _apply_pass(runner: Runner, shared: tuple, identity_of: Callable[[int], tuple], acc: Any,
                perturb: BatchPerturb | None, n_cells: int, n_blocks: int
                ) -> tuple[np.ndarray, np.ndarray, list[int], list[tuple], list[tuple | None]]:
    """Pass 3 (:func:`apply_batch` over every batch, merged in input order into ``acc`` and
    ``perturb``): the released frequency of every cell, the changed records per PRB, the
    batches' first released rows, the kept parts (``keep``) and, in a one-item list that
    :func:`_write_kept` empties, the records of a runner holding the whole file."""
    released_frequency = np.zeros(n_cells, dtype=np.int64)
    changed = np.zeros(n_blocks, dtype=np.int64)
    offsets = [0]
    kept: list[tuple] = []
    whole_kept = None
    for part in runner.map(apply_batch, shared, identity_of):
        if part.kept is not None:
            kept.append(part.kept)
        released_frequency += part.frequency
        changed += part.changed
        if part.perturb_changed is not None:
            perturb.changed += part.perturb_changed
        offsets.append(offsets[-1] + int(part.frequency.sum()))
        acc.merge(part.accumulator)
        whole_kept = part.whole_kept
        del part
    return released_frequency, changed, offsets, kept, [whole_kept]


def _write_spilled(tmp: Path, bits: int, config: ReleaseConfig, schema: pa.Schema,
                   dplan: DrawPlan, out_dir: Path, records_path: Path | None,
                   say: Callable[[str], None]) -> tuple[dict[str, Path], Any, Path | None]:
    """The records file (when asked) and the public files from the buckets the apply pass
    spilled into ``tmp``."""
    records_file = None
    if records_path is not None:
        say("writing the internal records file")
        records_file = write_records_from_buckets(
            RecordsSpill(tmp / "records", bits, piece=0).buckets(), records_path,
            dplan.cell_id, dplan.cell_prb)
    say("writing the public file in order")
    files, public_table = write_public_files(
        config, schema, BucketSpill(tmp / "public", bits, piece=0).buckets(), out_dir)
    return files, public_table, records_file
