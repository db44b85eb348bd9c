"""SPSS ``.sav`` and Stata ``.dta`` public files with variable and value labels (pyreadstat).

:func:`stat_layout` turns the public frame into what both formats hold, the same way for both
(valid unique names, text keys as labelled integer codes, integers as 32-bit integers where
they fit, labels within each format's limits); :func:`stat_bytes` writes one file and fixes the
header's time stamp so reruns are byte-identical. The rules: docs/RELEASE_FOLDER.md,
``public/``.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from sdc.errors import InputError

__all__ = ["StatLayout", "stat_bytes", "stat_layout", "stat_name"]

StatFormat = Literal["sav", "dta"]

_NAME_OK = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")
_RESERVED = {w.lower() for w in (
    "ALL AND BY EQ GE GT LE LT NE NOT OR TO WITH "  # SPSS
    "_all _b byte _coef _cons double float if in int long _n _pi _pred _rc _skip strL "
    "using with str").split()}
VAR_LABEL_LIMIT = {"dta": 80, "sav": 256}          # characters (dta) / UTF-8 bytes (sav)
VALUE_LABEL_LIMIT = {"dta": 32_000, "sav": 120}
_FIXED_SAV_TIME = b"01 Jan 7000:00:00"              # 9-byte date + 8-byte time of the header
_FIXED_DTA_TIME = b"01 Jan 1970 00:00"
_MAX_EXACT = 2**53


def stat_name(name: str, taken: set[str]) -> str:
    """A variable name valid in SPSS and Stata, unique (case-insensitively) among ``taken``.

    ``taken`` holds lower-cased names already used and is updated.
    """
    base = str(name)
    if not (_NAME_OK.match(base) and base.lower() not in _RESERVED):
        base = re.sub(r"[^A-Za-z0-9_]", "_", base)
        if not base or not base[0].isalpha():
            base = "v" + base
        base = base[:32]
        if base.lower() in _RESERVED:
            base = (base + "_")[:32]
    out, i = base, 1
    while out.lower() in taken:
        i += 1
        suffix = f"_{i}"
        out = base[: 32 - len(suffix)] + suffix
    taken.add(out.lower())
    return out


@dataclass
class StatLayout:
    """The frame as SPSS/Stata hold it, and what the codebook says about it.

    Attributes
    ----------
    frame : DataFrame
        Columns renamed (``names``), text keys coded 1..K, booleans 0/1.
    names : dict
        Original column name -> name in the file (every column).
    value_labels : dict
        File name -> {value: label}.
    variable_labels : dict
        File name -> label.
    codes : dict
        Original column name of a text key -> {category: code}.
    measure, formats, widths : dict
        File name -> SPSS measurement level, display format, display width.
    """

    frame: pd.DataFrame
    names: dict[str, str]
    value_labels: dict[str, dict[Any, str]] = field(default_factory=dict)
    variable_labels: dict[str, str] = field(default_factory=dict)
    codes: dict[str, dict[Any, int]] = field(default_factory=dict)
    measure: dict[str, str] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)
    widths: dict[str, int] = field(default_factory=dict)

    @property
    def renamed(self) -> dict[str, str]:
        """Only the columns whose name changed."""
        return {k: v for k, v in self.names.items() if k != v}


def _label_len(text: str, fmt: StatFormat) -> int:
    return len(text.encode("utf-8")) if fmt == "sav" else len(text)


def _check_label(text: str, fmt: StatFormat, limits: Mapping[str, int], what: str) -> str:
    text = str(text)
    n, limit = _label_len(text, fmt), limits[fmt]
    if n > limit:
        unit = "bytes (UTF-8)" if fmt == "sav" else "characters"
        raise InputError(
            f"{what} is {n} {unit} long, but {'SPSS' if fmt == 'sav' else 'Stata'} allows "
            f"{limit}: shorten it in the config (the codebook can carry longer text), or remove "
            f"{fmt!r} from output.formats"
        )
    return text


def _fit_label(text: str, fmt: StatFormat, limits: Mapping[str, int]) -> str:
    """``text`` cut to the format's limit, ending in "…" when cut (labels of the input file)."""
    text = str(text)
    limit = limits[fmt]
    if _label_len(text, fmt) <= limit:
        return text
    if fmt == "sav":   # one cut of the bytes (a 1 MB label once took a cut per character)
        return text.encode("utf-8")[:limit - 3].decode("utf-8", "ignore") + "…"
    return text[:limit - 1] + "…"


