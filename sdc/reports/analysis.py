"""Utility measured on what analysts compute (utility.json ``analysis``; docs/REPORTS.md).

PRAM keeps every cell count unbiased, but a moved record keeps its non-key values under new
key values: relationships between keys and outcomes are attenuated (misclassification,
docs/DATA_USERS.md). These figures show by how much, from aggregates only:

* ``displacement``: per ordered key (numeric values, or a recoded key's ordered classes), the
  |delta| between a moved record's original and released value - mean, median, 90th
  percentile and largest over the moved records (a record whose cell changed), and the mean
  number of keys a moved record changes. From the (original cell, released cell) pair counts.
* ``mean_shifts``: per numeric non-key variable and key category, the released-file mean
  minus the original mean, in standard errors of the original mean
  (SE = s / sqrt(n), s the group's sample standard deviation); a 0/1 variable's shift also in
  percentage points. ``digits``: the decimals the shift needs to show two significant digits
  in the unit shown (points for a 0/1 variable), so that no shift prints as 0.0.
* ``regressions``: per numeric non-key variable y, the OLS regression of y on the keys
  (a numeric key as a linear term (:func:`linear_key`), any other key as dummies of its categories observed in the
  original file, the most frequent one the reference), on the original and on the released
  key values: coefficients, classical SEs sigma^2 (X'X)^-1 with sigma^2 = RSS / (n - rank),
  the shift (after - before) / SE(before), and R^2 = 1 - RSS / TSS.

  Every regressor is a function of the cell, so X'X = sum_c n_c x_c x_c', X'y = sum_c x_c
  S_c and y'y = sum_c Q_c, with n_c, S_c = sum y, Q_c = sum y^2 the exact sums per cell
  (:class:`CellMoments`): the "aggregates first" rule, identical to a least-squares fit on
  the records and the same bytes on every engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from sdc.config.model import Bands, KeyVariable, ReleaseConfig, TopBottom
from sdc.reports.exact import ExactSums, record_quantiles

__all__ = ["CellMoments", "analysis_section", "displacement", "key_design", "key_regressions",
           "linear_key", "mean_shifts", "ols_from_gram",
           "ols_from_moments", "ordered_scale", "shift_digits"]

#: smallest group whose mean and SE are shown (utility.NUMERIC_MIN_GROUP)
MIN_GROUP = 10
#: largest number of regressors of a regression on the keys (dense per-cell design)
MAX_TERMS = 400


@dataclass(frozen=True)
class CellMoments:
    """Sufficient statistics of one numeric variable per cell, original and released:
    ``n_*`` non-missing values, ``sum_*`` their sum, ``sq_*`` the sum of their squares (exact
    fixed-point sums: regrouped to categories they stay exact, so a category no moved record
    enters or leaves has exactly the same mean after); ``binary``: every value is 0 or 1."""

    n_before: np.ndarray
    n_after: np.ndarray
    sum_before: ExactSums
    sum_after: ExactSums
    sq_before: ExactSums
    sq_after: ExactSums
    binary: bool


def shift_digits(x: float | None, *, least: int = 1, most: int = 8) -> int:
    """Decimals that show ``x`` with two significant digits (at least ``least``):
    3.7 -> 1, 0.037 -> 3, 123.4 -> 1; 0 or None -> ``least``."""
    if x is None or not math.isfinite(x) or x == 0:
        return least
    return int(min(max(least, 1 - math.floor(math.log10(abs(x)))), most))


def _numeric_domain(kv: KeyVariable) -> bool:
    if kv.range is not None:  # integers: no loop over a range's (maybe millions of) values
        return True
    return all(isinstance(c, int | float) and not isinstance(c, bool) for c in kv.domain)


def ordered_scale(config: ReleaseConfig, key: str) -> str | None:
    """How key ``key`` is ordered: ``"value"`` (more than two numeric values: |delta| in the
    variable's unit), ``"class"`` (a numeric key recoded into bands or top/bottom classes: |delta| in
    classes), or None (nominal)."""
    kv = config.key_variables[key]
    if _numeric_domain(kv) and len(kv.domain) > 2:
        return "value"
    if key in config.recoded_keys:
        src = config.input_key_variables[key]
        if isinstance(src.recode, Bands | TopBottom) and _numeric_domain(src):
            return "class"
    return None


def linear_key(config: ReleaseConfig, key: str) -> bool:
    """Whether the regressions on the keys take ``key`` as a linear term: numeric values
    declared as a ``range``, banded by the partition, or (more than two) unlabelled numeric
    categories (a labelled code list such as region 1-4 is taken as categories)."""
    kv = config.key_variables[key]
    if ordered_scale(config, key) != "value":
        return False
    if kv.range is not None or isinstance(config.partition.get(key), Bands):
        return True
    return not kv.labels


def _key_positions(config: ReleaseConfig, key: str, scale: str) -> np.ndarray:
    """Per code of ``key``, its position on the ordered scale (NaN for the missing
    category)."""
    kv = config.key_variables[key]
    dom = kv.domain
    pos = (np.asarray(dom, dtype=float) if scale == "value"
           else np.arange(len(dom), dtype=float))
    if kv.missing == "category":
        pos = np.append(pos, np.nan)
    return pos


def displacement(config: ReleaseConfig, key_codes: np.ndarray, moved_from: np.ndarray,
                 moved_to: np.ndarray, moved_count: np.ndarray) -> dict[str, Any]:
    """``analysis.displacement`` from the moved records' (from cell, to cell) pair counts."""
    kc = np.asarray(key_codes)
    f, t = np.asarray(moved_from, np.int64), np.asarray(moved_to, np.int64)
    cnt = np.asarray(moved_count, np.int64)
    n_moved = int(cnt.sum())
    diff = kc[f] != kc[t] if f.size else np.zeros((0, kc.shape[1]), bool)
    keys_changed = diff.sum(axis=1)
    mean_keys = float((keys_changed * cnt).sum() / n_moved) if n_moved else 0.0
    out = []
    for j, v in enumerate(config.key_names):
        scale = ordered_scale(config, v)
        if scale is None:
            continue
        pos = _key_positions(config, v, scale)
        d = np.abs(pos[kc[t, j]] - pos[kc[f, j]]) if f.size else np.zeros(0)
        ok = np.isfinite(d)
        dv, dc = d[ok], cnt[ok]
        n = int(dc.sum())
        ch = dv > 0
        n_ch = int(dc[ch].sum())
        q = record_quantiles(dv, dc, [0.5, 0.9]) if n else [None, None]
        qc = record_quantiles(dv[ch], dc[ch], [0.5, 0.9]) if n_ch else [None, None]
        out.append({
            "name": v, "scale": scale, "n_moved": n, "n_changed": n_ch,
            "mean": float((dv * dc).sum() / n) if n else None,
            "median": q[0], "p90": q[1], "max": float(dv.max()) if n else None,
            "mean_changed": float((dv[ch] * dc[ch]).sum() / n_ch) if n_ch else None,
            "median_changed": qc[0], "p90_changed": qc[1],
        })
    return {"n_moved": n_moved, "mean_keys_changed": mean_keys, "keys": out}


