"""The agency's own analyses (``utility.analyses``): formulas fitted on the original file and
on the public file, added up batch by batch (docs/REPORTS.md, "analysis.analyses").

Each formula (formulaic's Wilkinson syntax) is turned into one model spec, fixed before the
first batch from a template frame that holds every declared category of the keys it uses
(as pandas categoricals, so a key's dummies are the same columns in every batch) and 1.0 for
its numeric non-key columns. For every batch, the model matrix X and outcome y are built
twice: with the records' original key values and with their released ones (the public
file's; non-key columns are released as collected), from the cell table - the keys'
declared (released-domain) values, the same on every engine. Rows with a missing or
non-finite value are left out (formulaic's ``na_action="drop"``, then ``isfinite``).

What is added up is the sufficient statistics of OLS: n, X'X, X'y, y'y and sum y, each as
an **exact** sum (:func:`exact_total`: every product x_i x_j of a record is one float64, and
the sum of those floats is exact, as an integer multiple of 2^-1126), so the totals do not
depend on the batching and every engine writes the same bytes. OLS with classical
(homoskedastic) standard errors: beta = (X'X)^-1 X'y, sigma^2 = RSS / (n - rank),
SE = sqrt(diag((X'X)^-1) sigma^2), R^2 = 1 - RSS / TSS.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import Analysis, ReleaseConfig

__all__ = ["FormulaSums", "exact_total", "formula_accumulators"]

#: exact totals are integers S with total = S * 2^-OFFSET (the smallest float64 exponent)
OFFSET = 1126
_CHUNK = 1 << 25
#: largest declared domain of a key a formula may use (its template frame has that many rows)
MAX_LEVELS = 10_000


def exact_total(x: np.ndarray) -> int:
    """The exact sum of the float64 values ``x`` as an integer S, sum = S * 2^-1126.

    Every nonzero x is m 2^(e-53) with m an integer below 2^53 in magnitude
    (``np.frexp``); m is split into a high and a low part of 27 and 26 bits, which
    ``np.bincount`` adds exactly per exponent (chunks of 2^25 values keep every partial sum
    below 2^53); the per-exponent sums are shifted and added as Python integers (a loop over
    the distinct exponents, never over values). Raises ValueError on a non-finite value."""
    x = np.asarray(x, dtype=np.float64).ravel()
    x = x[x != 0]
    if not x.size:
        return 0
    if not np.isfinite(x).all():
        raise ValueError("exact_total needs finite values")
    m, e = np.frexp(x)
    mi = np.ldexp(m, 53).astype(np.int64)
    k = (e.astype(np.int64) + 1073)
    hi = (mi >> 26).astype(np.float64)
    lo = (mi & ((1 << 26) - 1)).astype(np.float64)
    total = 0
    for start in range(0, x.size, _CHUNK):
        part = slice(start, start + _CHUNK)
        sh = np.bincount(k[part], weights=hi[part])
        sl = np.bincount(k[part], weights=lo[part])
        for i in np.flatnonzero((sh != 0) | (sl != 0)).tolist():
            total += ((int(sh[i]) << 26) + int(sl[i])) << i
    return total


def _value(s: int) -> float:
    """An exact total as the nearest float64 (Python's int division rounds correctly)."""
    return s / (1 << OFFSET)


def _template(config: ReleaseConfig, analysis: Analysis) -> pd.DataFrame:
    """A frame on which the model spec is fitted: every declared category of the keys the
    formula uses (text keys as categoricals, numeric keys as numbers), 1.0 elsewhere."""
    cols: dict[str, Any] = {}
    keys = config.key_variables
    size = max([len(keys[v].domain) for v in analysis.variables if v in keys] + [2])
    for v in analysis.variables:
        if v in keys:
            dom = keys[v].domain
            idx = np.arange(size) % len(dom)
            cols[v] = _key_column(dom, idx)
        else:
            cols[v] = np.ones(size) + np.arange(size) % 2  # two values: no constant column
    return pd.DataFrame(cols)


def _numeric(dom: list[Any]) -> bool:
    return all(isinstance(c, int | float) and not isinstance(c, bool) for c in dom)


def _key_column(dom: list[Any], codes: np.ndarray) -> Any:
    """A key's values from its codes (code len(dom), the missing category: missing)."""
    codes = np.asarray(codes, dtype=np.int64)
    if _numeric(dom):
        if all(isinstance(c, int) for c in dom):  # integers stay integers (C(x) labels "2")
            vals = np.asarray(dom, dtype=np.int64)[np.minimum(codes, len(dom) - 1)]
            return pd.arrays.IntegerArray(vals, codes >= len(dom))
        vals = np.append(np.asarray(dom, dtype=np.float64), np.nan)
        return vals[np.minimum(codes, len(dom))]
    c = np.where(codes >= len(dom), -1, codes)
    return pd.Categorical.from_codes(c, categories=[str(x) for x in dom])


class FormulaSums:
    """One analysis's exact OLS sufficient statistics, original and released (mergeable)."""

    def __init__(self, analysis: Analysis, config: ReleaseConfig) -> None:
        self.analysis = analysis
        self.error: str | None = None
        self.columns: list[str] = []
        self.spec: Any = None
        big = [v for v in analysis.variables if v in config.key_variables
               and len(config.key_variables[v].domain) > MAX_LEVELS]
        if big:
            self.error = (f"key {big[0]!r} declares more than {MAX_LEVELS} values: too many "
                          "for a model matrix of every declared category")
            self.sums = [[0] * 3 for _ in range(2)]
            return
        try:
            from formulaic import model_matrix

            mm = model_matrix(analysis.formula, _template(config, analysis))
            self.spec = mm.model_spec
            self.columns = [str(c) for c in mm.rhs.model_spec.column_names]
            if len(mm.lhs.model_spec.column_names) != 1:
                self.error = "the formula must have one outcome"
        except Exception as e:  # a transform that fails on the template
            self.error = f"the formula cannot be evaluated: {type(e).__name__}: {e}"
        p = len(self.columns)
        #: per side (0 before, 1 after): [n, sum y, y'y, X'y (p), X'X upper triangle]
        self.sums = [[0] * (3 + p + p * (p + 1) // 2) for _ in range(2)]

    def spawn(self) -> FormulaSums:
        new = object.__new__(FormulaSums)
        new.__dict__.update(self.__dict__)
        new.sums = [[0] * len(s) for s in self.sums]
        return new

    def merge(self, other: FormulaSums) -> None:
        if self.error is None and other.error is not None:
            self.error = other.error
        for a, b in zip(self.sums, other.sums, strict=True):
            for i, v in enumerate(b):
                a[i] += v

    def add(self, frame: pd.DataFrame, config: ReleaseConfig, key_codes: np.ndarray,
            cells: tuple[np.ndarray, np.ndarray]) -> None:
        """One batch: ``frame`` its input rows, ``cells`` its original and released cells."""
        if self.error is not None:
            return
        keys = config.key_names
        for side, cell in enumerate(cells):
            data: dict[str, Any] = {}
            for v in self.analysis.variables:
                if v in config.key_variables:
                    j = keys.index(v)
                    data[v] = _key_column(config.key_variables[v].domain, key_codes[cell, j])
                elif v not in frame.columns:
                    self.error = f"column {v!r} is not in the input"
                    return
                else:
                    s = frame[v]
                    if not (pd.api.types.is_numeric_dtype(s) or pd.api.types.is_bool_dtype(s)):
                        self.error = (f"column {v!r} is text and not a key: its categories are "
                                      "not declared, so its dummies could differ between "
                                      "batches; declare it as a key or code it as numbers")
                        return
                    data[v] = s.to_numpy(dtype=np.float64, na_value=np.nan)
            df = pd.DataFrame(data)
            try:
                mm = self.spec.get_model_matrix(df)
                y = np.asarray(mm.lhs, dtype=np.float64).reshape(-1)
                x = np.asarray(mm.rhs, dtype=np.float64)
            except Exception as e:
                self.error = f"the formula cannot be evaluated: {type(e).__name__}"
                return
            ok = np.isfinite(y) & np.isfinite(x).all(axis=1)
            y, x = y[ok], x[ok]
            s = self.sums[side]
            s[0] += int(y.size)
            s[1] += exact_total(y)
            s[2] += exact_total(y * y)
            p = x.shape[1]
            for i in range(p):
                s[3 + i] += exact_total(x[:, i] * y)
            at = 3 + p
            for i in range(p):
                for j in range(i, p):
                    s[at] += exact_total(x[:, i] * x[:, j])
                    at += 1

    def result(self) -> dict[str, Any]:
        """utility.json's entry of this analysis."""
        from sdc.reports.analysis import ci_overlap, ols_from_gram, shift_digits

        a = self.analysis
        out: dict[str, Any] = {"name": a.label, "formula": a.formula, "error": self.error,
                               "method": "OLS, classical standard errors", "terms": [],
                               "n_before": None, "n_after": None, "r2_before": None,
                               "r2_after": None, "r2_change": None, "max_abs_shift_se": None}
        if self.error is not None:
            return out
        p = len(self.columns)
        fits = []
        for s in self.sums:
            xty = np.array([_value(v) for v in s[3:3 + p]])
            xtx = np.zeros((p, p))
            at = 3 + p
            for i in range(p):
                for j in range(i, p):
                    xtx[i, j] = xtx[j, i] = _value(s[at])
                    at += 1
            fits.append(ols_from_gram(xtx, xty, _value(s[2]), _value(s[1]), s[0]))
        b, af = fits
        terms = []
        for i, name in enumerate(self.columns):
            cb, ca, sb = (_f(b["coef"][i]), _f(af["coef"][i]), _f(b["se"][i]))
            shift = None if cb is None or ca is None or not sb else (ca - cb) / sb
            sa = _f(af["se"][i])
            terms.append({"term": name, "before": cb, "after": ca, "se_before": sb,
                          "se_after": sa, "shift_se": shift,
                          "ci_overlap": ci_overlap(cb, sb, ca, sa),
                          "digits": min(shift_digits(sb, least=2) + 1, 10) if sb else 4})
        shifts = [abs(t["shift_se"]) for t in terms if t["shift_se"] is not None
                  and t["term"] != "Intercept"]
        out.update({"terms": terms, "n_before": b["n"], "n_after": af["n"],
                    "r2_before": _f(b["r2"]), "r2_after": _f(af["r2"]),
                    "max_abs_shift_se": max(shifts) if shifts else None})
        if out["r2_before"] is not None and out["r2_after"] is not None:
            out["r2_change"] = out["r2_after"] - out["r2_before"]
        return out


def _f(x: Any) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def formula_accumulators(config: ReleaseConfig) -> list[FormulaSums]:
    """One empty :class:`FormulaSums` per ``utility.analyses`` entry."""
    return [FormulaSums(a, config) for a in config.utility.analyses]
