"""Pairs of released non-key columns (docs/METHOD.md, "Pairs of columns"): synthetic columns
fed to the same counter as the real ones, so every executor counts the same tables.

For two integer columns a, b: ``a + b`` and ``a - b`` (card's age = exper + educ + 6; a code
q - p = region); for any two discrete columns (integers, booleans, text, categories): their
joint value ``(a, b)`` hashed (a combined code of two columns). Each is checked in order
(:func:`sdc.method.dependence.measure.order_inform`: runs of bins whose records share one key
value), which needs no per-value table. Which columns pair is decided from the schema (the
column types, never the values of a batch): at most ``PAIR_COLUMNS`` columns, in input order;
the pairs of the columns beyond are not checked and the release says so (:meth:`PairPlan.warning`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sdc.method.draws import fmix64

__all__ = ["PAIR_COLUMNS", "PairPlan", "SyntheticColumn", "frame_kinds", "pair_image",
           "pair_plan", "schema_kinds"]

#: at most this many columns are paired (66 pairs; two integer columns give 3 synthetic
#: columns, a + b, a - b and (a, b), any other two discrete ones 1: at most 198 ordered tables,
#: ~40 ns per record each): the count pass's cost of the pairs is bounded whatever the width
PAIR_COLUMNS = 12
_K1 = np.uint64(0x9E3779B97F4A7C15)
_K2 = np.uint64(0xC2B2AE3D27D4EB4F)


@dataclass(frozen=True)
class SyntheticColumn:
    """``a op b``: op ``+`` or ``-`` (integer columns) or ``&`` (the joint value)."""

    op: str
    a: str
    b: str

    @property
    def name(self) -> str:
        return f"({self.a}, {self.b})" if self.op == "&" else f"{self.a} {self.op} {self.b}"

    @property
    def key(self) -> str:
        """The counter's name of its table (never an input column's name)."""
        return f"\x00{self.op}\x00{self.a}\x00{self.b}"


@dataclass(frozen=True)
class PairPlan:
    """The synthetic columns the count pass feeds, and the discrete columns left unpaired."""

    columns: tuple[SyntheticColumn, ...] = ()
    paired: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()

    def warning(self) -> str | None:
        """The release's warning when some pairs are not checked (None: every pair is)."""
        if not self.left_out:
            return None
        n = len(self.paired) + len(self.left_out)
        unchecked = n * (n - 1) // 2 - len(self.paired) * (len(self.paired) - 1) // 2
        return (f"dependence check: {unchecked} pair(s) of released columns not checked: the "
                f"pairs of {', '.join(self.left_out)} (the check pairs the first "
                f"{PAIR_COLUMNS} integer or discrete non-key columns, in input order; "
                "see docs/METHOD.md, 'Pairs of columns'). Drop or key the columns that "
                "do not matter, or move the ones to check to the front")


def _kind(t: Any) -> str | None:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        return "discrete"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_boolean(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        return "discrete"
    return None


def schema_kinds(schema: Any) -> dict[str, str]:
    """``{column: "integer" | "discrete"}`` of an Arrow schema (the columns that may pair)."""
    return {f.name: k for f in schema if (k := _kind(f.type)) is not None}


def frame_kinds(frame: pd.DataFrame) -> dict[str, str]:
    """:func:`schema_kinds` of a frame (``sdc.release_frame``, ``sdc audit``): integer dtypes,
    booleans, text and categories."""
    out = {}
    for c in frame.columns:
        d = frame[c].dtype
        if isinstance(d, pd.CategoricalDtype) or d.kind in "bOSU" or pd.api.types.is_string_dtype(d):
            out[str(c)] = "discrete"
        elif d.kind in "iu":
            out[str(c)] = "integer"
    return out


def pair_plan(checked: list[str], kinds: Mapping[str, str], config: Any) -> PairPlan:
    """The synthetic columns of ``checked`` (the checked non-key columns, in input order):
    the first ``PAIR_COLUMNS`` of the integer or discrete ones (not the weight) pair."""
    weight = getattr(config.input, "weight", None)
    cand = [c for c in checked if kinds.get(c) is not None and c != weight]
    use, rest = cand[:PAIR_COLUMNS], cand[PAIR_COLUMNS:]
    out = []
    for i, a in enumerate(use):
        for b in use[i + 1:]:
            if kinds[a] == "integer" and kinds[b] == "integer":
                out += [SyntheticColumn("+", a, b), SyntheticColumn("-", a, b)]
            out.append(SyntheticColumn("&", a, b))
    return PairPlan(tuple(out), tuple(use), tuple(rest))


def pair_image(frame: pd.DataFrame, col: SyntheticColumn,
               hashes: Mapping[str, np.ndarray]) -> tuple[str, np.ndarray, np.ndarray]:
    """The order image of a synthetic column on a batch: ``("num", a +- b, valid)`` or
    ``("str", 56-bit hash of (a, b), valid)`` (``hashes``: the batch's value hashes)."""
    if col.op == "&":
        h = fmix64(hashes[col.a] * _K1 ^ hashes[col.b] * _K2)
        return "str", (h >> np.uint64(8)).astype(np.int64), np.ones(h.size, dtype=bool)
    a = pd.to_numeric(frame[col.a], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    b = pd.to_numeric(frame[col.b], errors="coerce").to_numpy(np.float64, na_value=np.nan)
    x = a + b if col.op == "+" else a - b
    return "num", x, np.isfinite(x)
