"""Vertex enumeration of the DP-PRAM polytope (general search, ``S <= 12``).

Every vertex of ``{q : C q <= b}`` sorted decreasingly is a vertex of the polytope restricted
to the cone ``q_1 >= ... >= q_S``, where only ``S + 6`` constraints remain
(:func:`enumerate_vertices`); :func:`assignment_tables` lists the ways to give a vertex's
values to categories with equal proportions. :func:`proposition_3_2_vertices` lists the five
families of Proposition 3.2 (Appendix 5.3) for checks. docs/MECHANISMS.md s. 5.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.typing import NDArray

from .._validation import check_int
from .polytope import check_eps, vertex_values

__all__ = [
    "MAX_S_GENERAL",
    "enumerate_vertices",
    "assignment_tables",
    "proposition_3_2_vertices",
]

#: largest S for the general vertex enumeration
MAX_S_GENERAL = 12


def _sorted_cone_system(S: int, e: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """DP constraints restricted to the cone ``q_1 >= q_2 >= ... >= q_S`` (``S + 6`` rows).

    Each constraint (12)-(17) is monotone in its two coordinates, so on sorted ``q`` it holds
    for every ordered pair iff it holds for the extreme pair: (12) for ``(q_1, q_2)`` in both
    orders, (14) for ``(q_S, q_{S-1})`` in both orders, (16) for ``x = q_S, y = q_1``.
    """
    E = math.exp(e)
    rows: list[NDArray[np.float64]] = []
    rhs: list[float] = []

    def row(coefs: dict[int, float], r: float) -> None:
        v = np.zeros(S)
        for i, c in coefs.items():
            v[i] += c
        rows.append(v)
        rhs.append(r)

    row({0: S - 1, 1: E}, E)  # (12), x = q_1, y = q_2
    row({1: S - 1, 0: E}, E)  # (12), x = q_2, y = q_1
    row({S - 1: -1.0, S - 2: -(S - 1) * E}, -1.0)  # (14), x = q_S, y = q_{S-1}
    row({S - 2: -1.0, S - 1: -(S - 1) * E}, -1.0)  # (14), x = q_{S-1}, y = q_S
    if S >= 3:
        row({0: E, S - 1: -1.0}, E - 1)  # (16), y = q_1, x = q_S
    for i in range(S - 1):
        row({i: -1.0, i + 1: 1.0}, 0.0)  # q_{i+1} <= q_i
    row({0: 1.0}, 1.0)  # q_1 <= 1
    row({S - 1: -1.0}, 0.0)  # q_S >= 0
    return np.vstack(rows), np.asarray(rhs)


def enumerate_vertices(S: int, eps: float, *, decimals: int = 10) -> NDArray[np.float64]:
    """Sorted value vectors of all vertices of the feasible polytope (general search).

    Every vertex of ``{q : C q <= b}`` sorted decreasingly is a vertex of the polytope
    intersected with the cone ``q_1 >= ... >= q_S``, which needs only ``S + 6`` constraints
    (:func:`_sorted_cone_system`). All ``binom(S + 6, S)`` choices of ``S`` active
    constraints are solved (batched), infeasible and duplicate points are dropped. The
    result can contain a few extra feasible points (vertices created by the ordering
    constraints), which is harmless when maximising. Returns an ``(N, S)`` array of
    decreasing vectors; the optimiser then tries every assignment of their values to
    categories. ``S <= MAX_S_GENERAL``.
    """
    SS = check_int(S, "S", 2, MAX_S_GENERAL)
    e = check_eps(eps)
    A, b = _sorted_cone_system(SS, e)
    combos = np.array(list(itertools.combinations(range(A.shape[0]), SS)), dtype=np.int64)
    out = []
    for start in range(0, combos.shape[0], 1 << 14):  # chunks of constraint subsets
        cb = combos[start : start + (1 << 14)]
        As = A[cb]
        bs = b[cb]
        det = np.linalg.det(As)
        ok = np.abs(det) > 1e-10
        if not np.any(ok):
            continue
        X = np.linalg.solve(As[ok], bs[ok][..., None])[..., 0]
        feas = (X @ A.T <= b + 1e-9).all(axis=1)
        out.append(X[feas])
    V = np.vstack(out) if out else np.empty((0, SS))
    return np.unique(np.round(V, decimals), axis=0)


def assignment_tables(mults: NDArray[np.int64], caps: NDArray[np.int64]) -> list[NDArray[np.int64]]:
    """All non-negative integer tables with row sums ``mults`` and column sums ``caps``.

    Row ``i`` = how many members of each p-group get the ``i``-th distinct value. Loops run
    over values and groups (never records).
    """
    results: list[NDArray[np.int64]] = []
    n_val, n_grp = mults.size, caps.size

    def rec(i: int, cap: NDArray[np.int64], acc: list[NDArray[np.int64]]) -> None:
        if i == n_val:
            results.append(np.vstack(acc))
            return
        for comp in _compositions(int(mults[i]), cap):
            rec(i + 1, cap - comp, acc + [comp])

    rec(0, caps.copy(), [])
    return results if n_val else [np.zeros((0, n_grp), dtype=np.int64)]


def _compositions(m: int, cap: NDArray[np.int64]) -> list[NDArray[np.int64]]:
    out: list[NDArray[np.int64]] = []
    G = cap.size
    suffix = np.r_[np.cumsum(cap[::-1])[::-1], 0]

    def rec(g: int, left: int, acc: list[int]) -> None:
        if g == G:
            if left == 0:
                out.append(np.array(acc, dtype=np.int64))
            return
        lo = max(0, left - int(suffix[g + 1]))
        for c in range(lo, min(int(cap[g]), left) + 1):
            rec(g + 1, left - c, acc + [c])

    rec(0, m, [])
    return out


def proposition_3_2_vertices(S: int, eps: float) -> NDArray[np.float64]:
    """The vertex list of Proposition 3.2 with all permutations (for small ``S``; tests)."""
    SS = check_int(S, "S", 4, 16)
    v = vertex_values(SS, eps)
    a, b = v["v_alpha"], v["v_minus_alpha"]
    codes = np.arange(2**SS)[:, None]
    bits = ((codes >> np.arange(SS)) & 1).astype(bool)
    n1 = bits.sum(axis=1)
    keep = (n1 == 0) | (n1 == SS) | ((n1 >= 2) & (n1 <= SS - 2))
    cube = np.where(bits[keep], a, b)
    fam4 = np.full((SS, SS), a)
    np.fill_diagonal(fam4, v["v_min"])
    fam5 = np.full((SS, SS), b)
    np.fill_diagonal(fam5, v["v_max"])
    return np.vstack([cube, fam4, fam5])
