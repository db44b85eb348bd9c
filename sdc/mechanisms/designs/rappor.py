"""RAPPOR and mixtures of t-subset designs (Chai 2019 section 7.2; Nayak 2020 eq. 4.1).

Basic RAPPOR flips every bit of the one-hot code with ``1/(sqrt(gamma)+1)``; given ``t`` ones
it is the t-subset design, so it is the mixture with weights ``p_t`` of eq. 7.6. The admissible
modification drops the all-0 and all-1 outputs. Estimators: the mixture's minimax estimator
(eqs. 7.7-7.11, Theorem 7.1) and the customary empirical one (eqs. 7.13-7.14).
docs/MECHANISMS.md s. 2.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import (
    check_bits,
    check_codes,
    check_gamma,
    check_k,
    check_probability_vector,
)
from .tsubset import MAX_MATRIX_ROWS, sample_tsubset

__all__ = [
    "rappor_flip_probability",
    "sample_rappor",
    "rappor_matrix",
    "rappor_mixture_weights",
    "modified_rappor_weights",
    "modified_rappor_matrix",
    "mixture_matrix",
    "sample_mixture",
    "sample_modified_rappor",
    "mixture_scores",
    "estimate_mixture",
    "mixture_risk",
    "estimate_rappor_empirical",
    "rappor_empirical_risk",
]


def rappor_flip_probability(gamma: float) -> float:
    """Basic RAPPOR flips each bit independently with ``p = 1/(sqrt(gamma)+1)`` (section 7.2)."""
    return 1.0 / (math.sqrt(check_gamma(gamma)) + 1.0)


def sample_rappor(
    x: ArrayLike, k: int, gamma: float, rng: np.random.Generator
) -> NDArray[np.int8]:
    """Basic RAPPOR: one-hot encode ``x`` and flip every bit with ``1/(sqrt(gamma)+1)``."""
    kk = check_k(k)
    xs = check_codes(x, kk)
    p = rappor_flip_probability(gamma)
    onehot = np.zeros((xs.size, kk), dtype=np.int8)
    onehot[np.arange(xs.size), xs] = 1
    flips = (rng.random((xs.size, kk)) < p).astype(np.int8)
    return onehot ^ flips


def _all_bit_vectors(k: int) -> NDArray[np.int8]:
    if 2**k > MAX_MATRIX_ROWS:
        raise ValueError(f"The 'k' parameter must be at most {MAX_MATRIX_ROWS.bit_length() - 1} to build a 2^k-row matrix. Got {k} instead.")
    codes = np.arange(2**k)[:, None]
    return ((codes >> np.arange(k - 1, -1, -1)) & 1).astype(np.int8)  # MSB first


def rappor_matrix(k: int, gamma: float) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
    """Basic RAPPOR TPM, ``2^k x k`` (review eq. 4.1), and its output bit vectors.

    ``P(z | x^(i)) = p^{t-1} (1-p)^{k-t+1}`` if ``z_i = 1`` and ``p^{t+1} (1-p)^{k-t-1}`` if
    ``z_i = 0``, with ``t = sum z`` and ``p`` the flip probability. Rows are ordered by the
    binary number ``z_1 z_2 ... z_k`` (most significant bit first).
    """
    kk = check_k(k)
    p = rappor_flip_probability(gamma)
    Z = _all_bit_vectors(kk)
    t = Z.sum(axis=1, keepdims=True).astype(float)
    one = p ** (t - 1) * (1 - p) ** (kk - t + 1)
    zero = p ** (t + 1) * (1 - p) ** (kk - t - 1)
    return np.where(Z == 1, one, zero), Z


def rappor_mixture_weights(k: int, gamma: float) -> NDArray[np.float64]:
    """``p_t = P(T = t)``, ``t = 0..k``, of RAPPOR's number of ones (Chai 2019 eq. 7.6).

    ``p_t = binom(k-1, t-1) p^{t-1} (1-p)^{k-t+1} + binom(k-1, t) p^{t+1} (1-p)^{k-t-1}``;
    given ``T = t`` RAPPOR applies the t-subset design with parity ``gamma``.
    """
    kk = check_k(k)
    p = rappor_flip_probability(gamma)
    w = np.empty(kk + 1)
    for t in range(kk + 1):  # loop over k+1 mixture components, not records
        a = math.comb(kk - 1, t - 1) * p ** (t - 1) * (1 - p) ** (kk - t + 1) if t >= 1 else 0.0
        b = math.comb(kk - 1, t) * p ** (t + 1) * (1 - p) ** (kk - t - 1) if t <= kk - 1 else 0.0
        w[t] = a + b
    return w


def modified_rappor_weights(k: int, gamma: float) -> NDArray[np.float64]:
    """Weights ``w_t = p_t/(1 - p_0 - p_k)`` (``w_0 = w_k = 0``) of the admissible RAPPOR."""
    w = rappor_mixture_weights(k, gamma).copy()
    w[0] = w[-1] = 0.0
    return w / w.sum()


def modified_rappor_matrix(k: int, gamma: float) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
    """Admissible modification of RAPPOR (Chai 2019 section 7.2; review section 4.1).

    Drops the rows of the outputs ``(0,...,0)`` and ``(1,...,1)`` (their rows are constant,
    parity 1) and renormalises each column; every remaining row has parity ``gamma`` and
    two distinct values.
    """
    P, Z = rappor_matrix(k, gamma)
    t = Z.sum(axis=1)
    keep = (t > 0) & (t < Z.shape[1])
    Pm = P[keep]
    return Pm / Pm.sum(axis=0, keepdims=True), Z[keep]


def mixture_matrix(k: int, gamma: float, weights: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
    """TPM ``P_M = [w_0 P_0' | ... | w_k P_k']'`` of a mixture of t-subset designs (eq. 7.7).

    ``weights`` has ``k+1`` entries (``t = 0..k``); rows use the same ordering as
    :func:`rappor_matrix` (all ``2^k`` bit vectors; rows of zero-weight components are 0).
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    w = check_probability_vector(weights, "weights")
    if w.size != kk + 1:
        raise ValueError(f"The 'weights' parameter must have k+1={kk + 1} entries. Got {w.size} instead.")
    Z = _all_bit_vectors(kk)
    t = Z.sum(axis=1)
    ms = kk / (t * g + kk - t)  # m_t s_t
    m = np.array([math.comb(kk, int(tt)) for tt in range(kk + 1)], dtype=float)[t]
    s = ms / m
    P = w[t][:, None] * np.where(Z == 1, g * s[:, None], s[:, None])
    return P, Z


