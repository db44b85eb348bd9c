"""Utility of a release: how much the statistics moved (docs/REPORTS.md).

All figures compare the original file with the released one and are aggregates only. They
are computed from the engine's cell table and the released cell of every record
(:class:`sdc.reports.aggregate.ReleaseAggregates`): a marginal is a sum of cell frequencies
over the cells with that category, a two-way table the same over pairs of key codes of the
cells, a weighted total the exact fixed-point sum of the weights per cell regrouped (no sort,
independent of the row order; see :mod:`sdc.reports.aggregate`). The numeric summaries are
exact sums per cell and radix-selected quartiles (:mod:`sdc.reports.quantiles`), accumulated
over the records by :class:`sdc.reports.accumulate.ReleaseAccumulator` on every engine.

Definitions (p = original shares, q = released shares over the same categories):

* difference = released count - original count (the review's Tables 1-2);
* total variation distance ``TVD = 1/2 sum_c |p_c - q_c|`` (0 = identical, 1 = disjoint); for a
  pair of key variables the same over the cells of their two-way table;
* Hellinger distance ``H = sqrt(1/2 sum_c (sqrt p_c - sqrt q_c)^2)`` (0..1);
* weighted versions replace counts by sums of the weight column (its values are released
  unchanged with the record, so unbiased unweighted PRAM can still bias weighted totals); the
  per-category weighted totals of a category with fewer than :data:`NUMERIC_MIN_GROUP` records
  (original or released, but not both empty) are suppressed (null, ``weighted_suppressed``)
  because they would show a few respondents' weights; the weighted TVD, Hellinger and largest
  differences still include every category;
* numeric non-key variables: mean and quartiles (pandas' linear interpolation) of the variable
  within each category of each key variable, grouped by the original key value (before) and by
  the released key value (after); groups with fewer than :data:`NUMERIC_MIN_GROUP` records are
  suppressed (null) so that no statistic is a single respondent's value;
* analysis: displacement of moved records, mean shifts in standard errors and regressions on
  the keys (:mod:`sdc.reports.analysis`);
* changed: a record is changed if any key value changed; per key variable, if that variable's
  value changed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import AsIs, Bands, Groups, Hierarchy, KeyVariable, ReleaseConfig
from sdc.method.generalize import generalize_domain
from sdc.reports.accumulate import finite_values, frame_accumulator, numeric_columns
from sdc.reports.aggregate import GroupSummary, ReleaseAggregates
from sdc.reports.analysis import CellMoments, analysis_section

__all__ = ["NUMERIC_MIN_GROUP", "compute_utility", "finite_values", "hellinger", "numeric_columns",
           "tvd"]

#: Smallest group for which numeric summaries (mean, quartiles) and per-category weighted
#: totals are shown.
NUMERIC_MIN_GROUP = 10
_WEIGHTED_FIELDS = ("weighted_original", "weighted_released", "weighted_difference",
                    "weighted_original_share", "weighted_released_share",
                    "weighted_share_difference")


def tvd(p: np.ndarray, q: np.ndarray) -> float:
    """Total variation distance 1/2 sum |p - q| of two distributions (exactly 0 if p == q)."""
    return float(0.5 * np.abs(np.asarray(p, float) - np.asarray(q, float)).sum())


def hellinger(p: np.ndarray, q: np.ndarray) -> float:
    """Hellinger distance sqrt(1/2 sum (sqrt p - sqrt q)^2), in [0, 1]."""
    d = np.sqrt(np.asarray(p, float)) - np.sqrt(np.asarray(q, float))
    return float(np.sqrt(0.5 * (d * d).sum()))


def _shares(x: np.ndarray) -> np.ndarray:
    s = x.sum()
    return x / s if s > 0 else np.zeros_like(x, dtype=float)


def _domain_labels(kv: KeyVariable) -> tuple[list[Any], list[str]]:
    values: list[Any] = kv.domain
    labels = ([str(kv.labels.get(v, v)) for v in values] if kv.labels
              else list(map(str, values)))
    if kv.missing == "category":
        values.append(None)
        labels.append("(missing)")
    return values, labels


def _rule_name(rule: object) -> str:
    if rule == "as_is" or isinstance(rule, AsIs):
        return "as_is"
    for cls, name in ((Bands, "bands"), (Groups, "groups"), (Hierarchy, "hierarchy")):
        if isinstance(rule, cls):
            return name
    return str(rule)


def _stats(g: GroupSummary, c: int) -> dict[str, Any]:
    nc = int(g.n[c])
    if nc == 0:
        return {"n": 0, "suppressed": False, "mean": None, "q1": None, "median": None,
                "q3": None}
    if nc < NUMERIC_MIN_GROUP:
        return {"n": nc, "suppressed": True, "mean": None, "q1": None, "median": None,
                "q3": None}
    return {"n": nc, "suppressed": False, "mean": float(g.mean[c]), "q1": float(g.q1[c]),
            "median": float(g.median[c]), "q3": float(g.q3[c])}


def numeric_entries(col: str, before: list[GroupSummary], after: list[GroupSummary],
                    config: ReleaseConfig) -> list[dict[str, Any]]:
    """utility.json's ``numeric`` entries of variable ``col`` from its summaries per key
    variable before and after (shared by the in-memory and the batch engines)."""
    kvs = config.key_variables
    out = []
    for j, v in enumerate(config.key_names):
        values, labels = _domain_labels(kvs[v])
        g_before, g_after = before[j], after[j]
        obs = np.flatnonzero((g_before.n > 0) | (g_after.n > 0)).tolist()
        rows = [{"value": values[c], "label": labels[c], "before": _stats(g_before, c),
                 "after": _stats(g_after, c)} for c in obs]
        out.append({"variable": col, "by": v, "rows": rows})
    return out


def _generalized_totals(v: str, kv: KeyVariable, rule: object, codes: np.ndarray,
                        tb: np.ndarray, ta: np.ndarray) -> list[dict[str, Any]]:
    """Original and released counts per group of the variable's generalization ``rule``."""
    gen = generalize_domain(v, kv, rule)
    gsize = len(gen.labels)
    go = np.bincount(gen.code_map[codes], weights=tb, minlength=gsize).astype(np.int64)
    gr = np.bincount(gen.code_map[codes], weights=ta, minlength=gsize).astype(np.int64)
    return [{"label": str(lab), "original": int(go[g]), "released": int(gr[g]),
             "difference": int(gr[g] - go[g])} for g, lab in enumerate(gen.labels)]


