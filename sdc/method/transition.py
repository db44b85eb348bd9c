"""The transition design of a post-randomization block (PRB): who moves, and where to.

A PRB of k cells (local indices 0..k-1, frequencies t_j) is post-randomized by

    P(j -> j) = 1 - m_j,      P(j -> l) = m_j w_jl   (l != j),

with m_j the **move probability** of a record of cell j and W = (w_jl) the **destination
design**: row-stochastic with a zero diagonal. NZY (eq. 5.3) is m_j = theta/t_j and the uniform
W, w_jl = 1/(k - 1). Any W with zero diagonal and unit column sums (doubly stochastic) keeps
every cell count unbiased when m_j = theta/t_j: E[released t_l] = t_l - theta + theta sum_j w_jl
= t_l. The weighted mode (section 7.11) is the same object with m_j = c_g / W_j and W
block-diagonal over the PRB's **weight groups** g (uniform, or near, inside each group).

:class:`Transition` is that pair per PRB: ``move`` (k,) and W as a sparse row (CSR) matrix, or
``None`` for the uniform W (never materialised: a PRB may hold 10^5 cells). The certificate
(:mod:`sdc.method.transition_risk`) and the record-keyed draws (:mod:`sdc.method.postrandomize`) take
it; :func:`cell_design` lays every PRB's design out over the whole cell table (what the
draws and the exact expected totals use). docs/METHOD.md sections 7.11-7.12.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

__all__ = ["CellDesign", "Transition", "cell_design", "expected_totals", "nzy_move",
           "uniform_transition"]


def nzy_move(frequency: np.ndarray, theta: float) -> np.ndarray:
    """NZY's move probabilities m_j = theta / t_j (0 for a PRB of one cell: nowhere to go)."""
    t = np.asarray(frequency, dtype=np.int64)
    if t.size < 2:
        return np.zeros(t.size)
    return float(theta) / t


