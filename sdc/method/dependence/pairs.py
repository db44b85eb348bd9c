"""Relations an intruder computes from the public file (docs/METHOD.md, "Relations an intruder
computes"): synthetic columns fed to the same counter as the real ones, so every executor counts
the same tables.

Pairs: for two numeric columns a, b (integers or floats): ``a + b``, ``a - b`` (card's age =
exper + educ + 6; a code q - p = region), ``a * b`` and ``a / b`` (y = x * age); for any two
discrete columns (integers, booleans, text, categories): their joint value ``(a, b)`` hashed (a
combined code of two columns). One column: a text column read as dates, day first and month
first (:mod:`.dates`: ``31.12.1985``, ``Mar 14 1987``); a numeric column sorted, its
differences to the previous and the next value and its rank (:mod:`.relations`: a running
total). Each is checked in order (:func:`sdc.method.dependence.measure.order_inform`: runs of
bins whose records share one key value), which needs no per-value table. Which columns take part
is decided from the schema (the column types, never the values of a batch): at most
``PAIR_COLUMNS`` columns of each kind, in input order; the pairs of the columns beyond are not
checked and the release says so (:meth:`PairPlan.warning`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sdc.method.dependence.dates import date_image
from sdc.method.draws import fmix64

__all__ = ["DATE_OPS", "PAIR_COLUMNS", "SORTED_OPS", "PairPlan", "SyntheticColumn", "frame_kinds", "pair_image",
           "pair_plan", "schema_kinds"]

#: at most this many columns are paired (66 pairs; two integer columns give 3 synthetic
#: columns, a + b, a - b and (a, b), any other two discrete ones 1: at most 198 ordered tables,
#: ~40 ns per record each): the count pass's cost of the pairs is bounded whatever the width
PAIR_COLUMNS = 12
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xC2B2AE3D27D4EB4F)


#: ops of one column (``b`` empty): read as dates, or sorted (:mod:`.relations`)
DATE_OPS = ("date:day", "date:month")
SORTED_OPS = ("diff:previous", "diff:next", "rank")
_UNARY_NAMES = {"date:day": "{a} read as a day-first date",
                "date:month": "{a} read as a month-first date",
                "diff:previous": "{a} sorted, minus the previous value",
                "diff:next": "{a} sorted, the next value minus it",
                "rank": "the rank of {a}"}


@dataclass(frozen=True)
class SyntheticColumn:
    """``a op b``: op ``+``, ``-``, ``*``, ``/`` (numeric columns) or ``&`` (the joint value);
    or a relation of one column ``a`` (``b`` empty): ``DATE_OPS``, ``SORTED_OPS``."""

    op: str
    a: str
    b: str = ""

    @property
    def unary(self) -> bool:
        """A relation of one column (reported under that column)."""
        return not self.b

    @property
    def name(self) -> str:
        if self.unary:
            return _UNARY_NAMES[self.op].format(a=self.a)
        return f"({self.a}, {self.b})" if self.op == "&" else f"{self.a} {self.op} {self.b}"

    @property
    def key(self) -> str:
        """The counter's name of its table (never an input column's name)."""
        return f"\x00{self.op}\x00{self.a}\x00{self.b}"


@dataclass(frozen=True)
class PairPlan:
    """The synthetic columns the count pass feeds per batch (``columns``), the numeric columns
    whose sorted relations it collects (``sorted``), and the columns left unpaired."""

    columns: tuple[SyntheticColumn, ...] = ()
    paired: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()
    sorted: tuple[str, ...] = ()

    @property
    def relations(self) -> tuple[SyntheticColumn, ...]:
        """Every synthetic column: the per-batch ones and the sorted relations."""
        return self.columns + tuple(SyntheticColumn(op, c) for c in self.sorted
                                    for op in SORTED_OPS)

    def warning(self) -> str | None:
        """The release's warning when some pairs are not checked (None: every pair is)."""
        if not self.left_out:
            return None
        n = len(self.paired) + len(self.left_out)
        unchecked = n * (n - 1) // 2 - len(self.paired) * (len(self.paired) - 1) // 2
        return (f"dependence check: {unchecked} pair(s) of released columns not checked: the "
                f"pairs of {', '.join(self.left_out)} (the check pairs the first "
                f"{PAIR_COLUMNS} numeric and the first {PAIR_COLUMNS} discrete non-key columns, "
                "in input order; "
                "see docs/METHOD.md, 'Pairs of columns'). Drop or key the columns that "
                "do not matter, or move the ones to check to the front")


def _kind(t: Any) -> str | None:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return "discrete"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    if pa.types.is_boolean(t):
        return "discrete"
    return None


