"""Weighted mode: NZY post-randomization whose survey-weighted cell totals are unbiased
(docs/METHOD.md section 7.11).

A record that moves carries its weight, so NZY's eq. 5.3 (unbiased *counts*) biases weighted
totals: with W_j the weighted total of cell j, E[W*_l] = W_l (1 - m_l) + sum_{j != l} W_j m_j
w_jl. Any transition design (a move probability m_j per cell, a destination law w_j. over
the other cells of its group) gives

    E[X*_l] = X_l (1 - m_l) + sum_{j != l} X_j m_j w_jl        (X = t for counts, W for weights)

and with w uniform over the other k_g - 1 cells of a group g, weighted totals are exact in
expectation iff W_j m_j is the same c_g for every cell of the group (then every cell sends
out c_g and receives c_g). The weighted design (:func:`weighted_design`):

- cuts every PRB into **weight groups**: its cells sorted by mean weight w-bar_j = W_j/t_j,
  cut into floor(k / size) runs of equal length (at least ``size`` cells each; one group when
  k < 2 size), so that the cells of a group have similar mean weights;
- gives group g the move probabilities m_j = c_g / W_j (p_jj = 1 - c_g / W_j), destinations
  uniform over the other cells of the group. c_g starts at theta_b w-bar_g (w-bar_g: the mean
  weight of the group's records; equal weights give NZY's theta_b / t_j) and is raised, never
  above min_j W_j (m_j <= 1), until the group's exact mechanism-aware max risk
  (:func:`group_risk`) is <= xi;
- a group that no c certifies is merged with a neighbour when the merged group certifies,
  else keeps NZY's design inside the group (theta_b, or the group's calibrated theta: counts
  unbiased, weighted bias at most theta times the group's range of mean weights), else is
  merged and tried again; a PRB left as one such group keeps NZY's design over the PRB
  (``nzy`` in the group table).

Unweighted counts then drift: E[S_l] - t_l = c_g (mean over the other cells j of the group of
1/w-bar_j - 1/w-bar_l), small when the group's mean weights are close (reported exactly,
:func:`expected_totals`). The certificate is computed for the probabilities used.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import comb

from sdc.method.risk import BlockRisk

__all__ = ["WeightedDesign", "expected_totals", "group_risk", "nzy_design", "weighted_design"]

#: Points of the scan of c when the starting c is not certified.
_SCAN_POINTS = 32


@dataclass(frozen=True)
class WeightedDesign:
    """A transition design on the cell table: per cell a move probability and a group.

    Attributes
    ----------
    cell_move : (C,) float64
        m_j, the probability that a record of cell j moves (0 for non-sensitive cells).
    cell_group : (C,) int64
        The destination group of cell j (-1 for non-sensitive cells): a moving record goes to
        one of the other cells of its group, uniformly.
    groups : DataFrame
        One row per group: ``group``, ``prb``, ``k``, ``n_records``, ``weight_min``,
        ``weight_max`` (the cells' mean weights), ``c`` (W_j m_j, NaN for ``nzy``), ``theta``
        (of an ``nzy`` group, NaN for ``weighted``), ``max_risk``,
        ``max_risk_t``, ``max_risk_a``, ``max_risk_pick``, ``max_risk_t_z``, ``own_max_risk``,
        ``other_max_risk``, ``design`` (``weighted`` or ``nzy``), ``expected_changed``.
    certificate : float
        The largest ``max_risk`` of the groups (PRB cells only).
    """

    cell_move: np.ndarray
    cell_group: np.ndarray
    groups: pd.DataFrame
    certificate: float

    @property
    def n_groups(self) -> int:
        return len(self.groups)


# -- exact expectations --------------------------------------------------------------------
def expected_totals(x: np.ndarray, cell_move: np.ndarray, cell_group: np.ndarray) -> np.ndarray:
    """E[X*_l] for every cell l: X_l (1 - m_l) + sum_{j in g(l), j != l} X_j m_j / (k_g - 1).

    ``x`` is any per-cell total carried by the records (t_j for counts, W_j for weighted
    totals); destinations uniform over the other cells of the group (a group of one cell keeps
    its records). Exact: computed from the transition probabilities, not simulated.

    Examples
    --------
    Two singletons of weights 1 and 3, NZY at theta = 0.5 (m = 0.5 each): counts stay 1 each,
    weighted totals move towards each other; with m_j = c / W_j they stay:

    >>> expected_totals(np.array([1.0, 3.0]), np.array([.5, .5]), np.array([0, 0])).tolist()
    [2.0, 2.0]
    >>> expected_totals(np.array([1.0, 3.0]), np.array([.6, .2]), np.array([0, 0])).tolist()
    [1.0, 3.0]
    """
    x = np.asarray(x, dtype=np.float64)
    m = np.where(np.asarray(cell_group) >= 0, np.asarray(cell_move, dtype=np.float64), 0.0)
    g = np.asarray(cell_group, dtype=np.int64)
    out = x * (1.0 - m)
    sens = np.flatnonzero(g >= 0)
    if sens.size == 0:
        return out
    n_g = int(g[sens].max()) + 1
    k = np.bincount(g[sens], minlength=n_g)
    flow = x[sens] * m[sens]
    pool = np.bincount(g[sens], weights=flow, minlength=n_g)
    kk = k[g[sens]]
    inflow = np.where(kk > 1, (pool[g[sens]] - flow) / np.maximum(kk - 1, 1), 0.0)
    out[sens] = np.where(kk > 1, out[sens] + inflow, x[sens])
    return out


def nzy_design(cell_prb: np.ndarray, frequency: np.ndarray,
               prb_theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """NZY's design (eq. 5.3) in the same terms: m_j = theta_b / t_j, group = PRB."""
    cell_prb = np.asarray(cell_prb, dtype=np.int64)
    sens = cell_prb >= 0
    m = np.zeros(cell_prb.size)
    m[sens] = np.asarray(prb_theta, dtype=np.float64)[cell_prb[sens]] / frequency[sens]
    return m, cell_prb.copy()


# -- exact risk of a group with unequal move probabilities ---------------------------------
def _times_bernoulli(f: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Rows of ``f`` (power series, truncated) times (1 - p + p x), p one per row."""
    out = f * (1.0 - p)[:, None]
    out[:, 1:] += f[:, :-1] * p[:, None]
    return out


def _over_bernoulli(f: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Rows of ``f`` divided by (1 - p + p x) (power-series division, truncated; p <= 1/2, so
    the error of every step shrinks by p / (1 - p) <= 1)."""
    out = np.empty_like(f)
    q = 1.0 - p
    out[:, 0] = f[:, 0] / q
    for s in range(1, f.shape[1]):
        out[:, s] = (f[:, s] - p * out[:, s - 1]) / q
    np.maximum(out, 0.0, out=out)
    return out


def _binomial_rows(n: np.ndarray, p: np.ndarray, length: int) -> np.ndarray:
    """Rows Bin(n_i, p_i) probabilities of 0..length-1 (n small: at most 2 at xi > 1/3)."""
    s = np.arange(length)
    n = np.asarray(n)[:, None]
    p = np.asarray(p, dtype=np.float64)[:, None]
    with np.errstate(invalid="ignore"):
        out = comb(n, s[None, :]) * p ** s[None, :] * (1.0 - p) ** np.maximum(n - s[None, :], 0)
    out[s[None, :] > n] = 0.0
    return np.nan_to_num(out)


def _risk_rows(q: np.ndarray, pmf: np.ndarray, n_other: int) -> np.ndarray:
    """R(a) = (1/a) q P(S' = a-1) / (q P(S' = a-1) + (1 - q) P(S' = a)), a = 1..L-1;
    S' <= ``n_other`` (the other records of the group): beyond it P is 0 exactly."""
    pmf = pmf.copy()
    pmf[:, n_other + 1:] = 0.0
    num = q[:, None] * pmf[:, :-1]
    den = num + (1.0 - q)[:, None] * pmf[:, 1:]
    a = np.arange(1, pmf.shape[1])[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / den / a, 0.0)
    return r


def group_risk(t: np.ndarray, m: np.ndarray) -> BlockRisk:
    """Exact max over target cells j, picked cells z and a >= 1 of R_{j->z}(a, t) for one
    group whose records move with probability m_j to one of the other k - 1 cells uniformly.

    The picked cell's other released records S' are independent Bernoullis: for z = j,
    S' = Bin(t_j - 1, 1 - m_j) + sum_{l != j} Bin(t_l, m_l / (k - 1)) and q = 1 - m_j; for
    z != j, S' = Bin(t_z, 1 - m_z) + Bin(t_j - 1, m_j / (k - 1)) + sum_{l != j, z}
    Bin(t_l, m_l / (k - 1)) and q = m_j / (k - 1) (docs/METHOD.md section 7.1 with unequal
    m). The inflow law of all records is computed once and the excluded cells divided out
    (exact power-series division; stable since m_l / (k - 1) <= 1/2 for k >= 3; k = 2 is
    computed directly). With m_j = theta / t_j this is :func:`sdc.method.risk.max_risk`.
    """
    t = np.asarray(t, dtype=np.int64)
    m = np.clip(np.asarray(m, dtype=np.float64), 0.0, 1.0)
    k = t.size
    n_rec = int(t.sum())
    if k == 1:
        m = np.zeros(1)
    a_max = min(16, n_rec)
    while True:
        r = _group_risk_at(t, m, a_max + 1)
        if a_max >= n_rec or 1.0 / (a_max + 1) <= r.max_risk:
            return r
        a_max = min(4 * a_max, n_rec)


def _group_risk_at(t: np.ndarray, m: np.ndarray, length: int) -> BlockRisk:
    k = t.size
    t_max = int(t.max())
    # own picks: pool_j = the other cells' records landing in j
    if k >= 3:
        p = m / (k - 1)
        total = np.zeros((1, length))
        total[0, 0] = 1.0
        for i in range(k):  # the inflow law of every record of the group, once
            for _ in range(int(t[i])):
                total = _times_bernoulli(total, p[i:i + 1])
        pool = np.repeat(total, k, axis=0)
        for r in range(t_max):
            rows = np.flatnonzero(t > r)
            pool[rows] = _over_bernoulli(pool[rows], p[rows])
    elif k == 2:
        p = m.copy()
        pool = np.stack([_binomial_rows(t[[1]], m[[1]], length)[0],
                         _binomial_rows(t[[0]], m[[0]], length)[0]])
    else:
        p = np.zeros(1)
        pool = np.zeros((1, length))
        pool[0, 0] = 1.0
    own = pool
    for r in range(t_max - 1):  # the target's cell-mates that stay: Bin(t_j - 1, 1 - m_j)
        rows = np.flatnonzero(t - 1 > r)
        own[rows] = _times_bernoulli(own[rows], 1.0 - m[rows])
    r_own = _risk_rows(1.0 - m, own, int(t.sum()) - 1)
    best = (0.0, int(t[0]), 1, "own", int(t[0]))
    i, a = np.unravel_index(int(np.argmax(r_own)), r_own.shape)
    own_max = float(r_own[i, a])
    if own_max > best[0]:
        best = (own_max, int(t[i]), int(a) + 1, "own", int(t[i]))
    other_max = 0.0
    if k >= 2:
        for z in range(k):
            js = np.delete(np.arange(k), z)
            if k >= 3:
                s = _over_bernoulli(np.repeat(pool[z:z + 1], js.size, axis=0), p[js])
            else:  # k == 2: the target's cell-mates are all that flows into z
                s = _binomial_rows(t[js] - 1, m[js], length)
            stay = _binomial_rows(t[[z]], 1.0 - m[[z]], int(t[z]) + 1)[0]
            conv = s * stay[0]
            for d in range(1, min(length, int(t[z]) + 1)):
                conv[:, d:] += s[:, :-d] * stay[d]
            r_oth = _risk_rows(p[js] if k >= 3 else m[js], conv, int(t.sum()) - 1)
            ii, aa = np.unravel_index(int(np.argmax(r_oth)), r_oth.shape)
            v = float(r_oth[ii, aa])
            other_max = max(other_max, v)
            if v > best[0]:
                best = (v, int(t[js[ii]]), int(aa) + 1, "other", int(t[z]))
    return BlockRisk(best[0], best[1], best[2], best[3], best[4], own_max, other_max)


# -- groups and the weighted design --------------------------------------------------------
def _runs(v: np.ndarray, size: int) -> np.ndarray:
    """Boundaries 0 = e_0 < ... < e_r = k of runs of ``size`` .. 2 ``size`` - 1 sorted values
    minimising sum of (last - first) per run (ties: the longer last run, deterministic)."""
    k = v.size
    if k < 2 * size:
        return np.array([0, k])
    best = np.full(k + 1, np.inf)
    prev = np.zeros(k + 1, dtype=np.int64)
    best[0] = 0.0
    for e in range(size, k + 1):
        lo, hi = max(0, e - 2 * size + 1), e - size  # run start in [lo, hi]
        starts = np.arange(lo, hi + 1)
        cost = best[starts] + (v[e - 1] - v[starts])
        i = int(np.argmin(cost))
        best[e], prev[e] = cost[i], starts[i]
    out = [k]
    while out[-1] > 0:
        out.append(int(prev[out[-1]]))
    return np.array(out[::-1])


def weighted_design(cell_prb: np.ndarray, prb_cells: np.ndarray, prb_start: np.ndarray,
                    frequency: np.ndarray, weight_total: np.ndarray, prb_theta: np.ndarray,
                    xi: float, *, size: int) -> WeightedDesign:
    """The weighted mode's transition design for every PRB (module docstring).

    Per PRB b: its cells sorted by (mean weight, cell index) are cut into runs of ``size`` to
    2 ``size`` - 1 cells minimising the sum over runs of log(largest / smallest mean weight)
    (a dynamic programme: runs end where the weights jump; one run when k_b < 2 ``size``).
    Each run is a group with m_j = c_g / W_j (c_g from :func:`_calibrate_c`). A run that no c
    certifies is merged with its lighter (else heavier) neighbour when the merged run
    certifies; else it keeps NZY's design inside the run (``nzy``: theta_b, or its calibrated
    theta); else it is merged with a neighbour and tried again. A PRB left as one run that
    fails keeps NZY's design at its certified theta.

    Parameters
    ----------
    cell_prb : (C,) PRB of every cell, -1 for non-sensitive cells.
    prb_cells, prb_start : the sensitive cells grouped by PRB (:class:`ReleasePlan`).
    frequency : (C,) t_j.
    weight_total : (C,) W_j, the sum of the weights of cell j's records (> 0).
    prb_theta : (B,) the certified theta of every PRB (its NZY design is the fallback).
    xi : the risk bound.
    size : smallest number of cells of a weight group (at least 2).
    """
    from sdc.method.risk import calibrate_theta, max_risk

    t = np.asarray(frequency, dtype=np.int64)
    w_tot = np.asarray(weight_total, dtype=np.float64)
    k = np.diff(np.append(prb_start, prb_cells.size))
    wbar = np.zeros(t.size)
    wbar[t > 0] = w_tot[t > 0] / t[t > 0]
    cell_move = np.zeros(t.size)
    cell_group = np.full(t.size, -1, dtype=np.int64)
    rows: list[dict] = []
    size = max(2, int(size))
    for b in range(prb_start.size):
        cells = prb_cells[int(prb_start[b]):int(prb_start[b]) + int(k[b])]
        cells = cells[np.lexsort((cells, wbar[cells]))]
        theta = float(prb_theta[b])
        runs = _runs(np.log(np.maximum(wbar[cells], 1e-300)), size).tolist()
        memo: dict[tuple[int, int], tuple[float, BlockRisk] | None] = {}

        def fit(lo: int, hi: int, memo=memo, cells=cells,
                theta=theta) -> tuple[float, BlockRisk] | None:
            if (lo, hi) not in memo:
                c_cells = cells[lo:hi]
                tg, wg = t[c_cells], w_tot[c_cells]
                c0 = theta * float(wg.sum()) / float(tg.sum())
                memo[lo, hi] = _calibrate_c(tg, wg, c0, xi) if hi - lo >= 2 else None
            return memo[lo, hi]

        def nzy_fit(lo: int, hi: int, cells=cells, theta=theta) -> tuple[float, BlockRisk] | None:
            """NZY's design inside the group: theta_b, else the group's calibrated theta."""
            prof = np.bincount(t[cells[lo:hi]])
            prof = {i: int(v) for i, v in enumerate(prof) if v}
            if hi - lo < 2:
                return None
            r = max_risk(prof, theta)
            if r.max_risk <= xi:
                return theta, r
            th = calibrate_theta(prof, xi)
            return None if th is None else (th, max_risk(prof, th))

        nzy: set[int] = set()         # run starts kept with NZY's design inside the run
        while True:
            bad = next((i for i in range(len(runs) - 1) if runs[i] not in nzy
                        and fit(runs[i], runs[i + 1]) is None), None)
            if bad is None:
                break
            left, right = bad >= 1, bad + 2 < len(runs)
            if left and runs[bad - 1] not in nzy and fit(runs[bad - 1], runs[bad + 1]):
                del runs[bad]          # merged with the lighter neighbour, balanced
            elif right and runs[bad + 1] not in nzy and fit(runs[bad], runs[bad + 2]):
                del runs[bad + 1]      # merged with the heavier neighbour, balanced
            elif nzy_fit(runs[bad], runs[bad + 1]) is not None:
                nzy.add(runs[bad])     # NZY inside this run: bias <= theta x its weight range
            elif len(runs) > 2:        # merged with a neighbour, and tried again
                nzy.discard(runs[bad - 1] if left else runs[bad + 1])
                del runs[bad if left else bad + 1]
            else:
                break
        if bad is not None:            # one group, uncertified: NZY's design for the PRB
            g = len(rows)
            cell_move[cells] = theta / t[cells]
            cell_group[cells] = g
            prof = np.bincount(t[cells])
            risk = max_risk({i: int(v) for i, v in enumerate(prof) if v}, theta)
            rows.append(_group_row(g, b, cells, t, wbar, float("nan"), theta, risk, "nzy",
                                   theta * cells.size))
            continue
        for i in range(len(runs) - 1):
            g = len(rows)
            c_cells = cells[runs[i]:runs[i + 1]]
            if runs[i] in nzy:
                th, risk = nzy_fit(runs[i], runs[i + 1])
                cell_move[c_cells] = th / t[c_cells]
                cell_group[c_cells] = g
                rows.append(_group_row(g, b, c_cells, t, wbar, float("nan"), th, risk, "nzy",
                                       th * c_cells.size))
                continue
            c, risk = fit(runs[i], runs[i + 1])
            cell_move[c_cells] = c / w_tot[c_cells]
            cell_group[c_cells] = g
            rows.append(_group_row(g, b, c_cells, t, wbar, c, float("nan"), risk, "weighted",
                                   float((t[c_cells] * cell_move[c_cells]).sum())))
    groups = pd.DataFrame(rows, columns=_GROUP_COLUMNS)
    cert = float(groups["max_risk"].max()) if len(groups) else 0.0
    return WeightedDesign(cell_move, cell_group, groups, cert)


_GROUP_COLUMNS = ["group", "prb", "k", "n_records", "weight_min", "weight_max", "c", "theta",
                  "max_risk", "max_risk_t", "max_risk_a", "max_risk_pick", "max_risk_t_z", "own_max_risk",
                  "other_max_risk", "design", "expected_changed"]


def _group_row(g: int, b: int, cells: np.ndarray, t: np.ndarray, wbar: np.ndarray, c: float,
               theta: float, risk: BlockRisk, design: str, changed: float) -> dict:
    return {"group": g, "prb": b, "k": int(cells.size), "n_records": int(t[cells].sum()),
            "theta": theta,
            "weight_min": float(wbar[cells].min()), "weight_max": float(wbar[cells].max()),
            "c": c, "max_risk": float(risk.max_risk), "max_risk_t": int(risk.t),
            "max_risk_a": int(risk.a), "max_risk_pick": risk.z, "max_risk_t_z": int(risk.t_z),
            "own_max_risk": float(risk.own_max), "other_max_risk": float(risk.other_max),
            "design": design, "expected_changed": changed}


def _calibrate_c(t: np.ndarray, w: np.ndarray, c0: float, xi: float,
                 tol: float = 1e-9) -> tuple[float, BlockRisk] | None:
    """The c of one group: c0 when certified (capped at min W_j), else the smallest certified
    c of a scan of (c0, min W_j] refined by bisection; None when none is certified."""
    c_max = float(w.min())

    def risk(c: float) -> BlockRisk:
        return group_risk(t, c / w)

    start = min(c0, c_max)
    r = risk(start)
    if r.max_risk <= xi:
        return start, r
    if start >= c_max:
        return None
    grid = start + (c_max - start) * np.arange(1, _SCAN_POINTS + 1) / _SCAN_POINTS
    grid[-1] = c_max
    lo = start
    for c in grid:
        r = risk(float(c))
        if r.max_risk <= xi:
            hi, r_hi = float(c), r
            break
        lo = float(c)
    else:
        return None
    while hi - lo > tol * hi:
        mid = 0.5 * (lo + hi)
        r = risk(mid)
        if r.max_risk <= xi:
            hi, r_hi = mid, r
        else:
            lo = mid
    return hi, r_hi


# -- exact weighted totals per cell, mergeable over batches --------------------------------
_LIMB = 18
_MASK = (1 << _LIMB) - 1


class WeightSums:
    """W_j = sum of the weights of cell j's records, the same bits whatever the batches.

    Every weight w > 0 is m 2^e with an integer mantissa M = m 2^53 < 2^53 (``np.frexp``);
    M is cut into three 18-bit limbs summed per (cell, e) in int64 (exact for fewer than 2^45
    records), so merged batches hold the exact integer sums. :meth:`result` turns them into
    floats by one fixed formula (limb carry, then the exponents in increasing order), so equal
    integer sums give equal W_j on every executor.
    """

    def __init__(self) -> None:
        self._parts: list[tuple[np.ndarray, ...]] = []

    @classmethod
    def of(cls, codes: np.ndarray, weights: np.ndarray) -> WeightSums:
        """The sums of one batch: ``codes`` any integer cell key per record (cell codes or
        indices), ``weights`` > 0 and finite (checked by the input schema)."""
        out = cls()
        w = np.asarray(weights, dtype=np.float64)
        if w.size == 0:
            return out
        mant, e = np.frexp(w)
        big = (mant * 2.0**53).astype(np.int64)
        limbs = (big & _MASK, (big >> _LIMB) & _MASK, big >> (2 * _LIMB))
        out._parts.append(_reduce(np.asarray(codes, dtype=np.int64), e.astype(np.int64),
                                  limbs))
        return out

    def merge(self, other: WeightSums) -> None:
        self._parts.extend(other._parts)
        if len(self._parts) > 8:
            self._parts = [self._merged()]

    def _merged(self) -> tuple[np.ndarray, ...]:
        if not self._parts:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z, z, z
        cat = [np.concatenate([p[i] for p in self._parts]) for i in range(5)]
        return _reduce(cat[0], cat[1], tuple(cat[2:]))

    def result(self, cell_keys: np.ndarray) -> np.ndarray:
        """W_j for every key of ``cell_keys`` (0 for a key without records)."""
        codes, e, l0, l1, l2 = self._merged()
        l1 = l1 + (l0 >> _LIMB)
        l0 = l0 & _MASK
        l2 = l2 + (l1 >> _LIMB)
        l1 = l1 & _MASK
        val = (l2.astype(np.float64) * 2.0**(2 * _LIMB)
               + (l1 * (1 << _LIMB) + l0).astype(np.float64)) * np.ldexp(1.0, e - 53)
        keys = np.asarray(cell_keys, dtype=np.int64)
        pos = np.searchsorted(keys, codes)
        if codes.size and (pos.max() >= keys.size or (keys[pos] != codes).any()):
            raise ValueError("weight sums hold a cell that is not in the cell table")
        # (code, e) pairs are sorted by code then e: bincount adds each cell's exponents in
        # increasing order, one fixed order of additions
        return np.bincount(pos, weights=val, minlength=keys.size)


def _reduce(codes: np.ndarray, e: np.ndarray,
            limbs: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Sum the limbs per distinct (code, e), sorted by code then e (int64, exact)."""
    order = np.lexsort((e, codes))
    c, x = codes[order], e[order]
    start = np.ones(c.size, dtype=bool)
    start[1:] = (c[1:] != c[:-1]) | (x[1:] != x[:-1])
    idx = np.flatnonzero(start)
    return (c[idx], x[idx], *(np.add.reduceat(limb[order], idx) for limb in limbs))


# -- the plan -------------------------------------------------------------------------------
def group_size(kmin: int) -> int:
    """Smallest number of cells of a weight group: kmin (the theorem's PRB size), at least 5."""
    return max(int(kmin), 5)


def weight_plan(plan, weight_total: np.ndarray, config) -> object:
    """``plan`` (a :class:`sdc.method.plan.ReleasePlan`) with the weighted design of its PRBs
    and the certificate recomputed for it: max over weight groups of their exact max risk and
    over non-sensitive cells of 1/t_j. ``weight_total``: W_j of every cell (:class:`WeightSums`).
    """
    import dataclasses

    part = plan.partitioned
    t = part.cells.frequency
    theta = np.array([b.theta for b in plan.block_plan.blocks], dtype=np.float64)
    design = weighted_design(plan.cell_prb, plan.prb_cells, plan.prb_start, t, weight_total,
                             theta, part.xi, size=group_size(part.kmin))
    cert, at = 0.0, {}
    if design.n_groups:
        g = design.groups
        i = int(np.argmax(g["max_risk"].to_numpy()))
        b = int(g["prb"].iat[i])
        cert = float(g["max_risk"].iat[i])
        at = {"source": "prb", "prb": b, "group": i,
              "partition_key": plan.blocks["partition_key"].iat[b],
              "t": int(g["max_risk_t"].iat[i]), "a": int(g["max_risk_a"].iat[i]),
              "pick": str(g["max_risk_pick"].iat[i]), "t_z": int(g["max_risk_t_z"].iat[i])}
    sens = plan.cell_prb >= 0
    if (~sens).any():
        t_ns = int(t[~sens].min())
        if 1.0 / t_ns > cert:
            cert, at = 1.0 / t_ns, {"source": "non_sensitive", "t": t_ns, "a": t_ns,
                                    "pick": "own", "t_z": t_ns}
    if cert > part.xi:
        from sdc.errors import CertificationError

        raise CertificationError(f"weighted design's max risk {cert} exceeds xi = {part.xi}")
    return dataclasses.replace(plan, weighted=design, certificate=cert, certificate_at=at)
