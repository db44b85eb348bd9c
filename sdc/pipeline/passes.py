"""The one set of passes of the release pipeline (docs/ARCHITECTURE.md): count, identity, apply
and refine, each a per-batch function a runner maps (:func:`count_batch`,
:func:`identity_batch`, :func:`apply_batch`, :func:`refine_batch`) and a driver merging the
parts in input order (:func:`count_pass`, :func:`identity_pass`, :func:`apply_pass`,
:class:`Refinement`), for person and household files alike.

What a pass does to a batch beyond what every file shares is the business of the file's
stage object (:class:`Stage`): the person stage (:class:`sdc.pipeline.release.PersonStage`)
or, for a household file, the household stage before it
(:class:`sdc.pipeline.households.HouseholdFileStage`: the group ids, the household cell, the
composition, the released household columns). What the passes share lives here: the count
part started with the pandera checks and measured (:class:`~sdc.pipeline.count_parts.CountPart`),
the whole-file problems, empty-file and duplicate-id refusals, the identities made distinct
over the file, the released records spilled by bucket key (or kept whole), the records file's
spill, the report aggregates and the refinement passes.
"""

from __future__ import annotations

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
from sdc.io.spill import BucketSpill, IdentitySpill
from sdc.method.cell_passes import CellLocator
from sdc.method.draws import unique_identities
from sdc.pipeline.count_parts import CountMerge, CountPart, raise_problems
from sdc.pipeline.kernels import (
    duplicate_identities,
    duplicate_ids_table,
    id_rows_with_identity,
    repeated_ids,
    write_public_files,
)
from sdc.pipeline.key_spill import KeySpill
from sdc.pipeline.order import ORDER_COLUMNS
from sdc.pipeline.records_file import RecordsSpill, write_records_from_buckets
from sdc.pipeline.report_parts import add_apply_batch, add_refine_batch, refine_columns

__all__ = ["ApplyPart", "ApplyTarget", "DeferredReports", "Identities", "IdentityPart",
           "Refinement", "Released", "Runner", "Stage", "apply_batch", "apply_pass",
           "count_batch", "count_pass", "duplicated_ids", "identity_batch", "identity_pass",
           "refine_batch", "refuse_empty", "report_batch", "write_spilled"]


class Runner(Protocol):
    """What the pipeline needs of an executor's runner."""

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


@dataclass
class IdentityPart:
    """One batch's part of the identity pass: the identities and tiebreaks of its drawing
    records (``ids``, ``ties``), every record's when the stage perturbs per record
    (``every``; None: not needed) and what the stage keeps beside (``extra``)."""

    ids: np.ndarray
    ties: np.ndarray
    every: tuple[np.ndarray, np.ndarray] | None = None
    extra: Any = None


@dataclass
class Released:
    """What a stage releases of one batch: the public table with its order column, every
    record's cell and released cell in the release's cell table, the spill key of every
    record (its top bits are the public bucket), the raw identities for the records file
    (None: no records file) and what the stage returns beside (``extra``)."""

    table: pa.Table
    cell: np.ndarray
    released: np.ndarray
    spill_key: np.ndarray
    raw: np.ndarray | None
    extra: Any = None


class Stage(Protocol):
    """A file's stages as the passes see them (:class:`sdc.pipeline.release.PersonStage`, or
    :class:`sdc.pipeline.households.HouseholdFileStage` for a household file): what each pass does
    to a batch beyond what every file shares."""

    config: ReleaseConfig
    #: the part class of the count pass (:class:`~sdc.pipeline.count_parts.CountPart`'s)
    part_type: type[CountPart]
    #: the located record cells (identity, apply and refine passes)
    locate: CellLocator | None

    def count(self, frame: pd.DataFrame, part: CountPart) -> None: ...

    def identities(self, frame: pd.DataFrame) -> IdentityPart: ...

    def release(self, frame: pd.DataFrame, records: bool, *per_piece: Any) -> Released: ...

    def report_cells(self, frame: pd.DataFrame) -> np.ndarray: ...


