"""The person stage of the one pipeline and the release of a person file, run by any runner
(docs/ARCHITECTURE.md).

The passes are :mod:`sdc.pipeline.passes`' (the one set of per-batch functions, their parts
merged in input order, so every runner gives the same files: the in-memory runner (the whole
file as one batch), local record batches (streaming) and Dask tasks on Parquet pieces);
:class:`PersonStage` is what they do to a batch of a person file:

1. **count** (merged by :func:`count_cells`): the pandera checks of a batch, its cells, the
   dependence counts, ``derived:`` values, ``perturb:`` value counts, the identities of the id
   check, value ranges and the largest weight; then the shared plan
   (:func:`sdc.pipeline.kernels.plan_cells`).
2. **identities**: the drawing records' identities, made distinct once (skipped when the
   count pass found the ids unique).
3. **apply**: released cells and values, public order keys, spilled to bucket files by the
   top bits of the order key (piece ``index`` of every bucket), the records file's spill, the
   report aggregates; then the report refinement passes while the records and public files
   are written.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.io.spill import IdentitySpill, bucket_bits, remove_spills
from sdc.method.cell_passes import (
    CellLocator,
    DependenceThread,
    add_dependence,
    cell_table,
    new_dependence_counter,
)
from sdc.method.cells import CellTable, cell_codes, cell_key_codes, code_counts, radix_sizes
from sdc.method.dependence import DependenceCounter, MixedBins, schema_kinds
from sdc.method.dependence import checked_columns as dependence_columns
from sdc.method.derived import DerivedCollector
from sdc.method.designs import design_of
from sdc.method.draws import (
    DrawPlan,
    all_identities,
    drawing_identities,
    record_identity,
)
from sdc.method.partition import check_columns
from sdc.method.perturb import PerturbValues
from sdc.method.plan import draw_plan
from sdc.method.weighted import WeightSums
from sdc.pipeline.count_parts import CountMerge, PlacedParts
from sdc.pipeline.count_parts import CountPart as BatchCountPart
from sdc.pipeline.kept_files import write_kept_files
from sdc.pipeline.kernels import (
    BatchPerturb,
    CellCount,
    ReleasedRecords,
    ReleaseOutcome,
    add_perturb_counts,
    check_dependence,
    plan_cells,
    public_positions,
    raise_duplicate_ids,
    release_batch,
)
from sdc.pipeline.key_spill import key_spill
from sdc.pipeline.order import ORDER_COLUMNS, argsort_u64, order_salt, packed_run
from sdc.pipeline.passes import (
    ApplyTarget,
    DeferredReports,
    IdentityPart,
    Refinement,
    Released,
    Runner,
    apply_pass,
    count_pass,
    duplicated_ids,
    identity_pass,
    refuse_empty,
    write_spilled,
)
from sdc.pipeline.records_file import write_records
from sdc.pipeline.report_parts import new_accumulator
from sdc.reports.intruder import plan_design, start_intruder

__all__ = ["CountPart", "PersonStage", "Runner", "count_cells", "read_columns",
           "release_persons"]


# -- the person stage ---------------------------------------------------------------------------
@dataclass
class CountPart(BatchCountPart):
    """One batch's part of the person count pass: the shared part
    (:class:`sdc.pipeline.count_parts.CountPart`), the dependence counts and W_j per cell."""

    dependence: Any = None
    weight_sums: WeightSums | None = None  #: W_j per cell code (``risk.weighted``)
    #: every record's cell code, kept by the one batch of a runner holding the whole file
    record_codes: np.ndarray | None = None


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


@dataclass
class PersonStage:
    """The person stage of a person file as the passes (:mod:`sdc.pipeline.passes`) see it:
    what it counts of a batch (cells, dependence counts, ``derived:`` and ``perturb:`` values,
    W_j per cell), the identities it draws with, a batch's released records and report cells.
    The count pass needs the first fields; the plan fills the rest (:meth:`planned`)."""

    config: ReleaseConfig
    columns: list[str] = field(default_factory=list)  #: the input's columns
    dependence: bool = False  #: count the dependence check's aggregates
    kinds: dict[str, str] | None = None  #: the dependence pairs' kinds (the public schema's)
    locate: CellLocator | None = None
    dplan: DrawPlan | None = None
    every: bool = False  #: ``perturb:``: draws for every record
    seed: int = 0
    cells: CellTable | None = None
    schema: pa.Schema | None = None
    salt: int = 0
    perturb: BatchPerturb | None = None
    #: count the dependence check on a thread (:class:`DependenceThread`; the one batch of a
    #: runner holding the whole file)
    background: bool = False
    #: the count pass keeps every record's cell code (:attr:`CountPart.record_codes`)
    keep_codes: bool = False
    #: the file's records when the count pass sorts the identities: each batch sorts its run
    presort: int | None = None
    #: the bins the batches merged so far have mixed in every ordered table (the merging
    #: counter's :attr:`DependenceCounter.publish`): a batch's counter skips their records
    mixed_bins: MixedBins | None = None
    #: every record's cell in input order, located once from the count pass's codes (a
    #: runner that keeps them: :func:`keeps_records`; None: each pass locates a batch's)
    kept_cells: np.ndarray | None = None
    #: every record's raw identity in input order, kept by the count pass (None: hashed
    #: again per batch)
    kept_raw: np.ndarray | None = None
    #: the positions that sort ``kept_raw`` (the count pass's id check made them; None: not
    #: made), the records file's order
    kept_order: np.ndarray | None = None
    #: every record's released cell in input order, filled batch by batch by the apply pass
    #: when the records file is written from the kept arrays (:func:`release_persons`; None:
    #: the records file's spill)
    kept_released: np.ndarray | None = None
    kind: ClassVar[str] = "person"  #: the stage's name (the Dask crash-test hook's)
    part_type: ClassVar[type[CountPart]] = CountPart

    def count(self, frame: pd.DataFrame, part: CountPart) -> None:
        """Pass 1 on one batch without problems: its cell counts, dependence counts,
        ``derived:`` values, ``perturb:`` value counts and W_j per cell."""
        config, dependence = self.config, self.dependence
        weight = config.input.weight
        # with the dependence check, the key codes of every record are kept for it
        codes, keys = (cell_key_codes(frame, config) if dependence
                       else (cell_codes(frame, config), None))
        part.codes, part.counts = code_counts(codes, radix_sizes(config))
        if self.presort is not None and part.ident is not None:
            part.run = packed_run(part.ident, part.offset, self.presort)
        if dependence:
            part.dependence = new_dependence_counter(self.columns, config, self.kinds)
            part.dependence.known = self.mixed_bins
            if self.background:
                part.dependence = DependenceThread(part.dependence, frame, codes, config, keys)
            else:
                add_dependence(part.dependence, frame, codes, config, keys)
            del keys
        if self.keep_codes:  # kept for the later passes (they locate them, not code again)
            part.record_codes = codes
        if config.derived:
            part.derived = DerivedCollector(list(config.derived))
            part.derived.add(frame, codes)
        part.perturb = {v: PerturbValues(v, config) for v in (config.perturb or {})}
        add_perturb_counts(part.perturb, frame)
        if design_of(config).weighted and weight is not None:
            part.weight_sums = WeightSums.of(codes, frame[weight].to_numpy(np.float64))

    def identities(self, frame: pd.DataFrame) -> IdentityPart:
        """Pass 2 on one batch: the identities (and tiebreaks) of its drawing records, of all
        its records with ``every`` (``perturb:`` draws for every record)."""
        rc = self.record_cells(frame)
        draw = all_identities if self.every else drawing_identities
        return IdentityPart(*draw(frame, rc, self.dplan, self.config))

    def release(self, frame: pd.DataFrame, records: bool, identity: np.ndarray | None,
                raw_identity: np.ndarray | None = None) -> Released:
        """Pass 3 on one batch: its released records, spilled by their public order key;
        ``extra``: its released frequencies, changed records per PRB and ``perturb:`` changes.
        ``identity``: the batch's distinct identities from pass 2 (of all records with
        ``perturb``, else of the drawing ones); None: the raw ones (checked unique);
        ``raw_identity``: the batch's raw identities when the count pass kept them."""
        config, dplan, cells = self.config, self.dplan, self.cells
        rc = self.record_cells(frame)
        drawing = dplan.cell_prb[rc] >= 0
        raw = None
        if raw_identity is None:
            raw_identity = _kept_rows(self.kept_raw, frame)
        if records or identity is None:
            raw = np.asarray(record_identity(frame, config) if raw_identity is None
                             else raw_identity, np.uint64)
        every_ident, perturb = None, self.perturb
        if perturb is not None:
            perturb = BatchPerturb(perturb.designs, np.zeros_like(perturb.changed))
            every_ident = raw if identity is None else identity
            ident = every_ident[drawing]
        elif identity is not None:
            ident = identity
        else:
            ident = raw[drawing] if drawing.any() else np.zeros(0, np.uint64)
        table, rel = release_batch(frame, rc, cells, dplan, ident, config, self.seed,
                                   self.schema, self.salt, perturb, every_ident)
        if self.kept_released is not None:  # the batch's rows of the whole file's (disjoint)
            at = _kept_start(self.kept_released, frame)
            if at is None:
                raise RuntimeError("a batch without its global row numbers, kept released cells")
            self.kept_released[at:at + rel.size] = rel
        n_prb = dplan.prb_theta.size
        moved = rel != rc
        changed = (np.bincount(dplan.cell_prb[rc[moved]], minlength=n_prb) if moved.any()
                   else np.zeros(n_prb, dtype=np.int64))
        extra = (np.bincount(rel, minlength=cells.n_cells), changed,
                 perturb.changed if perturb is not None else None)
        return Released(table, rc, rel, table.column(ORDER_COLUMNS[0]).to_numpy(),
                        raw if records else None, extra)

    def report_cells(self, frame: pd.DataFrame) -> np.ndarray:
        """A batch's record cells in the release's cell table (the refinement passes)."""
        return self.record_cells(frame)

    def record_cells(self, frame: pd.DataFrame) -> np.ndarray:
        """A batch's record cells: its rows of :attr:`kept_cells` when kept, else located
        from the batch's cell codes."""
        kept = _kept_rows(self.kept_cells, frame)
        return kept if kept is not None else self.locate(cell_codes(frame, self.config))