@dataclass(frozen=True)
class Transition:
    """The transition design of one PRB (module docstring).

    Attributes
    ----------
    frequency : (k,) int64
        t_j of the PRB's cells, in the PRB's local order.
    move : (k,) float64
        m_j in [0, 1]: probability that a record of cell j moves.
    indptr, indices, weights : CSR of W, or all ``None`` for the uniform W
        Row j's destinations are ``indices[indptr[j]:indptr[j+1]]`` (ascending local indices,
        never j) with weights ``weights[...]`` summing to 1. A row may be empty: a cell of a
        group without a near design then moves uniformly inside its group.
    theta : float or None
        The theta with ``move == theta / t`` (NZY), None when ``move`` was supplied otherwise.
    kind : str
        ``"uniform"`` or ``"near"`` (what built W; a near PRB too small for the spread floor
        is ``"uniform"``).
    group : (k,) int64 or None
        The weight group of every cell (0..G-1; the weighted mode): W is block-diagonal over
        the groups, uniform inside a group whose rows of the CSR are empty (or when there is
        no CSR). None: one group, the PRB.
    """

    frequency: np.ndarray
    move: np.ndarray
    indptr: np.ndarray | None = None
    indices: np.ndarray | None = None
    weights: np.ndarray | None = None
    theta: float | None = None
    kind: str = "uniform"
    group: np.ndarray | None = None

    @property
    def k(self) -> int:
        return int(self.frequency.size)

    @property
    def uniform(self) -> bool:
        """W is the uniform design (not materialised)."""
        return self.indptr is None

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """W as CSR arrays (the uniform W materialised: k (k - 1) entries)."""
        k = self.k
        if self.group is None:
            if not self.uniform:
                return self.indptr, self.indices, self.weights  # type: ignore[return-value]
            if k < 2:
                return np.zeros(k + 1, np.int64), np.zeros(0, np.int64), np.zeros(0)
            full = np.tile(np.arange(k, dtype=np.int64), (k, 1))
            idx = full[~np.eye(k, dtype=bool)].reshape(k, k - 1).ravel()
            return (np.arange(k + 1, dtype=np.int64) * (k - 1), idx,
                    np.full(k * (k - 1), 1.0 / (k - 1)))
        r, c, v = self._group_entries()
        order = np.lexsort((c, r))
        indptr = np.zeros(k + 1, dtype=np.int64)
        np.cumsum(np.bincount(r, minlength=k), out=indptr[1:])
        return indptr, c[order].astype(np.int64), v[order]

    def _group_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, column, weight) of every entry of a grouped W, each group's as its
        :meth:`restrict` gives it (the rows of a near group as stored, every other cell of a
        uniform group at 1 / (k_g - 1)), for all groups at once."""
        k, g = self.k, np.asarray(self.group, dtype=np.int64)
        length = (np.zeros(k, np.int64) if self.uniform
                  else np.diff(self.indptr).astype(np.int64))
        size = np.bincount(g, minlength=int(g.max(initial=-1)) + 1)
        near_rows = np.bincount(g, weights=length > 0, minlength=size.size)
        if ((near_rows > 0) & (near_rows < size)).any():
            raise ValueError("restrict: one group mixes near and uniform rows")
        r_near = np.repeat(np.arange(k, dtype=np.int64), length)
        c_near = (np.zeros(0, np.int64) if self.uniform
                  else np.asarray(self.indices[:int(self.indptr[-1])], np.int64))
        if (g[c_near] != g[r_near]).any():
            raise ValueError("restrict: W leads out of the cells given")
        w_near = np.zeros(0) if self.uniform else self.weights[:int(self.indptr[-1])]
        # uniform groups: row j -> the other cells of its group, ascending
        order = np.argsort(g, kind="stable")
        first = np.r_[0, np.cumsum(size)[:-1]]
        uni = np.flatnonzero((near_rows == 0)[g] & (size[g] >= 2))
        rank = np.empty(k, np.int64)
        rank[order] = np.arange(k) - first[g[order]]
        n_out = size[g[uni]] - 1
        r_uni = np.repeat(uni, n_out)
        e = np.arange(r_uni.size) - np.repeat(np.cumsum(n_out) - n_out, n_out)
        e = e + (e >= rank[r_uni])
        c_uni = order[first[g[r_uni]] + e]
        w_uni = 1.0 / (size[g[r_uni]] - 1)
        return (np.concatenate([r_near, r_uni]), np.concatenate([c_near, c_uni]),
                np.concatenate([w_near, w_uni]))

    def groups(self) -> list[np.ndarray]:
        """The local cells of every group (ascending), in group order."""
        if self.group is None:
            return [np.arange(self.k, dtype=np.int64)]
        order = np.argsort(self.group, kind="stable")
        bounds = np.searchsorted(self.group[order], np.arange(int(self.group.max()) + 2))
        return [order[bounds[g]:bounds[g + 1]] for g in range(bounds.size - 1)]

    def restrict(self, members: np.ndarray) -> Transition:
        """The design of the local cells ``members`` (ascending; a union of whole groups, so
        no record leaves them) as a PRB of its own, W re-indexed; a single group whose rows
        are all empty is the uniform W."""
        members = np.asarray(members, dtype=np.int64)
        t, m = self.frequency[members], self.move[members]
        sub_group = None
        if self.group is not None:
            _, sub_group = np.unique(self.group[members], return_inverse=True)
            sub_group = sub_group.astype(np.int64) if int(sub_group.max(initial=0)) else None
        length = (np.diff(self.indptr)[members] if not self.uniform
                  else np.zeros(members.size, np.int64))
        if not length.any():
            return Transition(t, m, theta=self.theta, kind="uniform", group=sub_group)
        if sub_group is None and not length.all():
            raise ValueError("restrict: one group mixes near and uniform rows")
        local = np.full(self.k, -1, dtype=np.int64)
        local[members] = np.arange(members.size)
        take = np.concatenate([np.arange(self.indptr[j], self.indptr[j + 1]) for j in members])
        idx = local[self.indices[take]]
        if (idx < 0).any():
            raise ValueError("restrict: W leads out of the cells given")
        ip = np.zeros(members.size + 1, dtype=np.int64)
        np.cumsum(length, out=ip[1:])
        return Transition(t, m, ip, idx, self.weights[take], self.theta, self.kind, sub_group)

    def dense(self) -> np.ndarray:
        """W as a dense (k, k) array (tests and small PRBs only)."""
        indptr, indices, weights = self.csr()
        w = np.zeros((self.k, self.k))
        rows = np.repeat(np.arange(self.k), np.diff(indptr))
        w[rows, indices] = weights
        return w

    def matrix(self) -> np.ndarray:
        """The full transition matrix P (k, k): diag 1 - m_j, off-diagonal m_j w_jl."""
        p = self.move[:, None] * self.dense()
        p[np.diag_indices(self.k)] = 1.0 - self.move
        return p

    def expected_released(self) -> np.ndarray:
        """E[released count of every cell] = t P (exact; equals t when W is doubly
        stochastic and m = theta / t)."""
        return self.expected(self.frequency)

    def expected(self, x: np.ndarray) -> np.ndarray:
        """E[X*_l] = sum_j X_j p_jl for any per-cell total X carried by the records (t_j:
        counts; W_j: weighted totals). Exact, from the transition probabilities."""
        d = cell_design([self], np.arange(self.k, dtype=np.int64), np.zeros(1, np.int64),
                        self.k)
        return expected_totals(x, d)

    def with_move(self, move: np.ndarray, theta: float | None = None) -> Transition:
        """The same W with other move probabilities (a weighted mode, a calibrated theta)."""
        move = np.asarray(move, dtype=np.float64)
        if move.shape != self.frequency.shape or (move < 0).any() or (move > 1).any():
            raise ValueError("move must hold one probability in [0, 1] per cell")
        return Transition(self.frequency, move, self.indptr, self.indices, self.weights,
                          theta, self.kind, self.group)

    def with_theta(self, theta: float) -> Transition:
        """NZY's m_j = theta / t_j on this W."""
        return self.with_move(nzy_move(self.frequency, theta), float(theta))

    def digest(self) -> str:
        """SHA-256 of W (CSR arrays, little-endian): what ``sdc audit`` compares after
        re-deriving W (W itself is never written to a public file)."""
        indptr, indices, weights = self.csr()
        h = hashlib.sha256()
        for a in (indptr.astype("<i8"), indices.astype("<i8"), weights.astype("<f8")):
            h.update(a.tobytes())
        return h.hexdigest()


