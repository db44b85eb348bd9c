"""Weighted mode: NZY post-randomization whose survey-weighted cell totals are unbiased
(docs/METHOD.md section 7.11).

A record that moves carries its weight, so NZY's eq. 5.3 (unbiased *counts*) biases weighted
totals. For any transition design (:class:`~sdc.method.transition.Transition`: a move
probability m_j per cell and a destination law w_j. over other cells)

    E[X*_l] = X_l (1 - m_l) + sum_{j != l} X_j m_j w_jl        (X = t for counts, W for weights)

and when W is doubly stochastic on a group g of cells (uniform, or the near design of section
7.12 built on the group's cells), weighted totals are exact in expectation iff W_j m_j is the
same c_g for every cell of the group (every cell sends out c_g and receives sum_j c_g w_jl =
c_g). The weighted design (:func:`weighted_design`):

- cuts every PRB into **weight groups**: its cells sorted by mean weight w-bar_j = W_j/t_j,
  cut into runs of ``size`` to 2 ``size`` - 1 cells at the weight jumps, so that the cells of
  a group have similar mean weights (the same groups under ``destinations: near``; the near
  design of a group of k_g cells has 2 s_g = 2 min(s, (k_g - 1) // 2) destinations per row,
  never fewer than the spread floor);
- gives group g the move probabilities m_j = c_g / W_j (p_jj = 1 - c_g / W_j) and the
  group's W: uniform over the other cells of the group, or the near design of the group's
  cells. c_g starts at theta_b w-bar_g (w-bar_g: the mean weight of the group's records; equal
  weights give NZY's theta_b / t_j) and is raised, never above min_j W_j (m_j <= 1), until the
  group's exact certificate (:func:`sdc.method.transition_risk.certify`) is <= xi;
- a group that no c certifies is merged with a neighbour when the merged group certifies,
  else keeps NZY's design inside the group (theta_b, or the group's calibrated theta: counts
  unbiased, weighted bias at most theta times the group's range of mean weights), else is
  merged and tried again; a PRB left as one such group keeps NZY's design over the PRB
  (``nzy`` in the group table; under ``near`` the PRB's near design of the plan).

Unweighted counts then drift: E[S_l] - t_l = c_g (sum_j w_jl / w-bar_j - 1/w-bar_l), small
when the group's mean weights are close (exactly: :func:`sdc.method.transition.expected_totals`).
The certificate is for the probabilities and the W used; every PRB's design is one Transition
(block-diagonal over its groups), which the draws, the expected totals and ``sdc audit`` use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sdc.method.content_memo import WEIGHT_FITS, fit_key
from sdc.method.risk import BlockRisk
from sdc.method.transition import CellDesign, Transition, cell_design
from sdc.method.transition_risk import certify, own_pick_at_one, surely_above

__all__ = ["WeightSums", "WeightedDesign", "group_near_w", "group_size", "weighted_design"]

#: Points of the scan of c when the starting c is not certified.
_SCAN_POINTS = 32


@dataclass(frozen=True)
class WeightedDesign:
    """The weighted mode's transition design of every PRB.

    Attributes
    ----------
    transitions : list of Transition
        Per PRB (cells in ``prb_cells`` order): m_j and W, block-diagonal over its weight
        groups (``Transition.group``).
    design : CellDesign
        The same laid out over the cell table (global group numbers = ``groups.group``).
    groups : DataFrame
        One row per group: ``group``, ``prb``, ``k``, ``n_records``, ``weight_min``,
        ``weight_max`` (the cells' mean weights), ``c`` (W_j m_j, NaN for ``nzy``), ``theta``
        (of an ``nzy`` group, NaN for ``weighted``), ``max_risk``,
        ``max_risk_t``, ``max_risk_a``, ``max_risk_pick``, ``max_risk_t_z``, ``own_max_risk``,
        ``other_max_risk``, ``design`` (``weighted`` or ``nzy``), ``expected_changed``,
        ``w`` (``uniform`` or ``near``: the group's W).
    certificate : float
        The largest ``max_risk`` of the groups (PRB cells only).
    """

    transitions: list
    design: CellDesign
    groups: pd.DataFrame
    certificate: float
    #: W_j of every cell (the weighted totals the design was made for; audit.json's
    #: ``designs`` records them for the weighted groups)
    weight_total: np.ndarray | None = None

    @property
    def n_groups(self) -> int:
        return len(self.groups)

    @property
    def cell_move(self) -> np.ndarray:
        """m_j of every cell (0 for non-sensitive cells)."""
        return self.design.move

    @property
    def cell_group(self) -> np.ndarray:
        """The weight group of every cell (-1 for non-sensitive cells)."""
        return self.design.group


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
    # run ends e in blocks of ``size``: the starts of a run ending at e are at most e - size,
    # ends of earlier blocks; every start in [max(0, e - 2 size + 1), e - size], the first
    # of the least cost (a start before 0 costs inf; where every cost is inf, the first start)
    offset = np.arange(size)
    for e0 in range(size, k + 1, size):
        e = np.arange(e0, min(e0 + size, k + 1))
        starts = (e - 2 * size + 1)[:, None] + offset[None, :]
        valid = starts >= 0
        at = np.maximum(starts, 0)
        cost = np.where(valid, best[at] + (v[e - 1][:, None] - v[at]), np.inf)
        i = np.argmin(cost, axis=1)
        i = np.where(np.isinf(cost[np.arange(e.size), i]), np.argmax(valid, axis=1), i)
        best[e] = cost[np.arange(e.size), i]
        prev[e] = starts[np.arange(e.size), i]
    out = [k]
    while out[-1] > 0:
        out.append(int(prev[out[-1]]))
    return np.array(out[::-1])


#: Mean weights whose logs differ by at most this are equal (sums of the same weights in
#: another order differ in the last bits: 100/3 three times is not 100 in floating point).
EQUAL_LOG_WEIGHT = 1e-9


def _join_equal(runs: np.ndarray, v: np.ndarray, tol: float = EQUAL_LOG_WEIGHT) -> np.ndarray:
    """The boundaries ``runs`` of sorted values ``v`` with adjacent runs joined while the
    joined run's values are all equal (range <= ``tol``). Cells of one mean weight need no
    weight group of their own: NZY's design on them (m_j = theta / t_j) already keeps every
    weighted total (W_j m_j = theta w-bar is the same c for all), so a cut between them only
    narrows the destinations and raises the theta the smaller groups need (sdcMicro's
    testdata: a household's summed weight is 100 x its size, equal on every PRB of the
    composition stage, which never mixes sizes)."""
    out = [int(runs[0])]
    for i in range(1, len(runs) - 1):
        if v[int(runs[i + 1]) - 1] - v[out[-1]] > tol:
            out.append(int(runs[i]))
    out.append(int(runs[-1]))
    return np.array(out)


#: The W of a group from its cells (global indices, ascending): a Transition whose ``move``
#: is ignored, or None for the uniform W.
NearW = Callable[[np.ndarray], "Transition | None"]


def weighted_design(cell_prb: np.ndarray, prb_cells: np.ndarray, prb_start: np.ndarray,
                    frequency: np.ndarray, weight_total: np.ndarray, prb_theta: np.ndarray,
                    xi: float, *, size: int, near_w: NearW | None = None,
                    prb_fallback: list[tuple[Transition, BlockRisk]] | None = None
                    ) -> WeightedDesign:
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
    near_w : the near W of a group's cells (``destinations: near``); None: uniform W.
    prb_fallback : per PRB its NZY design and certified risk (the plan's); None: NZY's
        uniform design at ``prb_theta``.
    """
    t = np.asarray(frequency, dtype=np.int64)
    w_tot = np.asarray(weight_total, dtype=np.float64)
    k = np.diff(np.append(prb_start, prb_cells.size))
    wbar = np.zeros(t.size)
    wbar[t > 0] = w_tot[t > 0] / t[t > 0]
    rows: list[dict] = []
    transitions: list[Transition] = []
    size = max(2, int(size))
    fits, prbs, cuts = [], [], []
    for b in range(prb_start.size):
        prb = np.asarray(prb_cells[int(prb_start[b]):int(prb_start[b]) + int(k[b])], np.int64)
        cells = prb[np.lexsort((prb, wbar[prb]))]
        fits.append(_RunFit(cells, float(prb_theta[b]), t, w_tot, xi, near_w))
        prbs.append(prb)
        logw = np.log(np.maximum(wbar[cells], 1e-300))
        cuts.append(_join_equal(_runs(logw, size), logw).tolist())
    if near_w is None:
        _first_certificates(fits, cuts)
    for b, (prb, fit, runs) in enumerate(zip(prbs, fits, cuts, strict=True)):
        nzy, bad = _merge_runs(runs, fit)
        if bad is not None:            # one group, uncertified: NZY's design for the PRB
            fallback = prb_fallback[b] if prb_fallback is not None else None
            transitions.append(_prb_nzy(b, prb, fit, wbar, fallback, rows))
        else:
            transitions.append(_prb_groups(b, prb, runs, nzy, fit, wbar, rows))
    groups = pd.DataFrame(rows, columns=_GROUP_COLUMNS)
    cert = float(groups["max_risk"].max()) if len(groups) else 0.0
    design = cell_design(transitions, prb_cells, prb_start, t.size)
    return WeightedDesign(transitions, design, groups, cert)


def _first_certificates(fits: list[_RunFit], cuts: list[list[int]]) -> None:
    """The uniform-W certificate of every first run of every PRB at its starting c, all at
    once (:func:`sdc.method.group_risks.group_risks`, the same figures as one ``certify`` per
    run): a run certified there is fitted (:meth:`_RunFit.fit` would stop at its first
    point); the others are left to the calibration."""
    from sdc.method.group_risks import group_risks

    where, t_parts, m_parts = [], [], []
    for fit, runs in zip(fits, cuts, strict=True):
        for lo, hi in zip(runs[:-1], runs[1:], strict=True):
            if hi - lo >= 2:
                tg, wg, start = fit.start(lo, hi)
                where.append((fit, lo, hi, start))
                t_parts.append(tg)
                m_parts.append(np.minimum(start / wg, 1.0))
    if not where:
        return
    sizes = np.array([x.size for x in t_parts])
    risks = group_risks(np.concatenate(t_parts), np.concatenate(m_parts),
                        np.r_[0, np.cumsum(sizes)[:-1]])
    for (fit, lo, hi, start), r in zip(where, risks, strict=True):
        if r.max_risk <= fit.xi:
            fit.memo[lo, hi] = (start, r)


class _RunFit:
    """One PRB's cells in weight order (``cells``) and the certified designs of its runs
    ``cells[lo:hi]``, memoised: the weighted design (c_g, :func:`_calibrate_c`) and NZY's
    design inside the run (theta_b, else the run's calibrated theta)."""

    def __init__(self, cells: np.ndarray, theta: float, t: np.ndarray, w_tot: np.ndarray,
                 xi: float, near_w: NearW | None) -> None:
        self.cells, self.theta, self.t, self.w_tot, self.xi = cells, theta, t, w_tot, xi
        self.near_w = near_w
        self.memo: dict[tuple[int, int], tuple[float, BlockRisk] | None] = {}
        self.wmemo: dict[tuple[int, int], Transition | None] = {}

    def start(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, float]:
        """(t_j, W_j, the starting c = min(theta_b w-bar_g, min W_j)) of uniform-W run
        [lo, hi), cells in weight order."""
        tg, wg = self.t[self.cells[lo:hi]], self.w_tot[self.cells[lo:hi]]
        c0 = self.theta * float(wg.sum()) / float(tg.sum())
        return tg, wg, min(c0, float(wg.min()))

    def group_w(self, lo: int, hi: int) -> Transition | None:
        """The near W of run [lo, hi) (cells ascending), None for the uniform W."""
        if self.near_w is None:
            return None
        if (lo, hi) not in self.wmemo:
            tr = self.near_w(np.sort(self.cells[lo:hi]))
            self.wmemo[lo, hi] = None if tr is None or tr.uniform else tr
        return self.wmemo[lo, hi]

    def fit(self, lo: int, hi: int) -> tuple[float, BlockRisk] | None:
        """(c_g, certificate) of run [lo, hi) with m_j = c_g / W_j, None when no c certifies;
        c_g starts at theta_b w-bar_g."""
        if (lo, hi) not in self.memo:
            self.memo[lo, hi] = None
            if hi - lo >= 2:
                base = self.group_w(lo, hi)
                c_cells = self.cells[lo:hi] if base is None else np.sort(self.cells[lo:hi])
                tg, wg = self.t[c_cells], self.w_tot[c_cells]
                c0 = self.theta * float(wg.sum()) / float(tg.sum())
                if base is None:   # the uniform W, cells in weight order
                    base = Transition(tg, np.zeros(tg.size), kind="uniform")
                self.memo[lo, hi] = WEIGHT_FITS.get(fit_key(base, wg, c0, self.xi), lambda: (
                    _calibrate_c(lambda cc: _certify_or_skip(base.with_move(np.minimum(
                        cc / wg, 1.0)), self.xi), float(wg.min()), c0, self.xi)))
        return self.memo[lo, hi]

    def nzy_fit(self, lo: int, hi: int) -> tuple[float, BlockRisk] | None:
        """NZY's design inside the group: theta_b, else the group's calibrated theta."""
        from sdc.method.risk import calibrate_theta, calibrate_with, max_risk

        theta, xi = self.theta, self.xi
        if hi - lo < 2:
            return None
        base = self.group_w(lo, hi)
        if base is None:
            prof = np.bincount(self.t[self.cells[lo:hi]])
            prof = {i: int(v) for i, v in enumerate(prof) if v}
            r = max_risk(prof, theta)
            if r.max_risk <= xi:
                return theta, r
            th = calibrate_theta(prof, xi)
            return None if th is None else (th, max_risk(prof, th))
        r = certify(base.with_theta(theta))
        if r.max_risk <= xi:
            return theta, r
        th = calibrate_with(lambda x, base=base: not surely_above(base.with_theta(x), xi)
                            and certify(base.with_theta(x)).max_risk <= xi, 1.0)
        return None if th is None else (th, certify(base.with_theta(th)))


def _certify_or_skip(tr: Transition, xi: float) -> BlockRisk:
    """``certify(tr)``, or, where :func:`surely_above` already says it is above xi, a
    stand-in whose ``max_risk`` is that lower bound (> xi): :func:`_calibrate_c` only compares
    such a point with xi and never returns it."""
    if surely_above(tr, xi):
        bound = own_pick_at_one(tr)
        return BlockRisk(bound, int(tr.frequency.max()), 1, "own", int(tr.frequency.max()),
                         bound, 0.0)
    return certify(tr)


def _merge_runs(runs: list[int], fit: _RunFit) -> tuple[set[int], int | None]:
    """Merge the run boundaries ``runs`` (edited in place) until every run certifies: a run no
    c certifies joins its lighter (else heavier) neighbour when the merged run certifies, else
    keeps NZY's design inside the run, else is merged and tried again. Returns (the starts of
    the runs kept with NZY's design, the run left uncertified or None)."""
    nzy: set[int] = set()         # run starts kept with NZY's design inside the run
    while True:
        bad = next((i for i in range(len(runs) - 1) if runs[i] not in nzy
                    and fit.fit(runs[i], runs[i + 1]) is None), None)
        if bad is None:
            break
        left, right = bad >= 1, bad + 2 < len(runs)
        if left and runs[bad - 1] not in nzy and fit.fit(runs[bad - 1], runs[bad + 1]):
            del runs[bad]          # merged with the lighter neighbour, balanced
        elif right and runs[bad + 1] not in nzy and fit.fit(runs[bad], runs[bad + 2]):
            del runs[bad + 1]      # merged with the heavier neighbour, balanced
        elif fit.nzy_fit(runs[bad], runs[bad + 1]) is not None:
            nzy.add(runs[bad])     # NZY inside this run: bias <= theta x its weight range
        elif len(runs) > 2:        # merged with a neighbour, and tried again
            nzy.discard(runs[bad - 1] if left else runs[bad + 1])
            del runs[bad if left else bad + 1]
        else:
            break
    return nzy, bad


def _prb_nzy(b: int, prb: np.ndarray, fit: _RunFit, wbar: np.ndarray,
             fallback: tuple[Transition, BlockRisk] | None, rows: list[dict]) -> Transition:
    """PRB ``b`` left as one uncertified group: NZY's design over the PRB (``fallback``, the
    plan's, else the uniform design at theta_b); its group row appended to ``rows``."""
    from sdc.method.risk import max_risk

    t, theta = fit.t, fit.theta
    if fallback is not None:
        tr, risk = fallback
    else:
        tr = Transition(t[prb], theta / t[prb], theta=theta, kind="uniform")
        prof = np.bincount(t[prb])
        risk = max_risk({i: int(v) for i, v in enumerate(prof) if v}, theta)
    rows.append(_group_row(len(rows), b, fit.cells, t, wbar, float("nan"), theta, risk, "nzy",
                           theta * fit.cells.size, "uniform" if tr.uniform else "near"))
    return tr


def _prb_groups(b: int, prb: np.ndarray, runs: list[int], nzy: set[int], fit: _RunFit,
                wbar: np.ndarray, rows: list[dict]) -> Transition:
    """PRB ``b``'s design from its runs: m_j = c_g / W_j (capped at 1) in a weighted group,
    theta / t_j in a group kept with NZY's design; one group row per run appended to
    ``rows``."""
    t, w_tot, cells = fit.t, fit.w_tot, fit.cells
    local = np.empty(t.size if prb.size == 0 else int(prb.max()) + 1, dtype=np.int64)
    local[prb] = np.arange(prb.size)
    move = np.zeros(prb.size)
    group = np.zeros(prb.size, dtype=np.int64)
    csr: list[tuple[np.ndarray, Transition]] = []
    for i in range(len(runs) - 1):
        g = len(rows)
        c_cells = cells[runs[i]:runs[i + 1]]
        base = fit.group_w(runs[i], runs[i + 1])
        if base is not None:
            csr.append((local[np.sort(c_cells)], base))
        kind = "uniform" if base is None else "near"
        group[local[c_cells]] = i
        if runs[i] in nzy:
            th, risk = fit.nzy_fit(runs[i], runs[i + 1])
            move[local[c_cells]] = th / t[c_cells]
            rows.append(_group_row(g, b, c_cells, t, wbar, float("nan"), th, risk, "nzy",
                                   th * c_cells.size, kind))
            continue
        c, risk = fit.fit(runs[i], runs[i + 1])
        move[local[c_cells]] = np.minimum(c / w_tot[c_cells], 1.0)
        rows.append(_group_row(g, b, c_cells, t, wbar, c, float("nan"), risk, "weighted",
                               float((t[c_cells] * move[local[c_cells]]).sum()), kind))
    return _block_diagonal(t[prb], move, group, csr)


def _block_diagonal(t: np.ndarray, move: np.ndarray, group: np.ndarray,
                    near: list[tuple[np.ndarray, Transition]]) -> Transition:
    """One PRB's Transition from its groups: ``near`` holds (PRB-local cells ascending, the
    group's near W) for the groups with a near design; the others are uniform (empty rows)."""
    one = int(group.max(initial=0)) == 0
    if not near:
        return Transition(t, move, kind="uniform", group=None if one else group)
    k = t.size
    length = np.zeros(k, dtype=np.int64)
    for cells, tr in near:
        length[cells] = np.diff(tr.indptr)
    indptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(length, out=indptr[1:])
    indices = np.zeros(int(indptr[-1]), dtype=np.int64)
    weights = np.zeros(int(indptr[-1]))
    for cells, tr in near:
        rows = np.repeat(cells, np.diff(tr.indptr))
        pos = indptr[rows] + (np.arange(tr.indptr[-1]) - np.repeat(tr.indptr[:-1],
                                                                   np.diff(tr.indptr)))
        indices[pos] = cells[tr.indices]
        weights[pos] = tr.weights
    return Transition(t, move, indptr, indices, weights, kind="near",
                      group=None if one else group)


_GROUP_COLUMNS = ["group", "prb", "k", "n_records", "weight_min", "weight_max", "c", "theta",
                  "max_risk", "max_risk_t", "max_risk_a", "max_risk_pick", "max_risk_t_z",
                  "own_max_risk", "other_max_risk", "design", "expected_changed", "w"]


def _group_row(g: int, b: int, cells: np.ndarray, t: np.ndarray, wbar: np.ndarray, c: float,
               theta: float, risk: BlockRisk, design: str, changed: float, w: str) -> dict:
    return {"group": g, "prb": b, "k": int(cells.size), "n_records": int(t[cells].sum()),
            "theta": theta,
            "weight_min": float(wbar[cells].min()), "weight_max": float(wbar[cells].max()),
            "c": c, "max_risk": float(risk.max_risk), "max_risk_t": int(risk.t),
            "max_risk_a": int(risk.a), "max_risk_pick": risk.z, "max_risk_t_z": int(risk.t_z),
            "own_max_risk": float(risk.own_max), "other_max_risk": float(risk.other_max),
            "design": design, "expected_changed": changed, "w": w}


def _calibrate_c(risk: Callable[[float], BlockRisk], c_max: float, c0: float, xi: float,
                 tol: float = 1e-9) -> tuple[float, BlockRisk] | None:
    """The c of one group: c0 when certified (capped at c_max = min W_j), else the smallest
    certified c of a scan of (c0, c_max] refined by bisection; None when none is certified.
    ``risk(c)``: the group's certificate at m_j = c / W_j."""
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

    def regroup(self, cell_keys: np.ndarray, group: np.ndarray) -> WeightSums:
        """The sums of groups of cells: every cell key ``cell_keys[i]`` (sorted, holding every
        key summed) replaced by ``group[i]``. The integer sums are those of
        :meth:`of` on the records with their group's key, so :meth:`result` gives the same
        bits (the design search's node cells from the declared ones, no second read)."""
        codes, e, l0, l1, l2 = self._merged()
        out = WeightSums()
        if codes.size:
            g = np.asarray(group, dtype=np.int64)[np.searchsorted(cell_keys, codes)]
            out._parts.append(_reduce(g, e, (l0, l1, l2)))
        return out

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
    """Sum the limbs per distinct (code, e), sorted by code then e (int64, exact): by one
    count per (code, e) over their range when it is at most a few times the number of values
    (float64 sums of limbs < 2^18 are exact integers below 2^35 values), else by a sort."""
    if 0 < codes.size < 2**35:
        c0, e0 = int(codes.min()), int(e.min())
        n_e = int(e.max()) - e0 + 1
        span = (int(codes.max()) - c0 + 1) * n_e
        if span <= max(4 * codes.size, 2**16):
            key = (codes - c0) * n_e + (e - e0)
            present = np.flatnonzero(np.bincount(key, minlength=span))
            sums = (np.bincount(key, weights=limb, minlength=span)[present].astype(np.int64)
                    for limb in limbs)
            return (present // n_e + c0, present % n_e + e0, *sums)
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


def group_near_w(part, config) -> NearW:
    """The near W of a group's cells under the config's ``risk.near`` options, with s (2s
    destinations) lowered to the group: s_g = min(s, (k_g - 1) // 2), never below the spread
    floor (>= ``min_destinations``, none above ``max_weight``); a group too small for the
    floor keeps the uniform W."""
    from sdc.method.draws import cell_identity
    from sdc.method.near import fragile_classes, key_metrics, near_half, near_transition

    codes = part.cells.key_codes
    ids = cell_identity(codes, config)
    metrics = key_metrics(config)
    options = config.risk.near_options
    floor = near_half(options.model_copy(update={"neighbours": 0}))
    half = near_half(options)
    t = part.cells.frequency
    fragile = (fragile_classes(codes, t, part.sensitive, metrics, part.xi)
               if options.kernel == "matching" else None)

    def near_w(cells: np.ndarray) -> Transition | None:
        s = max(floor, min(half, (cells.size - 1) // 2))
        tr, _ = near_transition(codes[cells], ids[cells], t[cells], 1.0, metrics,
                                options.model_copy(update={"neighbours": 2 * s}),
                                None if fragile is None else fragile[cells])
        return None if tr.uniform else tr

    return near_w
