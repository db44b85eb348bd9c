"""Analyses of an income survey on the household table (``utility.household_income``,
utility.json ``households.survey``; issue 44): what an income and living-conditions survey is
published for, original against released, in standard errors.

From one row per household (every executor has it: the count pass's aggregate): its
equivalised income y_h (a household column), size n_h, weight w_h (the household weight, or
the members' mean weight) before and after the release, and its household-key values before
and after. Persons are weighted n_h w_h (every member carries the household's equivalised
income, as Eurostat's indicators do):

- **at-risk-of-poverty rate**: the weighted share of persons with y below 60% of the weighted
  median of y (the threshold recomputed on each file);
- **mean equivalised income**;
- both overall and per value of every household key, with the standard error of the original
  estimate over households (linearization, households as the units, the threshold taken as
  fixed), and z = (released - original) / SE;
- the **Gini coefficient** of y (weighted), original and released.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["gini", "household_survey_figures", "poverty_threshold"]


def _weighted_median(y: np.ndarray, x: np.ndarray) -> float:
    i = np.argsort(y, kind="stable")
    c = np.cumsum(x[i])
    return float(y[i][np.searchsorted(c, 0.5 * c[-1])]) if c.size and c[-1] > 0 else float("nan")


def poverty_threshold(y: np.ndarray, x: np.ndarray) -> float:
    """60% of the weighted median of ``y`` (persons weighted ``x``)."""
    return 0.6 * _weighted_median(np.asarray(y, float), np.asarray(x, float))


def gini(y: np.ndarray, x: np.ndarray) -> float:
    """The weighted Gini coefficient of ``y`` (weights ``x``): 1 - sum_i x_i (S_{i-1} + S_i) /
    (X S_n) over the values in ascending order, S the cumulated x y."""
    y, x = np.asarray(y, float), np.asarray(x, float)
    i = np.argsort(y, kind="stable")
    y, x = y[i], x[i]
    s = np.cumsum(x * y)
    if not s.size or s[-1] <= 0:
        return float("nan")
    prev = np.r_[0.0, s[:-1]]
    return float(1.0 - (x * (prev + s)).sum() / (x.sum() * s[-1]))


def _estimate(v: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """Weighted mean of ``v`` over households (weights ``x``) and its linearized SE."""
    tot = x.sum()
    if tot <= 0:
        return float("nan"), float("nan")
    m = float((x * v).sum() / tot)
    return m, float(np.sqrt(((x * (v - m)) ** 2).sum()) / tot)


def household_survey_figures(income: np.ndarray, size: np.ndarray, w_before: np.ndarray,
                             w_after: np.ndarray, keys_before: dict[str, pd.Series],
                             keys_after: dict[str, pd.Series], column: str) -> dict[str, Any]:
    """utility.json's ``households.survey`` (module docstring)."""
    y = np.asarray(pd.to_numeric(pd.Series(income), errors="coerce"), float)
    ok = np.isfinite(y)
    n = np.asarray(size, float)
    xb, xa = n * np.asarray(w_before, float), n * np.asarray(w_after, float)
    tb, ta = poverty_threshold(y[ok], xb[ok]), poverty_threshold(y[ok], xa[ok])
    pb, pa = (y < tb).astype(float), (y < ta).astype(float)

    def pair(mask_b: np.ndarray, mask_a: np.ndarray) -> dict[str, Any]:
        out = {}
        for name, vb, va in (("poverty_rate", pb, pa), ("mean_income", y, y)):
            o, se = _estimate(vb[mask_b], xb[mask_b])
            r, _ = _estimate(va[mask_a], xa[mask_a])
            out[name] = {"original": o, "released": r, "se": se,
                         "z": (r - o) / se if se > 0 else float("nan")}
        return out

    by = []
    for k, before in keys_before.items():
        b, a = before.to_numpy(object), keys_after[k].to_numpy(object)
        vals = sorted(set(b) | set(a), key=str)
        by.append({"key": k, "values": [{"value": v, **pair(ok & (b == v), ok & (a == v))}
                                        for v in vals]})
    zs = [abs(e[m]["z"]) for g in by for e in g["values"] for m in ("poverty_rate", "mean_income")
          if np.isfinite(e[m]["z"])]
    return {"income": column,
            "method": "persons weighted size x weight; poverty line 60% of the weighted median "
                      "(recomputed on each file); SE over households (linearization, line "
                      "fixed); z = (released - original) / SE",
            "poverty_threshold": {"original": tb, "released": ta},
            "overall": pair(ok, ok),
            "by_household_key": by,
            "gini": {"original": gini(y[ok], xb[ok]), "released": gini(y[ok], xa[ok])},
            "max_abs_z": max(zs) if zs else 0.0}
