"""The Dask executor: the passes of the release pipeline as tasks on a dask.distributed cluster.

:class:`DaskPieces` is the runner: a batch is one *piece* of the Parquet input (a row group of
the file, or of a part in a folder of parts, in path order; a CSV input is first copied to
Parquet by the client with the streaming reader, :func:`parquet_input`); each per-batch
function of :mod:`sdc.pipeline.passes` (with the file's stage object) runs as one task on
a worker (spilling into the scratch folder), and the client merges the parts in piece order
and writes the files: the bytes of every executor.

Without an address a ``LocalCluster`` (``workers`` processes, 1 thread each) is started for the
release and closed after it; with ``scheduler: tcp://host:port`` the existing cluster is used.
Its workers must have ``sdc`` installed and see the input path and the scratch folder (a
shared file system). The Prefect flow runs this inside its task (not with prefect-dask's
``DaskTaskRunner``: that distributes Prefect tasks, each reporting to the Prefect API - which,
embedded, lives in the flow's process - while our units of work are hundreds of data pieces
that need no orchestration of their own).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from sdc.config.base import ConfigError
from sdc.config.model import EngineSpec, ReleaseConfig
from sdc.errors import InputError, SmallBlockError
from sdc.executors.file_facts import FileFacts
from sdc.io.batches import table_to_frame
from sdc.io.recode import recode_frame
from sdc.pipeline.kernels import ReleaseOutcome

__all__ = ["DaskClusterError", "DaskPieces", "DaskSpec", "cluster_errors", "dask_client",
           "dask_release", "dask_spec", "on_cluster", "open_cluster", "parquet_input"]

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
    """``engine: {kind: dask, scheduler: tcp://host:port, workers: 2, scratch: /shared/tmp}``
    (``batch_rows``: the row groups of the Parquet copy of a CSV input)."""

    scheduler: str | None = None
    workers: int = 2
    scratch: str | None = None
    batch_rows: int = 1 << 20


@contextmanager
def parquet_input(config: ReleaseConfig, spec: DaskSpec,
                  progress: Callable[[str], None] | None = None) -> Iterator[Path | None]:
    """The Parquet file the tasks read: None for a Parquet input (read where it is); for a
    CSV, SPSS or Stata input, a copy written once by the client into ``spec.scratch`` (the workers must see
    it, as they see the spills) with the streaming engine's reader
    (:func:`sdc.io.batches.copy_to_parquet`: the same batches, values and types, so the same
    files as the streaming and pandas engines), deleted on exit. A CSV value the reader
    refuses is refused here, naming the CSV and its row; the tasks' problems name the
    config's input (the CSV) with the same global rows."""
    import shutil
    import tempfile

    from sdc.io.batches import copy_to_parquet

    if config.input.resolved_format == "parquet":
        yield None
        return
    if progress is not None:
        progress("copying the input to Parquet for the cluster")
    folder = Path(tempfile.mkdtemp(prefix="sdc-input-", dir=spec.scratch))
    try:
        dest = folder / "input.parquet"
        copy_to_parquet(config, dest, batch_rows=spec.batch_rows)
        yield dest
    finally:
        shutil.rmtree(folder, ignore_errors=True)


#: Dask settings of the local cluster sdc starts (its workers get them when they start): no
#: statistical profiler sampling every worker thread every 10 ms and no GIL monitor, for a
#: dashboard nobody opens (dashboard_address=None); measured, they kept two idle worker
#: processes at ~5% of a core each (docs/PERFORMANCE.md)
LOCAL_CLUSTER_CONFIG = {"distributed.worker.profile.enabled": False,
                        "distributed.admin.system-monitor.gil.enabled": False,
                        "distributed.admin.tick.interval": "500ms",
                        "distributed.admin.system-monitor.interval": "2s"}


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
    import dask

    with warnings.catch_warnings(), dask.config.set(LOCAL_CLUSTER_CONFIG):
        # the scheduler's HTTP server moves to a free port when 8787 is taken (a user's
        # notebook cluster): nothing of ours listens there, so the warning is only noise
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        # silence_logs CRITICAL: a task's error reaches the client and is raised there; what
        # distributed's processes log at ERROR is their own shutdown (a worker restarted after
        # a crash still heartbeating while the cluster closes printed a CommClosedError
        # traceback into the output of a release that had succeeded)
        cluster = LocalCluster(n_workers=spec.workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.CRITICAL)
    client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def _pieces(path: Path) -> list[tuple[str, int, int]]:
    """(file path, row group, rows) of every piece of a Parquet file or folder of parts, in
    file order."""
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


def _read_piece(piece: tuple[str, int, int], offset: int, config: ReleaseConfig,
                columns: list[str] | None = None):
    path, rg, _n = piece
    table = pq.ParquetFile(path).read_row_group(rg, columns=columns)
    return recode_frame(table_to_frame(table, offset), config)


@dataclass(frozen=True)
class _Refusal:
    """A refusal (exit 2: the data or config breaks an assumption) raised inside a task,
    returned as a value so that the worker does not log it as a failed computation with a
    traceback; :meth:`DaskPieces._parts` raises it again on the client."""

    error: Exception


def _piece_task(fn, piece, offset, index, config, columns, shared, extra):
    """One piece of a pass: ``fn(frame, index, *shared, *extra)`` (a per-batch function of
    :mod:`sdc.pipeline.passes`, ``shared[0]`` the file's stage object)."""
    stage = getattr(shared[0], "kind", None) if shared else None
    _kill_hook("household" if stage == "household" else fn.__name__.removesuffix("_batch"))
    try:
        return fn(_read_piece(piece, offset, config, columns), index, *shared, *extra)
    except (InputError, SmallBlockError, ConfigError) as e:
        return _Refusal(e)


class DaskPieces(FileFacts):
    """The runner on a Dask cluster: each pass's per-batch function runs as one task per
    Parquet piece (row group), its shared arguments scattered once; the parts come back in
    piece order (one in memory at a time)."""

    checked = "per partition"
    where = " on the cluster"

    def __init__(self, client, config: ReleaseConfig, source: Path | None = None) -> None:
        self.client, self.config = client, config
        self.scratch: str | None = None
        # source: the Parquet copy of a CSV input (parquet_input); the config (and every
        # message) still names the input file
        self.pieces = _pieces(config.input_path if source is None else source)
        self.offsets = np.concatenate(
            [[0], np.cumsum([p[2] for p in self.pieces])]).astype(int).tolist()
        self._cfg = client.scatter(config, broadcast=True, hash=False)

    def map(self, fn: Callable[..., Any], shared: tuple,
            per_piece: Callable[[int], tuple] | None = None,
            columns: list[str] | None = None) -> Iterator[Any]:
        """The parts of ``fn`` over every piece, in piece order; the tasks are submitted
        here, before the first part is asked for."""
        (shared_f,) = self.client.scatter([shared], broadcast=True, hash=False)
        futures = [self.client.submit(_piece_task, fn, p, self.offsets[i], i, self._cfg,
                                      columns, shared_f,
                                      per_piece(i) if per_piece is not None else (),
                                      pure=False)
                   for i, p in enumerate(self.pieces)]
        return self._parts(futures)

    @staticmethod
    def _parts(futures: list) -> Iterator[Any]:
        try:
            for fut in futures:
                part = fut.result()
                fut.release()
                if isinstance(part, _Refusal):
                    raise part.error
                yield part
        finally:
            for fut in futures:
                fut.release()

    def frames(self, columns: list[str] | None = None) -> Iterator[Any]:
        """The pieces read by the client (the rare re-reads: duplicated ids, inconsistent
        households)."""
        for i, piece in enumerate(self.pieces):
            yield _read_piece(piece, self.offsets[i], self.config, columns)

    def row_count(self) -> int:
        return int(self.offsets[-1])


def dask_spec(config: ReleaseConfig, spec: EngineSpec) -> DaskSpec:
    """The config's ``engine:`` as a :class:`DaskSpec` (``scratch`` relative to the config)."""
    scratch = str(config.resolve(spec.scratch)) if spec.scratch is not None else None
    return DaskSpec(scheduler=spec.scheduler, workers=spec.workers, scratch=scratch,
                    batch_rows=spec.batch_rows)


@contextmanager
def open_cluster(config: ReleaseConfig, spec: EngineSpec | DaskSpec, *, frame: Any = None,
                 progress: Callable[[str], None] | None = None) -> Iterator[DaskPieces]:
    """The runner of ``config``'s Parquet pieces on the cluster ``spec`` names (a CSV input
    copied to Parquet first, :func:`parquet_input`; the spills into ``spec.scratch``)."""
    dspec = spec if isinstance(spec, DaskSpec) else dask_spec(config, spec)
    with parquet_input(config, dspec, progress) as source, dask_client(dspec) as client:
        runner = DaskPieces(client, config, source)
        runner.scratch = dspec.scratch
        yield runner


def on_cluster(step: str, run: Callable[[], Any], spec: EngineSpec | DaskSpec,
               progress: Callable[[str], None] | None = None) -> Any:
    """``run()`` (a pass of the pipeline on the cluster), its failures as
    :class:`DaskClusterError`: the count once (``step == "count"``), the release twice."""
    if step == "count":
        try:
            return run()
        except cluster_errors() as e:
            raise DaskClusterError(
                f"the Dask cluster failed while counting the cells: {type(e).__name__}: "
                f"{e or 'no detail'}. A worker probably died (out of memory, killed); rerun, "
                "with more memory per worker, or --engine streaming") from None
    error: BaseException | None = None
    for attempt in (1, 2):
        try:
            return run()
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


def dask_release(config: ReleaseConfig, seed: int, out_dir: Path, spec: DaskSpec, *,
                 progress: Callable[[str], None] | None = None,
                 records_path: Path | None = None) -> ReleaseOutcome:
    """Release ``config``'s input on a Dask cluster (:func:`sdc.pipeline.run.release` with
    :class:`DaskPieces`). A worker that dies is replaced and its tasks rerun by Dask; when the
    cluster cannot go on (the data of a lone worker lost, a task that kills its worker every
    time, the scheduler gone) the release runs once more from the start (every task is
    deterministic: the same files), and a second failure raises :class:`DaskClusterError`
    (exit 2, nothing published) instead of a traceback (:func:`on_cluster`)."""
    from sdc.pipeline.run import release

    def run() -> ReleaseOutcome:
        with open_cluster(config, spec, progress=progress) as runner:
            return release(runner, config, seed, out_dir, progress=progress,
                           records_path=records_path)

    return on_cluster("release", run, spec, progress)
