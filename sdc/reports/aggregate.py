"""Report figures from aggregates: the release's cell counts, weight sums and group summaries.

The reports (``risk.json``, ``utility.json``) are functions of the engine's cell table
(``t_j``, the key codes of every non-empty cell), of the released cell of every record and of
the partition sets. This module computes them on those aggregates - a few hundred thousand
cells at most - instead of re-scanning the records once per figure. What needs records at all
is done in one pass each: the weight sums per cell (before and after) and the numeric
summaries per category.

Exact sums
----------
Weighted figures use the exact fixed-point sums of :mod:`sdc.reports.exact` (no sort, no
dependence on the row order). sdcMicro's measures per cell are in
:func:`sdc.reports.disclosure.risk_summary_cells`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sdc.method.outcome import ReleaseOutcome
from sdc.reports.exact import ExactSums

__all__ = ["GroupSummary", "ReleaseAggregates", "group_summaries", "partition_set_rows"]


# --------------------------------------------------------------------------------------------
# numeric summaries per category
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GroupSummary:
    """Count, mean and quartiles of a numeric variable per group code (all groups 0..G-1)."""

    n: np.ndarray
    mean: np.ndarray
    q1: np.ndarray
    median: np.ndarray
    q3: np.ndarray


def _sort_codes(codes: np.ndarray, size: int) -> np.ndarray:
    """Stable argsort of group codes: radix sort (linear) when the codes fit 16 bits (one byte
    pass instead of two when they fit 8 bits)."""
    if size <= np.iinfo(np.uint8).max + 1:
        return np.argsort(codes.astype(np.uint8, copy=False), kind="stable")
    if size <= np.iinfo(np.uint16).max + 1:
        return np.argsort(codes.astype(np.uint16, copy=False), kind="stable")
    return np.argsort(codes, kind="stable")


def group_summaries(sorted_values: np.ndarray, codes_in_value_order: Iterable[np.ndarray],
                    sizes: list[int], group_sums: Iterable[np.ndarray]) -> list[GroupSummary]:
    """Mean and quartiles (pandas' linear interpolation) of one variable per group code, for
    several groupings of the same values.

    ``sorted_values`` are the non-missing values in ascending order (one ``argsort`` per
    variable, shared by every grouping); ``codes_in_value_order[g]`` the group code of each of
    them under grouping g (codes 0..sizes[g]-1); ``group_sums[g]`` the sum of the values per
    group (the caller sums them exactly per cell and regroups the cells, see
    :class:`ExactSums`). Each grouping costs one stable sort of its codes (radix, linear in n,
    when ``sizes[g] <= 65536``), after which the values of every group are consecutive and
    ascending. Only the (at most 6) values each group's quartiles interpolate between are
    gathered, never the whole permuted column. The iterables may be generators: one grouping's
    codes are in memory at a time.
    """
    out = []
    x = sorted_values
    for codes, size, sums in zip(codes_in_value_order, sizes, group_sums, strict=True):
        perm = _sort_codes(codes, size)
        n = np.bincount(codes, minlength=size)
        start = np.concatenate(([0], np.cumsum(n)[:-1]))
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, sums / np.maximum(n, 1), np.nan)
        qv = []
        for q in (0.25, 0.5, 0.75):
            pos = q * (np.maximum(n, 1) - 1)
            lo = np.floor(pos).astype(np.int64)
            hi = np.minimum(lo + 1, np.maximum(n, 1) - 1)
            frac = pos - lo
            if x.size:
                a = x[perm[np.minimum(start + lo, x.size - 1)]]
                b = x[perm[np.minimum(start + hi, x.size - 1)]]
                val = a + (b - a) * frac  # pandas' group_quantile (linear)
            else:
                val = np.full(size, np.nan)
            qv.append(np.where(n > 0, val, np.nan))
        del perm
        out.append(GroupSummary(n, mean, qv[0], qv[1], qv[2]))
    return out


# --------------------------------------------------------------------------------------------
# the release's aggregates, shared by risk.json and utility.json
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReleaseAggregates:
    """Everything the reports need from the records, computed once per release.

    Attributes
    ----------
    t_before, t_after : (C,) int64
        Records per cell of the original file (t_j) and of the released file
        (``bincount(released_cell)``; PRAM only moves records between existing cells).
    w_before, w_after : ExactSums or None
        Sum of the weights per cell, before and after (None without a weight column).
    moved_from, moved_to : (m,) int64
        Original and released cell of every record whose key values changed (or, with
        ``moved_count``, of every distinct (from, to) pair).
    params : (b, s)
        The fixed-point parameters of the weight sums.
    moved_count : (m,) int64 or None
        Records per (moved_from, moved_to) pair (the batch engines' form); None: one each.
    """

    t_before: np.ndarray
    t_after: np.ndarray
    w_before: ExactSums | None
    w_after: ExactSums | None
    moved_from: np.ndarray
    moved_to: np.ndarray
    params: tuple[int, int] | None
    moved_count: np.ndarray | None = None

    @classmethod
    def of(cls, result: Any, weights: np.ndarray | None) -> ReleaseAggregates:
        """One pass over the records: released-cell counts, weight sums, moved records."""
        cells = result.cells
        rec, rel = np.asarray(cells.record_cell), np.asarray(result.released_cell)
        n_cells = int(cells.key_codes.shape[0])
        t_before = np.bincount(rec, minlength=n_cells).astype(np.int64)
        t_after = np.bincount(rel, minlength=n_cells).astype(np.int64)
        moved = np.flatnonzero(rel != rec)
        wb = wa = params = None
        if weights is not None:
            w = np.asarray(weights, dtype=np.float64)
            params = ExactSums.params(w.size, float(np.abs(w).max(initial=0.0)))
            wb, wa = ExactSums.each([rec, rel], w, n_cells, params=params)
        return cls(t_before, t_after, wb, wa, rec[moved], rel[moved], params)

    @property
    def moved_weights(self) -> np.ndarray:
        """Records per entry of ``moved_from`` / ``moved_to``."""
        if self.moved_count is None:
            return np.ones(self.moved_from.size, dtype=np.int64)
        return self.moved_count

    @property
    def n_changed(self) -> int:
        if self.moved_count is None:
            return int(self.moved_from.size)
        return int(self.moved_count.sum())


def partition_set_rows(result: ReleaseOutcome, agg: ReleaseAggregates, xi: float) -> list[dict[str, Any]]:
    """risk.json's ``partition_sets``: before from the engine, after from the released cells
    (a released record's partition set is its released cell's)."""
    ps = result.partition_sets
    n_ps = len(ps)
    cps = np.asarray(result.cell_partition_set)
    t = agg.t_after
    present = t > 0
    sens = present & (t * xi < 1.0)
    a_rec = np.bincount(cps, weights=t, minlength=n_ps).astype(np.int64)
    a_cells = np.bincount(cps[present], minlength=n_ps)
    a_sc = np.bincount(cps[sens], minlength=n_ps)
    a_sr = np.bincount(cps[sens], weights=t[sens], minlength=n_ps).astype(np.int64)
    cols = {c: ps[c].to_numpy() for c in ("partition_set", "partition_key", "prb", "n_records",
                                          "n_cells", "n_sensitive_cells",
                                          "n_sensitive_records")}
    rows = []
    for i in range(n_ps):
        s = int(cols["partition_set"][i])
        prb = int(cols["prb"][i])
        rows.append({
            "partition_set": s,
            "partition_key": str(cols["partition_key"][i]),
            "prb": prb if prb >= 0 else None,
            "n_records": int(cols["n_records"][i]),
            "n_records_after": int(a_rec[s]),
            "cells_before": int(cols["n_cells"][i]),
            "cells_after": int(a_cells[s]),
            "sensitive_cells_before": int(cols["n_sensitive_cells"][i]),
            "sensitive_records_before": int(cols["n_sensitive_records"][i]),
            "sensitive_cells_after": int(a_sc[s]),
            "sensitive_records_after": int(a_sr[s]),
        })
    return rows
