"""The DP-PRAM optimiser: keep-probabilities ``q`` maximising ``I(X, Z)`` under eps-DP.

The objective is convex (Proposition 3.1), so :func:`dp_pram` evaluates it at every vertex of
the feasible polytope: the five families of Proposition 3.2 when its condition holds
(``S >= 4``, ``eps <= log(S - 2 + sqrt(S(S-4))) - log 2``; categories with equal ``p`` merged),
otherwise the general enumeration of :mod:`.vertices`. Above ``max_candidates`` the family-3
search falls back to a 1-flip local search (``exact=False``). docs/MECHANISMS.md s. 5.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import check_int, check_probability_vector
from .polytope import (
    check_eps,
    count_vertex_values,
    mutual_information,
    pram_epsilon,
    proposition_3_2_bound,
    proposition_3_2_holds,
    vertex_values,
)
from .result import DPPramResult
from .vertices import MAX_S_GENERAL, assignment_tables, enumerate_vertices

__all__ = ["dp_pram"]


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
        tabs = assignment_tables(mults, sizes)
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
    e = check_eps(eps)
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
