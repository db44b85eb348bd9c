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
- the **Gini coefficient** of y (weighted), original and released;
- per value of every **person key** (sex, age group: a numeric key of more than
  :data:`MAX_GROUPS` values in the standard age bands 0-15/16-24/25-49/50-64/65+), from the
  persons (:class:`Persons`: each person's household row, original and released person-key
  values, weight): the poverty rate and mean income of the persons of that value, weighted by
  the person's weight (the household weight, recalibrated: its released value; else the
  person's own), SE clustered by household (z_h = sum over the group's members of household h
  of x_i (v_i - m): SE = sqrt(sum_h z_h^2) / sum x);
- the **household size distribution**: the weighted share of households of each size (sizes
  with fewer than :data:`MIN_GROUP` households joined into a top class), SE over households.

A group of fewer than :data:`MIN_GROUP` units (persons, households) on either side is withheld
(``null``: the reports' aggregates-only rule, docs/REPORTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["AGE_BANDS", "MAX_GROUPS", "MIN_GROUP", "Persons", "gini", "household_survey_figures",
           "poverty_threshold"]

MIN_GROUP = 10
"""Smallest group whose figures are shown (``NUMERIC_MIN_GROUP`` of :mod:`sdc.reports.utility`)."""

MAX_GROUPS = 12
"""A numeric person key with more values is grouped in :data:`AGE_BANDS`."""

AGE_BANDS = (0, 16, 25, 50, 65)
"""The standard age bands' lower bounds (0-15, 16-24, 25-49, 50-64, 65+)."""


@dataclass
class Persons:
    """The persons of a household release: ``row`` (n,) each person's household row,
    ``before`` / ``after`` per person key its original and released values, ``weight_before``
    / ``weight_after`` (n,) the person weights (None: the household weights of the rows)."""

    row: np.ndarray
    before: dict[str, np.ndarray]
    after: dict[str, np.ndarray]
    weight_before: np.ndarray | None = None
    weight_after: np.ndarray | None = None


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


def _estimate(v: np.ndarray, x: np.ndarray, cluster: np.ndarray | None = None
              ) -> tuple[float, float]:
    """Weighted mean of ``v`` (weights ``x``) and its linearized SE, the units' residuals
    summed by ``cluster`` (household rows; None: every unit its own household)."""
    tot = x.sum()
    if tot <= 0:
        return float("nan"), float("nan")
    m = float((x * v).sum() / tot)
    r = x * (v - m)
    if cluster is not None:
        r = np.bincount(cluster, weights=r)
    return m, float(np.sqrt((r ** 2).sum()) / tot)


def _compare(vb: np.ndarray, xb: np.ndarray, va: np.ndarray, xa: np.ndarray,
             cb: np.ndarray | None = None, ca: np.ndarray | None = None) -> dict[str, Any]:
    """original, released, the original's SE and z; withheld (None) below MIN_GROUP units."""
    if vb.size < MIN_GROUP or va.size < MIN_GROUP:
        return {"original": None, "released": None, "se": None, "z": None}
    o, se = _estimate(vb, xb, cb)
    r, _ = _estimate(va, xa, ca)
    return {"original": o, "released": r, "se": se,
            "z": (r - o) / se if se > 0 else float("nan")}


