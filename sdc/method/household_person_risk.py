"""Exact certificates of the person and household levels of a ``risk.composition: protect``
release (docs/METHOD.md 7.7, "Person level under protect"; issue 44).

Under ``protect`` the only random step is the household stage keyed on HK x composition: a
household of cell J = (a, n) (household keys a, members per person class n) is released as cell
L = (a', n') with the transition probability P(J -> L) of its stage (NZY's or the weighted
design: move m_J, uniform over the other cells of its group; singular households: HK uniform
over the file's HK combinations, composition kept), independently of every other household, and
its members are realized: per class c the min(n_c, n'_c) members of smallest identity keep c.

**Person-level intruder.** He knows a target person B's household keys a and class c, the
mechanism, and picks one released person of a person cell Z = (a', c') after seeing its count
S_Z = s. B's household contributes Y = n'_{c'} 1{a'_L = a'} persons to Z, every other household
h an independent Y_h with generating polynomial pmf_h(Z)(x) = sum_L P(h -> L) x^{[a_L = a'] n_{L,c'}}.
With X = the other households' total (the product of their polynomials) and
H(x) = sum_L P(J -> L) 1{B released in Z | L} x^{[a_L = a'] n_{L,c'}}:

    P(pick B, S_Z = s) = (1/s) [H X]_s,      P(S_Z = s) = [pmf_J X]_s = [G]_s
    R_{B -> Z}(s) = [H X]_s / (s [G]_s)

G the product over all households. The members' identities are unkeyed, so the intruder may
know B's rank in its class: the certificate takes the worst rank (B kept whenever its class
survives, 1{n'_c >= 1}); then H = pmf_J(Z) without its x^0 term for c' = c (exact). For c' != c
B must be a mover assigned c', which needs n'_{c'} > n_{c'}: H <= pmf_J(Z) restricted to powers
> n_{J,c'} (an upper bound: the certificate is exact where the own-class pick attains it, which
the result says). Unchanged households (non-sensitive cells) shift every S_Z by a constant.

**Household-level (HK) intruder** (knows a household's keys a, picks a released household with
a' after seeing their count): the same computation with one class and one member per
household (Y_h = 1{a'_h = a'}), exact.

**Household keys x size intruder** (knows a household's keys a and its number of members s,
which every household release shows: the members sharing a pseudonym; picks one released
household with a and s after seeing their count): the same computation with one class per
household size and one member per household (Y_h = 1{a'_h = a'} for the households of size s:
households keep their size under protect), exact. A size held by fewer than 1/xi households of
the whole file is **exposed**: the intruder who ignores the keys picks among them, so no release
with household pseudonyms brings it to xi (:func:`exposed_sizes`).

Every product is a truncated power series in s (the scan over s stops when 1/(A+1) is below
the max found, as in section 7.1), normalised row by row with a log scale (no underflow);
leave-one-out products come from prefix and suffix products over blocks of households, never
from a division.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["LevelRisk", "SourceCells", "composition_level_risks", "composition_sources",
           "exposed_sizes", "level_risk", "size_sources"]



@dataclass(frozen=True)
class SourceCells:
    """The household cells of a stage as the person intruder sees them: ``hk`` (C,) their
    household-key combination 0..n_hk-1, ``counts`` (C, P) members per class, ``t`` (C,)
    households in the cell, ``move`` (C,) the probability a household of the cell moves and
    ``group`` (C,) its destination group (uniform over the group's other cells; -1: the cell
    never changes). Cells with t = 0 are destinations only. ``indptr``, ``dest``, ``weight``:
    the near design's rows (CSR over the cells, :class:`~sdc.method.transition.CellDesign`): a
    cell with a row moves to ``dest`` with probabilities ``weight``; None or an empty row: the
    uniform design of its group."""

    hk: np.ndarray
    counts: np.ndarray
    t: np.ndarray
    move: np.ndarray
    group: np.ndarray
    n_hk: int
    indptr: np.ndarray | None = None
    dest: np.ndarray | None = None
    weight: np.ndarray | None = None

    def rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indptr, dest, weight), empty rows when there is no near design."""
        if self.indptr is None:
            return (np.zeros(np.asarray(self.hk).size + 1, np.int64), np.zeros(0, np.int64),
                    np.zeros(0))
        return (np.asarray(self.indptr, np.int64), np.asarray(self.dest, np.int64),
                np.asarray(self.weight, np.float64))


