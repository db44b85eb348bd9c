"""The exact pooled values of the Monte Carlo intruder (:mod:`sdc.reports.intruder`): NZY's
profile formula on its uniform PRBs (:func:`exact_s_distribution`, :func:`exact_own`,
:func:`exact_other`) and, under any transition design (m, W) of a PRB, :func:`design_exact`
(docs/METHOD.md 7.11-7.12; docs/REPORTS.md, "intruder").

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

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy.special import comb

from sdc.method.risk import correct_match_risk, pick_distribution
from sdc.method.transition import Transition

__all__ = ["Exact", "ExactSums", "bin_pmf", "design_exact", "exact_of_design", "exact_other",
           "exact_own", "exact_s_distribution", "parse_profile"]

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


class Exact(NamedTuple):
    """Exact pooled class values: sum of m t P(kept, S = a) / a (num), of m t P(S = a) (den),
    and the smallest / largest per-cell risk of the class (r_min, r_max)."""

    num: np.ndarray
    den: np.ndarray
    r_min: np.ndarray
    r_max: np.ndarray


def _scipy_binom_pmf() -> Callable[[np.ndarray, float, float], np.ndarray]:
    """``scipy.stats.binom.pmf`` on its support (k = 0..n, 0 <= q <= 1): the same ufunc it
    calls, without importing scipy.stats (0.9 CPU s, a fifth of a warm ``sdc release``)."""
    try:
        from scipy.special._ufuncs import _binom_pmf as pmf
    except ImportError:  # pragma: no cover - another scipy: the public route
        from scipy.stats import binom

        def pmf(k: np.ndarray, n: float, q: float) -> np.ndarray:
            return binom.pmf(k, n, q)
    return pmf


_binom_pmf = _scipy_binom_pmf()


def bin_pmf(n: int, q: float, size: int | None = None) -> np.ndarray:
    """Binomial(n, q) pmf at 0 .. min(n, size - 1) (the whole pmf when ``size`` is None)."""
    if n <= 0:
        return np.ones(1)
    top = n if size is None else min(n, size - 1)
    return _binom_pmf(np.arange(top + 1, dtype=np.float64), float(n), float(q))


def exact_s_distribution(profile: Mapping[int, int], t_j: int, theta: float,
                         length: int) -> tuple[np.ndarray, np.ndarray]:
    """``(P(kept, S_j = a), P(S_j = a))`` for a = 0..length-1 in a PRB with ``profile``.

    S_j = 1{kept} + S', S' = Bin(t_j - 1, 1 - theta/t_j) + sum over the other cells l of
    Bin(t_l, theta / ((k - 1) t_l)) (cells with equal t merged into one binomial). Written
    independently of :mod:`sdc.method.risk` (plain binomial pmfs and convolutions), so it also
    cross-checks the engine.

    Only the head of S' that is not 0 in double precision is convolved. S' is a sum of
    independent Bernoullis with mean mu = (t_j - 1)(1 - theta/t_j) + theta (the k - 1 other
    cells bring theta/(k - 1) each) and variance <= mu, so by Bernstein's inequality
    P(S' >= mu + x) <= exp(-x^2 / (2 (mu + x/3))). With x = max(60 sqrt(mu), 2300) the exponent
    is below -1350 (x >= mu: >= 3x/8 >= 862 ... and 1350 for mu > 3600), i.e. the tail is below
    the smallest positive double (4.9e-324): P(S' = a) is exactly 0.0 in floating point for
    a >= mu + x, and every pmf is cut there. Without the cut a PRB of k cells cost O(k^2)
    (full convolutions of length ~ records of the PRB); with it O(k) for the pmfs and
    O(cut^2) per convolution, cut ~ t_j + 2300.
    """
    k = int(sum(profile.values()))
    th = float(theta) if k > 1 else 0.0
    mu = (t_j - 1) * (1.0 - th / t_j) + th
    cut = min(length + 1, int(np.ceil(mu + max(60.0 * np.sqrt(mu), 2300.0))) + 1)
    pmf = bin_pmf(t_j - 1, 1.0 - th / t_j, cut)
    if k > 1:
        for t, m in sorted(profile.items()):
            others = int(m) - (1 if int(t) == t_j else 0)
            if others > 0:
                pmf = np.convolve(pmf, bin_pmf(others * int(t), th / ((k - 1) * int(t)),
                                                cut))[:cut]
    p = 1.0 - th / t_j
    s_other = np.zeros(length + 1)
    m = min(pmf.size, length + 1)
    s_other[:m] = pmf[:m]
    kept = np.zeros(length)
    kept[1:] = p * s_other[: length - 1]
    total = kept + (1.0 - p) * s_other[:length]
    return kept, total


def parse_profile(profile: Any) -> dict[int, int]:
    if isinstance(profile, Mapping):
        return {int(t): int(m) for t, m in profile.items() if int(m) > 0}
    out: dict[int, int] = {}
    for part in str(profile).split(","):
        if part.strip():
            t, m = part.split(":")
            out[int(t)] = int(m)
    return out


def _empty_exact(n_cls: int) -> Exact:
    """Zero sums and an empty range (+inf, -inf) for ``n_cls`` classes."""
    return Exact(np.zeros(n_cls), np.zeros(n_cls), np.full(n_cls, np.inf),
                  np.full(n_cls, -np.inf))


def _distinct_blocks(blocks: pd.DataFrame) -> tuple[list[tuple[dict[int, int], Any, int]],
                                                     list[int]]:
    """The distinct (profile, theta, k) of ``blocks`` in order of first appearance, and each
    block's index into them: blocks alike have the same exact values, computed once."""
    parsed: dict[str, dict[int, int]] = {}
    index: dict[tuple[Any, ...], int] = {}
    distinct: list[tuple[dict[int, int], Any, int]] = []
    kid: list[int] = []
    for p, theta, k in zip(blocks["profile"].tolist(), blocks["theta"].to_numpy(dtype=float),
                           blocks["k"].to_numpy(dtype=np.int64), strict=True):
        if isinstance(p, str):
            prof = parsed.get(p)
            if prof is None:
                prof = parsed[p] = parse_profile(p)
        else:
            prof = parse_profile(p)
        j = index.setdefault((tuple(prof.items()), theta, int(k)), len(distinct))
        if j == len(distinct):
            distinct.append((prof, theta, int(k)))
        kid.append(j)
    return distinct, kid


def _add_in_block_order(ex: Exact, terms: list[list[tuple[Any, ...]]], kid: list[int]) -> None:
    """ex.num[cls] += num and ex.den[cls] += den of every block's terms (cls, num, den, ...), one
    block after the other (``np.add.at`` adds in index order: the sums of a loop over blocks)."""
    rows = [term for j in kid for term in terms[j]]
    if rows:
        cls = np.concatenate([r[0] for r in rows])
        np.add.at(ex.num, cls, np.concatenate([r[1] for r in rows]))
        np.add.at(ex.den, cls, np.concatenate([r[2] for r in rows]))


def exact_own(blocks: pd.DataFrame, t_max: int, a_max: int) -> tuple[Exact, float]:
    """Exact own-cell classes (t, a) over every PRB, and the expected number of correct matches
    sum over targets of sum_a P(kept, S_j = a) / a. Each distinct (profile, theta) is computed
    once; the sums add every block's terms in block order."""
    ex = _empty_exact((t_max + 1) * (a_max + 1))
    a_s = np.arange(1, a_max + 1)
    distinct, kid = _distinct_blocks(blocks)
    terms: list[list[tuple[Any, ...]]] = []
    for prof, theta, _ in distinct:     # r_min / r_max: first appearances suffice
        n_rec = sum(t * m for t, m in prof.items())
        per: list[tuple[Any, ...]] = []
        for t, m in prof.items():
            # S_j <= n_rec, but the classes run to a_max: never index past the pmf
            kept_pmf, s_pmf = exact_s_distribution(prof, t, theta, max(n_rec, a_max) + 1)
            a_all = np.arange(kept_pmf.size)
            correct = float((kept_pmf[1:] / a_all[1:]).sum())
            per.append((t * (a_max + 1) + a_s, m * t * kept_pmf[1:a_max + 1] / a_s,
                        m * t * s_pmf[1:a_max + 1], m * t, correct))
            r = correct_match_risk(prof, t, theta, a_max)
            for a in range(1, a_max + 1):
                c = t * (a_max + 1) + a
                if np.isfinite(r[a - 1]):
                    ex.r_min[c] = min(ex.r_min[c], float(r[a - 1]))
                    ex.r_max[c] = max(ex.r_max[c], float(r[a - 1]))
        terms.append(per)
    _add_in_block_order(ex, terms, kid)
    expected_correct = 0.0
    for j in kid:
        for term in terms[j]:
            expected_correct += term[3] * term[4]
    return ex, expected_correct


def exact_other(blocks: pd.DataFrame, t_max: int,
                 a_max: int) -> tuple[Exact, dict[tuple[int, int], float]]:
    """Exact other-cell classes (t, t_z, a) over every PRB of k >= 2 cells, and the number of
    (target of frequency t, other cell of frequency t_z) pairs per (t, t_z). Each distinct
    (profile, theta, k) is computed once; the sums add every block's terms in block order."""
    ex = _empty_exact((t_max + 1) * (t_max + 1) * (a_max + 1))
    a_s = np.arange(1, a_max + 1)
    distinct, kid = _distinct_blocks(blocks)
    terms: list[list[tuple[Any, ...]]] = []
    for prof, theta, k in distinct:     # r_min / r_max: first appearances suffice
        per: list[tuple[Any, ...]] = []
        for t, m in prof.items():
            for t_z, m_z in prof.items():
                others = m_z - (1 if t_z == t else 0)
                if others < 1 or k < 2:
                    continue
                # only a = 1..a_max is used: the truncated convolution keeps its head exactly
                hit, tot = pick_distribution(prof, t, theta, a_max + 1, t_z=t_z)
                pairs = m * t * others
                per.append(((t * (t_max + 1) + t_z) * (a_max + 1) + a_s,
                            pairs * hit[1:a_max + 1] / a_s, pairs * tot[1:a_max + 1],
                            (t, t_z), pairs))
                for a in range(1, a_max + 1):
                    c = (t * (t_max + 1) + t_z) * (a_max + 1) + a
                    if tot[a] > 0:
                        ex.r_min[c] = min(ex.r_min[c], float(hit[a] / a / tot[a]))
                        ex.r_max[c] = max(ex.r_max[c], float(hit[a] / a / tot[a]))
        terms.append(per)
    _add_in_block_order(ex, terms, kid)
    pairs_total: dict[tuple[int, int], float] = {}
    for j in kid:
        for term in terms[j]:
            pairs_total[term[3]] = pairs_total.get(term[3], 0.0) + term[4]
    return ex, pairs_total


def _nzy_theta(tr: Transition) -> float | None:
    """theta when the PRB moves by NZY's uniform design (uniform W over one group, m_j t_j the
    same theta for every cell: its profile formula applies), else None."""
    if not tr.uniform or (tr.group is not None and np.unique(tr.group).size > 1):
        return None
    theta = tr.move * tr.frequency
    if tr.k and np.allclose(theta, theta[0], rtol=1e-12, atol=0.0):
        return float(tr.theta if tr.theta is not None else theta[0])
    return None


def exact_of_design(transitions: list[Transition], blocks: pd.DataFrame, t_max: int,
                     a_max: int) -> tuple[Exact, float, Exact, dict[tuple[int, int], float]]:
    """The exact class sums under the plan's design: NZY's profile formula on its uniform PRBs
    (:func:`exact_own`, :func:`exact_other` at the transition's theta), the (m, W) formula
    of :func:`design_exact` on the others; summed."""
    thetas = [_nzy_theta(tr) for tr in transitions]
    uni = np.array([th is not None for th in thetas], dtype=bool)
    sub = blocks.iloc[np.flatnonzero(uni)].copy()
    sub["theta"] = [th for th in thetas if th is not None]
    own, correct = exact_own(sub, t_max, a_max)
    other, pairs = exact_other(sub, t_max, a_max)
    g_own, g_correct, g_other, g_pairs = design_exact(
        [tr for tr, u in zip(transitions, uni, strict=True) if not u], t_max, a_max)

    def add(x: Exact, y: tuple[np.ndarray, ...]) -> Exact:
        return Exact(x.num + y[0], x.den + y[1], np.minimum(x.r_min, y[2]),
                      np.maximum(x.r_max, y[3]))

    for key, v in g_pairs.items():
        pairs[key] = pairs.get(key, 0.0) + v
    return add(own, g_own), correct + g_correct, add(other, g_other), pairs