# -- pass 1: count -------------------------------------------------------------------------------
def count_batch(frame: pd.DataFrame, index: int, stage: Stage, measure: list[str],
                validate: bool) -> CountPart:
    """Pass 1 on one batch: its pandera problems (``validate``), or what the stage counts
    (cells, ``perturb:`` and ``derived:`` values, the stage's own aggregates) and the ranges
    of ``measure`` and the largest weight; with an id column its identities (also from a
    batch with problems)."""
    part = stage.part_type.start(frame, stage.config, validate)
    if part.problems is None:
        stage.count(frame, part)
        part.measure(frame, measure, stage.config.input.weight)
    return part


def count_pass(runner: Runner, stage: Stage, merged: CountMerge, merge: Callable[[Any], None],
               measure: list[str], *, validate: bool = True, columns: list[str] | None = None,
               checked: str | None = None) -> CountMerge:
    """Pass 1: :func:`count_batch` over every batch merged in input order into ``merged`` (the
    stage's own aggregates by ``merge(part)``, while no batch has problems); raises
    :class:`InputError` with every problem of the whole file (global 1-based rows, the
    duplicated ids among them; ``checked``: how the message says the input was checked,
    default the runner's)."""
    # the passes' one lazy import (pandera, ~0.4 s cold), made here in the caller's thread:
    # a runner then runs every batch on its threads, the first one too
    import sdc.io.schemas  # noqa: F401
    for part in runner.map(count_batch, (stage, measure, validate), columns=columns):
        if merged.add(part):
            merge(part)
    merged.end()
    if merged.problems.rows:
        found = duplicated_ids(runner, stage.config, merged.idents)
        if found is not None and found is not True:
            merged.problems.add(duplicate_ids_table(*found, stage.config), 0)
        raise_problems(merged.problems, stage.config,
                       runner.checked if checked is None else checked)
    return merged


def refuse_empty(merged: CountMerge, config: ReleaseConfig) -> None:
    """Raise :class:`InputError` for a file without records."""
    if merged.n == 0:
        raise InputError(f"input file {str(config.input_path)!r} has no records; nothing to "
                         "release")


def duplicated_ids(runner: Runner, config: ReleaseConfig, idents: list[np.ndarray] | IdentitySpill,
                   duplicates: np.ndarray | None = None) -> tuple[np.ndarray, pd.Series] | None | bool:
    """The duplicated ids (rows, values): the ids must be unique over the whole file, so the
    64-bit identities are sorted (``duplicates``: the repeated identities, found by the
    caller's sort; ``idents`` is then not read) and equal ones confirmed on the id values (one
    more read of the id column): a hash collision is never reported as a duplicate. True: all
    identities differ (or no id column); None: equal identities of different ids only."""
    id_col = config.input.id_column
    if duplicates is not None:
        dups = duplicates if id_col is not None and duplicates.size else None
    else:
        spilled = isinstance(idents, IdentitySpill)
        if id_col is None or not (idents.size if spilled else sum(i.size for i in idents)):
            if spilled:
                idents.clear()
            return True
        dups = duplicate_identities(idents)
    if dups is None:
        return True
    return repeated_ids(id_rows_with_identity(f, dups, config)
                        for f in runner.frames(columns=[id_col]))


# -- pass 2: identities --------------------------------------------------------------------------
def identity_batch(frame: pd.DataFrame, index: int, stage: Stage) -> IdentityPart:
    """Pass 2 on one batch: the identities of its drawing records and what the stage keeps."""
    return stage.identities(frame)


@dataclass
class Identities:
    """Pass 2 merged: the drawing records' distinct identities (``ident``, batch ``k``'s from
    ``starts[k]``) and every record's when the stage perturbs per record (``every``)."""

    ident: np.ndarray
    starts: np.ndarray
    every: np.ndarray | None = None

    def of(self, k: int) -> np.ndarray:
        """Batch ``k``'s distinct drawing identities."""
        return self.ident[self.starts[k]:self.starts[k + 1]]


def identity_pass(runner: Runner, stage: Stage, keep: Callable[[Any, int], None] | None = None,
                  columns: list[str] | None = None) -> Identities:
    """Pass 2: :func:`identity_batch` over every batch, the identities made distinct over the
    file; ``keep(extra, listed)`` takes what the stage kept of each batch (``listed``: the
    drawing identities of the batches before it)."""
    ids, ties, every_ids, every_ties = [], [], [], []
    listed = 0
    for part in runner.map(identity_batch, (stage,), columns=columns):
        if keep is not None:
            keep(part.extra, listed)
        listed += part.ids.size
        ids.append(part.ids)
        ties.append(part.ties)
        if part.every is not None:
            every_ids.append(part.every[0])
            every_ties.append(part.every[1])
    ident = unique_identities(np.concatenate(ids), np.concatenate(ties))
    starts = np.concatenate([[0], np.cumsum([x.size for x in ids])]).astype(int)
    del ids, ties
    every = (unique_identities(np.concatenate(every_ids), np.concatenate(every_ties))
             if every_ids else None)
    return Identities(ident, starts, every)


