"""Utility of a release: how much the statistics moved (issue 4, "Utility").

All figures compare the original file with the released one, record by record aligned (the
released frame keeps the input row order), and are aggregates only.

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
* changed: a record is changed if any key value changed; per key variable, if that variable's
  value changed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import AsIs, Bands, Groups, Hierarchy, KeyVariable, ReleaseConfig
from sdc.engine.generalize import generalize_domain

__all__ = ["NUMERIC_MIN_GROUP", "compute_utility", "hellinger", "numeric_columns", "tvd"]

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


def _wsum(codes: np.ndarray, w: np.ndarray, size: int) -> np.ndarray:
    """Sum of weights per code in a canonical order (independent of row order)."""
    order = np.lexsort((w, codes))
    return np.bincount(codes[order], weights=w[order], minlength=size)


def _domain_labels(kv: KeyVariable) -> tuple[list[Any], list[str]]:
    values: list[Any] = list(kv.domain)
    labels = [str(kv.labels.get(v, v)) for v in values]
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


def numeric_columns(frame: pd.DataFrame, config: ReleaseConfig) -> list[str]:
    """Numeric columns that are not keys, ids, dropped identifiers or the weight."""
    skip = set(config.key_names) | set(config.input.drop)
    skip |= {c for c in (config.input.id_column, config.input.weight) if c}
    return [c for c in frame.columns
            if c not in skip and pd.api.types.is_numeric_dtype(frame[c])
            and not pd.api.types.is_bool_dtype(frame[c])]


def _group_stats(values: pd.Series, codes: np.ndarray) -> dict[int, dict[str, Any]]:
    """Mean and quartiles of ``values`` per observed category code (small groups withheld)."""
    s = pd.Series(values.to_numpy(dtype=float), index=codes)
    ok = s.notna().to_numpy()
    g = s[ok].groupby(level=0)
    n = g.size()
    mean = g.mean()
    qs = g.quantile([0.25, 0.5, 0.75]).unstack()
    out: dict[int, dict[str, Any]] = {}
    for c in n.index:  # observed categories only (a 10^6-category key has few observed)
        nc = int(n[c])
        if nc < NUMERIC_MIN_GROUP:
            out[int(c)] = {"n": nc, "suppressed": True, "mean": None, "q1": None,
                           "median": None, "q3": None}
        else:
            out[int(c)] = {"n": nc, "suppressed": False, "mean": float(mean[c]),
                           "q1": float(qs.loc[c, 0.25]), "median": float(qs.loc[c, 0.5]),
                           "q3": float(qs.loc[c, 0.75])}
    return out


_EMPTY_GROUP = {"n": 0, "suppressed": False, "mean": None, "q1": None, "median": None, "q3": None}


def compute_utility(original: pd.DataFrame, result: Any, config: ReleaseConfig) -> dict[str, Any]:
    """Every utility figure of one release (see the module docstring), as a JSON-ready dict.

    ``original`` is the input frame, ``result`` the :class:`sdc.ReleaseResult` of
    ``release_frame(original, config, seed)``; the released frame is in the same row order.
    """
    keys = config.key_names
    kvs = config.key_variables
    cells = result.cells
    n = int(cells.record_cell.size)
    weight = config.input.weight
    w = original[weight].to_numpy(dtype=float) if weight else None
    orig_codes = {v: cells.key_codes[cells.record_cell, j] for j, v in enumerate(keys)}
    rel_codes = {v: cells.key_codes[result.released_cell, j] for j, v in enumerate(keys)}
    pvars = set(config.partition_variables)

    key_out = []
    for v in keys:
        kv = kvs[v]
        values, labels = _domain_labels(kv)
        size = kv.size
        o = np.bincount(orig_codes[v], minlength=size)
        r = np.bincount(rel_codes[v], minlength=size)
        po, pr = _shares(o), _shares(r)
        n_changed = int((orig_codes[v] != rel_codes[v]).sum())
        rule = _rule_name(config.partition[v]) if v in pvars else None
        groups = None
        if rule is not None and rule != "as_is":
            gen = generalize_domain(v, kv, config.partition[v])
            go = np.bincount(gen.code_map[orig_codes[v]], minlength=len(gen.labels))
            gr = np.bincount(gen.code_map[rel_codes[v]], minlength=len(gen.labels))
            groups = [{"label": str(lab), "original": int(go[g]), "released": int(gr[g]),
                       "difference": int(gr[g] - go[g])} for g, lab in enumerate(gen.labels)]
        entry: dict[str, Any] = {
            "name": v, "partition_variable": v in pvars, "partition_rule": rule,
            "generalized_totals": groups,
            "n_categories": size, "tvd": tvd(po, pr), "hellinger": hellinger(po, pr),
            "n_changed": n_changed, "share_changed": n_changed / n if n else 0.0,
            "max_abs_difference": int(np.abs(r - o).max()) if size else 0,
            "weighted": None,
        }
        cats = []
        if w is not None:
            wo, wr = _wsum(orig_codes[v], w, size), _wsum(rel_codes[v], w, size)
            wpo, wpr = _shares(wo), _shares(wr)
            entry["weighted"] = {"tvd": tvd(wpo, wpr), "hellinger": hellinger(wpo, wpr),
                                 "max_abs_difference": float(np.abs(wr - wo).max()),
                                 "max_abs_share_difference": float(np.abs(wpr - wpo).max())}
        # categories empty before and after carry no information (and a key may declare 10^6)
        for c in np.flatnonzero((o > 0) | (r > 0)).tolist():
            row: dict[str, Any] = {
                "value": values[c], "label": labels[c],
                "original": int(o[c]), "original_share": float(po[c]),
                "released": int(r[c]), "released_share": float(pr[c]),
                "difference": int(r[c] - o[c]), "share_difference": float(pr[c] - po[c]),
            }
            if w is not None:
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
        entry["categories"] = cats
        key_out.append(entry)

    pairs = []
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            sb = kvs[b].size
            # number only the observed (a, b) combinations: sizes multiply to 10^12 and more
            both, _ = pd.factorize(np.concatenate([orig_codes[a] * sb + orig_codes[b],
                                                   rel_codes[a] * sb + rel_codes[b]]), sort=True)
            oc, rc = both[:n], both[n:]
            size = int(both.max()) + 1 if both.size else 0
            o = np.bincount(oc, minlength=size)
            r = np.bincount(rc, minlength=size)
            row = {"a": a, "b": b, "tvd": tvd(_shares(o), _shares(r)),
                   "cells_original": int((o > 0).sum()), "cells_released": int((r > 0).sum()),
                   "weighted_tvd": None}
            if w is not None:
                row["weighted_tvd"] = tvd(_shares(_wsum(oc, w, size)), _shares(_wsum(rc, w, size)))
            pairs.append(row)

    numeric = []
    released = result.frame
    for col in numeric_columns(original, config):
        after_vals = released[col] if col in released.columns else original[col]
        for v in keys:
            kv = kvs[v]
            values, labels = _domain_labels(kv)
            before = _group_stats(original[col], orig_codes[v])
            after = _group_stats(after_vals, rel_codes[v])
            rows = [{"value": values[c], "label": labels[c],
                     "before": before.get(c, _EMPTY_GROUP), "after": after.get(c, _EMPTY_GROUP)}
                    for c in sorted(set(before) | set(after))]
            numeric.append({"variable": col, "by": v, "rows": rows})

    changed = np.asarray(result.changed)
    ps = result.partition_sets
    rec_ps = np.asarray(result.record_partition_set)
    n_ps = len(ps)
    ch_ps = np.bincount(rec_ps, weights=changed, minlength=n_ps).astype(np.int64)
    n_ps_rec = np.bincount(rec_ps, minlength=n_ps)
    by_ps = [{"partition_key": str(ps["partition_key"].iat[s]), "n_records": int(n_ps_rec[s]),
              "n_changed": int(ch_ps[s]),
              "share": float(ch_ps[s] / n_ps_rec[s]) if n_ps_rec[s] else 0.0}
             for s in range(n_ps)]
    n_ch = int(changed.sum())
    return {
        "schema_version": "sdc-utility/1",
        "release": {"name": config.name, "n_records": n, "key_variables": keys,
                    "partition_variables": config.partition_variables, "weight": weight,
                    "numeric_min_group": NUMERIC_MIN_GROUP},
        "key_variables": key_out,
        "pairs": pairs,
        "numeric": numeric,
        "changed": {
            "overall": {"n_changed": n_ch, "share": n_ch / n if n else 0.0},
            "by_key_variable": [{"name": e["name"], "n_changed": e["n_changed"],
                                 "share": e["share_changed"]} for e in key_out],
            "by_partition_set": by_ps,
        },
    }
