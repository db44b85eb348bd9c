"""t-subset designs and the minimax strategy of Chai 2019 ch. 6-7 (Nayak 2020 s. 4).

``P_t`` answers a subset of ``t`` of the ``k`` categories: ``p_ij = gamma s_t`` if ``c_j`` is in
the subset, else ``s_t = k/(binom(k, t)(t gamma + k - t))`` (Definition 6.1, eq. 6.16); the
two-step sampler of section 7.1 never builds its ``binom(k, t)`` rows. The minimax strategy is
``t = q`` of eq. 6.9 with risk ``(k-1)^2/(f(q)-k)`` (eq. 6.25) and estimator ``c V/n + d``
(eq. 7.2). Risks are ``n E||pi_hat - pi||^2`` (eq. 6.1). docs/MECHANISMS.md s. 2.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._validation import (
    check_bits,
    check_codes,
    check_gamma,
    check_int,
    check_k,
    check_probability_vector,
)

__all__ = [
    "MAX_MATRIX_ROWS",
    "minimax_f",
    "minimax_q",
    "minimax_risk",
    "tsubset_small_value",
    "tsubset_keep_probability",
    "tsubset_matrix",
    "sample_tsubset",
    "tsubset_constants",
    "estimate_tsubset",
    "tsubset_response_probabilities",
    "tsubset_covariance",
    "tsubset_risk",
    "MinimaxDesign",
    "minimax_design",
]

#: largest number of output rows :func:`tsubset_matrix` / :func:`rappor_matrix` will build
MAX_MATRIX_ROWS = 1 << 20


def minimax_f(x: ArrayLike, k: int, gamma: float) -> NDArray[np.float64] | float:
    """``f(x) = k^2 (x gamma^2 + k - x) / (x gamma + k - x)^2`` (Chai 2019 eq. 6.8).

    ``f(t) = tr(P_t' D_lambda^{-1} P_t)`` at uniform ``pi`` for the t-subset design, and
    ``tr(P' D^{-1} P) <= f(q)`` for every admissible rank-k ``P`` (Lemma 6.1, eq. 6.10).
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    xx = np.asarray(x, dtype=float)
    out = kk**2 * (xx * g**2 + kk - xx) / (xx * g + kk - xx) ** 2
    return float(out) if out.ndim == 0 else out


def minimax_q(k: int, gamma: float) -> int:
    """Number ``q`` of "large" values per row of the minimax design (Chai 2019 eq. 6.9).

    ``q = floor(k/(1+gamma))`` if ``f(floor) >= f(ceil)`` and ``floor >= 1``, otherwise
    ``ceil(k/(1+gamma))``; ``q`` maximises ``f`` over ``{1, ..., k-1}``.
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    r = kk / (1 + g)
    lo, hi = math.floor(r), math.ceil(r)
    if lo >= 1 and minimax_f(lo, kk, g) >= minimax_f(hi, kk, g):
        return int(lo)
    return int(hi)


def minimax_risk(k: int, gamma: float) -> float:
    """Minimax risk ``(k-1)^2 / (f(q) - k)`` (Chai 2019 eqs. 6.20 and 6.25).

    This is ``sup_pi R(P_q, L_q; pi)``, attained at uniform ``pi``; at a general ``pi`` the
    risk is ``(k-1)^2/(f(q)-k) + 1/k - sum pi_i^2`` (review eq. 4.6).
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    q = minimax_q(kk, g)
    return (kk - 1) ** 2 / (minimax_f(q, kk, g) - kk)


def _t(t: int, k: int, low: int = 1, high: int | None = None) -> int:
    return check_int(t, "t", low, k - 1 if high is None else high)


def tsubset_small_value(k: int, t: int, gamma: float) -> float:
    """Small value ``s_t = k / (binom(k, t) (t gamma + k - t))`` of ``P_t`` (eq. 6.16)."""
    kk = check_k(k)
    tt = _t(t, kk)
    g = check_gamma(gamma)
    return kk / (math.comb(kk, tt) * (tt * g + kk - tt))


def tsubset_keep_probability(k: int, t: int, gamma: float) -> float:
    """``P(Z_j = 1 | X = c_j) = t gamma / (t gamma + k - t)`` (section 7.1, first step)."""
    kk = check_k(k)
    tt = _t(t, kk, 0, kk)
    g = check_gamma(gamma)
    return tt * g / (tt * g + kk - tt)


def tsubset_matrix(
    k: int, t: int, gamma: float
) -> tuple[NDArray[np.float64], list[tuple[int, ...]]]:
    """Full t-subset TPM ``P_t`` (Definition 6.1, Remark 6.3), for small ``binom(k, t)``.

    Rows are the ``binom(k, t)`` subsets ``d_i`` of size ``t`` in lexicographic order;
    ``p_ij = gamma s_t`` if ``c_j in d_i`` else ``s_t``. Returns ``(P, subsets)``.
    Raises ``ValueError`` if ``binom(k, t)`` exceeds ``MAX_MATRIX_ROWS``: use
    :func:`sample_tsubset`, which never builds the matrix.
    """
    kk = check_k(k)
    tt = _t(t, kk)
    g = check_gamma(gamma)
    m = math.comb(kk, tt)
    if m > MAX_MATRIX_ROWS:
        raise ValueError(
            f"The t-subset design with k={kk}, t={tt} has binom(k, t)={m} outputs, more than "
            f"{MAX_MATRIX_ROWS}; use sample_tsubset() instead of the full matrix."
        )
    subsets = list(itertools.combinations(range(kk), tt))
    Zi = np.zeros((m, kk), dtype=bool)
    rows = np.repeat(np.arange(m), tt)
    cols = np.asarray(subsets, dtype=np.int64).reshape(-1)
    Zi[rows, cols] = True
    s = tsubset_small_value(kk, tt, g)
    P = np.where(Zi, g * s, s)
    return P, subsets


def sample_tsubset(
    x: ArrayLike,
    k: int,
    t: int | ArrayLike,
    gamma: float,
    rng: np.random.Generator,
    *,
    block: int = 1 << 16,
) -> NDArray[np.int8]:
    """Two-step t-subset sampler (Chai 2019 section 7.1; review section 4.2).

    For a respondent with true category ``c_j``: set ``z_j = 1`` with probability
    ``t gamma/(t gamma + k - t)``; then set ``t - z_j`` of the other ``k - 1`` components to 1,
    chosen uniformly at random. Every output has exactly ``t`` ones and
    ``P(Z = z | c_j) = gamma s_t`` if ``z_j = 1`` else ``s_t``, i.e. the t-subset design,
    without building its ``binom(k, t)`` rows. ``t`` may be an array (one value per record,
    ``0 <= t <= k``), which implements mixtures of t-subset designs.

    Vectorized: uniform keys per record, the true position is excluded, and the ``r``
    positions of smallest key are switched on (records are processed in blocks of ``block``
    rows only to bound memory).

    Returns
    -------
    ndarray of shape (n, k) with entries 0/1.
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    xs = check_codes(x, kk)
    n = xs.size
    tt = np.asarray(t)
    if tt.ndim == 0:
        tt = np.full(n, check_int(t, "t", 0, kk), dtype=np.int64)
    else:
        if tt.shape != (n,) or not np.issubdtype(tt.dtype, np.integer) or tt.min(initial=0) < 0 or tt.max(initial=0) > kk:
            raise ValueError(f"The 't' parameter must be an int or an int array of shape ({n},) with values in [0, {kk}].")
        tt = tt.astype(np.int64)
    out = np.zeros((n, kk), dtype=np.int8)
    for start in range(0, n, block):  # blocks of records, never one record at a time
        sl = slice(start, min(start + block, n))
        xb, tb = xs[sl], tt[sl]
        nb = xb.size
        p_keep = tb * g / (tb * g + kk - tb)
        keep = rng.random(nb) < p_keep
        r = tb - keep  # ones still to place among the other k-1 positions
        keys = rng.random((nb, kk))
        keys[np.arange(nb), xb] = 2.0  # true position sorts last
        ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
        zb = (ranks < r[:, None]).astype(np.int8)
        zb[np.arange(nb), xb] = keep
        out[sl] = zb
    return out


def tsubset_constants(k: int, t: int, gamma: float) -> tuple[float, float]:
    """Slope ``c`` and intercept ``d`` of the moment/minimax estimator (Chai 2019 eq. 7.2).

    ``pi_hat = c V/n + d`` with ``c = (k-1)(t gamma+k-t) / (t (gamma-1)(k-t))`` and
    ``d = (1/k) [ (1-k)(t gamma+k-t)/((gamma-1)(k-t)) + 1 ]``; ``V`` = column sums.
    """
    kk = check_k(k)
    tt = _t(t, kk)
    g = check_gamma(gamma)
    den = tt * g + kk - tt
    c = (kk - 1) * den / (tt * (g - 1) * (kk - tt))
    d = ((1 - kk) * den / ((g - 1) * (kk - tt)) + 1) / kk
    return c, d


def estimate_tsubset(Z: ArrayLike, gamma: float) -> NDArray[np.float64]:
    """Moment / minimax linear unbiased estimator of ``pi`` under ``P_t`` (eq. 7.2, Prop. 7.1).

    ``Z`` is the ``n x k`` 0/1 response matrix; every row must contain the same number ``t``
    of ones (``1 <= t <= k-1``). Returns ``c V/n + d`` (may leave [0, 1]; it is unbiased).
    """
    A = check_bits(Z)
    n, kk = A.shape
    check_k(kk)
    rs = A.sum(axis=1)
    t = int(rs[0])
    if not np.all(rs == t) or not 1 <= t <= kk - 1:
        raise ValueError("The 'Z' parameter must have the same number t of ones in every row, 1 <= t <= k-1.")
    c, d = tsubset_constants(kk, t, gamma)
    return c * A.sum(axis=0) / n + d


def tsubset_response_probabilities(
    pi: ArrayLike, t: int, gamma: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``P(Z_j = 1)`` (display before eq. 7.5) and ``P(Z_i = 1, Z_j = 1)`` (eq. 7.5).

    ``P(Z_j = 1) = t [(gamma-1)(k-t) pi_j + (t-1) gamma + k - t] / ((k-1)(t gamma + k - t))``.
    This is the first line of the dissertation's display, ``t(gamma m_t s_t - 1)/(k-1) pi_j +
    t(k - gamma m_t s_t)/(k(k-1))``; its second, "simplified" line has the constant
    ``t(gamma-1) + k - t``, a typo (it disagrees with eq. 7.1 and with the TPM).

    Returns ``(p1, p11)`` with ``p11[i, j]`` for ``i != j`` and ``p11[j, j] = p1[j]``.
    """
    p = check_probability_vector(pi, "pi", min_size=2)
    kk = p.size
    tt = _t(t, kk)
    g = check_gamma(gamma)
    den = tt * g + kk - tt
    p1 = tt * ((g - 1) * (kk - tt) * p + ((tt - 1) * g + kk - tt)) / ((kk - 1) * den)
    if kk == 2:
        p11 = np.zeros((2, 2))
    else:
        s = p[:, None] + p[None, :]
        p11 = tt * (tt - 1) * ((kk - tt) * (g - 1) * s + (tt * g - 2 * g + kk - tt)) / (
            (kk - 1) * (kk - 2) * den
        )
    np.fill_diagonal(p11, p1)
    return p1, p11


def tsubset_covariance(pi: ArrayLike, t: int, gamma: float, n: int) -> NDArray[np.float64]:
    """Exact covariance of the estimator (7.2): ``V(pi_hat) = (c^2/n) Sigma`` (section 7.1).

    ``Sigma = V(Z)`` with ``sigma_jj = P(Z_j=1)(1-P(Z_j=1))`` and
    ``sigma_ij = P(Z_i=1, Z_j=1) - P(Z_i=1) P(Z_j=1)`` from eq. 7.5.
    """
    nn = check_int(n, "n", 1, None)
    p1, p11 = tsubset_response_probabilities(pi, t, gamma)
    c, _ = tsubset_constants(p1.size, t, gamma)
    sigma = p11 - np.outer(p1, p1)
    return c**2 * sigma / nn


def tsubset_risk(k: int, t: int, gamma: float, pi: ArrayLike | None = None) -> float:
    """``R(P_t, L_t; pi) = n tr V(pi_hat)`` (eq. 6.1); uniform ``pi`` if ``pi`` is None.

    Lemma 6.4: ``R = const - sum pi_i^2``; at ``t = q`` and uniform ``pi`` it equals the
    minimax risk ``(k-1)^2/(f(q)-k)``.
    """
    kk = check_k(k)
    p = np.full(kk, 1.0 / kk) if pi is None else check_probability_vector(pi, "pi")
    return float(np.trace(tsubset_covariance(p, t, gamma, 1)))


@dataclass(frozen=True)
class MinimaxDesign:
    """The minimax strategy ``(P_q, L_q)`` of Chai 2019 Theorem 6.4 for given ``k, gamma``.

    Attributes
    ----------
    k, gamma : categories and privacy level (``eps = log gamma``-LDP).
    q : number of ones in every output vector (eq. 6.9).
    n_outputs : ``binom(k, q)``, the number of distinct outputs.
    keep_probability : ``q gamma/(q gamma + k - q)``, ``P(z_j = 1 | c_j)`` (section 7.1).
    small_value, large_value : ``s_q`` (eq. 6.16) and ``gamma s_q``.
    slope, intercept : ``c`` and ``d`` of the estimator ``pi_hat = c V/n + d`` (eq. 7.2).
    risk : minimax risk ``(k-1)^2/(f(q)-k)`` (eq. 6.25).
    """

    k: int
    gamma: float
    q: int
    n_outputs: int
    keep_probability: float
    small_value: float
    large_value: float
    slope: float
    intercept: float
    risk: float

    @property
    def epsilon(self) -> float:
        """``log(gamma)``: the design is eps-LDP with this eps."""
        return math.log(self.gamma)

    def sample(self, x: ArrayLike, rng: np.random.Generator) -> NDArray[np.int8]:
        """Randomize true category codes ``x`` (0..k-1) into ``n x k`` 0/1 responses."""
        return sample_tsubset(x, self.k, self.q, self.gamma, rng)

    def estimate(self, Z: ArrayLike) -> NDArray[np.float64]:
        """Estimator (7.2) from an ``n x k`` response matrix with ``q`` ones per row."""
        A = check_bits(Z)
        if A.shape[1] != self.k or not np.all(A.sum(axis=1) == self.q):
            raise ValueError(f"The 'Z' parameter must be an (n, {self.k}) 0/1 array with exactly q={self.q} ones per row.")
        return estimate_tsubset(A, self.gamma)

    def covariance(self, pi: ArrayLike, n: int) -> NDArray[np.float64]:
        """Exact covariance of the estimator at true ``pi`` (eq. 7.5)."""
        return tsubset_covariance(pi, self.q, self.gamma, n)


def minimax_design(k: int, gamma: float) -> MinimaxDesign:
    """Minimax RR strategy for ``k`` categories at parity ``gamma`` (Chai 2019 Thm 6.4).

    Example: ``minimax_design(20, 2.0).q == 7`` and ``.n_outputs == 77520`` (Table 1).
    """
    kk = check_k(k)
    g = check_gamma(gamma)
    q = minimax_q(kk, g)
    s = tsubset_small_value(kk, q, g)
    c, d = tsubset_constants(kk, q, g)
    return MinimaxDesign(
        k=kk,
        gamma=g,
        q=q,
        n_outputs=math.comb(kk, q),
        keep_probability=tsubset_keep_probability(kk, q, g),
        small_value=s,
        large_value=g * s,
        slope=c,
        intercept=d,
        risk=minimax_risk(kk, g),
    )
