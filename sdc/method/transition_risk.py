"""The exact mechanism-aware risk of a PRB under any transition design (m_j, W).

docs/METHOD.md section 7.12. The intruder knows a target B of cell j, the mechanism (m, W) and
picks one released record of a cell z after seeing its released count S_z = a:

    q = 1 - m_j (z = j),    q = m_j w_jz (z != j)
    S' = the other records released in z: independent Bernoullis, one per record,
         cell l's records landing in z with probability (1 - m_z) for l = z, m_l w_lz otherwise
    R_{j->z}(a) = (1/a) q P(S' = a-1) / (q P(S' = a-1) + (1 - q) P(S' = a))

maximised over j, z and a >= 1. Only the cells with w_lz > 0 reach z, so with a sparse W each
pick needs a few short convolutions; all columns are done at once (prefix and suffix products
of the incoming factors give every leave-one-out product). With the uniform W and m = theta/t
this is :func:`sdc.method.risk.max_risk` (tested to 1e-12).

The **neighbourhood intruder** searches B's cell and its W-neighbours N(j) = {j} u {l: w_jl > 0}
and picks one of the records released there uniformly: B is released in N(j) with certainty,
so its success is E[1 / (1 + S'_N)], S'_N the other records released in N(j) (a record of cell
l lands there with probability pi_jl = (1 - m_l)[l in N(j)] + m_l sum_{z in N(j)} w_lz). It is
computed exactly: E[1/(1 + S)] = int_0^1 G_S(x) dx with G_S the probability generating
function, a polynomial integrated exactly by Gauss-Legendre; Hoeffding's W-free bound
(1 - e^-mu)/mu (mu = E S) is :func:`poisson_bound`.

**One rule for every design** (:func:`certify`): a PRB's design is block-diagonal over its
groups (one group unless weighted, section 7.11), no record leaves its group, so the PRB's
risk is the max over its groups of the risk of each group as a PRB of its own. A group with
the uniform W is computed by the specialised exact routines (NZY's profile formula
:func:`sdc.method.risk.max_risk` when m = theta / t; :func:`group_risk` for unequal m); a
group with a near W by :func:`transition_max_risk` and :func:`neighbourhood_risk`. The
specialised routines are this same formula with w_jl = 1 / (k - 1) (tested to 1e-12 against
:func:`transition_max_risk` and against brute-force enumeration); they are kept because the
uniform W is never materialised (a PRB of 10^5 cells).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import comb

from sdc.method.content_memo import ContentMemo, array_key
from sdc.method.power_series import binomial_rows, over_bernoulli, times_bernoulli
from sdc.method.risk import BlockRisk, max_risk
from sdc.method.transition import Transition

__all__ = ["NeighbourhoodRisk", "certify", "design_risk", "group_risk", "neighbourhood_risk",
           "own_pick_at_one", "poisson_bound", "surely_above", "transition_max_risk"]

_COLUMN_CHUNK = 2048


@functools.lru_cache(maxsize=64)
def _comb_table(width: int) -> np.ndarray:
    """(width, width) ``comb(n, s)`` for n, s in 0..width-1: the same floats scipy's ``comb``
    gives element by element, computed once (a certificate asks ~10^5 factors of a few
    widths)."""
    table = comb(np.arange(width)[:, None], np.arange(width)[None, :])
    table.setflags(write=False)
    return table


def _binomial_factor(n: np.ndarray, p: np.ndarray, width: int) -> np.ndarray:
    """(..., width) Bin(n, p) probabilities of 0..width-1 (n <= width - 1)."""
    s = np.arange(width)
    n = np.asarray(n)[..., None]
    p = np.asarray(p, dtype=np.float64)[..., None]
    if n.dtype.kind in "iu" and (n.size == 0 or int(n.max()) < width):
        c = _comb_table(width)[np.maximum(n[..., 0], 0)]  # n < 0: every factor 0 below
    else:
        c = comb(n, s)
    with np.errstate(invalid="ignore", divide="ignore"):
        f = c * np.where(s <= n, p ** s * (1.0 - p) ** np.maximum(n - s, 0), 0.0)
    return np.where(s <= n, f, 0.0)


def _times(x: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Row-wise product of pmfs x (m, A) and short factors f (m, T+1), truncated to A (the
    terms i >= A fall beyond the truncation: they are not formed, the same sums)."""
    out = x * f[:, :1]
    for i in range(1, min(f.shape[1], x.shape[1])):
        out[:, i:] += x[:, :-i] * f[:, i:i + 1]
    return out