def _kept_start(kept: np.ndarray, frame: pd.DataFrame) -> int | None:
    """The first row of ``frame`` (a batch: its global row numbers as index, a range) in a
    whole-file array ``kept`` (None: the index is not a range of it)."""
    idx = frame.index
    if (isinstance(idx, pd.RangeIndex) and idx.step == 1 and 0 <= idx.start
            and idx.start + len(frame) <= kept.size):
        return int(idx.start)
    return None


def _kept_rows(kept: np.ndarray | None, frame: pd.DataFrame) -> np.ndarray | None:
    """The rows of ``frame`` in a whole-file array ``kept`` (None: not kept, or the index is
    not a range of it)."""
    at = None if kept is None else _kept_start(kept, frame)
    return None if at is None else kept[at:at + len(frame)]


#: a runner whose batches run in this process keeps the count pass's cell codes and raw
#: identities for the later passes up to this many records (16 bytes a record: 268 MB)
KEEP_RECORDS = 1 << 24


def keeps_records(runner: Runner) -> bool:
    """Whether the count pass keeps every record's cell code and raw identity for the
    identity and apply passes: a runner holding the whole file, or one running its batches
    in this process (``in_process``; not a cluster's tasks) over at most
    :data:`KEEP_RECORDS` records."""
    if getattr(runner, "whole", False):
        return True
    if not getattr(runner, "in_process", False):
        return False
    n = runner.row_count()
    return n is not None and n <= KEEP_RECORDS


