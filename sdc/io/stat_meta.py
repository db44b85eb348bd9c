"""The SPSS/Stata metadata of an input file, read once (pyreadstat, metadata only: the file's
header and dictionary, no record) and carried to the public ``.sav`` / ``.dta`` files.

:class:`StatMetadata` holds, per column of the input: the variable label, the value labels,
SPSS user-missing declarations, the SPSS measurement level (nominal / ordinal / scale), the
display format and width, and whether the file stores the column as integers (a Stata
byte/int/long, or an SPSS numeric format without decimals such as ``F8.0``). An input that is
not SPSS/Stata has empty metadata (:data:`NO_METADATA`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["NO_METADATA", "StatMetadata", "plain_value", "read_stat_metadata"]

# SPSS numeric print formats without decimals (F8.0, N5, COMMA10.0, ...): integers
_SAV_INTEGER_FORMAT = re.compile(r"^(F|N|COMMA|DOT|DOLLAR|PCT|Z)\d+(\.0)?$", re.IGNORECASE)
_DTA_INTEGER_TYPES = {"int8", "int16", "int32"}
_SAV_MEASURES = {"nominal", "ordinal", "scale"}


def plain_value(v: Any) -> Any:
    """A label's value as plain Python: whole floats (SPSS stores every number as a double)
    become ``int``, numpy scalars become Python scalars, text stays text."""
    if hasattr(v, "item") and not isinstance(v, str):
        v = v.item()
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


@dataclass(frozen=True)
class StatMetadata:
    """What an SPSS/Stata input says about its columns (column name -> ...).

    Attributes
    ----------
    fmt : str or None
        ``"sav"``, ``"dta"``, or None (the input is not SPSS/Stata: everything empty).
    variable_labels : dict
        Column -> variable label (columns without one left out).
    value_labels : dict
        Column -> {value: label}; values as :func:`plain_value` (``1.0`` -> ``1``).
    missing_ranges : dict
        Column -> SPSS user-missing declarations (``[{"lo": 9, "hi": 9}, ...]``; ``.sav`` only).
    measure : dict
        Column -> ``nominal`` | ``ordinal`` | ``scale`` (``.sav`` only; "unknown" left out).
    formats : dict
        Column -> the file's display format (``F8.2``, ``A20``, ``%9.0g``, ``%td``, ...).
    widths : dict
        Column -> display width (``.sav``: columns in the Data View).
    integer : frozenset
        Columns the file stores as integers (Stata byte/int/long) or shows without decimals
        (SPSS ``F8.0`` and the like).
    """

    fmt: str | None = None
    variable_labels: dict[str, str] = field(default_factory=dict)
    value_labels: dict[str, dict[Any, str]] = field(default_factory=dict)
    missing_ranges: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    measure: dict[str, str] = field(default_factory=dict)
    formats: dict[str, str] = field(default_factory=dict)
    widths: dict[str, int] = field(default_factory=dict)
    integer: frozenset[str] = frozenset()


NO_METADATA = StatMetadata()


def read_stat_metadata(path: str | Path, fmt: str, encoding: str = "utf-8") -> StatMetadata:
    """The metadata of the SPSS (``fmt="sav"``) or Stata (``"dta"``) file ``path``; for any
    other ``fmt`` :data:`NO_METADATA`. Reads no record (pyreadstat ``metadataonly``)."""
    if fmt not in ("sav", "dta"):
        return NO_METADATA
    import pyreadstat

    kwargs: dict[str, Any] = {"metadataonly": True}
    if encoding.lower().replace("_", "-") not in ("utf-8", "utf8"):
        kwargs["encoding"] = encoding
    if fmt == "sav":
        kwargs["user_missing"] = True
        _, meta = pyreadstat.read_sav(str(path), **kwargs)
    else:
        _, meta = pyreadstat.read_dta(str(path), **kwargs)
    types = dict(getattr(meta, "readstat_variable_types", None) or {})
    formats = {c: str(f) for c, f in (getattr(meta, "original_variable_types", None) or {}).items()
               if f}
    if fmt == "sav":
        integer = {c for c, f in formats.items()
                   if types.get(c) != "string" and _SAV_INTEGER_FORMAT.match(f)}
    else:
        integer = {c for c, t in types.items() if t in _DTA_INTEGER_TYPES}
    return StatMetadata(
        fmt=fmt,
        variable_labels={c: str(t) for c, t in (meta.column_names_to_labels or {}).items() if t},
        value_labels={c: {plain_value(v): str(t) for v, t in labels.items()}
                      for c, labels in (meta.variable_value_labels or {}).items() if labels},
        missing_ranges=dict(getattr(meta, "missing_ranges", None) or {}) if fmt == "sav" else {},
        measure={c: m for c, m in (getattr(meta, "variable_measure", None) or {}).items()
                 if m in _SAV_MEASURES} if fmt == "sav" else {},
        formats=formats,
        widths={c: int(w) for c, w in (getattr(meta, "variable_display_width", None) or {}).items()
                if w and int(w) > 0},
        integer=frozenset(integer),
    )
