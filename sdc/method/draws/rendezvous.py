"""Where a moving record goes: rendezvous (highest random weight, O(k), for DP-PRAM) and the
hierarchical trie rendezvous of the NZY destination (O(log k), a uniform pick among the other
cells of the PRB), and :class:`DrawPlan`, the plain arrays the per-record step needs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sdc.method.draws.hashing import draw_key, fmix_inplace, keyed_hash, keyed_uniform, siphash24

__all__ = ["DrawPlan", "rendezvous", "trie_order", "trie_rendezvous", "weighted_race"]

_U64 = np.uint64
_CHUNK = 1 << 16          # weight-matrix block: 512 KiB, stays in cache


# -- the NZY step ------------------------------------------------------------------------------
def rendezvous(seed: int, purpose: str, identity: np.ndarray, own: np.ndarray,
               candidate_id: np.ndarray) -> np.ndarray:
    """Highest-random-weight choice among ``candidate_id`` excluding each record's ``own``.

    Parameters
    ----------
    seed : int
    purpose : str
        Names the randomization (``"dest"`` for NZY, ``"dp-pram:<var>"`` for DP-PRAM).
    identity : (m,) uint64
    own : (m,) int
        Index into ``candidate_id`` of the record's own cell/category (excluded), or -1.
    candidate_id : (k,) uint64
        Stable ids of the candidates (distinct).

    Returns
    -------
    (m,) int64 index into ``candidate_id``: argmax over l != own of
    ``fmix64(H_r ^ H_l)``, ``H_r = keyed_hash(seed, purpose, identity)``,
    ``H_l = keyed_hash(seed, purpose + ":cell", candidate_id_l)``. Uniform over the other
    candidates; unchanged when a candidate that does not win joins or leaves.
    """
    identity = np.asarray(identity, dtype=_U64)
    own = np.asarray(own, dtype=np.int64)
    m, k = identity.size, np.asarray(candidate_id).size
    out = np.empty(m, dtype=np.int64)
    if m == 0:
        return out
    if k < 2:
        raise ValueError("rendezvous needs at least 2 candidates")
    hr = keyed_hash(seed, purpose, identity)
    hc = keyed_hash(seed, purpose + ":cell", np.asarray(candidate_id, dtype=_U64))
    step = max(1, _CHUNK // k)
    buf = np.empty(min(m, step) * k, dtype=_U64)
    tmp = np.empty_like(buf)
    for s in range(0, m, step):
        e = min(m, s + step)
        w = buf[:(e - s) * k].reshape(e - s, k)
        t = tmp[:(e - s) * k].reshape(e - s, k)
        # fmix64(H_r ^ H_l) in place, on a cache-sized block
        np.copyto(w, hc[None, :])        # (faster than a broadcasting xor into w)
        w ^= hr[s:e, None]
        np.right_shift(w, _U64(30), out=t)
        w ^= t
        w *= _U64(0xBF58476D1CE4E5B9)
        np.right_shift(w, _U64(27), out=t)
        w ^= t
        w *= _U64(0x94D049BB133111EB)
        np.right_shift(w, _U64(31), out=t)
        w ^= t
        rows = np.arange(e - s)
        o = own[s:e]
        has = o >= 0
        w[rows[has], o[has]] = 0
        best = np.argmax(w, axis=1)
        # a weight of exactly 0 ties with the excluded own cell (probability 2^-64): take the
        # first other candidate, deterministically
        bad = has & (best == o)
        if bad.any():
            best[bad] = np.where(o[bad] == 0, 1, 0)
        out[s:e] = best
    return out


# -- the NZY destination: hierarchical (trie) rendezvous ---------------------------------------
_GOLDEN = _U64(0x9E3779B97F4A7C15)       # SplitMix64's Weyl increment
_TRIE_CHUNK = 4096                       # movers per block of the (movers x 16) race


def trie_order(seed: int, purpose: str, candidate_id: np.ndarray, group: np.ndarray,
               n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort candidates by (group, keyed hash, id): the leaves of the 16-ary trie of each group.

    Parameters
    ----------
    seed : int
    purpose : str
        ``"dest"`` for NZY; the cell hash is ``H_l = keyed_hash(seed, purpose + ":cell", id_l)``.
    candidate_id : (C,) uint64
        Stable ids of the candidates (cells).
    group : (C,) int
        Group (PRB) of each candidate, in ``0 .. n_groups - 1``.
    n_groups : int

    Returns
    -------
    order : (C,) int64
        Candidate indices sorted by (group, H_l, id_l).
    sorted_hash : (C,) uint64
        ``H_l`` in that order.
    bounds : (n_groups + 1,) int64
        Group g occupies ``order[bounds[g]:bounds[g + 1]]``.
    """
    candidate_id = np.asarray(candidate_id, dtype=_U64)
    group = np.asarray(group, dtype=np.int64)
    h = keyed_hash(seed, purpose + ":cell", candidate_id)
    order = np.lexsort((candidate_id, h, group))
    bounds = np.searchsorted(group[order], np.arange(n_groups + 1)).astype(np.int64)
    return order.astype(np.int64), h[order], bounds


