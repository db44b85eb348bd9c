"""The exact uniform-W group risk of many groups at once: :func:`group_risks`.

:func:`sdc.method.transition_risk.group_risk` certifies one group (a PRB of its own whose
records move with probability m_j to one of the other k - 1 cells uniformly). The weighted
design (:mod:`sdc.method.weighted`) certifies thousands of small groups (5-9 cells of a few
records each), one Python call apiece, most of the call being numpy overhead on rows of a
handful of numbers. Here every step of that routine runs once over the rows of all the groups
(cells, or (picked cell, target cell) pairs), a group's rows taking exactly the operations
they take in ``group_risk`` (the same row-wise ufuncs on the same operands: the steps a
group does not take are restricted away, not padded), so every figure is the same float, bit
for bit; the maxima are located in the order ``group_risk`` scans them (first target row, then
first a; first picked cell). A group whose first width (a <= 16) does not settle its maximum,
or with fewer than 3 or more than 64 cells, is computed by ``group_risk`` itself. The groups
are computed in chunks of about 2^14 (picked, target) rows (a few MB per array).
"""

from __future__ import annotations

import numpy as np

from sdc.method.power_series import binomial_rows, over_bernoulli, times_bernoulli
from sdc.method.risk import BlockRisk
from sdc.method.transition_risk import group_risk

__all__ = ["group_risks"]

#: the first width of ``group_risk``: a = 1..16
_A_MAX = 16
#: groups of more cells are left to ``group_risk`` (k (k - 1) rows of (picked, target) pairs)
_K_BATCH = 64
#: (picked, target) rows per batch: a few MB per array
_PAIRS = 1 << 14


def group_risks(t: np.ndarray, m: np.ndarray, start: np.ndarray) -> list[BlockRisk]:
    """``[group_risk(t[s:e], m[s:e]) for (s, e) in groups]``, the groups' cells concatenated
    in ``t`` and ``m`` and group g starting at ``start[g]`` (ascending; the last group ends at
    ``t.size``). Each result equals ``group_risk``'s exactly (module docstring)."""
    t = np.asarray(t, dtype=np.int64)
    m = np.clip(np.asarray(m, dtype=np.float64), 0.0, 1.0)
    start = np.asarray(start, dtype=np.int64)
    end = np.append(start[1:], t.size)
    k = end - start
    out: list[BlockRisk | None] = [None] * start.size
    batch = np.flatnonzero((k >= 3) & (k <= _K_BATCH))
    pairs = np.cumsum(k[batch] * (k[batch] - 1))
    cut = np.searchsorted(pairs, np.arange(0, int(pairs[-1]) if pairs.size else 0, _PAIRS),
                          side="right")
    for part in np.split(batch, cut[1:]):     # chunks of about _PAIRS (picked, target) rows
        if not part.size:
            continue
        for g, r in zip(part.tolist(), _batch(t, m, start[part], end[part]), strict=True):
            out[g] = r
    for g in range(start.size):
        if out[g] is None:
            out[g] = group_risk(t[start[g]:end[g]], m[start[g]:end[g]])
    return out  # type: ignore[return-value]


def _first_max(values: np.ndarray, seg: np.ndarray, n_seg: int) -> tuple[np.ndarray, np.ndarray]:
    """Per segment (``seg`` ascending, every segment non-empty): the max of ``values`` and the
    position of its first occurrence."""
    bounds = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    top = np.maximum.reduceat(values, bounds)
    hit = np.flatnonzero(values == top[seg])
    first = hit[np.r_[True, seg[hit][1:] != seg[hit][:-1]]]
    assert first.size == n_seg
    return top, first


def _risk_rows(q: np.ndarray, pmf: np.ndarray, n_other: np.ndarray) -> np.ndarray:
    """``transition_risk._risk_rows`` with one ``n_other`` per row."""
    pmf = np.where(np.arange(pmf.shape[1])[None, :] > n_other[:, None], 0.0, pmf)
    num = q[:, None] * pmf[:, :-1]
    den = num + (1.0 - q)[:, None] * pmf[:, 1:]
    a = np.arange(1, pmf.shape[1])[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den / a, 0.0)