def sample_mixture(
    x: ArrayLike, k: int, gamma: float, weights: ArrayLike, rng: np.random.Generator
) -> NDArray[np.int8]:
    """Two-step mixture sampler: draw ``t`` with ``weights`` (``t = 0..k``), apply ``P_t``."""
    kk = check_k(k)
    w = check_probability_vector(weights, "weights")
    if w.size != kk + 1:
        raise ValueError(f"The 'weights' parameter must have k+1={kk + 1} entries. Got {w.size} instead.")
    xs = check_codes(x, kk)
    t = rng.choice(kk + 1, size=xs.size, p=w)
    return sample_tsubset(xs, kk, t, gamma, rng)


def sample_modified_rappor(
    x: ArrayLike, k: int, gamma: float, rng: np.random.Generator
) -> NDArray[np.int8]:
    """Admissible RAPPOR: RAPPOR conditioned on not answering all-0 or all-1."""
    return sample_mixture(x, k, gamma, modified_rappor_weights(k, gamma), rng)


def _mixture_coefficients(k: int, gamma: float, weights: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    t = np.arange(k + 1)
    ms = k / (t * gamma + k - t)  # m_t s_t
    a_t = k * t * (gamma - 1) ** 2 * (k - t) / ((k - 1) * (t * gamma + k - t) ** 2)  # eq. 6.19 form
    a_star = float(weights @ a_t)
    if a_star <= 0:
        raise ValueError("The 'weights' parameter must give positive weight to some t in 1..k-1.")
    A = ms * (gamma - 1) / a_star
    B = (ms - 1) / a_star
    A[[0, k]] = 0.0  # constant outputs carry no information (Remark 7.1)
    B[[0, k]] = 0.0
    return A, B


def mixture_scores(Z: ArrayLike, gamma: float, weights: ArrayLike) -> NDArray[np.float64]:
    """Per-response contributions ``psi(z)`` with ``pi_hat = mean(psi) + 1/k``.

    From the display after Theorem 7.1:
    ``pi_hat_j = a_*^{-1} sum_t [m_t s_t (gamma-1) V_j^(t)/n + (n_t/n)(m_t s_t - 1)] + 1/k``
    with ``a_* = sum_t w_t a_t``; a response with ``t`` ones contributes
    ``psi(z) = a_*^{-1} [m_t s_t (gamma-1) z + (m_t s_t - 1) 1]`` (0 for ``t in {0, k}``).
    """
    A_ = check_bits(Z)
    kk = A_.shape[1]
    g = check_gamma(gamma)
    w = check_probability_vector(weights, "weights")
    if w.size != kk + 1:
        raise ValueError(f"The 'weights' parameter must have k+1={kk + 1} entries. Got {w.size} instead.")
    A, B = _mixture_coefficients(kk, g, w)
    t = A_.sum(axis=1)
    return A[t][:, None] * A_ + B[t][:, None]


def estimate_mixture(
    Z: ArrayLike, gamma: float, weights: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Minimax linear unbiased estimator ``L_M lambda_hat`` of a t-subset mixture (Thm 7.1).

    Also used for basic RAPPOR (weights :func:`rappor_mixture_weights`, Remark 7.1) and the
    admissible RAPPOR (:func:`modified_rappor_weights`). Returns ``(pi_hat, cov_hat)`` where
    ``cov_hat`` is the sample covariance of the scores ``psi`` divided by ``n``.
    """
    psi = mixture_scores(Z, gamma, weights)
    n, kk = psi.shape
    est = psi.mean(axis=0) + 1.0 / kk
    cov = np.cov(psi, rowvar=False, ddof=1) / n if n > 1 else np.full((kk, kk), np.nan)
    return est, cov


def mixture_risk(k: int, gamma: float, weights: ArrayLike, pi: ArrayLike | None = None) -> float:
    """``R(P_M, L_M; pi) = sum_t w_t ||psi_t||^2 + 1/k - sum pi_i^2`` (Lemma 7.1).

    ``||psi_t||^2 = a_*^{-2} [t (gamma m_t s_t - 1)^2 + (k-t)(m_t s_t - 1)^2]`` depends on the
    response only through ``t``, whose distribution ``w`` does not depend on ``pi``; hence the
    risk is a constant minus ``sum pi_i^2`` (uniform ``pi`` if None).
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    w = check_probability_vector(weights, "weights")
    if w.size != kk + 1:
        raise ValueError(f"The 'weights' parameter must have k+1={kk + 1} entries. Got {w.size} instead.")
    A, B = _mixture_coefficients(kk, g, w)
    t = np.arange(kk + 1)
    norm2 = t * (A + B) ** 2 + (kk - t) * B**2
    p = np.full(kk, 1.0 / kk) if pi is None else check_probability_vector(pi, "pi")
    return float(w @ norm2 + 1.0 / kk - p @ p)


def estimate_rappor_empirical(Z: ArrayLike, gamma: float) -> NDArray[np.float64]:
    """Customary RAPPOR estimator ``((sqrt g+1)/(sqrt g-1)) V/n - 1/(sqrt g-1)`` (eq. 7.13)."""
    A = check_bits(Z)
    r = math.sqrt(check_gamma(gamma))
    return (r + 1) / (r - 1) * A.mean(axis=0) - 1 / (r - 1)


def rappor_empirical_risk(k: int, gamma: float, pi: ArrayLike | None = None) -> float:
    """Risk of (7.13): ``k sqrt(g)/(sqrt(g)-1)^2 + 1 - sum pi_i^2`` (eq. 7.14)."""
    kk = check_k(k)
    r = math.sqrt(check_gamma(gamma))
    p = np.full(kk, 1.0 / kk) if pi is None else check_probability_vector(pi, "pi")
    return kk * r / (r - 1) ** 2 + 1 - float(p @ p)
