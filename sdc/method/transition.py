"""The transition design of a post-randomization block (PRB): who moves, and where to.

A PRB of k cells (local indices 0..k-1, frequencies t_j) is post-randomized by

    P(j -> j) = 1 - m_j,      P(j -> l) = m_j w_jl   (l != j),

with m_j the **move probability** of a record of cell j and W = (w_jl) the **destination
design**: row-stochastic with a zero diagonal. NZY (eq. 5.3) is m_j = theta/t_j and the uniform
W, w_jl = 1/(k - 1). Any W with zero diagonal and unit column sums (doubly stochastic) keeps
every cell count unbiased when m_j = theta/t_j: E[released t_l] = t_l - theta + theta sum_j w_jl
= t_l. A weighted mode (issue 33) supplies its own m_j through the same object.

:class:`Transition` is that pair per PRB: ``move`` (k,) and W as a sparse row (CSR) matrix, or
``None`` for the uniform W (never materialised: a PRB may hold 10^5 cells). The certificate
(:mod:`sdc.method.transition_risk`) and the record-keyed draws (:mod:`sdc.method.apply`) take
it. docs/METHOD.md section 7.12.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

__all__ = ["Transition", "nzy_move", "uniform_transition"]


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
        never j) with weights ``weights[...]`` summing to 1.
    theta : float or None
        The theta with ``move == theta / t`` (NZY), None when ``move`` was supplied otherwise.
    kind : str
        ``"uniform"`` or ``"near"`` (what built W; a near PRB too small for the spread floor
        is ``"uniform"``).
    """

    frequency: np.ndarray
    move: np.ndarray
    indptr: np.ndarray | None = None
    indices: np.ndarray | None = None
    weights: np.ndarray | None = None
    theta: float | None = None
    kind: str = "uniform"

    @property
    def k(self) -> int:
        return int(self.frequency.size)

    @property
    def uniform(self) -> bool:
        """W is the uniform design (not materialised)."""
        return self.indptr is None

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """W as CSR arrays (the uniform W materialised: k (k - 1) entries)."""
        if not self.uniform:
            return self.indptr, self.indices, self.weights  # type: ignore[return-value]
        k = self.k
        if k < 2:
            return np.zeros(k + 1, np.int64), np.zeros(0, np.int64), np.zeros(0)
        full = np.tile(np.arange(k, dtype=np.int64), (k, 1))
        idx = full[~np.eye(k, dtype=bool)].reshape(k, k - 1).ravel()
        return (np.arange(k + 1, dtype=np.int64) * (k - 1), idx,
                np.full(k * (k - 1), 1.0 / (k - 1)))

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
        t = self.frequency.astype(np.float64)
        out = t * (1.0 - self.move)
        if self.k < 2:
            return out
        flow = t * self.move
        if self.uniform:
            return out + (flow.sum() - flow) / (self.k - 1)
        indptr, indices, weights = self.csr()
        rows = np.repeat(np.arange(self.k), np.diff(indptr))
        return out + np.bincount(indices, weights=flow[rows] * weights, minlength=self.k)

    def with_move(self, move: np.ndarray, theta: float | None = None) -> Transition:
        """The same W with other move probabilities (a weighted mode, a calibrated theta)."""
        move = np.asarray(move, dtype=np.float64)
        if move.shape != self.frequency.shape or (move < 0).any() or (move > 1).any():
            raise ValueError("move must hold one probability in [0, 1] per cell")
        return Transition(self.frequency, move, self.indptr, self.indices, self.weights,
                          theta, self.kind)

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