def _child_uniforms(h_node: np.ndarray) -> np.ndarray:
    """(m, 16) uniforms in the open interval (0, 1) from one keyed 64-bit value per row.

    Child c's value is the (c+1)-th output of SplitMix64 seeded with ``h_node``:
    ``fmix64(h_node + (c + 1) * 0x9E3779B97F4A7C15)``; the uniform is
    ``((v >> 11) + 1/2) * 2**-53``, never 0 or 1, so ``-log(U)`` is finite and positive.
    """
    with np.errstate(over="ignore"):
        v = h_node[:, None] + np.arange(1, 17, dtype=_U64)[None, :] * _GOLDEN
    fmix_inplace(v)
    u = (v >> _U64(11)).astype(np.float64)
    u += 0.5
    u *= 2.0 ** -53
    return u


def trie_rendezvous(seed: int, purpose: str, identity: np.ndarray, own: np.ndarray,
                    group: np.ndarray, sorted_hash: np.ndarray,
                    bounds: np.ndarray) -> np.ndarray:
    """Hierarchical weighted rendezvous: uniform over the other candidates of the record's group.

    The candidates of a group, sorted by their keyed hash ``H_l`` (:func:`trie_order`), are the
    leaves of a 16-ary trie whose level-d digit is bits ``60 - 4d .. 63 - 4d`` of ``H_l``. A
    record starts at the root (the whole group) and at every node runs an exponential race
    between the node's children: child c has rate ``n_c`` = number of candidates under c other
    than the record's own, and time ``E_c = -log(U_c) / n_c`` with ``U_c`` the (c+1)-th output of
    SplitMix64 seeded with ``keyed_hash(seed, purpose + ":trie:" + str(d), identity, prefix)``
    (``prefix`` = the node's 4d-bit path, depth d in the key). The record descends into
    ``argmin_c E_c`` over the children with ``n_c > 0`` until its node holds exactly one
    candidate, which is the choice.

    Law. With independent uniforms, ``P(argmin = c) = n_c / N`` (N = sum of n_c: the
    exponential race), so the probability of reaching a leaf l is the telescoping product
    ``prod_d n_{d+1} / N_d = 1 / N_0 = 1 / (k - 1)`` (own candidate excluded, k candidates), or
    ``1 / k`` when ``own`` is -1: exactly uniform. A record's choice depends only on the seed,
    its identity and the set of candidate hashes of its group, never on other records.

    Stability. When a candidate joins or leaves, only the rates ``n_c`` on its own root-to-leaf
    path change by one. At a node with N candidates, the coupled race (same uniforms) changes
    its winner with probability ``(N - n_c) / (N (N + 1)) <= 1 / (N + 1)``, and a record passes
    that node with probability ``N / (k - 1)``: the expected share of records whose choice
    changes is about ``depth / k`` (depth ~ log16 k + 1), and a changed record moves into the
    joining candidate's subtree (join) or out of the leaving one's (leave).

    Cost: O(16 log16 k) per record, plus O(C) per level for the node labels of all candidates.
    When two candidates share all 64 bits of ``H_l`` (probability ~k^2 / 2^65), the last step
    picks the ``floor(U N)``-th of them (U keyed on depth 16): still uniform.

    Parameters
    ----------
    seed : int
    purpose : str
    identity : (m,) uint64
        Record identities (distinct).
    own : (m,) int
        Position in the sorted arrays of the record's own candidate (excluded), or -1.
    group : (m,) int
        Group of each record.
    sorted_hash, bounds
        From :func:`trie_order`.

    Returns
    -------
    (m,) int64 position in the sorted arrays (``order[position]`` is the candidate), -1 when the
    group has no candidate other than the record's own.
    """
    identity = np.asarray(identity, dtype=_U64)
    own = np.asarray(own, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    H = np.asarray(sorted_hash, dtype=_U64)
    bounds = np.asarray(bounds, dtype=np.int64)
    m = identity.size
    out = np.full(m, -1, dtype=np.int64)
    if m == 0:
        return out
    lo, hi = bounds[group], bounds[group + 1]
    act = np.arange(m)
    gstart = np.zeros(H.size, dtype=bool)
    gstart[bounds[:-1][np.diff(bounds) > 0]] = True
    for d in range(17):
        own_in = (own[act] >= lo) & (own[act] < hi)
        n_cand = hi - lo - own_in
        act, lo, hi, own_in, n_cand = _settle(out, own, act, lo, hi, own_in, n_cand)
        if act.size == 0:
            break
        if d == 16:
            # two or more candidates share all 64 bits: floor(U N)-th of them, skipping own
            u = keyed_uniform(seed, f"{purpose}:trie:16", identity[act], H[lo])
            j = lo + np.minimum((u * n_cand).astype(np.int64), n_cand - 1)
            out[act] = j + (own_in & (own[act] <= j))
            break
        node, digit, label = _trie_level(H, gstart, d)
        prefix = np.zeros(act.size, dtype=_U64) if d == 0 else H[lo] >> _U64(64 - 4 * d)
        h_node = keyed_hash(seed, f"{purpose}:trie:{d}", identity[act], prefix)
        lo, hi = _descend(lo, hi, own, act, own_in, node, digit, label, h_node)
    return out


def _settle(out: np.ndarray, own: np.ndarray, act: np.ndarray, lo: np.ndarray,
            hi: np.ndarray, own_in: np.ndarray, n_cand: np.ndarray) -> tuple[np.ndarray, ...]:
    """Records whose node holds at most one candidate other than their own get it in ``out``
    (-1 for none); returns (act, lo, hi, own_in, n_cand) of the records still descending."""
    done = n_cand <= 1
    if not done.any():
        return act, lo, hi, own_in, n_cand
    i = act[done]
    out[i] = np.where(n_cand[done] == 1, lo[done] + (own_in[done] & (own[i] == lo[done])), -1)
    keep = ~done
    return act[keep], lo[keep], hi[keep], own_in[keep], n_cand[keep]


def _trie_level(H: np.ndarray, gstart: np.ndarray,
                d: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Level ``d`` of the trie over the sorted hashes ``H`` (groups start at ``gstart``):
    (node of every candidate, its level-d digit (bits 60 - 4d .. 63 - 4d), node * 16 + digit
    (nondecreasing: nodes in order, digits sorted within))."""
    digit = ((H >> _U64(60 - 4 * d)) & _U64(15)).astype(np.int64)
    if d == 0:
        start = gstart
    else:
        up = H >> _U64(64 - 4 * d)
        start = gstart.copy()
        start[0] = True
        start[1:] |= up[1:] != up[:-1]
    node = np.cumsum(start, dtype=np.int64) - 1
    return node, digit, node * 16 + digit


def _descend(lo: np.ndarray, hi: np.ndarray, own: np.ndarray, act: np.ndarray,
             own_in: np.ndarray, node: np.ndarray, digit: np.ndarray, label: np.ndarray,
             h_node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One level of the race: every record (node [lo, hi), uniforms keyed on ``h_node``)
    moves to the child c minimising E_c = -log(U_c) / n_c over the children with n_c > 0
    (own candidate not counted), ``_TRIE_CHUNK`` records at a time. Returns the new (lo, hi)."""
    # the 15 inner child boundaries of every distinct node holding a record (sorted
    # queries: one binary search per node and child, not per record)
    nid = node[lo]
    present = np.zeros(int(node[-1]) + 1, dtype=bool)
    present[nid] = True
    uniq = np.flatnonzero(present)
    inner = np.searchsorted(label, (uniq[:, None] * 16 + _CHILDREN[None, :]).ravel())
    inner = inner.reshape(uniq.size, 15)
    slot = np.cumsum(present, dtype=np.int64) - 1
    new_lo, new_hi = lo.copy(), hi.copy()
    for s in range(0, act.size, _TRIE_CHUNK):
        e = min(act.size, s + _TRIE_CHUNK)
        r = np.arange(e - s)
        b = np.empty((e - s, 17), dtype=np.int64)
        b[:, 0], b[:, 16] = lo[s:e], hi[s:e]
        b[:, 1:16] = inner[slot[nid[s:e]]]
        n = np.diff(b, axis=1)
        oi = own_in[s:e]
        n[r[oi], digit[own[act[s:e][oi]]]] -= 1
        u = _child_uniforms(h_node[s:e])
        np.log(u, out=u)
        with np.errstate(divide="ignore"):
            u /= n                     # -E_c; n_c = 0 gives -inf and never wins
        c = np.argmax(u, axis=1)
        new_lo[s:e], new_hi[s:e] = b[r, c], b[r, c + 1]
    return new_lo, new_hi


_CHILDREN = np.arange(1, 16, dtype=np.int64)   # the inner children of a trie node


# -- a weighted destination: the exponential race over a sparse row ---------------------------
_RACE_CHUNK = 1 << 16                    # (mover, candidate) pairs per block


def weighted_race(seed: int, purpose: str, identity: np.ndarray, indptr: np.ndarray,
                  row: np.ndarray, candidate: np.ndarray, weight: np.ndarray,
                  candidate_id: np.ndarray) -> np.ndarray:
    """Weighted rendezvous: ``argmin_l -log(U_l) / w_l`` over the row of each record.

    Parameters
    ----------
    seed : int
    purpose : str
        ``"dest:near"`` for the near-cell destination.
    identity : (m,) uint64
        Record identities.
    indptr, candidate, weight : CSR of the destination design
        Row r's candidates are ``candidate[indptr[r]:indptr[r+1]]`` with weights ``weight``.
    row : (m,) int
        Each record's row (its cell); a row without candidates gives -1.
    candidate_id : (C,) uint64
        Stable id of every candidate (cell identities), indexed by ``candidate``.

    Returns
    -------
    (m,) int64 candidate (an entry of ``candidate``), -1 for an empty row.

    Law: with ``U_l = ((keyed_hash(seed, purpose, identity, id_l) >> 11) + 1/2) 2^-53``
    independent uniforms, the exponential race picks l with probability w_l / sum(w): exactly
    the design's row. A record's pick depends only on the seed, its identity and its own row
    (candidates and weights), so it is unchanged when other rows change (series stability).
    Vectorized over records, padded to the longest row, in blocks.
    """
    identity = np.asarray(identity, dtype=_U64)
    row = np.asarray(row, dtype=np.int64)
    m = identity.size
    out = np.full(m, -1, dtype=np.int64)
    if m == 0:
        return out
    start = indptr[row]
    length = indptr[row + 1] - start
    width = int(length.max()) if m else 0
    if width == 0:
        return out
    k0, k1 = draw_key(seed, purpose)
    cols = np.arange(width, dtype=np.int64)
    step = max(1, _RACE_CHUNK // width)
    for s in range(0, m, step):
        e = min(m, s + step)
        ln = length[s:e]
        valid = cols[None, :] < ln[:, None]
        pos = np.where(valid, start[s:e, None] + cols[None, :], 0)
        cand = candidate[pos]
        h = siphash24(k0, k1, np.broadcast_to(identity[s:e, None], cand.shape),
                      candidate_id[cand])
        u = ((h >> _U64(11)).astype(np.float64) + 0.5) * 2.0 ** -53
        with np.errstate(divide="ignore"):
            race = np.where(valid, -np.log(u) / np.where(valid, weight[pos], 1.0), np.inf)
        best = np.argmin(race, axis=1)
        r = np.arange(e - s)
        out[s:e] = np.where(ln > 0, cand[r, best], -1)
    return out


@dataclass(frozen=True)
class DrawPlan:
    """The global plan the per-record NZY step needs, as plain arrays.

    Attributes
    ----------
    cell_prb : (C,) int64
        PRB of each cell, -1 for non-sensitive cells.
    cell_frequency : (C,) int64
        t_j.
    cell_id : (C,) uint64
        :func:`cell_identity` of each cell.
    prb_theta : (B,) float64
        theta of each PRB.
    cell_move : (C,) float64 or None
        The weighted mode's move probability m_j of each cell (None: theta_b / t_j).
    cell_group : (C,) int64 or None
        The weighted mode's destination group of each cell, -1 for non-sensitive cells
        (None: the PRB); a moving record goes to one of the other cells of its group.
    dest_indptr, dest_cell, dest_weight : CSR over all cells, or None
        ``destinations: near``: cell j's destinations ``dest_cell[dest_indptr[j]:
        dest_indptr[j+1]]`` (global cell indices) and their w_jl; cells with an empty row (a
        PRB that got the uniform W) draw by trie rendezvous as under ``uniform``.
    """

    cell_prb: np.ndarray
    cell_frequency: np.ndarray
    cell_id: np.ndarray
    prb_theta: np.ndarray
    cell_move: np.ndarray | None = None
    cell_group: np.ndarray | None = None
    dest_indptr: np.ndarray | None = None
    dest_cell: np.ndarray | None = None
    dest_weight: np.ndarray | None = None

    @property
    def cell_dest_group(self) -> np.ndarray:
        """The destination group of every cell (the PRB unless weighted), -1 if none."""
        return self.cell_prb if self.cell_group is None else self.cell_group

    def move_probability(self, cells: np.ndarray) -> np.ndarray:
        """m_j of ``cells`` (sensitive ones): theta_b / t_j, or the weighted design's."""
        if self.cell_move is not None:
            return self.cell_move[cells]
        return self.prb_theta[self.cell_prb[cells]] / self.cell_frequency[cells]

    def dest_trie(self, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The destination tries of all PRBs under ``seed`` (:func:`trie_order` with purpose
        ``"dest"``), computed once per plan and seed (batch engines call the per-record step
        once per batch).

        Returns
        -------
        cells : (S,) int64
            The sensitive cells sorted by (PRB, H_l, cell id).
        sorted_hash : (S,) uint64
        bounds : (B + 1,) int64
            PRB b's cells are ``cells[bounds[b]:bounds[b + 1]]``.
        position : (C,) int64
            Position of every cell in ``cells``; -1 for non-sensitive cells.
        """
        cache = self.__dict__.setdefault("_trie_cache", {})
        if seed not in cache:
            group = self.cell_dest_group
            sens = np.flatnonzero(group >= 0)
            n_groups = int(group[sens].max()) + 1 if sens.size else 0
            if self.cell_group is None:
                n_groups = self.prb_theta.size
            order, sorted_hash, bounds = trie_order(seed, "dest", self.cell_id[sens],
                                                    group[sens], n_groups)
            cells = sens[order]
            position = np.full(self.cell_prb.size, -1, dtype=np.int64)
            position[cells] = np.arange(cells.size)
            cache.clear()
            cache[seed] = (cells, sorted_hash, bounds, position)
        return cache[seed]
