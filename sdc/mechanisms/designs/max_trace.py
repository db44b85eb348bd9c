"""Warner's binary design and the max-trace ``k x k`` design at parity ``gamma`` (Chai 2019
Proposition 6.1 and Theorem 6.1; Nayak 2020 Theorem 4.2): ``p_ii = gamma/(gamma+k-1)``,
``p_ij = 1/(gamma+k-1)``, ``trace <= gamma k/(gamma+k-1)``; sampler and unbiased estimator.
Columns = true categories. docs/MECHANISMS.md.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import check_codes, check_gamma, check_k, check_probability_vector

__all__ = [
    "warner_design",
    "max_trace_design",
    "max_trace_bound",
    "max_trace_risk",
    "estimate_max_trace",
    "sample_max_trace",
]


def warner_design(gamma: float) -> NDArray[np.float64]:
    """Optimal binary design at privacy level ``gamma`` (Chai 2019 Prop. 6.1; review Thm 4.2).

    ``p_11 = p_22 = gamma/(gamma+1)``, ``p_12 = p_21 = 1/(gamma+1)``.
    """
    g = check_gamma(gamma)
    return np.array([[g, 1.0], [1.0, g]]) / (g + 1)


def max_trace_design(k: int, gamma: float) -> NDArray[np.float64]:
    """Max-trace ``k x k`` design (Chai 2019 Theorem 6.1(b)).

    ``p_ii = gamma/(gamma+k-1)``, ``p_ij = 1/(gamma+k-1)``. Its parity is exactly ``gamma``;
    it is also the ``t = 1`` subset design and the "gamma-diagonal" matrix of Agrawal et al.
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    P = np.full((kk, kk), 1.0 / (g + kk - 1))
    np.fill_diagonal(P, g / (g + kk - 1))
    return P


def max_trace_bound(k: int, gamma: float) -> float:
    """Upper bound on ``trace(P)`` for ``k x k`` TPMs with ``eta(P) <= gamma`` (Thm 6.1(a)).

    ``sum_i p_ii <= gamma k / (gamma + k - 1)``.
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    return g * kk / (g + kk - 1)


def max_trace_risk(k: int, gamma: float, pi: ArrayLike | None = None) -> float:
    """Risk ``n E||P^{-1} lambda_hat - pi||^2`` of the max-trace design (eq. 6.1 with L = P^{-1}).

    ``P^{-1} = ((gamma+k-1) I - 1 1')/(gamma-1)``; ``P^{-T} P^{-1}`` has the constant diagonal
    ``((gamma+k-2)^2 + k - 1)/(gamma-1)^2``, so the risk is that constant minus ``sum pi_i^2``.
    With ``pi=None`` the worst case (uniform ``pi``) is returned.
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    d0 = ((g + kk - 2) ** 2 + kk - 1) / (g - 1) ** 2
    if pi is None:
        return d0 - 1.0 / kk
    p = check_probability_vector(pi, "pi")
    if p.size != kk:
        raise ValueError(f"The 'pi' parameter must have k={kk} entries. Got {p.size} instead.")
    return d0 - float(p @ p)


def sample_max_trace(
    x: ArrayLike, k: int, gamma: float, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Randomize category codes with the max-trace design (vectorized).

    Keep the true code with ``gamma/(gamma+k-1)``; otherwise move to one of the other
    ``k-1`` codes uniformly (drawn as ``(x + U{1..k-1}) mod k``).
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    xs = check_codes(x, kk)
    keep = rng.random(xs.size) < g / (g + kk - 1)
    shift = rng.integers(1, kk, size=xs.size)
    return np.where(keep, xs, (xs + shift) % kk)


def estimate_max_trace(
    responses: ArrayLike, k: int, gamma: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Unbiased ``pi_hat = P^{-1} lambda_hat`` for the max-trace design and its covariance.

    The covariance is the plug-in of Chai 2019 eq. 2.3,
    ``P^{-1}(D_lambda - lambda lambda')P^{-T} / n`` with ``lambda`` replaced by the observed
    response proportions ``lambda_hat``.
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    z = check_codes(responses, kk, "responses")
    n = z.size
    if n < 1:
        raise ValueError("The 'responses' parameter must contain at least one response.")
    lam = np.bincount(z, minlength=kk) / n
    Pinv = ((g + kk - 1) * np.eye(kk) - np.ones((kk, kk))) / (g - 1)
    est = Pinv @ lam
    cov = Pinv @ (np.diag(lam) - np.outer(lam, lam)) @ Pinv.T / n
    return est, cov
