"""Report figures from aggregates: the release's cell counts, weight sums and group summaries.

The reports (``risk.json``, ``utility.json``) are functions of the engine's cell table
(``t_j``, the key codes of every non-empty cell), of the released cell of every record and of
the partition sets. This module computes them on those aggregates - a few hundred thousand
cells at most - instead of re-scanning the records once per figure. What needs records at all
(the released-cell counts, the weight sums per cell before and after, the numeric summaries
per category) is summed by :class:`sdc.reports.accumulate.ReleaseAccumulator`, on every
engine: in batches, or on the whole frame as one batch (:func:`sdc.reports.accumulate.
frame_accumulator`).

Exact sums
----------
Weighted figures use the exact fixed-point sums of :mod:`sdc.reports.exact` (no sort, no
dependence on the row order). sdcMicro's measures per cell are in
:func:`sdc.reports.disclosure.risk_summary_cells`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sdc.method.outcome import ReleaseOutcome
from sdc.reports.exact import ExactSums

__all__ = ["GroupSummary", "ReleaseAggregates", "partition_set_rows"]


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
        Every distinct (original cell, released cell) pair of the records whose key values
        changed.
    params : (b, s)
        The fixed-point parameters of the weight sums.
    moved_count : (m,) int64
        Records per (moved_from, moved_to) pair.
    """

    t_before: np.ndarray
    t_after: np.ndarray
    w_before: ExactSums | None
    w_after: ExactSums | None
    moved_from: np.ndarray
    moved_to: np.ndarray
    params: tuple[int, int] | None
    moved_count: np.ndarray

    @property
    def moved_weights(self) -> np.ndarray:
        """Records per entry of ``moved_from`` / ``moved_to``."""
        return self.moved_count

    @property
    def n_changed(self) -> int:
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
