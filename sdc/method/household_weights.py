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

from sdc.method.cells import split_codes
from sdc.method.designs import design_of
from sdc.method.weighted import WeightSums

__all__ = ["HouseholdWeights", "cell_weights_of", "household_expected_totals",
           "household_weight_totals", "household_weights_of", "person_draw_extras"]


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


# -- utility.json households.expected_totals ---------------------------------------------------
def _figures(x: np.ndarray, ex: np.ndarray) -> dict[str, Any]:
    """Summed |E[X*] - X| (0 below 1e-9 of the total: the rounding of an exact 0), its share
    of the total, the largest, the cells off in expectation."""
    total = float(x.sum())
    d = np.abs(ex - x)
    d[d <= 1e-9 * max(total, 1.0)] = 0.0
    return {"total": total, "sum_abs_difference": float(d.sum()),
            "share": float(d.sum() / total) if total else 0.0,
            "max_abs_difference": float(d.max()) if d.size else 0.0,
            "cells_changed_in_expectation": int((d > 0).sum())}


def _hk_expected(hs: Any, values: list[np.ndarray], config: Any) -> tuple[np.ndarray, list]:
    """Household stage: per household-key combination (rows of the returned (R, p) codes) the
    original and exact expected released total of every per-household measure of ``values``
    (E[V*_l] = sum_j V_j p_jl over the stage's cells; under ``protect`` the (HK, composition)
    cells summed per HK and the singular households spread uniformly over the HK rows)."""
    from sdc.method.households import row_index
    from sdc.method.transition import expected_totals

    plan = hs.plan
    if hs.composition is None:
        n = plan.partitioned.cells.n_cells
        hk = plan.partitioned.cells.key_codes
        out = []
        for v in values:
            vj = np.bincount(hs.cell, weights=v, minlength=n)
            out.append((vj, expected_totals(vj, plan.cell_design())))
        return hk, out
    cs = hs.composition
    codes = cs.key_codes[:, :-1]
    hk = np.unique(codes, axis=0)
    sizes = [int(x) + 1 for x in hk.max(axis=0)] if hk.size else []
    row_h = row_index(hk, codes, sizes)
    sing = np.zeros(codes.shape[0], dtype=bool)
    sing[cs.singular] = True
    out = []
    for v in values:
        orig = np.bincount(row_h, weights=v, minlength=hk.shape[0])
        ex = np.full(hk.shape[0], float(v[sing].sum()) / hk.shape[0])
        if plan is not None:
            cells = plan.partitioned.cells
            keep = ~sing
            vj = np.bincount(hs.cell[keep], weights=v[keep], minlength=cells.n_cells)
            cell_row = row_index(hk, cells.key_codes[:, :-1], sizes)
            ex += np.bincount(cell_row, weights=expected_totals(vj, plan.cell_design()),
                              minlength=hk.shape[0])
        out.append((orig, ex))
    return hk, out


def household_expected_totals(config: Any, agg: Any, hs: Any, ps: Any, cells: Any,
                              person_cell: np.ndarray, person_row: np.ndarray,
                              person_weight: np.ndarray | None) -> dict[str, Any]:
    """utility.json ``households.expected_totals`` (module docstring): exact, from both stages'
    transition probabilities, no simulation. ``household_keys``: per household-key combination
    the person-weighted totals (x_h), households and persons; ``person_keys``: per person-key
    combination the person-weighted totals and persons (the household stage moves no person
    key; the person stage's expectation summed over the household keys); ``by_key_variable``
    the same per category of every key. ``person_cell`` / ``person_row``: every person's cell in
    ``cells`` and household row in ``agg``; ``person_weight`` their weights (None: none).
    Under ``protect`` without ``risk.weighted`` the person-key weighted figures are None (the
    members' weights may differ, so the released classes' weights depend on who is
    realized)."""
    from sdc.method.transition import expected_totals

    weighted = person_weight is not None
    n_h = agg.n_households
    if weighted:
        x = agg.weight if agg.weight is not None else np.bincount(
            np.asarray(person_row), weights=person_weight, minlength=n_h)
    size = agg.size.astype(np.float64)
    hk_rows, (xs_h, hh, pp) = _hk_expected(
        hs, [x if weighted else size, np.ones(n_h), size], config)
    pk_idx = [config.key_names.index(k) for k in config.person_keys]
    pk_weighted = weighted and (hs.composition is None or design_of(config).weighted)
    t = cells.frequency.astype(np.float64)
    w = (ps.weight_total if ps.weight_total is not None else
         np.bincount(person_cell, weights=person_weight, minlength=cells.n_cells)
         if weighted else t)
    if hs.composition is None:
        design = ps.plan.cell_design()
        et, ew = t.copy(), w.copy()
        et[ps.kept] = expected_totals(t[ps.kept], design)
        ew[ps.kept] = expected_totals(w[ps.kept], design)
        pk_codes = cells.key_codes[:, pk_idx]
    else:  # persons move with their household's composition: classes from the compositions
        table = hs.composition_table
        n_cls = table.counts.shape[1]
        comp = hs.composition.key_codes[:, -1]
        per = (x / size) if weighted else np.ones(n_h)  # the members' common weight
        t = table.counts[comp].sum(axis=0).astype(np.float64)
        w = (table.counts[comp] * per[:, None]).sum(axis=0)
        et, ew = _class_expected(hs, table, per)
        pk_codes = split_codes(np.arange(n_cls, dtype=np.int64),  # the classes' key codes
                               [int(config.key_variables[k].size) for k in config.person_keys])
    out: dict[str, Any] = {
        "mode": "weighted" if design_of(config).weighted else "nzy",
        "household_keys": {"persons_weighted": _figures(*xs_h) if weighted else None,
                           "households": _figures(*hh), "persons": _figures(*pp)},
        "person_keys": {"persons_weighted": _figures(*_margin(pk_codes, w, ew))
                        if pk_weighted else None,
                        "persons": _figures(*_margin(pk_codes, t, et))}}
    by_key = []
    for j, k in enumerate(config.household_keys):
        by_key.append(_by_key(config, k, "household", hk_rows[:, j], pp,
                              xs_h if weighted else None))
    for j, k in enumerate(config.person_keys):
        by_key.append(_by_key(config, k, "person", pk_codes[:, j], (t, et),
                              (w, ew) if pk_weighted else None))
    out["by_key_variable"] = by_key
    return out