def count_cells(runner: Runner, config: ReleaseConfig, *, validate: bool = True,
                value_columns: list[str] | None = None, dependence: bool = True,
                background: bool = False, keep: bool = False,
                order: bool = False) -> CellCount:
    """The count pass of a person file (:func:`sdc.pipeline.passes.count_pass` with the
    person stage), merged in input order. ``background`` (a runner of one batch): the count's
    ``dependence`` is a :class:`DependenceThread` (joined by
    :func:`~sdc.pipeline.kernels.check_dependence`); ``keep``: every record's cell code and
    raw identity kept in input order (:attr:`CellCount.record_codes`, ``raw_identity``);
    ``order`` (a records file will be written) with ``keep``: also the positions that sort
    the raw identities (:attr:`CellCount.raw_order`, the id check's sort).

    Raises :class:`InputError` with every problem of the whole file (global 1-based rows, the
    duplicated ids among them), for an empty file, or for equal ids; ``value_columns``: numeric
    columns whose smallest and largest value are measured (:attr:`CellCount.value_ranges`)."""
    columns = runner.input_columns()
    measure = [c for c in (value_columns or []) if c in columns]
    id_col, weight = config.input.id_column, config.input.weight
    # 8 bytes per record for the id check, preallocated when the row count is known, or
    # spilled to files for a large file of a runner in batches
    n_known = runner.row_count() if id_col is not None else None
    merged = CountMerge({v: PerturbValues(v, config) for v in (config.perturb or {})},
                        DerivedCollector(list(config.derived)) if config.derived else None,
                        n_known, _identity_spill(runner, n_known), runs=keep and order)
    # the columns that pair in the dependence check: from the public schema, the same on
    # every executor (never from a batch's types)
    kinds = schema_kinds(runner.public_schema()) if dependence else None
    dep = new_dependence_counter(columns, config, kinds) if dependence else None
    if dep is not None and not background:  # its merged tables' mixed bins for the batches
        dep.publish = MixedBins()
    wsums = WeightSums() if design_of(config).weighted and weight is not None else None

    # every record's cell code, placed at its rows as the parts arrive
    kept_codes = PlacedParts(runner.row_count() if keep else None)

    def merge(part: CountPart) -> None:
        nonlocal dep
        kept_codes.add(part.offset, part.record_codes)
        if background and part.dependence is not None:
            dep = part.dependence  # the one batch's, still counting
        elif dep is not None:
            dep.merge(part.dependence)
        if wsums is not None and part.weight_sums is not None:
            wsums.merge(part.weight_sums)

    stage = PersonStage(config, columns, dependence, kinds, background=background,
                        keep_codes=keep, presort=n_known if keep and order else None,
                        mixed_bins=dep.publish if dep is not None else None)
    count_pass(runner, stage, merged, merge, measure, validate=validate,
               columns=read_columns(config, columns, dependence, measure))
    if merged.counted:
        check_columns(pd.DataFrame(columns=columns), config)
    refuse_empty(merged, config)
    for pv in merged.perturb.values():
        pv.check()
    idents, n = merged.idents, merged.n
    raw = (idents[0] if keep and isinstance(idents, list) and len(idents) == 1
           and idents[0].size == n else None)  # every record's, in input order
    # the id check sorts the identities it is given: a copy when they are kept, or (``order``)
    # their argsort, which is also the records file's order (write_records: one sort, not two)
    # and finds the repeated identities on the way
    raw_order = None
    if order and raw is not None and id_col is not None:
        raw_order, repeated = argsort_u64(raw, duplicates=True, runs=merged.runs)
        unique = _unique_ids(runner, config, [], duplicates=repeated)
    else:
        unique = _unique_ids(runner, config, [raw.copy()] if raw is not None else idents)
    idents.clear()
    record_codes = kept_codes.result() if keep else None
    codes, counts = merged.counter.result()
    ranges = {c: (lo, hi, runner.is_integer(c)) for c, (lo, hi) in merged.ranges().items()}
    return CellCount(cell_table(codes, counts, config), codes, n, columns,
                     id_col is not None and unique,
                     merged.weight_max if weight is not None else None,
                     {v: pv.value_counts() for v, pv in merged.perturb.items()}, ranges, dep,
                     merged.derived, None if wsums is None else wsums.result(codes), raw,
                     record_codes, raw_order)


