"""eps-differentially private PRAM of non-key variables (the release config's ``perturb:``).

After the key variables, every ``perturb:`` variable goes through the DP-PRAM design of Ayed,
Battiston & Camerlenghi (:func:`sdc.mechanisms.dp_pram`): keep the category x with probability
q_x, else one of the others uniformly; q maximises the mutual information under eps-DP. With
public ``proportions`` q is published in the codebook, otherwise it stays internal. Draws are
record-keyed like the key variables'. Guarantee and scope: docs/MECHANISMS.md section 5,
docs/METHOD.md section 7.8.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.errors import InputError
from sdc.mechanisms.dp_pram import DPPramResult, dp_pram
from sdc.method.draws import (
    keyed_uniform,
    rendezvous,
    value_hash,
)

__all__ = ["NOT_DP", "DPPerturbation", "PerturbDesign", "merge_value_counts", "PerturbValues",
           "perturb_batch", "perturb_designs"]

#: what the codebook and the report say of a ``perturb:`` variable whose domain was read from
#: the data (``domain_from_data: true``)
NOT_DP = "not differentially private: domain taken from the data"


@dataclass(frozen=True)
class DPPerturbation:
    """What was done to one variable (internal; ``public_summary`` is what may be published)."""

    variable: str
    epsilon: float
    categories: list[Any]
    proportions_source: str          # "config" (public) or "input" (confidential)
    q: list[float]
    mutual_information: float
    family: str
    changed: int

    def public_summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"variable": self.variable, "epsilon": self.epsilon,
                               "mechanism": "dp_pram", "categories": self.categories}
        if self.proportions_source == "config":
            out["keep_probabilities"] = self.q
        return out


def keyed_dp_pram(codes: np.ndarray, design: DPPramResult, identity: np.ndarray,
                  category_id: np.ndarray, seed: int, variable: str) -> np.ndarray:
    """DP-PRAM of a column of category codes with record-keyed draws (pure per record).

    Keep x with probability q_x (``keyed_uniform(seed, "dp-pram:<variable>", identity) <
    q_x``); otherwise the rendezvous choice among the other categories (``category_id``: stable
    ids of the categories), uniform over the S - 1 of them: the law of matrix form (8).
    """
    codes = np.asarray(codes, dtype=np.int64)
    purpose = f"dp-pram:{variable}"
    keep = keyed_uniform(seed, purpose, identity) < design.q[codes]
    out = codes.copy()
    movers = np.flatnonzero(~keep)
    if movers.size:
        out[movers] = rendezvous(seed, purpose, identity[movers], codes[movers], category_id)
    return out


class PerturbValues:
    """The value counts of one ``perturb:`` variable and its problems (missing values, values
    outside the listed ``categories``), added up over batches in any order: the error names
    the whole file's count of bad rows and its first rows, as a check of the whole file does.

    Use: :meth:`add` per batch (or :meth:`merge` of partial ones: Dask pieces), then
    :meth:`check` (raises :class:`~sdc.errors.InputError`) and :meth:`value_counts`.
    """

    def __init__(self, variable: str, config: ReleaseConfig) -> None:
        self.variable = variable
        spec = config.perturb[variable]
        self.categories = None if spec.categories is None else list(spec.categories)
        self.counts: list[pd.Series] = []
        self.n_missing = 0
        self.missing_rows = np.zeros(0, np.int64)
        self.n_outside = 0
        self.outside_rows = np.zeros(0, np.int64)
        #: (first global row, value) of the first distinct bad values (5 per batch suffice)
        self.outside_values: list[tuple[int, Any]] = []

    def add(self, frame: pd.DataFrame, row_numbers: np.ndarray | None = None) -> None:
        """One batch (``row_numbers``: its 0-based global rows; default its positions)."""
        var = self.variable
        if var not in frame.columns:
            raise InputError(f"column {var!r} (named in perturb) is not in the input; the input "
                             f"has {list(frame.columns)[:20]}. Fix the name in the config")
        col = frame[var]
        rows = (np.arange(len(frame)) if row_numbers is None
                else np.asarray(row_numbers, dtype=np.int64))
        isna = col.isna().to_numpy()
        if isna.any():
            self.n_missing += int(isna.sum())
            self.missing_rows = np.sort(np.concatenate([self.missing_rows, rows[isna][:5]]))[:5]
        if self.categories is not None:
            bad = ~isna & (pd.Index(self.categories).get_indexer(col) < 0)
            if bad.any():
                self.n_outside += int(bad.sum())
                self.outside_rows = np.sort(np.concatenate([self.outside_rows,
                                                            rows[bad][:5]]))[:5]
                vals = col[bad]
                first = ~vals.duplicated().to_numpy()
                self.outside_values += list(zip(rows[bad][first][:5].tolist(),
                                                vals[first][:5].tolist(), strict=True))
        self.counts.append(col.value_counts(sort=False))

    def merge(self, other: PerturbValues) -> None:
        """Add a partial result (another batch's or piece's)."""
        self.counts += other.counts
        self.n_missing += other.n_missing
        self.missing_rows = np.sort(np.concatenate([self.missing_rows, other.missing_rows]))[:5]
        self.n_outside += other.n_outside
        self.outside_rows = np.sort(np.concatenate([self.outside_rows, other.outside_rows]))[:5]
        self.outside_values += other.outside_values

    def check(self) -> None:
        """Raise the problems found (missing values first, as the whole-file check)."""
        var = self.variable
        rows = ", ".join(str(int(r) + 1) for r in self.missing_rows)
        if self.n_missing:
            raise InputError(f"column {var!r}: {self.n_missing} row(s) have no value (rows "
                             f"{rows}); DP-PRAM needs a value in every row: fill them in")
        if self.n_outside:
            first: dict[Any, int] = {}
            for row, value in sorted(self.outside_values, key=lambda rv: rv[0]):
                first.setdefault(value, row)
            values = list(first)[:5]
            rows = ", ".join(str(int(r) + 1) for r in self.outside_rows)
            raise InputError(
                f"column {var!r}: {self.n_outside} row(s) hold values outside "
                f"perturb.{var}.categories {self.categories[:10]}, e.g. {values} (rows {rows}); "
                "add them to the categories")

    def value_counts(self) -> pd.Series:
        """The variable's value counts over everything added."""
        return merge_value_counts(self.counts)


