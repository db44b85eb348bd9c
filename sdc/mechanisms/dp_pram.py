"""PRAM under differential privacy with maximal mutual information (Ayed, Battiston & Camerlenghi).

**Mechanism (matrix form 8).** A categorical variable ``X`` with ``S`` categories and
proportions ``p`` is post-randomized record by record: a record in category ``x`` keeps its
value with probability ``q_x`` and otherwise moves to one of the other ``S - 1`` categories
chosen uniformly::

    M[x, z] = q_x                  if z == x        (rows = true category, as in eq. 8)
            = (1 - q_x)/(S - 1)    otherwise

The released marginal is ``m_z = p_z q_z + sum_{k != z} p_k (1 - q_k)/(S-1)`` (eq. 9).

**Privacy constraint (eqs. 10-17).** ``M`` is eps-DP (eq. 6 with the Hamming neighbour
relation) iff for all ``k != k'``::

    max( (S-1) q_k/(1-q_k'), (1-q_k)/((S-1) q_k'), 1[S>=3] (1-q_k)/(1-q_k') ) <= e^eps   (10)

which is the linear system ``C q <= b`` made of (12)-(17) for every ordered pair
(:func:`dp_pram_constraints`).

**Objective.** The mutual information (in nats)
``f(q) = sum_x p_x (q_x log q_x + (1-q_x) log((1-q_x)/(S-1))) - sum_z m_z log m_z``
(section 3.1) is convex in ``q`` (Proposition 3.1, proof in Appendix 5.1), so its maximum
over the polytope is attained at a vertex.

**Search.** :func:`dp_pram` is exact:

* if Proposition 3.2's condition holds (``S >= 4`` and ``eps <= log(S - 2 + sqrt(S(S-4))) -
  log 2``; the Appendix 5.3 form, the main-text statement drops the ``- 2``), the vertices
  are, up to permutation, (1) all ``v_eps``; (2) all ``v_-eps``; (3) ``q_k in {v_eps,
  v_-eps}`` with between 2 and ``S-2`` of them at ``v_eps``; (4) one ``v_min``, the rest
  ``v_eps``; (5) one ``v_max``, the rest ``v_-eps``; with ``v_x = e^x/(e^x + S - 1)``,
  ``v_min = e^-eps/(e^eps + S - 1)`` and ``v_max = e^eps/(e^-eps + S - 1)`` (Appendix 5.3;
  the main-text definition of ``v_min`` is a typo equal to ``v_-eps``). Every vertex is
  evaluated; categories with equal ``p`` are exchangeable, so only the number of them at
  each value matters;
* otherwise (small ``S`` or large ``eps``) every vertex of ``{q : C q <= b}`` is found by
  solving all choices of ``S`` active constraints of the polytope restricted to the sorted
  cone ``q_1 >= ... >= q_S`` (only ``S + 6`` constraints there, :func:`enumerate_vertices`),
  and every assignment of each vertex's values to the categories is evaluated (``S <= 12``).

When the number of candidate vertices exceeds ``max_candidates`` (many distinct ``p`` with
large ``S``), the family-3 search falls back to a multi-start 1-flip local search and the
result says ``exact=False``.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import xlogy

from ._validation import check_int, check_probability_vector, check_real

__all__ = [
    "DPPramResult",
    "dp_pram",
    "pram_matrix",
    "released_marginal",
    "mutual_information",
    "vertex_values",
    "proposition_3_2_holds",
    "proposition_3_2_bound",
    "dp_pram_constraints",
    "is_dp_feasible",
    "pram_epsilon",
    "enumerate_vertices",
    "proposition_3_2_vertices",
    "count_vertex_values",
    "apply_dp_pram",
    "estimate_proportions",
    "project_to_simplex",
]

#: largest S for the general vertex enumeration
MAX_S_GENERAL = 12


# --------------------------------------------------------------------------- building blocks


def _eps(eps: float) -> float:
    return check_real(eps, "eps", 0.0, None, "neither")


def _q(q: ArrayLike, S: int | None = None) -> NDArray[np.float64]:
    arr = np.asarray(q, dtype=float)
    if arr.ndim != 1 or arr.size < 2 or np.any(~np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise ValueError(f"The 'q' parameter must be a 1-D array of at least 2 probabilities in [0, 1]. Got {np.asarray(q).tolist()!r} instead.")
    if S is not None and arr.size != S:
        raise ValueError(f"The 'q' parameter must have S={S} entries. Got {arr.size} instead.")
    return arr


def pram_matrix(q: ArrayLike) -> NDArray[np.float64]:
    """Matrix form (8): ``M[x, x] = q_x``, ``M[x, z] = (1 - q_x)/(S - 1)`` (rows = true)."""
    qq = _q(q)
    S = qq.size
    M = np.repeat(((1 - qq) / (S - 1))[:, None], S, axis=1)
    np.fill_diagonal(M, qq)
    return M


def released_marginal(p: ArrayLike, q: ArrayLike) -> NDArray[np.float64]:
    """``m_z = p_z q_z + sum_{k != z} p_k (1-q_k)/(S-1)`` (eq. 9), in O(S)."""
    pp = check_probability_vector(p, "p", min_size=2)
    qq = _q(q, pp.size)
    off = pp * (1 - qq) / (pp.size - 1)
    return pp * qq + off.sum() - off


def mutual_information(p: ArrayLike, q: ArrayLike) -> NDArray[np.float64] | float:
    """``I(X, Z)`` in nats for matrix form (8) (section 3.1), in O(S) per ``q``.

    ``q`` may be a single vector of length ``S`` or an ``(N, S)`` array of candidates
    (vectorized evaluation); ``0 log 0 = 0``.
    """
    pp = check_probability_vector(p, "p", min_size=2)
    Q = np.asarray(q, dtype=float)
    single = Q.ndim == 1
    Q = np.atleast_2d(Q)
    S = pp.size
    if Q.shape[1] != S:
        raise ValueError(f"The 'q' parameter must have S={S} columns. Got shape {np.asarray(q).shape} instead.")
    off = pp * (1 - Q) / (S - 1)  # p_k (1-q_k)/(S-1)
    m = pp * Q + off.sum(axis=1, keepdims=True) - off
    cond = xlogy(Q, Q) + xlogy(1 - Q, (1 - Q) / (S - 1))  # -H(Z | X = x)
    f = cond @ pp - xlogy(m, m).sum(axis=1)
    return float(f[0]) if single else f


def vertex_values(S: int, eps: float) -> dict[str, float]:
    """``v_eps, v_-eps, v_min, v_max`` of Proposition 3.2 / Appendix 5.3.

    ``v_x = e^x/(e^x + S - 1)``, ``v_min = e^-eps/(e^eps + S - 1)``,
    ``v_max = e^eps/(e^-eps + S - 1)``.
    """
    SS = check_int(S, "S", 2, None)
    e = _eps(eps)
    E = math.exp(e)
    return {
        "v_alpha": E / (E + SS - 1),
        "v_minus_alpha": 1 / E / (1 / E + SS - 1),
        "v_min": 1 / E / (E + SS - 1),
        "v_max": E / (1 / E + SS - 1),
    }


def proposition_3_2_bound(S: int) -> float:
    """``log(S - 2 + sqrt(S(S-4))) - log 2`` (Appendix 5.3); ``-inf`` for ``S < 4``.

    Derivation: ``u_eps`` satisfies (17) iff ``e^{2eps} - (S-2) e^eps + 1 <= 0``, i.e.
    ``e^eps <= (S - 2 + sqrt(S(S-4)))/2``; (16) always holds at ``u_eps``.
    """
    SS = check_int(S, "S", 2, None)
    if SS < 4:
        return -math.inf
    return math.log(SS - 2 + math.sqrt(SS * (SS - 4))) - math.log(2)


def proposition_3_2_holds(S: int, eps: float) -> bool:
    """Whether ``S >= 4`` and ``eps <= log(S - 2 + sqrt(S(S-4))) - log 2``."""
    return _eps(eps) <= proposition_3_2_bound(S)


def dp_pram_constraints(S: int, eps: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Linear form ``C q <= b`` of the DP constraints (Fact 1, eqs. 12-17) plus ``0 <= q <= 1``.

    For every ordered pair ``(k, l)``, ``x = q_k``, ``y = q_l``::

        (S-1) x + e^eps y <= e^eps          (12)/(13)
        -(S-1) e^eps y - x <= -1            (14)/(15)
        e^eps y - x <= e^eps - 1            (16)/(17), only for S >= 3

    ``C`` has ``3 S (S-1) + 2 S`` rows (``2 S (S-1) + 2 S`` for ``S = 2``).
    """
    SS = check_int(S, "S", 2, None)
    E = math.exp(_eps(eps))
    k, l_ = np.array([(a, b) for a in range(SS) for b in range(SS) if a != b]).T
    n = k.size
    rows = []
    rhs = []

    def pair(cx: float, cy: float, r: float) -> None:
        C = np.zeros((n, SS))
        C[np.arange(n), k] = cx
        C[np.arange(n), l_] = cy
        rows.append(C)
        rhs.append(np.full(n, r))

    pair(SS - 1, E, E)
    pair(-1.0, -(SS - 1) * E, -1.0)
    if SS >= 3:
        pair(-1.0, E, E - 1)
    rows += [np.eye(SS), -np.eye(SS)]
    rhs += [np.ones(SS), np.zeros(SS)]
    return np.vstack(rows), np.concatenate(rhs)


