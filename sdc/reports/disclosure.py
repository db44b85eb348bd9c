"""Disclosure-risk measures in sdcMicro's definitions (Templ, Kowarik & Meindl 2015), on whole
columns: sample and weighted frequencies ``fk``/``Fk`` (``freqCalc``), the Benedetti-Franconi
individual risk exactly as ``sdcMicro/R/indivRisk.R`` (``method = "approx"``), expected
re-identifications and global risk (``measure_risk``), k-anonymity violations and "higher risk
than the main part" records. Computed on the original file and on the released one taken as
true (an upper-bound style figure). A missing key value is one more category (``missing:
category``), not a wildcard as in sdcMicro. docs/REPORTS.md, "before, after".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from sdc.reports.exact import ExactSums, record_quantiles

__all__ = [
    "FREQUENCY_CLASSES",
    "K_ANONYMITY_LEVELS",
    "frequencies",
    "frequency_classes",
    "high_risk_count",
    "individual_risk",
    "k_anonymity",
    "measure_risk",
    "risk_summary",
    "risk_summary_cells",
]

#: Frequency classes of cells used in every report: (label, lowest t, highest t or None).
FREQUENCY_CLASSES: tuple[tuple[str, int, int | None], ...] = (
    ("1", 1, 1), ("2", 2, 2), ("3-4", 3, 4), ("5+", 5, None),
)
#: k of the k-anonymity counts.
K_ANONYMITY_LEVELS: tuple[int, ...] = (2, 3, 5)
#: thresholds for "records with individual risk above".
RISK_THRESHOLDS: tuple[float, ...] = (0.05, 0.1, 0.2, 0.5)


def frequencies(record_cell: np.ndarray, weights: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per record: ``fk`` (records in its cell) and ``Fk`` (sum of weights in its cell).

    ``record_cell`` holds integer cell ids 0..C-1. Without weights ``Fk = fk`` (as floats).
    Weights are summed per cell exactly in fixed point (:class:`sdc.reports.aggregate.ExactSums`,
    one pass, no sort), so the result does not depend on the row order of the file.
    """

    cell = np.asarray(record_cell, dtype=np.int64)
    n_cells = int(cell.max()) + 1 if cell.size else 0
    f = np.bincount(cell, minlength=n_cells)
    fk = f[cell]
    if weights is None:
        return fk, fk.astype(float)
    big_f = ExactSums.of(cell, np.asarray(weights, dtype=float), n_cells).values()
    return fk, big_f[cell]