_INT32_MIN, _INT32_MAX = -2_147_483_647, 2_147_483_620   # Stata long (larger = missing codes)
_SAV_NUMERIC_FORMAT = re.compile(r"^(F|N|COMMA|DOT|DOLLAR|PCT|E)\d+(\.\d+)?$", re.IGNORECASE)
_DTA_NUMERIC_FORMAT = re.compile(r"^%-?\d+(\.\d+)?[fgeFGE]c?$")


def _as_int32(arr: np.ndarray) -> pd.Series | None:
    """``arr`` (floats, NaN = missing) as 32-bit integers, or None when a value is not whole or
    out of Stata's long range. Missing values -> pandas' nullable ``Int32`` <NA>."""
    ok = ~np.isnan(arr)
    vals = arr[ok]
    if vals.size and (not np.all(vals == np.floor(vals)) or vals.min() < _INT32_MIN
                      or vals.max() > _INT32_MAX):
        return None
    if ok.all():
        return pd.Series(arr.astype(np.int32), copy=False)
    out = pd.array(np.where(ok, arr, 0).astype(np.int32), dtype="Int32")
    out[~ok] = pd.NA
    return pd.Series(out, copy=False)


def _label_key(v: Any, numeric: bool, fmt: StatFormat) -> Any:
    """A value label's value as the written column needs it, or None to leave it out."""
    if isinstance(v, bool):
        return int(v) if numeric else None
    if numeric:
        if isinstance(v, int | np.integer):
            return int(v)
        if isinstance(v, float | np.floating) and np.isfinite(v):
            if float(v).is_integer():
                return int(v)
            return float(v) if fmt == "sav" else None
        return None
    return str(v) if fmt == "sav" and isinstance(v, str) else None


_NUMERIC_CLASS = re.compile(r"^(-?\d{1,9})(?:\+|-(-?\d{1,9}))?$|^<=(-?\d{1,9})$")


def _numeric_codes(cats: Sequence[Any], hint: Mapping[Any, int] | None = None
                   ) -> dict[Any, int] | None:
    """Codes that keep the numbers of a numeric key recoded into text classes: ``"22"`` -> 22,
    ``"77+"`` -> 77, ``"<=21"`` -> 21, ``"18-29"`` -> 18 (the class's first value); a class of
    another form takes its code from ``hint`` (e.g. a group's smallest member). None when a
    category has no number or two would share one (then codes are 1..K)."""
    out: dict[Any, int] = {}
    hint = dict(hint or {})
    for c in cats:
        m = _NUMERIC_CLASS.match(str(c)) if isinstance(c, str | int) else None
        if isinstance(c, bool):
            return None
        if m is None:
            if c not in hint:
                return None
            out[c] = int(hint[c])
            continue
        v = int(m.group(1) if m.group(1) is not None else m.group(3))
        if not _INT32_MIN <= v <= _INT32_MAX:
            return None
        out[c] = v
    return out if len(set(out.values())) == len(out) else None


def _coded_key(s: pd.Series, col: str, cats: Sequence[Any], hint: Mapping[Any, int] | None,
               labels: Mapping[Any, str], extra: Mapping[Any, str], fmt: StatFormat
               ) -> tuple[pd.Series | None, dict[Any, int], dict[Any, str]]:
    """A key with text categories as integer codes: the numbers of its classes
    (:func:`_numeric_codes`) or 1..K in category order, and the label of every code (the
    config's checked, else the input's or the category cut to the limit; a number kept as
    itself needs none)."""
    numeric = _numeric_codes(cats, hint)
    code = numeric or {c: i for i, c in enumerate(cats, start=1)}
    mapped = s.astype(object).map(code)
    bad = s.notna() & mapped.isna()
    if bad.any():
        vals = pd.unique(s[bad].astype(str))[:5].tolist()
        raise InputError(f"column {col!r}: {int(bad.sum())} rows hold values {vals} "
                         "outside its declared categories; they cannot be coded")
    coded = _as_int32(mapped.to_numpy(dtype=float, na_value=np.nan))
    vlabels = {
        i: (_check_label(labels[c], fmt, VALUE_LABEL_LIMIT, f"the label of {col}={c!r}")
            if c in labels else _fit_label(extra.get(c, str(c)), fmt, VALUE_LABEL_LIMIT))
        for c, i in code.items()
        # a number kept as itself needs no label ("22" -> 22); "77+" -> 77 does
        if c in labels or c in extra or not numeric or str(c) != str(i)}
    return coded, code, vlabels


