"""Matrix form (8) of Ayed, Battiston & Camerlenghi, its eps-DP polytope and objective.

A record in category ``x`` keeps its value with probability ``q_x`` and otherwise moves to one
of the other ``S - 1`` categories uniformly: ``M[x, x] = q_x``, ``M[x, z] = (1 - q_x)/(S - 1)``
(rows = true category, as in the paper). ``M`` is eps-DP iff the linear system ``C q <= b`` of
eqs. 12-17 holds (:func:`dp_pram_constraints`); the mutual information ``I(X, Z)`` (section
3.1) is convex in ``q``, so its maximum is at a vertex of that polytope. docs/MECHANISMS.md s. 5.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import xlogy

from .._validation import check_int, check_probability_vector, check_real

__all__ = [
    "pram_matrix",
    "released_marginal",
    "mutual_information",
    "vertex_values",
    "proposition_3_2_holds",
    "proposition_3_2_bound",
    "dp_pram_constraints",
    "is_dp_feasible",
    "pram_epsilon",
    "count_vertex_values",
]


def check_eps(eps: float) -> float:
    """The DP budget as a float, ``eps > 0``."""
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
    e = check_eps(eps)
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
    return check_eps(eps) <= proposition_3_2_bound(S)


def dp_pram_constraints(S: int, eps: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Linear form ``C q <= b`` of the DP constraints (Fact 1, eqs. 12-17) plus ``0 <= q <= 1``.

    For every ordered pair ``(k, l)``, ``x = q_k``, ``y = q_l``::

        (S-1) x + e^eps y <= e^eps          (12)/(13)
        -(S-1) e^eps y - x <= -1            (14)/(15)
        e^eps y - x <= e^eps - 1            (16)/(17), only for S >= 3

    ``C`` has ``3 S (S-1) + 2 S`` rows (``2 S (S-1) + 2 S`` for ``S = 2``).
    """
    SS = check_int(S, "S", 2, None)
    E = math.exp(check_eps(eps))
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
    return pram_epsilon(q) <= check_eps(eps) + rtol


def count_vertex_values(q: ArrayLike, eps: float, *, rtol: float = 1e-9) -> dict[str, int]:
    """How many ``q_k`` equal ``v_eps``, ``v_-eps``, ``v_min``, ``v_max`` (Tables 1-4 columns)."""
    qq = _q(q)
    v = vertex_values(qq.size, eps)
    out = {name: int(np.isclose(qq, val, rtol=rtol, atol=0).sum()) for name, val in v.items()}
    out["other"] = int(qq.size - sum(out.values()))
    return out
