"""``sdc init``, step one: the data file read (provisionally, every key as text) and each key's
observed domain (:func:`observe_key`: categories, or an integer range; labels), held in
:class:`KeyDraft` and the whole draft in :class:`Draft` (docs in :mod:`sdc.authoring.draft`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sdc.config import ConfigError, ReleaseConfig, parse_config
from sdc.config.load import CONTROL_CHARACTERS
from sdc.errors import InputError
from sdc.io.read import read_input

__all__ = ["AS_IS_MAX", "DEFAULT_XI", "MAX_SMALL_SHARE", "RANGE_DENSITY", "RANGE_THRESHOLD", "Draft",
           "KeyDraft", "MISSING_TOKENS", "is_ordered_quantity", "missing_tokens", "observe_key",
           "read_for_draft"]

RANGE_THRESHOLD = 20       # integer keys with more distinct values get range: [lo, hi] + bands
RANGE_DENSITY = 0.5        # ... when they fill at least this share of their span (else: codes)
AS_IS_MAX = 5              # categorical keys with at most this many categories: as_is
MAX_SMALL_SHARE = 0.10     # at most this share of PRBs may have k < kmin (merged)
DEFAULT_XI = 0.395
_CANONICAL_INT = re.compile(r"^-?(0|[1-9][0-9]*)$")
# a whole number as a float writer prints it ('18.0', '18.', '-3.00'): a CSV export of an
# integer column with missing values (pandas, R, Stata write the column as floats)
_WHOLE_DECIMAL = re.compile(r"^-?(0|[1-9][0-9]*)(\.0*)?$")
# a plain decimal number ('2.5', '-0.75', '1e3'): such a column is numeric, not text codes
_DECIMAL_NUMBER = re.compile(r"^-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")


@dataclass
class KeyDraft:
    """The observed domain of one key variable."""

    name: str
    categories: list[Any] | None = None
    range: tuple[int, int] | None = None
    labels: dict[Any, str] = field(default_factory=dict)
    label: str | None = None
    missing: bool = False
    #: True when the records missing this key are too few to certify on their own (the draft
    #: then lets missing move like any category, docs/METHOD.md 7.9); False = the default policy
    missing_moves: bool = False
    n_observed: int = 0
    unobserved_labelled: list[Any] = field(default_factory=list)
    dropped_labels: list[Any] = field(default_factory=list)
    recode: dict[str, Any] | None = None
    recode_note: str = ""
    #: ``high`` for the keys of ``sdc init --analysis-keys`` (read by ``sdc design`` only)
    importance: str | None = None
    #: "household": one value in every household (``sdc init --household-id``)
    level: str = "person"

    @property
    def integer(self) -> bool:
        dom = self.categories if self.categories is not None else [0]
        return all(isinstance(v, int) for v in dom)

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.label:
            out["label"] = self.label
        if self.level == "household":
            out["level"] = "household"
        if self.range is not None:
            out["range"] = list(self.range)
        else:
            out["categories"] = list(self.categories or [])
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.missing:
            out["missing"] = "category"
            if self.missing_moves:
                out["missing_moves"] = True
        if self.importance is not None:
            out["importance"] = self.importance
        if self.recode is not None:
            out["recode"] = dict(self.recode)
        return out


@dataclass
class Draft:
    """A drafted config plus what the check on the data found."""

    name: str
    input: dict[str, Any]
    keys: dict[str, KeyDraft]
    partition: dict[str, Any]
    risk: dict[str, Any]
    seed_file: str
    output: dict[str, Any]
    input_labels: dict[str, str]
    released_unchanged: list[str]
    history: list[str]
    check: dict[str, Any]
    design_notes: list[str] = field(default_factory=list)
    #: columns the dependence check found giving the key values away -> why (dropped)
    dependent: dict[str, str] = field(default_factory=dict)
    #: such columns that are functions of the keys: released recomputed (``derived:``) -> why
    derived: dict[str, str] = field(default_factory=dict)
    #: the columns numeric once ``input.na_values`` is read as missing (:func:`missing_tokens`)
    na_columns: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The config as a dict (what :func:`draft_yaml` writes, without the comments)."""
        inp = dict(self.input)
        if self.input_labels:
            inp["labels"] = dict(self.input_labels)
        return {
            "name": self.name,
            "input": inp,
            "key_variables": {k: kd.spec() for k, kd in self.keys.items()},
            "partition": dict(self.partition),
            "risk": dict(self.risk),
            "seed": {"file": self.seed_file},
            "output": dict(self.output),
            **({"derived": list(self.derived)} if self.derived else {}),
        }