def _category_rows(values: list[Any], labels: list[str], o: np.ndarray, r: np.ndarray,
                   w: tuple[np.ndarray, ...] | None) -> list[dict[str, Any]]:
    """One row per category observed before or after: counts o, r, shares, differences and,
    with ``w = (wo, wr, wpo, wpr)``, weighted totals and shares unless either side has
    fewer than NUMERIC_MIN_GROUP records (but not both 0)."""
    po, pr = _shares(o), _shares(r)
    cats = []
    for c in np.flatnonzero((o > 0) | (r > 0)).tolist():
        row: dict[str, Any] = {
            "value": values[c], "label": labels[c],
            "original": int(o[c]), "original_share": float(po[c]),
            "released": int(r[c]), "released_share": float(pr[c]),
            "difference": int(r[c] - o[c]), "share_difference": float(pr[c] - po[c]),
        }
        if w is not None:
            wo, wr, wpo, wpr = w
            small = 0 < min(o[c], r[c]) < NUMERIC_MIN_GROUP or (
                min(o[c], r[c]) == 0 < max(o[c], r[c]) < NUMERIC_MIN_GROUP)
            if small:  # a weighted total of so few records would show their weights
                row.update({k: None for k in _WEIGHTED_FIELDS})
            else:
                row.update({"weighted_original": float(wo[c]),
                            "weighted_released": float(wr[c]),
                            "weighted_difference": float(wr[c] - wo[c]),
                            "weighted_original_share": float(wpo[c]),
                            "weighted_released_share": float(wpr[c]),
                            "weighted_share_difference": float(wpr[c] - wpo[c])})
            row["weighted_suppressed"] = bool(small)
        cats.append(row)
    return cats