def _stored_column(s: pd.Series, col: str, integer_like: set[str]) -> tuple[Any, str]:
    """(the column as the file stores it, its kind: numeric | date | text). Booleans 0/1,
    whole numbers as 32-bit integers where they fit, text as Python strings (missing None)."""
    if pd.api.types.is_bool_dtype(s.dtype):
        return s.astype(np.int8), "numeric"
    if pd.api.types.is_integer_dtype(s.dtype):
        arr = s.to_numpy(dtype=float, na_value=np.nan)
        big = np.abs(np.nan_to_num(arr)) > _MAX_EXACT
        if big.any():
            raise InputError(f"column {col!r}: {int(big.sum())} rows hold integers beyond "
                             f"2^53 (e.g. {int(s[big].iloc[0])}), which SPSS and Stata "
                             "store only approximately; drop the format or the column")
        as_int = _as_int32(arr)
        return (s if as_int is None else as_int), "numeric"
    if pd.api.types.is_float_dtype(s.dtype) and col in integer_like:
        as_int = _as_int32(s.to_numpy(dtype=float, na_value=np.nan))
        return (s if as_int is None else as_int), "numeric"
    if pd.api.types.is_numeric_dtype(s.dtype):
        return s, "numeric"
    if pd.api.types.is_datetime64_any_dtype(s.dtype):
        return s, "date"
    if s.dtype == object and s.notna().any() and not isinstance(
            s[s.notna()].iloc[0], str):  # dates/times as Python objects (SPSS/Stata input)
        return s, "date"
    # text (pandas string dtype or objects): plain Python strings, missing -> None
    return pd.Series(s.astype("string").to_numpy(dtype=object, na_value=None),
                     index=s.index, dtype=object, copy=False), "text"


def _column_value_labels(col: str, stored: Any, numeric: bool, labels: Mapping[Any, str],
                         extra: Mapping[Any, str], fmt: StatFormat) -> dict[Any, str]:
    """Value labels of a column that is not a coded key: the input's (cut to the limit), then
    the config's (checked), for values the written column can carry; sorted by (type, value)."""
    ok: dict[Any, str] = {}
    for v, text in extra.items():
        key = _label_key(v, numeric, fmt)
        if key is not None:
            ok[key] = _fit_label(text, fmt, VALUE_LABEL_LIMIT)
    for v, text in labels.items():
        key = _label_key(v, numeric, fmt)
        if key is not None and (numeric or fmt == "sav"):
            ok[key] = _check_label(text, fmt, VALUE_LABEL_LIMIT, f"the label of {col}={v!r}")
    if not ok:
        return ok
    if numeric and fmt == "dta" or (numeric and pd.api.types.is_integer_dtype(stored.dtype)):
        ok = {k: t for k, t in ok.items() if isinstance(k, int)}
    return dict(sorted(ok.items(), key=lambda kv: (str(type(kv[0])), kv[0])))


def _variable_label_map(names: dict[str, str], config_labels: Mapping[str, str],
                        input_labels: Mapping[str, str] | None,
                        fmt: StatFormat) -> dict[str, str]:
    """File name -> variable label, in column order: the config's (checked) over the input's
    (cut to the limit)."""
    varl = {names[c]: _fit_label(t, fmt, VAR_LABEL_LIMIT)
            for c, t in (input_labels or {}).items() if c in names and t}
    varl.update({names[c]: _check_label(t, fmt, VAR_LABEL_LIMIT, f"the variable label of {c!r}")
                 for c, t in config_labels.items() if c in names and t})
    return {n: varl[n] for n in names.values() if n in varl}      # column order


