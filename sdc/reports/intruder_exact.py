"""The exact pooled values of the Monte Carlo intruder (:mod:`sdc.reports.intruder`) under any
transition design (m, W) of a PRB (docs/METHOD.md 7.11-7.12; docs/REPORTS.md, "intruder").

A target B of cell j is released in z with probability q = 1 - m_j (z = j) or m_j w_jz; the
other records released in z, S', are independent binomials, one per source cell l:
Bin(t_l, m_l w_lz) (l != z; B's own cell one record fewer) and Bin(t_z, 1 - m_z) (its own
records that stay; one fewer when z = j). Then

    P(B in z, S_z = a) = q P(S' = a-1),    P(S_z = a) = q P(S' = a-1) + (1 - q) P(S' = a),

pooled per class (t_j, a) for the own cell and (t_j, t_z, a) for every other cell of the PRB
(cells W never reaches from j too: q = 0), as NZY's profile formula does for the uniform W
(:func:`sdc.method.risk.pick_distribution`; equal to it to rounding). Only a = 0..a_max + 1 is
needed, so every pmf is a truncated power series; a column's incoming factors are multiplied
once, and leaving one source out is a product of its prefix and suffix products (no
division). The expected number of correct matches, sum over targets of
(1 - m_j) E[1 / (1 + S'_j)], is E[1/(1 + S)] = int_0^1 G_S(x) dx, G_S the probability
generating function, integrated exactly by Gauss-Legendre (as the neighbourhood intruder of
:mod:`sdc.method.transition_risk`).
"""

from __future__ import annotations

import numpy as np
from scipy.special import comb

from sdc.method.transition import Transition

__all__ = ["ExactSums", "design_exact"]

#: (num, den, r_min, r_max) per class
ExactSums = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _binomial(n: np.ndarray, p: np.ndarray, length: int) -> np.ndarray:
    """(m, length) Bin(n_i, p_i) probabilities of 0..length-1."""
    s = np.arange(length)[None, :]
    n = np.asarray(n, dtype=np.int64)[:, None]
    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, 1.0)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        out = comb(n, s) * p ** s * (1.0 - p) ** np.maximum(n - s, 0)
    out[s > n] = 0.0
    return np.nan_to_num(out)