def _conv(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise full product of two pmf arrays (m, A), truncated to A."""
    out = np.zeros_like(x)
    a = x.shape[1]
    for s in range(a):
        out[:, s:] += x[:, s:s + 1] * y[:, :a - s]
    return out


def _columns(tr: Transition) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """CSC view of the move matrix: for every column z the incoming cells l and p_lz = m_l w_lz,
    padded to the longest column. Returns (src, prob, n, length): src -1 where padded."""
    indptr, indices, weights = tr.csr()
    k = tr.k
    rows = np.repeat(np.arange(k, dtype=np.int64), np.diff(indptr))
    p = tr.move[rows] * weights
    order = np.lexsort((rows, indices))
    col, src, p = indices[order], rows[order], p[order]
    length = np.bincount(col, minlength=k)
    width = int(length.max()) if k else 0
    start = np.r_[0, np.cumsum(length)[:-1]]
    pos = np.arange(col.size) - start[col]
    S = np.full((k, width), -1, dtype=np.int64)
    P = np.zeros((k, width))
    S[col, pos] = src
    P[col, pos] = p
    return S, P, tr.frequency, length


def transition_max_risk(tr: Transition) -> BlockRisk:
    """max over target cells j, picked cells z and a >= 1 of R_{j->z}(a) under ``tr``.

    Exact for any (m, W) (module docstring). ``BlockRisk.t``/``t_z`` are the frequencies of the
    target's and the picked cell where the maximum is attained.
    """
    k = tr.k
    t = tr.frequency.astype(np.int64)
    n_records = int(t.sum())
    if k == 0:
        raise ValueError("a PRB needs at least one cell")
    src, prob, _, _ = _columns(tr) if k > 1 else (np.zeros((k, 0), np.int64), np.zeros((k, 0)),
                                                   t, None)
    a_max = min(16, n_records)
    while True:
        best, own, other = (0.0, int(t[0]), 1, "own", int(t[0])), 0.0, 0.0
        for s in range(0, k, _COLUMN_CHUNK):
            e = min(k, s + _COLUMN_CHUNK)
            b, o, ot = _chunk_risk(tr, t, src[s:e], prob[s:e], np.arange(s, e), a_max + 1)
            own, other = max(own, o), max(other, ot)
            if b[0] > best[0]:
                best = b
        if a_max >= n_records or 1.0 / (a_max + 1) <= best[0]:
            r, tj, a, z, tz = best
            return BlockRisk(float(r), int(tj), int(a), z, int(tz), float(own), float(other))
        a_max = min(4 * a_max, n_records)


def _risk_curve(q: np.ndarray, sp: np.ndarray) -> np.ndarray:
    """R(a) for a = 1..A-1 from q (m,) and the pmf of S' (m, A); 0 where S_z = a is
    impossible."""
    num = q[:, None] * sp[:, :-1]
    den = num + (1.0 - q)[:, None] * sp[:, 1:]
    a = np.arange(1, sp.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / den / a, 0.0)
    return r


def _chunk_risk(tr: Transition, t: np.ndarray, src: np.ndarray, prob: np.ndarray,
                cols: np.ndarray, width: int):
    """The best (risk, t_j, a, z kind, t_z), own and other maxima of the columns ``cols``.

    Every step is row-wise (one row per picked cell, or per (incoming source, picked cell)),
    so the rows of all sources are computed together, in a few numpy calls per chunk instead
    of a few per source: the same operations on the same numbers, the same floats."""
    m = tr.move
    nz = cols.size
    L = src.shape[1]
    fw = min(int(t.max()) + 1, width)  # factor columns >= width fall beyond the truncation
    tz = t[cols]
    stay_p = 1.0 - m[cols]
    # (source i, picked cell r) of every incoming entry, by source then cell (the order the
    # per-source loop visited them)
    seg, rows = np.nonzero(src.T >= 0)
    j = src[rows, seg]
    p = prob[rows, seg]
    n_in = np.where(src >= 0, t[np.maximum(src, 0)], 0)
    # all binomial factors in one call: the incoming (source-major), the target's stay
    # (t_z - 1 and t_z records) and the picked record's cell-mates (t_j - 1)
    n_all = np.concatenate([n_in.T.ravel(), tz - 1, tz, t[j] - 1])
    p_all = np.concatenate([prob.T.ravel(), stay_p, stay_p, p])
    f_all = _binomial_factor(n_all, p_all, fw)
    factors = f_all[:L * nz].reshape(L, nz, fw)
    own_f = f_all[L * nz:L * nz + nz]
    stay = f_all[L * nz + nz:L * nz + 2 * nz]
    mates = f_all[L * nz + 2 * nz:]
    # prefix (rows :nz) and suffix (rows nz:) products of the incoming factors, together
    chain = np.zeros((L + 1, 2 * nz, width))
    chain[0, :, 0] = 1.0
    for i in range(L):
        chain[i + 1] = _times(chain[i], np.concatenate([factors[i], factors[L - 1 - i]]))
    prefix = chain[:, :nz]                 # prefix[i] = product of factors 0..i-1
    suffix = chain[::-1, nz:]              # suffix[i] = product of factors i..L-1
    best = (0.0, int(t[0]), 1, "own", int(t[0]))
    # own cell: q = 1 - m_z, S' = Bin(t_z - 1, 1 - m_z) * everything incoming
    sp = _times(prefix[L], own_f)
    r = _risk_curve(stay_p, sp)
    i, a = np.unravel_index(int(np.argmax(r)), r.shape) if r.size else (0, 0)
    own = float(r.max()) if r.size else 0.0
    if own > best[0]:
        best = (own, int(tz[i]), int(a) + 1, "own", int(tz[i]))
    other = 0.0
    if not seg.size:
        return best, own, other
    loo = _conv(prefix[seg, rows], suffix[seg + 1, rows])
    r = _risk_curve(p, _times(_times(loo, stay[rows]), mates))
    if not r.shape[1]:
        return best, own, other
    bounds = np.searchsorted(seg, np.arange(L + 1))
    for s, e in zip(bounds[:-1], bounds[1:], strict=True):  # each source's first maximum
        if s == e:
            continue
        x = int(np.argmax(r[s:e]))
        ri, ai = np.unravel_index(x, (e - s, r.shape[1]))
        v = float(r[s + ri, ai])
        other = max(other, v)
        if v > best[0]:
            best = (v, int(t[j[s + ri]]), int(ai) + 1, "other", int(tz[rows[s + ri]]))
    return best, own, other


@dataclass(frozen=True)
class NeighbourhoodRisk:
    """The neighbourhood intruder's success E[1/(1 + S'_N)] (module docstring).

    Attributes
    ----------
    max_risk : float
        Its maximum over the PRB's cells.
    t : int
        t_j of the target cell where it is attained.
    size : int
        |N(j)| there (cells searched).
    bound : float
        Hoeffding's W-free bound (1 - e^-mu)/mu at that cell.
    """

    max_risk: float
    t: int
    size: int
    bound: float


def poisson_bound(mu: np.ndarray | float) -> np.ndarray:
    """(1 - e^-mu) / mu >= E[1/(1 + S)] for S a sum of independent Bernoullis with mean mu
    (Hoeffding 1956: such sums are below the Poisson in convex order); 1 at mu = 0."""
    mu = np.asarray(mu, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mu > 1e-12, -np.expm1(-mu) / np.where(mu > 1e-12, mu, 1.0), 1.0)


def neighbourhood_risk(tr: Transition) -> NeighbourhoodRisk:
    """max over cells j of E[1 / (1 + S'_N(j))] (module docstring), exactly."""
    k = tr.k
    t = tr.frequency.astype(np.int64)
    if k < 2:
        return NeighbourhoodRisk(1.0 / float(t[0]), int(t[0]), 1, float(poisson_bound(t[0] - 1)))
    m = tr.move
    rows, cols, in_n, reach, n_size = _support(tr)
    # pi_jl = (1 - m_l)[l in N(j)] + m_l reach_lj: one sum of the two terms where both are
    # present (the bits of the sparse sum N (1 - m) + reach^T m); zeros are dropped below
    cm = m[cols]
    p = np.where(in_n, 1.0 - cm, 0.0)
    has = reach != 0
    p = np.where(has, np.where(in_n, p + reach * cm, reach * cm), p)
    p = np.clip(p, 0.0, 1.0)
    n = t[cols] - (cols == rows)          # B itself is not among the others
    keep = (n > 0) & (p > 0)
    rows, p, n = rows[keep], p[keep], n[keep]
    mu = np.bincount(rows, weights=n * p, minlength=k)
    degree = np.bincount(rows, weights=n, minlength=k)
    g = int(degree.max()) // 2 + 1          # 2g - 1 >= degree: Gauss-Legendre is exact
    x, wq = _gauss_legendre(g)
    logs = np.zeros((k, g))
    for c in range(g):            # rows are sorted: one bincount per quadrature node
        logs[:, c] = np.bincount(rows, weights=n * np.log1p(p * (x[c] - 1.0)), minlength=k)
    risk = np.exp(logs) @ wq
    i = int(np.argmax(risk))
    size = int(n_size[i])
    return NeighbourhoodRisk(float(risk[i]), int(t[i]), size, float(poisson_bound(mu[i])))


@functools.lru_cache(maxsize=256)
def _gauss_legendre(g: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights of order g on [0, 1] (cached: the same g recurs)."""
    x, wq = np.polynomial.legendre.leggauss(g)
    x, wq = 0.5 * (x + 1.0), 0.5 * wq
    x.flags.writeable = False
    wq.flags.writeable = False
    return x, wq


#: W-only structure of :func:`neighbourhood_risk`, per W (a weighted group's W is certified at
#: many c: the same CSR arrays, other move probabilities)
_SUPPORT: dict[int, tuple[Any, ...]] = {}
#: the same by the W arrays' content (the arrays are read only, as those of _SUPPORT)
_SUPPORT_BY_CONTENT = ContentMemo(maxsize=4096)


def _support(tr: Transition) -> tuple[np.ndarray, ...]:
    """(rows j, cols l, l in N(j), reach_lj = sum_{z in N(j)} w_lz, |N(j)|) over the union of
    the patterns of N and reach^T, sorted by (j, l): what pi_jl needs besides m. Cached per
    W arrays (weak references) and by their content (a W built again: the same arrays)."""
    import weakref

    indptr, indices, weights = tr.csr()
    key = id(indices)
    hit = _SUPPORT.get(key)
    if hit is not None and hit[0]() is indices and hit[1]() is weights and hit[2]() is indptr:
        return hit[3]
    # a design search builds the same W again in new arrays (eusilc's sdc init: 17,013
    # certificates of 1,919 distinct W): remembered by content too
    k = tr.k
    out = _SUPPORT_BY_CONTENT.get(array_key(indptr, indices, weights, np.array([k])),
                                  lambda: _support_of(k, indptr, indices, weights))
    if len(_SUPPORT) > 512:
        _SUPPORT.clear()
    try:
        _SUPPORT[key] = (weakref.ref(indices), weakref.ref(weights), weakref.ref(indptr), out)
    except TypeError:   # an array that takes no weak reference: not cached
        pass
    return out


def _support_of(k: int, indptr: np.ndarray, indices: np.ndarray,
                weights: np.ndarray) -> tuple[np.ndarray, ...]:
    from scipy import sparse  # local: only this figure needs it

    W = sparse.csr_array((weights, indices, indptr), shape=(k, k))
    N = sparse.csr_array((np.ones(indices.size), indices, indptr), shape=(k, k))
    N = (N + sparse.eye_array(k, format="csr")).tocsr()
    N.data[:] = 1.0
    reach = (W @ N.T).tocsr()
    rt = reach.T.tocsr()
    rt.sum_duplicates()
    n_rows = np.repeat(np.arange(k), np.diff(N.indptr))
    r_rows = np.repeat(np.arange(k), np.diff(rt.indptr))
    r = np.concatenate([n_rows, r_rows])
    c = np.concatenate([N.indices, rt.indices])
    code = r.astype(np.int64) * k + c
    uniq, inv = np.unique(code, return_inverse=True)
    in_n = np.zeros(uniq.size, dtype=bool)
    in_n[inv[:n_rows.size]] = True
    val = np.zeros(uniq.size)
    val[inv[n_rows.size:]] = rt.data
    return (uniq // k, uniq % k, in_n, val, np.diff(N.indptr))


# -- exact risk of a group with unequal move probabilities ---------------------------------
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
                total = times_bernoulli(total, p[i:i + 1])
        pool = np.repeat(total, k, axis=0)
        for r in range(t_max):
            rows = np.flatnonzero(t > r)
            pool[rows] = over_bernoulli(pool[rows], p[rows])
    elif k == 2:
        p = m.copy()
        pool = np.stack([binomial_rows(t[[1]], m[[1]], length)[0],
                         binomial_rows(t[[0]], m[[0]], length)[0]])
    else:
        p = np.zeros(1)
        pool = np.zeros((1, length))
        pool[0, 0] = 1.0
    own = pool.copy()  # pool (the inflow into z) is used again by the other-cell picks
    for r in range(t_max - 1):  # the target's cell-mates that stay: Bin(t_j - 1, 1 - m_j)
        rows = np.flatnonzero(t - 1 > r)
        own[rows] = times_bernoulli(own[rows], 1.0 - m[rows])
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
                s = over_bernoulli(np.repeat(pool[z:z + 1], js.size, axis=0), p[js])
            else:  # k == 2: the target's cell-mates are all that flows into z
                s = binomial_rows(t[js] - 1, m[js], length)
            stay = binomial_rows(t[[z]], 1.0 - m[[z]], int(t[z]) + 1)[0]
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


def own_pick_at_one(tr: Transition) -> float:
    """max over cells j of R_{j->j}(1): the intruder picks the one record released in B's own
    cell. A lower bound of the certificate (:func:`certify`: one of the terms it maximises),
    in one pass over W's entries (O(k) for the uniform W): with S' = Bin(t_j - 1, 1 - m_j) +
    the inflow (one Bernoulli p_lj = m_l w_lj per record of cell l != j),

        P(S' = 0) = m_j^(t_j - 1) prod_l (1 - p_lj)^t_l
        P(S' = 1) = P(S' = 0) [(t_j - 1)(1 - m_j) / m_j + sum_l t_l p_lj / (1 - p_lj)]
        R_{j->j}(1) = q P0 / (q P0 + (1 - q) P1),  q = 1 - m_j

    through the ratio P1 / P0 (no product underflows). A design with weight groups: the max
    over its groups (each a PRB of its own). 0 (no bound) when some p_lj or m_j is 0 or 1,
    where the ratio would need limits, or when W moves a record back to its own cell."""
    if tr.group is not None:
        return max(own_pick_at_one(tr.restrict(g)) for g in tr.groups())
    t = tr.frequency.astype(np.float64)
    m = np.asarray(tr.move, dtype=np.float64)
    k = tr.k
    if k < 2 or np.any((m <= 0.0) | (m >= 1.0)):
        return 0.0
    if tr.uniform:  # w_lj = 1 / (k - 1): the inflow odds of all cells but j
        p = m / (k - 1)
        if np.any(p >= 1.0):
            return 0.0
        odds = t * p / (1.0 - p)
        inflow_odds = odds.sum() - odds
    else:
        indptr, indices, weights = tr.csr()
        rows = np.repeat(np.arange(k), np.diff(indptr))
        if np.any((indices == rows) & (weights != 0.0)):  # a move back to its own cell
            return 0.0
        p = m[rows] * weights
        if np.any(p >= 1.0):
            return 0.0
        inflow_odds = np.bincount(indices, weights=t[rows] * p / (1.0 - p), minlength=k)
    ratio = (t - 1.0) * (1.0 - m) / m + inflow_odds  # P(S' = 1) / P(S' = 0)
    q = 1.0 - m
    return float(np.max(q / (q + (1.0 - q) * ratio)))


#: how far above xi :func:`own_pick_at_one` must be for :func:`surely_above` (the two
#: computations round differently by ~1e-15)
BOUND_MARGIN = 1e-9


def surely_above(tr: Transition, xi: float) -> bool:
    """The design is not certified at ``xi``, shown by :func:`own_pick_at_one` alone: a
    calibration's scan skips the exact certificate there (same answer, most of its thetas)."""
    return own_pick_at_one(tr) > xi + BOUND_MARGIN


def design_risk(tr: Transition) -> BlockRisk:
    """The certificate of one group with a near (CSR) W: max of the mechanism-aware max risk
    and the neighbourhood intruder's success (``z = "neighbourhood"`` when that one is
    larger)."""
    r = transition_max_risk(tr)
    nb = neighbourhood_risk(tr)
    if nb.max_risk > r.max_risk:
        return BlockRisk(nb.max_risk, nb.t, 0, "neighbourhood", nb.t, r.own_max, r.other_max,
                         nb.max_risk)
    return BlockRisk(r.max_risk, r.t, r.a, r.z, r.t_z, r.own_max, r.other_max, nb.max_risk)


def _group_certificate(tr: Transition) -> BlockRisk:
    """One group as a PRB of its own (module docstring: which exact routine)."""
    if not tr.uniform:
        return design_risk(tr)
    t = tr.frequency
    if tr.theta is not None and tr.k >= 2 and np.array_equal(tr.move, float(tr.theta) / t):
        prof = np.bincount(t)
        return max_risk({i: int(v) for i, v in enumerate(prof) if v}, float(tr.theta))
    return group_risk(t, tr.move)


def certify(tr: Transition) -> BlockRisk:
    """The exact certificate of one PRB's transition design: max over its groups of each
    group's risk (module docstring). ``own_max``/``other_max``/``neighbourhood`` are the
    maxima over the groups; the location fields are the worst group's."""
    if tr.group is None:
        return _group_certificate(tr)
    best: BlockRisk | None = None
    own = other = 0.0
    nb = float("nan")
    for members in tr.groups():
        r = _group_certificate(tr.restrict(members))
        own, other = max(own, r.own_max), max(other, r.other_max)
        if not np.isnan(r.neighbourhood):
            nb = r.neighbourhood if np.isnan(nb) else max(nb, r.neighbourhood)
        if best is None or r.max_risk > best.max_risk:
            best = r
    assert best is not None
    return BlockRisk(best.max_risk, best.t, best.a, best.z, best.t_z, own, other, nb)
