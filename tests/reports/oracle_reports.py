"""The straightforward record-level report computations: the test oracle of the fast path.

This is the report code as it was before the fast report path (``sdc/utility.py``, ``sdc/disclosure.py``
and the "after" part of ``sdc/report.py:build_risk``): every figure recomputed from the
records, weighted sums in a lexsorted order, the released file re-partitioned from its key
values. It is deliberately slow and simple, and lives in tests/ only: the package computes the
same figures from the cell table (``sdc.reports.aggregate``), and
``test_report_oracle.py`` checks every figure of the two against each other on small files.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

import sdc
from sdc.reports.disclosure import (
    FREQUENCY_CLASSES,
    K_ANONYMITY_LEVELS,
    RISK_THRESHOLDS,
    frequency_classes,
    high_risk_count,
    individual_risk,
)
from sdc.reports.utility import NUMERIC_MIN_GROUP, hellinger, numeric_columns, tvd

_WEIGHTED_FIELDS = ("weighted_original", "weighted_released", "weighted_difference",
                    "weighted_original_share", "weighted_released_share",
                    "weighted_share_difference")


# -- disclosure (record level) ---------------------------------------------------------------
def frequencies(cell: np.ndarray, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    cell = np.asarray(cell, dtype=np.int64)
    n_cells = int(cell.max()) + 1 if cell.size else 0
    f = np.bincount(cell, minlength=n_cells)
    fk = f[cell]
    if weights is None:
        return fk, fk.astype(float)
    w = np.asarray(weights, dtype=float)
    order = np.lexsort((w, cell))
    big_f = np.bincount(cell[order], weights=w[order], minlength=n_cells)
    return fk, big_f[cell]


def k_anonymity(fk: np.ndarray, weights: np.ndarray | None) -> list[dict[str, Any]]:
    n = fk.size
    out = []
    for k in K_ANONYMITY_LEVELS:
        bad = fk < k
        row: dict[str, Any] = {"k": int(k), "records_violating": int(bad.sum()),
                               "share": float(bad.sum() / n) if n else 0.0,
                               "weighted_violating": None}
        if weights is not None:
            row["weighted_violating"] = float(np.sort(np.asarray(weights, float)[bad]).sum())
        out.append(row)
    return out


def risk_summary(record_cell: np.ndarray, weights: np.ndarray | None, xi: float) -> dict[str, Any]:
    cell = np.asarray(record_cell, dtype=np.int64)
    n = int(cell.size)
    t = np.bincount(cell)
    t = t[t > 0]
    fk, big_f = frequencies(cell, weights)
    r = individual_risk(fk, big_f if weights is not None else None)
    er = float(np.sort(r).sum())
    sens = t * xi < 1.0
    by_class = []
    for label, lo, hi in FREQUENCY_CLASSES:
        sel = (fk >= lo) & ((fk <= hi) if hi is not None else True)
        rs = np.sort(r[sel])
        by_class.append({"class": label, "records": int(sel.sum()), "sum_risk": float(rs.sum()),
                         "mean_risk": float(rs.mean()) if rs.size else None})
    q = np.quantile(r, [0.5, 0.9, 0.99]) if n else [np.nan] * 3
    return {
        "n_records": n,
        "n_cells": int(t.size),
        "frequency_classes": frequency_classes(t),
        "sensitive": {"threshold": 1.0 / xi, "cells": int(sens.sum()),
                      "records": int(t[sens].sum())},
        "k_anonymity": k_anonymity(fk, weights),
        "sdcmicro": {
            "weighted": weights is not None,
            "expected_reidentifications": er,
            "global_risk": er / n if n else 0.0,
            "global_risk_pct": 100.0 * er / n if n else 0.0,
            "max_individual_risk": float(r.max()) if n else 0.0,
            "quantiles": {"p50": float(q[0]), "p90": float(q[1]), "p99": float(q[2])},
            "records_risk_above": [{"threshold": th, "records": int((r > th).sum())}
                                   for th in RISK_THRESHOLDS],
            "high_risk_records": high_risk_count(r),
            "by_fk_class": by_class,
        },
    }


def risk_sections(original: pd.DataFrame, result: Any, config: sdc.ReleaseConfig) -> dict[str, Any]:
    """``before``, ``after`` and ``partition_sets`` of risk.json, from the records: the
    released file is re-partitioned from its key values (``partition_frame``)."""
    xi = float(result.xi)
    weight = config.input.weight
    w = original[weight].to_numpy(dtype=float) if weight else None
    before = risk_summary(result.cells.record_cell, w, xi)
    after_part = sdc.partition_frame(result.frame, config)
    after = risk_summary(after_part.cells.record_cell, w, xi)
    a_t = after_part.cells.frequency
    a_ps = after_part.cell_partition_set
    a_sens = a_t * xi < 1.0
    n_aps = len(after_part.partition_keys)
    a_cells = np.bincount(a_ps, minlength=n_aps)
    a_sc = np.bincount(a_ps[a_sens], minlength=n_aps)
    a_sr = np.bincount(a_ps[a_sens], weights=a_t[a_sens], minlength=n_aps).astype(np.int64)
    a_rec = np.bincount(a_ps, weights=a_t, minlength=n_aps).astype(np.int64)
    after_by_key = {k: s for s, k in enumerate(after_part.partition_keys)}
    ps_rows = []
    for _, row in result.partition_sets.iterrows():
        s = after_by_key.get(row["partition_key"])
        ps_rows.append({
            "partition_set": int(row["partition_set"]),
            "partition_key": str(row["partition_key"]),
            "prb": int(row["prb"]) if int(row["prb"]) >= 0 else None,
            "n_records": int(row["n_records"]),
            "n_records_after": int(a_rec[s]) if s is not None else 0,
            "cells_before": int(row["n_cells"]),
            "cells_after": int(a_cells[s]) if s is not None else 0,
            "sensitive_cells_before": int(row["n_sensitive_cells"]),
            "sensitive_records_before": int(row["n_sensitive_records"]),
            "sensitive_cells_after": int(a_sc[s]) if s is not None else 0,
            "sensitive_records_after": int(a_sr[s]) if s is not None else 0,
        })
    n_changed = int(np.asarray(result.changed).sum())
    return {"before": before, "after": after, "partition_sets": ps_rows, "n_changed": n_changed}


# -- utility (record level) ------------------------------------------------------------------
def _shares(x: np.ndarray) -> np.ndarray:
    s = x.sum()
    return x / s if s > 0 else np.zeros_like(x, dtype=float)


def _wsum(codes: np.ndarray, w: np.ndarray, size: int) -> np.ndarray:
    order = np.lexsort((w, codes))
    return np.bincount(codes[order], weights=w[order], minlength=size)


def _domain_labels(kv: Any) -> tuple[list[Any], list[str]]:
    values: list[Any] = list(kv.domain)
    labels = [str(kv.labels.get(v, v)) for v in values]
    if kv.missing == "category":
        values.append(None)
        labels.append("(missing)")
    return values, labels


def _group_stats(values: pd.Series, codes: np.ndarray) -> dict[int, dict[str, Any]]:
    s = pd.Series(values.to_numpy(dtype=float), index=codes)
    ok = s.notna().to_numpy()
    g = s[ok].groupby(level=0)
    n = g.size()
    mean = g.mean()
    qs = g.quantile([0.25, 0.5, 0.75]).unstack()
    out: dict[int, dict[str, Any]] = {}
    for c in n.index:
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


def utility(original: pd.DataFrame, result: Any, config: sdc.ReleaseConfig) -> dict[str, Any]:
    """utility.json's figures, record by record (the record-level ``compute_utility`` of before)."""
    from sdc.method.generalize import generalize_domain
    from sdc.reports.utility import _rule_name

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
                if small:
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
            values, labels = _domain_labels(kvs[v])
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
    extra = {"expected_totals": expected_totals(original, result, config)} if w is not None else {}
    return {
        **extra,
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


def expected_totals(original: pd.DataFrame, result: Any, config: sdc.ReleaseConfig) -> dict:
    """utility.json's ``expected_totals``, record by record: every record's law over the cells
    (stay with 1 - m_j, else uniform over the other cells of its group), its weight and its
    count added to every cell with that probability. A record's law is its cell's, so the
    records of a cell are added together (their summed weight and their number times the
    law): the same sums as one record at a time, to the float order."""
    keys, kvs = config.key_names, config.key_variables
    cells = result.cells
    t = cells.frequency.astype(float)
    n_c = t.size
    wd = getattr(result, "weighted", None)
    if wd is not None:
        mode, m, g = "weighted", np.asarray(wd.cell_move), np.asarray(wd.cell_group)
    else:
        mode = "nzy"
        g = np.asarray(result.cell_prb)
        theta = result.blocks["theta"].to_numpy(float)
        m = np.where(g >= 0, theta[np.maximum(g, 0)] / t, 0.0)
    w = original[config.input.weight].to_numpy(float)
    W = np.bincount(cells.record_cell, weights=w, minlength=n_c)
    count = np.bincount(cells.record_cell, minlength=n_c).astype(float)
    ew, et = np.zeros(n_c), np.zeros(n_c)
    for j in np.unique(cells.record_cell).tolist():
        law = np.zeros(n_c)
        law[j] = 1.0
        if g[j] >= 0:
            others = np.flatnonzero(g == g[j])
            others = others[others != j]
            if others.size:
                law[j] = 1.0 - m[j]
                law[others] = m[j] / others.size
        ew += W[j] * law
        et += count[j] * law

    def figures(x, ex, total):
        d = np.abs(ex - x)
        d[d <= 1e-9 * max(total, 1.0)] = 0.0
        return {"total": float(total), "sum_abs_difference": float(d.sum()),
                "share": float(d.sum() / total), "max_abs_difference": float(d.max()),
                "cells_changed_in_expectation": int((d > 0).sum())}

    by_key = []
    for j, v in enumerate(keys):
        values, _ = _domain_labels(kvs[v])
        codes = cells.key_codes[:, j]
        rows = []
        for c in sorted(set(codes.tolist())):
            sel = codes == c
            small = t[sel].sum() < NUMERIC_MIN_GROUP
            rows.append({"value": values[c], "original": int(t[sel].sum()),
                         "expected": float(et[sel].sum()),
                         "weighted_original": None if small else float(W[sel].sum()),
                         "weighted_expected": None if small else float(ew[sel].sum())})
        by_key.append({"name": v, "categories": rows})
    dw, dt = np.abs(ew - W), np.abs(et - t)
    dw[dw <= 1e-9 * W.sum()] = 0.0
    dt[dt <= 1e-9 * t.sum()] = 0.0
    prb = np.asarray(result.cell_prb)
    worst = []
    for b in range(len(result.blocks)):
        sel = prb == b
        worst.append({"prb": b, "partition_key": str(result.blocks["partition_key"].iat[b]),
                      "n_records": int(t[sel].sum()),
                      "weighted_sum_abs_difference": float(dw[sel].sum()),
                      "weighted_share": float(dw[sel].sum() / W.sum()),
                      "count_sum_abs_difference": float(dt[sel].sum())})
    worst = sorted([r for r in worst if r["weighted_sum_abs_difference"] > 0],
                   key=lambda r: -r["weighted_sum_abs_difference"])[:10]
    return {"mode": mode, "counts": figures(t, et, t.sum()), "weighted": figures(W, ew, W.sum()),
            "by_key_variable": by_key, "worst_prbs": worst}


# -- comparison ------------------------------------------------------------------------------
def assert_same_figures(fast: Any, slow: Any, path: str = "", rel: float = 1e-9,
                        abs_: float = 1e-12) -> int:
    """Every figure equal: same keys, same list lengths, ints and strings exactly, floats to
    ``rel`` (they are sums in another order). Returns the number of figures compared."""
    if isinstance(slow, dict):
        assert isinstance(fast, dict), path
        assert sorted(fast) == sorted(slow), f"{path}: keys {sorted(fast)} != {sorted(slow)}"
        return sum(assert_same_figures(fast[k], slow[k], f"{path}.{k}", rel, abs_) for k in slow)
    if isinstance(slow, list | tuple):
        assert isinstance(fast, list | tuple) and len(fast) == len(slow), f"{path}: length"
        return sum(assert_same_figures(a, b, f"{path}[{i}]", rel, abs_)
                   for i, (a, b) in enumerate(zip(fast, slow, strict=True)))
    if isinstance(slow, bool | np.bool_) or slow is None or isinstance(slow, str):
        assert fast == slow, f"{path}: {fast!r} != {slow!r}"
        return 1
    if isinstance(slow, int | np.integer) and not isinstance(fast, float):
        assert fast == slow, f"{path}: {fast!r} != {slow!r}"
        return 1
    a, b = float(fast), float(slow)
    if np.isnan(b):
        assert np.isnan(a), f"{path}: {a} != nan"
    else:
        assert abs(a - b) <= max(rel * abs(b), abs_), f"{path}: {a!r} != {b!r}"
    return 1
