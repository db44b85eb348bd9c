"""Randomized-response designs with a parity (privacy) level ``gamma`` (Chai 2019, ch. 6-7).

Convention: transition matrices are ``m x k`` with **columns = true categories** and rows =
outputs (Chai 2019 section 2.2). ``gamma = e^eps`` is the privacy level: a design with parity
``gamma`` is ``log(gamma)``-LDP (see :mod:`sdc.mechanisms.privacy`).

Contents (equation numbers of the dissertation, "review" = Nayak 2020):

* :func:`warner_design` - optimal binary design (Proposition 6.1; review Theorem 4.2).
* :func:`max_trace_design` / :func:`max_trace_bound` - Theorem 6.1:
  ``p_ii = gamma/(gamma+k-1)``, ``p_ij = 1/(gamma+k-1)``, ``trace <= gamma k/(gamma+k-1)``.
* t-subset designs (Definition 6.1, eq. 6.16, Remark 6.3): :func:`tsubset_matrix` for small
  ``k`` and :func:`sample_tsubset`, the two-step sampler of section 7.1 (Wang et al. 2016,
  Ye and Barg 2018) that never materialises the ``binom(k, t)`` outputs.
* minimax strategy (section 6.2): :func:`minimax_f` (eq. 6.8), :func:`minimax_q` (eq. 6.9),
  :func:`minimax_risk` ``(k-1)^2/(f(q)-k)`` (eqs. 6.20, 6.25), the moment/minimax estimator
  (eq. 7.2, review eq. 4.5) :func:`estimate_tsubset` and its covariance (eq. 7.5)
  :func:`tsubset_covariance`; :func:`minimax_design` bundles them.
* RAPPOR (section 7.2): flip each bit with ``1/(sqrt(gamma)+1)`` (:func:`sample_rappor`),
  its TPM (review eq. 4.1, :func:`rappor_matrix`), its view as a mixture of t-subset
  designs (eq. 7.6, :func:`rappor_mixture_weights`), the admissible modification that drops
  the all-0 and all-1 outputs (:func:`modified_rappor_matrix`), the mixture's minimax
  estimator (eqs. 7.7-7.11 and the display after Theorem 7.1, :func:`estimate_mixture`), and
  the customary empirical estimator (eq. 7.13) with its risk (eq. 7.14).

Risks are "sample-size adjusted": ``R = n E||pi_hat - pi||^2`` (eq. 6.1).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_int, check_probability_vector, check_real

__all__ = [
    "warner_design",
    "max_trace_design",
    "max_trace_bound",
    "max_trace_risk",
    "estimate_max_trace",
    "sample_max_trace",
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

#: largest number of output rows :func:`tsubset_matrix` / :func:`rappor_matrix` will build
MAX_MATRIX_ROWS = 1 << 20


def _gamma(gamma: float) -> float:
    return check_real(gamma, "gamma", 1.0, None, "neither")


def _k(k: int, low: int = 2) -> int:
    return check_int(k, "k", low, None)


def _codes(x: ArrayLike, k: int, name: str = "x") -> NDArray[np.int64]:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"The '{name}' parameter must be a 1-D array of category codes. Got shape {arr.shape} instead.")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ValueError(f"The '{name}' parameter must contain integer category codes in the range [0, {k - 1}].")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= k):
        raise ValueError(
            f"The '{name}' parameter must contain category codes in the range [0, {k - 1}]. "
            f"Got values in [{int(arr.min())}, {int(arr.max())}] instead."
        )
    return arr


def _bits(Z: ArrayLike, name: str = "Z") -> NDArray[np.int8]:
    arr = np.asarray(Z)
    if arr.ndim != 2 or arr.shape[0] < 1:
        raise ValueError(f"The '{name}' parameter must be a 2-D (n, k) 0/1 array with n >= 1. Got shape {arr.shape} instead.")
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"The '{name}' parameter must contain only 0 and 1.")
    return arr.astype(np.int8)


# --------------------------------------------------------------------------- Warner, max-trace


def warner_design(gamma: float) -> NDArray[np.float64]:
    """Optimal binary design at privacy level ``gamma`` (Chai 2019 Prop. 6.1; review Thm 4.2).

    ``p_11 = p_22 = gamma/(gamma+1)``, ``p_12 = p_21 = 1/(gamma+1)``.
    """
    g = _gamma(gamma)
    return np.array([[g, 1.0], [1.0, g]]) / (g + 1)


def max_trace_design(k: int, gamma: float) -> NDArray[np.float64]:
    """Max-trace ``k x k`` design (Chai 2019 Theorem 6.1(b)).

    ``p_ii = gamma/(gamma+k-1)``, ``p_ij = 1/(gamma+k-1)``. Its parity is exactly ``gamma``;
    it is also the ``t = 1`` subset design and the "gamma-diagonal" matrix of Agrawal et al.
    """
    kk = _k(k)
    g = _gamma(gamma)
    P = np.full((kk, kk), 1.0 / (g + kk - 1))
    np.fill_diagonal(P, g / (g + kk - 1))
    return P


def max_trace_bound(k: int, gamma: float) -> float:
    """Upper bound on ``trace(P)`` for ``k x k`` TPMs with ``eta(P) <= gamma`` (Thm 6.1(a)).

    ``sum_i p_ii <= gamma k / (gamma + k - 1)``.
    """
    kk = _k(k)
    g = _gamma(gamma)
    return g * kk / (g + kk - 1)


def max_trace_risk(k: int, gamma: float, pi: ArrayLike | None = None) -> float:
    """Risk ``n E||P^{-1} lambda_hat - pi||^2`` of the max-trace design (eq. 6.1 with L = P^{-1}).

    ``P^{-1} = ((gamma+k-1) I - 1 1')/(gamma-1)``; ``P^{-T} P^{-1}`` has the constant diagonal
    ``((gamma+k-2)^2 + k - 1)/(gamma-1)^2``, so the risk is that constant minus ``sum pi_i^2``.
    With ``pi=None`` the worst case (uniform ``pi``) is returned.
    """
    kk = _k(k)
    g = _gamma(gamma)
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
    kk = _k(k)
    g = _gamma(gamma)
    xs = _codes(x, kk)
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
    kk = _k(k)
    g = _gamma(gamma)
    z = _codes(responses, kk, "responses")
    n = z.size
    if n < 1:
        raise ValueError("The 'responses' parameter must contain at least one response.")
    lam = np.bincount(z, minlength=kk) / n
    Pinv = ((g + kk - 1) * np.eye(kk) - np.ones((kk, kk))) / (g - 1)
    est = Pinv @ lam
    cov = Pinv @ (np.diag(lam) - np.outer(lam, lam)) @ Pinv.T / n
    return est, cov


# --------------------------------------------------------------------------- minimax (ch. 6)


def minimax_f(x: ArrayLike, k: int, gamma: float) -> NDArray[np.float64] | float:
    """``f(x) = k^2 (x gamma^2 + k - x) / (x gamma + k - x)^2`` (Chai 2019 eq. 6.8).

    ``f(t) = tr(P_t' D_lambda^{-1} P_t)`` at uniform ``pi`` for the t-subset design, and
    ``tr(P' D^{-1} P) <= f(q)`` for every admissible rank-k ``P`` (Lemma 6.1, eq. 6.10).
    """
    kk = _k(k)
    g = _gamma(gamma)
    xx = np.asarray(x, dtype=float)
    out = kk**2 * (xx * g**2 + kk - xx) / (xx * g + kk - xx) ** 2
    return float(out) if out.ndim == 0 else out


def minimax_q(k: int, gamma: float) -> int:
    """Number ``q`` of "large" values per row of the minimax design (Chai 2019 eq. 6.9).

    ``q = floor(k/(1+gamma))`` if ``f(floor) >= f(ceil)`` and ``floor >= 1``, otherwise
    ``ceil(k/(1+gamma))``; ``q`` maximises ``f`` over ``{1, ..., k-1}``.
    """
    kk = _k(k)
    g = _gamma(gamma)
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
    kk = _k(k)
    g = _gamma(gamma)
    q = minimax_q(kk, g)
    return (kk - 1) ** 2 / (minimax_f(q, kk, g) - kk)


def _t(t: int, k: int, low: int = 1, high: int | None = None) -> int:
    return check_int(t, "t", low, k - 1 if high is None else high)


def tsubset_small_value(k: int, t: int, gamma: float) -> float:
    """Small value ``s_t = k / (binom(k, t) (t gamma + k - t))`` of ``P_t`` (eq. 6.16)."""
    kk = _k(k)
    tt = _t(t, kk)
    g = _gamma(gamma)
    return kk / (math.comb(kk, tt) * (tt * g + kk - tt))


def tsubset_keep_probability(k: int, t: int, gamma: float) -> float:
    """``P(Z_j = 1 | X = c_j) = t gamma / (t gamma + k - t)`` (section 7.1, first step)."""
    kk = _k(k)
    tt = _t(t, kk, 0, kk)
    g = _gamma(gamma)
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
    kk = _k(k)
    tt = _t(t, kk)
    g = _gamma(gamma)
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
    kk = _k(k)
    g = _gamma(gamma)
    xs = _codes(x, kk)
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
    kk = _k(k)
    tt = _t(t, kk)
    g = _gamma(gamma)
    den = tt * g + kk - tt
    c = (kk - 1) * den / (tt * (g - 1) * (kk - tt))
    d = ((1 - kk) * den / ((g - 1) * (kk - tt)) + 1) / kk
    return c, d


def estimate_tsubset(Z: ArrayLike, gamma: float) -> NDArray[np.float64]:
    """Moment / minimax linear unbiased estimator of ``pi`` under ``P_t`` (eq. 7.2, Prop. 7.1).

    ``Z`` is the ``n x k`` 0/1 response matrix; every row must contain the same number ``t``
    of ones (``1 <= t <= k-1``). Returns ``c V/n + d`` (may leave [0, 1]; it is unbiased).
    """
    A = _bits(Z)
    n, kk = A.shape
    _k(kk)
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
    g = _gamma(gamma)
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
    kk = _k(k)
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
        A = _bits(Z)
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
    kk = _k(k)
    g = _gamma(gamma)
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


# --------------------------------------------------------------------------- RAPPOR (7.2)


def rappor_flip_probability(gamma: float) -> float:
    """Basic RAPPOR flips each bit independently with ``p = 1/(sqrt(gamma)+1)`` (section 7.2)."""
    return 1.0 / (math.sqrt(_gamma(gamma)) + 1.0)


def sample_rappor(
    x: ArrayLike, k: int, gamma: float, rng: np.random.Generator
) -> NDArray[np.int8]:
    """Basic RAPPOR: one-hot encode ``x`` and flip every bit with ``1/(sqrt(gamma)+1)``."""
    kk = _k(k)
    xs = _codes(x, kk)
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
    kk = _k(k)
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
    kk = _k(k)
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
    kk = _k(k)
    g = _gamma(gamma)
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
    kk = _k(k)
    w = check_probability_vector(weights, "weights")
    if w.size != kk + 1:
        raise ValueError(f"The 'weights' parameter must have k+1={kk + 1} entries. Got {w.size} instead.")
    xs = _codes(x, kk)
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
    A_ = _bits(Z)
    kk = A_.shape[1]
    g = _gamma(gamma)
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
    kk = _k(k)
    g = _gamma(gamma)
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
    A = _bits(Z)
    r = math.sqrt(_gamma(gamma))
    return (r + 1) / (r - 1) * A.mean(axis=0) - 1 / (r - 1)


def rappor_empirical_risk(k: int, gamma: float, pi: ArrayLike | None = None) -> float:
    """Risk of (7.13): ``k sqrt(g)/(sqrt(g)-1)^2 + 1 - sum pi_i^2`` (eq. 7.14)."""
    kk = _k(k)
    r = math.sqrt(_gamma(gamma))
    p = np.full(kk, 1.0 / kk) if pi is None else check_probability_vector(pi, "pi")
    return kk * r / (r - 1) ** 2 + 1 - float(p @ p)
