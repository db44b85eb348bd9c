"""Privacy of a randomized-response / PRAM transition matrix ``P`` (columns = true categories).

Everything rests on the parity ``eta(P) = max_i max_j p_ij / min_j p_ij`` (Chai 2019
Definition 3.3; Nayak 2020 Definition 3.4): eps-LDP iff ``eta <= e^eps``; beta-factor privacy
iff ``eta <= beta``; rho1-to-rho2 privacy iff ``eta <= rho2 (1 - rho1) / (rho1 (1 - rho2))``;
(h_l, h_u)-SIP iff ``eta <= B(h)`` (Chai 2019 ch. 3-4; Nayak 2020 Theorem 3.1); admissible in
C_gamma iff every row has parity gamma and two distinct values (Chai 2019 Theorems 5.4-5.5).
docs/MECHANISMS.md s. 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_real, check_transition_matrix

__all__ = [
    "row_parity",
    "parity",
    "is_eps_ldp",
    "ldp_epsilon",
    "is_beta_factor_private",
    "rho_to_gamma",
    "is_rho1_rho2_private",
    "combine_breach_boundaries",
    "privacy_demand",
    "is_sip",
    "precise_upper_boundary",
    "is_admissible",
    "has_proportional_rows",
]

#: relative tolerance used when comparing a parity to a bound (floating point slack only)
PARITY_RTOL = 1e-9


def row_parity(P: ArrayLike) -> NDArray[np.float64]:
    """Row parities ``eta_i(P) = max_j p_ij / min_j p_ij`` (Chai 2019, eq. 3.5).

    Conventions ``0/0 = 1`` (an all-zero row has parity 1) and ``a/0 = inf`` for ``a > 0``.

    Parameters
    ----------
    P : array of shape (m, k)
        Transition matrix, columns = true categories (each column sums to 1).

    Returns
    -------
    ndarray of shape (m,)
    """
    A = check_transition_matrix(P)
    mx = A.max(axis=1)
    mn = A.min(axis=1)
    out = np.empty(A.shape[0], dtype=float)
    zero_min = mn == 0
    out[~zero_min] = mx[~zero_min] / mn[~zero_min]
    out[zero_min & (mx == 0)] = 1.0  # 0/0 = 1
    out[zero_min & (mx > 0)] = np.inf  # a/0 = inf
    return out


def parity(P: ArrayLike) -> float:
    """Parity ``eta(P) = max_i eta_i(P)`` (Chai 2019, Definition 3.3; Nayak 2020, Def. 3.4).

    ``eta(P) >= 1`` and it is finite iff every entry of ``P`` is positive.
    """
    return float(row_parity(P).max())


def ldp_epsilon(P: ArrayLike) -> float:
    """Smallest ``eps`` with ``P`` eps-LDP, i.e. ``log eta(P)`` (``inf`` if a zero entry)."""
    eta = parity(P)
    return math.inf if math.isinf(eta) else math.log(eta)


def is_eps_ldp(P: ArrayLike, eps: float) -> bool:
    """Whether ``P`` provides eps-local differential privacy: ``eta(P) <= e^eps``.

    Chai 2019, Definition 3.4 (eq. 3.7) and the equivalence stated after it; Nayak 2020,
    Definition 3.5. A relative slack of ``1e-9`` absorbs floating point error only.
    """
    e = check_real(eps, "eps", 0.0, None, "left")
    return parity(P) <= math.exp(e) * (1 + PARITY_RTOL)


def is_beta_factor_private(P: ArrayLike, beta: float) -> bool:
    """beta-factor privacy (Chai 2019, Definition 3.2) holds iff ``eta(P) <= beta`` (Thm 3.2)."""
    b = check_real(beta, "beta", 1.0, None, "neither")
    return parity(P) <= b * (1 + PARITY_RTOL)


def rho_to_gamma(rho1: float, rho2: float) -> float:
    """``gamma = rho2 (1 - rho1) / (rho1 (1 - rho2))`` (Chai 2019, eq. 3.6)."""
    r1 = check_real(rho1, "rho1", 0.0, 1.0, "neither")
    r2 = check_real(rho2, "rho2", r1, 1.0, "neither")
    return r2 * (1 - r1) / (r1 * (1 - r2))


def is_rho1_rho2_private(P: ArrayLike, rho1: float, rho2: float) -> bool:
    """rho1-to-rho2 privacy (Chai 2019, Def. 3.1) iff ``eta(P) <= rho_to_gamma(rho1, rho2)``.

    Sufficiency is Theorem 3.1 (Evfimievski et al. 2003); necessity follows from
    Theorem 4.1 of the dissertation (the breach region is that of h-CSIP).
    """
    return parity(P) <= rho_to_gamma(rho1, rho2) * (1 + PARITY_RTOL)


def combine_breach_boundaries(
    h_l: Callable[[NDArray[np.float64]], ArrayLike],
    h_u: Callable[[NDArray[np.float64]], ArrayLike],
) -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    """``[h_l * h_u](a) = min{h_u(a), 1 - h_l(1 - a)}`` (Chai 2019, before Lemma 4.1)."""

    def h(a: NDArray[np.float64]) -> NDArray[np.float64]:
        a = np.asarray(a, dtype=float)
        return np.minimum(np.asarray(h_u(a), dtype=float), 1 - np.asarray(h_l(1 - a), dtype=float))

    return h


def _b_objective(
    h: Callable[[NDArray[np.float64]], ArrayLike], z: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``((1-p)/p) h(p)/(1-h(p))`` at ``p = expit(z)``; ``(1-p)/p = exp(-z)`` exactly."""
    p = 1 / (1 + np.exp(-z))
    hp = np.asarray(h(p), dtype=float) * np.ones_like(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        odds = np.where(hp >= 1, np.inf, hp / (1 - hp))
        return np.exp(-z) * odds


def privacy_demand(
    h: Callable[[NDArray[np.float64]], ArrayLike], *, grid_size: int = 200_001
) -> float:
    """``B(h) = inf_{0<p<1} ((1-p)/p) (h(p)/(1-h(p)))`` (Chai 2019 eq. 4.4; Nayak 2020 Thm 3.1).

    ``h(p)/(1-h(p))`` is taken as ``inf`` when ``h(p) = 1``. ``h`` must accept a numpy array.
    The infimum is computed numerically: a grid uniform in ``logit(p)`` over
    ``[1e-7, 1 - 1e-7]`` (further out, ``1 - p`` loses too many digits in ``h``) followed by
    a bounded scalar refinement around the best grid point. For step functions
    (rho1-to-rho2) the infimum is approached, not attained, so the result can exceed the
    exact value by the grid resolution (relative error < 1e-3); relative error ~1e-6 when the
    infimum is approached at ``p -> 0`` or ``p -> 1`` (beta-factor boundaries).
    """
    n = int(grid_size)
    if n < 101:
        raise ValueError(f"The 'grid_size' parameter must be an int in the range [101, inf). Got {grid_size!r} instead.")
    z = np.linspace(-16.1, 16.1, n)  # logit grid, p in [1e-7, 1-1e-7]
    vals = _b_objective(h, z)
    i = int(np.nanargmin(vals))
    best = float(vals[i])
    lo, hi = z[max(i - 1, 0)], z[min(i + 1, n - 1)]
    if hi > lo:
        from scipy.optimize import minimize_scalar  # 0.5 s to import; only needed here

        res = minimize_scalar(
            lambda zz: float(_b_objective(h, np.array([zz]))[0]),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-12},
        )
        if np.isfinite(res.fun):
            best = min(best, float(res.fun))
    return best


