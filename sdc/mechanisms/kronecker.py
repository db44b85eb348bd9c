"""Iterated bisymmetric (Kronecker) randomizers of d binary attributes (Kronecker paper, 2018).

Each bit is kept with probability ``a`` (``C(a) = [[a, 1-a], [1-a, a]]``, columns = true bit);
a d-bit string goes through ``C(a)^[d] = C(a) kron C(a)^[d-1]`` (Theorem 4.1). Its inverse is
``C(a/(2a-1))^[d]`` (Theorem 4.4), applied one 2x2 factor per axis of the histogram tensor, so
no matrix larger than 2x2 is built; ``tr V(pi_hat) = (rho^d - sum pi_i^2)/n`` (Lemma 4.5); a
whole string is ``d |log(a/(1-a))|``-DP. Warner (``a = p``), Simmons' unrelated question
(``a = 1 - p/2``) and RAPPOR's permanent response (``a = 1 - f/2``) are cases (section 5).
docs/MECHANISMS.md s. 4.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_int, check_real

__all__ = [
    "bit_randomizer",
    "kron_power",
    "kron_inverse_parameter",
    "bit_randomizer_unchecked",
    "randomize_bits",
    "bit_histogram",
    "apply_kron_power",
    "estimate_marginal",
    "kron_estimator_rho",
    "kron_estimator_trace_covariance",
    "kron_epsilon",
    "a_from_epsilon",
    "warner_bit_parameter",
    "simmons_unrelated_bit_parameter",
    "rappor_permanent_bit_parameter",
]


def _a(a: float, *, invertible: bool = False) -> float:
    v = check_real(a, "a", 0.0, 1.0, "both")
    if invertible and v == 0.5:
        raise ValueError("The 'a' parameter must differ from 0.5 (C(1/2) is not invertible). Got 0.5 instead.")
    return v


def bit_randomizer(a: float) -> NDArray[np.float64]:
    """The 2x2 bisymmetric bit randomizer ``C(a) = [[a, 1-a], [1-a, a]]`` (section 4.1)."""
    v = _a(a)
    return np.array([[v, 1 - v], [1 - v, v]])


def kron_power(C: ArrayLike, d: int) -> NDArray[np.float64]:
    """Iterated Kronecker product ``C^[d] = C kron C^[d-1]``, ``C^[0] = [1]`` (Def. 4.1).

    Builds the full ``2^d x 2^d`` matrix: meant for small ``d`` (checks, tests). The
    estimators of this module never call it.
    """
    M = np.asarray(C, dtype=float)
    dd = check_int(d, "d", 0, 14)
    out = np.ones((1, 1))
    for _ in range(dd):  # loop over attributes
        out = np.kron(M, out)
    return out


def kron_inverse_parameter(a: float) -> float:
    """``b = a/(2a-1)`` with ``C(a)^{-1} = C(b)`` (Theorem 4.4; requires ``a != 1/2``)."""
    v = _a(a, invertible=True)
    return v / (2 * v - 1)


def randomize_bits(X: ArrayLike, a: float, rng: np.random.Generator) -> NDArray[np.int8]:
    """Keep every bit with probability ``a``, flip it otherwise, independently (section 4.2).

    ``R = X xor B`` with ``B`` i.i.d. Bernoulli(``1 - a``); ``X`` is an ``n x d`` 0/1 array.
    """
    v = _a(a)
    A = np.asarray(X)
    if A.ndim != 2 or not np.all((A == 0) | (A == 1)):
        raise ValueError(f"The 'X' parameter must be a 2-D (n, d) array of 0/1. Got shape {A.shape} instead.")
    flips = (rng.random(A.shape) >= v).astype(np.int8)
    return A.astype(np.int8) ^ flips


def bit_histogram(R: ArrayLike, columns: ArrayLike | None = None) -> NDArray[np.int64]:
    """Histogram of the observed sub-strings ``R[:, columns]`` (the paper's ``hist``).

    Index of a string = its value as a binary number, first selected column most
    significant. Returns counts of length ``2^len(columns)``.
    """
    A = np.asarray(R)
    if A.ndim != 2 or not np.all((A == 0) | (A == 1)):
        raise ValueError(f"The 'R' parameter must be a 2-D (n, d) array of 0/1. Got shape {A.shape} instead.")
    cols = np.arange(A.shape[1]) if columns is None else np.asarray(columns, dtype=np.int64).reshape(-1)
    if cols.size < 1 or cols.min() < 0 or cols.max() >= A.shape[1] or np.unique(cols).size != cols.size:
        raise ValueError(
            f"The 'columns' parameter must be distinct column indices in the range [0, {A.shape[1] - 1}]. Got {cols.tolist()!r} instead."
        )
    if cols.size > 30:
        raise ValueError(f"The 'columns' parameter must select at most 30 columns. Got {cols.size} instead.")
    weights = 2 ** np.arange(cols.size - 1, -1, -1, dtype=np.int64)
    codes = A[:, cols].astype(np.int64) @ weights
    return np.bincount(codes, minlength=2**cols.size)


def apply_kron_power(C: ArrayLike, v: ArrayLike) -> NDArray[np.float64]:
    """``C^[d] v`` for a 2x2 ``C`` and ``v`` of length ``2^d``, without building ``C^[d]``.

    ``v`` is reshaped into a ``2 x ... x 2`` tensor and ``C`` is applied along every axis
    (mixed-product property of the Kronecker product); work ``O(d 2^d)``, memory ``O(2^d)``.
    """
    M = np.asarray(C, dtype=float)
    x = np.asarray(v, dtype=float)
    d = int(round(math.log2(x.size))) if x.size > 0 else -1
    if M.shape != (2, 2) or x.ndim != 1 or d < 0 or 2**d != x.size:
        raise ValueError(f"apply_kron_power needs a 2x2 matrix and a vector of length 2^d. Got {M.shape} and {x.shape}.")
    if d == 0:
        return x.copy()
    T = x.reshape((2,) * d)
    for axis in range(d):  # loop over attributes
        T = np.moveaxis(np.tensordot(M, T, axes=([1], [axis])), 0, axis)
    return T.reshape(-1)


def estimate_marginal(R: ArrayLike, columns: ArrayLike | None, a: float) -> NDArray[np.float64]:
    """Unbiased MLE of the joint distribution of the chosen binary ``columns`` (section 4.2).

    ``pi_hat = C(a/(2a-1))^[k] hist(R[:, columns]) / n`` where ``k = len(columns)``; because
    bits are randomized independently, the other columns play no role. Entries may be
    negative (unbiasedness); they sum to 1.
    """
    h = bit_histogram(R, columns)
    n = h.sum()
    b = kron_inverse_parameter(a)
    return apply_kron_power(bit_randomizer_unchecked(b), h / n)


def bit_randomizer_unchecked(b: float) -> NDArray[np.float64]:
    """``[[b, 1-b], [1-b, b]]`` for any real ``b`` (the inverse factors have ``b`` outside [0, 1])."""
    return np.array([[b, 1 - b], [1 - b, b]])


def kron_estimator_rho(a: float) -> float:
    """``rho = (a^2 + (1-a)^2)/(2a-1)^2`` of Lemma 4.5 (diagonal of ``C^{-T} C^{-1}``)."""
    v = _a(a, invertible=True)
    return (v**2 + (1 - v) ** 2) / (2 * v - 1) ** 2


def kron_estimator_trace_covariance(pi: ArrayLike, a: float, n: int) -> float:
    """``tr V(pi_hat) = (rho^d - sum pi_i^2)/n`` for ``pi`` of length ``2^d`` (Lemma 4.5)."""
    p = np.asarray(pi, dtype=float)
    d = int(round(math.log2(p.size))) if p.size > 0 else -1
    if p.ndim != 1 or d < 1 or 2**d != p.size or np.any(p < 0) or abs(p.sum() - 1) > 1e-9:
        raise ValueError(f"The 'pi' parameter must be a probability vector of length 2^d. Got shape {p.shape}.")
    nn = check_int(n, "n", 1, None)
    return (kron_estimator_rho(a) ** d - float(p @ p)) / nn


def kron_epsilon(a: float, d: int = 1) -> float:
    """DP level of ``C(a)^[d]``: ``d |log(a/(1-a))|`` (section 4.3); ``inf`` if a in {0, 1}."""
    v = _a(a)
    dd = check_int(d, "d", 1, None)
    if v in (0.0, 1.0):
        return math.inf
    return dd * abs(math.log(v / (1 - v)))


def a_from_epsilon(eps: float, d: int = 1) -> float:
    """Most accurate ``a > 1/2`` whose ``d``-bit randomizer is ``eps``-DP: ``e^(eps/d)/(1+e^(eps/d))``."""
    e = check_real(eps, "eps", 0.0, None, "neither")
    dd = check_int(d, "d", 1, None)
    x = e / dd
    return 1.0 / (1.0 + math.exp(-x))


def warner_bit_parameter(p: float) -> float:
    """Warner's spinner with probability ``p`` of the true statement: ``a = p`` (section 5.2)."""
    return _a(p)


def simmons_unrelated_bit_parameter(p_unrelated: float) -> float:
    """Simmons' unrelated (uniform coin) question asked with ``p``: ``a = 1 - p/2`` (5.1)."""
    p = check_real(p_unrelated, "p_unrelated", 0.0, 1.0, "both")
    return 1 - p / 2


def rappor_permanent_bit_parameter(f: float) -> float:
    """RAPPOR permanent randomized response with parameter ``f``: ``a = 1 - f/2`` (5.3)."""
    ff = check_real(f, "f", 0.0, 1.0, "both")
    return 1 - ff / 2