# -- pass 3: apply -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ApplyTarget:
    """Where the apply pass puts a batch's released records: spilled into ``scratch/public``
    (and ``scratch/records`` with ``records``) by the top ``bits`` of their spill keys, or with
    ``whole`` (a runner holding the whole file) returned in the part; ``keep``: the part also
    holds the batch's cells and public table; ``template``: the report accumulator to spawn;
    ``keys``: the key columns spilled as the released cell (:mod:`sdc.pipeline.key_spill`);
    ``n_cells``: the cell table's size (the records spill's cell type, :class:`RecordsSpill`)."""

    scratch: str
    bits: int
    records: bool
    whole: bool
    keep: bool
    template: Any
    keys: KeySpill | None = None
    n_cells: int | None = None


@dataclass
class ApplyPart:
    """One batch's part of the apply pass: its rows, report part, what the stage returned
    (``extra``), the kept (cell, released cell, public table) with ``keep``, and the records of
    a runner holding the whole file (public table with its order column, raw identities,
    cells, released cells)."""

    n: int
    accumulator: Any
    extra: Any
    kept: tuple[np.ndarray, np.ndarray, pa.Table] | None = None
    whole_kept: tuple | None = None


def apply_batch(frame: pd.DataFrame, index: int, stage: Stage, target: ApplyTarget,
                *per_piece: Any) -> ApplyPart:
    """Pass 3 on one batch: the stage's released records spilled as piece ``index`` (or kept
    whole), the records file's spill, the batch's report part (``per_piece``: the batch's
    identities from pass 2, as the stage takes them)."""
    r = stage.release(frame, target.records, *per_piece)
    kept = (r.cell, r.released, r.table.drop_columns(list(ORDER_COLUMNS))) if target.keep else None
    whole_kept = None
    if target.whole:
        whole_kept = (r.table, r.raw, r.cell, r.released)
    else:
        table = r.table if target.keys is None else target.keys.slim(r.table, r.released)
        BucketSpill(Path(target.scratch) / "public", target.bits, piece=index).add(
            table, r.spill_key)
        del table
        if target.records:
            RecordsSpill(Path(target.scratch) / "records", target.bits, piece=index,
                         n_cells=target.n_cells).add(
                r.raw, r.cell, r.released)
    r.table = None  # type: ignore[assignment]
    part = None
    if target.template is not None:  # None: the reports deferred (DeferredReports)
        part = target.template.spawn()
        add_apply_batch(part, frame, r.cell, r.released, stage.config)
    return ApplyPart(len(frame), part, r.extra, kept, whole_kept)


def report_batch(frame: pd.DataFrame, index: int, stage: Stage, template: Any,
                 record_cell: np.ndarray, released_cell: np.ndarray) -> Any:
    """The report part :func:`apply_batch` adds, from a batch's kept cells and released
    cells (:class:`DeferredReports`)."""
    part = template.spawn()
    add_apply_batch(part, frame, record_cell, released_cell, stage.config)
    return part


def apply_pass(runner: Runner, stage: Stage, target: ApplyTarget,
               per_piece: Callable[[int], tuple], acc: Any, merge: Callable[[Any], None]
               ) -> tuple[list[int], list[tuple], list[tuple | None]]:
    """Pass 3: :func:`apply_batch` over every batch, merged in input order (the report parts
    into ``acc``, what the stage returned by ``merge(extra)``): the batches' first rows, the
    kept parts (``keep``) and, in a one-item list the writer empties, the records of a runner
    holding the whole file."""
    offsets = [0]
    kept: list[tuple] = []
    whole_kept = None
    for part in runner.map(apply_batch, (stage, target), per_piece):
        if part.kept is not None:
            kept.append(part.kept)
        merge(part.extra)
        offsets.append(offsets[-1] + part.n)
        if part.accumulator is not None:
            acc.merge(part.accumulator)
        whole_kept = part.whole_kept
        del part
    return offsets, kept, [whole_kept]