def schema_kinds(schema: Any) -> dict[str, str]:
    """``{column: "integer" | "float" | "text" | "discrete"}`` of an Arrow schema (the columns
    that take part in relations)."""
    return {f.name: k for f in schema if (k := _kind(f.type)) is not None}


def frame_kinds(frame: pd.DataFrame) -> dict[str, str]:
    """:func:`schema_kinds` of a frame (``sdc.release_frame``, ``sdc audit``): integer and float
    dtypes, text (object and string dtypes), booleans and categories."""
    out = {}
    for c in frame.columns:
        d = frame[c].dtype
        if isinstance(d, pd.CategoricalDtype) or d.kind == "b":
            out[str(c)] = "discrete"
        elif d.kind in "OSU" or pd.api.types.is_string_dtype(d):
            out[str(c)] = "text"
        elif d.kind in "iu":
            out[str(c)] = "integer"
        elif d.kind == "f":
            out[str(c)] = "float"
    return out


def pair_plan(checked: list[str], kinds: Mapping[str, str], config: Any) -> PairPlan:
    """The synthetic columns of ``checked`` (the checked non-key columns, in input order), never
    of the weight: the first ``PAIR_COLUMNS`` integer, text or discrete columns pair by their
    joint value; the first ``PAIR_COLUMNS`` numeric ones (integers, floats) by ``+ - * /``; the
    first ``PAIR_COLUMNS`` text columns are read as dates; the numeric ones sorted."""
    weight = getattr(config.input, "weight", None)
    cols = [c for c in checked if c != weight]
    cand = [c for c in cols if kinds.get(c) in ("integer", "discrete", "text")]
    num = [c for c in cols if kinds.get(c) in ("integer", "float")]
    text = [c for c in cols if kinds.get(c) == "text"][:PAIR_COLUMNS]
    use, rest = cand[:PAIR_COLUMNS], cand[PAIR_COLUMNS:]
    nuse = num[:PAIR_COLUMNS]
    joint = set(use)
    out = []
    for i, a in enumerate(cols):
        for b in cols[i + 1:]:
            if a in nuse and b in nuse:
                out += [SyntheticColumn(op, a, b) for op in ("+", "-", "*", "/")]
            if a in joint and b in joint:
                out.append(SyntheticColumn("&", a, b))
    out += [SyntheticColumn(op, c) for c in text for op in DATE_OPS]
    # left out: the columns beyond the joint bound, and numeric ones beyond the arithmetic
    # bound that do not pair by their joint value either (floats), in input order
    out_set = {*rest, *(c for c in num[PAIR_COLUMNS:] if c not in joint)}
    left = tuple(c for c in cols if c in out_set)
    return PairPlan(tuple(out), tuple(dict.fromkeys([*use, *nuse])), left, tuple(nuse))


def pair_image(frame: pd.DataFrame, col: SyntheticColumn, hashes: Mapping[str, np.ndarray],
               numbers: dict[str, np.ndarray] | None = None,
               out: np.ndarray | None = None) -> tuple[str, np.ndarray, np.ndarray]:
    """The order image of a synthetic column on a batch: ``("num", a op b, valid)``,
    ``("str", 56-bit hash of (a, b), valid)`` (``hashes``: the batch's value hashes), or a text
    column's day numbers (``DATE_OPS``; no text: nothing valid). ``numbers``: the batch's
    columns as float64, filled here (a column's once for its four pairs); ``out``: where
    ``a op b`` goes (the caller's scratch of ``len(frame)`` floats), else a new array."""
    if col.op in DATE_OPS:
        img = date_image(frame[col.a], col.op.split(":")[1])
        if img is None:
            return "num", np.zeros(len(frame)), np.zeros(len(frame), dtype=bool)
        return img
    if col.op == "&":
        h = fmix64(hashes[col.a] * _K1 ^ hashes[col.b] * _K2)
        return "str", (h >> np.uint64(8)).astype(np.int64), np.ones(h.size, dtype=bool)
    numbers = {} if numbers is None else numbers
    for c in (col.a, col.b):
        if c not in numbers:
            v = frame[c]
            if v.dtype == np.float64:  # as it is (read only): no copy
                numbers[c] = v.to_numpy()
            elif isinstance(v.dtype, np.dtype) and v.dtype.kind in "iu":
                numbers[c] = v.to_numpy(np.float64)
            else:
                numbers[c] = pd.to_numeric(v, errors="coerce").to_numpy(np.float64,
                                                                       na_value=np.nan)
    a, b = numbers[col.a], numbers[col.b]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[col.op](a, b,
                                                                                 out=out)
    return "num", x, np.isfinite(x)
