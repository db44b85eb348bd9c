"""The household stage's dependence check on the count pass's aggregate: the household
columns, the person columns of one member per household and the columns rebuilt from
released ones (:mod:`sdc.method.dependence.rebuild`) against the household stage's PRBs.
docs/METHOD.md 7.5, "Person columns against household keys" and "Columns rebuilt from
released ones"."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from sdc.config.model import ReleaseConfig
from sdc.method.dependence import (
    DependenceCounter,
    PairPlan,
    checked_columns,
    key_sizes,
    measure_dependence,
    pair_plan,
    person_level,
    small_limit,
)
from sdc.method.dependence.rebuild import find_rebuilt
from sdc.method.dependence.verdict import REBUILT
from sdc.method.households import household_config

__all__ = ["household_dependence", "household_pairs", "recalibrated_weight"]


def recalibrated_weight(config: ReleaseConfig) -> str | None:
    """The weight column when it is released recalibrated (not measured: a function of the
    released household keys), else None."""
    return config.input.weight if config.input.weight_release == "recalibrated" else None


def household_dependence(agg: Any, hs: Any, config: ReleaseConfig,
                         kinds: dict[str, str] | None = None) -> list:
    """The household-level dependence check on the aggregate
    (:class:`~sdc.method.household_batches.HouseholdAggregate`, the household stage ``hs``):
    the ``household_columns`` and the person columns of one member per household
    (:mod:`sdc.method.dependence.members`; their figures ``level: person``) against the
    household stage's PRBs, their pairs too (``kinds``: the public schema's,
    :func:`~sdc.method.dependence.schema_kinds`), and every column not released as it is that
    released columns rebuild (``via: rebuilt``, ``of``: the column and the released column
    whose drop breaks the relation), as ``sdc audit`` measures them on the household table
    (the caller raises with :func:`~sdc.method.dependence.raise_if_dependent`)."""
    hcfg = hs.config or household_config(config)
    values = agg.columns if agg.columns is not None else pd.DataFrame(index=range(agg.n_households))
    members = [] if agg.members is None else list(agg.members.columns)
    if members:
        values = pd.concat([values.reset_index(drop=True), agg.members], axis=1)
    cols = [c for c in checked_columns(list(values.columns), hcfg) if c != recalibrated_weight(config)]
    rebuilt = {r.target: r for r in find_rebuilt(getattr(agg, "relations", None))
               if r.target not in cols}
    if rebuilt:  # measured as if released (their original values, one per household)
        values = values.reset_index(drop=True).assign(
            **{t: agg.relations[t].to_numpy() for t in rebuilt})
        cols = cols + list(rebuilt)
    kinds = {c: k for c, k in (kinds or {}).items() if c not in rebuilt}
    counter = DependenceCounter(cols, len(hcfg.key_names), small_limit(hcfg),
                                sizes=key_sizes(hcfg), pairs=household_pairs(cols, kinds, config))
    if hs.composition is not None:  # the composition stage's cells (singular households out)
        if hs.plan is None:
            return []
        rows = np.flatnonzero(hs.cell >= 0)
        if cols and rows.size:
            counter.add(values.iloc[rows].reset_index(drop=True), hs.cell[rows],
                        hs.composition.key_codes[rows])
    elif cols and agg.n_households:
        counter.add(values, hs.cell, agg.key_codes)
    figures = person_level(measure_dependence(counter, hs.plan, hcfg, lambda x: x), members)
    return [dataclasses.replace(f, via=REBUILT, of=rebuilt[f.column].pair, level="",
                                relation=rebuilt[f.column].text())
            if f.column in rebuilt else f for f in figures]


def household_pairs(cols: list[str], kinds: dict[str, str] | None,
                     config: ReleaseConfig) -> PairPlan:
    """The household table's pairs (its household and member columns ``cols``; the person
    weight does not pair)."""
    return pair_plan(cols, {c: k for c, k in (kinds or {}).items() if c != config.input.weight},
                     household_config(config))