def pram_epsilon(q: ArrayLike) -> float:
    """Smallest eps for which matrix (8) is eps-DP: ``log max_{z, x != x'} M[x,z]/M[x',z]``."""
    M = pram_matrix(q)
    mx = M.max(axis=0)
    mn = M.min(axis=0)
    if np.any(mn == 0):
        return math.inf if np.any((mn == 0) & (mx > 0)) else 0.0
    return float(np.log((mx / mn).max()))


def is_dp_feasible(q: ArrayLike, eps: float, *, rtol: float = 1e-9) -> bool:
    """Whether matrix (8) with keep-probabilities ``q`` is eps-DP (condition 10)."""
    return pram_epsilon(q) <= _eps(eps) + rtol


def count_vertex_values(q: ArrayLike, eps: float, *, rtol: float = 1e-9) -> dict[str, int]:
    """How many ``q_k`` equal ``v_eps``, ``v_-eps``, ``v_min``, ``v_max`` (Tables 1-4 columns)."""
    qq = _q(q)
    v = vertex_values(qq.size, eps)
    out = {name: int(np.isclose(qq, val, rtol=rtol, atol=0).sum()) for name, val in v.items()}
    out["other"] = int(qq.size - sum(out.values()))
    return out


# --------------------------------------------------------------------------- vertex enumeration


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
    e = _eps(eps)
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