# -- reading --------------------------------------------------------------------------------
def _provisional(data_path: Path, keys: list[str], *, fmt: str | None, delimiter: str,
                 encoding: str, id_column: str | None, drop: list[str],
                 weight: str | None, na_values: list[str] | None = None) -> ReleaseConfig:
    """A config used only to read the file: every key declared with text categories, so a
    CSV's key columns are read as text (``"01"`` stays ``"01"``; :func:`observe_key` decides
    whether they are integers)."""
    data = {
        "name": "draft",
        "input": {"path": str(data_path), "delimiter": delimiter, "encoding": encoding,
                  "drop": list(drop),
                  **({"format": fmt} if fmt else {}),
                  **({"id_column": id_column} if id_column else {}),
                  **({"weight": weight} if weight else {}),
                  **({"na_values": list(na_values)} if na_values else {})},
        "key_variables": {k: {"categories": ["?"]} for k in keys},
        "risk": {"xi": DEFAULT_XI},
    }
    return parse_config(data, data_path.parent, source="sdc init options",
                        load_hierarchies=False)


def read_for_draft(data_path: str | Path, keys: list[str], *, fmt: str | None = None,
                   delimiter: str = ",", encoding: str = "utf-8", id_column: str | None = None,
                   drop: list[str] | None = None, weight: str | None = None,
                   household_id: str | None = None
                   ) -> tuple[pd.DataFrame, dict[str, dict[Any, str]], dict[str, str], str]:
    """Read a data file for drafting: (frame, value labels, variable labels, format).

    Uses the release's own reader (``sdc.io.read_input``: same errors, same types), plus the
    SPSS/Stata metadata (pyreadstat, metadata only) for value and variable labels. A CSV whose
    non-key columns are numbers but for a missing-value token (R's ``NA``: eusilc's incomes) is
    read again with that token missing (:func:`missing_tokens`); the frame's
    ``attrs["na_values"]`` then holds ``{"tokens": [...], "columns": [...]}`` for the draft's
    ``input.na_values``.

    Raises
    ------
    InputError
        Unreadable file, or a key / id / drop / weight column that is not in the file (names
        the column and lists the file's columns).
    """
    path = Path(data_path).expanduser().resolve()
    drop = list(drop or [])
    if not keys:
        raise ConfigError("sdc init needs at least one key variable: --keys a,b,c")
    cfg = _provisional(path, keys, fmt=fmt, delimiter=delimiter, encoding=encoding,
                       id_column=id_column, drop=drop, weight=weight)
    frame = read_input(cfg)
    if cfg.input.resolved_format == "csv":
        tokens, columns = missing_tokens(frame, cfg)
        if tokens:
            cfg2 = _provisional(path, keys, fmt=fmt, delimiter=delimiter, encoding=encoding,
                                id_column=id_column, drop=drop, weight=weight,
                                na_values=tokens)
            again = read_input(cfg2)
            if all(pd.api.types.is_numeric_dtype(again[c]) for c in columns):
                cfg, frame = cfg2, again
                frame.attrs["na_values"] = {"tokens": tokens, "columns": columns}
    wanted = {"--keys": keys, "--id": [id_column] if id_column else [], "--drop": drop,
              "--weight": [weight] if weight else [],
              "--household-id": [household_id] if household_id else []}
    for opt, cols in wanted.items():
        absent = [c for c in cols if c not in frame.columns]
        if absent:
            shown = ", ".join(map(str, list(frame.columns)[:30]))
            raise InputError(f"{opt}: {absent} {'is' if len(absent) == 1 else 'are'} not a "
                             f"column of {str(path)!r} ({len(frame)} rows); its columns are: "
                             f"{shown}{', ...' if frame.shape[1] > 30 else ''}")
    if household_id and household_id in {*keys, *drop, id_column, weight}:
        role = ("a key (--keys)" if household_id in keys else "dropped (--drop)"
                if household_id in drop else "the record id (--id)" if household_id == id_column
                else "the weight (--weight)")
        raise ConfigError(f"--household-id {household_id} is also {role}: the household id "
                          "groups persons into households and is released as pseudonyms; "
                          "name another column")
    if id_column:
        _check_unique_id(frame[id_column], id_column, path)
    fmt = cfg.input.resolved_format
    value_labels: dict[str, dict[Any, str]] = {}
    variable_labels: dict[str, str] = {}
    if fmt in ("sav", "dta"):
        import pyreadstat

        reader = pyreadstat.read_sav if fmt == "sav" else pyreadstat.read_dta
        _, meta = reader(str(path), metadataonly=True)
        # a label's control characters (a line break, a NUL) become spaces: the config
        # refuses them (sdc.config.load.CONTROL_CHARACTERS)
        for col, labels in (meta.variable_value_labels or {}).items():
            value_labels[col] = {_plain_value(v): _plain_label(t) for v, t in labels.items()}
        variable_labels = {c: _plain_label(t)
                           for c, t in (meta.column_names_to_labels or {}).items() if t}
    return frame, value_labels, variable_labels, fmt