#: a runner in batches spills the id check's identities from this many records on
SPILL_IDENTITIES = 1 << 25


def _identity_spill(runner: Runner, n: int | None) -> IdentitySpill | None:
    """Files for the identities of a count pass of ``n`` records when a runner in batches
    (not holding the file) reads at least :data:`SPILL_IDENTITIES`: a folder in its scratch
    folder (or the system's), deleted once the ids are checked."""
    if n is None or n < SPILL_IDENTITIES or getattr(runner, "whole", False):
        return None
    return IdentitySpill(Path(tempfile.mkdtemp(prefix="sdc-identities-",
                                               dir=getattr(runner, "scratch", None))))


def _unique_ids(runner: Runner, config: ReleaseConfig, idents: list[np.ndarray],
                duplicates: np.ndarray | None = None) -> bool:
    """Raise for duplicated ids; True when every record's identity is distinct (False: 64-bit
    collisions only, the draws need the global identity step, or no id column);
    ``duplicates``: the repeated identities when the caller found them."""
    if config.input.id_column is None:
        return True
    found = duplicated_ids(runner, config, idents, duplicates)
    if found is None:
        return False
    if found is not True:
        raise_duplicate_ids(*found, config)
    return True


def _identity_columns(config: ReleaseConfig, columns: list[str]) -> list[str] | None:
    """Columns pass 2 reads: the keys and the id column when there is one (else all)."""
    if config.input.id_column is None:
        return None
    need = set(config.key_names) | {config.input.id_column}
    return [c for c in columns if c in need]


