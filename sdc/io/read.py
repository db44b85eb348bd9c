"""Reading microdata files.

:func:`read_input` reads the file a release config names (CSV, Parquet, SPSS ``.sav``, Stata
``.dta``) and turns every way a file can be unusable into one :class:`~sdc.errors.InputError`
that names the file, what is wrong (column, byte offset, line) and what to do. It does not check
values against the declared domains: that is :func:`sdc.io.schemas.validate_input`'s job, which
reports every problem at once.

"""

from __future__ import annotations

import codecs
import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.io.batches import value_columns
from sdc.io.recode import recode_frame
from sdc.io.sniff import check_file_kind, duplicate_names_error
from sdc.io.stat_input import read_stat
from sdc.io.values import lossless_kind, missing_markers, to_lossless

__all__ = ["read_input"]

_CHUNK = 1 << 20
try:
    from pandas._libs.parsers import STR_NA_VALUES as _NA_STRINGS
except ImportError:  # pragma: no cover - private pandas name; the documented default list
    _NA_STRINGS = {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
                   "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a",
                   "nan", "null"}
_DELIMITERS = (",", ";", "\t", "|")
_DELIM_NAMES = {",": ",", ";": ";", "\t": "tab", "|": "|"}


# -- reading -------------------------------------------------------------------------------
def _is_utf8(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name in ("utf-8", "utf-8-sig")
    except LookupError:
        return False


def _expected_columns(config: ReleaseConfig) -> list[str]:
    cols = list(config.key_names)
    inp = config.input
    cols += [c for c in (inp.id_column, inp.weight) if c is not None]
    cols += list(inp.drop)
    return list(dict.fromkeys(cols))


def _first_bad_byte(path: Path, encoding: str) -> tuple[int, int, str] | None:
    """(byte offset, 1-based line, reason) of the first byte ``encoding`` cannot decode."""
    dec = codecs.getincrementaldecoder(encoding)()
    offset = 0
    with open(path, "rb") as f:
        while True:
            chunk = f.read(_CHUNK)
            final = not chunk
            try:
                dec.decode(chunk, final=final)
            except UnicodeDecodeError as e:
                # e.start is relative to the decoder's buffered input (pending bytes + chunk)
                pending = len(e.object) - len(chunk)
                pos = offset - pending + e.start
                with open(path, "rb") as g:
                    head = g.read(max(pos, 0))
                return pos, head.count(b"\n") + 1, e.reason
            if final:
                return None
            offset += len(chunk)


def _header(path: Path, encoding: str, delimiter: str) -> tuple[list[str], str]:
    """The header row (parsed with the csv module, honouring quotes) and the raw first line."""
    with open(path, encoding=encoding, newline="") as f:
        first = f.readline()
    row = next(csv.reader([first], delimiter=delimiter), [])
    return row, first


def _guess_delimiter(line: str, current: str) -> str | None:
    counts = {d: line.count(d) for d in _DELIMITERS if d != current}
    best = max(counts, key=lambda d: counts[d]) if counts else None
    return best if best is not None and counts[best] > 0 else None


def string_key_dtypes(config: ReleaseConfig, header: list[str]) -> dict[str, str]:
    """Key columns whose declared categories are all strings are read as strings (keeps '01')."""
    out = {}
    for name, kv in config.input_key_variables.items():
        if name in header and kv.categories is not None and all(
            isinstance(c, str) for c in kv.categories
        ):
            out[name] = "str"
    return out


def _read_csv(path: Path, config: ReleaseConfig) -> pd.DataFrame:
    inp = config.input
    encoding = "utf-8-sig" if _is_utf8(inp.encoding) else inp.encoding
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise InputError(
            f"input.encoding {inp.encoding!r} is not an encoding Python knows; use e.g. "
            "utf-8, latin-1 or cp1252"
        ) from None
    bad = _first_bad_byte(path, encoding)
    if bad is not None:
        pos, line, reason = bad
        raise InputError(
            f"input file {str(path)!r} is not valid {inp.encoding} text: byte offset {pos} "
            f"(line {line}) cannot be decoded ({reason}). Set input.encoding to the file's "
            "encoding (e.g. latin-1 or cp1252), or re-save the file as UTF-8"
        )
    header, first = _header(path, encoding, inp.delimiter)
    if not first.strip():
        raise InputError(
            f"input file {str(path)!r} has an empty first line; the first line must be the "
            "header with the column names"
        )
    expected = _expected_columns(config)
    if len(header) == 1 and (len(expected) > 1 or header[0] not in expected):
        guess = _guess_delimiter(first, inp.delimiter)
        if guess is not None:
            raise InputError(
                f"input file {str(path)!r} reads as a single column with delimiter "
                f"{_DELIM_NAMES.get(inp.delimiter, inp.delimiter)!r}, but the config expects "
                f"columns {expected[:8]}: the file looks {_DELIM_NAMES[guess]}-separated: set "
                f"input.delimiter: {guess!r} in the config"
            )
    if len(set(header)) != len(header):
        raise duplicate_names_error(path, header)
    text_keys = string_key_dtypes(config, header)
    # pandas reads "NA", "null", "n/a"... as missing; in a key with text categories only an
    # empty field is missing ("NA" may be Namibia); the other non-key columns are read as
    # text (only the empty field and input.na_values are missing) and typed without loss
    values = value_columns(config, header)
    markers = missing_markers(inp.na_values)
    na_values = {c: ([""] if c in text_keys else markers if c in values
                     else sorted(_NA_STRINGS)) for c in header}
    dtypes = {**text_keys, **{c: "str" for c in values}}
    try:
        frame = pd.read_csv(
            path, sep=inp.delimiter, encoding=encoding, dtype=dtypes,
            keep_default_na=False, na_values=na_values, skipinitialspace=False, low_memory=False,
        )
    except pd.errors.ParserError as e:
        raise InputError(
            f"input file {str(path)!r} cannot be parsed as {inp.delimiter!r}-separated CSV: "
            f"{str(e).strip().removeprefix('Error tokenizing data. C error: ')}. "
            "Every line must have as many fields as the header; check quoting and the delimiter"
        ) from None
    _type_values(frame, values)
    return _numbers_in_text_keys(frame, config)


def _type_values(frame: pd.DataFrame, columns: list[str]) -> None:
    """Text-read CSV columns -> int64 / float64 where that loses nothing
    (:func:`sdc.io.values.lossless_type` over the whole column); otherwise they stay text."""
    for c in columns:
        if c not in frame.columns:
            continue
        arr = pa.array(frame[c].to_numpy(dtype=object, na_value=None), type=pa.string())
        typ, whole = lossless_kind(arr)
        if not pa.types.is_string(typ):
            frame[c] = pd.Series(to_lossless(arr, typ, name=c, whole_as_int=whole).to_pandas(),
                                 index=frame.index, name=c)


def _integral_domain(kv) -> bool:
    return kv.range is not None or (
        kv.categories is not None
        and all(isinstance(c, int) and not isinstance(c, bool) for c in kv.categories))


def _numbers_in_text_keys(frame: pd.DataFrame, config: ReleaseConfig) -> pd.DataFrame:
    """CSV only: a key declared with integers whose column pandas read as text because of a few
    non-numbers ("x", "n/a") keeps the whole numbers as integers, so the schema reports just
    the bad values, not every row."""
    for name, kv in config.key_variables.items():
        if name not in frame.columns or not _integral_domain(kv):
            continue
        s = frame[name]
        if not (pd.api.types.is_string_dtype(s.dtype) or s.dtype == object):
            continue
        num = pd.to_numeric(s, errors="coerce")
        # a whole number beyond int64 stays text: the schema shows it as written (it used to
        # wrap to -9223372036854775808 in the cast)
        whole = (num.notna() & (num == np.floor(num)) & (num.abs() < 2.0 ** 63)).to_numpy()
        if not whole.any():
            continue
        out = s.astype(object).to_numpy(copy=True)
        out[whole] = num.to_numpy()[whole].astype(np.int64)
        frame[name] = pd.Series(out, index=frame.index, dtype=object, name=name, copy=False)
    return frame


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError) as e:
        raise InputError(
            f"input file {str(path)!r} is not a readable Parquet file ({e}). Check input.path and "
            "input.format, or re-export the file"
        ) from None
    if len(set(schema.names)) != len(schema.names):
        raise duplicate_names_error(path, list(schema.names))
    try:
        # self_destruct + split_blocks: each column's Arrow buffers are freed as it is
        # converted (no consolidation copy); then the Arrow pool returns its cached decode
        # buffers to the system, which nothing later reuses (-240 MB peak, -350 MB resident
        # at 5M records)
        frame = pq.read_table(path).to_pandas(self_destruct=True, split_blocks=True)
        pa.default_memory_pool().release_unused()
        return frame
    except (pa.ArrowException, OSError, ValueError) as e:
        raise InputError(
            f"input file {str(path)!r} is not a readable Parquet file ({e}); re-export it"
        ) from None


