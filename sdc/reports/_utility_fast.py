"""(phase A scratch) compute_utility on cells; moves into sdc/reports/utility.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc.config import ReleaseConfig
from sdc.hierarchies import generalize_domain
from sdc.reports.aggregate import ExactSums, ReleaseAggregates, group_summaries
from sdc.utility import (
    _WEIGHTED_FIELDS,
    NUMERIC_MIN_GROUP,
    _domain_labels,
    _rule_name,
    _shares,
    hellinger,
    numeric_columns,
    tvd,
)


def _stats(g: Any, c: int) -> dict[str, Any]:
    nc = int(g.n[c])
    if nc == 0:
        return {"n": 0, "suppressed": False, "mean": None, "q1": None, "median": None,
                "q3": None}
    if nc < NUMERIC_MIN_GROUP:
        return {"n": nc, "suppressed": True, "mean": None, "q1": None, "median": None,
                "q3": None}
    return {"n": nc, "suppressed": False, "mean": float(g.mean[c]), "q1": float(g.q1[c]),
            "median": float(g.median[c]), "q3": float(g.q3[c])}


def _numeric(original: pd.DataFrame, result: Any, config: ReleaseConfig) -> list[dict[str, Any]]:
    """Mean and quartiles of every numeric non-key variable per category of every key, before
    (original key value) and after (released key value): one argsort per variable, then one
    linear stable sort of the codes per key (see :func:`group_summaries`)."""
    keys = config.key_names
    kvs = config.key_variables
    cells = result.cells
    released = result.frame
    out = []
    for col in numeric_columns(original, config):
        before_x = original[col].to_numpy(dtype=float, na_value=np.nan)
        after_x = (released[col].to_numpy(dtype=float, na_value=np.nan)
                   if col in released.columns else before_x)
        same = after_x is before_x or np.array_equal(before_x, after_x, equal_nan=True)
        sides = []
        for x, cell_of in ((before_x, cells.record_cell),
                           (after_x, result.released_cell)):
            if sides and same:  # the values did not change: reuse the sort
                ok_idx, xs = sides[0][0], sides[0][1]
            else:
                ok_idx = np.flatnonzero(~np.isnan(x))
                order = np.argsort(x[ok_idx], kind="stable")
                ok_idx = ok_idx[order]
                xs = x[ok_idx]
            sides.append((ok_idx, xs, np.asarray(cell_of)[ok_idx]))
        params = ExactSums.params(before_x.size, float(np.nanmax(np.abs(
            np.concatenate([sides[0][1], sides[1][1]])), initial=0.0)))
        sizes = [kvs[v].size for v in keys]
        before = group_summaries(sides[0][1], [cells.key_codes[sides[0][2], j]
                                               for j in range(len(keys))], sizes, params)
        after = group_summaries(sides[1][1], [cells.key_codes[sides[1][2], j]
                                              for j in range(len(keys))], sizes, params)
        for j, v in enumerate(keys):
            values, labels = _domain_labels(kvs[v])
            g_before, g_after = before[j], after[j]
            obs = np.flatnonzero((g_before.n > 0) | (g_after.n > 0)).tolist()
            rows = [{"value": values[c], "label": labels[c], "before": _stats(g_before, c),
                     "after": _stats(g_after, c)} for c in obs]
            out.append({"variable": col, "by": v, "rows": rows})
    return out


def compute_utility(original: pd.DataFrame, result: Any, config: ReleaseConfig,
                    agg: ReleaseAggregates | None = None) -> dict[str, Any]:
    keys = config.key_names
    kvs = config.key_variables
    cells = result.cells
    n = int(cells.record_cell.size)
    weight = config.input.weight
    if agg is None:
        agg = ReleaseAggregates.of(result, original[weight].to_numpy(dtype=float)
                                   if weight else None)
    weighted = agg.w_before is not None
    kc = cells.key_codes
    tb, ta = agg.t_before.astype(float), agg.t_after.astype(float)
    pvars = set(config.partition_variables)

    key_out = []
    for j, v in enumerate(keys):
        kv = kvs[v]
        values, labels = _domain_labels(kv)
        size = kv.size
        codes = kc[:, j]
        o = np.bincount(codes, weights=tb, minlength=size).astype(np.int64)
        r = np.bincount(codes, weights=ta, minlength=size).astype(np.int64)
        po, pr = _shares(o), _shares(r)
        n_changed = int((kc[agg.moved_from, j] != kc[agg.moved_to, j]).sum())
        rule = _rule_name(config.partition[v]) if v in pvars else None
        groups = None
        if rule is not None and rule != "as_is":
            gen = generalize_domain(v, kv, config.partition[v])
            gsize = len(gen.labels)
            go = np.bincount(gen.code_map[codes], weights=tb, minlength=gsize).astype(np.int64)
            gr = np.bincount(gen.code_map[codes], weights=ta, minlength=gsize).astype(np.int64)
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
        if weighted:
            wo = agg.w_before.regroup(codes, size).values()
            wr = agg.w_after.regroup(codes, size).values()
            wpo, wpr = _shares(wo), _shares(wr)
            entry["weighted"] = {"tvd": tvd(wpo, wpr), "hellinger": hellinger(wpo, wpr),
                                 "max_abs_difference": float(np.abs(wr - wo).max()),
                                 "max_abs_share_difference": float(np.abs(wpr - wpo).max())}
        cats = []
        for c in np.flatnonzero((o > 0) | (r > 0)).tolist():
            row: dict[str, Any] = {
                "value": values[c], "label": labels[c],
                "original": int(o[c]), "original_share": float(po[c]),
                "released": int(r[c]), "released_share": float(pr[c]),
                "difference": int(r[c] - o[c]), "share_difference": float(pr[c] - po[c]),
            }
            if weighted:
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
        for jb in range(i + 1, len(keys)):
            b = keys[jb]
            # the two-way table on the cells: (a, b) codes of every cell, observed ones numbered
            pcode, _ = pd.factorize(kc[:, i] * kvs[b].size + kc[:, jb], sort=True)
            size = int(pcode.max()) + 1 if pcode.size else 0
            o = np.bincount(pcode, weights=tb, minlength=size)
            r = np.bincount(pcode, weights=ta, minlength=size)
            row = {"a": a, "b": b, "tvd": tvd(_shares(o), _shares(r)),
                   "cells_original": int((o > 0).sum()), "cells_released": int((r > 0).sum()),
                   "weighted_tvd": None}
            if weighted:
                row["weighted_tvd"] = tvd(_shares(agg.w_before.regroup(pcode, size).values()),
                                          _shares(agg.w_after.regroup(pcode, size).values()))
            pairs.append(row)

    numeric = _numeric(original, result, config)

    ps = result.partition_sets
    n_ps = len(ps)
    cps = np.asarray(result.cell_partition_set)
    ch_ps = np.bincount(cps[agg.moved_from], minlength=n_ps)
    n_ps_rec = np.bincount(cps, weights=tb, minlength=n_ps).astype(np.int64)
    keys_ps = ps["partition_key"].to_numpy()
    by_ps = [{"partition_key": str(keys_ps[s]), "n_records": int(n_ps_rec[s]),
              "n_changed": int(ch_ps[s]),
              "share": float(ch_ps[s] / n_ps_rec[s]) if n_ps_rec[s] else 0.0}
             for s in range(n_ps)]
    n_ch = agg.n_changed
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
