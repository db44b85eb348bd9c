"""Survey weights on household files (``risk.weighted: true`` with ``input.household_id``;
docs/HOUSEHOLDS.md "Survey weights", docs/METHOD.md 7.11).

The weight of a household in the household stage is **x_h = the sum of its members' person
weights** (``input.weight``): a household that moves carries all its members, so the
person-weighted total of a released household-key cell l is X*_l = sum of x_h over the
households released in l. The household stage is the weighted design of section 7.11 on the
household table with these x_h (m_j = c_g / X_j in weight groups of household cells), hence

    E[X*_l] = X_l              (every household-key cell, persons weighted),

and the person stage the same design on the person weights inside the household-key classes,
so E[W*(a0, b)] = W(a0, b) for every person cell of an original household-key class a0. The two
stages draw independently and the household stage's move probability depends on the
household's cell only (not on the household), hence for a person-key combination b

    E[sum over released household keys a of W*(a, b)] = sum_a0 W(a0, b)

(person-key cells, persons weighted, exact), while the full cells (a, b) are exact only
where the household stage keeps its households (as for counts under NZY). Household counts and
household-weighted totals drift inside a weight group whose households differ in size; they
are reported exactly (utility.json ``expected_totals.households``).

Sums are exact (:class:`~sdc.method.weighted.WeightSums`: integer limbs per key), so x_h,
X_j and W_j have the same bits however the persons are batched.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sdc.method.weighted import WeightSums

__all__ = ["HouseholdWeights", "cell_weights_of", "household_weight_totals", "household_weights_of",
           "person_draw_extras"]


class HouseholdWeights:
    """Count-pass partial of the weights of a household file: x_h per household (keyed by the
    household's draw identity) and W_j per person cell code."""

    def __init__(self) -> None:
        self.households = WeightSums()
        self.cells = WeightSums()

    def add(self, identity: np.ndarray, cell_code: np.ndarray | None,
            weight: np.ndarray) -> None:
        """One batch: every person's household identity (uint64), person cell code (None:
        not counted here) and weight (> 0, checked by the input schema)."""
        w = np.asarray(weight, dtype=np.float64)
        self.households.merge(WeightSums.of(np.asarray(identity, np.uint64).view(np.int64), w))
        if cell_code is not None:
            self.cells.merge(WeightSums.of(np.asarray(cell_code, np.int64), w))

    def merge(self, other: HouseholdWeights) -> None:
        self.households.merge(other.households)
        self.cells.merge(other.cells)

    def household_totals(self, identity: np.ndarray) -> np.ndarray:
        """x_h of every household of ``identity`` (sorted uint64, the aggregate's order)."""
        key = np.asarray(identity, np.uint64).view(np.int64)
        order = np.argsort(key, kind="stable")
        out = np.empty(key.size)
        out[order] = self.households.result(key[order])
        return out

    def cell_totals(self, codes: np.ndarray) -> np.ndarray:
        """W_j of every person cell of ``codes`` (sorted cell codes, the cell table's)."""
        return self.cells.result(np.asarray(codes, np.int64))


def household_weight_totals(weight: np.ndarray, cell: np.ndarray, n_cells: int) -> np.ndarray:
    """X_j = sum of x_h (``weight``) over the households of household cell j (``cell``, -1:
    none), summed exactly: the totals the weighted household stage balances."""
    cell = np.asarray(cell, np.int64)
    rows = np.flatnonzero(cell >= 0)
    return WeightSums.of(cell[rows], np.asarray(weight, np.float64)[rows]).result(
        np.arange(n_cells, dtype=np.int64))


def person_draw_extras(sub: Any, kept: np.ndarray, n_cells: int) -> dict[str, np.ndarray]:
    """The weighted (and near) design arrays of the person stage's draw plan ``sub`` (a
    :class:`~sdc.method.draws.DrawPlan` over the kept cells ``kept``, ascending) laid out over
    the full cell table of ``n_cells`` cells (the left-out cells: no move, no group, no row)."""
    extra: dict[str, np.ndarray] = {}
    if sub.cell_move is not None:
        move = np.zeros(n_cells)
        move[kept] = sub.cell_move
        group = np.full(n_cells, -1, dtype=np.int64)
        group[kept] = sub.cell_group
        extra.update(cell_move=move, cell_group=group)
    if sub.dest_indptr is not None:
        length = np.zeros(n_cells, dtype=np.int64)
        length[kept] = np.diff(sub.dest_indptr)
        indptr = np.zeros(n_cells + 1, dtype=np.int64)
        np.cumsum(length, out=indptr[1:])
        extra.update(dest_indptr=indptr, dest_cell=np.asarray(kept)[sub.dest_cell],
                     dest_weight=sub.dest_weight)
    return extra


def household_weights_of(weight: np.ndarray, code: np.ndarray, n_households: int) -> np.ndarray:
    """x_h of households 0..H-1 from every person's weight and household ``code`` (the pandas
    side: :func:`sdc.method.households.household_codes`), summed exactly: the same bits as
    :meth:`HouseholdWeights.household_totals` of the same persons."""
    return WeightSums.of(np.asarray(code, np.int64), np.asarray(weight, np.float64)).result(
        np.arange(n_households, dtype=np.int64))


def cell_weights_of(weight: np.ndarray, record_cell: np.ndarray, n_cells: int) -> np.ndarray:
    """W_j of cells 0..C-1 from every unit's weight and cell, summed exactly."""
    return WeightSums.of(np.asarray(record_cell, np.int64),
                         np.asarray(weight, np.float64)).result(np.arange(n_cells, dtype=np.int64))