def _groups(k: str, b: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[Any],
                                                         list[int] | None]:
    """A person key's group labels before and after: its values, or for a numeric key of
    more than MAX_GROUPS values the standard age bands ("0-15", ..., "65+")."""
    vals = sorted(set(b) | set(a), key=lambda v: (not isinstance(v, int | float), str(v)))
    numeric = all(isinstance(v, int | float | np.integer | np.floating) for v in vals)
    if len(vals) <= MAX_GROUPS or not numeric:
        return b, a, vals, None
    edges = np.asarray(AGE_BANDS, float)
    names = [f"{int(lo)}-{int(hi) - 1}" for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    names.append(f"{int(edges[-1])}+")
    names = np.asarray(names, dtype=object)

    def band(x: np.ndarray) -> np.ndarray:
        return names[np.clip(np.searchsorted(edges, x.astype(float), side="right") - 1, 0,
                             len(names) - 1)]

    return band(b), band(a), list(names), list(AGE_BANDS)


def _by_person_key(persons: Persons, y: np.ndarray, ok: np.ndarray, poor_b: np.ndarray,
                   poor_a: np.ndarray, wb: np.ndarray, wa: np.ndarray) -> list[dict[str, Any]]:
    row = np.asarray(persons.row, np.int64)
    xb = wb[row] if persons.weight_before is None else np.asarray(persons.weight_before, float)
    xa = wa[row] if persons.weight_after is None else np.asarray(persons.weight_after, float)
    keep = ok[row]
    yp, pb, pa = y[row], poor_b[row], poor_a[row]
    out = []
    for k, before in persons.before.items():
        gb, ga, vals, bands = _groups(k, np.asarray(before, object),
                                      np.asarray(persons.after[k], object))
        values = []
        for v in vals:
            mb, ma = keep & (gb == v), keep & (ga == v)
            values.append({"value": v, "persons_original": int(mb.sum()),
                           "persons_released": int(ma.sum()),
                           "poverty_rate": _compare(pb[mb], xb[mb], pa[ma], xa[ma], row[mb],
                                                    row[ma]),
                           "mean_income": _compare(yp[mb], xb[mb], yp[ma], xa[ma], row[mb],
                                                   row[ma])})
        out.append({"key": k, "bands": bands, "values": values})
    return out


def _size_distribution(n: np.ndarray, wb: np.ndarray, wa: np.ndarray) -> list[dict[str, Any]]:
    """Weighted share of households by size (households as the units), sizes of fewer than
    MIN_GROUP households joined into the top class ``s+``."""
    sizes, counts = np.unique(n.astype(np.int64), return_counts=True)
    top = int(sizes[-1]) if sizes.size else 0
    tail = np.cumsum(counts[::-1])[::-1]  # households of size >= sizes[i]
    for i in range(sizes.size):
        if counts[i] < MIN_GROUP or (i + 1 < sizes.size and tail[i + 1] < MIN_GROUP):
            top = int(sizes[i])
            break
    out = []
    for s_ in [int(x) for x in sizes if x <= top]:
        d = (n >= s_) if s_ == top else (n == s_)
        d = d.astype(float)
        share = (_compare(d, wb, d, wa) if d.sum() >= MIN_GROUP else
                 {"original": None, "released": None, "se": None, "z": None})
        out.append({"size": f"{s_}+" if s_ == top and s_ < sizes[-1] else str(s_),
                    "households": int(d.sum()), "share": share})
    return out


def household_survey_figures(income: np.ndarray, size: np.ndarray, w_before: np.ndarray,
                             w_after: np.ndarray, keys_before: dict[str, pd.Series],
                             keys_after: dict[str, pd.Series], column: str,
                             persons: Persons | None = None) -> dict[str, Any]:
    """utility.json's ``households.survey`` (module docstring); ``persons``: the breakdowns by
    person key (omitted without)."""
    y = np.asarray(pd.to_numeric(pd.Series(income), errors="coerce"), float)
    ok = np.isfinite(y)
    n = np.asarray(size, float)
    xb, xa = n * np.asarray(w_before, float), n * np.asarray(w_after, float)
    tb, ta = poverty_threshold(y[ok], xb[ok]), poverty_threshold(y[ok], xa[ok])
    pb, pa = (y < tb).astype(float), (y < ta).astype(float)

    def pair(mask_b: np.ndarray, mask_a: np.ndarray) -> dict[str, Any]:
        return {name: _compare(vb[mask_b], xb[mask_b], va[mask_a], xa[mask_a])
                for name, vb, va in (("poverty_rate", pb, pa), ("mean_income", y, y))}

    by = []
    for k, before in keys_before.items():
        b, a = before.to_numpy(object), keys_after[k].to_numpy(object)
        vals = sorted(set(b) | set(a), key=str)
        by.append({"key": k, "values": [{"value": v, **pair(ok & (b == v), ok & (a == v))}
                                        for v in vals]})
    wb, wa = np.asarray(w_before, float), np.asarray(w_after, float)
    by_person = ([] if persons is None else
                 _by_person_key(persons, y, ok, pb, pa, wb, wa))
    sizes = _size_distribution(n, wb, wa)
    zs = [abs(e[m]["z"]) for g in by + by_person for e in g["values"]
          for m in ("poverty_rate", "mean_income") if e[m]["z"] is not None
          and np.isfinite(e[m]["z"])]
    zs += [abs(e["share"]["z"]) for e in sizes if e["share"]["z"] is not None
           and np.isfinite(e["share"]["z"])]
    return {"income": column,
            "method": "persons weighted size x weight; poverty line 60% of the weighted median "
                      "(recomputed on each file); SE over households (linearization, line "
                      "fixed; person groups: clustered by household); z = (released - "
                      "original) / SE; groups of fewer than 10 units withheld",
            "poverty_threshold": {"original": tb, "released": ta},
            "overall": pair(ok, ok),
            "by_household_key": by,
            "by_person_key": by_person,
            "size_distribution": sizes,
            "gini": {"original": gini(y[ok], xb[ok]), "released": gini(y[ok], xa[ok])},
            "max_abs_z": max(zs) if zs else 0.0}
