"""eps-differentially private PRAM of non-key variables (the release config's ``perturb:``).

After NZY has post-randomized the key variables, every variable named under ``perturb:`` is
post-randomized with the DP-PRAM design of Ayed, Battiston & Camerlenghi
(:func:`sdc.mechanisms.dp_pram`): keep the true category x with probability q_x, otherwise
draw one of the other categories uniformly; q maximizes the mutual information between true
and released values subject to eps-differential privacy (max_z M[x, z] / M[x', z] <= e^eps).

Guarantee and scope (stated in the codebook and audit): the released column of that variable
is eps-DP with respect to a change of one record's value of that variable, conditional on the
design q. If ``proportions`` are given in the config (public figures), q is public too and is
written to the codebook so users can unbias estimates (M^-1). Otherwise q is optimized for the
input's own proportions, is itself a function of the confidential data, and is kept in the
internal audit only. Budgets of several perturbed variables add up.

Reproducibility and release series: record-keyed draws (:mod:`sdc.engine.draws`), as for the
key variables. A record keeps its category x iff ``u < q_x`` with
``u = keyed_uniform(seed, "dp-pram:<name>", identity)``; otherwise its category is the
rendezvous choice among the other categories (uniform over them, stable when categories join
or leave), keyed on the same identity. So a record's outcome depends only on the seed, its
identity and its own value: not on row order, and the same month after month.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.engine.draws import (
    draw_tiebreak,
    keyed_uniform,
    record_identity,
    rendezvous,
    unique_identities,
    value_hash,
)
from sdc.errors import InputError
from sdc.mechanisms.dp_pram import DPPramResult, dp_pram

__all__ = ["DPPerturbation", "apply_perturbations"]


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


def apply_perturbations(original: pd.DataFrame, released: pd.DataFrame,
                        config: ReleaseConfig, seed: int, *, identity: np.ndarray | None = None
                        ) -> tuple[pd.DataFrame, list[DPPerturbation]]:
    """DP-PRAM every ``perturb:`` variable of ``released`` (a copy is returned).

    ``identity``: the records' distinct identities (:func:`sdc.engine.draws.unique_identities`
    over all records); computed from ``original`` when not given.
    """
    if not config.perturb:
        return released, []
    out = released.copy()
    if identity is None:
        identity = record_identity(original, config)
        identity = unique_identities(identity, draw_tiebreak(identity, False))
    done = []
    for var, spec in config.perturb.items():
        if var not in original.columns:
            raise InputError(f"column {var!r} (named in perturb) is not in the input; the input "
                             f"has {list(original.columns)[:20]}. Fix the name in the config")
        col = original[var]
        isna = col.isna().to_numpy()
        if isna.any():
            rows = ", ".join(str(r + 1) for r in np.flatnonzero(isna)[:5])
            raise InputError(f"column {var!r}: {int(isna.sum())} row(s) have no value (rows "
                             f"{rows}); DP-PRAM needs a value in every row: fill them in")
        cats = list(spec.categories) if spec.categories is not None else sorted(pd.unique(col).tolist())
        if len(cats) < 2:
            raise InputError(f"column {var!r} has a single category {cats}; DP-PRAM needs at "
                             "least 2: remove it from perturb")
        codes = pd.Index(cats).get_indexer(col)
        bad = codes < 0
        if bad.any():
            rows = ", ".join(str(r + 1) for r in np.flatnonzero(bad)[:5])
            raise InputError(
                f"column {var!r}: {int(bad.sum())} row(s) hold values outside perturb.{var}."
                f"categories {cats[:10]}, e.g. {pd.unique(col[bad])[:5].tolist()} (rows {rows}); "
                "add them to the categories")
        if spec.proportions is not None:
            p, source = np.asarray(spec.proportions, dtype=float), "config"
        else:
            p, source = np.bincount(codes, minlength=len(cats)) / codes.size, "input"
        design = dp_pram(p, spec.epsilon)
        cat_id = value_hash(pd.Series(np.asarray(cats, dtype=object)))
        new_codes = keyed_dp_pram(codes, design, identity, cat_id, seed, var)
        values = np.asarray(cats, dtype=object)[new_codes]
        out[var] = pd.Series(values, index=out.index, name=var).astype(original[var].dtype)
        done.append(DPPerturbation(var, float(spec.epsilon), cats, source,
                                   [float(x) for x in design.q], float(design.mutual_information),
                                   design.family, int((new_codes != codes).sum())))
    return out, done