def _batch(t_all: np.ndarray, m_all: np.ndarray, start: np.ndarray,
           end: np.ndarray) -> list[BlockRisk | None]:
    """Groups of at least 3 cells; None where the first width does not settle the maximum."""
    n_g = start.size
    k = end - start
    grp = np.repeat(np.arange(n_g), k)
    first = np.r_[0, np.cumsum(k)[:-1]]          # the group's first row among the cells
    cell = np.arange(grp.size) - first[grp] + start[grp]
    t, m = t_all[cell], m_all[cell]
    n_rec = np.bincount(grp, weights=t, minlength=n_g).astype(np.int64)
    width = min(_A_MAX, int(n_rec.max())) + 1
    p = m / (k - 1)[grp]
    # the inflow law of every record of the group: Bernoulli(p_i) t_i times, cells in order
    total = np.zeros((n_g, width))
    total[:, 0] = 1.0
    seq_p = np.repeat(p, t)                       # per group, its records' p in order
    seq_g = np.repeat(grp, t)
    seq_pos = np.arange(seq_p.size) - np.repeat(np.r_[0, np.cumsum(n_rec)[:-1]], n_rec)
    order = np.lexsort((seq_g, seq_pos))          # step s: the s-th record of every group
    step_bounds = np.searchsorted(seq_pos[order], np.arange(int(n_rec.max()) + 1))
    for s in range(int(n_rec.max())):
        sel = order[step_bounds[s]:step_bounds[s + 1]]
        rows = seq_g[sel]
        total[rows] = times_bernoulli(total[rows], seq_p[sel])
    pool = total[grp]
    t_max = int(t.max())
    for r in range(t_max):
        rows = np.flatnonzero(t > r)
        pool[rows] = over_bernoulli(pool[rows], p[rows])
    own = pool.copy()
    for r in range(t_max - 1):
        rows = np.flatnonzero(t - 1 > r)
        own[rows] = times_bernoulli(own[rows], 1.0 - m[rows])
    n_other = (n_rec - 1)[grp]
    r_own = _risk_rows(1.0 - m, own, n_other)
    row_max, row_arg = r_own.max(axis=1), r_own.argmax(axis=1)
    own_max, own_row = _first_max(row_max, grp, n_g)
    # other-cell picks: rows (group, z, j != z), z then j ascending within the group
    pair_g = np.repeat(np.arange(n_g), k * (k - 1))
    pos = np.arange(pair_g.size) - np.repeat(np.r_[0, np.cumsum(k * (k - 1))[:-1]], k * (k - 1))
    km1 = (k - 1)[pair_g]
    z_loc, j_loc = pos // km1, pos % km1
    j_loc = j_loc + (j_loc >= z_loc)              # the other cells of the group, ascending
    zc, jc = first[pair_g] + z_loc, first[pair_g] + j_loc
    s_rows = over_bernoulli(pool[zc], p[jc])
    stay = binomial_rows(t, 1.0 - m, t_max + 1)  # Bin(t_z, 1 - m_z), one row per cell
    conv = s_rows * stay[zc, 0][:, None]
    tz = t[zc]
    for d in range(1, min(width, t_max + 1)):
        rows = np.flatnonzero(tz + 1 > d)
        conv[rows, d:] += s_rows[rows, :-d] * stay[zc[rows], d][:, None]
    r_oth = _risk_rows(p[jc], conv, (n_rec - 1)[pair_g])
    pair_max, pair_arg = r_oth.max(axis=1), r_oth.argmax(axis=1)
    z_seg = np.r_[0, np.cumsum(np.diff(zc) != 0)]  # one segment per (group, z)
    z_max, z_row = _first_max(pair_max, z_seg, int(z_seg[-1]) + 1)
    z_grp = pair_g[z_row]
    other_max, z_first = _first_max(z_max, z_grp, n_g)
    out: list[BlockRisk | None] = []
    for g in range(n_g):
        a_max = min(_A_MAX, int(n_rec[g]))
        om, xm = float(own_max[g]), float(other_max[g])
        t0 = int(t[first[g]])
        best = (0.0, t0, 1, "own", t0)
        if om > 0.0:
            i = int(own_row[g])
            best = (om, int(t[i]), int(row_arg[i]) + 1, "own", int(t[i]))
        if xm > best[0]:
            row = int(z_row[z_first[g]])
            best = (xm, int(t[jc[row]]), int(pair_arg[row]) + 1, "other", int(t[zc[row]]))
        if a_max >= n_rec[g] or 1.0 / (a_max + 1) <= best[0]:
            out.append(BlockRisk(best[0], best[1], best[2], best[3], best[4], om, xm))
        else:
            out.append(None)
    return out
