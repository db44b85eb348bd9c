"""Exact identification risk of an NZY post-randomization block (METHOD.md section 6).

Intruder model (NZY): knows target B's key values c_j, knows B is in the file, picks one of the
S_j released records in c_j uniformly at random. For a PRB with k cells and original
frequencies t, with p = 1 - theta/t_j the probability that B keeps its cell,

    S' = Bin(t_j - 1, 1 - theta/t_j) + sum_{l != j} Bin(t_l, theta / ((k-1) t_l))

is the number of *other* records that land in c_j, and

    R_j(a, t) = (1/a) p P(S' = a-1) / ( p P(S' = a-1) + (1-p) P(S' = a) ).

Cells of one PRB with equal t are exchangeable, so the distribution of S' depends on t_j and the
PRB's frequency profile only (``profile[t]`` = number of cells with frequency t): the binomials
of the other cells with the same t merge into Bin(m_t t, theta/((k-1) t)). The work per PRB is a
few short convolutions, independent of the number of records.

Since R_j(a, t) <= 1/a and S_j never exceeds the PRB's record count N, the maximum over a >= 1 is
found by evaluating a = 1..A, growing A until 1/(A+1) is below the maximum found or A = N.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import gammaln, xlog1py, xlogy

__all__ = ["BlockRisk", "correct_match_risk", "max_risk", "calibrate_theta"]


@dataclass(frozen=True)
class BlockRisk:
    """The exact maximum of R_j(a, t) over the cells and a >= 1 of one PRB, and where."""

    max_risk: float
    t: int
    a: int


def _profile_tuple(profile: Mapping[int, int]) -> tuple[tuple[int, int], ...]:
    items = tuple(sorted((int(t), int(m)) for t, m in profile.items() if int(m) > 0))
    if not items:
        raise ValueError("a PRB profile needs at least one cell")
    if any(t < 1 for t, _ in items):
        raise ValueError(f"cell frequencies must be >= 1, got profile {dict(items)}")
    return items


def _truncated_pmf(n: int, q: float, length: int) -> np.ndarray:
    """Bin(n, q) probabilities of 0..length-1 (zero beyond n), via log-gamma."""
    out = np.zeros(length)
    m = min(n, length - 1)
    s = np.arange(m + 1, dtype=float)
    log_pmf = (gammaln(n + 1.0) - gammaln(s + 1.0) - gammaln(n - s + 1.0)
               + xlogy(s, q) + xlog1py(n - s, -q))
    out[: m + 1] = np.exp(log_pmf)
    return out


def _other_pmf(profile: tuple[tuple[int, int], ...], t_j: int, theta: float,
               length: int) -> np.ndarray:
    """P(S' = s) for s = 0..length-1 (exact: truncation of a convolution keeps its head)."""
    k = sum(m for _, m in profile)
    pmf = _truncated_pmf(t_j - 1, 1.0 - theta / t_j, length)
    if k > 1:
        for t, m in profile:
            others = m - (1 if t == t_j else 0)
            if others > 0:
                part = _truncated_pmf(others * t, theta / ((k - 1) * t), length)
                pmf = np.convolve(pmf, part)[:length]
    return pmf


def correct_match_risk(profile: Mapping[int, int], t_j: int, theta: float,
                       a_max: int) -> np.ndarray:
    """R_j(a, t) for a = 1..a_max for a target in a cell of frequency ``t_j``.

    Entries where S_j = a is impossible are NaN.
    """
    prof = _profile_tuple(profile)
    if t_j not in dict(prof):
        raise ValueError(f"no cell of frequency {t_j} in profile {dict(prof)}")
    if not 0.0 <= theta <= 1.0:
        raise ValueError(f"theta must lie in [0, 1], got {theta}")
    k = sum(m for _, m in prof)
    th = theta if k > 1 else 0.0  # a one-cell PRB cannot move anyone
    p = 1.0 - th / t_j
    s = _other_pmf(prof, t_j, th, a_max + 1)
    num = p * s[:-1]
    den = num + (1.0 - p) * s[1:]
    a = np.arange(1, a_max + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / den / a, np.nan)
    return r


@lru_cache(maxsize=65536)
def _max_risk_cached(prof: tuple[tuple[int, int], ...], theta: float) -> BlockRisk:
    best = BlockRisk(0.0, prof[0][0], 1)
    n_records = sum(t * m for t, m in prof)  # S_j <= records in the PRB
    a_max = min(16, n_records)
    while True:
        for t, _ in prof:
            r = correct_match_risk(dict(prof), t, theta, a_max)
            if np.all(np.isnan(r)):
                continue
            i = int(np.nanargmax(r))
            if r[i] > best.max_risk:
                best = BlockRisk(float(r[i]), t, i + 1)
        if a_max >= n_records or 1.0 / (a_max + 1) <= best.max_risk:
            return best
        a_max = min(4 * a_max, n_records)


def max_risk(profile: Mapping[int, int], theta: float) -> BlockRisk:
    """max over cells j and a >= 1 of R_j(a, t) for a PRB with frequency ``profile``.

    Examples
    --------
    >>> from sdc.engine.theta import solve_theta
    >>> round(max_risk({1: 200, 2: 80}, solve_theta(0.395)).max_risk, 4)
    0.3948
    >>> round(max_risk({1: 5}, solve_theta(0.395)).max_risk, 4)
    0.2012
    """
    return _max_risk_cached(_profile_tuple(profile), float(theta))


def calibrate_theta(profile: Mapping[int, int], xi: float, *, upper: float = 1.0,
                    tol: float = 1e-7) -> float | None:
    """Smallest theta in (0, upper] whose exact max risk is <= xi, by bisection on the exact risk.

    Returns ``None`` when even ``upper`` cannot certify the PRB (then it must be merged).
    The returned theta is always certified (its own exact max risk is <= xi); it is the
    smallest such theta when the max risk decreases in theta, as it does on (0, 1] for the
    profiles NZY considers.

    Example (METHOD.md section 7): two singletons and one doubleton at xi = 0.395 give 0.681.
    """
    prof = _profile_tuple(profile)
    if sum(m for _, m in prof) < 2:
        return None
    if _max_risk_cached(prof, float(upper)).max_risk > xi:
        return None
    lo, hi = 0.0, float(upper)
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if _max_risk_cached(prof, mid).max_risk <= xi:
            hi = mid
        else:
            lo = mid
    return hi