def _conv(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise product of truncated power series (m, L)."""
    out = np.zeros_like(x)
    length = x.shape[1]
    for s in range(length):
        out[:, s:] += x[:, s:s + 1] * y[:, :length - s]
    return out


def _empty(n: int) -> ExactSums:
    return np.zeros(n), np.zeros(n), np.full(n, np.inf), np.full(n, -np.inf)


def _update(ex: ExactSums, cls: np.ndarray, num: np.ndarray, den: np.ndarray,
            risk: np.ndarray, valid: np.ndarray) -> None:
    np.add.at(ex[0], cls, num)
    np.add.at(ex[1], cls, den)
    np.minimum.at(ex[2], cls[valid], risk[valid])
    np.maximum.at(ex[3], cls[valid], risk[valid])


def _expected_correct(tr: Transition, rows: np.ndarray, cols: np.ndarray,
                      p: np.ndarray) -> float:
    """sum_j t_j (1 - m_j) E[1 / (1 + S'_j)], S'_j the other records released in j."""
    k, t, m = tr.k, tr.frequency.astype(np.int64), tr.move
    # factors of S'_j: sources l -> j (Bin(t_l, p_lj)) and j's other records staying
    tgt = np.concatenate([cols, np.arange(k)])
    n = np.concatenate([t[rows], t - 1])
    q = np.concatenate([p, 1.0 - m])
    keep = (n > 0) & (q > 0)
    tgt, n, q = tgt[keep], n[keep], q[keep]
    degree = np.bincount(tgt, weights=n, minlength=k)
    g = int(degree.max(initial=0)) // 2 + 1     # 2g - 1 >= degree: exact
    x, wq = np.polynomial.legendre.leggauss(g)
    x, wq = 0.5 * (x + 1.0), 0.5 * wq
    logs = np.zeros((k, g))
    for c in range(g):
        logs[:, c] = np.bincount(tgt, weights=n * np.log1p(q * (x[c] - 1.0)), minlength=k)
    e_inv = np.exp(logs) @ wq
    return float((t * (1.0 - m) * e_inv).sum())


def design_exact(transitions: list[Transition], t_max: int,
                 a_max: int) -> tuple[ExactSums, float, ExactSums, dict[tuple[int, int], float]]:
    """Own-cell class sums (t, a), the expected correct matches, other-cell class sums
    (t, t_z, a) and the number of (target of frequency t, other cell of frequency t_z) pairs,
    over the PRBs of ``transitions`` (module docstring; class layout as the intruder's)."""
    length = a_max + 2
    own = _empty((t_max + 1) * (a_max + 1))
    other = _empty((t_max + 1) * (t_max + 1) * (a_max + 1))
    pairs_total: dict[tuple[int, int], float] = {}
    expected = 0.0
    a = np.arange(1, a_max + 1)
    for tr in transitions:
        k, t, m = tr.k, tr.frequency.astype(np.int64), tr.move.astype(np.float64)
        if k < 1:
            continue
        ip, ix, w = tr.csr()
        rows = np.repeat(np.arange(k), np.diff(ip))
        cols = np.asarray(ix, dtype=np.int64)
        p = m[rows] * np.asarray(w, dtype=np.float64)
        expected += _expected_correct(tr, rows, cols, p)
        # incoming factors of every column z, ranked inside the column
        order = np.lexsort((rows, cols))
        rows, cols, p = rows[order], cols[order], p[order]
        first = np.searchsorted(cols, np.arange(k))
        rank = np.arange(cols.size) - first[cols]
        n_rank = int(rank.max(initial=-1)) + 1
        fac = _binomial(t[rows], p, length)
        prefix = np.zeros((n_rank + 1, k, length))
        prefix[:, :, 0] = 1.0
        for r in range(n_rank):
            prefix[r + 1] = prefix[r]
            at = rank == r
            prefix[r + 1][cols[at]] = _conv(prefix[r][cols[at]], fac[at])
        suffix = np.zeros((n_rank + 2, k, length))
        suffix[:, :, 0] = 1.0
        n_in = np.bincount(cols, minlength=k)
        for r in range(n_rank - 1, -1, -1):
            suffix[r] = suffix[r + 1]
            at = rank == r
            suffix[r][cols[at]] = _conv(suffix[r + 1][cols[at]], fac[at])
        g_all = prefix[n_in, np.arange(k)]                 # every incoming source
        stay_all = _binomial(t, 1.0 - m, length)
        full = _conv(g_all, stay_all)                      # S_z when B is not involved
        # own pick: S' = incoming x (t_j - 1 staying)
        s_own = _conv(g_all, _binomial(t - 1, 1.0 - m, length))
        kept = (1.0 - m)[:, None] * s_own[:, :-1]
        tot = kept + m[:, None] * s_own[:, 1:]
        cls = (t[:, None] * (a_max + 1) + a[None, :]).ravel()
        kept, tot = kept[:, :a_max], tot[:, :a_max]       # column i: a = i + 1
        with np.errstate(invalid="ignore", divide="ignore"):
            risk = np.where(tot > 0, kept / tot / a, 0.0)
        _update(own, cls, (t[:, None] * kept / a).ravel(), (t[:, None] * tot).ravel(),
                risk.ravel(), (tot > 0).ravel())
        if k < 2:
            continue
        # other picks z != j reached by W: S' = incoming without one record of j
        loo = _conv(_conv(prefix[rank, cols], suffix[rank + 1, cols]),
                    _binomial(t[rows] - 1, p, length))
        s_oth = _conv(loo, stay_all[cols])
        hit = p[:, None] * s_oth[:, :-1]
        tot_o = hit + (1.0 - p)[:, None] * s_oth[:, 1:]
        tt = t[rows] * (t_max + 1) + t[cols]
        cls = (tt[:, None] * (a_max + 1) + a[None, :]).ravel()
        hit, tot_o = hit[:, :a_max], tot_o[:, :a_max]     # column i: a = i + 1
        with np.errstate(invalid="ignore", divide="ignore"):
            risk = np.where(tot_o > 0, hit / tot_o / a, 0.0)
        _update(other, cls, (t[rows][:, None] * hit / a).ravel(),
                (t[rows][:, None] * tot_o).ravel(), risk.ravel(), (tot_o > 0).ravel())
        # other picks W never reaches from j: q = 0, S' = S_z; per (t_j, z): the targets of
        # frequency t_j outside z, less those whose cell reaches z
        t_vals, t_idx = np.unique(t, return_inverse=True)
        per_t = np.bincount(t_idx, weights=t, minlength=t_vals.size)
        reach = np.zeros((k, t_vals.size))
        np.add.at(reach, (cols, t_idx[rows]), t[rows])
        n_pairs = per_t[None, :] - reach
        n_pairs[np.arange(k), t_idx] -= t
        for ti, tv in enumerate(t_vals.tolist()):
            for tz in np.unique(t).tolist():
                zs = t == tz
                tot_pairs = float((per_t[ti] - (t[zs] == tv) * tv).sum())
                if tot_pairs > 0:
                    pairs_total[tv, tz] = pairs_total.get((tv, tz), 0.0) + tot_pairs
            cnt = np.maximum(n_pairs[:, ti], 0.0)
            z = np.flatnonzero(cnt > 0)
            if z.size == 0:
                continue
            cls = ((tv * (t_max + 1) + t[z])[:, None] * (a_max + 1) + a[None, :]).ravel()
            den = full[z][:, 1:a_max + 1]
            _update(other, cls, np.zeros(cls.size), (cnt[z][:, None] * den).ravel(),
                    np.zeros(cls.size), (den > 0).ravel())
    return own, expected, other, pairs_total
