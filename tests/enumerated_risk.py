"""The brute-force risk of one PRB's transition (tests only, PRBs of a few records): every
joint outcome of its records enumerated. Shared by the design contract, the weighted-near and
the per-PRB-weights tests, which compare :func:`sdc.method.transition_risk.certify` with it."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator

import numpy as np


def outcomes(tr) -> Iterator[tuple[float, np.ndarray]]:
    """(probability, released cell of every record) of every joint outcome under ``tr``'s
    matrix, records independent (the records of cell j: ``tr.frequency[j]`` of them)."""
    P = tr.matrix()
    cell = np.repeat(np.arange(tr.k), tr.frequency)
    for out in itertools.product(range(tr.k), repeat=cell.size):
        p = math.prod(P[cell[i], out[i]] for i in range(cell.size))
        if p:
            yield p, np.array(out)


def enumerated_parts(tr, outs: Iterable[tuple[float, np.ndarray]] | None = None,
                     ) -> tuple[float, np.ndarray, np.ndarray]:
    """(the mechanism-aware intruder's max risk, each record's neighbourhood-intruder risk,
    each record's cell) over ``outs`` (default :func:`outcomes`): the first picks among the
    records released in a cell z with count c, P(record b released in z | count c) / c; the
    second picks uniformly among the records released in the neighbourhood of b's cell (the
    cell and every cell its row of W reaches)."""
    k = tr.k
    cell = np.repeat(np.arange(k), tr.frequency)
    D = tr.dense()
    hood = [({j} | set(np.flatnonzero(D[j] > 0).tolist())) for j in range(k)]
    hit: dict = {}
    tot: dict = {}
    nb = np.zeros(cell.size)
    for p, out in (outcomes(tr) if outs is None else outs):
        counts = np.bincount(out, minlength=k)
        for b in range(cell.size):
            for z in range(k):
                key = (b, z, int(counts[z]))
                tot[key] = tot.get(key, 0.0) + p
                if out[b] == z:
                    hit[key] = hit.get(key, 0.0) + p
            if out[b] in hood[cell[b]]:
                nb[b] += p / sum(counts[z] for z in hood[cell[b]])
    mech = max(hit.get(key, 0.0) / p / key[2] for key, p in tot.items() if key[2] > 0)
    return mech, nb, cell


def enumerated_risk(tr, rows: np.ndarray | None = None,
                    outs: Iterable[tuple[float, np.ndarray]] | None = None) -> float:
    """max(mechanism-aware risk, the neighbourhood intruder's over the records of the cells
    ``rows`` marks (default every cell))."""
    mech, nb, cell = enumerated_parts(tr, outs)
    keep = np.ones(tr.k, dtype=bool) if rows is None else np.asarray(rows, dtype=bool)
    return max(mech, float(nb[keep[cell]].max(initial=0.0)))