def _class_expected(hs: Any, table: Any, per: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Under ``protect``: E[persons] and E[person-weighted total] of every person class,
    sum over composition cells l of n_lc E[households*_l] (resp. n_lc / size_l E[X*_l] with
    X_l the cell's summed x_h = size_h * per_h): exact, the realized members take exactly the
    released composition; singular households keep their composition."""
    from sdc.method.transition import expected_totals

    cs = hs.composition
    comp = cs.key_codes[:, -1]
    n_cls = table.counts.shape[1]
    sing = np.zeros(comp.size, dtype=bool)
    sing[cs.singular] = True
    et = (table.counts[comp[sing]]).sum(axis=0).astype(np.float64)
    ew = (table.counts[comp[sing]] * per[sing, None]).sum(axis=0)
    if hs.plan is not None:
        cells = hs.plan.partitioned.cells
        keep = np.flatnonzero(~sing)
        d = hs.plan.cell_design()
        n = cells.n_cells
        e_h = expected_totals(np.bincount(hs.cell[keep], minlength=n).astype(np.float64), d)
        e_x = expected_totals(np.bincount(hs.cell[keep], weights=per[keep] * table.size[
            comp[keep]], minlength=n), d)
        cnt = table.counts[cells.key_codes[:, -1]].astype(np.float64)  # (cells, classes)
        sz = table.size[cells.key_codes[:, -1]].astype(np.float64)
        et += (cnt * e_h[:, None]).sum(axis=0)
        ew += (cnt * (e_x / sz)[:, None]).sum(axis=0)
    return et.reshape(n_cls), np.asarray(ew, np.float64).reshape(n_cls)


def _margin(codes: np.ndarray, x: np.ndarray, ex: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Totals and expectations summed per distinct row of ``codes`` (the person-key
    combinations of the cells)."""
    _, inv = np.unique(codes, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    return (np.bincount(inv, weights=x), np.bincount(inv, weights=ex))


def _by_key(config: Any, k: str, level: str, code: np.ndarray,
            counts: tuple[np.ndarray, np.ndarray],
            weights: tuple[np.ndarray, np.ndarray] | None) -> dict[str, Any]:
    kv = config.key_variables[k]
    values = list(kv.domain) + ([None] if kv.missing == "category" else [])
    o = np.bincount(code, weights=counts[0], minlength=kv.size)
    e = np.bincount(code, weights=counts[1], minlength=kv.size)
    if weights is not None:
        wo = np.bincount(code, weights=weights[0], minlength=kv.size)
        we = np.bincount(code, weights=weights[1], minlength=kv.size)
    rows = [{"value": values[c], "original": float(o[c]), "expected": float(e[c]),
             "weighted_original": None if weights is None else float(wo[c]),
             "weighted_expected": None if weights is None else float(we[c])}
            for c in np.flatnonzero(o > 0).tolist()]
    return {"name": k, "level": level, "categories": rows}
