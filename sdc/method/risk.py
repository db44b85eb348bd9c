"""Exact, mechanism-aware identification risk of an NZY post-randomization block (PRB), and
calibrated theta.

The intruder knows a target's key values and may pick a released record from any cell z of its
PRB, not only its own: ``R_{j->z}(a, t) = (1/a) q P(S' = a-1) / (q P(S' = a-1) + (1 - q)
P(S' = a))``, maximised over the target's cell j, z and a >= 1 (z = j is NZY's R_j). Cells with
equal t are exchangeable, so the work per PRB is a few short convolutions per pair of distinct
frequencies, never per cell or record; R <= 1/a ends the scan over a. docs/METHOD.md sections 6
and 7.1 (what it covers), 7.2 (calibrated theta).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import gammaln, xlog1py, xlogy

__all__ = ["BlockRisk", "correct_match_risk", "pick_risk", "pick_distribution", "max_risk",
           "calibrate_theta", "calibrate_with"]

#: Grid of the scan used when the certified thetas need not reach the search's upper end.
_SCAN_POINTS = 64


@dataclass(frozen=True)
class BlockRisk:
    """The exact max of R_{j->z}(a, t) over cells j, picked cells z and a >= 1 of one PRB.

    Attributes
    ----------
    max_risk : float
        The maximum.
    t : int
        t_j of the target's cell where it is attained.
    a : int
        Released count S_z = a where it is attained.
    z : str
        ``"own"`` (z = j, NZY's intruder) or ``"other"`` (another cell of the PRB).
    t_z : int
        Frequency of the picked cell (equal to ``t`` when ``z == "own"``).
    own_max : float
        Max over the own-cell picks only (NZY's R_j(a, t)).
    other_max : float
        Max over the other-cell picks only (0 for a one-cell PRB).
    """

    max_risk: float
    t: int
    a: int
    z: str
    t_z: int
    own_max: float
    other_max: float
    #: the neighbourhood intruder's success (``destinations: near`` only; NaN otherwise)
    neighbourhood: float = float("nan")


def _profile_tuple(profile: Mapping[int, int]) -> tuple[tuple[int, int], ...]:
    items = tuple(sorted((int(t), int(m)) for t, m in profile.items() if int(m) > 0))
    if not items:
        raise ValueError("a PRB profile needs at least one cell")
    if any(t < 1 for t, _ in items):
        raise ValueError(f"cell frequencies must be >= 1, got profile {dict(items)}")
    return items


def _truncated_pmf(n: int, p: float, length: int) -> np.ndarray:
    """Bin(n, p) probabilities of 0..length-1 (zero beyond n), via log-gamma."""
    out = np.zeros(length)
    m = min(n, length - 1)
    if m < 0:
        return out
    s = np.arange(m + 1, dtype=float)
    log_pmf = (gammaln(n + 1.0) - gammaln(s + 1.0) - gammaln(n - s + 1.0)
               + xlogy(s, p) + xlog1py(n - s, -p))
    out[: m + 1] = np.exp(log_pmf)
    return out


def _pick_parts(prof: tuple[tuple[int, int], ...], t_j: int, t_z: int | None,
                theta: float) -> tuple[float, list[tuple[int, float]]]:
    """q and the binomials (n, p) whose sum is S' for target t_j and picked cell t_z.

    ``t_z=None`` is the own cell. Cells with equal t (and the target's other records, which
    move with the same probability as the records of the other cells with frequency t_j) are
    merged into one binomial.
    """
    m_of = dict(prof)
    if t_j not in m_of:
        raise ValueError(f"no cell of frequency {t_j} in profile {m_of}")
    k = sum(m_of.values())
    th = float(theta) if k > 1 else 0.0  # a one-cell PRB cannot move anyone
    if t_z is None:
        q = 1.0 - th / t_j
        parts = [(t_j - 1, 1.0 - th / t_j)]
        for t, m in prof:
            others = m - (1 if t == t_j else 0)
            if others > 0:
                parts.append((others * t, th / ((k - 1) * t)))
        return q, parts
    if t_z not in m_of or m_of[t_z] - (1 if t_z == t_j else 0) < 1:
        raise ValueError(f"no other cell of frequency {t_z} beside the target's in profile {m_of}")
    q = th / ((k - 1) * t_j)
    parts = [(t_z, 1.0 - th / t_z)]
    for t, m in prof:
        movers = (m - (1 if t == t_j else 0) - (1 if t == t_z else 0)) * t
        if t == t_j:
            movers += t_j - 1  # the target's cell-mates
        if movers > 0:
            parts.append((movers, th / ((k - 1) * t)))
    return q, parts


def _other_pmf(parts: list[tuple[int, float]], length: int) -> np.ndarray:
    """P(S' = s), s = 0..length-1 (exact: truncating a convolution keeps its head)."""
    pmf = np.zeros(length)
    pmf[0] = 1.0
    for n, p in parts:
        pmf = np.convolve(pmf, _truncated_pmf(n, p, length))[:length]
    return pmf


def _check_theta(theta: float) -> float:
    th = float(theta)
    if not 0.0 <= th <= 1.0:
        raise ValueError(f"theta must lie in [0, 1], got {theta}")
    return th


def pick_distribution(profile: Mapping[int, int], t_j: int, theta: float, length: int, *,
                      t_z: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(P(B in z, S_z = a), P(S_z = a))`` for a = 0..length-1.

    ``t_z=None`` picks the target's own cell, otherwise another cell of frequency ``t_z``.
    With S' the other records released in z (module docstring), P(B in z, S_z = a) =
    q P(S' = a-1) and P(S_z = a) = q P(S' = a-1) + (1 - q) P(S' = a).
    """
    prof = _profile_tuple(profile)
    q, parts = _pick_parts(prof, int(t_j), None if t_z is None else int(t_z),
                           _check_theta(theta))
    s = _other_pmf(parts, length + 1)
    hit = np.zeros(length)
    hit[1:] = q * s[: length - 1]
    return hit, hit + (1.0 - q) * s[:length]


def pick_risk(profile: Mapping[int, int], t_j: int, theta: float, a_max: int, *,
              t_z: int | None = None) -> np.ndarray:
    """R_{j->z}(a, t) for a = 1..a_max; entries where S_z = a is impossible are NaN.

    Parameters
    ----------
    profile : mapping t -> number of cells with frequency t in the PRB.
    t_j : frequency of the target's cell.
    theta : NZY design parameter in [0, 1].
    a_max : largest released count a evaluated.
    t_z : frequency of the picked cell, or None for the target's own cell (NZY's R_j(a, t)).

    Examples
    --------
    Two singletons swap with certainty at theta = 1; the intruder who picks the other cell
    finds the target:

    >>> float(pick_risk({1: 2}, 1, 1.0, 1, t_z=1)[0])
    1.0
    """
    hit, tot = pick_distribution(profile, t_j, theta, a_max + 1, t_z=t_z)
    a = np.arange(1, a_max + 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot[1:] > 0, hit[1:] / tot[1:] / a, np.nan)


def correct_match_risk(profile: Mapping[int, int], t_j: int, theta: float,
                       a_max: int) -> np.ndarray:
    """NZY's own-cell R_j(a, t) for a = 1..a_max (NaN where S_j = a is impossible).

    Examples
    --------
    >>> from sdc.method.theta import solve_theta
    >>> r = correct_match_risk({1: 200, 2: 80}, 2, solve_theta(0.395), 3)
    >>> round(float(r[0]), 4)
    0.3948
    """
    return pick_risk(profile, t_j, theta, a_max, t_z=None)


def _picks(prof: tuple[tuple[int, int], ...]) -> list[tuple[int, int | None]]:
    """The distinct (t_j, t_z) pairs of a profile (t_z None = own cell)."""
    out: list[tuple[int, int | None]] = []
    k = sum(m for _, m in prof)
    for t_j, _ in prof:
        out.append((t_j, None))
        if k > 1:
            for t_z, m_z in prof:
                if m_z - (1 if t_z == t_j else 0) >= 1:
                    out.append((t_j, t_z))
    return out


@lru_cache(maxsize=65536)
def _max_cached(prof: tuple[tuple[int, int], ...], theta: float) -> BlockRisk:
    n_records = sum(t * m for t, m in prof)  # S_z <= records in the PRB
    picks = _picks(prof)
    a_max = min(16, n_records)
    while True:
        best = (0.0, prof[0][0], None, 1)
        own = other = 0.0
        for t_j, t_z in picks:
            q, parts = _pick_parts(prof, t_j, t_z, theta)
            s = _other_pmf(parts, a_max + 1)
            num = q * s[:-1]
            den = num + (1.0 - q) * s[1:]
            ok = den > 0
            if not ok.any():
                continue
            r = np.zeros(a_max)
            r[ok] = num[ok] / den[ok] / np.arange(1, a_max + 1)[ok]
            i = int(np.argmax(r))
            if t_z is None:
                own = max(own, float(r[i]))
            else:
                other = max(other, float(r[i]))
            if r[i] > best[0]:
                best = (float(r[i]), t_j, t_z, i + 1)
        if a_max >= n_records or 1.0 / (a_max + 1) <= best[0]:
            r_max, t_j, t_z, a = best
            return BlockRisk(r_max, t_j, a, "own" if t_z is None else "other",
                             t_j if t_z is None else t_z, own, other)
        a_max = min(4 * a_max, n_records)


def max_risk(profile: Mapping[int, int], theta: float) -> BlockRisk:
    """max over target cells j, picked cells z of the PRB and a >= 1 of R_{j->z}(a, t).

    Examples
    --------
    >>> from sdc.method.theta import solve_theta
    >>> round(max_risk({1: 200, 2: 80}, solve_theta(0.395)).max_risk, 4)
    0.3948
    >>> round(max_risk({1: 5}, solve_theta(0.395)).max_risk, 4)
    0.2012
    >>> r = max_risk({1: 2}, 1.0)
    >>> (r.max_risk, r.z, r.own_max)
    (1.0, 'other', 0.0)
    >>> round(max_risk({1: 2}, 0.6).other_max, 4)
    0.6923
    """
    return _max_cached(_profile_tuple(profile), _check_theta(theta))


def calibrate_theta(profile: Mapping[int, int], xi: float, *, upper: float = 1.0,
                              tol: float = 1e-7) -> float | None:
    """Smallest theta in (0, upper] whose mechanism-aware max risk is <= xi, or None.

    The own-cell risk falls and the other-cell risk rises with theta, so the certified thetas
    are (for the profiles met in practice) an interval. When ``upper`` < 1 is certified the
    interval reaches it and a bisection on (0, upper] finds its lower end. Otherwise (``upper``
    not certified, or ``upper`` = 1, where events of probability 0 disappear and the own-cell
    risk drops discontinuously) a scan of 64 equally spaced thetas in (0, upper], theta = 1
    last, finds the first certified one and a bisection refines it from below.

    Whatever is returned has been evaluated and is certified (mechanism-aware max risk <= xi);
    ``None`` means no theta of the scan is certified and the PRB must be merged. A PRB of two
    singletons is never certified for xi < 1/2: below theta = 1 its own-cell risk at a = 2 is
    1/2, at theta = 1 its other-cell risk is 1.

    Example (docs/METHOD.md section 7): two singletons and one doubleton at xi = 0.395 give 0.681.
    """
    return _calibrate_cached(_profile_tuple(profile), float(xi), _check_theta(upper), float(tol))


@lru_cache(maxsize=65536)
def _calibrate_cached(prof: tuple[tuple[int, int], ...], xi: float, top: float,
                      tol: float) -> float | None:
    if sum(m for _, m in prof) < 2 or top <= 0.0:
        return None
    return calibrate_with(lambda th: _max_cached(prof, th).max_risk <= xi, top, tol)


def calibrate_with(certified, top: float, tol: float = 1e-7) -> float | None:
    """Smallest theta in (0, ``top``] with ``certified(theta)``, by the scan and bisection of
    :func:`calibrate_theta` (any design: the near-cell certificate uses it too)."""
    if top < 1.0 and certified(top):
        lo, hi = 0.0, top
    else:
        grid = top * np.arange(1, _SCAN_POINTS + 1) / _SCAN_POINTS
        grid[-1] = top
        first = next((i for i, th in enumerate(grid) if certified(float(th))), None)
        if first is None:
            return None
        lo, hi = (0.0 if first == 0 else float(grid[first - 1])), float(grid[first])
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if certified(mid):
            hi = mid
        else:
            lo = mid
    return hi