def uniform_transition(frequency: np.ndarray, theta: float) -> Transition:
    """NZY's design of a PRB: m_j = theta / t_j, w_jl = 1 / (k - 1)."""
    t = np.asarray(frequency, dtype=np.int64)
    return Transition(t, nzy_move(t, theta), theta=float(theta), kind="uniform")


@dataclass(frozen=True)
class CellDesign:
    """Every PRB's :class:`Transition` laid out over the whole cell table (global indices):
    what the record-keyed draws (:class:`sdc.method.draws.DrawPlan`) and the exact expected
    totals need.

    Attributes
    ----------
    move : (C,) float64
        m_j (0 for non-sensitive cells).
    group : (C,) int64
        The destination group of every cell (-1 for non-sensitive cells): a cell whose CSR
        row is empty moves uniformly to another cell of its group (the trie race).
    indptr, dest, weight : CSR over all cells
        The near rows (global destination cells, w_jl); empty rows move uniformly.
    """

    move: np.ndarray
    group: np.ndarray
    indptr: np.ndarray
    dest: np.ndarray
    weight: np.ndarray

    @property
    def has_rows(self) -> bool:
        return bool(self.dest.size)


def cell_design(transitions: list[Transition], prb_cells: np.ndarray, prb_start: np.ndarray,
                n_cells: int) -> CellDesign:
    """Lay the PRBs' designs out over the cell table. PRB b's local cell i is the global cell
    ``prb_cells[prb_start[b] + i]``; groups are numbered in PRB order, then group order
    (a PRB without groups is one group)."""
    move = np.zeros(n_cells)
    group = np.full(n_cells, -1, dtype=np.int64)
    length = np.zeros(n_cells, dtype=np.int64)
    parts = []
    g0 = 0
    for b, tr in enumerate(transitions):
        cells = np.asarray(prb_cells[int(prb_start[b]):int(prb_start[b]) + tr.k], np.int64)
        move[cells] = tr.move
        local = np.zeros(tr.k, dtype=np.int64) if tr.group is None else tr.group
        group[cells] = g0 + local
        g0 += int(local.max(initial=-1)) + 1
        if not tr.uniform:
            length[cells] = np.diff(tr.indptr)
            parts.append((cells, tr.indptr, cells[tr.indices], tr.weights))
    indptr = np.zeros(n_cells + 1, dtype=np.int64)
    np.cumsum(length, out=indptr[1:])
    dest = np.zeros(int(indptr[-1]), dtype=np.int64)
    weight = np.zeros(int(indptr[-1]))
    for cells, ip, glob, w in parts:
        rows = np.repeat(cells, np.diff(ip))
        pos = indptr[rows] + (np.arange(ip[-1]) - np.repeat(ip[:-1], np.diff(ip)))
        dest[pos] = glob
        weight[pos] = w
    return CellDesign(move, group, indptr, dest, weight)