def _tables(mults: NDArray[np.int64], caps: NDArray[np.int64]) -> list[NDArray[np.int64]]:
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


def _search_general(p: NDArray[np.float64], e: float, max_candidates: int) -> tuple[float, NDArray[np.float64], int, bool]:
    S = p.size
    W = enumerate_vertices(S, e)
    order, gid, rank = _groups(p)
    sizes = np.bincount(gid)
    inv = np.empty(S, dtype=np.int64)
    inv[order] = np.arange(S)
    best: tuple[float, NDArray[np.float64] | None] = (-math.inf, None)
    n_cand = 0
    for w in W:  # loop over candidate vertices
        vals, mults = np.unique(w, return_counts=True)
        tabs = _tables(mults, sizes)
        n_cand += len(tabs)
        if n_cand > max_candidates:
            raise ValueError(
                f"The general vertex search needs more than max_candidates={max_candidates} evaluations for S={S}; "
                "raise 'max_candidates' or use eps within the Proposition 3.2 range."
            )
        T = np.stack(tabs)  # (N, n_values, n_groups)
        # position (sorted order) j in group g with rank r gets value i where
        # cumsum_i T[:, i, g] > r first holds
        cum = np.cumsum(T, axis=1)[:, :, gid]  # (N, n_values, S)
        idx = (cum <= rank[None, None, :]).sum(axis=1)  # (N, S)
        Qs = vals[idx]
        best = _best_of(p, Qs[:, inv], best)
    assert best[1] is not None
    return best[0], best[1], n_cand, True


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


