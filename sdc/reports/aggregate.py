"""Report figures from aggregates: exact weighted sums, per-cell risk and group summaries.

The reports (``risk.json``, ``utility.json``) are functions of the engine's cell table
(``t_j``, the key codes of every non-empty cell), of the released cell of every record and of
the partition sets. This module computes them on those aggregates - a few hundred thousand
cells at most - instead of re-scanning the records once per figure. What needs records at all
is done in one pass each: the weight sums per cell (before and after) and the numeric
summaries per category.

Exact, order-independent weighted sums
--------------------------------------
A float sum depends on the order of its terms, and the release must not depend on the input's
row order. Instead of sorting before every sum, :class:`ExactSums` rounds every weight once to
a fixed-point integer ``q_i = rint(w_i 2^s)`` and accumulates the integers exactly, in two
limbs of ``b`` bits that ``np.bincount`` (float64) adds without any rounding:

* ``b = 53 - ceil(log2(n + 1))``, so a sum of n numbers below ``2^b`` in magnitude stays below
  ``2^53``, where float64 holds every integer exactly;
* ``s = 2b - 1 - E`` with ``max|w| < 2^E``, so ``|q_i| < 2^(2b-1)``;
* ``q_i = hi_i 2^b + lo_i`` with ``hi_i = floor(q_i / 2^b)``, ``0 <= lo_i < 2^b``; both limbs
  and every partial sum of them are exact integers in float64;
* a sum is ``(sum hi 2^b + sum lo) 2^-s``: one rounding at the very end.

Sums of the limbs over cells can be regrouped again (cells -> categories, cells -> classes)
and stay exact, because every group total is bounded by the total over all records. The
result is a function of the multiset of (group, weight) pairs only. Precision: each weight is
rounded to a multiple of ``2^-s``, an absolute error of at most ``max|w| 2^-(2b-1)`` per
record; for n up to 5 * 10^6 (b = 30) that is ``max|w| 2^-59``, below the float64 spacing of
the largest weight, so sums agree with an exact (math.fsum) sum to about 1e-15 relative.

Per-cell disclosure measures
----------------------------
sdcMicro's ``fk``, ``Fk`` and individual risk are the same for every record of a cell, so a
record-level aggregate is a cell-level aggregate weighted by ``t_j``: ``ER = sum_j t_j r_j``,
the number of records above a threshold is ``sum t_j [r_j > th]``, and a record-level quantile
(numpy's linear interpolation between order statistics) is read off the cells sorted by
``r_j`` with the cumulative counts of their records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sdc.reports.disclosure import (
    FREQUENCY_CLASSES,
    K_ANONYMITY_LEVELS,
    RISK_THRESHOLDS,
    frequency_classes,
    individual_risk,
)

__all__ = [
    "ExactSums",
    "GroupSummary",
    "ReleaseAggregates",
    "partition_set_rows",
    "group_summaries",
    "record_quantiles",
    "risk_summary_cells",
]


@dataclass(frozen=True)
class ExactSums:
    """Exact fixed-point sums of a weight per group (see the module docstring).

    Attributes
    ----------
    hi, lo : (G,) float64
        The two limbs of the integer sums, each an exact integer below 2^53 in magnitude.
    bits : int
        b, the limb width.
    scale : int
        s: the sums are ``(hi 2^b + lo) 2^-s``.
    """

    hi: np.ndarray
    lo: np.ndarray
    bits: int
    scale: int

    @staticmethod
    def params(n: int, max_abs: float) -> tuple[int, int]:
        """(b, s) for n terms whose magnitude is at most ``max_abs``."""
        b = 53 - int(np.ceil(np.log2(n + 1))) if n > 0 else 52
        if not np.isfinite(max_abs):
            raise ValueError("weights must be finite for exact sums")
        exp = int(np.frexp(max_abs)[1]) if max_abs > 0 else 0  # max_abs < 2^exp
        return b, min(2 * b - 1 - exp, 1000)  # 2^s stays a finite float

    @staticmethod
    def limbs(weights: np.ndarray, params: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """``(hi, lo)``: every weight as ``rint(w 2^s) = hi 2^b + lo``, both exact in float64.

        Multiplying by a power of two is exact (no overflow: ``|w| 2^s < 2^(2b-1)``); the
        rounded products are integers, and so are their floor division by ``2^b`` and the
        remainder, which lies in ``[0, 2^b)``.
        """
        b, s = params
        q = np.rint(np.asarray(weights, dtype=np.float64) * 2.0**s)
        hi = np.floor(q * 2.0**-b)
        lo = q - hi * 2.0**b
        return hi, lo

    @classmethod
    def of(cls, codes: np.ndarray, weights: np.ndarray | None, size: int, *,
           params: tuple[int, int] | None = None,
           limbs: tuple[np.ndarray, np.ndarray] | None = None) -> ExactSums:
        """Sums of ``weights`` per code 0..size-1 (one pass, no sort).

        ``params`` = ``(b, s)`` from :meth:`params`; by default from ``len(weights)`` and
        ``max|weights|``. Sums that will be compared or combined must share their params.
        ``limbs`` = :meth:`limbs` of the weights under ``params``, when several groupings of
        the same weights are summed (then ``weights`` may be None).
        """
        codes = np.asarray(codes)
        if params is None:
            w = np.asarray(weights, dtype=np.float64)
            params = cls.params(w.size, float(np.abs(w).max(initial=0.0)))
        hi, lo = limbs if limbs is not None else cls.limbs(weights, params)
        return cls(np.bincount(codes, weights=hi, minlength=size),
                   np.bincount(codes, weights=lo, minlength=size), params[0], params[1])

    def regroup(self, codes: np.ndarray, size: int) -> ExactSums:
        """Sums over groups of groups: ``codes[g]`` is the new group of old group g (exact)."""
        return ExactSums(np.bincount(codes, weights=self.hi, minlength=size),
                         np.bincount(codes, weights=self.lo, minlength=size),
                         self.bits, self.scale)

    def __getitem__(self, index: Any) -> ExactSums:
        return ExactSums(self.hi[index], self.lo[index], self.bits, self.scale)

    def total(self) -> float:
        """The sum over all groups (exact up to the final rounding)."""
        return float((self.hi.sum() * 2.0**self.bits + self.lo.sum()) * 2.0**-self.scale)

    def values(self) -> np.ndarray:
        """The sums as float64: ``(hi 2^b + lo) 2^-s``, rounded once."""
        return (self.hi * 2.0**self.bits + self.lo) * 2.0**-self.scale


# --------------------------------------------------------------------------------------------
# record-level quantiles from weighted values
# --------------------------------------------------------------------------------------------
def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's interpolation between order statistics (``np.quantile``'s ``_lerp``)."""
    diff = b - a
    return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)