def _display_formats(names: dict[str, str], formats: Mapping[str, str] | None,
                     kinds: dict[str, str], codes_of: dict[str, dict[Any, int]],
                     fmt: StatFormat) -> dict[str, str]:
    """File name -> display format, for numeric columns that are not coded keys and whose
    format the file type accepts."""
    fmts = {}
    pattern = _SAV_NUMERIC_FORMAT if fmt == "sav" else _DTA_NUMERIC_FORMAT
    for c, f in (formats or {}).items():
        if c in names and kinds.get(names[c]) == "numeric" and c not in codes_of \
                and pattern.match(str(f)):
            fmts[names[c]] = str(f)
    return fmts


def stat_layout(frame: pd.DataFrame, fmt: StatFormat, *,
                categories: Mapping[str, Sequence[Any]] | None = None,
                value_labels: Mapping[str, Mapping[Any, str]] | None = None,
                variable_labels: Mapping[str, str] | None = None,
                input_value_labels: Mapping[str, Mapping[Any, str]] | None = None,
                input_variable_labels: Mapping[str, str] | None = None,
                integer_columns: Sequence[str] = (),
                measure: Mapping[str, str] | None = None,
                formats: Mapping[str, str] | None = None,
                widths: Mapping[str, int] | None = None,
                key_codes: Mapping[str, Mapping[Any, int]] | None = None) -> StatLayout:
    """Convert the public frame for SPSS (``fmt='sav'``) or Stata (``'dta'``).

    Parameters
    ----------
    frame : DataFrame
        The public frame (record order is kept as is).
    categories : mapping
        Key variable -> declared categories in code order. Keys whose categories include text
        are written as codes 1..K (module docstring); integer keys keep their values.
    value_labels : mapping
        Column -> {value: label} of the config (a label over the limit is an error).
    variable_labels : mapping
        Column -> variable label of the config (over the limit: an error).
    input_value_labels, input_variable_labels : mapping
        The same from the input file or made by the release (recoded keys); used where the
        config has none, cut to the format's limit.
    integer_columns : sequence
        Float columns that hold integers (the input file stores them as integers, or integer
        keys with missing values): written as integers when every value is whole and fits.
    measure, formats, widths : mapping
        Column -> SPSS measurement level / display format / display width (``measure`` and
        ``widths`` are written to ``.sav`` only).
    key_codes : mapping
        Key -> {class: number} for text classes of a recoded numeric key that carry no number
        in their name (a group: its smallest member), see :func:`_numeric_codes`.

    Raises
    ------
    InputError
        A config label over the format's limit, an integer beyond 2^53, or a text key value
        outside its declared categories (names the column, the value and the row count).
    """
    categories = dict(categories or {})
    value_labels = {k: dict(v) for k, v in (value_labels or {}).items()}
    input_value_labels = {k: dict(v) for k, v in (input_value_labels or {}).items()}
    integer_like = set(integer_columns)
    taken: set[str] = set()
    names = {c: stat_name(c, taken) for c in frame.columns}
    out: dict[str, Any] = {}
    vlabels: dict[str, dict[Any, str]] = {}
    codes_of: dict[str, dict[Any, int]] = {}
    kinds: dict[str, str] = {}                     # file name -> numeric | text | date
    for col in frame.columns:
        s = frame[col]
        new = names[col]
        cats = categories.get(col)
        labels = value_labels.get(col, {})
        extra = input_value_labels.get(col, {})
        if cats is not None and any(isinstance(c, str) for c in cats):
            out[new], codes_of[col], vlabels[new] = _coded_key(
                s, col, cats, (key_codes or {}).get(col), labels, extra, fmt)
            kinds[new] = "numeric"
            continue
        out[new], kinds[new] = _stored_column(s, col, integer_like)
        if kinds[new] == "date":
            continue
        ok = _column_value_labels(col, out[new], kinds[new] == "numeric", labels, extra, fmt)
        if ok:
            vlabels[new] = ok
    varl = _variable_label_map(names, dict(variable_labels or {}), input_variable_labels, fmt)
    meas = {names[c]: m for c, m in (measure or {}).items()
            if c in names and m in ("nominal", "ordinal", "scale")}
    fmts = _display_formats(names, formats, kinds, codes_of, fmt)
    wid = {names[c]: int(w) for c, w in (widths or {}).items() if c in names and int(w) > 0}
    return StatLayout(pd.DataFrame(out, index=frame.index).reset_index(drop=True), names,
                      vlabels, varl, codes_of, meas, fmts, wid)


