"""utility.json's ``expected_totals``: what each mode keeps, exactly, from the transition
probabilities (docs/METHOD.md 7.11; docs/REPORTS.md).

For every cell l the expected released weighted total E[W*_l] = sum_j W_j p_jl and count
E[S_l] = sum_j t_j p_jl (:func:`sdc.method.transition.expected_totals`) of the design the
release used (NZY's, the weighted mode's, uniform or near), on the cell table; no simulation. Reported: the
summed absolute difference from the original as a share of the total weight (of n for
counts), the largest, the same by category of every key variable (weighted figures withheld
for categories of fewer than ``numeric_min_group`` records, as everywhere in the reports), and
the PRBs with the largest summed difference (aggregates of a PRB's records).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdc.config.model import ReleaseConfig
from sdc.method.designs import design_of
from sdc.method.transition import CellDesign, expected_totals

__all__ = ["expected_totals_section", "transition_design", "weighted_totals_words"]

#: PRBs listed as the worst.
WORST = 10


def _design(result: Any) -> tuple[str, CellDesign]:
    mode = "weighted" if getattr(result, "weighted", None) is not None else "nzy"
    d = getattr(result, "design", None)
    plan = getattr(result, "plan", None)
    if d is None and plan is not None:
        if plan.weighted is not None:
            mode = "weighted"
        d = plan.cell_design()
    if d is None:
        theta = np.asarray(result.blocks["theta"], dtype=np.float64)
        prb = np.asarray(result.cell_prb, dtype=np.int64)
        t = np.asarray(result.cells.frequency)
        sens = prb >= 0
        move = np.zeros(prb.size)
        move[sens] = theta[prb[sens]] / t[sens]
        d = CellDesign(move, prb, np.zeros(prb.size + 1, dtype=np.int64),
                       np.zeros(0, dtype=np.int64), np.zeros(0))
    return mode, d


def _diff(x: np.ndarray, ex: np.ndarray, total: float) -> np.ndarray:
    """|E[X*_l] - X_l|, 0 below 1e-9 of the total (the rounding of an exact 0: NZY's counts)."""
    d = np.abs(ex - x)
    d[d <= 1e-9 * max(total, 1.0)] = 0.0
    return d


def _figures(x: np.ndarray, ex: np.ndarray, total: float) -> dict[str, Any]:
    d = _diff(x, ex, total)
    return {"total": float(total), "sum_abs_difference": float(d.sum()),
            "share": float(d.sum() / total) if total else 0.0,
            "max_abs_difference": float(d.max()) if d.size else 0.0,
            "cells_changed_in_expectation": int((d > 0).sum())}


def expected_totals_section(result: Any, config: ReleaseConfig, w_before: np.ndarray | None,
                            min_group: int) -> dict[str, Any]:
    """The ``expected_totals`` section of utility.json (module docstring). ``w_before``: W_j
    of every cell (None without a weight column)."""
    mode, design = _design(result)
    t = np.asarray(result.cells.frequency, dtype=np.float64)
    et = expected_totals(t, design)
    out: dict[str, Any] = {"mode": mode, "counts": _figures(t, et, float(t.sum())),
                           "weighted": None}
    # the plan's design (a result without a plan: the one its config picks)
    chosen = getattr(getattr(result, "plan", None), "design", None) or design_of(config)
    if chosen.near:
        out["destinations"] = "near"
    weighted = w_before is not None
    if weighted:
        W = np.asarray(w_before, dtype=np.float64)
        ew = expected_totals(W, design)
        out["weighted"] = _figures(W, ew, float(W.sum()))
    kc = result.cells.key_codes
    by_key = []
    for j, v in enumerate(config.key_names):
        kv = config.key_variables[v]
        values = list(kv.domain) + ([None] if kv.missing == "category" else [])
        codes = kc[:, j]
        o = np.bincount(codes, weights=t, minlength=kv.size)
        e = np.bincount(codes, weights=et, minlength=kv.size)
        if weighted:
            wo = np.bincount(codes, weights=W, minlength=kv.size)
            we = np.bincount(codes, weights=ew, minlength=kv.size)
        rows = []
        for c in np.flatnonzero(o > 0).tolist():
            row: dict[str, Any] = {"value": values[c], "original": int(o[c]),
                                   "expected": float(e[c])}
            small = o[c] < min_group
            row["weighted_original"] = None if not weighted or small else float(wo[c])
            row["weighted_expected"] = None if not weighted or small else float(we[c])
            rows.append(row)
        by_key.append({"name": v, "categories": rows})
    out["by_key_variable"] = by_key
    prb = np.asarray(result.cell_prb)
    sens = prb >= 0
    n_b = int(prb[sens].max()) + 1 if sens.any() else 0
    bias_t = np.bincount(prb[sens], weights=_diff(t, et, float(t.sum()))[sens], minlength=n_b)
    bias_w = (np.bincount(prb[sens], weights=_diff(W, ew, float(W.sum()))[sens], minlength=n_b)
              if weighted else np.zeros(n_b))
    recs = np.bincount(prb[sens], weights=t[sens], minlength=n_b)
    key = bias_w if weighted else bias_t
    worst = np.argsort(-key, kind="stable")[:WORST]
    labels = result.blocks["partition_key"].to_numpy()
    out["worst_prbs"] = [
        {"prb": int(b), "partition_key": str(labels[b]), "n_records": int(recs[b]),
         "weighted_sum_abs_difference": float(bias_w[b]) if weighted else None,
         "weighted_share": float(bias_w[b] / W.sum()) if weighted else None,
         "count_sum_abs_difference": float(bias_t[b])}
        for b in worst.tolist() if key[b] > 0]
    return out


def weighted_totals_words(expected: dict[str, Any] | None, weight: str | None, *,
                          public: bool = False) -> str | None:
    """What the design keeps of a weighted file's totals, in words, with utility.json's exact
    figures (``expected_totals``): the same sentence on the page, in the codebook and in the
    terminal. ``public``: the codebook's variant, the shares only (two decimals of a sum over
    every key combination), without the number of combinations. None for a file without a
    weight or without the exact figures."""
    if not expected or not weight or not expected.get("weighted"):
        return None
    w, c = expected["weighted"], expected.get("counts") or {}

    def over(n: int) -> str:
        return "" if public else f", summed over {n:,} key combinations"

    if expected.get("mode") == "weighted":
        kept = ("every survey-weighted total of the key variables is unbiased" if not
                w.get("cells_changed_in_expectation") else
                f"survey-weighted totals of the key variables are unbiased except in the "
                f"post-randomization blocks whose weights no group could balance (they keep "
                f"the unweighted design): there the expected weighted totals differ from the "
                f"original by {100 * w['share']:.2f}% of the total weight"
                f"{over(w['cells_changed_in_expectation'])}")
        drift = (f"; unweighted counts drift in expectation by {100 * c['share']:.2f}% of the "
                 f"records{over(c['cells_changed_in_expectation'])}"
                 if c.get("cells_changed_in_expectation") else "")
        return f"Released in weighted mode (survey weight \"{weight}\"): {kept}{drift} " \
               "(exact, from the design's transition probabilities)."
    return (f"This file carries a survey weight (\"{weight}\") but was released with the "
            f"unweighted design, which keeps unweighted counts unbiased, not weighted totals: "
            f"the expected weighted totals of the key combinations differ from the original "
            f"by {100 * w['share']:.2f}% of the total weight"
            f"{over(w['cells_changed_in_expectation'])} (exact, from the design's "
            f"transition probabilities); weighted estimates over the keys carry a bias of "
            f"that order. A new release series can opt in to weighted totals kept unbiased "
            f"with risk.weighted: true.")


def transition_design(result: Any) -> tuple[str, CellDesign]:
    """``(mode, design)``: the transition design a release used over its cell table (``nzy``
    or ``weighted``), as the expected totals read it; the codebook's misclassification
    section reads the same."""
    return _design(result)