@dataclass
class LevelRisk:
    """The exact risks of one level (module docstring), each a max over the target units and
    their classes:

    - ``max_risk`` (the certificate): NZY's intruder (section 6), who picks in the target's
      own true cell (a, c) after seeing its released count s: max R_{B -> (a, c)}(s), exact;
    - ``any_cell``: the mechanism-aware intruder of section 7.1, who may pick in any cell: the
      own-class picks (a', c) for every a' exactly, the other-class picks (a', c' != c) bounded
      above (``other``); ``own_class`` the exact own-class part;
    - ``unconditional``: E[1{B released in (a, c)} / S_(a, c)], the success of the pick in the
      own cell without looking at the count (what the Monte Carlo replays measure); exact when
      the counts stay inside the scan of s, else an upper bound (the counts beyond it taken
      at the scan's end).

    ``at`` says where each is attained."""

    max_risk: float
    any_cell: float
    other: float
    unconditional: float
    own_class: float = 0.0
    at: dict[str, Any] = field(default_factory=dict)


@functools.lru_cache(maxsize=64)
def _toeplitz_index(n: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    d = np.arange(n)[None, :] - np.arange(n)[:, None]          # k - i
    ok = (d >= 0) & (d < width)
    return np.where(ok, d, 0), ok


def _conv(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise product of power series x (..., A+1) and y (..., W), truncated to A+1: one
    batched matrix product with y's (A+1, A+1) Toeplitz matrix."""
    n = x.shape[-1]
    width = min(n, y.shape[-1])
    if x.size > 2048 or y.size > 2048:  # large batches: one pass per power of y
        # the powers first (contiguous blocks per power: half the CPU of strided row slices);
        # each coefficient sums the same products in the same order: the same bits
        lead = np.broadcast_shapes(x.shape[:-1], y.shape[:-1])
        xt = np.ascontiguousarray(np.moveaxis(np.broadcast_to(x, lead + (n,)), -1, 0))
        yt = np.ascontiguousarray(
            np.moveaxis(np.broadcast_to(y[..., :width], lead + (width,)), -1, 0))
        out = np.zeros((n,) + lead)
        for i in range(width):
            out[i:] += xt[:n - i] * yt[i]
        return np.ascontiguousarray(np.moveaxis(out, 0, -1))  # the layout callers had
    idx, ok = _toeplitz_index(n, width)
    t = np.where(ok, y[..., :width][..., idx], 0.0)             # (..., n, n)
    return np.matmul(x[..., None, :], t)[..., 0, :]


def _norm(x: np.ndarray, lx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = x.max(axis=-1)
    ok = s > 0
    s = np.where(ok, s, 1.0)
    return x / s[..., None], lx + np.log(s)


def _mul(x, lx, y, ly):
    return _norm(_conv(x, y), lx + ly)


class _Sources:
    """The random sources (cells with t > 0 that move with positive probability) and what
    their polynomials need: per group the sparse counts D_g[z, v] of its cells."""

    def __init__(self, cells: SourceCells) -> None:
        self.c = cells
        counts = np.asarray(cells.counts, np.int64)
        self.P = counts.shape[1]
        self.n_hk = int(cells.n_hk)
        self.n_z = self.n_hk * self.P
        self.V = int(counts.sum(axis=1).max(initial=0))
        grp = np.asarray(cells.group, np.int64)
        hk = np.asarray(cells.hk, np.int64)
        in_g = np.flatnonzero(grp >= 0)
        # cells per group (one zero past the last: indexed by max(group, 0) safely)
        self.k_g = np.bincount(grp[in_g], minlength=int(grp.max(initial=-1)) + 2)
        # D_g entries: (group, z = hk * P + c', v = n_{L,c'} >= 1), counted; sorted by
        # (hk of z, group) so that every HK's entries are one slice per group
        li, ci = np.nonzero(counts[in_g] > 0)
        cell = in_g[li]
        g = grp[cell]
        z = hk[cell] * self.P + ci
        v = counts[cell, ci]
        n_g = self.k_g.size
        key = ((z // self.P) * n_g + g) * (self.P * (self.V + 1)) + (z % self.P) * (self.V + 1) + v
        u, cnt = np.unique(key, return_counts=True)
        rest = u % (self.P * (self.V + 1))
        self.e_a = u // (self.P * (self.V + 1)) // n_g
        self.e_g = u // (self.P * (self.V + 1)) % n_g
        self.e_c = rest // (self.V + 1)
        self.e_v = rest % (self.V + 1)
        self.e_n = cnt.astype(np.float64)
        t = np.asarray(cells.t, np.int64)
        m = np.asarray(cells.move, np.float64)
        self.random = np.flatnonzero((t > 0) & (grp >= 0) & (m > 0)
                                     & (self.k_g[np.maximum(grp, 0)] >= 2))
        self._near()
        # a source moves when m > 0 and it has somewhere to go (a near row or a group of 2+)
        self.random = np.flatnonzero((t > 0) & (grp >= 0) & (m > 0)
                                     & ((self.k_g[np.maximum(grp, 0)] >= 2)
                                        | (self.row_len > 0)))
        self.det = np.setdiff1d(np.flatnonzero(t > 0), self.random, assume_unique=True)
        self.shift = np.zeros(self.n_z)
        det = self.det
        zz = (hk[det][:, None] * self.P + np.arange(self.P)).reshape(-1)
        np.add.at(self.shift, zz, (t[det][:, None] * counts[det]).reshape(-1).astype(np.float64))

    def _near(self) -> None:
        """The near rows: per row entry its source cell, destination and weight."""
        indptr, dest, weight = self.c.rows()
        self.row_len = np.diff(indptr)
        self.r_src = np.repeat(np.arange(self.row_len.size), self.row_len)
        self.r_dest, self.r_w = dest, weight
        self.r_hk = np.asarray(self.c.hk, np.int64)[dest] if dest.size else np.zeros(0, np.int64)

    def reaching(self, a: int) -> np.ndarray:
        """The random sources whose households can be released with HK ``a``."""
        grp = np.asarray(self.c.group, np.int64)[self.random]
        hk = np.asarray(self.c.hk, np.int64)[self.random]
        groups = np.unique(self.e_g[self.e_a == a])
        near = self.row_len[self.random] > 0
        to_a = np.isin(self.random, self.r_src[self.r_hk == a])
        return self.random[np.where(near, to_a, np.isin(grp, groups)) | (hk == a)]

    def _near_pmf(self, out: np.ndarray, idx: np.ndarray, a: int) -> None:
        """Rows of ``out`` of the sources with a near row: stay 1 - m, move to each row
        destination L with m w_L (its members counted where a_L = a)."""
        rows = np.flatnonzero(self.row_len[idx] > 0)
        if not rows.size:
            return
        c = self.c
        counts = np.asarray(c.counts, np.int64)
        out[rows] = 0.0
        out[rows, :, 0] = 1.0
        pos_of = np.full(self.row_len.size, -1, np.int64)
        pos_of[idx[rows]] = rows
        e = np.flatnonzero((pos_of[self.r_src] >= 0) & (self.r_hk == a))
        r_i = pos_of[self.r_src[e]]
        pr = np.asarray(c.move, np.float64)[self.r_src[e]] * self.r_w[e]
        n = counts[self.r_dest[e]]
        r2 = np.repeat(r_i, self.P)
        c2 = np.tile(np.arange(self.P), r_i.size)
        np.add.at(out, (r2, c2, n.reshape(-1)), np.repeat(pr, self.P))
        np.add.at(out, (r2, c2, np.zeros_like(c2)), -np.repeat(pr, self.P))
        home = rows[np.asarray(c.hk, np.int64)[idx[rows]] == a]
        if home.size:
            stay = 1.0 - np.asarray(c.move, np.float64)[idx[home]]
            n = counts[idx[home]]
            r2 = np.repeat(home, self.P)
            c2 = np.tile(np.arange(self.P), home.size)
            np.add.at(out, (r2, c2, n.reshape(-1)), np.repeat(stay, self.P))
            np.add.at(out, (r2, c2, np.zeros_like(c2)), -np.repeat(stay, self.P))

    def pmf(self, idx: np.ndarray, a: int) -> np.ndarray:
        """(B, P, V+1): the generating polynomial of one household of each source ``idx`` in
        the person cells (a, c') of HK ``a``."""
        c = self.c
        grp = np.asarray(c.group, np.int64)[idx]
        m = np.asarray(c.move, np.float64)[idx]
        k = self.k_g[grp].astype(np.float64)
        beta = m / (k - 1)
        alpha = 1.0 - m - beta
        out = np.zeros((idx.size, self.P, self.V + 1))
        out[:, :, 0] = (beta * k + alpha)[:, None]  # own_J(Z) = 0 outside J's own HK
        sel = np.flatnonzero(self.e_a == a)
        eg = self.e_g[sel]
        # the entries of every source's group (sources x entries of HK a, matched by group)
        ri, ei = np.nonzero(grp[:, None] == eg[None, :])
        vals = beta[ri] * self.e_n[sel][ei]
        np.add.at(out, (ri, self.e_c[sel][ei], self.e_v[sel][ei]), vals)
        np.add.at(out, (ri, self.e_c[sel][ei], np.zeros_like(ri)), -vals)
        home = np.flatnonzero(np.asarray(c.hk, np.int64)[idx] == a)
        if home.size:
            counts = np.asarray(c.counts, np.int64)[idx[home]]
            r2 = np.repeat(home, self.P)
            c2 = np.tile(np.arange(self.P), home.size)
            np.add.at(out, (r2, c2, counts.reshape(-1)), np.repeat(alpha[home], self.P))
            np.add.at(out, (r2, c2, np.zeros_like(c2)), -np.repeat(alpha[home], self.P))
        self._near_pmf(out, idx, a)
        return np.maximum(out, 0.0)

    def power(self, pmf: np.ndarray, t: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """pmf^t per row (t >= 0), as (B, P, width) normalised series and their logs."""
        b = pmf.shape[0]
        x = np.zeros((b, self.P, width))
        x[..., 0] = 1.0
        lx = np.zeros((b, self.P))
        for r in range(int(t.max(initial=0))):
            sel = np.flatnonzero(t > r)
            y, ly = _mul(x[sel], lx[sel], pmf[sel], np.zeros((sel.size, self.P)))
            x[sel], lx[sel] = y, ly
        return x, lx


def _prod(x: np.ndarray, lx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Product over the first axis (normalised)."""
    acc, la = x[0], lx[0]
    for i in range(1, x.shape[0]):
        acc, la = _mul(acc, la, x[i], lx[i])
    return acc, la


def level_risk(cells: SourceCells, *, a_start: int = 16,
               trace: dict | None = None) -> LevelRisk:
    """The exact risks of ``cells`` (module docstring and :class:`LevelRisk`), max over
    target cells, their classes, picked person cells and released counts s. ``trace`` (a
    dict, for tests): filled with (cell, class) -> (counts s, R(s) of the own-cell pick,
    unconditional success) of every target that moves."""
    src = _Sources(cells)
    a = max(a_start, src.V + 1)
    total = int((np.asarray(cells.t) * np.asarray(cells.counts).sum(axis=1)).sum())
    while True:
        r = _risk_at(src, a, trace)
        if max(r.max_risk, r.any_cell) >= 1.0 / (a + 1) or a >= total:
            return r
        a = min(4 * a, total)


class _Best:
    def __init__(self) -> None:
        self.v: dict[str, float] = {}
        self.at: dict[str, dict[str, Any]] = {}

    def offer(self, name: str, arr: np.ndarray, where) -> None:
        if arr.size and float(arr.max()) > self.v.get(name, 0.0):
            idx = np.unravel_index(int(np.argmax(arr)), arr.shape)
            self.v[name] = float(arr[idx])
            self.at[name] = where(*idx)


def _leave_one_out(x: np.ndarray, lx: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                            np.ndarray, np.ndarray]:
    """(the product of all rows, its log scale, every row's leave-one-out product, their log
    scales) of the power series ``x`` (n, P, w): a binary tree of products, bottom-up then
    top-down (2 log2 n vectorised products, never a division)."""
    n = x.shape[0]
    size = 1
    while size < max(n, 1):
        size *= 2
    one = np.zeros((size,) + x.shape[1:])
    one[..., 0] = 1.0
    lone = np.zeros((size,) + x.shape[1:-1])
    one[:n], lone[:n] = x, lx
    levels = [(one, lone)]
    while levels[-1][0].shape[0] > 1:
        y, ly = levels[-1]
        levels.append(_mul(y[0::2], ly[0::2], y[1::2], ly[1::2]))
    root, lroot = levels[-1][0][0], levels[-1][1][0]
    e = np.zeros_like(levels[-1][0])
    e[..., 0] = 1.0
    le = np.zeros_like(levels[-1][1])
    for y, ly in reversed(levels[:-1]):
        sib = np.empty_like(y)
        lsib = np.empty_like(ly)
        sib[0::2], sib[1::2] = y[1::2], y[0::2]
        lsib[0::2], lsib[1::2] = ly[1::2], ly[0::2]
        e, le = _mul(np.repeat(e, 2, axis=0), np.repeat(le, 2, axis=0), sib, lsib)
    return root, lroot, e[:n], le[:n]


_CHUNK = 256


def _risk_at(src: _Sources, width_a: int, trace: dict | None = None) -> LevelRisk:
    """The figures at a scan of s up to ``width_a``: per HK a, the person cells (a, c) and the
    households that can be released there (:func:`_leave_one_out`)."""
    c = src.c
    w = width_a + 1
    t = np.asarray(c.t, np.int64)
    counts = np.asarray(c.counts, np.int64)
    hk = np.asarray(c.hk, np.int64)
    best = _Best()
    v = np.arange(src.V + 1)
    for a in range(src.n_hk):
        shift = src.shift[a * src.P + np.arange(src.P)]
        s_abs = np.arange(w)[None, :] + shift[:, None]            # (P, w) the count s
        srcs = src.reaching(a)
        pm = src.pmf(srcs, a)
        x, lx = src.power(pm, t[srcs], w)
        g, lg, loo_all, lloo_all = _leave_one_out(x, lx)
        with np.errstate(invalid="ignore", divide="ignore"):
            den = np.where(g > 0, g * np.maximum(s_abs, 1), np.inf)
        # unchanged targets of HK a: released in (a, c) for sure, R(s) = 1/s, s smallest
        for j in src.det[hk[src.det] == a]:
            for cls in np.flatnonzero(counts[j] > 0):
                nz = np.flatnonzero(g[cls] > 0)
                sm = shift[cls] + (nz[0] if nz.size else w)
                r = np.array([1.0 / sm if sm > 0 else 1.0])
                for name in ("own_cell", "any_cell"):
                    best.offer(name, r, lambda *_i, j=j, cls=cls, sm=sm, a=a: _where(
                        c, int(j), int(cls), a, int(cls), int(sm), "unchanged"))
                # E[1/S]: the window's sum, the tail (S beyond it) bounded by 1/(its start)
                prob = g[cls] * np.exp(min(lg[cls], 700.0))
                u = float((prob / np.maximum(s_abs[cls], 1)).sum()
                          + max(1.0 - prob.sum(), 0.0) / (shift[cls] + w))
                best.offer("unconditional", np.array([u]),
                           lambda *_i, j=j, cls=cls, a=a: _where(
                               c, int(j), int(cls), a, int(cls), -1, "unchanged"))
        for k0 in range(0, srcs.size, _CHUNK):
            sl = slice(k0, k0 + _CHUNK)
            b = srcs[sl]
            xm, lxm = src.power(pm[sl], t[b] - 1, w)
            loo, lloo = _mul(loo_all[sl], lloo_all[sl], xm, lxm)
            _offer_targets(best, c, a, b, pm[sl], loo, lloo, lg, den, s_abs, shift, w, v,
                           trace)
    vals = best.v
    any_cell = max(vals.get("any_cell", 0.0), vals.get("other", 0.0))
    return LevelRisk(vals.get("own_cell", 0.0), any_cell, vals.get("other", 0.0),
                     vals.get("unconditional", 0.0), vals.get("any_cell", 0.0), dict(best.at))


def _offer_targets(best: _Best, c: SourceCells, a: int, b: np.ndarray, pm: np.ndarray,
                   loo: np.ndarray, lloo: np.ndarray, lg: np.ndarray, den: np.ndarray,
                   s_abs: np.ndarray, shift: np.ndarray, w: int, v: np.ndarray,
                   trace: dict | None = None) -> None:
    """The random targets ``b`` against the person cells (a, c') of HK ``a``: their own-class
    picks (exact), other-class picks (bounded) and the unconditional own-cell success."""
    counts = np.asarray(c.counts, np.int64)
    cnt = counts[b]                                            # (B, P)
    home = np.asarray(c.hk, np.int64)[b] == a
    scale = np.exp(np.clip(lloo - lg[None], -700, 700))[..., None]
    h_own = pm.copy()
    h_own[..., 0] = 0.0
    num = _conv(loo, h_own)
    r_own = num * scale / den[None]
    r_own[(s_abs[None] < 1) | np.isnan(r_own)] = 0.0
    r_own[cnt == 0] = 0.0

    def at(i, cl, s_):
        return _where(c, int(b[i]), int(cl), a, int(cl), int(s_abs[cl, s_]), "own")
    best.offer("own_cell", np.where(home[:, None, None], r_own, 0.0), at)
    best.offer("any_cell", r_own, at)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        joint = num * np.exp(np.clip(lloo, -700, 700))[..., None]
        # E[1{B in Z} / S]: the window's sum, the tail bounded by 1/(its start)
        unc = ((joint / np.maximum(s_abs, 1)[None]).sum(axis=-1)
               + np.maximum(h_own.sum(axis=-1) - joint.sum(axis=-1), 0.0) / (shift + w)[None])
    unc[(cnt == 0) | ~home[:, None]] = 0.0
    if trace is not None:
        for i in np.flatnonzero(home):
            for cl in np.flatnonzero(cnt[i] > 0):
                trace[(int(b[i]), int(cl))] = (s_abs[cl].copy(), r_own[i, cl].copy(),
                                               float(unc[i, cl]))
    best.offer("unconditional", unc, lambda i, cl: _where(
        c, int(b[i]), int(cl), a, int(cl), -1, "own"))
    h_oth = np.where(v[None, None, :] > cnt[..., None], pm, 0.0)
    r_oth = _conv(loo, h_oth) * scale / den[None]
    r_oth[(s_abs[None] < 1) | np.isnan(r_oth)] = 0.0
    others = ((cnt > 0).sum(axis=1)[:, None] - (cnt > 0)) > 0
    r_oth[~others] = 0.0
    best.offer("other", r_oth, lambda i, cl, s_: _where(
        c, int(b[i]), -1, a, int(cl), int(s_abs[cl, s_]), "other class"))


def _where(c: SourceCells, j: int, cls: int, a: int, picked_class: int, s: int,
           kind: str) -> dict[str, Any]:
    return {"pick": kind, "target_household_keys": int(c.hk[j]),
            "target_composition": [int(x) for x in np.asarray(c.counts)[j]],
            "target_class": int(cls), "picked_household_keys": int(a),
            "picked_class": int(picked_class), "released_count": int(s)}


def composition_level_risks(cp: Any, table: Any, xi: float | None = None
                            ) -> dict[str, LevelRisk]:
    """The person-level, household-level (HK) and household keys x size risks of a
    composition stage's plan ``cp`` (:class:`~sdc.method.household_composition.
    CompositionPlan`) over the compositions ``table``: ``{"person": ..., "household": ...,
    "size": ..., "size_protectable": ...}`` (module docstring); ``size_protectable`` leaves
    out the targets of the sizes :func:`exposed_sizes` names at ``xi`` (default: the plan's
    config's xi)."""
    cells = composition_sources(cp, table)
    if cells is None:
        z = LevelRisk(0.0, 0.0, 0.0, 0.0)
        return {"person": z, "household": z, "size": z, "size_protectable": z}
    if xi is None:
        xi = float(cp.config.risk.xi)
    level_risk = _remembered_level_risk
    person = level_risk(cells)
    household = level_risk(SourceCells(cells.hk, np.ones((cells.hk.size, 1), np.int64),
                                       cells.t, cells.move, cells.group, cells.n_hk,
                                       cells.indptr, cells.dest, cells.weight))
    by_size = size_sources(cells)
    size = level_risk(by_size)
    exposed = exposed_sizes(table, xi)
    if exposed:
        keep = ~np.isin(np.asarray(cells.counts).sum(axis=1), list(exposed))
        protectable = level_risk(SourceCells(
            by_size.hk, by_size.counts, np.where(keep, by_size.t, 0), by_size.move,
            by_size.group, by_size.n_hk, by_size.indptr, by_size.dest, by_size.weight))
    else:
        protectable = size
    return {"person": person, "household": household, "size": size,
            "size_protectable": protectable}


def _remembered_level_risk(cells: SourceCells) -> LevelRisk:
    """:func:`level_risk` of ``cells``, remembered by their content for the process
    (:data:`~sdc.method.content_memo.LEVEL_RISKS`): a design search certifies a candidate and
    releases it in memory, whose risk report computes the same exact risks again."""
    from sdc.method.content_memo import LEVEL_RISKS, array_key

    key = (array_key(cells.hk, cells.counts, cells.t, cells.move, cells.group, cells.indptr,
                     cells.dest, cells.weight), int(cells.n_hk))
    return LEVEL_RISKS.get(key, lambda: level_risk(cells))


def size_sources(cells: SourceCells) -> SourceCells:
    """``cells`` seen by the household keys x size intruder: one class per household size
    (0..largest), one member per household in its size's class."""
    size = np.asarray(cells.counts, np.int64).sum(axis=1)
    onehot = np.zeros((size.size, int(size.max(initial=0)) + 1), np.int64)
    onehot[np.arange(size.size), size] = 1
    return SourceCells(cells.hk, onehot, cells.t, cells.move, cells.group, cells.n_hk,
                       cells.indptr, cells.dest, cells.weight)


def exposed_sizes(table: Any, xi: float) -> dict[int, int]:
    """{size: households} of the household sizes held by fewer than 1/xi households of the
    whole file (``table``: a :class:`~sdc.method.household_composition.CompositionTable`):
    households keep their size and every household release shows it, so an intruder who
    knows a household's size picks among these n households (risk >= 1/n > xi) whatever the
    design (module docstring)."""
    n = np.bincount(np.asarray(table.size)[np.asarray(table.household)])
    return {int(s): int(c) for s, c in enumerate(n) if c > 0 and c * xi < 1.0 - 1e-12}


def composition_sources(cp: Any, table: Any) -> SourceCells | None:
    """The :class:`SourceCells` of a composition stage's plan: its cells (HK, composition)
    in the plan's cell order with their transition design, then per composition of the
    singular households a group of one cell per HK combination (HK uniform, composition
    kept: move 1 - 1/#HK). None when there is no household."""
    from sdc.method.households import row_index

    hk_table = np.asarray(cp.hk_table, np.int64)
    n_hk = int(hk_table.shape[0])
    sizes = [int(x) + 1 for x in hk_table.max(axis=0)] if hk_table.size else []
    parts: list[tuple[np.ndarray, ...]] = []
    n_groups = 0
    rows = None
    if cp.plan is not None:
        cells = cp.plan.partitioned.cells
        design = cp.plan.cell_design()
        if design.has_rows:  # destinations: near (the household design's candidates)
            rows = (np.asarray(design.indptr, np.int64), np.asarray(design.dest, np.int64),
                    np.asarray(design.weight, np.float64))
        kc = np.asarray(cells.key_codes, np.int64)
        hk = row_index(hk_table, kc[:, :-1], sizes)
        grp = np.asarray(design.group, np.int64)
        parts.append((hk, np.asarray(table.counts)[kc[:, -1]],
                      np.asarray(cells.frequency, np.int64), np.asarray(design.move), grp))
        n_groups = int(grp.max(initial=-1)) + 1
    sing = np.asarray(cp.singular, np.int64)
    if sing.size:
        hh_hk = row_index(hk_table, np.asarray(cp.codes, np.int64)[sing, :-1], sizes)
        comp = np.asarray(table.household)[sing]
        for k, n in enumerate(np.unique(comp)):  # a virtual group per composition
            tt = np.bincount(hh_hk[comp == n], minlength=n_hk)
            move = np.full(n_hk, 1.0 - 1.0 / n_hk if n_hk > 1 else 0.0)
            parts.append((np.arange(n_hk), np.repeat(np.asarray(table.counts)[n][None], n_hk, 0),
                          tt.astype(np.int64), move, np.full(n_hk, n_groups + k)))
    if not parts:
        return None
    hk, counts, t, move, grp = (np.concatenate(x) for x in zip(*parts, strict=True))
    if rows is None:
        return SourceCells(hk, counts, t, move, grp, n_hk)
    indptr = np.r_[rows[0], np.full(hk.size + 1 - rows[0].size, rows[0][-1])]
    return SourceCells(hk, counts, t, move, grp, n_hk, indptr, rows[1], rows[2])
