"""Exact types for the non-key columns of a CSV input.

A non-key column is released as collected, so its type must not lose anything (``00001`` is
not 1, ``22`` among decimals is not ``22.0``, ``NA`` is a word unless ``input.na_values`` says
otherwise). Every field is read as text; the column is ``int64`` if every present value is a
canonical integer, ``float64`` if every one is the text the public CSV writer writes for its
float, text otherwise (:func:`lossless_type`); :func:`to_lossless` refuses a later value the
type would change. The same rule on every engine. docs/RELIABILITY.md, "Input values and types".
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from sdc.errors import InputError

__all__ = ["WHOLE_AS_INT", "csv_cell_text", "csv_float_text", "lossless_kind", "lossless_type",
           "missing_markers", "to_lossless", "whole_as_int_field"]

WHOLE_AS_INT = {b"sdc.csv_text": b"whole-as-int"}
"""Arrow field metadata of a float64 column whose whole values were written as integers
(``0`` and ``12075.15`` in one column): numeric in every output format, and the public CSV
writes its whole values without ``.0`` (issue 44), so the text comes back as it was read."""

_EXACT_INT = 2.0 ** 53


def whole_as_int_field(field: pa.Field) -> bool:
    """Whether ``field`` carries :data:`WHOLE_AS_INT`."""
    md = field.metadata or {}
    return md.get(b"sdc.csv_text") == WHOLE_AS_INT[b"sdc.csv_text"]


def csv_cell_text(values: np.ndarray) -> np.ndarray:
    """The CSV text of a :data:`WHOLE_AS_INT` column's float64 values: whole values below
    2^53 as integers, the others as the public CSV writer writes floats, missing empty."""
    v = np.asarray(values, dtype=np.float64)
    out = np.asarray(csv_float_text(v), dtype=object) if v.size else np.zeros(0, object)
    whole = np.isfinite(v) & (np.floor(v) == v) & (np.abs(v) < _EXACT_INT)
    if whole.any():
        out[whole] = pd.Series(v[whole].astype(np.int64)).astype(str).to_numpy(dtype=object)
    out[np.isnan(v)] = ""
    return out

_INT_TEXT = r"^(0|-?[1-9][0-9]{0,18})$"


def missing_markers(na_values: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The texts that mean missing in a non-key CSV column: the empty field and
    ``input.na_values``."""
    return list(dict.fromkeys(["", *na_values]))


def csv_float_text(values: np.ndarray) -> np.ndarray:
    """The text the public CSV writer (pandas ``to_csv``) writes for each float64 value."""
    if values.size == 0:
        return np.asarray([], dtype=object)
    text = pd.Series(values, dtype=np.float64).to_csv(index=False, header=False,
                                                      lineterminator="\n")
    return np.asarray(text.split("\n")[:-1], dtype=object)


def _as_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


def _int_or_none(col: pa.Array) -> pa.Array | None:
    present = col.drop_null()
    if len(present) and not pc.all(pc.match_substring_regex(present, _INT_TEXT)).as_py():
        return None
    try:
        return pc.cast(col, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # beyond int64
        return None


def _float_or_none(col: pa.Array, whole_as_int: bool = False) -> pa.Array | None:
    try:
        num = pc.cast(col, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    text = np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)[valid]
    vals = np.asarray(num.to_numpy(zero_copy_only=False), dtype=np.float64)[valid]
    written = csv_cell_text(vals) if whole_as_int else csv_float_text(vals)
    if not np.array_equal(written, text):
        return None
    return num


def lossless_type(col: pa.Array | pa.ChunkedArray) -> pa.DataType:
    """int64, float64 or string: the narrowest type that gives every present text back
    (float64 also when whole values are written as integers: :func:`lossless_kind`)."""
    return lossless_kind(col)[0]


def lossless_kind(col: pa.Array | pa.ChunkedArray) -> tuple[pa.DataType, bool]:
    """(type, whole values written as integers): int64 when every present text is a
    canonical integer; float64 when every one is the public CSV writer's text of its float,
    or (issue 44) when the whole values are written as integers and the others so (``0``
    among ``12075.15``: ``True``, the CSV writes them back as read, :data:`WHOLE_AS_INT`);
    text otherwise."""
    col = _as_array(col)
    if col.null_count == len(col):
        return pa.string(), False
    if _int_or_none(col) is not None:
        return pa.int64(), False
    if _float_or_none(col) is not None:
        return pa.float64(), False
    if _float_or_none(col, whole_as_int=True) is not None:
        return pa.float64(), True
    return pa.string(), False


def to_lossless(col: pa.Array | pa.ChunkedArray, typ: pa.DataType, *, name: str,
                first_row: int = 0, whole_as_int: bool = False) -> pa.Array:
    """``col`` (text, missing = null) as ``typ``; refuses a value ``typ`` would change.

    Raises
    ------
    InputError
        Names the column, the first such value, its row (1-based data row) and the count.
    """
    col = _as_array(col)
    if pa.types.is_string(typ):
        return col
    conv = (_int_or_none(col) if pa.types.is_integer(typ)
            else _float_or_none(col, whole_as_int=whole_as_int))
    if conv is not None:
        return conv
    # which values break the type (the path of a refusal only)
    valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    text = np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)
    present = pd.Series(text[valid], dtype=object).astype(str)
    num = pd.to_numeric(present, errors="coerce")
    if pa.types.is_integer(typ):
        ok = present.str.fullmatch(_INT_TEXT).to_numpy(dtype=bool) & (
            num.abs().to_numpy(dtype=float, na_value=np.inf) < 9.2e18)
    else:
        vals = num.to_numpy(dtype=float, na_value=np.nan)
        written = csv_cell_text(vals) if whole_as_int else csv_float_text(vals)
        ok = ~np.isnan(vals) & (written == present.to_numpy(dtype=object))
    bad = np.zeros(len(col), dtype=bool)
    bad[np.flatnonzero(valid)[~ok]] = True
    rows = np.flatnonzero(bad)
    first = int(rows[0]) if rows.size else 0
    kind = "integers" if pa.types.is_integer(typ) else "decimal numbers"
    raise InputError(
        f"column {name!r}: the value {text[first]!r} at row {first_row + first + 1} "
        f"({rows.size} such values in this batch) would not "
        f"be released exactly: the streaming reader took the column for {kind} from the "
        f"file's first block (16 MB), and as a number it would be written differently. Release "
        "with --engine pandas (it types each column from the whole file), or convert the file "
        "to Parquet with the column as text"
    )
