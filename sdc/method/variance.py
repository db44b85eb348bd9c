"""Variance that the NZY post-randomization adds to released counts and proportions.

Given T = t, a released count N_A of a set A of cells is a sum of independent Bernoulli
indicators: ``Var(N_A | t) = sum over PRBs and their cells l of t_l pi_l (1 - pi_l)`` (pi_l the
chance that a record of cell l lands in A, eq. 5.3), at most ``2 theta_bar min(c_A, c_notA)``
with c the sensitive cells in and outside A, the figure the codebook publishes per category
(:func:`publishable_count`). Vectorized over cells. docs/DATA_USERS.md section 3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sdc.method.theta import solve_theta

__all__ = [
    "cell_count_variance",
    "publishable_count",
    "sensitive_cells_by_category",
    "set_count_moments",
    "set_count_variance",
    "theta_bound",
    "variance_bound",
]


def _prb_args(t: np.ndarray | Sequence[int], theta: float) -> tuple[np.ndarray, int]:
    t = np.asarray(t, dtype=float)
    if t.ndim != 1 or t.size == 0 or np.any(t < 1):
        raise ValueError(f"t must be a non-empty vector of frequencies >= 1, got {t!r}")
    if not 0 <= theta <= float(t.min()):
        raise ValueError(f"theta must lie in [0, min t_j] = [0, {t.min():g}], got {theta!r}")
    return t, int(t.size)


def _landing_probability(t: np.ndarray, theta: float, in_set: np.ndarray) -> np.ndarray:
    """pi_l: probability that a record of cell l of the PRB is released in A (per cell l)."""
    k = t.size
    if k < 2 or theta == 0:
        return in_set.astype(float)  # a one-cell PRB is never perturbed
    m = int(in_set.sum())
    return np.where(in_set, 1.0 - theta * (k - m) / ((k - 1) * t), theta * m / ((k - 1) * t))


def cell_count_variance(t: np.ndarray | Sequence[int], theta: float) -> np.ndarray:
    """Var(S_j | T = t) for every cell j of one PRB.

    Parameters
    ----------
    t : (k,) int
        Original frequencies of the PRB's cells.
    theta : float
        The PRB's design parameter (0 <= theta <= min t).

    Returns
    -------
    (k,) float
        2 theta - theta^2 / t_j - theta^2 / (k - 1)^2 * sum_{l != j} 1 / t_l (0 when k = 1).
    """
    t, k = _prb_args(t, theta)
    if k < 2:
        return np.zeros(1)
    inv = 1.0 / t
    return 2 * theta - theta**2 * inv - theta**2 / (k - 1) ** 2 * (inv.sum() - inv)


def set_count_moments(t: np.ndarray | Sequence[int], theta: float,
                      in_set: np.ndarray | Sequence[bool]) -> tuple[float, float]:
    """(Var, fourth central moment) of N_A given T = t, for the part of A inside one PRB.

    N_A is a sum of independent Bernoulli(pi_l) indicators (t_l of them for cell l), so its
    cumulants are sums: kappa_2 = sum t_l pi_l (1 - pi_l), kappa_4 = sum t_l v_l (1 - 6 v_l)
    with v_l = pi_l (1 - pi_l), and mu_4 = kappa_4 + 3 kappa_2^2. (mu_4 gives the exact
    standard error of a simulated variance; see tests/method/test_variance_statistical.py.)
    Over several PRBs (independent given t), add the kappas, not the mu_4s.
    """
    t, _k = _prb_args(t, theta)
    mask = np.asarray(in_set, dtype=bool)
    if mask.shape != t.shape:
        raise ValueError(f"in_set must have one flag per cell ({t.size}), got shape {mask.shape}")
    pi = _landing_probability(t, theta, mask)
    v = pi * (1 - pi)
    k2 = float((t * v).sum())
    k4 = float((t * v * (1 - 6 * v)).sum())
    return k2, k4 + 3 * k2**2


def set_count_variance(t: np.ndarray | Sequence[int], theta: float,
                       in_set: np.ndarray | Sequence[bool]) -> float:
    """Var(N_A | T = t) for the part of a set A of cells inside one PRB.

    Equals 2 theta m (k - m)/(k - 1) - theta^2/(k - 1)^2 ((k - m)^2 sum_{l in A} 1/t_l
    + m^2 sum_{l not in A} 1/t_l), m = number of PRB cells in A (module docstring).
    """
    return set_count_moments(t, theta, in_set)[0]


def variance_bound(c: int | np.ndarray, theta_bar: float,
                   c_rest: int | np.ndarray | None = None) -> float | np.ndarray:
    """The publishable bound 2 theta_bar min(c, c_rest) on Var(N_A | t).

    ``c`` is an upper bound on the number of sensitive cells in A; ``c_rest`` (optional) an
    upper bound on the number of sensitive cells outside A in the partition sets A touches
    (for A = {x = v}: the sum of the published counts of the other categories of x). Valid for
    any set A of cells: in every PRB m (k - m)/(k - 1) <= min(m, k - m), and a sum of minima is
    at most the minimum of the sums. Upper bounds (rounded-up counts) keep it a bound.
    """
    c = np.asarray(c, dtype=float)
    eff = c if c_rest is None else np.minimum(c, np.asarray(c_rest, dtype=float))
    out = 2.0 * theta_bar * np.maximum(eff, 0.0)
    return float(out) if out.ndim == 0 else out


def theta_bound(xi: float, block_thetas: Sequence[float] | np.ndarray) -> float:
    """theta_bar, the one design figure about theta the codebook publishes.

    The theorem's theta (a function of xi alone, hence public with xi) rounded up to two
    decimals (0.79905 -> 0.80: still a bound, and no digits of an actual theta are printed,
    which the leak scans of the public files enforce) when no PRB used a
    larger theta, which is always so under ``theta: theorem`` with ``small_blocks: merge`` or
    ``fail`` and under ``theta: calibrated`` for PRBs with k >= kmin; otherwise 1 (every theta
    is below 1). It reveals at most one bit: whether some small PRB needed a theta above the
    theorem's.
    """
    th = solve_theta(xi)
    arr = np.asarray(block_thetas, dtype=float)
    if arr.size and float(arr.max()) > th + 1e-12:
        return 1.0
    return min(1.0, math.ceil(th * 100 - 1e-9) / 100)


def publishable_count(c: int) -> int:
    """Round a count of sensitive cells up for publication: 0 stays 0, 1..10 -> 10, larger
    counts up to two significant digits (137 -> 140, 1_234 -> 1_300). Rounding up keeps
    :func:`variance_bound` a bound and never shows a small count exactly."""
    c = int(c)
    if c <= 0:
        return 0
    if c <= 10:
        return 10
    step = 10 ** (int(math.floor(math.log10(c))) - 1)
    return int(-(-c // step) * step)


def sensitive_cells_by_category(key_codes: np.ndarray, sensitive: np.ndarray,
                                sizes: Sequence[int]) -> list[np.ndarray]:
    """c_x(v): for every key variable x (column of ``key_codes``) and code v, the number of
    sensitive cells whose value of x is v (one ``np.bincount`` per variable).

    Parameters
    ----------
    key_codes : (C, p) int
        Key codes of the non-empty cells (``CellTable.key_codes``).
    sensitive : (C,) bool
        Sensitive (PRB) cells.
    sizes : p ints
        Number of codes of each key variable (``KeyVariable.size``).
    """
    codes = np.asarray(key_codes)[np.asarray(sensitive, dtype=bool)]
    return [np.bincount(codes[:, i], minlength=int(s)).astype(np.int64)
            for i, s in enumerate(sizes)]
