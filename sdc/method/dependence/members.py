"""Person columns against household keys (docs/METHOD.md, "Person columns against household
keys"): the household-level dependence check's person columns.

A household file's household keys move in the household stage, one unit per household; its
person columns are released unchanged (the person keys move only inside the household keys'
values). A person column whose value follows from a household key (a region of birth equal to
the household's region, a person-level copy of the dwelling type, a count of the household's
members) then shows which households moved, and their original household keys. The check
measures such columns on the household table, next to the household columns and with the same
counter: each household's **member of smallest value hash** over the measured columns (a
choice independent of the row order and of the batches: two members with the same hash have the
same values) carries the household's values, and the household stage's PRBs and cells are the
plan. A relation that holds for that member in (nearly) every household is caught; one that
holds for some members only is not (see docs/METHOD.md for the limits).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from sdc.method.dependence.measure import ColumnDependence
from sdc.method.draws import value_hash
from sdc.method.draws.hashing import fmix_inplace, name_hash

__all__ = ["PERSON_LEVEL", "HouseholdMembers", "member_columns", "member_hash",
           "member_rows", "person_level"]

#: ``ColumnDependence.level`` of a person column measured against the household keys
PERSON_LEVEL = "person"


def member_columns(columns: list[str], config: Any) -> list[str]:
    """The person columns of a household file measured against its household keys, in input
    order: the person-level keys and every released person-level non-key column (the weight
    included); not the household keys, the household id, ``input.household_columns`` (measured
    as household columns), ``input.id_column``, ``input.drop``, ``perturb:`` and ``derived:``
    columns (released randomized or recomputed from the released keys). Under
    ``risk.composition: protect`` not the person keys either: the household stage is keyed on
    the household keys x the composition (the person keys' classes) and a moved household's
    members are released with the person keys of its released composition, so its certificate
    covers them (measuring them against that stage's own key found a composition "revealed"
    by the columns that make it: sdcMicro testdata's documented protect config refused)."""
    from sdc.method.designs.households import household_design_of

    inp = config.input
    skip = {*config.household_keys, inp.household_id, *inp.household_columns, *inp.drop,
            *(config.perturb or {}), *getattr(config, "derived", [])}
    if household_design_of(config).protect:
        skip.update(config.person_keys)
    if inp.id_column:
        skip.add(inp.id_column)
    return [c for c in columns if c not in skip]


def member_hash(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """(n,) uint64: a per-person hash of its values of ``columns`` (any batch, any order)."""
    acc = np.zeros(len(frame), dtype=np.uint64)
    for c in columns:
        v = value_hash(frame[c]) ^ name_hash(c)
        fmix_inplace(v)
        acc ^= v
        fmix_inplace(acc)
    return acc


def _smallest(household: np.ndarray, h: np.ndarray,
              values: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """Per distinct household (sorted), its member of smallest hash: (household, hash,
    values)."""
    order = np.lexsort((h, household))
    hh = household[order]
    first = order[np.r_[True, hh[1:] != hh[:-1]]] if hh.size else order
    return household[first], h[first], values.iloc[first].reset_index(drop=True)


class HouseholdMembers:
    """Count-pass partial: per household, the person columns' values of its member of
    smallest :func:`member_hash`. ``add`` per batch, ``merge`` partials, :meth:`values`
    at the end. Memory O(households x columns); the same table whatever the batches."""

    def __init__(self, columns: list[str] | None = None, merge_every: int = 8) -> None:
        self.columns = columns
        self.merge_every = merge_every
        self._parts: list[tuple[np.ndarray, np.ndarray, pd.DataFrame]] = []

    def add(self, frame: pd.DataFrame, household: np.ndarray, config: Any) -> None:
        """Add a batch of persons (``household``: each person's household identity)."""
        if self.columns is None:
            self.columns = member_columns(list(frame.columns), config)
        if not self.columns or not len(frame):
            return
        household = np.asarray(household, dtype=np.uint64)
        self._parts.append(_smallest(household, member_hash(frame, self.columns),
                                     frame[self.columns].reset_index(drop=True)))
        if len(self._parts) >= self.merge_every:
            self._merge()

    def merge(self, other: HouseholdMembers) -> None:
        """Add another partial's households (a Dask piece's)."""
        if self.columns is None:
            self.columns = other.columns
        self._parts.extend(other._parts)
        self._merge()

    def _merge(self) -> None:
        if len(self._parts) > 1:
            hh, h, v = zip(*self._parts, strict=True)
            self._parts = [_smallest(np.concatenate(hh), np.concatenate(h),
                                     pd.concat(v, ignore_index=True))]

    def values(self, identity: np.ndarray) -> pd.DataFrame | None:
        """The chosen members' values, one row per household of ``identity`` (sorted, every
        household counted); None when no person column is measured."""
        self._merge()
        if not self.columns or not self._parts:
            return None
        hh, _, v = self._parts[0]
        return v.iloc[np.searchsorted(hh, np.asarray(identity, np.uint64))].reset_index(
            drop=True)


def member_rows(frame: pd.DataFrame, household: np.ndarray, identity: np.ndarray,
                config: Any) -> pd.DataFrame | None:
    """:class:`HouseholdMembers` of a whole file in memory (``sdc audit``): one row per
    household of ``identity`` (any order), ``household`` each person's household identity."""
    m = HouseholdMembers()
    m.add(frame, household, config)
    return m.values(identity)


def person_level(figures: list[ColumnDependence],
                 columns: list[str]) -> list[ColumnDependence]:
    """``figures`` with the person columns' (and pairs involving one) marked ``level:
    person``."""
    cols = set(columns)
    return [dataclasses.replace(f, level=PERSON_LEVEL)
            if f.column in cols or cols.intersection(f.of) else f for f in figures]
