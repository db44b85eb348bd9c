"""Reading the input in record batches and writing the public files batch by batch.

:func:`input_batches` yields the input (Parquet file or folder of parts, CSV streamed by
pyarrow) as frames of at most ``batch_rows`` records with a global ``RangeIndex``;
:func:`public_schema` is the one Arrow schema of the public microdata (from the input's schema
and the config, never from a batch's dtypes); :class:`PublicWriter` writes Parquet (row groups
of exactly :data:`ROW_GROUP_ROWS`) and CSV whose bytes depend only on the public records and
their order, not on the batching. Every engine writes its public files here.
"""

from __future__ import annotations

import io
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.io.recode import recode_frame
from sdc.io.values import lossless_type, missing_markers, to_lossless

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "PUBLIC_ID",
    "ROW_GROUP_ROWS",
    "PublicWriter",
    "check_public_types",
    "check_streamable",
    "csv_value_types",
    "frame_to_table",
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

PUBLIC_ID = "record_id"
DEFAULT_BATCH_ROWS = 1 << 20
READ_AHEAD = 1  # frames read by a background thread ahead of the consumer
ROW_GROUP_ROWS = 1 << 20
_NA_STRINGS = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
               "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]


def check_streamable(config: ReleaseConfig, engine: str,
                     others: tuple[str, ...] = ("pandas",)) -> None:
    """Refuse an input the batch reader cannot read in record batches (``engine`` and
    ``others``, the executors that read it whole, name the refusal's way out).

    Raises
    ------
    InputError
        SPSS ``.sav`` / Stata ``.dta`` input (no batch reader: convert it to Parquet once, e.g.
        ``pd.read_spss(path).to_parquet(...)``, or use an executor that reads it whole).
    """
    from sdc.io.engine_formats import BATCH_INPUT_FORMATS, engine_problems
    from sdc.io.sniff import check_file_kind

    if config.input_path.is_file():
        check_file_kind(config.input_path, config.input.resolved_format)
    problems = engine_problems(config, engine, BATCH_INPUT_FORMATS, others)
    if len(problems) == 1:
        raise InputError(problems[0])
    if problems:
        raise InputError(f"{len(problems)} problems:\n" + "\n".join(f"  {i}. {p}" for i, p
                                                                      in enumerate(problems, 1)))


def input_sha256(path: Path) -> str:
    """SHA-256 of the input: of the file's bytes, or for a folder of Parquet parts, of the list
    of (relative path, SHA-256 of the part) in path order."""
    import hashlib

    from sdc.io.write import sha256_file

    path = Path(path)
    if not path.is_dir():
        if not path.exists():
            raise InputError(f"input {str(path)!r} does not exist. Fix input.path in the config")
        return sha256_file(path)
    h = hashlib.sha256()
    for part in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
        h.update(f"{part.relative_to(path).as_posix()}\t{sha256_file(part)}\n".encode())
    return h.hexdigest()


def _text_keys(config: ReleaseConfig) -> list[str]:
    return [k for k, kv in config.input_key_variables.items()
            if kv.categories is not None and any(isinstance(c, str) for c in kv.categories)]


def value_columns(config: ReleaseConfig, names: list[str]) -> list[str]:
    """The columns of a CSV input read as text and typed without loss
    (:mod:`sdc.io.values`): every column but the key variables, the DP-PRAM variables, the
    weight and the id column."""
    inp = config.input
    skip = set(config.key_variables) | set(config.perturb) | {inp.weight, inp.id_column}
    return [n for n in names if n not in skip]


def _csv_read_parse(config: ReleaseConfig, block_size: int = 1 << 24):
    inp = config.input
    enc = inp.encoding.lower().replace("_", "-")
    read = pacsv.ReadOptions(block_size=block_size,
                             encoding="utf8" if enc in ("utf-8", "utf8", "utf-8-sig") else inp.encoding)
    return read, pacsv.ParseOptions(delimiter=inp.delimiter)


def _csv_header(config: ReleaseConfig) -> list[str]:
    read, parse = _csv_read_parse(config)
    convert = pacsv.ConvertOptions(null_values=_NA_STRINGS, strings_can_be_null=False,
                                   timestamp_parsers=[])
    with pacsv.open_csv(str(config.input_path), read_options=read, parse_options=parse,
                        convert_options=convert) as reader:
        return list(reader.schema.names)