def integer_keys(frame: pd.DataFrame, config: ReleaseConfig) -> pd.DataFrame:
    """Float key columns holding whole numbers where the config declares integers -> int64.

    A column with missing values stays float64 (NaN = missing); a column with a fractional
    value is left alone (the schema reports it).
    """
    for name, kv in config.input_key_variables.items():
        if name not in frame.columns or not pd.api.types.is_float_dtype(frame[name].dtype):
            continue
        if not _integral_domain(kv):
            continue
        arr = frame[name].to_numpy(dtype=float, na_value=np.nan)
        ok = np.isfinite(arr)
        if ok.any() and not np.all(arr[ok] == np.floor(arr[ok])):
            continue
        if np.isnan(arr).all():
            continue
        if (~ok & ~np.isnan(arr)).any():  # +-inf
            continue
        if ok.any() and not np.all((arr[ok] >= -2.0 ** 63) & (arr[ok] < 2.0 ** 63)):
            continue  # beyond int64 (1e19): the cast would wrap; the schema reports the value
        if ok.all():
            frame[name] = arr.astype(np.int64)
        # With missing values the column stays float64: the engine's integer fast path
        # (sdc.method.cells.encode_key) does not yet skip <NA> in a nullable Int64 column.
    return frame


def read_input(config: ReleaseConfig) -> pd.DataFrame:
    """Read ``config.input_path`` into a DataFrame with a fresh RangeIndex.

    Formats: ``csv`` (``input.delimiter``, ``input.encoding``; a UTF-8 byte-order mark is
    accepted and stripped), ``parquet``, ``sav`` and ``dta`` (via pyreadstat). Types are inferred
    by pandas; key columns declared with string categories are read as strings (so ``"01"``
    stays ``"01"``), and float key columns holding only whole numbers where the config declares
    integers come out as ``int64`` (float64 with NaN if some are missing). Strings use pandas'
    default string dtype. In CSV, an empty field is missing everywhere; pandas' other missing
    markers ("NA", "null", ...) count as missing except in keys with text categories.

    Raises
    ------
    InputError
        Missing file, empty file, header without records, a delimiter that yields one column
        while the config expects several (names the likely delimiter), bytes that are not valid
        in ``input.encoding`` (byte offset and line), duplicated column names, an unreadable
        Parquet/SPSS/Stata file, or a CSV line with the wrong number of fields.
    """
    path = config.input_path
    if not path.exists():
        raise InputError(
            f"input file {str(path)!r} does not exist. Fix input.path in the config (relative "
            f"paths are relative to the config's folder {str(config.base_dir)!r})"
        )
    if not path.is_file():
        raise InputError(f"input path {str(path)!r} is not a file; point input.path at the data file")
    try:
        size = path.stat().st_size
        with open(path, "rb"):
            pass
    except PermissionError:
        raise InputError(
            f"input file {str(path)!r} cannot be read (permission denied); give the release "
            "user read access to it"
        ) from None
    if size == 0:
        raise InputError(f"input file {str(path)!r} is empty (0 bytes); nothing to release. "
                         "Check that the export finished")
    fmt = config.input.resolved_format
    check_file_kind(path, fmt)
    if fmt == "csv":
        frame = _read_csv(path, config)
    elif fmt == "parquet":
        frame = _read_parquet(path)
    else:
        frame = read_stat(path, fmt, config)
    if len(frame) == 0:
        raise InputError(
            f"input file {str(path)!r} has a header ({len(frame.columns)} columns) but no "
            "records; nothing to release. Check that the export finished"
        )
    frame = frame.reset_index(drop=True)
    return recode_frame(integer_keys(frame, config), config)
