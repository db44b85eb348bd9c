"""pandera schemas built from a release config: what the input and the public file must satisfy.

Input: key values in their declared domain (``missing: error`` refuses empty ones), the id
column present, non-empty and unique, the weight numeric, finite, > 0 and at most
:data:`MAX_WEIGHT`, the dropped columns present. :func:`validate_input` is lazy and reports
every problem at once as one table (column, check, bad values, count, first rows) and the fix,
in one :class:`~sdc.errors.InputError`. Output (:func:`validate_output`, before anything is
written): the same key domains, a unique integer ``record_id``, no identifier column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pandera.pandas as pa
from pandera.errors import SchemaError, SchemaErrors

from sdc.config.model import KeyVariable, ReleaseConfig
from sdc.errors import InputError
from sdc.method.households import check_households

__all__ = ["OutputSchemaError", "input_schema", "output_schema", "passes_schema",
           "validate_input", "validate_output"]

PUBLIC_ID = "record_id"
_MAX_ROWS_SHOWN = 5


class OutputSchemaError(ValueError):
    """The public frame breaks the output schema. Nothing is written; indicates a bug or a
    config that makes the release unsafe (e.g. an input column named like the public id)."""


# -- checks (vectorized; each returns True when every value passes, else a boolean Series
# aligned with the values: pandera then reports the failing values and rows) ----------------
def _result(ok: pd.Series | np.ndarray, s: pd.Series) -> bool | pd.Series:
    """``True`` if every value passed (pandera then has nothing to collect: at 5M records the
    boolean Series it would post-process costs as much as the check), else the mask."""
    arr = np.asarray(ok, dtype=bool)
    if arr.all():
        return True
    return ok if isinstance(ok, pd.Series) else pd.Series(arr, index=s.index, copy=False)


def _is_int_dtype(s: pd.Series) -> bool:
    return isinstance(s.dtype, np.dtype) and s.dtype.kind in "iu"


def _numeric(s: pd.Series) -> pd.Series:
    return pd.to_numeric(s, errors="coerce").astype("float64")


def _is_integer(s: pd.Series) -> bool | pd.Series:
    if _is_int_dtype(s):  # numpy integers: whole, finite, never missing
        return True
    x = _numeric(s)
    return _result(x.notna() & np.isfinite(x) & (x == np.floor(x)), s)


def _in_range(lo: int, hi: int):
    def check(s: pd.Series) -> bool | pd.Series:
        if _is_int_dtype(s):
            a = s.to_numpy()
            if not a.size or (a.min() >= lo and a.max() <= hi):
                return True  # two reductions, no masks (every batch, every key)
            return _result((a >= lo) & (a <= hi), s)
        x = _numeric(s)
        # non-numbers are reported by the `integer` check, not twice
        return _result(x.isna() | ((x >= lo) & (x <= hi)), s)
    return check


def _in_categories(categories: list[Any]):
    cats = list(categories)

    def check(s: pd.Series) -> bool | pd.Series:
        return _result(s.isin(cats), s)
    return check


MAX_WEIGHT = 1e15
"""The largest weight accepted: the reports add weights up exactly in float64, and a sum of
weights near 1e308 overflows (a weight of 1e15 is 10^5 times the world's population)."""


def _positive_finite(s: pd.Series) -> bool | pd.Series:
    if isinstance(s.dtype, np.dtype) and s.dtype.kind == "f":
        a = s.to_numpy()
        return _result(np.isfinite(a) & (a > 0) & (a <= MAX_WEIGHT), s)  # NaN fails all
    x = _numeric(s)
    return _result(x.notna() & np.isfinite(x) & (x > 0) & (x <= MAX_WEIGHT), s)


def _unique_integers(s: pd.Series) -> bool:
    """Whether a numpy integer column holds distinct values: a strictly increasing column
    (e.g. ``record_id`` 1..n) in one pass, else one sort and a comparison of neighbours
    (a third of pandas' hash-table ``is_unique`` at 5M records)."""
    a = s.to_numpy()
    if a.size < 2:
        return True
    if bool((a[1:] > a[:-1]).all()):
        return True
    b = np.sort(a)
    return not bool((b[1:] == b[:-1]).any())


def _key_column(name: str, kv: KeyVariable) -> pa.Column:
    checks: list[pa.Check]
    if kv.range is not None:
        lo, hi = kv.range
        checks = [
            pa.Check(_is_integer, name="integer"),
            pa.Check(_in_range(lo, hi), name=f"in_range[{lo}, {hi}]"),
        ]
    else:
        checks = [pa.Check(_in_categories(kv.categories), name="in_categories")]  # type: ignore[arg-type]
    return pa.Column(None, checks=checks, nullable=kv.missing == "category", required=True,
                     name=name)


def input_schema(config: ReleaseConfig, *, unique_id: bool = True) -> pa.DataFrameSchema:
    """The pandera schema of the input file implied by ``config`` (see the module docstring).

    Columns not named in the config are allowed and not checked. ``unique_id=False`` leaves
    out the id column's uniqueness (the batch engines check it over the whole file instead
    of per batch: :mod:`sdc.executors.streaming`).
    """
    cols: dict[str, pa.Column] = {
        name: _key_column(name, kv) for name, kv in config.key_variables.items()
    }
    inp = config.input
    if inp.id_column is not None:
        cols[inp.id_column] = pa.Column(None, nullable=False, unique=unique_id, required=True,
                                        name=inp.id_column)
    if inp.weight is not None:
        cols[inp.weight] = pa.Column(
            None, nullable=False, required=True, name=inp.weight,
            checks=[pa.Check(_positive_finite, name="positive_finite")],
        )
    for d in inp.drop:
        cols.setdefault(d, pa.Column(None, nullable=True, required=True, name=d))
    for c in inp.labels:  # a variable label must name a column of the file
        cols.setdefault(c, pa.Column(None, nullable=True, required=True, name=c))
    return pa.DataFrameSchema(cols, strict=False, name=f"input of {config.name}")


def output_schema(config: ReleaseConfig) -> pa.DataFrameSchema:
    """The pandera schema of the public microdata: key domains, a unique integer ``record_id``,
    and no dropped identifier or original id column (checked as frame-wide checks)."""
    cols: dict[str, pa.Column] = {
        name: _key_column(name, kv) for name, kv in config.key_variables.items()
    }
    cols[PUBLIC_ID] = pa.Column(
        None, nullable=False, unique=True, required=True, name=PUBLIC_ID,
        checks=[pa.Check(_is_integer, name="integer")],
    )
    forbidden = list(config.input.drop)
    if config.input.id_column is not None and config.input.id_column != PUBLIC_ID:
        forbidden.append(config.input.id_column)
    frame_checks = [
        pa.Check(lambda df, c=c: c not in df.columns, name=f"absent:{c}")
        for c in dict.fromkeys(forbidden)
    ]
    return pa.DataFrameSchema(cols, checks=frame_checks, strict=False,
                              name=f"public microdata of {config.name}")


# -- the problems table --------------------------------------------------------------------
def check_fix(check: str, column: str, config: ReleaseConfig) -> str:
    kv = config.key_variables.get(column)
    if check == "column_in_dataframe":
        inp = config.input
        if (column in inp.labels and column not in config.key_variables
                and column not in (inp.id_column, inp.weight) and column not in inp.drop):
            return ("input.labels gives this column a label but the file has no such column: "
                    "fix its name there or remove the label")
        return "add the column to the file, or fix its name in the config"
    if check == "not_nullable":
        if column == config.input.id_column:
            return ("fill in the ids; in a CSV file an id written as NA, null, n/a, None, NaN "
                    "or #N/A is read as missing too: give those records other ids")
        if kv is not None:
            return f"fill in the values, or set key_variables.{column}.missing: category"
        return "fill in the values"
    if check in ("field_uniqueness", "unique"):
        return "make the ids unique (one row per respondent)"
    if check == "integer":
        return "use whole numbers (or declare categories instead of a range)"
    if check.startswith("in_range"):
        return f"fix the values or widen key_variables.{column}.range"
    if check == "in_categories":
        return f"fix the values or add them to key_variables.{column}.categories"
    if check == "in_categories:text":
        return (f"the values are text but key_variables.{column}.categories are numbers: store "
                "the column as integers, or quote the categories in the config")
    if check == "positive_finite":
        return (f"weights must be > 0, finite and at most {MAX_WEIGHT:.0e} (the reports add "
                "them up): fix or remove those rows, or divide every weight by the same factor")
    if check.startswith("absent:"):
        return "remove the column before writing (a bug if it reaches here)"
    if check == "beyond_int64":
        return ("the value is beyond 64-bit integers (a key value must lie within "
                "-2^63..2^63-1): fix it in the file, or recode the column (bands, text "
                "categories) before the release")
    return "fix the data or the config"


def _beyond_int64(cases: list[Any]) -> bool:
    """Whether a failing value is a whole number that int64 cannot hold (read as text, as a
    double or as uint64)."""
    for v in cases:
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, str):
            t = v.strip()
            if not t.lstrip("+-").isdigit():
                continue
            v = int(t)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if isinstance(v, float) and (not np.isfinite(v) or v != np.floor(v)):
            continue
        if not -(2 ** 63) <= v < 2 ** 63:
            return True
    return False