MISSING_TOKENS = ("NA", "N/A", "n/a", "NaN", "nan", "null", "NULL", "None", "#N/A", ".", "-",
                  "?", "..")
"""Texts that files use for a missing number (R writes ``NA``, SAS ``.``, spreadsheets
``#N/A``): candidates for ``input.na_values`` (:func:`missing_tokens`)."""


def missing_tokens(frame: pd.DataFrame, config: ReleaseConfig) -> tuple[list[str], list[str]]:
    """(tokens, columns): the :data:`MISSING_TOKENS` that make value columns of ``frame`` (a
    CSV read with only the empty field missing) text although every other value is a number,
    and those columns. A token some other text column holds as a value (``NA`` for Namibia) is
    not proposed: declaring it missing would change that column's values. One pass over each
    text column's distinct values."""
    from sdc.io.columns import value_columns

    found: dict[str, set[str]] = {}
    held: set[str] = set()
    for c in value_columns(config, list(frame.columns)):
        s = frame[c]
        if pd.api.types.is_numeric_dtype(s) or not len(s):
            continue
        u = pd.Series(pd.unique(s.dropna().astype(str)))
        num = pd.to_numeric(u, errors="coerce")
        other = set(u[num.isna()])
        if other and other <= set(MISSING_TOKENS):
            if num.notna().any():  # (a column of tokens only holds no value either way)
                found[c] = other
        else:
            held |= other & set(MISSING_TOKENS)
    columns = [c for c, t in found.items() if not t & held]
    tokens = sorted(set().union(*(found[c] for c in columns)), key=MISSING_TOKENS.index)
    return tokens, columns


def _check_unique_id(s: pd.Series, name: str, path: Path) -> None:
    """``--id`` must name a column with one distinct, non-empty value per record (the release
    refuses anything else on every row); refused with the counts and the first duplicates."""
    empty = s.isna().to_numpy()
    dup = s.duplicated(keep=False).to_numpy() & ~empty
    if not empty.any() and not dup.any():
        return
    parts = []
    if dup.any():
        vals = s[dup]
        n_vals = int(vals.nunique())
        first = list(dict.fromkeys(vals.tolist()))[:5]
        shown = "; ".join(
            f"{v!r} at rows {[int(i) + 1 for i in np.flatnonzero(dup & (s == v).to_numpy())[:3]]}"
            for v in first)
        parts.append(f"{int(dup.sum())} rows share {n_vals} id value(s) (first: {shown})")
    if empty.any():
        parts.append(f"{int(empty.sum())} rows have no id (first rows: "
                     f"{[int(i) + 1 for i in np.flatnonzero(empty)[:5]]})")
    raise InputError(
        f"--id {name!r} is not a unique record id in {str(path)!r} ({len(s)} rows): "
        f"{'; '.join(parts)}. Rows are 1-based data rows. Fix: choose a column with one "
        "distinct value per record, remove the duplicated records from the file, or leave out "
        "--id (the public file gets its own record_id either way)")