def _fix_timestamp(data: bytes, fmt: StatFormat) -> bytes:
    """Replace the header's creation time stamp by a fixed one (byte-identical reruns)."""
    if fmt == "sav":
        if data[:4] not in (b"$FL2", b"$FL3") or not re.match(
                rb"\d\d [A-Za-z]{3} \d\d\d\d:\d\d:\d\d", data[92:109]):
            raise RuntimeError("unexpected SPSS header layout: cannot fix its time stamp")
        return data[:92] + _FIXED_SAV_TIME + data[109:]
    m = re.search(rb"<timestamp>\x11(\d\d [A-Za-z]{3} \d{4} \d\d:\d\d)</timestamp>", data[:1024])
    if m is None:
        raise RuntimeError("unexpected Stata header layout: cannot fix its time stamp")
    return data[: m.start(1)] + _FIXED_DTA_TIME + data[m.end(1):]


def stat_bytes(layout: StatLayout, fmt: StatFormat, *, file_label: str = "",
               missing_ranges: Mapping[str, list] | None = None) -> bytes:
    """The ``.sav`` / ``.dta`` file of ``layout`` as bytes (fixed header time stamp).

    ``.dta`` is written as Stata 15 (format 119 readers: Stata 15 and later; UTF-8).
    ``missing_ranges`` (``.sav`` only): original column -> SPSS user-missing declarations
    (pyreadstat's ``[{"lo": 9, "hi": 9}]``), written for the column's name in the file.
    """
    import pyreadstat

    with tempfile.TemporaryDirectory(prefix="sdc-stat-") as tmp:
        path = Path(tmp) / f"microdata.{fmt}"
        common = dict(column_labels=layout.variable_labels or None,
                      variable_value_labels=layout.value_labels or None)
        try:
            if fmt == "sav":
                ranges = {layout.names[c]: [r["lo"] if r["lo"] == r["hi"] else r for r in rs]
                          for c, rs in (missing_ranges or {}).items() if c in layout.names}
                pyreadstat.write_sav(layout.frame, str(path), file_label=file_label[:64],
                                     missing_ranges=ranges or None,
                                     variable_measure=layout.measure or None,
                                     variable_format=layout.formats or None,
                                     variable_display_width=layout.widths or None, **common)
            elif fmt == "dta":
                pyreadstat.write_dta(layout.frame, str(path), file_label=file_label[:80],
                                     version=15, variable_format=layout.formats or None,
                                     **common)
            else:
                raise ValueError(f"format must be 'sav' or 'dta', got {fmt!r}")
        except pyreadstat.ReadstatError as e:
            raise _no_room(e, path) from None
        return _fix_timestamp(path.read_bytes(), fmt)


def _no_room(e: Exception, path: Path) -> Exception:
    """pyreadstat's "Unable to write data" drops the errno: a file-size limit (``ulimit -f``)
    or a full temp folder is told as :func:`sdc.io.guard.disk_full_error` (exit 2); anything
    else stays what it was (a bug)."""
    import errno
    import os
    import resource

    from sdc.io.guard import disk_full_error

    if "write" not in str(e).lower():
        return e
    if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY:
        code = errno.EFBIG
    else:
        st = os.statvfs(path.parent)
        if st.f_bavail * st.f_frsize > 64 * 2**20:   # room: not a full disk
            return e
        code = errno.ENOSPC
    return disk_full_error(OSError(code, os.strerror(code), str(path)), path,
                           done=f"the {path.suffix[1:]} file was not written and nothing was "
                           f"published (pyreadstat: {e}; its temp folder was removed)",
                           fix="set TMPDIR to a folder with room")