def _csv_options(config: ReleaseConfig, block_size: int = 1 << 24,
                 names: list[str] | None = None):
    read, parse = _csv_read_parse(config, block_size)
    # text keys stay text ("01" is not 1); the other non-key columns are read as text and
    # typed without loss (sdc.io.values); strings are never turned into nulls by pyarrow: the
    # missing markers are applied per column below
    if names is None:
        names = _csv_header(config)
    types = {k: pa.string() for k in _text_keys(config)}
    types.update({c: pa.string() for c in value_columns(config, names)})
    convert = pacsv.ConvertOptions(column_types=types,
                                   null_values=_NA_STRINGS, strings_can_be_null=False,
                                   timestamp_parsers=[])
    return read, parse, convert


def csv_value_types(config: ReleaseConfig) -> dict[str, pa.DataType]:
    """The type of every text-read column of a CSV input (:func:`value_columns`), decided
    from the file's first block by :func:`sdc.io.values.lossless_type`."""
    path = config.input_path
    st = path.stat()
    inp = config.input
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, inp.delimiter, inp.encoding,
           tuple(inp.na_values), tuple(sorted(config.key_variables)), tuple(sorted(config.perturb)),
           inp.weight, inp.id_column, tuple(_text_keys(config)))
    if key not in _VALUE_TYPES:
        _VALUE_TYPES.clear()  # one input at a time
        _VALUE_TYPES[key] = _first_block_types(config)
    return dict(_VALUE_TYPES[key])


_VALUE_TYPES: dict[tuple, dict[str, pa.DataType]] = {}


def _first_block_types(config: ReleaseConfig) -> dict[str, pa.DataType]:
    names = _csv_header(config)
    cols = value_columns(config, names)
    if not cols:
        return {}
    read, parse, convert = _csv_options(config, names=names)
    convert.include_columns = cols
    with pacsv.open_csv(str(config.input_path), read_options=read, parse_options=parse,
                        convert_options=convert) as reader:
        try:
            first = reader.read_next_batch()
        except StopIteration:
            return {c: pa.string() for c in cols}
    table = _csv_missing(pa.Table.from_batches([first]), config, {})
    return {c: lossless_type(table.column(c)) for c in cols}


def _dataset(path: Path) -> pads.Dataset:
    try:
        return pads.dataset(str(path), format="parquet")
    except (pa.ArrowException, OSError) as e:
        raise InputError(
            f"input {str(path)!r} is not a readable Parquet file or folder of Parquet parts "
            f"({e}). Check input.path and input.format"
        ) from None


def input_arrow_schema(config: ReleaseConfig) -> pa.Schema | None:
    """The Arrow schema the batch readers produce for the input (None for SPSS/Stata).

    CSV: pyarrow's types inferred from the first block (text keys forced to string).
    """
    fmt = config.input.resolved_format
    path = config.input_path
    if fmt == "parquet":
        return _normalize_schema(_dataset(path).schema)
    if fmt == "csv":
        read, parse, convert = _csv_options(config)
        with pacsv.open_csv(str(path), read_options=read, parse_options=parse,
                            convert_options=convert) as reader:
            schema = _normalize_schema(reader.schema)
        types = csv_value_types(config)
        return pa.schema([pa.field(f.name, types.get(f.name, f.type)) for f in schema])
    return None


def _normalize_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_null(t):
        return pa.string()
    return t


def _normalize_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, _normalize_type(f.type)) for f in schema])


def _integral(kv) -> bool:
    return kv.range is not None or (
        kv.categories is not None
        and all(isinstance(c, int) and not isinstance(c, bool) for c in kv.categories))


def public_schema(config: ReleaseConfig, input_schema: pa.Schema) -> pa.Schema:
    """The public file's Arrow schema: ``record_id`` (int64) then the input's columns minus
    ``input.id_column`` and ``input.drop``, in input order. Key variables declared with
    integers are int64 (nullable); text keys are string; every other column keeps the input's
    type, except that integers of every width (int8..int32, uint8..uint32: R and Stata write
    32-bit integers) are int64, as a CSV of the same data gives (same values, same text, same
    public records whatever the input format). No schema metadata (no pandas metadata: it
    would depend on one engine's dtypes)."""
    skip = set(config.input.drop) | ({config.input.id_column} if config.input.id_column else set())
    if PUBLIC_ID in input_schema.names and PUBLIC_ID not in skip:
        raise InputError(
            f"column {PUBLIC_ID!r} in the input clashes with the public record id the release "
            f"adds; rename it, declare it as input.id_column, or list it in input.drop")
    fields = [pa.field(PUBLIC_ID, pa.int64())]
    for f in _normalize_schema(input_schema):
        if f.name in skip:
            continue
        t = f.type
        kv = config.key_variables.get(f.name)
        if kv is not None:
            if _integral(kv):
                t = pa.int64()
            elif kv.categories is not None and any(isinstance(c, str) for c in kv.categories):
                t = pa.string()
        elif pa.types.is_integer(t) and t != pa.uint64():
            t = pa.int64()
        fields.append(pa.field(f.name, t))
    schema = pa.schema(fields)
    check_public_types(config, schema)
    return schema


