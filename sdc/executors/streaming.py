"""The streaming engine: a release of a file larger than memory, on one machine.

Three passes over the input in record batches (:func:`sdc.io.batches.input_batches`), with
memory bounded by one batch plus the cell table, never by the file:

1. **count** (:func:`count_cells`): per batch, the pandera input checks (problems reported
   with global row numbers) and the mixed-radix cell codes, reduced to (cell, count) pairs and
   merged: the cell table, identical to the in-memory engine's. Then
   :func:`sdc.method.plan.plan_release` on it (shared by every engine): PRBs, theta,
   certificate.
2. **identities**: the 64-bit identities of the records that draw (those of PRBs), 8 bytes per
   such record, made unique once (:func:`sdc.method.draws.unique_identities`). Skipped when
   pass 1 found every ``input.id_column`` identity distinct (it sorts them, 8 bytes per
   record, to check the ids over the whole file): the global step is then the identity map.
3. **apply**: per batch, each record's released cell (:func:`sdc.method.apply.released_cells`,
   a pure function of the seed, the plan and the record), its released values, its public order
   key (:mod:`sdc.pipeline.order`); records go to 2**b temporary bucket files by the top bits of
   the key (:mod:`sdc.io.spill`). Each bucket is then sorted in memory and appended to the
   public files (:class:`sdc.io.batches.PublicWriter`), numbering ``record_id`` in that order.

The per-batch steps are :mod:`sdc.pipeline.kernels`' (shared with the Dask executor); this
module is the loop around them. The public files are byte-identical to the pandas engine's
for the same input, config and seed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.io.batches import (
    DEFAULT_BATCH_ROWS,
    check_streamable,
    input_arrow_schema,
    input_batches,
    input_row_count,
    input_value_ranges,
    public_schema,
    read_ahead_frames,
)
from sdc.io.spill import BucketSpill, bucket_bits, split_by_bucket
from sdc.method.apply import draw_plan
from sdc.method.cell_passes import (
    CellCounter,
    CellLocator,
    add_dependence,
    cell_table,
    new_dependence_counter,
)
from sdc.method.cells import CellTable, cell_codes
from sdc.method.dependence import checked_columns as dependence_columns
from sdc.method.derived import DerivedCollector
from sdc.method.draws import (
    DrawPlan,
    all_identities,
    drawing_identities,
    record_identity,
    unique_identities,
)
from sdc.method.partition import check_columns
from sdc.method.perturb import (
    PerturbValues,
)
from sdc.pipeline.kernels import (
    BatchPerturb,
    BatchRelease,
    CellCount,
    Problems,
    add_perturb_counts,
    batch_problems,
    batch_schema,
    duplicate_identities,
    duplicate_ids_table,
    id_rows_with_identity,
    plan_cells,
    raise_duplicate_ids,
    release_batch,
    repeated_ids,
    write_public_files,
)
from sdc.pipeline.order import ORDER_COLUMNS, order_salt
from sdc.pipeline.records_file import RecordsSpill, write_records_from_buckets
from sdc.pipeline.report_parts import (
    BackgroundRefinement,
    add_apply_batch,
    new_accumulator,
    report_numeric_columns,
)
from sdc.reports.utility import finite_values

__all__ = ["checked_columns", "count_cells", "stream_release", "validate_batches"]


# -- validation per batch ------------------------------------------------------------------------


def validate_batches(frames: Iterable[pd.DataFrame], config: ReleaseConfig,
                     consume: Callable[[pd.DataFrame], None] | None = None, *,
                     every: Callable[[pd.DataFrame], None] | None = None,
                     more_problems: Callable[[], pd.DataFrame | None] | None = None) -> int:
    """Run the pandera input checks on every batch; raise one :class:`InputError` listing every
    problem of the whole file with its global 1-based row numbers (the first five per problem).

    ``consume(frame)`` is called on every batch that passed (e.g. the cell counter), so one read
    validates and counts; ``every(frame)`` on every batch. When a batch had problems,
    ``more_problems()`` may add whole-file ones (a problems table with global 1-based rows,
    e.g. duplicated ids) to the same report. Returns the number of records.
    """
    from sdc.io.schemas import render_problems

    problems = Problems()
    schema = batch_schema(config)
    n = 0
    for frame in frames:
        offset = int(frame.index[0]) if len(frame) else n
        table = batch_problems(frame, config, schema)
        if table is not None and len(table):
            problems.add(table, offset)
        elif consume is not None and not problems.rows:
            consume(frame)
        if every is not None:
            every(frame)
        n += len(frame)
    if problems.rows and more_problems is not None:
        extra = more_problems()
        if extra is not None and len(extra):
            problems.add(extra, 0)
    if problems.rows:
        table = problems.table()
        k = len(table)
        raise InputError(
            f"the input of {config.name!r} does not match the config ({k} problem"
            f"{'s' if k != 1 else ''}; rows are 1-based data rows, the header not counted; "
            f"checked in batches):\n{render_problems(table)}"
        )
    return n


# -- pass 1: count -------------------------------------------------------------------------------
def checked_columns(config: ReleaseConfig, dependence: bool = False) -> list[str] | None:
    """The columns the count pass reads: those the input schema checks (keys, id, weight,
    dropped identifiers) that the file has; a missing one is then reported by the schema.
    With ``dependence`` also every released non-key column (the dependence check)."""
    names = input_arrow_schema(config).names
    need = [*config.key_names, config.input.id_column, config.input.weight, *config.input.drop,
            *(config.perturb or {})]
    if dependence:
        need += dependence_columns(names, config)
    need += list(config.derived)
    return [c for c in names if c in {n for n in need if n}]


def count_cells(config: ReleaseConfig, *, batch_rows: int = DEFAULT_BATCH_ROWS,
                validate: bool = True, value_columns: list[str] | None = None,
                dependence: bool = True) -> CellCount:
    """Read the input once in batches: validate each batch, count its cells, merge.

    ``dependence``: also count the aggregates of the dependence check of the released non-key
    columns (:mod:`sdc.method.dependence`; :func:`plan_cells` measures and checks them).

    ``value_columns``: numeric columns to read too, for their smallest and largest non-NaN
    value (:attr:`CellCount.value_ranges`; the reports' quartile select starts from them when
    the input has no statistics, e.g. CSV).
    """
    check_streamable(config, "streaming")
    if config.input.household_id is not None:
        raise InputError(
            f"a household file (input.household_id {config.input.household_id!r}) is planned "
            "in two stages from all its households at once: use `sdc plan` with the pandas "
            "engine (the streaming engine releases it: `sdc release --engine streaming`)")
    counter = CellCounter()
    columns: list[str] = []

    all_columns = list(input_arrow_schema(config).names)
    id_col = config.input.id_column
    identities: list[np.ndarray] = []
    # 8 bytes per record for the id check: preallocated when the row count is known (Parquet),
    # so the check needs no second copy
    n_known = input_row_count(config) if id_col is not None else None
    filled = [0]
    weight = config.input.weight
    weight_max = [0.0]
    if n_known is not None:
        identities.append(np.empty(n_known, dtype=np.uint64))
    # perturb: value counts and problems over the whole file (raised after the pandera checks)
    perturb_values = {v: PerturbValues(v, config) for v in (config.perturb or {})}
    value_columns = [c for c in (value_columns or []) if c in all_columns]
    value_lo: dict[str, float] = {}
    value_hi: dict[str, float] = {}
    dep = new_dependence_counter(all_columns, config) if dependence else None
    derived = DerivedCollector(list(config.derived)) if config.derived else None

    def consume(frame: pd.DataFrame) -> None:
        if not columns:
            check_columns(pd.DataFrame(columns=all_columns), config)
            columns.extend(all_columns)
        codes = cell_codes(frame, config)
        counter.add(codes)
        if dep is not None:
            add_dependence(dep, frame, codes, config)
        if derived is not None:
            derived.add(frame, codes)
        add_perturb_counts(perturb_values, frame)
        for c in value_columns:
            x = finite_values(frame[c])
            if len(x) and not np.isnan(x).all():
                lo, hi = float(np.nanmin(x)), float(np.nanmax(x))
                value_lo[c] = min(value_lo.get(c, lo), lo)
                value_hi[c] = max(value_hi.get(c, hi), hi)
        if weight is not None and len(frame):
            weight_max[0] = max(weight_max[0], float(np.abs(frame[weight].to_numpy(float)).max()))

    def collect_ids(frame: pd.DataFrame) -> None:
        # every batch, also one with problems: the ids are checked over the whole file
        if id_col is None or id_col not in frame.columns:
            return
        ident = np.asarray(record_identity(frame, config), dtype=np.uint64)
        if n_known is not None:
            identities[0][filled[0]:filled[0] + ident.size] = ident
            filled[0] += ident.size
        else:
            identities.append(ident)

    def id_problems() -> pd.DataFrame | None:
        if id_col is None or (n_known is not None and not filled[0]):
            return None
        if n_known is not None:
            identities[0] = identities[0][:filled[0]]
        found = _duplicate_ids(identities, config, batch_rows)
        return None if found is None or found is True else duplicate_ids_table(*found, config)

    read = checked_columns(config, dependence)
    if read is not None and value_columns:
        read = [c for c in all_columns if c in {*read, *value_columns}]
    frames = input_batches(config, batch_rows=batch_rows, columns=read)
    if validate:
        n = validate_batches(frames, config, consume, every=collect_ids,
                             more_problems=id_problems)
    else:
        n = 0
        for frame in frames:
            consume(frame)
            collect_ids(frame)
            n += len(frame)
    if n == 0:
        raise InputError(f"input file {str(config.input_path)!r} has no records; nothing to "
                         "release")
    for pv in perturb_values.values():
        pv.check()
    codes, counts = counter.result()
    unique = False
    if id_col is not None:
        if n_known is not None:
            identities[0] = identities[0][:filled[0]]
        unique = _check_unique_ids(identities, config, batch_rows)
    schema = input_arrow_schema(config)
    ranges = {c: (value_lo[c], value_hi[c], pa.types.is_integer(schema.field(c).type))
              for c in value_lo}
    return CellCount(cell_table(codes, counts, config), codes, n, columns, unique,
                     weight_max[0] if weight is not None else None,
                     {v: pv.value_counts() for v, pv in perturb_values.items()}, ranges, dep,
                     derived)


# -- perturb: (DP-PRAM of non-key variables) in batches -----------------------------------------


def _duplicate_ids(identities: list[np.ndarray], config: ReleaseConfig, batch_rows: int
                   ) -> tuple[np.ndarray, pd.Series] | None | bool:
    """Sort the 64-bit identities (8 bytes per record); look the equal ones up by one more
    pass over the id column: (global 0-based rows, id values) of the records whose id value
    another record has too (sorted by row), True when all identities differ, None when the
    equal identities were mere 64-bit hash collisions. Consumes ``identities``."""
    dups = duplicate_identities(identities)
    if dups is None:
        return True
    id_col = config.input.id_column
    hits = (id_rows_with_identity(frame, dups, config)
            for frame in input_batches(config, batch_rows=batch_rows, columns=[id_col]))
    return repeated_ids(hits)


def _check_unique_ids(identities: list[np.ndarray], config: ReleaseConfig,
                      batch_rows: int) -> bool:
    """The id column must be unique over the whole file, not only within each batch (the
    batches are validated without it). Equal ids are an :class:`InputError` with their global
    rows; a mere 64-bit hash collision just means the draws need the global identity step
    (False)."""
    if not identities or (len(identities) == 1 and identities[0].size == 0):
        return True
    found = _duplicate_ids(identities, config, batch_rows)
    if found is True:
        return True
    if found is None:
        return False
    raise_duplicate_ids(*found, config)
    return False


def _identity_columns(config: ReleaseConfig, columns: list[str]) -> list[str] | None:
    """Columns pass 2 reads: the keys and the id column when there is one (else all)."""
    if config.input.id_column is None:
        return None
    need = set(config.key_names) | {config.input.id_column}
    return [c for c in columns if c in need]


def released_batches(frames: Iterable[pd.DataFrame], locate: CellLocator, dplan: DrawPlan,
                     identity: np.ndarray | None, *, every: bool, need_raw: bool,
                     cells: CellTable, config: ReleaseConfig, seed: int, schema: pa.Schema,
                     salt: int, perturb: BatchPerturb | None, bits: int) -> Iterator[tuple]:
    """The apply pass's per-batch work that depends on the batch alone (and the running
    position in ``identity``): for every input frame, ``(frame, record_cell, released_cell,
    raw_identity or None, public table sorted by bucket, bucket bounds)``; the table's rows
    of bucket ``b`` are ``bounds[b]:bounds[b + 1]``.

    ``identity``: pass 2's distinct identities (of all records with ``every``, else of the
    drawing ones, in row order), None when pass 1 found the raw identities distinct.
    """
    pos = 0
    for frame in frames:
        rc = locate(cell_codes(frame, config))
        drawing = dplan.cell_prb[rc] >= 0
        m = int(drawing.sum())
        raw = (np.asarray(record_identity(frame, config), np.uint64)
               if need_raw or every or (identity is None and m) else None)
        every_ident = None
        if every:  # identities of all records (pass 2's, or the checked-unique raw ones)
            every_ident = raw if identity is None else identity[pos:pos + len(frame)]
            ident = every_ident[drawing]
        elif identity is not None:
            ident = identity[pos:pos + m]
        elif m:  # identities checked unique in pass 1: the global step is the identity map
            ident = raw[drawing]
        else:
            ident = np.zeros(0, np.uint64)
        table, rel = release_batch(frame, rc, cells, dplan, ident, config, seed, schema,
                                   salt, perturb, every_ident)
        pos += len(frame) if every else m
        # one gather; each bucket is then a slice
        table, bounds = split_by_bucket(table, table.column(ORDER_COLUMNS[0]).to_numpy(), bits)
        yield frame, rc, rel, (raw if need_raw else None), table, bounds
        del frame, table


def stream_release(config: ReleaseConfig, seed: int, out_dir: Path, *,
                   batch_rows: int = DEFAULT_BATCH_ROWS, tmp_dir: Path | None = None,
                   progress: Callable[[str], None] | None = None,
                   records_path: Path | None = None) -> BatchRelease:
    """Release ``config``'s input out of core and write the public microdata into ``out_dir``
    (``microdata.parquet`` / ``microdata.csv`` per ``output.formats``), and the internal
    ``records.parquet`` to ``records_path`` when given (:mod:`sdc.pipeline.records_file`).

    Raises
    ------
    InputError
        Input problems (every one, with global row numbers), SPSS/Stata input.
    SmallBlockError
        As the pandas engine.
    """
    if config.input.household_id is not None:
        raise InputError("a household file is released by sdc.pipeline.households (the "
                         "streaming executor calls it), not by stream_release")
    say = progress or (lambda s: None)
    check_streamable(config, "streaming")
    say("counting cells (pass 1 of 3)")
    # the numeric variables' ranges for the reports: Parquet statistics, else measured here
    numeric = report_numeric_columns(config)
    stats = input_value_ranges(config, numeric)
    count = count_cells(config, batch_rows=batch_rows,
                        value_columns=[c for c in numeric if c not in stats])
    plan = plan_cells(count, config)
    cells = count.cells
    dplan = draw_plan(plan, config)
    schema = public_schema(config, input_arrow_schema(config))
    salt = order_salt(cells)

    say("record identities" + (" (pass 2 of 3)" if not count.identities_unique else ""))
    locate = CellLocator(count.cell_codes, config)
    perturb = BatchPerturb.of(count, config)
    # perturb: draws for every record, so its identities are made distinct over all records
    # (8 bytes per record; the drawing records' are then the NZY ones, draw_tiebreak)
    every = perturb is not None
    idents, ties = [], []
    if (every or (dplan.cell_prb >= 0).any()) and not count.identities_unique:
        for frame in input_batches(config, batch_rows=batch_rows,
                                   columns=_identity_columns(config, count.columns)):
            rc = locate(cell_codes(frame, config))
            i, t = (all_identities if every else drawing_identities)(frame, rc, dplan, config)
            idents.append(i)
            ties.append(t)
    identity = (unique_identities(np.concatenate(idents), np.concatenate(ties))
                if idents else None)
    del idents, ties

    say("releasing records (pass 3 of 3)")
    bits = bucket_bits(count.n_records)
    tmp = Path(tempfile.mkdtemp(prefix="sdc-buckets-", dir=tmp_dir))
    refinement = None
    try:
        # temporary buckets as Arrow IPC files: no encoding, no compression (the order keys are
        # random; measured 6x faster to write and 10x to read back than Parquet)
        public_spill = BucketSpill(tmp, bits)
        released_frequency = np.zeros(cells.n_cells, dtype=np.int64)
        n_prb = len(plan.block_plan.blocks)
        changed = np.zeros(n_prb, dtype=np.int64)
        acc = new_accumulator(cells, config, count.weight_max,  # the reports' aggregates
                              {**stats, **count.value_ranges})
        spill = (RecordsSpill(tmp / "records", bits) if records_path is not None else None)
        frames = input_batches(config, batch_rows=batch_rows, read_ahead=0)
        # the pure part of each batch (read, cells, draws, public values, order keys, bucket
        # split) runs one batch ahead in a background thread; the bookkeeping below in order
        applied = read_ahead_frames(released_batches(
            frames, locate, dplan, identity, every=every, need_raw=spill is not None,
            cells=cells, config=config, seed=seed, schema=schema, salt=salt, perturb=perturb,
            bits=bits), 1)
        for frame, rc, rel, raw, table, bounds in applied:
            if spill is not None:
                spill.add(raw, rc, rel)
            add_apply_batch(acc, frame, rc, rel, config)
            released_frequency += np.bincount(rel, minlength=cells.n_cells)
            moved = rel != rc
            if moved.any():
                changed += np.bincount(dplan.cell_prb[rc[moved]], minlength=n_prb)
            public_spill.write(table, bounds)
            del table, frame
        public_spill.close()
        # the report refinement passes re-read the input while the files below are written
        refinement = BackgroundRefinement(acc, locate, config, batch_rows=batch_rows)
        records_file = None
        if spill is not None:
            spill.close()
            say("writing the internal records file")
            records_file = write_records_from_buckets(spill.buckets(), records_path,
                                                      dplan.cell_id, dplan.cell_prb)

        say("writing the public file in order")
        files = write_public_files(config, schema, public_spill.buckets(), out_dir)
    except BaseException:
        if refinement is not None:
            refinement.cancel()
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if acc.numeric:
        say("numeric summaries for the reports (finishing the passes run alongside the writing)")
    refinement.result()
    return BatchRelease(plan, count.n_records, released_frequency, changed, schema, files,
                        accumulator=acc, records_file=records_file,
                        dp_perturbations=perturb.perturbations() if perturb else [])
