"""The filter intruder's compatibility sums of the informing pairs (:func:`informing`): per cell
j of the PRBs, ``sum over the pairs (j', v) of j's PRB that inform of w [v compatible with j]``,
where v is compatible with j when v's interval holds j's code on every key v informs on and
j's code pair is one v was observed with on every key pair v informs on.

Each distinct (PRB, value) is an *entry*. A PRB with few cells and values is computed with the
others as flat (entry, member cell) triples; a PRB with ``WIDE`` triples or more on its own as
one (entries x cells) matrix per key, without gathering the triples' codes (a census-sized
demo: 850K triples in 42 PRBs, 56 -> 5 ms). Both sum each cell's weights in entry order
(``np.add.accumulate`` over a matrix's rows adds row after row, as ``bincount`` adds its input
in order; ``sum(axis=0)`` does not for a single column, where it sums pairwise): the same
figures as the flat computation alone."""

from __future__ import annotations

import numpy as np

__all__ = ["MATRIX", "WIDE", "informing"]

MATRIX = 1 << 22  # entries of one compatibility chunk (values x cells)
WIDE = 1 << 12    # a PRB with this many (value, cell) triples is computed on its own


def informing(prb: np.ndarray, vi: np.ndarray, w: np.ndarray, inform: np.ndarray,
              vlo: np.ndarray, vhi: np.ndarray, combo: dict, *, kc: np.ndarray,
              sizes: list[int], prb_cells: np.ndarray, prb_start: np.ndarray,
              k_prb: np.ndarray, n_cells: int) -> np.ndarray:
    """Per cell (0 outside the PRBs) the compatibility sum of the informing pairs (PRBs
    ``prb``, values ``vi``, weights ``w``); ``inform`` / ``vlo`` / ``vhi`` (values, keys): the
    keys a value informs on and its intervals; ``combo[(k1, k2)] = (inf_q, qcodes, span)``: the
    values that inform on the pair and the sorted codes ``v * span + code pair`` observed."""
    nv = max(int(inform.shape[0]), 1)
    uc, inv = np.unique(prb.astype(np.int64) * nv + vi, return_inverse=True)
    wv = np.bincount(inv.ravel(), weights=w, minlength=uc.size)
    eb, ev = np.divmod(uc, nv)          # each entry: its PRB and value, sorted by PRB
    ke = k_prb[eb].astype(np.int64)     # its PRB's cells
    acc = np.zeros(n_cells)
    first = np.flatnonzero(np.r_[True, eb[1:] != eb[:-1]])
    count = np.diff(np.r_[first, eb.size])
    wide = ke[first] * count >= WIDE
    flat = np.ones(eb.size, dtype=bool)
    for s, n in zip(first[wide].tolist(), count[wide].tolist(), strict=True):
        flat[s:s + n] = False
        _one_prb(acc, ev[s:s + n], wv[s:s + n], int(eb[s]), inform, vlo, vhi, combo, kc,
                 sizes, prb_cells, prb_start)
    if flat.any():
        _flat(acc, eb[flat], ev[flat], wv[flat], ke[flat], inform, vlo, vhi, combo, kc, sizes,
              prb_cells, prb_start)
    return acc


def _one_prb(acc: np.ndarray, v: np.ndarray, wv: np.ndarray, b: int, inform: np.ndarray,
             vlo: np.ndarray, vhi: np.ndarray, combo: dict, kc: np.ndarray, sizes: list[int],
             prb_cells: np.ndarray, prb_start: np.ndarray) -> None:
    """The entries (values ``v``, weights ``wv``) of PRB ``b``: (entries x cells) matrices,
    ``MATRIX`` entries at a time, summed over the entries into ``acc``."""
    start = int(prb_start[b])
    end = int(prb_start[b + 1]) if b + 1 < len(prb_start) else prb_cells.size
    cells = prb_cells[start:end]
    step = max(1, MATRIX // max(cells.size, 1))
    mc = kc[cells].astype(np.int64)  # the PRB's cells' key codes (cells x keys)
    for s in range(0, v.size, step):
        vs, ws = v[s:s + step], wv[s:s + step]
        ok = None
        for k in range(inform.shape[1]):
            m = inform[vs, k]
            if not m.any():
                continue
            inside = (mc[:, k] >= vlo[vs, k][:, None]) & (mc[:, k] <= vhi[vs, k][:, None])
            if not m.all():
                inside |= ~m[:, None]
            ok = inside if ok is None else np.logical_and(ok, inside, out=ok)
        for (k1, k2), (inf_q, qcodes, span) in combo.items():
            m = inf_q[vs]
            if not m.any():
                continue
            query = vs[:, None] * span + (mc[:, k1] * sizes[k2] + mc[:, k2])
            pos = np.minimum(np.searchsorted(qcodes, query), qcodes.size - 1)
            inside = qcodes[pos] == query
            if not m.all():
                inside |= ~m[:, None]
            ok = inside if ok is None else np.logical_and(ok, inside, out=ok)
        if ok is None:  # informs on nothing here: compatible with every cell
            ok = np.ones((vs.size, cells.size), dtype=bool)
        m = np.where(ok, ws[:, None], 0.0)
        acc[cells] += np.add.accumulate(m, axis=0, out=m)[-1]  # in entry order, as bincount


def _flat(acc: np.ndarray, eb: np.ndarray, ev: np.ndarray, wv: np.ndarray, ke: np.ndarray,
          inform: np.ndarray, vlo: np.ndarray, vhi: np.ndarray, combo: dict, kc: np.ndarray,
          sizes: list[int], prb_cells: np.ndarray, prb_start: np.ndarray) -> None:
    """The entries of the small PRBs as (entry, member cell) triples, ``MATRIX`` at a time
    (a loop over ~1,000 small PRBs cost ~0.1 s)."""
    ends = np.cumsum(ke)                # triples up to and with each entry
    s = 0
    while s < eb.size:
        base = int(ends[s] - ke[s])
        stop = max(s + 1, int(np.searchsorted(ends, base + MATRIX, side="right")))
        kk = ke[s:stop]
        rep = np.repeat(np.arange(s, stop), kk)
        nth = np.arange(rep.size) - np.repeat(ends[s:stop] - kk - base, kk)
        member = prb_cells[prb_start[eb[rep]] + nth]
        v, mc = ev[rep], kc[member]
        ok = np.ones(rep.size, dtype=bool)
        for k in range(inform.shape[1]):
            m = inform[v, k]
            if m.any():
                ok &= ~m | ((mc[:, k] >= vlo[v, k]) & (mc[:, k] <= vhi[v, k]))
        for (k1, k2), (inf_q, qcodes, span) in combo.items():
            m = inf_q[v]
            if m.any():
                query = v * span + (mc[:, k1] * sizes[k2] + mc[:, k2])
                pos = np.minimum(np.searchsorted(qcodes, query), qcodes.size - 1)
                ok &= (qcodes[pos] == query) | ~m
        acc += np.bincount(member, weights=wv[rep] * ok, minlength=acc.size)
        s = stop