def _fmt_value(v: Any) -> str:
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
        return "<empty>"
    r = repr(v)
    return r if len(r) <= 24 else r[:21] + "..."


def describe_check(check: str, column: str, config: ReleaseConfig) -> str:
    kv = config.key_variables.get(column)
    if check == "in_categories" and kv is not None and kv.categories is not None:
        cats = list(kv.categories)
        return f"in categories {cats[:8]}{' ...' if len(cats) > 8 else ''}"
    if check.startswith("in_range"):
        return check.replace("in_range", "in range ").replace(", ", "..").replace("[", "").replace("]", "")
    return {"not_nullable": "not empty", "field_uniqueness": "unique", "integer": "whole number",
            "positive_finite": "finite and > 0", "column_in_dataframe": "column present"}.get(
        check, "not released" if check.startswith("absent:") else check)


def problems_table(err: SchemaErrors, frame: pd.DataFrame, config: ReleaseConfig) -> pd.DataFrame:
    """One row per (column, check): check, bad values (a sample), count of rows, first rows
    (1-based data rows, the header not counted) and the fix."""
    fc = err.failure_cases
    rows = []
    pos = pd.Series(np.arange(len(frame)), index=frame.index)
    frame_level = fc["schema_context"].astype(str) == "DataFrameSchema"
    for (column, check), g in fc[~frame_level].groupby(["column", "check"], dropna=False,
                                                        sort=False):
        check, column = str(check), str(column)
        idx = g["index"].dropna()
        idx = idx[idx.isin(pos.index)]
        first = np.sort(pos.loc[idx.unique()].to_numpy()) + 1
        cases = pd.unique(g["failure_case"].astype(object)).tolist()
        vals = list(dict.fromkeys(_fmt_value(v) for v in cases[: 4 * _MAX_ROWS_SHOWN]))
        fix_key = check
        kv = config.key_variables.get(column)
        if check == "in_categories" and kv is not None and kv.categories is not None:
            as_text = {str(c) for c in kv.categories}
            if any(isinstance(v, str) and v in as_text for v in cases):
                fix_key = "in_categories:text"
        if kv is not None and _beyond_int64(cases):
            fix_key = "beyond_int64"
        more = " ..." if len(vals) > _MAX_ROWS_SHOWN else ""
        rows.append({
            "column": column, "check": describe_check(check, column, config),
            "bad values": ", ".join(vals[:_MAX_ROWS_SHOWN]) + more,
            "count": len(first) if len(first) else len(g),
            "first rows": ", ".join(str(r) for r in first[:_MAX_ROWS_SHOWN])
            + (" ..." if len(first) > _MAX_ROWS_SHOWN else ""),
            "fix": check_fix(fix_key, column, config),
        })
    for _, r in fc[frame_level].iterrows():
        check = str(r["check"])
        if check.startswith("column_in_dataframe"):
            column, check, bad = str(r["failure_case"]), "column_in_dataframe", "(missing)"
        elif check.startswith("absent:"):
            column, bad = check.split(":", 1)[1], "(present)"
        else:
            column, bad = "<table>", _fmt_value(r["failure_case"])
        rows.append({"column": column, "check": describe_check(check, column, config),
                     "bad values": bad, "count": len(frame), "first rows": "all",
                     "fix": check_fix(check, column, config)})
    # missing columns first: they explain everything else
    rows.sort(key=lambda r: r["check"] != "column present")
    return pd.DataFrame(rows, columns=["column", "check", "bad values", "count", "first rows", "fix"])