#: the normal quantile of a 95% confidence interval (Karr et al. 2006 use 95% intervals)
Z95 = 1.959963984540054


def ci_overlap(before: float | None, se_before: float | None, after: float | None,
               se_after: float | None, z: float = Z95) -> float | None:
    """Karr, Kohnen, Oganian, Reiter & Sanil (2006, The American Statistician 60(3)) interval
    overlap of an estimate on the original file, [L_o, U_o] = before -/+ z se_before, and on
    the released file, [L_p, U_p] = after -/+ z se_after:

        J = ((min(U_o, U_p) - max(L_o, L_p)) / (U_o - L_o)
             + (min(U_o, U_p) - max(L_o, L_p)) / (U_p - L_p)) / 2

    1 for identical intervals, 0 when they only touch; negative when they are apart (how far
    apart, in half-widths: the form synthpop reports; Karr et al. report 0 there). None when
    an estimate or an SE is missing or an interval has no width."""
    if None in (before, se_before, after, se_after) or not se_before > 0 or not se_after > 0:
        return None
    lo_o, hi_o = before - z * se_before, before + z * se_before
    lo_p, hi_p = after - z * se_after, after + z * se_after
    inner = min(hi_o, hi_p) - max(lo_o, lo_p)
    return 0.5 * (inner / (hi_o - lo_o) + inner / (hi_p - lo_p))