def precise_upper_boundary(gamma: float) -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    """``h_(gamma)(p) = gamma p / (1 + (gamma - 1) p)`` (Chai 2019 eq. 4.9; Nayak 2020 eq. 3.4).

    The upward breach boundary of every ``P`` with parity ``gamma``; ``B(h_(gamma)) = gamma``.
    """
    g = check_real(gamma, "gamma", 1.0, None, "neither")

    def h(p: NDArray[np.float64]) -> NDArray[np.float64]:
        p = np.asarray(p, dtype=float)
        return g * p / (1 + (g - 1) * p)

    return h


def is_sip(
    P: ArrayLike,
    h_l: Callable[[NDArray[np.float64]], ArrayLike],
    h_u: Callable[[NDArray[np.float64]], ArrayLike],
) -> bool:
    """(h_l, h_u)-strict information privacy (Chai 2019 Def. 3.6) iff ``eta(P) <= B(h)``.

    ``h = [h_l * h_u]`` (Lemma 4.1) and ``B`` is :func:`privacy_demand` (Theorem 4.1;
    Nayak 2020 Theorem 3.1). ``h_l`` and ``h_u`` are functions on ``[0, 1]`` accepting arrays
    with ``0 <= h_l(a) <= a <= h_u(a) <= 1``.
    """
    B = privacy_demand(combine_breach_boundaries(h_l, h_u))
    return parity(P) <= B * (1 + 1e-6)


def is_admissible(P: ArrayLike, gamma: float, *, rtol: float = 1e-9) -> bool:
    """Admissibility of ``P`` within ``C_gamma`` (Nayak 2020 Theorem 4.1; Chai 2019 Thm 5.4-5.5).

    ``C_gamma`` is the class of TPMs with ``eta(P) <= gamma`` and no two proportional rows
    (Chai 2019 section 5). ``P`` is admissible iff it belongs to ``C_gamma`` and

    * C1: every row parity ``eta_i(P)`` equals ``gamma``;
    * C2: every row contains exactly two distinct values.

    Values are compared with relative tolerance ``rtol`` (floating point slack only).
    Returns ``False`` if ``P`` has proportional rows (it is then not in ``C_gamma``).
    """
    g = check_real(gamma, "gamma", 1.0, None, "neither")
    A = check_transition_matrix(P)
    eta = row_parity(A)
    if not np.all(np.abs(eta - g) <= rtol * g):
        return False
    # C2: exactly two distinct values per row (max and min; everything else equals one of them)
    mx = A.max(axis=1, keepdims=True)
    mn = A.min(axis=1, keepdims=True)
    near_max = np.isclose(A, mx, rtol=rtol, atol=0)
    near_min = np.isclose(A, mn, rtol=rtol, atol=0)
    if not np.all(near_max | near_min):
        return False
    return not has_proportional_rows(A, rtol=rtol)


def has_proportional_rows(P: ArrayLike, *, rtol: float = 1e-9, chunk: int = 2048) -> bool:
    """Whether two rows of ``P`` are proportional (Chai 2019 section 5: not allowed in C_gamma).

    Two non-zero rows are proportional iff the cosine of the angle between them is 1. The
    Gram matrix is computed in row chunks, so memory stays ``O(chunk * m)``.
    """
    A = np.asarray(P, dtype=float)
    norms = np.linalg.norm(A, axis=1)
    U = A[norms > 0] / norms[norms > 0, None]
    m = U.shape[0]
    for start in range(0, m, chunk):
        G = U[start : start + chunk] @ U.T
        idx = np.arange(start, min(start + chunk, m))
        G[np.arange(idx.size), idx] = 0.0  # ignore each row against itself
        if np.any(G >= 1 - 10 * rtol):
            return True
    return False