def render_problems(table: pd.DataFrame) -> str:
    cols = list(table.columns)
    cells = [[str(c) for c in cols]] + [[str(v) for v in r] for r in table.itertuples(index=False)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cols))]
    lines = ["  " + " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
             for r in cells]
    lines.insert(1, "  " + "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def _check_passes(check: pa.Check, data: pd.Series | pd.DataFrame) -> bool:
    """Whether a plain check (one function of the whole column or frame) passes every value:
    its function returned True, not a mask (:func:`_result`), given what pandera gives it
    (a column without its missing values when the check ignores them)."""
    if check.element_wise or check.groupby is not None or check.statistics:
        return False
    if isinstance(data, pd.Series) and check.ignore_na and data.hasnans:
        data = data.dropna()
    try:
        got = check._check_fn(data, **check._check_kwargs)
    except Exception:  # noqa: BLE001 - pandera reports it
        return False
    return isinstance(got, bool | np.bool_) and bool(got)


def passes_schema(frame: pd.DataFrame, schema: pa.DataFrameSchema) -> bool:
    """True when ``frame`` certainly passes ``schema`` as pandera would validate it (lazy,
    in place): every column present, none duplicated, no missing value where none is allowed,
    and every check's function True on the whole column (or frame). pandera's own machinery
    costs ~50 ms a call, most of a batch's validation; False means "ask pandera", which
    then finds the problems and reports them (or passes: the checks here are conservative).
    A schema using anything else (dtypes, coercion, parsers, uniqueness, an index, regex
    columns) is always left to pandera."""
    if (schema.dtype is not None or schema.coerce or schema.parsers or schema.unique
            or schema.index is not None or schema.strict or schema.add_missing_columns
            or frame.columns.duplicated().any()):
        return False
    for name, col in schema.columns.items():
        if (col.dtype is not None or col.coerce or col.parsers or col.unique or col.regex
                or col.drop_invalid_rows or name not in frame.columns):
            return False
        s = frame[name]
        if not col.nullable and bool(s.isna().any()):
            return False
        if not all(_check_passes(c, s) for c in col.checks):
            return False
    return all(_check_passes(c, frame) for c in schema.checks)


def _validate(frame: pd.DataFrame, schema: pa.DataFrameSchema, config: ReleaseConfig,
              what: str, exc: type[Exception]) -> pd.DataFrame:
    if frame.columns.duplicated().any():
        dup = frame.columns[frame.columns.duplicated()].tolist()
        raise exc(f"{what} has duplicated column names {dup}; make them unique")
    # unique integer columns (the id, record_id) are checked here; pandera's own (slower)
    # uniqueness check runs only when there are duplicates, for its problem report
    fast = [name for name, col in schema.columns.items()
            if col.unique and name in frame.columns and _is_int_dtype(frame[name])
            and _unique_integers(frame[name])]
    if fast:
        schema = schema.update_columns({name: {"unique": False} for name in fast})
    if passes_schema(frame, schema):
        return frame
    try:
        # inplace: the schemas coerce nothing, so pandera need not copy the frame first (a
        # copy of every record, e.g. +450 MB and 1.2 s at 5M records)
        return schema.validate(frame, lazy=True, inplace=True)
    except SchemaErrors as err:
        table = problems_table(err, frame, config)
        n = len(table)
        raise exc(
            f"{what} does not match the config ({n} problem{'s' if n != 1 else ''}; rows are "
            f"1-based data rows, the header not counted):\n{render_problems(table)}"
        ) from None
    except SchemaError as err:  # pragma: no cover - lazy=True collects; kept for safety
        raise exc(f"{what} does not match the config: {err}") from None


def validate_input(frame: pd.DataFrame, config: ReleaseConfig) -> pd.DataFrame:
    """Validate the input lazily against :func:`input_schema`; return the frame unchanged.

    Raises :class:`~sdc.errors.InputError` listing every problem at once: column, check, a
    sample of the bad values, how many rows, the first rows (1-based data rows) and the fix.
    """
    out = _validate(frame, input_schema(config), config, f"the input of {config.name!r}",
                    InputError)
    check_households(frame, config)
    return out


def validate_public_batch(released: pd.DataFrame, config: ReleaseConfig) -> None:
    """:func:`validate_output` on one batch of released records before it is spilled (every
    executor runs it on every batch): the key domains and the absence of dropped and original
    id columns are checked per value or per column, so they hold for the public file iff
    they hold for every batch; ``record_id`` is numbered 1..n when the buckets are written
    (an integer and unique by construction). ``released``: the batch's public columns.

    Raises :class:`OutputSchemaError` (nothing is published)."""
    _validate(released, output_schema(config).remove_columns([PUBLIC_ID]), config,
              f"the public microdata of {config.name!r}", OutputSchemaError)


def validate_output(public_frame: pd.DataFrame, config: ReleaseConfig) -> pd.DataFrame:
    """Validate the public frame against :func:`output_schema` before anything is written.

    Raises :class:`OutputSchemaError` (a ``ValueError``) with the same problems table.
    """
    return _validate(public_frame, output_schema(config), config,
                     f"the public microdata of {config.name!r}", OutputSchemaError)
