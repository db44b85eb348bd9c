"""The NZY unbiased PRAM inside one post-randomization block (docs/METHOD.md section 5, eq. 5.3).

For a record in cell c_j of a PRB with k cells and original frequencies t:

    P(Z = c_j | X = c_j) = 1 - theta / t_j
    P(Z = c_i | X = c_j) = theta / ((k - 1) t_j)      for each of the other k - 1 cells.

So sum_j p_ij t_j = t_i: the expected released count of every cell equals its original count
(unbiased), cells outside the PRB (and empty cells) are never reached, and a singleton record
moves with probability theta, a doubleton record with theta / 2.
"""

from __future__ import annotations

import numpy as np

__all__ = ["nzy_matrix", "post_randomize", "post_randomize_prepared", "post_randomize_records",
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
    numbers (``u * (k - 1)`` is the same product whether k - 1 is an int or its float)."""
    threshold, k_minus_1, r_max = prepared
    move = u[:, 0] < threshold
    r = (u[:, 1] * k_minus_1).astype(np.int64)
    np.minimum(r, r_max, out=r)
    r += r >= local_cell
    return np.where(move, r, local_cell)