def _plain_value(v: Any) -> Any:
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return int(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


# -- observed domains -----------------------------------------------------------------------
def _refuse_fraction(name: str, values: np.ndarray) -> None:
    """A key holding non-whole numbers (a float-valued key such as an income or a BMI): refused
    with the counts and the fixes (a key is categorical: every distinct value is a cell)."""
    frac = values[values != np.floor(values)]
    n_distinct = int(np.unique(values).size)
    raise InputError(
        f"key variable {name!r} holds non-whole numbers ({frac.size} of {values.size} rows, "
        f"e.g. {frac[0]:g}; {n_distinct} distinct values from {values.min():g} to "
        f"{values.max():g}): key variables are categorical, every distinct value is its own "
        "cell. Fix: band it in the data (e.g. bands of equal width, written as whole-number "
        "band starts or as text labels) and declare the bands as the key's categories; or "
        "round it to whole numbers (then `recode: {bands: [...]}` can band it); or leave it "
        "out of --keys (it is then released unchanged and measured by the dependence check)")


def is_ordered_quantity(values: list[int] | np.ndarray) -> bool:
    """Whether sorted distinct integers look like an ordered quantity (ages, years, counts)
    rather than nominal codes: they fill at least ``RANGE_DENSITY`` of their span. PUMA codes
    (610 values over 100..8200: 7.5%) are codes; ages 15..49 with 35 values are a quantity."""
    v = np.asarray(values, dtype=float)
    return bool(v.size and v.size >= RANGE_DENSITY * (v[-1] - v[0] + 1))


def _plain_label(text: Any) -> str:
    return CONTROL_CHARACTERS.sub(" ", str(text))


def observe_key(s: pd.Series, name: str, value_labels: dict[Any, str] | None = None,
                label: str | None = None) -> KeyDraft:
    """The observed domain of one key column (vectorized: one ``unique`` per column).

    Integers (numbers that are whole, or text that is a canonical integer such as ``"12"`` but
    not ``"012"``) with more than ``RANGE_THRESHOLD`` distinct values that fill at least
    ``RANGE_DENSITY`` of their span get a range, others a sorted category list.

    Raises
    ------
    InputError
        A boolean key, a key with non-whole numbers, or a key with no value at all.
    """
    value_labels = dict(value_labels or {})
    missing = bool(s.isna().any())
    present = s.dropna()
    if present.empty:
        raise InputError(f"key variable {name!r} has no values ({len(s)} rows, all empty); "
                         "choose another key")
    if pd.api.types.is_bool_dtype(s.dtype):
        raise InputError(f"key variable {name!r} is boolean; recode it as 0/1 or as text "
                         "in the data (YAML true/false are not categories)")
    uniq = pd.unique(present)
    values: list[Any]
    if pd.api.types.is_numeric_dtype(s.dtype):
        arr = np.asarray(uniq, dtype=float)
        if (arr != np.floor(arr)).any():
            _refuse_fraction(name, present.to_numpy(dtype=float))
        values = sorted(int(v) for v in arr)
    else:
        text = pd.Series(uniq).astype(str)
        if text.str.match(_CANONICAL_INT).all():
            values = sorted(int(v) for v in text)
        elif text.str.match(_WHOLE_DECIMAL).all():
            # '18.0' is the integer 18 written by a float writer (the same data as Parquet,
            # SPSS or Stata gives 18): same draft whatever the file format
            values = sorted(set(int(float(v)) for v in text))
        elif text.str.match(_DECIMAL_NUMBER).all() and not text.str.match(r"^0[0-9]").any():
            _refuse_fraction(name, present.astype(str).astype(float).to_numpy())
        else:
            values = sorted(text.tolist())
    kd = KeyDraft(name=name, label=label, missing=missing, n_observed=len(values))
    integer = all(isinstance(v, int) for v in values)
    labels = {(_plain_value(v) if integer else str(v)): t for v, t in value_labels.items()}
    if integer and len(values) > RANGE_THRESHOLD and is_ordered_quantity(values):
        lo, hi = values[0], values[-1]
        kd.range = (lo, hi)
        kd.labels = {v: t for v, t in labels.items() if isinstance(v, int) and lo <= v <= hi}
        kd.dropped_labels = [v for v in labels if v not in kd.labels]
    else:
        extra = [v for v in labels if v not in set(values)
                 and isinstance(v, int) == integer and not isinstance(v, bool)]
        kd.unobserved_labelled = sorted(extra, key=lambda v: (str(type(v)), v))
        kd.categories = sorted(set(values) | set(extra)) if extra else values
        kd.labels = {v: t for v, t in labels.items() if v in set(kd.categories)}
        kd.dropped_labels = [v for v in labels if v not in kd.labels]
    return kd


# -- partition -------------------------------------------------------------------------------