def record_quantiles(values: np.ndarray, counts: np.ndarray, qs: list[float]) -> list[float]:
    """``np.quantile(np.repeat(values, counts), qs)`` without repeating anything.

    The value of order statistic k is found among the values sorted, by the cumulative counts.
    """
    counts = np.asarray(counts, dtype=np.int64)
    keep = counts > 0
    v, c = np.asarray(values, dtype=float)[keep], counts[keep]
    n = int(c.sum())
    if n == 0:
        return [float("nan")] * len(qs)
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(c[order])

    def stat(k: np.ndarray) -> np.ndarray:
        return v[np.searchsorted(cum, k, side="right")]

    pos = np.asarray(qs, dtype=float) * (n - 1)
    lo = np.floor(pos)
    hi = np.minimum(lo + 1, n - 1)
    return [float(x) for x in _lerp(stat(lo), stat(hi), pos - lo)]


# --------------------------------------------------------------------------------------------
# sdcMicro measures per cell
# --------------------------------------------------------------------------------------------
def risk_summary_cells(cell_frequency: np.ndarray, cell_weight: ExactSums | None,
                       xi: float) -> dict[str, Any]:
    """:func:`sdc.disclosure.risk_summary` computed on cells (same keys, same meaning).

    Parameters
    ----------
    cell_frequency : (C,) int
        Records per cell (``fk``); cells with 0 records (empty after release) are ignored.
    cell_weight : ExactSums or None
        Sum of the weights per cell (``Fk``), or None for an unweighted file (``Fk = fk``).
    xi : float
        The risk threshold (sensitive cells have ``t < 1/xi``).
    """
    t_all = np.asarray(cell_frequency, dtype=np.int64)
    keep = t_all > 0
    t = t_all[keep]
    wsum = cell_weight[keep] if cell_weight is not None else None
    n = int(t.sum())
    big_f = wsum.values() if wsum is not None else None
    r = individual_risk(t, big_f)  # per cell; every record of the cell has this risk
    rt = r * t
    er = float(rt.sum())
    sens = t * xi < 1.0
    by_class = []
    for label, lo, hi in FREQUENCY_CLASSES:
        sel = (t >= lo) & ((t <= hi) if hi is not None else True)
        rec = int(t[sel].sum())
        srisk = float(rt[sel].sum())
        by_class.append({"class": label, "records": rec, "sum_risk": srisk,
                         "mean_risk": srisk / rec if rec else None})
    k_anon = []
    for k in K_ANONYMITY_LEVELS:
        bad = t < k
        nb = int(t[bad].sum())
        k_anon.append({"k": int(k), "records_violating": nb, "share": nb / n if n else 0.0,
                       "weighted_violating": wsum[bad].total() if wsum is not None else None})
    if n:
        q50, q90, q99 = record_quantiles(r, t, [0.5, 0.9, 0.99])
        med = q50
        mad = 1.4826 * record_quantiles(np.abs(r - med), t, [0.5])[0]
        high = int(t[(r > med + 2.0 * mad) & (r > 0.1)].sum())
    else:
        q50 = q90 = q99 = float("nan")
        high = 0
    return {
        "n_records": n,
        "n_cells": int(t.size),
        "frequency_classes": frequency_classes(t),
        "sensitive": {"threshold": 1.0 / xi, "cells": int(sens.sum()),
                      "records": int(t[sens].sum())},
        "k_anonymity": k_anon,
        "sdcmicro": {
            "weighted": wsum is not None,
            "expected_reidentifications": er,
            "global_risk": er / n if n else 0.0,
            "global_risk_pct": 100.0 * er / n if n else 0.0,
            "max_individual_risk": float(r.max()) if n else 0.0,
            "quantiles": {"p50": q50, "p90": q90, "p99": q99},
            "records_risk_above": [{"threshold": th, "records": int(t[r > th].sum())}
                                   for th in RISK_THRESHOLDS],
            "high_risk_records": high,
            "by_fk_class": by_class,
        },
    }


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
    """Stable argsort of group codes: radix sort (linear) when the codes fit 16 bits."""
    if size <= np.iinfo(np.uint16).max + 1:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    return np.argsort(codes, kind="stable")