def release_persons(runner: Runner, config: ReleaseConfig, seed: int, out_dir: Path, *,
                    tmp_dir: Path | str | None = None,
                    progress: Callable[[str], None] | None = None,
                    records_path: Path | None = None, where: str = "",
                    keep: bool = False, intruder: bool = True,
                    reports: bool = True, files: bool = True) -> ReleaseOutcome:
    """Release the person file of ``config`` with ``runner``: the public files into
    ``out_dir`` (``microdata.parquet`` / ``.csv`` per ``output.formats``), the internal
    ``records.parquet`` to ``records_path`` when given; ``keep``: the outcome also holds the
    released records in input order (:attr:`ReleaseOutcome.released`, the library's
    ``release_frame``). ``intruder``: a release (``records_path`` given) starts risk.json's
    intruder simulation in a thread; False when no report will take it (``release_frame``).
    ``reports`` False with ``keep``: the report aggregates are summed when first used
    (:class:`~sdc.pipeline.passes.DeferredReports`), not while the records are released.
    ``files`` False (``release_frame`` without an output folder, a runner holding the whole
    file): no public file is written when the outcome's ``public_table`` can hold the records
    as the Parquet file would.

    Raises :class:`InputError` (every input problem with global rows), ``SmallBlockError``
    and ``DependenceError`` as the plan says."""
    if config.input.household_id is not None:
        raise InputError("a household file is released by sdc.pipeline.households, not "
                         "by release_persons")
    say = progress or (lambda s: None)
    say(f"counting cells{where} (pass 1 of 3)")
    numeric = runner.numeric_columns()
    stats = runner.value_ranges(numeric)
    whole = bool(getattr(runner, "whole", False))
    # one batch: the dependence check counts on a thread (its verdict before any file)
    count = count_cells(runner, config, value_columns=[c for c in numeric if c not in stats],
                        background=whole, keep=keeps_records(runner),
                        order=records_path is not None)
    if isinstance(count.dependence, DependenceCounter):
        # counted over the batches: measured on a thread beside the next passes, its verdict
        # before any file, as the one batch's (check_dependence below)
        count.dependence = DependenceThread.counted(count.dependence)
    plan = plan_cells(count, config)
    bits = bucket_bits(count.n_records)
    tmp = Path(tempfile.mkdtemp(prefix="sdc-buckets-", dir=tmp_dir))
    refinement = None
    try:
        cells = count.cells
        dplan = draw_plan(plan, config)
        if records_path is not None and intruder:  # a release (not a plan): risk.json's
            # intruder, from the plan alone, runs in a thread while the records are released
            start_intruder(plan.partitioned.cells.frequency, plan.cell_prb, plan.blocks,
                           seed=seed, xi=float(plan.partitioned.xi),
                           **plan_design(plan, plan.cell_prb))
        schema = runner.public_schema()
        perturb = BatchPerturb.of(count, config)
        locate = CellLocator(count.cell_codes, config)
        stage = PersonStage(config, locate=locate, dplan=dplan,
                            every=perturb is not None,  # perturb: draws for every record
                            seed=seed, cells=cells, schema=schema, salt=order_salt(cells),
                            perturb=perturb,
                            kept_cells=(None if count.record_codes is None
                                        else locate(count.record_codes)),
                            kept_raw=count.raw_identity, kept_order=count.raw_order)
        count.record_codes = count.raw_identity = count.raw_order = None
        # a runner in batches keeping the count's arrays: the records file from them and the
        # released cells (8 bytes a record), not from a spill of 24 bytes a record
        kept_records = (records_path is not None and not whole
                        and stage.kept_cells is not None and stage.kept_raw is not None)
        if kept_records:
            stage.kept_released = np.empty(count.n_records, dtype=np.int64)

        say(f"record identities{where}" + ("" if count.identities_unique else " (pass 2 of 3)"))
        identity_of = _identities(runner, stage, count)

        say(f"releasing records{where} (pass 3 of 3)")
        acc = new_accumulator(cells, config, count.weight_max, {**stats, **count.value_ranges},
                              numeric)
        defer = keep and not reports
        # a runner holding the whole file: its report part is summed by the refinement's
        # thread while the files are written (from the kept cells), not in the apply pass
        target = ApplyTarget(str(tmp), bits, records_path is not None and not kept_records,
                             whole, keep, None if defer or whole else acc.spawn(),
                             None if whole else key_spill(cells, config, schema),
                             cells.n_cells)
        released_frequency = np.zeros(cells.n_cells, dtype=np.int64)
        changed = np.zeros(len(plan.block_plan.blocks), dtype=np.int64)

        def merge(extra: tuple) -> None:
            frequency, prb_changed, perturb_changed = extra
            released_frequency[:] += frequency
            changed[:] += prb_changed
            if perturb_changed is not None:
                perturb.changed += perturb_changed

        offsets, kept, box = apply_pass(runner, stage, target, identity_of, acc, merge)
        positions = None
        if isinstance(count.dependence, DependenceThread):  # joined before any file
            if whole and box[0] is not None:  # the public order sorted while it measures
                positions = public_positions(box[0][0])
            plan = check_dependence(plan, count, config)
        # the report refinement passes run while the files below are written
        refinement = None if defer else Refinement(
            runner, acc, stage, offsets,
            [(w[2], w[3]) for w in box if w is not None] if whole else None)
        if whole:  # the public file first: its table's memory is free for the records file's
            files, public_table, records_file = write_kept_files(
                box, config, schema, dplan, out_dir, records_path, say, files,
                stage.kept_order, count.identities_unique, positions)
            stage.kept_order = None
        else:
            records_file = None
            if kept_records:
                say("writing the internal records file")
                records_file = write_records(stage.kept_raw, stage.kept_cells,
                                             stage.kept_released, records_path, dplan.cell_id,
                                             dplan.cell_prb, count.identities_unique,
                                             stage.kept_order)
                stage.kept_released = stage.kept_order = None
            files, public_table, spilled = write_spilled(
                target, config, schema, out_dir, None if kept_records else records_path,
                dplan.cell_id, dplan.cell_prb, say)
            records_file = records_file or spilled
    except BaseException:
        if refinement is not None:
            refinement.cancel()
        if isinstance(count.dependence, DependenceThread):  # its refusal comes first, as
            check_dependence(plan, count, config)  # it did before the identities and apply
        raise
    finally:
        remove_spills(tmp)  # the consumed buckets deleted while the files were written
    if refinement is not None:
        if acc.numeric:
            say("numeric summaries for the reports (finishing the passes run alongside the "
                "writing)")
        refinement.result()
    else:
        acc = DeferredReports(runner, acc, stage, offsets, [(k[0], k[1]) for k in kept])
    return ReleaseOutcome.of_plan(plan, count.n_records, released_frequency, changed, schema,
                                files=files, accumulator=acc, records_file=records_file,
                                dp_perturbations=perturb.perturbations() if perturb else [],
                                public_table=public_table, config=config,
                                released=ReleasedRecords.of(kept) if keep else None,
                                counted=count)


def _identities(runner: Runner, stage: PersonStage,
                   count: CellCount) -> Callable[[int], tuple]:
    """Pass 2 (:func:`sdc.pipeline.passes.identity_pass`, skipped when the count pass found
    the ids unique): the drawing records' identities (all records' with ``every``) made
    distinct once; returns batch ``k``'s ``(distinct identities or None, raw identities or
    None)``."""
    identities = None
    if ((stage.every or (stage.dplan.cell_prb >= 0).any())
            and not count.identities_unique):
        identities = identity_pass(runner, stage,
                                   columns=_identity_columns(stage.config, count.columns))

    def identity_of(k: int) -> tuple:
        # the raw identities: the stage's kept ones (kept_raw) or hashed per batch
        return (None if identities is None else identities.of(k), None)

    return identity_of