def expected_totals(x: np.ndarray, design: CellDesign) -> np.ndarray:
    """E[X*_l] = X_l (1 - m_l) + sum_{j != l} X_j m_j w_jl for every cell l, with w_jl the
    CSR row of j where it has one, else 1 / (k_g - 1) over the other cells of j's group (a
    group of one cell keeps its records). ``x``: any per-cell total carried by the records
    (t_j for counts, W_j for weighted totals). Exact, from the transition probabilities.

    Examples
    --------
    Two singletons of weights 1 and 3, NZY at theta = 0.5 (m = 0.5 each): counts stay 1 each,
    weighted totals move towards each other; with m_j = c / W_j they stay:

    >>> d = lambda m: CellDesign(np.array(m), np.array([0, 0]), np.zeros(3, np.int64),
    ...                          np.zeros(0, np.int64), np.zeros(0))
    >>> expected_totals(np.array([1.0, 3.0]), d([.5, .5])).tolist()
    [2.0, 2.0]
    >>> expected_totals(np.array([1.0, 3.0]), d([.6, .2])).tolist()
    [1.0, 3.0]
    """
    x = np.asarray(x, dtype=np.float64)
    g = np.asarray(design.group, dtype=np.int64)
    m = np.where(g >= 0, np.asarray(design.move, dtype=np.float64), 0.0)
    out = x * (1.0 - m)
    sens = np.flatnonzero(g >= 0)
    if sens.size == 0:
        return out
    row_len = np.diff(design.indptr)
    flow = x * m
    # near rows: sum_j X_j m_j w_jl
    if design.dest.size:
        rows = np.repeat(np.arange(x.size), row_len)
        out += np.bincount(design.dest, weights=flow[rows] * design.weight, minlength=x.size)
    # uniform rows: the group's pool of uniform movers, shared by the other cells of the group
    uni = sens[row_len[sens] == 0]
    n_g = int(g[sens].max()) + 1
    k = np.bincount(g[sens], minlength=n_g)
    pool = np.bincount(g[uni], weights=flow[uni], minlength=n_g)
    kk = k[g[sens]]
    own = np.where(row_len[sens] == 0, flow[sens], 0.0)
    inflow = np.where(kk > 1, (pool[g[sens]] - own) / np.maximum(kk - 1, 1), 0.0)
    out[sens] = np.where(kk > 1, out[sens] + inflow, x[sens])
    return out