def _key_entry(j: int, config: ReleaseConfig, agg: ReleaseAggregates, kc: np.ndarray,
               n: int) -> dict[str, Any]:
    """utility.json's entry of key variable j: TVD and Hellinger of its marginal shares,
    records whose value changed, generalized totals of a partition variable, categories."""
    v = config.key_names[j]
    kv = config.key_variables[v]
    values, labels = _domain_labels(kv)
    size = kv.size
    codes = kc[:, j]
    tb, ta = agg.t_before.astype(float), agg.t_after.astype(float)
    o = np.bincount(codes, weights=tb, minlength=size).astype(np.int64)
    r = np.bincount(codes, weights=ta, minlength=size).astype(np.int64)
    po, pr = _shares(o), _shares(r)
    n_changed = int(agg.moved_weights[kc[agg.moved_from, j] != kc[agg.moved_to, j]].sum())
    is_pvar = v in set(config.partition_variables)
    rule = _rule_name(config.partition[v]) if is_pvar else None
    groups = None
    if rule is not None and rule != "as_is":
        groups = _generalized_totals(v, kv, config.partition[v], codes, tb, ta)
    entry: dict[str, Any] = {
        "name": v, "partition_variable": is_pvar, "partition_rule": rule,
        "generalized_totals": groups,
        "n_categories": size, "tvd": tvd(po, pr), "hellinger": hellinger(po, pr),
        "n_changed": n_changed, "share_changed": n_changed / n if n else 0.0,
        "max_abs_difference": int(np.abs(r - o).max()) if size else 0,
        "weighted": None,
    }
    w = None
    if agg.w_before is not None:
        wo = agg.w_before.regroup(codes, size).values()
        wr = agg.w_after.regroup(codes, size).values()
        wpo, wpr = _shares(wo), _shares(wr)
        entry["weighted"] = {"tvd": tvd(wpo, wpr), "hellinger": hellinger(wpo, wpr),
                             "max_abs_difference": float(np.abs(wr - wo).max()),
                             "max_abs_share_difference": float(np.abs(wpr - wpo).max())}
        w = (wo, wr, wpo, wpr)
    entry["categories"] = _category_rows(values, labels, o, r, w)
    return entry


def _pair_entry(i: int, jb: int, config: ReleaseConfig, agg: ReleaseAggregates,
                kc: np.ndarray) -> dict[str, Any]:
    """TVD of the two-way table of key variables i < jb on the cells (and weighted TVD).

    The (a, b) codes of every cell, observed ones numbered in code order. With a dense code
    space (sizes' product <= 4 C or 2^20) the bins are summed by code and the observed ones
    kept: the same sums in the same order as numbering them with a hash table first
    (pd.factorize, ~10x slower).
    """
    keys, kvs = config.key_names, config.key_variables
    a, b = keys[i], keys[jb]
    tb, ta = agg.t_before.astype(float), agg.t_after.astype(float)
    dense = kc[:, i].astype(np.int64) * kvs[b].size + kc[:, jb]
    span = kvs[a].size * kvs[b].size
    if span <= max(4 * dense.size, 1 << 20):
        keep = np.flatnonzero(np.bincount(dense, minlength=span))
        size, pcode = int(keep.size), None
        o = np.bincount(dense, weights=tb, minlength=span)[keep]
        r = np.bincount(dense, weights=ta, minlength=span)[keep]
    else:
        pcode, _ = pd.factorize(dense, sort=True)
        size = int(pcode.max()) + 1 if pcode.size else 0
        o = np.bincount(pcode, weights=tb, minlength=size)
        r = np.bincount(pcode, weights=ta, minlength=size)
    row = {"a": a, "b": b, "tvd": tvd(_shares(o), _shares(r)),
           "cells_original": int((o > 0).sum()), "cells_released": int((r > 0).sum()),
           "weighted_tvd": None}
    if agg.w_before is not None:
        if pcode is None:
            wo = agg.w_before.regroup(dense, span)[keep]
            wr = agg.w_after.regroup(dense, span)[keep]
        else:
            wo, wr = agg.w_before.regroup(pcode, size), agg.w_after.regroup(pcode, size)
        row["weighted_tvd"] = tvd(_shares(wo.values()), _shares(wr.values()))
    return row


