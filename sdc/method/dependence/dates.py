"""Text read as dates in every common form (docs/METHOD.md, "Relations an intruder computes"):
the day number of ``1987-03-14``, ``1987/3/14``, ``19870314``, ``14.03.1987``, ``14/03/87``,
``03/14/1987``, ``Mar 14 1987``, ``March 14, 1987``, ``14 Mar 1987``, ``14-Mar-1987``,
``1987 Mar 14`` (also followed by a time), under one of two readings of the numeric forms
with the year last: ``day`` first or ``month`` first. A date written day-first sorts by the day
as text; its day number sorts by the date, so the check in order sees a birth date whatever
its spelling. Value by value (pyarrow compute, no loop over records): every batch maps a value
to the same day number."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["READINGS", "date_image", "day_number"]

#: the two readings of ``a/b/yyyy``: ``day`` (a is the day) and ``month`` (a is the month)
READINGS = ("day", "month")
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_END = r"(?:$|[T ,])"
_YMD = r"^(?P<y>[0-9]{4})[-/.]?(?P<m>[0-9]{1,2})[-/.]?(?P<d>[0-9]{1,2})" + _END
_ABY = r"^(?P<a>[0-9]{1,2})[-/. ](?P<b>[0-9]{1,2})[-/. ](?P<y>[0-9]{4}|[0-9]{2})" + _END
_NDY = (r"^(?P<n>[A-Za-z]{3,9})\.?[ -](?P<d>[0-9]{1,2})(?:st|nd|rd|th)?,?[ -]"
        r"(?P<y>[0-9]{4})" + _END)
_DNY = (r"^(?P<d>[0-9]{1,2})(?:st|nd|rd|th)?[ -](?P<n>[A-Za-z]{3,9})\.?,?[ -]"
        r"(?P<y>[0-9]{4})" + _END)
_YND = r"^(?P<y>[0-9]{4})[ -](?P<n>[A-Za-z]{3,9})\.?[ -](?P<d>[0-9]{1,2})" + _END


def day_number(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of the proleptic Gregorian (y, m, d) (int64 arrays; H. Hinnant's
    days_from_civil, exact for every year)."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (m + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _field(parts: Any, name: str) -> np.ndarray:
    import pyarrow.compute as pc

    s = pc.struct_field(parts, name)
    return np.asarray(pc.cast(pc.if_else(pc.equal(s, ""), None, s), "int64", safe=False)
                      .fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)


def _month(parts: Any) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    name = pc.utf8_lower(pc.utf8_slice_codeunits(pc.struct_field(parts, "n"), 0, 3))
    return np.asarray(pc.index_in(name, value_set=pa.array(_MONTHS)).fill_null(-2)
                      .to_numpy(zero_copy_only=False), dtype=np.int64) + 1


def date_image(values: pd.Series, reading: str) -> tuple[str, np.ndarray, np.ndarray] | None:
    """``("num", day number, valid)`` of a text column read as dates (``reading``: ``day`` or
    ``month`` first for ``a/b/yyyy``), None when the column is not text. A value in no date form
    (or an impossible date: month 13, day 32) is not valid."""
    import pyarrow as pa
    import pyarrow.compute as pc

    s = values.astype(object) if isinstance(values.dtype, pd.CategoricalDtype) else values
    if s.dtype.kind in "biufcmM":
        return None
    try:
        arr = pa.array(s, from_pandas=True)
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if pa.types.is_dictionary(arr.type):
            arr = arr.dictionary_decode()
        if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
            return None
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    text = pc.utf8_trim_whitespace(arr.cast(pa.large_string()))
    n = len(text)
    y = np.full(n, -1, np.int64)
    m = np.full(n, -1, np.int64)
    d = np.full(n, -1, np.int64)
    for pattern in (_YMD, _ABY, _NDY, _DNY, _YND):  # a loop over forms, not records
        hit = np.asarray(pc.match_substring_regex(text, pattern).fill_null(False)
                         .to_numpy(zero_copy_only=False), dtype=bool) & (y < 0)
        if not hit.any():
            continue
        parts = pc.extract_regex(text.filter(pa.array(hit)), pattern)
        py = _field(parts, "y")
        py = np.where(py < 100, np.where(py >= 30, 1900 + py, 2000 + py), py)
        if pattern == _ABY:
            a, b = _field(parts, "a"), _field(parts, "b")
            pd_, pm = (a, b) if reading == "day" else (b, a)
        elif pattern == _YMD:
            pd_, pm = _field(parts, "d"), _field(parts, "m")
        else:
            pd_, pm = _field(parts, "d"), _month(parts)
        y[hit], m[hit], d[hit] = py, pm, pd_
    ok = (y >= 0) & (m >= 1) & (m <= 12) & (d >= 1) & (d <= 31)
    day = np.where(ok, day_number(np.where(ok, y, 1970), np.where(ok, m, 1),
                                  np.where(ok, d, 1)), 0).astype(np.float64)
    return "num", day, ok
