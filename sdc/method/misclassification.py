"""Per-key misclassification of a release: for one key x, the expected number of records whose
original value is v and released value is w, E[N_x(v -> w) | t], from the cell table and the
transition design actually used (:class:`sdc.method.transition.CellDesign`); exact, no
simulation. Divided by the original count of v it is P(released w | original v), the
misclassification matrix a data user needs for a correction (matrix method, MC-SIMEX).

A record of cell j keeps its cell with probability 1 - m_j; otherwise it goes to cell l with
w_jl (a near row) or uniformly to another cell of its group (1 / (k_g - 1)); a group of one
cell keeps its records. So, with x_j the value of x in cell j,

    E[N_x(v -> w)] = sum_{j: x_j = v} t_j [ (1 - m_j) 1(w = v)
                                            + m_j sum_{l != j} w_jl 1(x_l = w) ].

Row sums are the original counts t_x(v); column sums the expected released counts (equal to
the original ones under NZY's counts-unbiased designs).
"""

from __future__ import annotations

import numpy as np

from sdc.method.transition import CellDesign

__all__ = ["key_misclassification"]


def key_misclassification(t: np.ndarray, codes: np.ndarray, size: int,
                          design: CellDesign) -> np.ndarray:
    """``(size, size)`` expected counts E[N_x(v -> w) | t] of one key (module docstring).

    Parameters
    ----------
    t : (C,) cell frequencies t_j.
    codes : (C,) the key's code in every cell (0..size-1).
    size : number of codes of the key.
    design : the release's transition design over the cell table.

    Examples
    --------
    Three singleton cells of one PRB, codes 0, 0, 1, NZY uniform with m = 0.5: a record of
    code 0 stays (0.5), goes to the other code-0 cell (0.25) or to code 1 (0.25).

    >>> d = CellDesign(np.array([.5, .5, .5]), np.zeros(3, np.int64), np.zeros(4, np.int64),
    ...                np.zeros(0, np.int64), np.zeros(0))
    >>> key_misclassification(np.ones(3), np.array([0, 0, 1]), 2, d).tolist()
    [[1.5, 0.5], [0.5, 0.5]]
    """
    t = np.asarray(t, dtype=np.float64)
    x = np.asarray(codes, dtype=np.int64)
    g = np.asarray(design.group, dtype=np.int64)
    sens = g >= 0
    m = np.where(sens, np.asarray(design.move, dtype=np.float64), 0.0)
    out = np.zeros((size, size))
    row_len = np.diff(design.indptr)
    n_g = int(g[sens].max()) + 1 if sens.any() else 0
    k = np.bincount(g[sens], minlength=n_g)
    kk = np.where(sens, k[np.maximum(g, 0)] if n_g else 0, 0)
    # a group of one cell keeps its records (as expected_totals): no move
    m = np.where(sens & (kk > 1) | (row_len > 0), m, 0.0)
    flow = t * m
    np.add.at(out, (x, x), t - flow)
    if design.dest.size:  # near rows: t_j m_j w_jl to x_l
        rows = np.repeat(np.arange(t.size), row_len)
        np.add.at(out, (x[rows], x[design.dest]), flow[rows] * design.weight)
    uni = np.flatnonzero(sens & (row_len == 0) & (kk > 1))
    if uni.size:
        # cells of every (group, code): a uniform mover reaches each other cell of its group
        gc = np.zeros((n_g, size))
        np.add.at(gc, (g[sens], x[sens]), 1.0)
        share = gc[g[uni]]                       # (U, size): cells of each code in the group
        share[np.arange(uni.size), x[uni]] -= 1  # not its own cell
        share *= (flow[uni] / (kk[uni] - 1))[:, None]
        np.add.at(out, x[uni], share)
    return out