def public_schema_for(config: ReleaseConfig, frame: pd.DataFrame) -> pa.Schema:
    """The public Arrow schema of an in-memory release: :func:`sdc.io.batches.public_schema`
    of the input file's Arrow schema (what the batch engines use), so every engine writes the
    same types; for SPSS/Stata input, or a column whose values the file's inferred type cannot
    hold, the type comes from ``frame``."""
    base = None
    try:
        if config.input_path.exists():
            base = input_arrow_schema(config)
    except (InputError, pa.ArrowException, OSError, ValueError):
        base = None
    if base is None:
        base = _schema_from_frame(frame)
    schema = public_schema(config, base)
    fields = []
    for f in schema:
        if f.name in frame.columns and f.name not in config.key_variables:
            s = frame[f.name]
            if pa.types.is_integer(f.type) and s.dtype.kind == "f":
                v = s.to_numpy()
                if not np.all(np.isnan(v) | (v == np.floor(v))):
                    f = pa.field(f.name, pa.float64())
            elif (pa.types.is_integer(f.type) or pa.types.is_floating(f.type)) and \
                    s.dtype.kind not in "iufb":
                f = pa.field(f.name, pa.string())
        fields.append(f)
    return pa.schema(fields)


def _schema_from_frame(frame: pd.DataFrame) -> pa.Schema:
    fields = []
    for c in frame.columns:
        try:
            t = pa.Schema.from_pandas(frame[[c]].head(1000), preserve_index=False).field(c).type
        except (pa.ArrowException, TypeError, ValueError):
            t = pa.string()
        fields.append(pa.field(c, t))
    return pa.schema(fields)


def _is_binary(t: pa.DataType) -> bool:
    return (pa.types.is_binary(t) or pa.types.is_large_binary(t)
            or pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t))


def check_public_types(config: ReleaseConfig, schema: pa.Schema) -> None:
    """Refuse a nested column (struct, list, map) or a binary one (bytes) for an output format
    without a way to write it unchanged: CSV has no standard text for nested values or for
    bytes (which need not be UTF-8), SPSS and Stata no nested or byte variables. The Parquet
    file keeps them as they are.

    Raises
    ------
    InputError
        Names the columns, their types, the formats and the fixes.
    """
    formats = config.output.formats if config.output is not None else ["parquet"]
    flat = [f for f in formats if f in ("csv", "sav", "dta")]
    nested = [f for f in schema if pa.types.is_nested(f.type)]
    binary = [f for f in schema if _is_binary(f.type)]
    if not flat or not (nested or binary):
        return
    what = []
    if nested:
        what.append(", ".join(f"{f.name!r} ({f.type})" for f in nested[:5])
                    + " hold nested values (struct/list/map)")
    if binary:
        what.append(", ".join(f"{f.name!r} ({f.type})" for f in binary[:5])
                    + " hold bytes (binary, not necessarily UTF-8 text)")
    raise InputError(
        f"column(s) {'; '.join(what)}; output.formats {flat} cannot hold them unchanged (CSV "
        "has no standard text for them, SPSS and Stata no such variables). Release them in "
        "Parquet only (output.formats: [parquet]), or list the column(s) under input.drop"
        + (" (or store the bytes as text in the input file)" if binary else ""))


