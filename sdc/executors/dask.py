"""The Dask engine: the two record passes as tasks on a dask.distributed cluster.

Same passes and same per-batch code as :mod:`sdc.executors.streaming`; here every batch is one
*piece* of the input (a row group of a Parquet file, or of a part in a folder of parts,
``pyarrow.dataset`` fragments in path order) and runs as a task on a worker:

- count: each task validates its piece (pandera; problems with global row numbers) and returns
  its (cell code, count) pairs; the client merges them and plans (shared
  :func:`sdc.method.plan.plan_release`);
- identities: each task returns the identities of its drawing records; the client makes them
  unique once and sends each task its slice;
- apply: each task releases its piece and writes it into the bucket folders
  (``<scratch>/bucket-XXXXX/piece-YYYYY.arrow``, Arrow IPC) by the top bits of the public order key; the
  client then sorts bucket after bucket and writes the public files (one bucket in memory at a
  time), numbering ``record_id``. The bytes are those of the pandas and streaming engines.

Without an address a ``LocalCluster`` (``workers`` processes, 1 thread each) is started for the
release and closed after it; with ``scheduler: tcp://host:port`` the existing cluster is used.
Its workers must have ``sdc`` installed and see the input path and the scratch folder (a
shared file system). The Prefect flow runs this inside its task (not with prefect-dask's
``DaskTaskRunner``: that distributes Prefect tasks, each reporting to the Prefect API - which,
embedded, lives in the flow's process - while our units of work are hundreds of data pieces
that need no orchestration of their own).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.io.batches import (
    input_arrow_schema,
    public_schema,
    table_to_frame,
)
from sdc.io.recode import recode_frame
from sdc.io.spill import BucketSpill, bucket_bits
from sdc.method.apply import draw_plan
from sdc.method.cell_passes import (
    CellCounter,
    CellLocator,
    add_dependence,
    cell_table,
    new_dependence_counter,
)
from sdc.method.cells import cell_codes
from sdc.method.derived import DerivedCollector
from sdc.method.draws import all_identities, drawing_identities, record_identity
from sdc.method.perturb import PerturbValues
from sdc.pipeline.kernels import (
    BatchPerturb,
    BatchRelease,
    CellCount,
    Problems,
    add_perturb_counts,
    batch_problems,
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
    add_apply_batch,
    add_refine_batch,
    new_accumulator,
    refine_columns,
)

__all__ = ["DaskClusterError", "DaskSpec", "cluster_errors", "dask_client", "dask_count_cells",
           "dask_release"]

#: Seconds ``dask_client`` waits for a worker of an existing cluster (``engine.scheduler``):
#: a scheduler without workers would leave every task waiting forever. The environment
#: variable ``SDC_DASK_WORKER_WAIT_SECONDS`` overrides it.
WORKER_WAIT_SECONDS = 30.0


class DaskClusterError(InputError):
    """The Dask cluster cannot run the release, or failed during it (a worker died and its
    tasks could not be rerun, the scheduler went away): CLI exit 2, nothing published."""


def cluster_errors() -> tuple[type[BaseException], ...]:
    """What a failing cluster raises into the client (a worker killed while it held a task
    three times, lost data, a closed connection, a timed-out call)."""
    from concurrent.futures import CancelledError

    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return (KilledWorker, CancelledError, CommClosedError, TimeoutError)


def _kill_hook(name: str) -> None:
    """Crash-test hook: with env ``SDC_DASK_KILL_AT == name`` and ``SDC_CHECKPOINT_DIR`` set,
    the first task to get here (per run: a marker file in that folder) SIGKILLs its worker
    process; with ``SDC_DASK_KILL_AT == name + ":always"`` every task does. Does nothing
    otherwise."""
    import os
    import signal

    at = os.environ.get("SDC_DASK_KILL_AT")
    if at == f"{name}:always":  # every time: a worker that can never finish the task
        os.kill(os.getpid(), signal.SIGKILL)
    d = os.environ.get("SDC_CHECKPOINT_DIR")
    if not d or at != name:
        return
    Path(d).mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(Path(d) / f"dask-killed-{name}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)

    os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class DaskSpec:
    """``engine: {kind: dask, scheduler: tcp://host:port, workers: 2, scratch: /shared/tmp}``."""

    scheduler: str | None = None
    workers: int = 2
    scratch: str | None = None


@contextmanager
def dask_client(spec: DaskSpec):
    """A ``distributed.Client``: to ``spec.scheduler``, or to a new ``LocalCluster`` of
    ``spec.workers`` single-threaded worker processes (closed on exit)."""
    from distributed import Client, LocalCluster

    if spec.scheduler:
        try:
            client = Client(spec.scheduler, timeout="10s")
        except (OSError, ValueError, TypeError) as e:
            raise DaskClusterError(
                f"cannot reach the Dask scheduler {spec.scheduler!r} ({e}); start it (dask "
                "scheduler / dask worker) or remove engine.scheduler to use a local cluster"
            ) from None
        try:
            import os

            wait = float(os.environ.get("SDC_DASK_WORKER_WAIT_SECONDS", WORKER_WAIT_SECONDS))
            try:
                client.wait_for_workers(1, timeout=wait)
            except (TimeoutError, OSError) as e:
                raise DaskClusterError(
                    f"the Dask scheduler {spec.scheduler!r} has no worker (none joined within "
                    f"{wait:.0f} s: {e}); start workers (dask worker "
                    f"{spec.scheduler}) or remove engine.scheduler to use a local cluster"
                ) from None
            yield client
        finally:
            client.close()
        return
    cluster = LocalCluster(n_workers=spec.workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=40)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def _pieces(config: ReleaseConfig) -> list[tuple[str, int, int]]:
    """(file path, row group, rows) of every piece of a Parquet input, in file order."""
    fmt = config.input.resolved_format
    if fmt != "parquet":
        raise InputError(
            f"the dask engine reads Parquet (a file or a folder of parts), not {fmt!r}: convert "
            "the input to Parquet once, or use --engine streaming (which also reads CSV)"
        )
    path = config.input_path
    if not path.exists():
        raise InputError(f"input {str(path)!r} does not exist. Fix input.path in the config")
    ds = pads.dataset(str(path), format="parquet")
    out = []
    for frag in ds.get_fragments():
        md = pq.ParquetFile(frag.path).metadata
        for rg in range(md.num_row_groups):
            n = md.row_group(rg).num_rows
            if n:
                out.append((frag.path, rg, n))
    return out


def _read_piece(piece: tuple[str, int, int], offset: int, config: ReleaseConfig):
    path, rg, _n = piece
    return recode_frame(table_to_frame(pq.ParquetFile(path).read_row_group(rg), offset), config)


def _count_task(piece, offset, config):
    frame = _read_piece(piece, offset, config)
    # with an id column, the piece's 64-bit identities (8 bytes per record) for the check that
    # the ids are unique over the whole input (pieces are validated without it); also from a
    # piece with problems, so duplicated ids are reported with them
    id_col = config.input.id_column
    ident = (np.asarray(record_identity(frame, config), dtype=np.uint64)
             if id_col and id_col in frame.columns else None)
    problems = batch_problems(frame, config)
    if problems is not None and len(problems):
        return ("problems", problems, offset, list(frame.columns), None, ident)
    codes = cell_codes(frame, config)
    u, c = np.unique(codes, return_counts=True)
    w = config.input.weight
    wmax = float(np.abs(frame[w].to_numpy(float)).max(initial=0.0)) if w else None
    # perturb: value counts and problems of the piece (merged and checked by the client)
    pcounts = {v: PerturbValues(v, config) for v in (config.perturb or {})}
    add_perturb_counts(pcounts, frame)
    dep = new_dependence_counter(list(frame.columns), config)  # the dependence check's part
    add_dependence(dep, frame, codes, config)
    derived = DerivedCollector(list(config.derived)) if config.derived else None
    if derived is not None:
        derived.add(frame, codes)
    return ("counts", u, c.astype(np.int64), list(frame.columns), wmax, ident, pcounts, dep,
            derived)


def _duplicate_rows_task(piece, offset, dups, config):
    """(global rows, id values) of the piece's records whose identity is in ``dups``."""
    path, rg, _n = piece
    table = pq.ParquetFile(path).read_row_group(rg, columns=[config.input.id_column])
    return id_rows_with_identity(table_to_frame(table, offset), dups, config)


def _identity_task(piece, offset, codes_sorted, dplan, config, every=False):
    frame = _read_piece(piece, offset, config)
    rc = CellLocator(codes_sorted, config)(cell_codes(frame, config))
    return (all_identities if every else drawing_identities)(frame, rc, dplan, config)


def _apply_task(piece, offset, index, codes_sorted, cells, dplan, identity, config, seed,
                schema, salt, bits, scratch, acc, records_scratch=None, perturb=None):
    _kill_hook("apply")
    frame = _read_piece(piece, offset, config)
    rc = CellLocator(codes_sorted, config)(cell_codes(frame, config))
    every_ident = None
    if perturb is not None:  # identity: all the piece's records (None: the raw ones, unique)
        perturb = BatchPerturb(perturb.designs, np.zeros_like(perturb.changed))
        every_ident = (np.asarray(record_identity(frame, config), np.uint64)
                       if identity is None else identity)
        identity = every_ident[dplan.cell_prb[rc] >= 0]
    table, rel = release_batch(frame, rc, cells, dplan, identity, config, seed, schema, salt,
                               perturb, every_ident)
    if records_scratch is not None:  # internal/records.parquet's spill (records_file module)
        RecordsSpill(Path(records_scratch), bits, piece=index).add(
            record_identity(frame, config), rc, rel)
    part = acc.spawn()  # this piece's report aggregates
    add_apply_batch(part, frame, rc, rel, config)
    BucketSpill(Path(scratch), bits, piece=index).add(table,
                                                      table.column(ORDER_COLUMNS[0]).to_numpy())
    freq = np.bincount(rel, minlength=cells.n_cells)
    moved = rel != rc
    n_prb = dplan.prb_theta.size
    changed = (np.bincount(dplan.cell_prb[rc[moved]], minlength=n_prb) if moved.any()
               else np.zeros(n_prb, dtype=np.int64))
    return freq, changed, part, (perturb.changed if perturb is not None else None)


def _refine_task(piece, offset, codes_sorted, acc, moved_rows, moved_cells, config):
    """One piece of a report refinement pass (:mod:`sdc.pipeline.report_parts`)."""
    path, rg, _n = piece
    cols = refine_columns(acc, config)
    frame = recode_frame(table_to_frame(pq.ParquetFile(path).read_row_group(rg, columns=cols),
                                        offset), config)
    part = acc.spawn()
    part.moved_rows, part.moved_cells = [moved_rows], [moved_cells]
    add_refine_batch(part, frame, CellLocator(codes_sorted, config), config)
    part.moved_rows, part.moved_cells = [], []
    return part


def _merge_all(client, futures, acc) -> None:
    """Add the tasks' partial accumulators as they complete (one in memory at a time)."""
    from distributed import as_completed

    for fut in as_completed(futures):
        acc.merge(fut.result())
        fut.release()


def dask_count_cells(client, config: ReleaseConfig) -> tuple[CellCount, list, list[int]]:
    """The count pass on the cluster: (cell count, pieces, their global row offsets)."""
    from sdc.io.schemas import render_problems
    from sdc.method.partition import check_columns

    pieces = _pieces(config)
    offsets = np.concatenate([[0], np.cumsum([p[2] for p in pieces])]).astype(int).tolist()
    cfg = client.scatter(config, broadcast=True, hash=False)
    futures = [client.submit(_count_task, p, offsets[i], cfg, pure=False)
               for i, p in enumerate(pieces)]
    counter = CellCounter()
    problems = Problems()
    columns: list[str] = []
    wmax = 0.0 if config.input.weight else None
    identities: list[np.ndarray] = []
    pvalues = {v: PerturbValues(v, config) for v in (config.perturb or {})}
    dep = derived = None
    for res in client.gather(futures):
        if not columns:
            columns = res[3]
        if res[4] is not None:
            wmax = max(wmax, res[4])
        if res[0] == "problems":
            problems.add(res[1], res[2])
        else:
            counter.add_counts(res[1], res[2])
            for v, pv in res[6].items():
                pvalues[v].merge(pv)
            if dep is None:
                dep = new_dependence_counter(res[3], config)
            dep.merge(res[7])
            if res[8] is not None:
                if derived is None:
                    derived = DerivedCollector(list(config.derived))
                derived.merge(res[8])
        if res[5] is not None:
            identities.append(res[5])
    del futures

    def duplicated_ids() -> tuple[np.ndarray, Any] | None | bool:
        # the ids must be unique over the whole input: sort the gathered 64-bit identities;
        # equal ones are confirmed on the actual id values (one more pass over the id column
        # of the pieces), so a hash collision is never reported as a duplicate
        dups = duplicate_identities(identities)
        if dups is None:
            return True
        dups_f = client.scatter(dups, broadcast=True, hash=False)
        return repeated_ids(client.gather([
            client.submit(_duplicate_rows_task, p, offsets[i], dups_f, cfg, pure=False)
            for i, p in enumerate(pieces)]))

    if problems.rows and config.input.id_column and identities:
        found = duplicated_ids()
        if found is not None and found is not True:
            problems.add(duplicate_ids_table(*found, config), 0)
    if problems.rows:
        table = problems.table()
        k = len(table)
        raise InputError(
            f"the input of {config.name!r} does not match the config ({k} problem"
            f"{'s' if k != 1 else ''}; rows are 1-based data rows, the header not counted; "
            f"checked per partition):\n{render_problems(table)}"
        )
    if not pieces or counter.n_records == 0:
        raise InputError(f"input {str(config.input_path)!r} has no records; nothing to release")
    import pandas as pd

    check_columns(pd.DataFrame(columns=columns), config)
    for pv in pvalues.values():  # every piece's problems, with global rows
        pv.check()
    unique = False
    if config.input.id_column:
        found = duplicated_ids()
        if found is True:
            unique = True
        elif found is not None:
            raise_duplicate_ids(*found, config)
    identities.clear()
    codes, counts = counter.result()
    return CellCount(cell_table(codes, counts, config), codes, counter.n_records, columns,
                     identities_unique=unique, weight_max=wmax,
                     perturb_counts={v: pv.value_counts() for v, pv in pvalues.items()},
                     dependence=dep if dep is not None else new_dependence_counter(columns, config),
                     derived=derived), pieces, offsets


def _submit_refinement(client, acc, pieces, offsets, codes_f, cfg) -> list:
    """One report refinement pass: a task per piece, each with the kept moved records of its
    rows (the futures; :func:`_merge_all` adds their partial accumulators)."""
    template = acc.spawn()
    template.moved_rows, template.moved_cells = [], []
    tmpl_f = client.scatter(template, broadcast=True, hash=False)
    futures = []
    for i, p in enumerate(pieces):
        mr, mc = acc.moved_slice(offsets[i], offsets[i + 1])
        futures.append(client.submit(_refine_task, p, offsets[i], codes_f, tmpl_f, mr, mc, cfg,
                                     pure=False))
    return futures


def _write_files(config: ReleaseConfig, schema, scratch: Path, bits: int, out_dir: Path,
                 records_path: Path | None, dplan, say) -> tuple[Path | None, dict[str, Path]]:
    """The client's part: ``records.parquet`` from the spilled buckets (when asked) and the
    public files from the temp buckets, in order."""
    records_file = None
    if records_path is not None:
        say("writing the internal records file")
        records_file = write_records_from_buckets(
            RecordsSpill(scratch / "records", bits, piece=0).buckets(), records_path,
            dplan.cell_id, dplan.cell_prb)
    say("writing the public file in order")
    files = write_public_files(config, schema, BucketSpill(scratch, bits, piece=0).buckets(),
                               out_dir)
    return records_file, files


def dask_release(config: ReleaseConfig, seed: int, out_dir: Path, spec: DaskSpec, *,
                 progress: Callable[[str], None] | None = None,
                 records_path: Path | None = None) -> BatchRelease:
    """Release ``config``'s input on a Dask cluster (:func:`_dask_release`). A worker that
    dies is replaced and its tasks rerun by Dask; when the cluster cannot go on (the data of
    a lone worker lost, a task that kills its worker every time, the scheduler gone) the
    release runs once more from the start (every task is deterministic: the same files),
    and a second failure raises :class:`DaskClusterError` (exit 2, nothing published)
    instead of a traceback."""
    error: BaseException | None = None
    for attempt in (1, 2):
        try:
            return _dask_release(config, seed, out_dir, spec, progress=progress,
                                 records_path=records_path)
        except cluster_errors() as e:
            error = e
            if attempt == 1 and progress is not None:
                progress(f"the Dask cluster failed ({type(e).__name__}); running the release "
                         "again")
    where = spec.scheduler or f"a local cluster of {spec.workers} worker(s)"
    raise DaskClusterError(
        f"the Dask cluster ({where}) failed twice during the release: "
        f"{type(error).__name__}: {error or 'no detail'}. A worker probably died (out of "
        "memory, killed) and its tasks could not be rerun, or the scheduler went away. "
        "Nothing was published; rerun with more memory per worker, more workers, or "
        "--engine streaming (the release is reproducible: the same files)")


def _household_piece_task(fn, piece, offset, index, config, shared, extra):
    """One piece of a household release pass: ``fn(frame, index, *shared, *extra)``
    (:mod:`sdc.pipeline.households`'s per-batch functions)."""
    _kill_hook("household")
    return fn(_read_piece(piece, offset, config), index, *shared, *extra)


class HouseholdPieces:
    """The runner of a household release on the cluster
    (:func:`sdc.pipeline.households.stream_household_release` merges the parts): each
    pass's per-batch function runs as one task per Parquet piece, its shared arguments
    scattered once; the parts come back in piece order."""

    def __init__(self, client, config: ReleaseConfig) -> None:
        self.client, self.config = client, config
        self.pieces = _pieces(config)
        self.offsets = np.concatenate(
            [[0], np.cumsum([p[2] for p in self.pieces])]).astype(int).tolist()
        self._cfg = client.scatter(config, broadcast=True, hash=False)

    def map(self, fn: Callable[..., Any], shared: tuple,
            per_piece: Callable[[int], tuple] | None = None):
        """The parts of ``fn`` over every piece, in piece order (one in memory at a time)."""
        (shared_f,) = self.client.scatter([shared], broadcast=True, hash=False)
        futures = [self.client.submit(_household_piece_task, fn, p, self.offsets[i], i,
                                      self._cfg, shared_f,
                                      per_piece(i) if per_piece is not None else (),
                                      pure=False)
                   for i, p in enumerate(self.pieces)]
        try:
            for fut in futures:
                part = fut.result()
                fut.release()
                yield part
        finally:
            for fut in futures:
                fut.release()

    def frames(self, columns: list[str] | None = None):
        """The pieces read by the client (the rare re-reads: duplicated ids, inconsistent
        households, the reports' refinement passes)."""
        for i, (path, rg, _n) in enumerate(self.pieces):
            if columns is None:
                yield _read_piece((path, rg, _n), self.offsets[i], self.config)
            else:
                yield table_to_frame(pq.ParquetFile(path).read_row_group(rg, columns=columns),
                                     self.offsets[i])


def _dask_household_release(config: ReleaseConfig, seed: int, out_dir: Path, spec: DaskSpec,
                            progress: Callable[[str], None] | None = None,
                            records_path: Path | None = None):
    """A household file (docs/HOUSEHOLDS.md, "Engines"): the streaming engine's three passes
    with their per-batch work as tasks on the pieces, merged on the client."""
    from sdc.pipeline.households import stream_household_release

    with dask_client(spec) as client:
        return stream_household_release(config, seed, out_dir, tmp_dir=spec.scratch,
                                        progress=progress, records_path=records_path,
                                        runner=HouseholdPieces(client, config))


def _dask_release(config: ReleaseConfig, seed: int, out_dir: Path, spec: DaskSpec, *,
                  progress: Callable[[str], None] | None = None,
                  records_path: Path | None = None) -> BatchRelease:
    """Release ``config``'s input on a Dask cluster; write the public files into ``out_dir``
    and the internal ``records.parquet`` to ``records_path`` when given (spilled by the apply
    tasks into ``<scratch>/records/``, written by the client bucket after bucket)."""
    if config.input.household_id is not None:
        return _dask_household_release(config, seed, out_dir, spec, progress, records_path)
    say = progress or (lambda s: None)
    scratch = Path(tempfile.mkdtemp(prefix="sdc-dask-", dir=spec.scratch))
    try:
        with dask_client(spec) as client:
            say("counting cells on the cluster")
            count, pieces, offsets = dask_count_cells(client, config)
            plan = plan_cells(count, config)
            cells = count.cells
            dplan = draw_plan(plan, config)
            schema = public_schema(config, input_arrow_schema(config))
            salt = order_salt(cells)
            cfg = client.scatter(config, broadcast=True, hash=False)
            codes_f = client.scatter(count.cell_codes, broadcast=True, hash=False)
            dplan_f = client.scatter(dplan, broadcast=True, hash=False)
            cells_f = client.scatter(cells, broadcast=True, hash=False)

            say("record identities on the cluster")
            # perturb: draws for every record: identities made distinct over all records,
            # unless the count pass found them unique (then each task uses its raw ones)
            perturb = BatchPerturb.of(count, config)
            every = perturb is not None
            if every and count.identities_unique:
                got = [(None, None)] * len(pieces)
                sizes = [0] * len(pieces)
            else:
                got = client.gather([client.submit(_identity_task, p, offsets[i], codes_f,
                                                   dplan_f, cfg, every, pure=False)
                                     for i, p in enumerate(pieces)])
                sizes = [g[0].size for g in got]
            from sdc.method.draws import unique_identities

            ident = (unique_identities(np.concatenate([g[0] for g in got]),
                                       np.concatenate([g[1] for g in got]))
                     if sum(sizes) else np.zeros(0, np.uint64))
            del got
            starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
            no_ident = every and count.identities_unique

            say("releasing records on the cluster")
            bits = bucket_bits(count.n_records)
            acc = new_accumulator(cells, config, count.weight_max)  # the reports' aggregates
            acc_f = client.scatter(acc.spawn(), broadcast=True, hash=False)
            futures = [client.submit(_apply_task, p, offsets[i], i, codes_f, cells_f, dplan_f,
                                     None if no_ident else ident[starts[i]:starts[i + 1]], cfg,
                                     seed, schema, salt, bits, str(scratch), acc_f,
                                     str(scratch / "records") if records_path else None,
                                     perturb, pure=False)
                       for i, p in enumerate(pieces)]
            released_frequency = np.zeros(cells.n_cells, dtype=np.int64)
            changed = np.zeros(len(plan.block_plan.blocks), dtype=np.int64)
            from distributed import as_completed

            for fut in as_completed(futures):
                freq, ch, part, dp_changed = fut.result()
                fut.release()
                released_frequency += freq
                changed += ch
                if dp_changed is not None:
                    perturb.changed += dp_changed
                acc.merge(part)
            del futures
            more = acc.start_refinement()
            # the first refinement pass runs on the cluster while the client writes the
            # records file and the public file from the temp buckets
            pending = (_submit_refinement(client, acc, pieces, offsets, codes_f, cfg)
                       if more else None)
            records_file, files = _write_files(config, schema, scratch, bits, out_dir,
                                               records_path, dplan, say)
            if pending is not None:
                say("numeric summaries for the reports on the cluster (finishing the pass run "
                    "alongside the writing)")
                _merge_all(client, pending, acc)
                del pending
                more = acc.end_refine_pass()
            while more:
                _merge_all(client, _submit_refinement(client, acc, pieces, offsets, codes_f,
                                                      cfg), acc)
                more = acc.end_refine_pass()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return BatchRelease(plan, count.n_records, released_frequency, changed, schema, files,
                        accumulator=acc, records_file=records_file,
                        dp_perturbations=perturb.perturbations() if perturb else [])
