"""The post-randomization kernel of a replay (docs/METHOD.md section 5, eq. 5.3; 7.11-7.12).

NZY's design inside one post-randomization block (eq. 5.3), and (:func:`post_randomize_design`)
any transition design (m, W) of :mod:`sdc.method.designs`: what the report's Monte Carlo
intruder replays (:mod:`sdc.reports.intruder`). The release itself draws with record-keyed
draws (:mod:`sdc.method.postrandomize`), the same law.

For a record in cell c_j of a PRB with k cells and original frequencies t:

    P(Z = c_j | X = c_j) = 1 - theta / t_j
    P(Z = c_i | X = c_j) = theta / ((k - 1) t_j)      for each of the other k - 1 cells.

So sum_j p_ij t_j = t_i: the expected released count of every cell equals its original count
(unbiased), cells outside the PRB (and empty cells) are never reached, and a singleton record
moves with probability theta, a doubleton record with theta / 2.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["DesignKernel", "nzy_matrix", "post_randomize", "post_randomize_design",
           "post_randomize_prepared", "post_randomize_records", "prepare_design",
           "prepare_records"]


def nzy_matrix(t: np.ndarray, theta: float) -> np.ndarray:
    """The k x k transition matrix P of equation (5.3); column j is the law of Z given X = c_j.

    Meant for tests and small PRBs (it is dense); the release never builds it.
    """
    t = np.asarray(t, dtype=float)
    k = t.size
    if k < 2:
        return np.ones((1, 1))
    off = theta / ((k - 1) * t)
    p = np.tile(off, (k, 1))
    np.fill_diagonal(p, 1.0 - theta / t)
    return p


def post_randomize(local_cell: np.ndarray, t: np.ndarray, k: int, theta: float,
                   rng: np.random.Generator) -> np.ndarray:
    """Post-randomize the records of one PRB, all at once.

    Parameters
    ----------
    local_cell : (m,) int
        Cell of each record within the PRB (0..k-1), records in a canonical order.
    t : (m,) int
        Original frequency t_j of each record's cell.
    k : int
        Number of cells in the PRB.
    theta : float
        Design parameter, 0 <= theta <= min(t).
    rng : numpy Generator
        The PRB's own stream. Record i uses the i-th pair of uniforms: the first decides
        whether it moves (u < theta / t_j), the second which of the other k - 1 cells it moves
        to (uniformly), so its outcome depends only on its position in the canonical order.

    Returns
    -------
    (m,) int: the released cell of each record within the PRB.
    """
    m = local_cell.size
    u = rng.random((m, 2))
    if k < 2 or theta <= 0:
        return local_cell.copy()
    return post_randomize_records(local_cell, t, k, theta, u)


def post_randomize_records(local_cell: np.ndarray, t: np.ndarray, k: np.ndarray | int,
                           theta: np.ndarray | float, u: np.ndarray) -> np.ndarray:
    """The kernel of :func:`post_randomize` for records of any number of PRBs at once.

    Record i moves iff ``u[i, 0] < theta_i / t_i`` (never when k_i < 2 or theta_i <= 0) and
    then goes to the other cell ``r + (r >= local_cell[i])``, r = floor(u[i, 1] (k_i - 1))
    (capped at k_i - 2): uniform over the other k_i - 1 cells of its PRB.

    Parameters
    ----------
    local_cell, t : (m,) int
        Cell within its PRB and the cell's original frequency t_j, per record.
    k, theta : (m,) arrays or scalars
        Cells and theta of each record's PRB.
    u : (m, 2) float
        The record's uniform pair (for several PRBs drawn in one call in PRB order, the same
        numbers as one :func:`post_randomize` call per PRB on the same stream).

    Returns
    -------
    (m,) int: the released cell of each record within its PRB.
    """
    return post_randomize_prepared(local_cell, prepare_records(t, k, theta), u)


def prepare_records(t: np.ndarray, k: np.ndarray | int,
                    theta: np.ndarray | float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The per-record constants of :func:`post_randomize_records`, for callers that replay the
    same records many times (the report's Monte Carlo intruder).

    Returns
    -------
    threshold : (m,) float
        ``theta / t`` where the record can move, -1 where it cannot (k < 2 or theta <= 0), so
        that ``u < threshold`` is the move decision for any u in [0, 1).
    k_minus_1 : float array
        k - 1 (exact as a float).
    r_max : int array
        max(k - 2, 0), the cap of the destination draw.
    """
    k = np.asarray(k, dtype=np.int64)
    theta = np.asarray(theta, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        threshold = np.where((k >= 2) & (theta > 0), theta / t, -1.0)
    return threshold, (k - 1).astype(float), np.maximum(k - 2, 0)


def post_randomize_prepared(local_cell: np.ndarray,
                            prepared: tuple[np.ndarray, np.ndarray, np.ndarray],
                            u: np.ndarray) -> np.ndarray:
    """:func:`post_randomize_records` with its constants from :func:`prepare_records`: the same
    numbers (``u * (k - 1)`` is the same product whether k - 1 is an int or its float).
    ``u`` may be (..., m, 2): several replays of the same m records at once, elementwise."""
    threshold, k_minus_1, r_max = prepared
    move = u[..., 0] < threshold
    r = (u[..., 1] * k_minus_1).astype(np.int64)
    np.minimum(r, r_max, out=r)
    r += r >= local_cell
    return np.where(move, r, local_cell)


# -- any transition design (m, W): the one kernel of every design's replay ---------------------
class DesignKernel(NamedTuple):
    """The per-record constants of :func:`post_randomize_design` (from :func:`prepare_design`).

    threshold : (m,) float
        m_j of the record's cell where it can move, -1 where it cannot.
    row_lo, row_hi : (m,) int
        The record's CSR row of W (``row_lo == row_hi``: no row, uniform inside its group).
    base, span : (m,) float
        The cumulated weights before the row, and the row's total.
    group_at, k_minus_1, r_max, pos : (m,) arrays
        Uniform rows: the first member of the record's group in ``members``, k_g - 1 (float),
        max(k_g - 2, 0) and the cell's position inside its group.
    """

    threshold: np.ndarray
    row_lo: np.ndarray
    row_hi: np.ndarray
    base: np.ndarray
    span: np.ndarray
    group_at: np.ndarray
    k_minus_1: np.ndarray
    r_max: np.ndarray
    pos: np.ndarray
    cum: np.ndarray
    dest: np.ndarray
    members: np.ndarray


def prepare_design(cell: np.ndarray, move: np.ndarray, group: np.ndarray, indptr: np.ndarray,
                   dest: np.ndarray, weight: np.ndarray) -> DesignKernel:
    """The constants of :func:`post_randomize_design` for records of cells ``cell`` under the
    design laid out over the cells (:class:`sdc.method.transition.CellDesign`'s arrays: m_j,
    the group of every cell (-1: never moves), W's CSR rows; an empty row moves uniformly to
    another cell of the group)."""
    cell = np.asarray(cell, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    n = group.size
    inside = np.flatnonzero(group >= 0)
    members = inside[np.argsort(group[inside], kind="stable")]
    n_g = int(group[inside].max()) + 1 if inside.size else 0
    k_g = np.bincount(group[inside], minlength=n_g)
    start = np.zeros(n_g + 1, dtype=np.int64)
    np.cumsum(k_g, out=start[1:])
    pos_of = np.zeros(n, dtype=np.int64)
    pos_of[members] = np.arange(members.size) - start[group[members]]
    g = group[cell]
    k = np.where(g >= 0, k_g[np.maximum(g, 0)] if n_g else 0, 0)
    m = np.asarray(move, dtype=np.float64)[cell]
    threshold = np.where((g >= 0) & (k >= 2) & (m > 0), m, -1.0)
    cum = np.cumsum(np.asarray(weight, dtype=np.float64))
    lo, hi = np.asarray(indptr)[cell], np.asarray(indptr)[cell + 1]
    base = np.where(lo > 0, cum[np.maximum(lo - 1, 0)] if cum.size else 0.0, 0.0)
    span = np.where(hi > lo, cum[np.maximum(hi - 1, 0)] - base if cum.size else 0.0, 0.0)
    return DesignKernel(threshold, lo, hi, base, span,
                        start[np.maximum(g, 0)] if n_g else np.zeros(cell.size, np.int64),
                        (k - 1).astype(float), np.maximum(k - 2, 0), pos_of[cell], cum,
                        np.asarray(dest, dtype=np.int64), members)


def post_randomize_design(cell: np.ndarray, kernel: DesignKernel, u: np.ndarray) -> np.ndarray:
    """Released cell of every record of ``cell`` under any design (m, W): record i moves iff
    ``u[i, 0] < m_j``, then goes to the destination of its W row where the cumulated weights
    pass ``u[i, 1]`` of the row's total, or (no row) to the other cell ``r + (r >= pos)`` of
    its group, r = floor(u[i, 1] (k_g - 1)): the uniform draw of :func:`post_randomize_records`."""
    cell = np.asarray(cell, dtype=np.int64)
    out = cell.copy()
    move = u[:, 0] < kernel.threshold
    if kernel.dest.size:       # some W rows (else every mover draws uniformly in its group)
        rows = move & (kernel.row_hi > kernel.row_lo)
        ri = np.flatnonzero(rows)  # located once: gathers, not five boolean selections
        if ri.size:
            target = kernel.base[ri]
            target += u[ri, 1] * kernel.span[ri]
            at = np.searchsorted(kernel.cum, target, side="right")
            np.clip(at, kernel.row_lo[ri], kernel.row_hi[ri] - 1, out=at)
            out[ri] = kernel.dest[at]
        move &= ~rows
    i = np.flatnonzero(move)   # the uniform movers, located once
    if i.size:
        r = (u[i, 1] * kernel.k_minus_1[i]).astype(np.int64)
        np.minimum(r, kernel.r_max[i], out=r)
        r += r >= kernel.pos[i]
        out[i] = kernel.members[kernel.group_at[i] + r]
    return out