# --------------------------------------------------------------------------- the optimiser


@dataclass(frozen=True)
class DPPramResult:
    """Solution of the DP-PRAM program (7) for proportions ``p`` and budget ``eps``.

    Attributes
    ----------
    p : proportions the design was optimised for.
    eps : the DP budget (``alpha`` in the paper).
    q : keep-probabilities of matrix form (8).
    mutual_information : ``I(X, Z)`` in nats at ``q``.
    family : which vertex family of Proposition 3.2 won (``"1 all v_alpha"``, ...), or
        ``"general vertex"`` when the general enumeration was used.
    counts : number of ``q_k`` at ``v_alpha, v_minus_alpha, v_min, v_max`` (and ``other``).
    exact : ``True`` if every vertex was evaluated (the optimum is certified).
    method : ``"proposition-3.2"``, ``"general"`` or ``"local-search"``.
    n_candidates : number of candidate vertices evaluated.
    """

    p: NDArray[np.float64]
    eps: float
    q: NDArray[np.float64]
    mutual_information: float
    family: str
    counts: dict[str, int] = field(default_factory=dict)
    exact: bool = True
    method: str = "proposition-3.2"
    n_candidates: int = 0

    @property
    def S(self) -> int:
        """Number of categories."""
        return int(self.q.size)

    @property
    def matrix(self) -> NDArray[np.float64]:
        """Matrix form (8), **rows = true category**: ``M[x, z] = P(Z = z | X = x)``."""
        return pram_matrix(self.q)

    @property
    def transition_matrix(self) -> NDArray[np.float64]:
        """``M.T``, the library convention (columns = true category) used by ``parity``."""
        return self.matrix.T

    @property
    def released_marginal(self) -> NDArray[np.float64]:
        """Expected distribution ``m`` of the released values (eq. 9)."""
        return released_marginal(self.p, self.q)

    def apply(self, values: ArrayLike, rng: np.random.Generator) -> NDArray[np.int64]:
        """Shortcut for :func:`apply_dp_pram`."""
        return apply_dp_pram(values, self, rng)

    def estimate(self, released_codes: ArrayLike, *, project: bool = True) -> NDArray[np.float64]:
        """Shortcut for :func:`estimate_proportions`."""
        return estimate_proportions(released_codes, self, project=project)


def _family_name(counts: dict[str, int], S: int) -> str:
    if counts["v_min"] == 1 and counts["v_alpha"] == S - 1:
        return "4: one v_min, rest v_alpha"
    if counts["v_max"] == 1 and counts["v_minus_alpha"] == S - 1:
        return "5: one v_max, rest v_minus_alpha"
    if counts["v_alpha"] == S:
        return "1: all v_alpha"
    if counts["v_minus_alpha"] == S:
        return "2: all v_minus_alpha"
    if counts["v_alpha"] + counts["v_minus_alpha"] == S:
        return "3: mixed v_alpha / v_minus_alpha"
    return "general vertex"