def _csv_missing(table: pa.Table, config: ReleaseConfig,
                 types: dict[str, pa.DataType] | None, offset: int = 0) -> pa.Table:
    """pandas' CSV rules for the keys: in text keys only an empty field is missing, in the
    other string columns every pandas missing marker is; the text-read columns
    (:func:`value_columns`): the empty field and ``input.na_values`` are missing, then each is
    converted to its type in ``types`` (None: left as text) without loss, or refused."""
    import pyarrow.compute as pc

    text = set(_text_keys(config))
    values = set(value_columns(config, table.column_names))
    value_markers = missing_markers(config.input.na_values)
    cols = []
    for name, col in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            found = ([""] if name in text else value_markers if name in values
                     else _NA_STRINGS)
            markers = pa.array(found, type=col.type)
            col = pc.if_else(pc.is_in(col, value_set=markers), pa.scalar(None, col.type), col)
            if types and name in types:
                col = to_lossless(col, types[name], name=name, first_row=offset)
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def table_to_frame(table: pa.Table | pa.RecordBatch, offset: int) -> pd.DataFrame:
    """One batch as pandas, indexed by global 0-based row numbers ``offset..offset+n-1``."""
    frame = table.to_pandas()
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
        Missing or unreadable file, SPSS/Stata input, a CSV value that does not fit the type
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


def _input_frames(config: ReleaseConfig, batch_rows: int,
                  columns: list[str] | None) -> Iterator[pd.DataFrame]:
    for table, offset in input_tables(config, batch_rows=batch_rows, columns=columns):
        yield table_to_frame(table, offset)


def input_tables(config: ReleaseConfig, *, batch_rows: int = DEFAULT_BATCH_ROWS,
                 columns: list[str] | None = None) -> Iterator[tuple[pa.Table, int]]:
    """``(table, offset)`` of every batch of :func:`input_batches` before it becomes pandas
    (and before ``recode:``): the same records and Arrow types (CSV: missing markers applied,
    value columns typed without loss, a value that does not fit refused naming the file and
    its row); ``offset`` is the batch's first global 0-based row. The dask engine's client
    copies a CSV input to Parquet from these (:func:`copy_to_parquet`)."""
    check_streamable(config, "streaming")
    path = config.input_path
    if not path.exists():
        raise InputError(
            f"input {str(path)!r} does not exist. Fix input.path in the config (relative paths "
            f"are relative to the config's folder {str(config.base_dir)!r})"
        )
    fmt = config.input.resolved_format
    try:
        if fmt == "parquet":
            yield from _rebatch(_parquet_batches(path, columns, batch_rows), batch_rows,
                                lambda t, at: t)
            return
        read, parse, convert = _csv_options(config)
        types = csv_value_types(config)
        if columns is not None:
            convert.include_columns = list(columns)
        with pacsv.open_csv(str(path), read_options=read, parse_options=parse,
                            convert_options=convert) as reader:
            yield from _rebatch(reader, batch_rows,
                                lambda t, at: _csv_missing(t, config, types, at))
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
    return int(sum(pq.ParquetFile(f).metadata.num_rows for f in _dataset(config.input_path).files))


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
    for part in _dataset(config.input_path).files:
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
    for part in _dataset(path).files:
        pf = pq.ParquetFile(part, pre_buffer=False)
        meta = pf.metadata
        for g in range(meta.num_row_groups):
            if meta.row_group(g).num_rows <= 4 * batch_rows:
                yield from pf.read_row_group(g, columns=columns, use_threads=True).to_batches()
            else:
                yield from pf.iter_batches(batch_size=batch_rows, row_groups=[g],
                                           columns=columns, use_threads=True)


def _rebatch(source, batch_rows: int, fix) -> Iterator[tuple[pa.Table, int]]:
    """Tables of exactly ``batch_rows`` records (the last one holds the rest), whatever the
    sizes of the source's record batches (Parquet row groups, CSV blocks), with the global
    row of their first record."""
    offset = 0
    pending: list[pa.RecordBatch] = []
    n_pending = 0
    for batch in source:
        if batch.num_rows == 0:
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
    Parquet file ``dest``, one row group per ``batch_rows`` records: the dask engine's client
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


