"""Reading the input in record batches (and re-exporting the public-file writer).

:func:`input_batches` yields the input (Parquet file or folder of parts, CSV streamed by
pyarrow) as frames of at most ``batch_rows`` records with a global ``RangeIndex``. The Arrow
view of the input (CSV options, types, schema) is :mod:`sdc.io.arrow_input`; the public files
(:func:`public_schema`, the one Arrow schema of the public microdata, and
:class:`PublicWriter`, whose Parquet row groups of exactly :data:`ROW_GROUP_ROWS` and CSV bytes
depend only on the public records and their order, not on the batching) are
:mod:`sdc.io.public_files`; both are importable from here as before.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.io.arrow_input import (
    csv_missing,
    csv_options,
    csv_value_types,
    input_arrow_schema,
    parquet_dataset,
    value_columns,
)
from sdc.io.engine_formats import BATCH_INPUT_FORMATS, engine_problems
from sdc.io.public_files import (
    PUBLIC_ID,
    ROW_GROUP_ROWS,
    PublicWriter,
    buffered_files,
    check_public_types,
    frame_to_table,
    public_bytes,
    public_schema,
    public_schema_for,
)
from sdc.io.recode import recode_frame
from sdc.io.sniff import check_file_kind
from sdc.io.write import sha256_file

T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "PUBLIC_ID",
    "ROW_GROUP_ROWS",
    "PublicWriter",
    "buffered_files",
    "map_ahead",
    "check_public_types",
    "check_streamable",
    "csv_value_types",
    "frame_to_table",
    "public_bytes",
    "input_arrow_schema",
    "input_batches",
    "input_row_count",
    "input_sha256",
    "input_tables",
    "copy_to_parquet",
    "public_schema",
    "public_schema_for",
    "read_ahead_frames",
    "table_to_frame",
    "value_columns",
]

DEFAULT_BATCH_ROWS = 1 << 20
READ_AHEAD = 1  # frames read by a background thread ahead of the consumer


def check_streamable(config: ReleaseConfig, engine: str | None = None,
                     others: tuple[str, ...] = ()) -> None:
    """Refuse an input the batch reader cannot read in record batches (``engine``, the
    executor asking, None: the reader itself; ``others``, the executors that read it whole,
    name the refusal's way out). Which executor reads what is the registry's business
    (:mod:`sdc.executors.registry`), never the reader's.

    Raises
    ------
    InputError
        A format without a batch reader (every input format has one now: the check stays for
        the file's kind, :func:`sdc.io.sniff.check_file_kind`).
    """
    if config.input_path.is_file():
        check_file_kind(config.input_path, config.input.resolved_format)
    problems = engine_problems(config, engine or "batch", BATCH_INPUT_FORMATS, others)
    if len(problems) == 1:
        raise InputError(problems[0])
    if problems:
        raise InputError(f"{len(problems)} problems:\n" + "\n".join(f"  {i}. {p}" for i, p
                                                                      in enumerate(problems, 1)))


def input_sha256(path: Path) -> str:
    """SHA-256 of the input: of the file's bytes, or for a folder of Parquet parts, of the list
    of (relative path, SHA-256 of the part) in path order."""
    path = Path(path)
    if not path.is_dir():
        if not path.exists():
            raise InputError(f"input {str(path)!r} does not exist. Fix input.path in the config")
        return sha256_file(path)
    h = hashlib.sha256()
    for part in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
        h.update(f"{part.relative_to(path).as_posix()}\t{sha256_file(part)}\n".encode())
    return h.hexdigest()


def table_to_frame(table: pa.Table | pa.RecordBatch, offset: int) -> pd.DataFrame:
    """One batch as pandas, indexed by global 0-based row numbers ``offset..offset+n-1``.
    One block per column (``split_blocks``): a number column without missing values is a
    read-only view of the batch's Arrow buffer, not a copy into a consolidated 2-D block (at
    10M records the copies' fresh pages were ~0.4 CPU s of the count pass)."""
    frame = table.to_pandas(split_blocks=True)
    frame.index = pd.RangeIndex(offset, offset + len(frame))
    return frame


def input_batches(config: ReleaseConfig, *, batch_rows: int = DEFAULT_BATCH_ROWS,
                  columns: list[str] | None = None,
                  read_ahead: int = READ_AHEAD) -> Iterator[pd.DataFrame]:
    """The input as pandas frames of at most ``batch_rows`` records, in file order, each with
    its global row numbers as index (0-based; the problems tables print them 1-based).

    The next ``read_ahead`` frames are read, decoded and converted to pandas by a background
    thread while the caller works on the current one (:func:`read_ahead_frames`; pyarrow's
    decoding and most of the conversion release the GIL): memory grows by at most
    ``read_ahead + 1`` batches; 0 reads in the caller's thread.

    Raises
    ------
    InputError
        Missing or unreadable file, a CSV value that does not fit the type
        pyarrow inferred from the file's first block.
    """
    frames = _input_frames(config, batch_rows, columns)
    if config.recoded_keys:
        frames = (recode_frame(f, config) for f in frames)
    if read_ahead > 0:
        frames = read_ahead_frames(frames, read_ahead)
    yield from frames


def read_ahead_frames(frames: Iterator[pd.DataFrame], depth: int = 1) -> Iterator[pd.DataFrame]:
    """Yield the items of ``frames`` in order, produced by a background thread at most
    ``depth`` items ahead of the consumer. An exception of the producer is raised in the
    consumer at the point it happened; closing the generator early (an error in the
    consumer, ``break``) stops the thread and closes ``frames``."""
    slots: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                slots.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for frame in frames:
                if not put((frame, None)):
                    return
            put((end, None))
        except BaseException as err:  # noqa: BLE001 - re-raised in the consumer
            put((end, err))

    worker = threading.Thread(target=produce, name="sdc-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            frame, err = slots.get()
            if frame is end:
                if err is not None:
                    raise err
                return
            yield frame
    finally:
        stop.set()
        worker.join()
        close = getattr(frames, "close", None)
        if close is not None:
            close()


def map_ahead(fn: Callable[[T], R], items: Iterable[T], workers: int = 2, *,
              ahead: int | None = None, name: str = "sdc-read-ahead") -> Iterator[R]:
    """``fn(item)`` of every item, in order, computed by ``workers`` threads named ``name``
    (at most ``ahead`` items submitted and not yet consumed, ``workers`` + 1 by default; each
    result held until yielded). For work that releases the GIL (numpy sorts and gathers)
    while the consumer writes: the records file of a spilled release, whose buckets' sorts
    were its step's bottleneck on one thread, and the streaming runner's batches
    (:meth:`sdc.executors.streaming.LocalBatches.map`). A failure is raised in the consumer
    at its item; closing the generator early cancels the rest. An item is dropped here once
    submitted: its task holds the only reference this function keeps."""
    from concurrent.futures import ThreadPoolExecutor

    limit = workers + 1 if ahead is None else max(1, ahead)
    pool = ThreadPoolExecutor(workers, thread_name_prefix=name)
    pending: deque = deque()
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            del item
            if len(pending) >= limit:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for f in pending:
            f.cancel()
        pool.shutdown(wait=True)


def _input_frames(config: ReleaseConfig, batch_rows: int,
                  columns: list[str] | None) -> Iterator[pd.DataFrame]:
    for table, offset in input_tables(config, batch_rows=batch_rows, columns=columns):
        yield table_to_frame(table, offset)


def input_tables(config: ReleaseConfig, *, batch_rows: int = DEFAULT_BATCH_ROWS,
                 columns: list[str] | None = None) -> Iterator[tuple[pa.Table, int]]:
    """``(table, offset)`` of every batch of :func:`input_batches` before it becomes pandas
    (and before ``recode:``): the same records and Arrow types (CSV: missing markers applied,
    value columns typed without loss, a value that does not fit refused naming the file and
    its row); ``offset`` is the batch's first global 0-based row. The dask executor's client
    copies a CSV input to Parquet from these (:func:`copy_to_parquet`)."""
    check_streamable(config)
    path = config.input_path
    if not path.exists():
        raise InputError(
            f"input {str(path)!r} does not exist. Fix input.path in the config (relative paths "
            f"are relative to the config's folder {str(config.base_dir)!r})"
        )
    fmt = config.input.resolved_format
    if fmt in ("sav", "dta"):
        from sdc.io.stat_input import stat_tables

        yield from stat_tables(config, batch_rows, columns)
        return
    try:
        if fmt == "parquet":
            yield from _rebatch(_parquet_batches(path, columns, batch_rows), batch_rows,
                                lambda t, at: t)
            return
        read, parse, convert = csv_options(config)
        types = csv_value_types(config)
        if columns is not None:
            convert.include_columns = list(columns)
        with pacsv.open_csv(str(path), read_options=read, parse_options=parse,
                            convert_options=convert) as reader:
            yield from _rebatch(reader, batch_rows,
                                lambda t, at: csv_missing(t, config, types, at))
    except pa.ArrowInvalid as e:
        raise InputError(
            f"input file {str(path)!r} cannot be read in batches: {e}. The streaming reader "
            "takes each column's type from the file's first block; a later value of another "
            "type (text in a numeric column) stops it. Fix the value, or convert the file to "
            "Parquet with explicit types"
        ) from None


def input_row_count(config: ReleaseConfig) -> int | None:
    """Number of records of a Parquet input from its metadata (None for CSV: unknown before
    reading it)."""
    if config.input.resolved_format != "parquet":
        return None
    return int(sum(pq.ParquetFile(f).metadata.num_rows for f in parquet_dataset(config.input_path).files))


def input_value_ranges(config: ReleaseConfig,
                       columns: list[str]) -> dict[str, tuple[float, float, bool]]:
    """``{column: (low, high, integer-typed)}`` from a Parquet input's statistics, for the
    numeric ``columns`` whose every row group states its minimum and maximum (row groups of
    nulls only are skipped); a column missing here has no usable statistics (CSV input, a
    writer that wrote none, NaN bounds).

    Only a hint: the reports' quartile select starts its radix digits at the bits in which
    the values differ (:class:`sdc.reports.quantiles.ImageMap`), and checks every value
    against the range, so statistics that do not bound the data cost time, never a figure.
    """
    if config.input.resolved_format != "parquet" or not columns:
        return {}
    out: dict[str, tuple[float, float, bool]] = {}
    lows: dict[str, float] = {}
    highs: dict[str, float] = {}
    dead: set[str] = set()
    for part in parquet_dataset(config.input_path).files:
        meta = pq.ParquetFile(part).metadata
        names = meta.schema.to_arrow_schema().names
        where = {c: names.index(c) for c in columns if c in names}
        for c in columns:
            if c not in where:
                dead.add(c)
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            for c, i in where.items():
                col = rg.column(i)
                st = col.statistics
                if st is not None and st.has_null_count and st.null_count == rg.num_rows:
                    continue  # nulls only: nothing to bound
                if st is None or not st.has_min_max:
                    dead.add(c)
                    continue
                try:
                    lo, hi = float(st.min), float(st.max)
                except (TypeError, ValueError):
                    dead.add(c)
                    continue
                if not (np.isfinite(lo) and np.isfinite(hi)):
                    dead.add(c)
                    continue
                lows[c] = min(lows.get(c, lo), lo)
                highs[c] = max(highs.get(c, hi), hi)
    schema = input_arrow_schema(config)
    for c in columns:
        if c in dead or c not in lows:
            continue
        integral = pa.types.is_integer(schema.field(c).type) if c in schema.names else False
        out[c] = (lows[c], highs[c], bool(integral))
    return out


def _parquet_batches(path: Path, columns: list[str] | None, batch_rows: int):
    """Record batches of a Parquet file or of the parts of a folder (in path order), read
    sequentially, one row group at a time (``read_row_group``; a row group of more than
    ``4 * batch_rows`` records is streamed in batches instead, so memory stays bounded).

    Never with pyarrow's default ``pre_buffer=True``: it keeps every column chunk it has read
    cached in the file object, so memory grows with the file (1.8 GB of Arrow memory after
    one pass over 100M records of 7 columns) and reading was 2-3x slower here. (The dataset
    scanner reads ahead without a bound that a slow consumer can rely on: at 30M records it
    held ~2 GB.)"""
    for part in parquet_dataset(path).files:
        pf = pq.ParquetFile(part, pre_buffer=False)
        meta = pf.metadata
        for g in range(meta.num_row_groups):
            if meta.row_group(g).num_rows <= 4 * batch_rows:
                yield from pf.read_row_group(g, columns=columns, use_threads=True).to_batches()
            else:
                yield from pf.iter_batches(batch_size=batch_rows, row_groups=[g],
                                           columns=columns, use_threads=True)


def _rebatch(source, batch_rows: int, fix) -> Iterator[tuple[pa.Table, int]]:
    """Tables of ``batch_rows`` records (the last one holds the rest), whatever the sizes of the
    source's record batches (Parquet row groups, CSV blocks), with the global row of their
    first record. A source batch of between half and all of ``batch_rows`` records that starts
    a table (a Parquet row group of 1,000,000 records against batches of 2^20) is a table as it
    is: one chunk per column, which pandas then views instead of copying a concatenation of
    two row groups (the passes take batches of any size: their offsets are summed)."""
    offset = 0
    pending: list[pa.RecordBatch] = []
    n_pending = 0
    for batch in source:
        if batch.num_rows == 0:
            continue
        if not pending and batch_rows // 2 <= batch.num_rows <= batch_rows:
            yield fix(pa.Table.from_batches([batch]), offset), offset
            offset += batch.num_rows
            continue
        pending.append(batch)
        n_pending += batch.num_rows
        while n_pending >= batch_rows:
            table = pa.Table.from_batches(pending)
            head, rest = table.slice(0, batch_rows), table.slice(batch_rows)
            yield fix(head, offset), offset
            offset += batch_rows
            pending, n_pending = rest.to_batches(), rest.num_rows
    if n_pending:
        yield fix(pa.Table.from_batches(pending), offset), offset


def copy_to_parquet(config: ReleaseConfig, dest: Path, *,
                    batch_rows: int = DEFAULT_BATCH_ROWS) -> int:
    """Write the input, as the streaming reader reads it (:func:`input_tables`), to the
    Parquet file ``dest``, one row group per ``batch_rows`` records: the dask executor's client
    does this once for a CSV input, so that its tasks read pieces of the same values and
    types. Returns the number of records. Errors name the input file and its rows."""
    writer = schema = None
    n = 0
    try:
        for table, _ in input_tables(config, batch_rows=batch_rows):
            if writer is None:
                schema = table.schema
                writer = pq.ParquetWriter(str(dest), schema)
            elif table.schema != schema:
                table = table.cast(schema)
            writer.write_table(table, row_group_size=batch_rows)
            n += table.num_rows
    finally:
        if writer is not None:
            writer.close()
    if writer is None:  # no record: an empty file of the input's columns
        pq.write_table(input_arrow_schema(config).empty_table(), str(dest))
    return n