def _groups(p: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Sort order, group id per sorted position, rank within group (ties = equal p)."""
    order = np.argsort(p, kind="stable")
    ps = p[order]
    new = np.r_[True, ps[1:] != ps[:-1]]
    gid = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    rank = np.arange(p.size) - starts[gid]
    return order, gid, rank


def _best_of(p: NDArray[np.float64], Q: NDArray[np.float64], best: tuple[float, NDArray[np.float64] | None]) -> tuple[float, NDArray[np.float64] | None]:
    if Q.shape[0] == 0:
        return best
    f = mutual_information(p, Q)
    i = int(np.argmax(f))
    if best[1] is None or f[i] > best[0]:
        return float(f[i]), Q[i].copy()
    return best


def _search_prop32(p: NDArray[np.float64], e: float, max_candidates: int, chunk: int = 1 << 15) -> tuple[float, NDArray[np.float64], int, bool]:
    S = p.size
    v = vertex_values(S, e)
    a, b = v["v_alpha"], v["v_minus_alpha"]
    order, gid, rank = _groups(p)
    sizes = np.bincount(gid)
    G = sizes.size
    inv = np.empty(S, dtype=np.int64)
    inv[order] = np.arange(S)
    best: tuple[float, NDArray[np.float64] | None] = (-math.inf, None)
    # families 4 and 5: one special category per group (members of a group are exchangeable)
    first_of_group = np.flatnonzero(rank == 0)
    for special, rest in (("v_min", a), ("v_max", b)):
        Qs = np.full((G, S), rest)
        Qs[np.arange(G), first_of_group] = v[special]
        best = _best_of(p, Qs[:, inv], best)
    n_cand = 2 * G
    # families 1-3: number of members of each group at v_alpha
    radix = sizes + 1
    total = int(np.prod(radix.astype(float)))
    exact = total <= max_candidates
    if exact:
        place = np.cumprod(np.r_[1, radix[:-1]])
        for start in range(0, total, chunk):  # chunks of candidate vertices
            idx = np.arange(start, min(start + chunk, total))
            cnt = (idx[:, None] // place[None, :]) % radix[None, :]  # (N, G)
            n_alpha = cnt.sum(axis=1)
            ok = (n_alpha == 0) | (n_alpha == S) | ((n_alpha >= 2) & (n_alpha <= S - 2))
            cnt = cnt[ok]
            Qs = np.where(rank[None, :] < cnt[:, gid], a, b)
            best = _best_of(p, Qs[:, inv], best)
            n_cand += int(ok.sum())
    else:
        warnings.warn(
            f"{total} candidate vertices exceed max_candidates={max_candidates}; using a "
            "multi-start local search over the v_alpha/v_minus_alpha vertices (not certified).",
            RuntimeWarning,
            stacklevel=3,
        )
        f_ls, q_ls, n_ls = _local_search(p, a, b)
        n_cand += n_ls
        if f_ls > best[0]:
            best = (f_ls, q_ls)
    assert best[1] is not None
    return best[0], best[1], n_cand, exact


def _local_search(p: NDArray[np.float64], a: float, b: float) -> tuple[float, NDArray[np.float64], int]:
    """1-flip ascent over ``{a, b}^S`` from the S+1 "top-j by p" starts (loops over vertices)."""
    S = p.size
    order = np.argsort(-p)
    best_f, best_q, n = -math.inf, np.full(S, a), 0
    for j in range(S + 1):
        x = np.full(S, b)
        x[order[:j]] = a
        f = float(mutual_information(p, x))
        while True:
            flips = np.repeat(x[None, :], S, axis=0)
            idx = np.arange(S)
            flips[idx, idx] = np.where(x == a, b, a)
            cnt = (flips == a).sum(axis=1)
            valid = (cnt == 0) | (cnt == S) | ((cnt >= 2) & (cnt <= S - 2))
            fv = np.where(valid, mutual_information(p, flips), -np.inf)
            n += S
            i = int(np.argmax(fv))
            if fv[i] <= f + 1e-15:
                break
            x, f = flips[i], float(fv[i])
        if f > best_f:
            best_f, best_q = f, x.copy()
    return best_f, best_q, n


def dp_pram(
    p: ArrayLike,
    eps: float,
    *,
    method: str = "auto",
    max_candidates: int = 1 << 22,
) -> DPPramResult:
    """Keep-probabilities ``q`` of form (8) maximising ``I(X, Z)`` subject to eps-DP.

    Solves program (7) of Ayed, Battiston & Camerlenghi exactly by evaluating the mutual
    information at every vertex of the feasible polytope (the objective is convex,
    Proposition 3.1, so a vertex is optimal).

    Parameters
    ----------
    p : array of shape (S,), S >= 2
        Category proportions (sum to 1). They should be *public* (see the DP caveat in
        :func:`apply_dp_pram`).
    eps : float > 0
        Differential-privacy budget (``alpha`` in the paper).
    method : {"auto", "proposition-3.2", "general"}
        ``auto`` uses the vertex families of Proposition 3.2 when its condition holds and
        the general vertex enumeration (``S <= 12``) otherwise.
    max_candidates : int
        Cap on the number of family-3 vertices evaluated exhaustively (after merging
        categories with equal ``p``); above it a local search is used and ``exact=False``.

    Returns
    -------
    DPPramResult
        With ``.q``, ``.matrix`` (form 8, rows = true), ``.mutual_information`` (nats),
        ``.family``, ``.counts`` and ``.estimate(released_codes)``.
    """
    pp = check_probability_vector(p, "p", min_size=2)
    e = _eps(eps)
    S = pp.size
    if method not in ("auto", "proposition-3.2", "general"):
        raise ValueError(f"The 'method' parameter must be one of 'auto', 'proposition-3.2', 'general'. Got {method!r} instead.")
    mc = check_int(max_candidates, "max_candidates", 1, None)
    holds = proposition_3_2_holds(S, e)
    use = method
    if method == "auto":
        use = "proposition-3.2" if holds else "general"
    if use == "proposition-3.2":
        if not holds:
            raise ValueError(
                f"Proposition 3.2 needs S >= 4 and eps <= {proposition_3_2_bound(S):.6g} for S={S}. Got eps={e!r}."
            )
        f, q, n_cand, exact = _search_prop32(pp, e, mc)
        meth = "proposition-3.2" if exact else "local-search"
    else:
        if S > MAX_S_GENERAL:
            raise ValueError(
                f"The general vertex search supports S <= {MAX_S_GENERAL}; with S={S} the 'eps' parameter "
                f"must be at most {proposition_3_2_bound(S):.6g} (Proposition 3.2). Got eps={e!r}."
            )
        f, q, n_cand, exact = _search_general(pp, e, mc)
        meth = "general"
    q = _strictly_feasible(q, e)
    f = float(mutual_information(pp, q))
    counts = count_vertex_values(q, e)
    family = _family_name(counts, S)
    return DPPramResult(
        p=pp, eps=e, q=q, mutual_information=float(f), family=family, counts=counts,
        exact=exact, method=meth, n_candidates=int(n_cand),
    )


def _strictly_feasible(q: NDArray[np.float64], e: float) -> NDArray[np.float64]:
    """Make ``q`` satisfy eps-DP exactly, not just up to the search's 1e-9 tolerance.

    Vertex values found numerically (rounded to 10 decimals to deduplicate) may exceed the
    ratio bound e^eps by ~1e-10. Mixing with the uniform design, q' = lam q + (1 - lam)/S,
    mixes M with a constant matrix, which can only move every ratio M[x,z]/M[x',z] towards 1;
    the smallest such step that restores feasibility changes I(X, Z) by ~1e-10.
    """
    S = q.size
    lam = 1.0
    out = q
    while pram_epsilon(out) > e and lam > 0.5:
        lam -= 1e-9 if lam == 1.0 else (1.0 - lam)
        out = lam * q + (1.0 - lam) / S
    return out


# --------------------------------------------------------------------------- release helpers


def apply_dp_pram(
    values: ArrayLike, design: DPPramResult, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Post-randomize a whole column of category codes with matrix form (8), vectorized.

    Each record keeps its code ``x`` with probability ``q[x]``; otherwise it gets one of the
    other ``S - 1`` codes uniformly at random, drawn as ``(x + U) mod S`` with
    ``U ~ Uniform{1, ..., S-1}``. Records are randomized independently; no Python loop.

    **What the DP guarantee is, and what it covers.** ``M`` satisfies
    ``max_z M[x, z] / M[x', z] <= e^eps`` for all ``x != x'`` (eq. 10). Hence the released
    column ``Z_1..Z_n`` is eps-differentially private in the sense of eq. 6: for two input
    columns that differ in the value of *this variable* for *one record*, the probability of
    any released column changes by a factor of at most ``e^eps`` (equivalently, each record's
    value is eps-locally private). Scope and caveats:

    * it applies only to the variable passed in ``values``; other columns of the file are
      not protected, and inference about this variable from correlated unperturbed columns
      is not prevented (DP bounds only what the randomization itself reveals);
    * it is conditional on ``q``: ``q`` is optimised for proportions ``p``, so if ``p`` is
      computed from the same confidential file, ``q`` (published or implied) is itself a
      function of the data and is outside the guarantee. Use public/previous-release
      proportions, or a separately privatized estimate of ``p`` (its budget adds to eps);
    * randomizing several variables this way composes: the budgets add;
    * it does not protect record presence/absence (neighbours differ by a value, not a row).

    Parameters
    ----------
    values : integer array of codes ``0..S-1``.
    design : :class:`DPPramResult` from :func:`dp_pram`.
    rng : ``numpy.random.Generator``.
    """
    if not isinstance(design, DPPramResult):
        raise ValueError(f"The 'design' parameter must be a DPPramResult. Got {type(design).__name__} instead.")
    S = design.S
    x = np.asarray(values)
    if x.ndim != 1:
        raise ValueError(f"The 'values' parameter must be a 1-D array of codes. Got shape {x.shape} instead.")
    if x.size and (not np.issubdtype(x.dtype, np.integer) or x.min() < 0 or x.max() >= S):
        raise ValueError(f"The 'values' parameter must contain integer codes in the range [0, {S - 1}].")
    x = x.astype(np.int64)
    keep = rng.random(x.size) < design.q[x]
    shift = rng.integers(1, S, size=x.size)
    return np.where(keep, x, (x + shift) % S)


def project_to_simplex(v: ArrayLike) -> NDArray[np.float64]:
    """Euclidean projection onto the probability simplex (sort-based, O(S log S)).

    ``argmin_{w >= 0, sum w = 1} ||w - v||_2`` = ``max(v - tau, 0)`` with the threshold
    ``tau`` found from the sorted entries (Held, Wolfe & Crowder 1974; Duchi et al. 2008).
    """
    x = np.asarray(v, dtype=float)
    if x.ndim != 1 or x.size < 1 or not np.all(np.isfinite(x)):
        raise ValueError("The 'v' parameter must be a finite 1-D array.")
    u = np.sort(x)[::-1]
    css = np.cumsum(u) - 1
    idx = np.arange(1, x.size + 1)
    rho = np.flatnonzero(u - css / idx > 0)[-1]
    tau = css[rho] / (rho + 1)
    return np.maximum(x - tau, 0.0)


def estimate_proportions(
    released_codes: ArrayLike, design: DPPramResult, *, project: bool = True
) -> NDArray[np.float64]:
    """Estimate the true proportions ``p`` from released codes (inverse of ``M``).

    With ``m_hat`` the observed proportions of the released codes, ``E[m_hat] = M' p``
    (eq. 9), so ``p_tilde = (M')^{-1} m_hat`` is unbiased; it can leave the simplex, so by
    default it is projected onto the simplex (:func:`project_to_simplex`), which reduces
    the error but introduces a small bias near the boundary. ``project=False`` returns the
    unbiased ``p_tilde``. Raises ``ValueError`` if ``M`` is singular (q at ``1/S``).
    """
    if not isinstance(design, DPPramResult):
        raise ValueError(f"The 'design' parameter must be a DPPramResult. Got {type(design).__name__} instead.")
    S = design.S
    z = np.asarray(released_codes)
    if z.ndim != 1 or z.size < 1:
        raise ValueError("The 'released_codes' parameter must be a non-empty 1-D array of codes.")
    if not np.issubdtype(z.dtype, np.integer) or z.min() < 0 or z.max() >= S:
        raise ValueError(f"The 'released_codes' parameter must contain integer codes in the range [0, {S - 1}].")
    m_hat = np.bincount(z.astype(np.int64), minlength=S) / z.size
    M = design.matrix
    try:
        est = np.linalg.solve(M.T, m_hat)
    except np.linalg.LinAlgError as exc:  # pragma: no cover - only at q_x = 1/S
        raise ValueError("The DP-PRAM matrix is singular; proportions are not identifiable.") from exc
    return project_to_simplex(est) if project else est