def propensity_pmse(t_before: np.ndarray, t_after: np.ndarray) -> dict[str, Any]:
    """The propensity-score mean squared error (Woo, Reiter, Oganian & Karr 2009; Snoke, Raab,
    Nowok, Dibben & Slavkovic 2018, JRSS A 181(3)) of the original vs the released file over
    the key variables, from the two cell tables.

    Stack the two files (N = n_o + n_p records, c = n_p / N), indicator 1 for a released
    record, and model the indicator on the keys with the saturated model (one parameter per
    non-empty cell of either file, K cells): the fitted propensity of cell l is
    p_l = S_l / (t_l + S_l), so

        pMSE = sum_l (t_l + S_l) (p_l - c)^2 / N.

    Snoke et al.'s null (section 3.1: the released file a draw from a correct model of the
    original, here a multinomial sample of the original's cell shares) gives a model with K
    parameters E[pMSE] = (K - 1)(1 - c)^2 c / N and SD sqrt(2 (K - 1)) (1 - c)^2 c / N;
    ``ratio`` = pMSE / E[pMSE] (about 1: no more distinguishable from the original than a
    resample of it; much above 1: distinguishable), ``standardized`` = (pMSE - E) / SD."""
    t = np.asarray(t_before, dtype=np.float64)
    s = np.asarray(t_after, dtype=np.float64)
    m = (t + s) > 0
    t, s = t[m], s[m]
    big_n = float(t.sum() + s.sum())
    k = int(m.sum())
    if big_n <= 0 or k == 0:
        return {"pmse": None, "null_expected": None, "ratio": None, "standardized": None,
                "n_cells": k, "model": "saturated on the key cells"}
    c = float(s.sum()) / big_n
    p = s / (t + s)
    pmse = float(((t + s) * (p - c) ** 2).sum() / big_n)
    e0 = (k - 1) * (1 - c) ** 2 * c / big_n
    sd0 = math.sqrt(2 * (k - 1)) * (1 - c) ** 2 * c / big_n
    return {"pmse": pmse, "null_expected": e0, "ratio": pmse / e0 if e0 > 0 else None,
            "standardized": (pmse - e0) / sd0 if sd0 > 0 else None, "n_cells": k,
            "model": "saturated on the key cells"}


