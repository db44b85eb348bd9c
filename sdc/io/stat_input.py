"""SPSS ``.sav`` and Stata ``.dta`` input, read whole or in record batches (pyreadstat).

:func:`read_stat` reads the file whole (the in-memory executor, ``sdc init``);
:func:`stat_tables` reads it in chunks of ``batch_rows`` records for the streaming and Dask
executors (pyreadstat's ``read_file_in_chunks``), with the same values and types: each chunk
goes through the same conversions (:func:`_convert`), and the one conversion that depends on a
whole column (an SPSS number format without decimals whose values are all whole: int64) is
decided once for the file by a first pass over its chunks (:func:`stat_facts`, cached per
file: path, size, modification time), as the whole read decides it on the whole column. The
Arrow schema of the batches (:func:`stat_schema`) comes from the same pass, so every batch is
cast to one schema.
"""

from __future__ import annotations

import codecs
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.io.columns import normalize_schema, value_columns
from sdc.io.sniff import duplicate_names_error

__all__ = ["read_stat", "sav_missing_ranges", "stat_schema", "stat_tables"]


def _is_utf8(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name in ("utf-8", "utf-8-sig")
    except LookupError:
        return False


def _reader_and_kwargs(fmt: str, encoding: str):
    import pyreadstat

    reader = pyreadstat.read_sav if fmt == "sav" else pyreadstat.read_dta
    kwargs: dict = {} if _is_utf8(encoding) else {"encoding": encoding}
    if fmt == "sav":
        # SPSS user-missing codes (9 = "no answer") stay values of the non-key columns and
        # the SPSS output declares them again (sdc.release.stat_files); keys, weight and id
        # read them as missing, as before
        kwargs["user_missing"] = True
    return reader, kwargs


def _unreadable(path: Path, fmt: str, e: Exception) -> InputError:
    kind = "SPSS .sav" if fmt == "sav" else "Stata .dta"
    return InputError(f"input file {str(path)!r} is not a readable {kind} file "
                      f"({type(e).__name__}: {e}). Check input.path and input.format")


def read_stat(path: Path, fmt: str, config: ReleaseConfig) -> pd.DataFrame:
    """The whole SPSS/Stata file as pandas (the in-memory executor's read)."""
    reader, kwargs = _reader_and_kwargs(fmt, config.input.encoding)
    try:
        frame, meta = reader(str(path), **kwargs)
    except Exception as e:  # pyreadstat raises its own ReadstatError / PyreadstatError
        raise _unreadable(path, fmt, e) from None
    _check_names(path, list(frame.columns))
    values = value_columns(config, list(frame.columns))
    integers = _spss_integer_columns(frame, meta, values) if fmt == "sav" else set()
    return _convert(frame, meta, fmt, values, integers)


def _check_names(path: Path, names: list[str]) -> None:
    if len(set(names)) != len(names):
        raise duplicate_names_error(path, names)


def _convert(frame: pd.DataFrame, meta, fmt: str, values: list[str],
             integers: set[str]) -> pd.DataFrame:
    """One chunk (or the whole file) as the release reads it: SPSS user-missing codes blanked
    outside the non-key columns, the ``integers`` columns as int64, Stata extended-missing
    columns as float64, strings in pandas' string dtype with "" (how SPSS/Stata store a
    missing string) as missing."""
    if fmt == "sav":
        _blank_user_missing(frame, meta, values)
        for c in integers:
            frame[c] = frame[c].to_numpy().astype(np.int64)
    _numbers_with_missing(frame)
    for c in frame.columns:
        if frame[c].dtype == object or pd.api.types.is_string_dtype(frame[c].dtype):
            s = frame[c].astype("str")
            frame[c] = s.where(s != "", None)
    return frame


def _numbers_with_missing(frame: pd.DataFrame) -> None:
    """A numeric Stata column holding extended missing values (.a-.z) comes from pyreadstat
    as an object column of numbers and NaN (the codes are read as missing, never as numbers);
    it becomes float64 like every numeric Stata/SPSS column, not text."""
    for c in frame.columns:
        if frame[c].dtype == object and pd.api.types.infer_dtype(frame[c], skipna=True) in (
                "integer", "floating", "mixed-integer-float", "decimal"):
            frame[c] = pd.to_numeric(frame[c], errors="raise").astype(np.float64)


_SPSS_NUMBER_FORMAT = re.compile(r"^(F|N|COMMA|DOT|DOLLAR|PCT|E)?(\d+)(?:\.(\d+))?$")


def _spss_integer_columns(frame: pd.DataFrame, meta, columns: list[str]) -> set[str]:
    """The non-key columns read as int64: SPSS stores every number as a double; a column
    whose SPSS format has no decimals (``F8.0``, ``N3``: what SPSS gives an integer variable)
    and whose values are all whole numbers, none missing, becomes int64, as the same data
    from CSV, Parquet or Stata (which has integer types) gives. With a missing value it stays
    float64 (NaN), as pandas writes an integer column with missing values to CSV and Parquet.
    Decided on the rows of ``frame`` (a chunk: :func:`stat_facts` intersects the chunks)."""
    formats = getattr(meta, "original_variable_types", None) or {}
    out = set()
    for c in columns:
        m = _SPSS_NUMBER_FORMAT.match(str(formats.get(c, "")).upper())
        if c not in frame.columns or m is None or int(m.group(3) or 0) != 0:
            continue
        if frame[c].dtype != np.float64:
            continue
        arr = frame[c].to_numpy()
        with np.errstate(invalid="ignore"):
            if arr.size and np.all(np.isfinite(arr) & (arr == np.floor(arr))
                                   & (np.abs(arr) < 2.0 ** 53)):
                out.add(c)
    return out


def sav_missing_ranges(meta) -> dict[str, list[dict]]:
    """``{column: [{"lo": .., "hi": ..}, ...]}``: the user-missing values SPSS declares."""
    return dict(getattr(meta, "missing_ranges", None) or {})


def _blank_user_missing(frame: pd.DataFrame, meta, keep: list[str]) -> None:
    """User-missing values -> missing in every column but ``keep`` (the non-key columns)."""
    for col, ranges in sav_missing_ranges(meta).items():
        if col not in frame.columns or col in keep:
            continue
        s = frame[col]
        hit = np.zeros(len(s), dtype=bool)
        for r in ranges:
            lo, hi = r.get("lo"), r.get("hi")
            if isinstance(lo, str) or isinstance(hi, str):
                hit |= (s == lo).to_numpy(dtype=bool, na_value=False)
            else:
                x = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
                hit |= (x >= lo) & (x <= hi)
        if hit.any():
            frame[col] = s.where(~hit, None if s.dtype == object else np.nan)


# -- in record batches ---------------------------------------------------------------------

@dataclass(frozen=True)
class StatFacts:
    """What the first pass learns about a file: the int64 columns and the batches' schema."""

    integers: frozenset[str]
    schema: pa.Schema
    rows: int


def _chunks(path: Path, fmt: str, encoding: str, batch_rows: int):
    import pyreadstat

    reader, kwargs = _reader_and_kwargs(fmt, encoding)
    try:
        yield from pyreadstat.read_file_in_chunks(reader, str(path), chunksize=batch_rows,
                                                  **kwargs)
    except InputError:
        raise
    except Exception as e:  # pyreadstat's own errors
        raise _unreadable(path, fmt, e) from None


@functools.lru_cache(maxsize=8)
def _facts(path: str, size: int, mtime_ns: int, fmt: str, encoding: str,
           values: tuple[str, ...], batch_rows: int) -> StatFacts:
    integers: set[str] | None = None
    schema: pa.Schema | None = None
    rows = 0
    for frame, meta in _chunks(Path(path), fmt, encoding, batch_rows):
        if schema is None:
            _check_names(Path(path), list(frame.columns))
        rows += len(frame)
        if fmt == "sav":
            found = _spss_integer_columns(frame, meta, list(values))
            integers = found if integers is None else integers & found
        if schema is None:
            first = _convert(frame.copy(), meta, fmt, list(values), set())
            schema = normalize_schema(pa.Schema.from_pandas(first, preserve_index=False))
    ints = frozenset(integers or ())
    if schema is None:
        raise InputError(f"input file {path!r} has no columns; nothing to release")
    schema = pa.schema([pa.field(f.name, pa.int64()) if f.name in ints else f for f in schema])
    return StatFacts(ints, schema, rows)


def stat_facts(config: ReleaseConfig, batch_rows: int = 1 << 20) -> StatFacts:
    """The first pass over an SPSS/Stata input (cached while the file is unchanged)."""
    path = config.input_path
    try:
        st = path.stat()
    except OSError:
        raise InputError(f"input {str(path)!r} does not exist. Fix input.path in the "
                         "config") from None
    fmt = config.input.resolved_format
    reader, kwargs = _reader_and_kwargs(fmt, config.input.encoding)
    try:
        _, meta = reader(str(path), metadataonly=True, **kwargs)
    except Exception as e:
        raise _unreadable(path, fmt, e) from None
    values = tuple(value_columns(config, list(meta.column_names)))
    return _facts(str(path), st.st_size, st.st_mtime_ns, fmt, config.input.encoding, values,
                  batch_rows)


def stat_schema(config: ReleaseConfig) -> pa.Schema:
    """The Arrow schema of :func:`stat_tables`' batches."""
    return stat_facts(config).schema


def stat_tables(config: ReleaseConfig, batch_rows: int,
                columns: list[str] | None = None) -> Iterator[tuple[pa.Table, int]]:
    """``(table, offset)`` of every chunk of ``batch_rows`` records of an SPSS/Stata input,
    with the values and types of :func:`read_stat` (one schema: :func:`stat_schema`)."""
    facts = stat_facts(config)
    path, fmt = config.input_path, config.input.resolved_format
    offset = 0
    for frame, meta in _chunks(path, fmt, config.input.encoding, batch_rows):
        if not len(frame):
            continue
        values = value_columns(config, list(frame.columns))
        frame = _convert(frame, meta, fmt, values, set(facts.integers))
        try:
            table = pa.Table.from_pandas(frame, preserve_index=False).cast(facts.schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
            raise InputError(
                f"input file {str(path)!r} cannot be read in batches: rows {offset + 1:,} to "
                f"{offset + len(frame):,} give a column another type than the first rows "
                f"({e}). Release it with --executor memory, or convert it to Parquet with "
                "explicit types") from None
        if columns is not None:
            table = table.select(columns)
        yield table, offset
        offset += len(frame)