def group_summaries(sorted_values: np.ndarray, codes_in_value_order: list[np.ndarray],
                    sizes: list[int], params: tuple[int, int]) -> list[GroupSummary]:
    """Mean and quartiles (pandas' linear interpolation) of one variable per group code, for
    several groupings of the same values.

    ``sorted_values`` are the non-missing values in ascending order (one ``argsort`` per
    variable, shared by every grouping); ``codes_in_value_order[g]`` the group code of each of
    them under grouping g (codes 0..sizes[g]-1). Each grouping costs one stable sort of
    its codes (radix, linear in n, when ``sizes[g] <= 65536``), after which the values of every
    group are consecutive and ascending. Means use :class:`ExactSums` with ``params``, so they
    do not depend on the row order either.
    """
    out = []
    x = sorted_values
    limbs = ExactSums.limbs(x, params)
    for codes, size in zip(codes_in_value_order, sizes, strict=True):
        perm = _sort_codes(codes, size)
        v = x[perm]
        n = np.bincount(codes, minlength=size)
        start = np.concatenate(([0], np.cumsum(n)[:-1]))
        sums = ExactSums.of(codes, None, size, params=params, limbs=limbs).values()
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(n > 0, sums / np.maximum(n, 1), np.nan)
        qv = []
        for q in (0.25, 0.5, 0.75):
            pos = q * (np.maximum(n, 1) - 1)
            lo = np.floor(pos).astype(np.int64)
            hi = np.minimum(lo + 1, np.maximum(n, 1) - 1)
            frac = pos - lo
            if v.size:
                a = v[np.minimum(start + lo, v.size - 1)]
                b = v[np.minimum(start + hi, v.size - 1)]
                val = a + (b - a) * frac  # pandas' group_quantile (linear)
            else:
                val = np.full(size, np.nan)
            qv.append(np.where(n > 0, val, np.nan))
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
        Original and released cell of every record whose key values changed.
    params : (b, s)
        The fixed-point parameters of the weight sums.
    """

    t_before: np.ndarray
    t_after: np.ndarray
    w_before: ExactSums | None
    w_after: ExactSums | None
    moved_from: np.ndarray
    moved_to: np.ndarray
    params: tuple[int, int] | None

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
            limbs = ExactSums.limbs(w, params)
            wb = ExactSums.of(rec, None, n_cells, params=params, limbs=limbs)
            wa = ExactSums.of(rel, None, n_cells, params=params, limbs=limbs)
        return cls(t_before, t_after, wb, wa, rec[moved], rel[moved], params)

    @property
    def n_changed(self) -> int:
        return int(self.moved_from.size)


def partition_set_rows(result: Any, agg: ReleaseAggregates, xi: float) -> list[dict[str, Any]]:
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
