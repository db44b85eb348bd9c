"""The composition intruder of the small groups of a two-stage release, exactly
(``risk.large_groups``, docs/METHOD.md 7.15, docs/HOUSEHOLDS.md "Large groups").

The composition intruder knows a group's group-level keys (HK) and the multiset of its
members' person-key classes (its composition) and picks uniformly among the released groups
with exactly these values. Under the two-stage release (no ``protect``) a group g of size s
is released with HK' drawn by the household stage from its household cell's row and each
member's class drawn by the person stage from its person cell's row, all independently
(every unit draws with its own identity), and every group keeps its size. So, for a target
g with (HK_g, c_g),

    p_h = P(HK'_h = HK_g) * P({released classes of h's members} = c_g)   (h of size s),
    R_g = p_g * E[1 / (1 + S_g)],   S_g = sum_{h != g} Bernoulli(p_h)   (Poisson-binomial),

and P(multiset = c) is the permanent of the s x s matrix A[i, slot] = q_i(class of slot)
divided by prod_k c_k! (Ryser's formula, vectorized over the groups of the size). The
certificate is max over the groups of at most ``max_size`` members of R_g: exact, no replay.
Groups above ``max_size`` are outside this intruder's threat model (an intruder does not know
the key values of every employee of a 200-employee enterprise); the household stage certifies
the group-level intruder and the person stage the person intruder given the group keys.

Loops over group sizes and target groups (not records); the cost is
O(sum_s G_s^2 2^s s^2) for G_s groups of size s <= ``max_size``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MAX_SMALL", "SAMPLED_MEMBERS", "group_risks", "small_group_composition"]

SAMPLED_MEMBERS = ("members are a sample of each group: the composition intruder is outside "
                   "the threat model, declared by the config (input.members: sampled)")
"""What every output says of a release under ``input.members: sampled`` (threshold 0: no
group is in the composition intruder's model; docs/HOUSEHOLDS.md "Sampled members")."""

MAX_SMALL = 12
"""Largest ``risk.large_groups`` threshold (Ryser's permanent is O(2^s s^2) per pair)."""


def _transition(plan: Any, cells: np.ndarray, n_cells: int) -> np.ndarray:
    """(len(cells), n_cells) dense rows of the stage's transition P(released l | cell j) for
    ``cells`` (uniform NZY moves to the other cells of the destination group, or the near
    design's W row when it has one)."""
    cells = np.asarray(cells, np.int64)
    out = np.zeros((cells.size, n_cells))
    out[np.arange(cells.size), cells] = 1.0
    group = plan.cell_dest_group
    sens = np.flatnonzero(plan.cell_prb[cells] >= 0)
    if not sens.size:
        return out
    m = plan.move_probability(cells[sens])
    for r, j, mj in zip(sens.tolist(), cells[sens].tolist(), m.tolist(), strict=True):
        out[r, j] = 1.0 - mj
        if plan.dest_indptr is not None and plan.dest_indptr[j + 1] > plan.dest_indptr[j]:
            lo, hi = plan.dest_indptr[j], plan.dest_indptr[j + 1]
            np.add.at(out[r], plan.dest_cell[lo:hi], mj * plan.dest_weight[lo:hi])
            continue
        others = np.flatnonzero(group == group[j])
        others = others[others != j]
        if others.size:
            out[r, others] += mj / others.size
        else:  # a PRB of one cell: nowhere to move
            out[r, j] = 1.0
    return out


def _permanents(a: np.ndarray) -> np.ndarray:
    """Permanents of the (G, s, s) matrices ``a`` (Ryser)."""
    g, s, _ = a.shape
    if s == 0:
        return np.ones(g)
    subsets = ((np.arange(1, 2 ** s)[:, None] >> np.arange(s)) & 1).astype(float)  # (2^s-1, s)
    sums = a @ subsets.T                                    # (G, s, 2^s - 1)
    sign = (-1.0) ** subsets.sum(axis=1)                    # (-1)^|S|
    return (-1.0) ** s * (np.prod(sums, axis=1) * sign).sum(axis=1)


def _expected_inverse(p: np.ndarray) -> float:
    """E[1 / (1 + S)] for S a sum of independent Bernoulli(p)."""
    p = p[p > 0]
    pmf = np.zeros(p.size + 1)
    pmf[0] = 1.0
    for i, q in enumerate(p.tolist()):
        pmf[1:i + 2] = pmf[1:i + 2] * (1 - q) + pmf[:i + 1] * q
        pmf[0] *= 1 - q
    return float((pmf / np.arange(1, p.size + 2)).sum())


def group_risks(households: Any, persons: Any, code: np.ndarray, n_h: int,
                person_key_index: list[int], max_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(groups, R): the groups of at most ``max_size`` members (indices 0..n_h-1) and the
    composition intruder's exact success probability R_g against each (module docstring).
    ``households`` / ``persons``: the two stages'
    :class:`~sdc.reports.households.StageDraws` (``households.cell`` per group 0..n_h-1,
    ``persons.cell`` per person), ``code`` every person's group, ``person_key_index`` the
    person keys' columns in ``persons.key_codes``."""
    code = np.asarray(code, np.int64)
    size = np.bincount(code, minlength=n_h)
    small = size <= max_size
    if not small.any():
        return np.zeros(0, np.int64), np.zeros(0)
    h_cell = np.asarray(households.cell, np.int64)
    hk_id = np.unique(households.key_codes, axis=0, return_inverse=True)[1].reshape(-1)
    n_hk = int(hk_id.max()) + 1
    hu, h_inv = np.unique(h_cell[small], return_inverse=True)
    h_rows = _transition(households.plan, hu, households.key_codes.shape[0])
    p_hk = np.zeros((hu.size, n_hk))
    np.add.at(p_hk.T, hk_id, h_rows.T)  # released cell -> released HK combination
    p_hk = p_hk[h_inv.reshape(-1)]
    small_row = np.full(n_h, -1, np.int64)
    small_row[small] = np.arange(int(small.sum()))
    p_cell = np.asarray(persons.cell, np.int64)
    cls_of_cell = np.unique(persons.key_codes[:, person_key_index], axis=0,
                            return_inverse=True)[1].reshape(-1)
    n_cls = int(cls_of_cell.max()) + 1
    in_small = small[code]
    pu, p_inv = np.unique(p_cell[in_small], return_inverse=True)
    pr = _transition(persons.plan, pu, persons.key_codes.shape[0])
    q = np.zeros((pu.size, n_cls))
    np.add.at(q.T, cls_of_cell, pr.T)
    q = q[p_inv.reshape(-1)]  # P(released class | person), persons of the small groups
    own_cls = cls_of_cell[p_cell[in_small]]
    grp = code[in_small]
    out_g, out_r = [], []
    for s in np.unique(size[small]).tolist():
        groups = np.flatnonzero(size == s)
        # members of each group of size s, in person order: (G, s) rows into q
        sel = np.flatnonzero(size[grp] == s)
        members = sel[np.argsort(grp[sel], kind="stable")].reshape(groups.size, s)
        qm = q[members]                                      # (G, s, n_cls)
        for g_i, g in enumerate(groups.tolist()):
            slots = np.sort(own_cls[members[g_i]])
            _, mult = np.unique(slots, return_counts=True)
            pc = _permanents(qm[:, :, slots]) / _factorials(mult)  # P(composition c_g | h)
            p = p_hk[small_row[groups], hk_id[h_cell[g]]] * np.clip(pc, 0.0, 1.0)
            out_g.append(g)
            out_r.append(float(p[g_i] * _expected_inverse(np.delete(p, g_i))))
    return np.asarray(out_g, np.int64), np.asarray(out_r)


def small_group_composition(households: Any, persons: Any, code: np.ndarray, n_h: int,
                            person_key_index: list[int], max_size: int,
                            xi: float) -> dict[str, Any]:
    """The exact composition certificate over the groups of at most ``max_size`` members
    (arguments as :func:`group_risks`). Returns ``threshold``, ``small_groups``,
    ``small_persons``, ``large_groups``, ``large_persons``, ``certificate`` (max R_g; 0 with
    no small group), ``certificate_at`` (the group size where it is attained), the small
    groups above xi (``groups_above_xi``, by size) and ``exceeds_xi``."""
    code = np.asarray(code, np.int64)
    size = np.bincount(code, minlength=n_h)
    small = size <= max_size
    groups, r = group_risks(households, persons, code, n_h, person_key_index, max_size)
    above = groups[r > xi + 1e-9]
    best = int(np.argmax(r)) if r.size else -1
    return {
        "threshold": int(max_size), "small_groups": int(small.sum()),
        "small_persons": int(size[small].sum()), "large_groups": int((~small).sum()),
        "large_persons": int(size[~small].sum()),
        "certificate": float(r[best]) if r.size else 0.0,
        "certificate_at": {"group_size": int(size[groups[best]])} if r.size else {},
        "groups_above_xi": {str(k): int(v) for k, v in zip(
            *np.unique(size[above], return_counts=True), strict=True)},
        "xi": float(xi), "exceeds_xi": bool(r.size and r.max() > xi + 1e-9)}


def _factorials(mult: np.ndarray) -> float:
    from math import factorial

    return float(np.prod([factorial(int(c)) for c in mult]))