# -- writing ------------------------------------------------------------------------------------
def frame_to_table(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    arrays = []
    for f in schema:
        s = frame[f.name]
        if pa.types.is_integer(f.type) and s.dtype.kind == "f":
            vals = s.to_numpy()
            mask = np.isnan(vals)
            arrays.append(pa.array(np.where(mask, 0, vals).astype(np.int64), type=f.type,
                                   mask=mask))
        elif pa.types.is_integer(f.type) and s.dtype == object:
            arrays.append(pa.array(pd.array(s.to_numpy(), dtype="Int64"), type=f.type))
        else:
            arrays.append(pa.array(s, type=f.type, from_pandas=True))
    return pa.Table.from_arrays(arrays, schema=schema)


def _csv_frame(table: pa.Table) -> pd.DataFrame:
    mapping = {pa.int8(): pd.Int8Dtype(), pa.int16(): pd.Int16Dtype(), pa.int32(): pd.Int32Dtype(),
               pa.int64(): pd.Int64Dtype(), pa.uint8(): pd.UInt8Dtype(),
               pa.uint16(): pd.UInt16Dtype(), pa.uint32(): pd.UInt32Dtype(),
               pa.uint64(): pd.UInt64Dtype(), pa.bool_(): pd.BooleanDtype()}
    return table.to_pandas(types_mapper=mapping.get)


class PublicWriter:
    """Write the public microdata batch by batch: the same bytes whatever the batching.

    Parameters
    ----------
    schema : pyarrow.Schema
        :func:`public_schema`.
    parquet, csv : binary file objects or None
        Where to write each format (``output.formats``).
    row_group_rows : int
        Records per Parquet row group (the last one holds the rest).
    """

    def __init__(self, schema: pa.Schema, *, parquet: BinaryIO | None = None,
                 csv: BinaryIO | None = None, row_group_rows: int = ROW_GROUP_ROWS) -> None:
        self.schema = schema
        self.row_group_rows = int(row_group_rows)
        self._pq = pq.ParquetWriter(parquet, schema, compression="snappy") if parquet else None
        self._csv = csv
        self._csv_header = True
        self._pending: list[pa.Table] = []
        self._n_pending = 0
        self.n_rows = 0

    def write_frame(self, frame: pd.DataFrame) -> None:
        """Append records given as a pandas frame (cast to the public schema)."""
        self.write_table(frame_to_table(frame, self.schema))

    def write_table(self, table: pa.Table) -> None:
        """Append records given as an Arrow table with the public schema's columns."""
        table = table.select(self.schema.names).cast(self.schema)
        self.n_rows += table.num_rows
        if self._csv is not None and table.num_rows:
            text = _csv_frame(table).to_csv(index=False, header=self._csv_header,
                                            lineterminator="\n")
            self._csv.write(text.encode("utf-8"))
            self._csv_header = False
        if self._pq is None:
            return
        self._pending.append(table)
        self._n_pending += table.num_rows
        if self._n_pending >= self.row_group_rows:
            whole = pa.concat_tables(self._pending)
            n_full = (whole.num_rows // self.row_group_rows) * self.row_group_rows
            for start in range(0, n_full, self.row_group_rows):
                self._pq.write_table(whole.slice(start, self.row_group_rows),
                                     row_group_size=self.row_group_rows)
            rest = whole.slice(n_full)
            self._pending, self._n_pending = [rest], rest.num_rows

    def close(self) -> None:
        """Flush the last row group and close the Parquet writer (CSV: header if no records)."""
        if self._csv is not None and self._csv_header:
            text = _csv_frame(self.schema.empty_table()).to_csv(index=False, lineterminator="\n")
            self._csv.write(text.encode("utf-8"))
            self._csv_header = False
        if self._pq is not None:
            if self._n_pending:
                self._pq.write_table(pa.concat_tables(self._pending),
                                     row_group_size=self.row_group_rows)
            self._pending, self._n_pending = [], 0
            self._pq.close()
            self._pq = None


def public_bytes(frame: pd.DataFrame, schema: pa.Schema, formats: list[str]) -> dict[str, bytes]:
    """The public files of an in-memory public frame, written exactly as the streaming engine
    writes them (same schema, row groups and CSV text): ``{"microdata.parquet": ..., ...}``."""
    pq_buf = io.BytesIO() if "parquet" in formats else None
    csv_buf = io.BytesIO() if "csv" in formats else None
    w = PublicWriter(schema, parquet=pq_buf, csv=csv_buf)
    w.write_frame(frame)
    w.close()
    return buffered_files(pq_buf, csv_buf)


def buffered_files(pq_buf: io.BytesIO | None, csv_buf: io.BytesIO | None) -> dict[str, bytes]:
    """``{"microdata.parquet": ..., "microdata.csv": ...}`` from the writers' buffers."""
    out: dict[str, bytes] = {}
    if pq_buf is not None:
        out["microdata.parquet"] = pq_buf.getvalue()
    if csv_buf is not None:
        out["microdata.csv"] = csv_buf.getvalue()
    return out