def write_spilled(target: ApplyTarget, config: ReleaseConfig, schema: pa.Schema, out_dir: Path,
                  records_path: Path | None, cell_id: np.ndarray, cell_prb: np.ndarray,
                  say: Callable[[str], None],
                  write: Callable[[list[Path], Any], Any] | None = None,
                  order: str = "in order") -> tuple[dict[str, Path], Any, Path | None]:
    """The records file (when asked: the cells' identities ``cell_id`` and PRBs ``cell_prb``)
    and the public files (``write(buckets, writer)``: the file's public order, default the
    keyed order) from the buckets the apply pass spilled into ``target.scratch``."""
    tmp = Path(target.scratch)
    records_file = None
    if records_path is not None:
        say("writing the internal records file")
        records_file = write_records_from_buckets(
            RecordsSpill(tmp / "records", target.bits, piece=0).buckets(), records_path,
            cell_id, cell_prb)
    say(f"writing the public file {order}")
    files, public_table = write_public_files(
        config, schema, BucketSpill(tmp / "public", target.bits, piece=0).buckets(), out_dir,
        write, keys=target.keys)
    return files, public_table, records_file


# -- refinement passes ---------------------------------------------------------------------------
def refine_batch(frame: pd.DataFrame, index: int, stage: Stage, template: Any,
                 moved_rows: np.ndarray, moved_cells: np.ndarray) -> Any:
    """One batch of a report refinement pass (:mod:`sdc.pipeline.report_parts`): a partial
    accumulator, given the kept moved records of the batch's rows."""
    part = template.spawn()
    part.moved_rows, part.moved_cells = [moved_rows], [moved_cells]
    add_refine_batch(part, frame, stage.locate, stage.config, stage.report_cells(frame))
    part.moved_rows, part.moved_cells = [], []
    return part


class DeferredReports:
    """The report accumulator of a release that kept its records (``release_frame``) and
    whose caller may never build the reports: filled on first use, from the kept cells, by
    the apply pass's report parts (:func:`report_batch`, merged in input order) and the
    refinement passes, the same sums as a release that fills it while it releases. Holds the
    runner (the input) until then. Any attribute is the filled accumulator's."""

    def __init__(self, runner: Runner, acc: Any, stage: Stage, offsets: list[int],
                 kept: list[tuple]) -> None:
        self._todo: tuple | None = (runner, acc, stage, offsets, kept)
        self._acc = acc

    def filled(self) -> Any:
        """The accumulator, filled."""
        if self._todo is not None:
            runner, acc, stage, offsets, kept = self._todo
            Refinement(runner, acc, stage, offsets, kept).result()
            self._todo = None
        return self._acc

    def __getattr__(self, name: str) -> Any:
        return getattr(self.filled(), name)


class Refinement:
    """The report refinement passes (:func:`refine_batch`) in a thread, so that they read the
    input (or wait for the cluster) while the records and public files are written; the
    accumulator belongs to the thread until :meth:`result`. ``kept``: the apply pass's
    (record cells, released cells) of every batch, whose report parts (:func:`report_batch`)
    the thread sums first, merged in input order (a runner holding the whole file: the
    apply pass's report sums leave the main thread and run while the files are written)."""

    def __init__(self, runner: Runner, acc: Any, stage: Stage, offsets: list[int],
                 kept: list[tuple] | None = None) -> None:
        self._stop = threading.Event()
        self._error: BaseException | None = None

        def run() -> None:
            try:
                if kept is not None:
                    template = acc.spawn()
                    for part in runner.map(report_batch, (stage, template),
                                           lambda k: kept[k]):
                        acc.merge(part)
                more = acc.start_refinement()
                while more and not self._stop.is_set():
                    template = acc.spawn()
                    parts = runner.map(refine_batch, (stage, template),
                                       lambda k: acc.moved_slice(offsets[k], offsets[k + 1]),
                                       columns=refine_columns(acc, stage.config))
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
        """Wait for the passes; raise their error."""
        self._thread.join()
        if self._error is not None:
            raise self._error

    def cancel(self) -> None:
        """Stop the passes (a failed write) and wait for the thread."""
        self._stop.set()
        self._thread.join()
