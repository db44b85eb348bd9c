"""Columns not released as they are, rebuilt from released ones (issue 44).

A column the release does not publish as it is (``input.drop``, ``derived:``, ``perturb:``)
may still follow from columns it does publish: in EU-SILC the equivalised household size
``eqSS`` = the household's disposable income / ``eqIncome``, and the disposable income is the
members' summed person incomes plus the household incomes minus the taxes, all released. A
config that drops ``eqSS`` but releases ``eqIncome`` and the incomes gives ``eqSS`` back. The
dependence check measures each released column (and pairs of them) against the keys, not such
relations, so this module finds them and the check then measures the rebuilt column as if it
were released (:func:`sdc.method.household_batches.household_dependence`).

On a household file, per household (one row each, whatever the batches:
:class:`HouseholdRelations` is a mergeable count-pass partial), with X = [1, the released
numeric household columns, the members' sums of the released numeric person columns] and a
target column d that is constant within households, three forms are fitted by least squares
on a sample of households and then verified on every household:

- ``d = X b`` (a sum or difference of released columns),
- ``d = X b / c`` (a ratio: d c = X b), c a released numeric household column,
- ``d = X b * c`` (a product: d / c = X b).

A form *rebuilds* d when the fitted value is within half of d's grain (the smallest gap
between two of its values; at least 1e-9 max |d|) of d for at least ``SHARE`` of the
households where it is defined (d known, c != 0) and d is not its most frequent value (the
households where guessing the mode would not do as well): rounding the fitted value to d's grain
gives d itself. Float rounding of the released values (15 significant digits in a CSV, cents) is
far below half a grain; a least-squares predictor of a merely correlated column is not within
half a grain of 90% of its values (of a continuous column: within a few cents).
Docs: docs/METHOD.md 7.5 "Columns rebuilt from released ones", docs/HOUSEHOLDS.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["MEMBERS", "SAMPLE", "SHARE", "HouseholdRelations", "Rebuilt", "find_rebuilt",
           "relation_columns"]

#: a form rebuilds a column when it holds (within the tolerance) for this share of the
#: households where it is defined
SHARE = 0.9
#: households the forms are fitted on (then verified on every household)
SAMPLE = 4096
#: the household's number of members (shown by the pseudonyms): a regressor and a divisor
MEMBERS = "members"


@dataclass(frozen=True)
class Rebuilt:
    """A column rebuilt from released ones: ``target = (sum coef * term) [/ or *] by``."""

    target: str
    form: str                       # "sum", "ratio" or "product"
    by: str                         # the divisor / factor ("" for a sum)
    terms: tuple[tuple[float, str], ...]
    share: float                    # households where it holds, of those where defined

    @property
    def pair(self) -> tuple[str, str]:
        """(target, the released column whose drop breaks the relation): the divisor or
        factor, else the term of largest weight."""
        if self.by and self.by != MEMBERS:
            return self.target, self.by
        terms = [t for t in self.terms if t[1] not in ("1", MEMBERS)]
        if not terms:  # a function of the member count: only a key stops it
            return self.target, MEMBERS
        name = max(terms, key=lambda t: abs(t[0]))[1]
        return self.target, name[4:-1] if name.startswith("sum(") else name

    def text(self) -> str:
        """The relation as an intruder computes it."""
        parts = []
        for coef, name in self.terms:
            c = round(coef)
            mag = abs(c) if abs(coef - c) < 1e-6 else abs(coef)
            sign = "-" if coef < 0 else "+"
            word = (f"{mag:.6g}" if name == "1" else name if mag == 1
                    else f"{mag:.4g} {name}")
            parts.append(f"{sign} {word}")
        lin = " ".join(parts).lstrip("+ ") if parts else "0"
        if lin.startswith("- "):
            lin = "-" + lin[2:]
        if self.form == "sum":
            rhs = lin
        else:
            rhs = f"({lin}) {'/' if self.form == 'ratio' else '*'} {self.by}"
        members = "; sum(x): over the household's members" if "sum(" in rhs else ""
        return f"{self.target} = {rhs} (for {self.share:.1%} of the households{members})"


def _numeric(s: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype)


def relation_columns(frame: pd.DataFrame, config: Any) -> tuple[list[str], list[str],
                                                                 list[str]]:
    """(targets, household columns, person columns) of a household file's relations: the
    numeric columns not released as they are (``input.drop``, ``derived:``, ``perturb:``; not
    keys or ids), the released numeric ``input.household_columns`` and the released numeric
    person columns (summed over members); the weight counts as released unless recalibrated.
    No target: nothing to look for (every list empty)."""
    inp = config.input
    ids = {inp.household_id, inp.id_column, *config.key_names}
    hidden = {*inp.drop, *getattr(config, "derived", []), *(config.perturb or {})}
    targets = [c for c in frame.columns if c in hidden and c not in ids and _numeric(frame[c])]
    if not targets:
        return [], [], []
    skip = ids | hidden
    if getattr(inp, "weight_release", "as_is") == "recalibrated" and inp.weight:
        skip.add(inp.weight)
    hcols = [c for c in inp.household_columns
             if c in frame.columns and c not in skip and _numeric(frame[c])]
    pcols = [c for c in frame.columns if c not in skip and c not in inp.household_columns
             and _numeric(frame[c])]
    return targets, hcols, pcols


def _reduce(ident: np.ndarray, lo: np.ndarray, hi: np.ndarray, first: np.ndarray,
            sums: np.ndarray) -> tuple[np.ndarray, ...]:
    """One row per distinct identity (sorted): min of ``lo``, max of ``hi``, min of
    ``first`` (constant within households), sum of ``sums`` (whole columns, reduceat)."""
    order = np.argsort(ident, kind="stable")
    ident = ident[order]
    start = np.flatnonzero(np.r_[True, ident[1:] != ident[:-1]]) if ident.size else \
        np.zeros(0, np.int64)

    def red(f: Any, a: np.ndarray) -> np.ndarray:
        a = a[order]
        return f.reduceat(a, start, axis=0) if a.shape[1] and start.size else a[start]

    return (ident[start], red(np.minimum, lo), red(np.maximum, hi), red(np.fmin, first),
            red(np.add, sums))


class HouseholdRelations:
    """Count-pass partial: per household, each target column's min and max over its members
    (constant: min = max; missing values count as +-inf: never constant), the released
    numeric household columns' value and the members' sums of the released numeric person
    columns (missing as 0). ``add`` per batch, ``merge`` partials, :meth:`table` at the
    end; the same table whatever the batches (up to the float sums' rounding)."""

    def __init__(self, merge_every: int = 8) -> None:
        self.names: tuple[list[str], list[str], list[str]] | None = None
        self.merge_every = merge_every
        self._parts: list[tuple[np.ndarray, ...]] = []

    def add(self, frame: pd.DataFrame, household: np.ndarray, config: Any) -> None:
        """Add a batch of persons (``household``: each person's household identity)."""
        if self.names is None:
            self.names = relation_columns(frame, config)
        targets, hcols, pcols = self.names
        if not targets or not len(frame):
            return

        def block(cols: list[str]) -> np.ndarray:
            if not cols:
                return np.zeros((len(frame), 0))
            return np.column_stack([pd.to_numeric(frame[c], errors="coerce")
                                    .to_numpy(np.float64, na_value=np.nan) for c in cols])

        t = block(targets)
        lo = np.where(np.isnan(t), np.inf, t)
        hi = np.where(np.isnan(t), np.inf, t)
        s = np.column_stack([np.ones(len(frame)), np.nan_to_num(block(pcols), nan=0.0)])
        self._parts.append(_reduce(np.asarray(household, np.uint64), lo, hi, block(hcols), s))
        if len(self._parts) >= self.merge_every:
            self._merge()

    def merge(self, other: HouseholdRelations) -> None:
        """Add another partial's households (a Dask piece's)."""
        if self.names is None or not self.names[0]:
            self.names = other.names
        self._parts.extend(other._parts)
        self._merge()

    def _merge(self) -> None:
        if len(self._parts) > 1:
            self._parts = [_reduce(*(np.concatenate(x) for x in zip(*self._parts,
                                                                    strict=True)))]

    def table(self, identity: np.ndarray) -> pd.DataFrame | None:
        """One row per household of ``identity`` (sorted): the targets (NaN where not constant
        or missing), the household columns, ``members`` and ``sum(person column)``; None: no
        target."""
        self._merge()
        if self.names is None or not self.names[0] or not self._parts:
            return None
        targets, hcols, pcols = self.names
        ident, lo, hi, first, sums = self._parts[0]
        at = np.searchsorted(ident, np.asarray(identity, np.uint64))
        t = np.where((lo == hi) & np.isfinite(lo), lo, np.nan)[at]
        cols = {c: t[:, i] for i, c in enumerate(targets)}
        cols.update({c: first[at, i] for i, c in enumerate(hcols)})
        cols[MEMBERS] = sums[at, 0]  # shown by every household release (the pseudonyms)
        cols.update({f"sum({c})": sums[at, i + 1] for i, c in enumerate(pcols)})
        out = pd.DataFrame(cols)
        out.attrs["relations"] = (list(targets), [*hcols, MEMBERS],
                                  [f"sum({c})" for c in pcols])
        return out


def _tolerance(d: np.ndarray) -> tuple[float, float]:
    """(half d's grain, at least 1e-9 max |d|; d's most frequent value)."""
    u, n = np.unique(d, return_counts=True)
    gaps = np.diff(u)
    grain = float(gaps.min()) if gaps.size else np.inf
    return max(grain / 2, 1e-9 * float(np.abs(u).max())), float(u[np.argmax(n)])


def _share(lin: np.ndarray, c: np.ndarray, d: np.ndarray, form: str, tol: float) -> float:
    """The share of ``d`` that the fitted form (``lin`` = X b, ``c`` the divisor or factor)
    gives within ``tol``."""
    fit = lin / c if form == "ratio" else lin * c if form == "product" else lin
    return float((np.abs(fit - d) <= tol).mean())


def _fit(x: np.ndarray, y: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
    """Least squares on ``rows`` by the normal equations of the columns scaled to at most 1
    (a p x p solve: LAPACK on the sample itself lets a multi-threaded BLAS spend 20x the CPU
    on a busy machine); None when too few rows."""
    ok = rows[np.isfinite(y[rows])]
    if ok.size < x.shape[1] + 2:
        return None
    xs = x[ok]
    scale = np.abs(xs).max(axis=0)
    scale[scale == 0] = 1.0
    xs = xs / scale
    b, *_ = np.linalg.lstsq(xs.T @ xs, xs.T @ y[ok], rcond=None)
    return b / scale


def find_rebuilt(table: pd.DataFrame | None) -> list[Rebuilt]:
    """The targets of ``table`` (:meth:`HouseholdRelations.table`) that a sum, ratio or
    product of released columns rebuilds (module docstring), at most one relation each (the
    first found: sum, then ratio and product by each released household column in input
    order). Whole columns; a least-squares fit on at most ``SAMPLE`` households per form."""
    if table is None or not len(table):
        return []
    targets, hcols, regs = table.attrs["relations"]
    names = hcols + regs
    x = np.column_stack([np.ones(len(table))]
                        + [np.nan_to_num(table[c].to_numpy(np.float64), nan=0.0)
                           for c in names])
    n = len(table)
    sample = np.arange(n) if n <= SAMPLE else np.linspace(0, n - 1, SAMPLE).astype(np.int64)
    found = []
    for t in targets:
        d = table[t].to_numpy(np.float64)
        known = np.isfinite(d)
        if np.unique(d[known]).size < 2:
            continue  # a constant column tells nothing
        tol, mode = _tolerance(d[known])
        judge = known & (d != mode)  # where guessing the mode would not do as well
        if judge.sum() < 10:
            continue
        forms = [("sum", "", np.ones(n))] + [
            (f, c, table[c].to_numpy(np.float64)) for c in hcols for f in ("ratio", "product")]
        for form, by, c in forms:
            with np.errstate(divide="ignore", invalid="ignore"):
                y = d * c if form == "ratio" else d / c if form == "product" else d
                defined = known & np.isfinite(y) & (c != 0)
                b = _fit(x, np.where(defined, y, np.nan), sample[defined[sample]])
                if b is None:
                    continue
                rows = sample[(defined & judge)[sample]]
                if not rows.size or _share(x[rows] @ b, c[rows], d[rows], form, tol) < SHARE:
                    continue
                share = _share(x[defined & judge] @ b, c[defined & judge], d[defined & judge],
                               form, tol)
            if share >= SHARE and (defined & judge).sum() >= 0.5 * judge.sum():
                terms = tuple((float(b[i + 1]), name) for i, name in enumerate(names)
                              if abs(b[i + 1]) > 1e-9 * max(1.0, float(np.abs(b).max())))
                if abs(b[0]) > 1e-9 * max(1.0, float(np.abs(d[known]).max())):
                    terms = ((float(b[0]), "1"),) + terms
                found.append(Rebuilt(t, form, by, terms, share))
                break
    return found
