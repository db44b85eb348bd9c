"""The per-record step of NZY PRAM, the one every executor runs on every batch (docs/METHOD.md
sections 5 and 7.3): given :func:`sdc.method.plan.draw_plan` (the plain arrays of a plan every
batch needs to draw: PRB, t_j, theta, move probabilities, destination designs),
:func:`released_cells` is a pure
per-record map (move iff u1 < theta/t_j, destination by trie rendezvous over the other
k - 1 cells of the PRB, or by the near design's row of W), with record-keyed draws
(:mod:`sdc.method.draws`), so every engine gets the same bytes.
"""

from __future__ import annotations

import numpy as np

from sdc.method.draws import DrawPlan, keyed_uniform, trie_rendezvous, weighted_race
from sdc.method.plan import draw_plan

# draw_plan is sdc.method.plan's (the plan's arrays), re-exported with the step it feeds
__all__ = ["draw_plan", "released_cells"]


def released_cells(plan: DrawPlan, record_cell: np.ndarray, identity: np.ndarray,
                   seed: int) -> np.ndarray:
    """Released cell of every record of a batch: NZY PRAM with record-keyed draws.

    Parameters
    ----------
    plan : DrawPlan
        The global plan (all cells of the file).
    record_cell : (m,) int
        Each record's true cell (index into the plan's cell arrays).
    identity : (m,) uint64
        Each record's identity, after :func:`unique_identities` over all drawing records.
    seed : int
        Release seed.

    Returns
    -------
    (m,) int64 released cell. A pure per-record function: record i's value depends only on
    (seed, plan, record_cell[i], identity[i]). P(move) = theta_b / t_j; a moving record goes to
    one of the other k - 1 cells of its PRB uniformly (hierarchical rendezvous,
    :func:`sdc.method.draws.trie_rendezvous`: an exponential race with rates n_c / N at each
    node of the PRB's 16-ary hash trie, whose product telescopes to 1 / (k - 1)): eq. 5.3.
    """
    record_cell = np.asarray(record_cell, dtype=np.int64)
    identity = np.asarray(identity, dtype=np.uint64)
    out = record_cell.copy()
    prb = plan.cell_prb[record_cell]
    rows = np.flatnonzero(prb >= 0)
    if rows.size == 0:
        return out
    c = record_cell[rows]
    u1 = keyed_uniform(seed, "move", identity[rows])
    move = u1 < plan.move_probability(c)
    movers = rows[move]
    if movers.size == 0:
        return out
    if plan.dest_indptr is not None:
        # near: the exponential race over the cell's row of W (P(l) = w_jl); rows left empty
        # (PRBs with the uniform W) fall through to the trie below
        mc = record_cell[movers]
        near = plan.dest_indptr[mc + 1] > plan.dest_indptr[mc]
        if near.any():
            got = weighted_race(seed, "dest:near", identity[movers[near]], plan.dest_indptr,
                                mc[near], plan.dest_cell, plan.dest_weight, plan.cell_id)
            out[movers[near]] = got
            movers = movers[~near]
            if movers.size == 0:
                return out
    cells, sorted_hash, bounds, position = plan.dest_trie(seed)
    group = plan.cell_dest_group[record_cell[movers]]
    pick = trie_rendezvous(seed, "dest", identity[movers], position[record_cell[movers]],
                           group, sorted_hash, bounds)
    ok = pick >= 0                    # a PRB of one cell has nowhere to move: the record stays
    out[movers[ok]] = cells[pick[ok]]
    return out
