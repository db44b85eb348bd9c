"""``derived:`` columns: non-key columns recomputed from the released key values.

A column that is a function of the key variables (``expersq`` of ``exper``, a region name of
its code) would give a moved record's original key values away if it were released unchanged
(:mod:`sdc.method.dependence`). Listed under ``derived:``, it is released as the mapping
observed in the input applied to the record's **released** cell: a moved record gets the
value every original record of its released cell has. The mapping must be a function of the
cell (one value per non-empty cell, compared by :func:`sdc.method.draws.value_hash`);
otherwise the release is refused (exit 2).

The mapping is built from aggregates: per cell, the first record's value and the set of value
hashes (:class:`DerivedCollector`, mergeable over batches and Dask pieces), O(cells) per
column, never O(records).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sdc.errors import InputError
from sdc.method.draws import value_hash

__all__ = ["DerivedCollector", "DerivedError", "apply_derived", "cell_describer", "derived_values"]


class DerivedError(InputError):
    """A ``derived:`` column is not a function of the key values (exit 2)."""


def _first_per_cell(cell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    u, first = np.unique(cell, return_index=True)
    return u, first


@dataclass
class DerivedCollector:
    """Per derived column: (cell id, value hash) pairs made distinct, and the first value of
    every cell. ``add`` per batch, ``merge`` partial collectors, :meth:`values` at the end."""

    columns: list[str]
    _pairs: dict[str, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)
    _firsts: dict[str, list[tuple[np.ndarray, pd.Series]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for c in self.columns:
            self._pairs.setdefault(c, [])
            self._firsts.setdefault(c, [])

    def add(self, frame: pd.DataFrame, cell_id: np.ndarray) -> None:
        cell_id = np.asarray(cell_id, dtype=np.int64)
        u, first = _first_per_cell(cell_id)
        for c in self.columns:
            h = value_hash(frame[c]).view(np.int64)
            self._pairs[c].append(_distinct_pairs(cell_id, h))
            self._firsts[c].append((u, frame[c].iloc[first].reset_index(drop=True)))
        self._compact()

    def merge(self, other: DerivedCollector) -> None:
        for c in self.columns:
            self._pairs[c].extend(other._pairs.get(c, []))
            self._firsts[c].extend(other._firsts.get(c, []))
        self._compact()

    def _compact(self) -> None:
        for c in self.columns:
            if len(self._pairs[c]) > 8:
                self._pairs[c] = [_distinct_pairs(np.concatenate([p[0] for p in self._pairs[c]]),
                                                  np.concatenate([p[1] for p in self._pairs[c]]))]
            if len(self._firsts[c]) > 8:
                self._firsts[c] = [_first_of(self._firsts[c])]

    def values(self, column: str, cell_ids: np.ndarray, describe) -> pd.Series:
        """The value of ``column`` for every cell of ``cell_ids`` (sorted cell ids of the cell
        table, in cell order). Raises :class:`DerivedError` when a cell has two values;
        ``describe(cell_position)`` names a cell's key values for the message."""
        parts = self._pairs[column]
        cells, _ = _distinct_pairs(np.concatenate([p[0] for p in parts]),
                                   np.concatenate([p[1] for p in parts])) if parts else (
            np.zeros(0, np.int64), None)
        u, n = np.unique(cells, return_counts=True)
        bad = u[n > 1]
        if bad.size:
            pos = np.searchsorted(cell_ids, bad[:3])
            examples = "; ".join(describe(int(p)) for p in pos)
            raise DerivedError(
                f"derived column {column!r} is not a function of the key values: "
                f"{bad.size} non-empty cell(s) hold more than one value of it (e.g. {examples}), "
                "so it cannot be recomputed from the released keys. Drop it (input.drop) or make "
                "it a key variable")
        codes, vals = _first_of(self._firsts[column])
        idx = np.searchsorted(codes, cell_ids)
        return vals.take(idx).reset_index(drop=True)


def _distinct_pairs(cell: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not cell.size:
        return cell, h
    order = np.lexsort((h, cell))
    c, v = cell[order], h[order]
    keep = np.r_[True, (c[1:] != c[:-1]) | (v[1:] != v[:-1])]
    return c[keep], v[keep]


def _first_of(parts: list[tuple[np.ndarray, pd.Series]]) -> tuple[np.ndarray, pd.Series]:
    codes = np.concatenate([p[0] for p in parts])
    vals = pd.concat([p[1] for p in parts], ignore_index=True)
    u, first = np.unique(codes, return_index=True)  # first occurrence: the earliest batch
    return u, vals.iloc[first].reset_index(drop=True)


def derived_values(frame: pd.DataFrame, record_cell: np.ndarray, n_cells: int,
                   config: Any, describe) -> dict[str, pd.Series]:
    """The pandas engine's mapping: value of every ``derived:`` column per cell index."""
    cols = list(getattr(config, "derived", []) or [])
    if not cols:
        return {}
    col = DerivedCollector(cols)
    col.add(frame, record_cell)
    return {c: col.values(c, np.arange(n_cells, dtype=np.int64), describe) for c in cols}


def apply_derived(out: pd.DataFrame, record_cell: np.ndarray, released_cell: np.ndarray,
                  derived: dict[str, pd.Series]) -> pd.DataFrame:
    """Give every moved record of ``out`` the derived values of its released cell (records
    that did not move keep their own value, which is the same by construction)."""
    moved = np.flatnonzero(released_cell != record_cell)
    if not derived or not moved.size:
        return out
    for c, values in derived.items():
        col = out[c].copy()
        new = values.take(released_cell[moved]).astype(col.dtype)
        col.iloc[moved] = new.array
        out[c] = col
    return out


def cell_describer(key_codes: np.ndarray, config: Any):
    """``describe(cell)`` -> "age=30, sex='F'" for messages (cell = row of ``key_codes``)."""
    names = config.key_names

    def describe(j: int) -> str:
        parts = []
        for i, n in enumerate(names):
            dom = config.key_variables[n].domain
            code = int(key_codes[j, i])
            parts.append(f"{n}={dom[code]!r}" if code < len(dom) else f"{n}=<missing>")
        return ", ".join(parts)

    return describe