def merge_value_counts(counts: list[pd.Series]) -> pd.Series:
    """Add up the value counts of several batches."""
    counts = [c for c in counts if len(c)]
    if not counts:
        return pd.Series(dtype=np.int64)
    return pd.concat(counts).groupby(level=0, sort=False).sum()


@dataclass(frozen=True)
class PerturbDesign:
    """The DP-PRAM design of one ``perturb:`` variable for the whole file: its categories (in
    order), keep probabilities q and category ids. Needs only the file's value counts, so the
    batch engines build it after their counting pass and apply it per batch."""

    variable: str
    epsilon: float
    categories: list[Any]
    proportions_source: str
    design: DPPramResult
    category_id: np.ndarray

    def perturbation(self, changed: int) -> DPPerturbation:
        return DPPerturbation(self.variable, self.epsilon, self.categories,
                              self.proportions_source, [float(x) for x in self.design.q],
                              float(self.design.mutual_information), self.design.family,
                              int(changed))


def perturb_designs(config: ReleaseConfig, value_counts: dict[str, pd.Series],
                    n_records: int) -> list[PerturbDesign]:
    """The designs of every ``perturb:`` variable from the whole file's value counts
    (:class:`PerturbValues`, merged over batches).

    Categories: the config's, else the sorted distinct values of the file. Proportions p: the
    config's (public), else the file's own, ``count_x / n`` (then q is confidential). q
    maximizes the mutual information subject to eps-DP (:func:`sdc.mechanisms.dp_pram`).
    """
    out = []
    for var, spec in (config.perturb or {}).items():
        counts = value_counts[var]
        cats = (list(spec.categories) if spec.categories is not None
                else sorted(counts.index.tolist()))
        if len(cats) < 2:
            raise InputError(f"column {var!r} has a single category {cats}; DP-PRAM needs at "
                             "least 2: remove it from perturb")
        if spec.proportions is not None:
            p, source = np.asarray(spec.proportions, dtype=float), "config"
        else:
            per_cat = np.zeros(len(cats), dtype=np.int64)
            idx = pd.Index(cats).get_indexer(counts.index)
            per_cat[idx] = counts.to_numpy().astype(np.int64)
            p, source = per_cat / int(n_records), "input"
        design = dp_pram(p, spec.epsilon)
        cat_id = value_hash(pd.Series(np.asarray(cats, dtype=object)))
        out.append(PerturbDesign(var, float(spec.epsilon), cats, source, design, cat_id))
    return out


def perturb_batch(original: pd.DataFrame, released: pd.DataFrame,
                  designs: list[PerturbDesign], identity: np.ndarray, seed: int
                  ) -> tuple[pd.DataFrame, np.ndarray]:
    """Apply the designs to the records of ``released`` (a whole file or any batch; a copy is
    returned) with record-keyed draws: pure per record, so batches give the whole file's result.

    ``identity``: the records' distinct identities (:func:`sdc.method.draws.unique_identities`
    over all records of the file). Returns the frame and the records changed per variable.
    """
    # shallow: only whole columns are replaced below, never written into (a deep copy of every
    # column cost half of this function at 1M records)
    out = released.copy(deep=False)
    changed = np.zeros(len(designs), dtype=np.int64)
    for i, d in enumerate(designs):
        col = original[d.variable]
        codes = pd.Index(d.categories).get_indexer(col)
        new_codes = keyed_dp_pram(codes, d.design, identity, d.category_id, seed, d.variable)
        values = np.asarray(d.categories, dtype=object)[new_codes]
        out[d.variable] = pd.Series(values, index=out.index, name=d.variable,
                                    copy=False).astype(original[d.variable].dtype)
        changed[i] = int((new_codes != codes).sum())
    return out, changed