def _by_partition_set(result: Any, agg: ReleaseAggregates) -> list[dict[str, Any]]:
    """Records and changed records (any key value changed) per partition set."""
    ps = result.partition_sets
    n_ps = len(ps)
    cps = np.asarray(result.cell_partition_set)
    ch_ps = np.bincount(cps[agg.moved_from], weights=agg.moved_weights,
                        minlength=n_ps).astype(np.int64)
    n_ps_rec = np.bincount(cps, weights=agg.t_before.astype(float),
                           minlength=n_ps).astype(np.int64)
    # as Python values first (a numpy scalar per field and set cost ~0.05 s on the demo)
    return [{"partition_key": str(k), "n_records": n, "n_changed": c,
             "share": c / n if n else 0.0}
            for k, n, c in zip(ps["partition_key"].tolist(), n_ps_rec.tolist(),
                               ch_ps.tolist(), strict=True)]


def _expected_totals(result: Any, config: ReleaseConfig,
                     agg: ReleaseAggregates) -> dict[str, Any]:
    """``expected_totals`` (what each mode keeps, exactly) of a weighted person release made
    with a transition design; {} otherwise (a release made by hand, without PRBs, has none)."""
    mechanism = any(getattr(result, a, None) is not None for a in ("weighted", "plan", "blocks"))
    if agg.w_before is None or config.input.household_id is not None or not mechanism:
        return {}
    from sdc.reports.expected import expected_totals_section

    return {"expected_totals": expected_totals_section(
        result, config, agg.w_before.values(), NUMERIC_MIN_GROUP)}


def compute_utility(original: pd.DataFrame | None, result: Any, config: ReleaseConfig,
                    agg: ReleaseAggregates | None = None,
                    summaries: dict[str, tuple[list[GroupSummary], list[GroupSummary]]]
                    | None = None, moments: dict[str, CellMoments] | None = None
                    ) -> dict[str, Any]:
    """Every utility figure of one release (see the module docstring), as a JSON-ready dict.

    ``agg`` (the release's :class:`ReleaseAggregates`) and ``summaries`` (per numeric
    variable, its :class:`GroupSummary` per key before and after) are those of the release's
    :class:`sdc.reports.accumulate.ReleaseAccumulator`; when not given, they are accumulated
    here from ``original``, the input frame, and ``result``, the release made from it
    (:func:`sdc.reports.accumulate.frame_accumulator`).
    """
    keys = config.key_names
    if agg is None or summaries is None or moments is None:
        acc = frame_accumulator(original, result, config)
        agg = acc.aggregates() if agg is None else agg
        summaries = acc.group_summaries() if summaries is None else summaries
        moments = acc.cell_moments() if moments is None else moments
    n = int(agg.t_before.sum())
    kc = result.cells.key_codes
    key_out = [_key_entry(j, config, agg, kc, n) for j in range(len(keys))]
    pairs = [_pair_entry(i, jb, config, agg, kc)
             for i in range(len(keys)) for jb in range(i + 1, len(keys))]
    numeric = [e for col, (b, a) in summaries.items()
               for e in numeric_entries(col, b, a, config)]
    by_ps = _by_partition_set(result, agg)
    n_ch = agg.n_changed
    return {**_expected_totals(result, config, agg),
        "schema_version": "sdc-utility/1",
        "release": {"name": config.name, "n_records": n, "key_variables": keys,
                    "partition_variables": config.partition_variables,
                    "weight": config.input.weight, "numeric_min_group": NUMERIC_MIN_GROUP},
        "key_variables": key_out,
        "pairs": pairs,
        "numeric": numeric,
        "analysis": analysis_section(config, kc, agg.t_before,
                                     (agg.moved_from, agg.moved_to, agg.moved_count), moments,
                                     agg.t_after),
        "changed": {
            "overall": {"n_changed": n_ch, "share": n_ch / n if n else 0.0},
            "by_key_variable": [{"name": e["name"], "n_changed": e["n_changed"],
                                 "share": e["share_changed"]} for e in key_out],
            "by_partition_set": by_ps,
        },
    }