def individual_risk(fk: np.ndarray, Fk: np.ndarray | None = None) -> np.ndarray:  # noqa: N803
    """sdcMicro's individual risk per record (``indivRisk``, method ``"approx"``).

    With ``Fk`` (weighted data), ``p = fk / Fk`` and

    ``r = p/(1-p) log(1/p)`` if fk = 1; ``r = p/(1-p) - (p/(1-p))^2 log(1/p)`` if fk = 2;
    ``r = p / (fk - (1 - p))`` if fk > 2; then ``r = 1/fk`` wherever ``fk == Fk``.

    Without ``Fk``: ``r = 1 / fk``. See the module docstring for the reference.
    """
    fk = np.asarray(fk, dtype=float)
    if Fk is None:
        return 1.0 / fk
    big_f = np.asarray(Fk, dtype=float)
    p = fk / big_f
    r = np.zeros_like(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        odds = p / (1.0 - p)
        log_inv = np.log(1.0 / p)
        r = np.where(fk > 2, p / (fk - (1.0 - p)), r)
        r = np.where(fk == 2, odds - odds**2 * log_inv, r)
        r = np.where(fk == 1, odds * log_inv, r)
    same = fk == big_f
    r[same] = 1.0 / fk[same]
    return r


def k_anonymity(fk: np.ndarray, weights: np.ndarray | None = None,
                levels: Sequence[int] = K_ANONYMITY_LEVELS) -> list[dict[str, Any]]:
    """Records violating k-anonymity (``fk < k``) for each k, with their share and weight sum."""
    fk = np.asarray(fk)
    n = fk.size
    out = []
    for k in levels:
        bad = fk < k
        row: dict[str, Any] = {"k": int(k), "records_violating": int(bad.sum()),
                               "share": float(bad.sum() / n) if n else 0.0,
                               "weighted_violating": None}
        if weights is not None:
            w = np.sort(np.asarray(weights, dtype=float)[bad])
            row["weighted_violating"] = float(w.sum())
        out.append(row)
    return out


def frequency_classes(cell_frequency: np.ndarray) -> list[dict[str, Any]]:
    """Cells and records by cell-frequency class 1, 2, 3-4, 5+.

    ``cells`` = number of non-empty cells with t in the class, ``records`` = sum of their t.
    """
    t = np.asarray(cell_frequency, dtype=np.int64)
    n = int(t.sum())
    out = []
    for label, lo, hi in FREQUENCY_CLASSES:
        sel = (t >= lo) & ((t <= hi) if hi is not None else True)
        rec = int(t[sel].sum())
        out.append({"class": label, "min": lo, "max": hi, "cells": int(sel.sum()),
                    "records": rec, "share_records": rec / n if n else 0.0})
    return out


def high_risk_count(risk: np.ndarray) -> int:
    """sdcMicro's "observations with higher risk than the main part of the data".

    ``sum(r > median(r) + 2 * mad(r) & r > 0.1)`` with R's ``mad`` = 1.4826 * median(|r - med|).
    """
    r = np.asarray(risk, dtype=float)
    if r.size == 0:
        return 0
    med = float(np.median(r))
    mad = 1.4826 * float(np.median(np.abs(r - med)))
    return int(((r > med + 2.0 * mad) & (r > 0.1)).sum())


def risk_summary(record_cell: np.ndarray, weights: np.ndarray | None, xi: float) -> dict[str, Any]:
    """Every sdcMicro-style figure of one file (original or released), aggregated.

    Returns counts by frequency class, sensitive cells (t < 1/xi), k-anonymity violations and
    the individual-risk aggregates (ER, global risk, max, quantiles, records above thresholds,
    sdcMicro's high-risk count, and sum of risks by fk class). No record-level value.

    fk, Fk and the individual risk are the same for every record of a cell, so everything is
    computed per cell (:func:`sdc.reports.aggregate.risk_summary_cells`) from one pass over
    the records: their count and exact weight sum per cell.
    """
    cell = np.asarray(record_cell, dtype=np.int64)
    n_cells = int(cell.max()) + 1 if cell.size else 0
    t = np.bincount(cell, minlength=n_cells)
    wsum = (ExactSums.of(cell, np.asarray(weights, dtype=float), n_cells)
            if weights is not None else None)
    return risk_summary_cells(t, wsum, xi)


def measure_risk(frame: pd.DataFrame, key_variables: Sequence[str],
                 weight: str | None = None) -> dict[str, Any]:
    """sdcMicro's ``measure_risk(data, keyVars, w)`` on a plain DataFrame.

    Returns ``{"fk", "Fk", "risk"}`` (per-record numpy arrays, in row order), and
    ``global_risk_ER``, ``global_risk``, ``global_risk_pct`` as in sdcMicro. Missing key values
    form their own category (see the module docstring). For library use and tests; the
    reports aggregate and never store the per-record arrays.
    """
    missing = [c for c in [*key_variables, *([weight] if weight else [])] if c not in frame.columns]
    if missing:
        raise KeyError(f"columns {missing} are not in the frame (it has {list(frame.columns)[:20]})")
    cell = frame.groupby(list(key_variables), dropna=False, sort=True).ngroup().to_numpy()
    w = frame[weight].to_numpy(dtype=float) if weight else None
    fk, big_f = frequencies(cell, w)
    r = individual_risk(fk, big_f if w is not None else None)
    er = float(np.sort(r).sum())
    n = len(frame)
    return {"fk": fk, "Fk": big_f, "risk": r, "global_risk_ER": er,
            "global_risk": er / n if n else 0.0, "global_risk_pct": 100.0 * er / n if n else 0.0}


def risk_summary_cells(cell_frequency: np.ndarray, cell_weight: ExactSums | None,
                       xi: float) -> dict[str, Any]:
    """:func:`risk_summary` computed on cells (same keys, same meaning).

    sdcMicro's ``fk``, ``Fk`` and individual risk are the same for every record of a cell, so
    a record-level aggregate is a cell-level aggregate weighted by ``t_j``: ``ER = sum_j t_j
    r_j``, the records above a threshold are ``sum t_j [r_j > th]``, and a record-level
    quantile (numpy's linear interpolation between order statistics) is read off the cells
    sorted by ``r_j`` with the cumulative counts of their records
    (:func:`sdc.reports.exact.record_quantiles`). Cost: O(C log C) in the number of cells.

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