def _group_stats(n: np.ndarray, s: np.ndarray, q: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Mean and SE of the mean per group from count, sum, sum of squares."""
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, s / np.maximum(n, 1), np.nan)
        var = np.where(n > 1, (q - s * mean) / np.maximum(n - 1, 1), np.nan)
        se = np.sqrt(np.maximum(var, 0.0)) / np.sqrt(np.maximum(n, 1))
    return mean, se


def _labels(kv: KeyVariable) -> tuple[list[Any], list[str]]:
    values: list[Any] = kv.domain
    labels = ([str(kv.labels.get(v, v)) for v in values] if kv.labels
              else list(map(str, values)))
    if kv.missing == "category":
        values.append(None)
        labels.append("(missing)")
    return values, labels


def mean_shifts(config: ReleaseConfig, key_codes: np.ndarray,
                moments: dict[str, CellMoments]) -> list[dict[str, Any]]:
    """``analysis.mean_shifts``: per (variable, key) the shift of the variable's mean in each
    key category (groups of fewer than :data:`MIN_GROUP` values on either side: null)."""
    kc = np.asarray(key_codes)
    out = []
    for col, m in moments.items():
        for j, v in enumerate(config.key_names):
            kv = config.key_variables[v]
            size = kv.size
            codes = kc[:, j]

            def reg(x: ExactSums, codes: np.ndarray = codes, size: int = size) -> np.ndarray:
                with np.errstate(invalid="ignore", over="ignore"):
                    return x.regroup(codes, size).values()

            nb = np.bincount(codes, weights=m.n_before, minlength=size).astype(np.int64)
            na = np.bincount(codes, weights=m.n_after, minlength=size).astype(np.int64)
            mb, seb = _group_stats(nb, reg(m.sum_before), reg(m.sq_before))
            ma, sea = _group_stats(na, reg(m.sum_after), reg(m.sq_after))
            values, labels = _labels(kv)
            rows = []
            worst: dict[str, Any] | None = None
            for c in np.flatnonzero((nb > 0) | (na > 0)).tolist():
                small = min(nb[c], na[c]) < MIN_GROUP
                shift = None if small else float(ma[c] - mb[c])
                shift_se = (None if small or not seb[c] > 0 else float(shift / seb[c]))
                unit = 100.0 if m.binary else 1.0
                row = {"value": values[c], "label": labels[c], "n_before": int(nb[c]),
                       "n_after": int(na[c]), "suppressed": bool(small),
                       "mean_before": None if small else float(mb[c]),
                       "mean_after": None if small else float(ma[c]),
                       "se_before": None if small else float(seb[c]),
                       "se_after": None if small else _f(sea[c]),
                       "ci_overlap": None if small else ci_overlap(
                           _f(mb[c]), _f(seb[c]), _f(ma[c]), _f(sea[c])),
                       "shift": shift,
                       "shift_points": (None if shift is None or not m.binary
                                        else 100.0 * shift),
                       "shift_se": shift_se,
                       "digits": shift_digits(None if shift is None else unit * shift)}
                rows.append(row)
                if shift_se is not None and (worst is None
                                             or abs(shift_se) > abs(worst["shift_se"])):
                    worst = row
            out.append({"variable": col, "by": v, "binary": bool(m.binary), "rows": rows,
                        "max_abs_shift_se": None if worst is None else abs(worst["shift_se"]),
                        "at": None if worst is None else worst["label"]})
    return out


# --------------------------------------------------------------------------------------------
# regressions on the keys from per-cell sufficient statistics
# --------------------------------------------------------------------------------------------
def key_design(config: ReleaseConfig, key_codes: np.ndarray, t_before: np.ndarray
               ) -> tuple[np.ndarray, list[dict[str, Any]]] | None:
    """The per-cell design of the regression on the keys: ``(X (C, p), terms)``; None when it
    would have more than :data:`MAX_TERMS` columns. A numeric key (:func:`linear_key`) is one
    linear term (plus an indicator of its missing category, if declared); any other key is dummies
    of its categories observed in the original file, the most frequent the reference."""
    kc = np.asarray(key_codes)
    t = np.asarray(t_before, dtype=float)
    cols = [np.ones(kc.shape[0])]
    terms: list[dict[str, Any]] = [{"term": "(intercept)", "key": None, "value": None}]
    for j, v in enumerate(config.key_names):
        kv = config.key_variables[v]
        codes = kc[:, j]
        if linear_key(config, v):
            pos = _key_positions(config, v, "value")
            x = pos[codes]
            miss = np.isnan(x)
            cols.append(np.where(miss, 0.0, x))
            terms.append({"term": v, "key": v, "value": None})
            if miss.any():
                cols.append(miss.astype(float))
                terms.append({"term": f"{v}=(missing)", "key": v, "value": None})
            continue
        values, labels = _labels(kv)
        freq = np.bincount(codes, weights=t, minlength=kv.size)
        seen = np.flatnonzero(freq > 0)
        if seen.size <= 1:
            continue
        if len(cols) + seen.size - 1 > MAX_TERMS:
            return None
        ref = int(seen[np.argmax(freq[seen])])
        for c in seen.tolist():
            if c == ref:
                continue
            cols.append((codes == c).astype(float))
            terms.append({"term": f"{v}={labels[c]}", "key": v, "value": values[c]})
    return np.column_stack(cols), terms


def ols_from_moments(x: np.ndarray, n: np.ndarray, s: np.ndarray, q: np.ndarray
                     ) -> dict[str, Any]:
    """OLS of y on the per-cell design ``x`` from the cells' count ``n``, sum ``s`` and sum
    of squares ``q`` of y: coefficients, classical SEs, R^2, n, rank. Sums over cells by
    ``np.einsum`` (no BLAS threads: the same bytes in every process), X'X as the two-operand
    ``(x n)' x``: numpy has no fast loop for three operands (4x slower: 0.23 s of the demo's
    0.6 s of reports)."""
    n = np.asarray(n, dtype=float)
    keep = n > 0
    x, n, s, q = x[keep], n[keep], s[keep], q[keep]
    xtx = np.einsum("ci,cj->ij", x * n[:, None], x)
    xty = np.einsum("ci,c->i", x, s)
    return ols_from_gram(xtx, xty, float(q.sum()), float(s.sum()), int(n.sum()))


def ols_from_gram(xtx: np.ndarray, xty: np.ndarray, yty: float, sy: float, n: int
                  ) -> dict[str, Any]:
    """OLS from its sufficient statistics X'X, X'y, y'y, sum y and n: coefficients
    (a pseudo-inverse of X'X scaled to unit diagonal: a column that is all zero, such as a
    category nobody is in, gets a null coefficient), classical SEs
    sqrt(diag((X'X)^-1) RSS / (n - rank)), R^2 = 1 - RSS / TSS."""
    p = xtx.shape[0]
    nt = float(n)
    if nt <= p or p == 0:
        return {"n": int(nt), "rank": 0, "coef": np.full(p, np.nan), "se": np.full(p, np.nan),
                "r2": None}
    diag = np.diag(xtx).copy()
    d = np.sqrt(np.where(diag > 0, diag, 1.0))
    a = xtx / np.outer(d, d)
    inv_a = np.linalg.pinv(a, rcond=1e-10, hermitian=True)
    rank = int(np.linalg.matrix_rank(a, tol=1e-10 * np.abs(a).max(), hermitian=True))
    inv = inv_a / np.outer(d, d)
    beta = inv @ xty
    rss = max(yty - 2.0 * float(beta @ xty) + float(beta @ xtx @ beta), 0.0)
    tss = yty - sy * sy / nt
    df = nt - rank
    sigma2 = rss / df if df > 0 else np.nan
    se = np.sqrt(np.maximum(np.diag(inv), 0.0) * sigma2)
    zero = diag == 0
    beta = np.where(zero, np.nan, beta)
    se = np.where(zero, np.nan, se)
    return {"n": int(nt), "rank": rank, "coef": beta, "se": se,
            "r2": 1.0 - rss / tss if tss > 0 else None}


def _f(x: Any) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def key_regressions(config: ReleaseConfig, key_codes: np.ndarray, t_before: np.ndarray,
                    moments: dict[str, CellMoments]) -> list[dict[str, Any]]:
    """``analysis.regressions``: per numeric non-key variable, y ~ keys before and after."""
    design = key_design(config, key_codes, t_before)
    out = []
    for col, m in moments.items():
        if design is None:
            out.append({"variable": col, "skipped": f"more than {MAX_TERMS} regressors",
                        "terms": [], "n_before": None, "n_after": None, "r2_before": None,
                        "r2_after": None, "r2_change": None, "max_abs_shift_se": None,
                        "binary": bool(m.binary)})
            continue
        x, terms = design
        with np.errstate(invalid="ignore", over="ignore"):
            b = ols_from_moments(x, m.n_before, m.sum_before.values(), m.sq_before.values())
            a = ols_from_moments(x, m.n_after, m.sum_after.values(), m.sq_after.values())
        rows = []
        for i, term in enumerate(terms):
            cb, ca, sb = _f(b["coef"][i]), _f(a["coef"][i]), _f(b["se"][i])
            shift = None if cb is None or ca is None or not sb else (ca - cb) / sb
            sa = _f(a["se"][i])
            rows.append({**term, "before": cb, "after": ca, "se_before": sb,
                         "se_after": sa, "shift_se": shift,
                         "ci_overlap": ci_overlap(cb, sb, ca, sa)})
        shifts = [abs(r["shift_se"]) for r in rows[1:] if r["shift_se"] is not None]
        r2b, r2a = _f(b["r2"]), _f(a["r2"])
        out.append({"variable": col, "skipped": None, "binary": bool(m.binary),
                    "n_before": b["n"], "n_after": a["n"], "rank": b["rank"],
                    "terms": rows, "r2_before": r2b, "r2_after": r2a,
                    "r2_change": None if r2b is None or r2a is None else r2a - r2b,
                    "max_abs_shift_se": max(shifts) if shifts else None})
    return out


def analysis_section(config: ReleaseConfig, key_codes: np.ndarray, t_before: np.ndarray,
                     moved: tuple[np.ndarray, np.ndarray, np.ndarray],
                     moments: dict[str, CellMoments], t_after: np.ndarray
                     ) -> dict[str, Any]:
    """utility.json's ``analysis``: displacement, mean shifts, regressions on the keys."""
    return {
        "method": ("OLS with classical (homoskedastic) standard errors, computed exactly "
                   "from per-cell sums; shifts in standard errors of the original file's "
                   "estimate"),
        "displacement": displacement(config, key_codes, *moved),
        "mean_shifts": mean_shifts(config, key_codes, moments),
        "regressions": key_regressions(config, key_codes, t_before, moments),
        "pmse": propensity_pmse(t_before, t_after),
    }
