"""The DP-PRAM design found by :func:`~sdc.mechanisms.dp_pram.dp_pram`, applied to a column
and inverted: :func:`apply_dp_pram` post-randomizes category codes with matrix form (8),
:func:`estimate_proportions` estimates ``p`` by ``(M')^{-1} m_hat`` projected onto the simplex.
The guarantee and its scope: docs/MECHANISMS.md s. 5.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .polytope import pram_matrix, released_marginal

__all__ = [
    "DPPramResult",
    "apply_dp_pram",
    "estimate_proportions",
    "project_to_simplex",
]


@dataclass(frozen=True)
class DPPramResult:
    """Solution of the DP-PRAM program (7) for proportions ``p`` and budget ``eps``.

    Attributes
    ----------
    p : proportions the design was optimised for.
    eps : the DP budget (``alpha`` in the paper).
    q : keep-probabilities of matrix form (8).
    mutual_information : ``I(X, Z)`` in nats at ``q``.
    family : which vertex family of Proposition 3.2 won (``"1 all v_alpha"``, ...), or
        ``"general vertex"`` when the general enumeration was used.
    counts : number of ``q_k`` at ``v_alpha, v_minus_alpha, v_min, v_max`` (and ``other``).
    exact : ``True`` if every vertex was evaluated (the optimum is certified).
    method : ``"proposition-3.2"``, ``"general"`` or ``"local-search"``.
    n_candidates : number of candidate vertices evaluated.
    """

    p: NDArray[np.float64]
    eps: float
    q: NDArray[np.float64]
    mutual_information: float
    family: str
    counts: dict[str, int] = field(default_factory=dict)
    exact: bool = True
    method: str = "proposition-3.2"
    n_candidates: int = 0

    @property
    def S(self) -> int:
        """Number of categories."""
        return int(self.q.size)

    @property
    def matrix(self) -> NDArray[np.float64]:
        """Matrix form (8), **rows = true category**: ``M[x, z] = P(Z = z | X = x)``."""
        return pram_matrix(self.q)

    @property
    def transition_matrix(self) -> NDArray[np.float64]:
        """``M.T``, the library convention (columns = true category) used by ``parity``."""
        return self.matrix.T

    @property
    def released_marginal(self) -> NDArray[np.float64]:
        """Expected distribution ``m`` of the released values (eq. 9)."""
        return released_marginal(self.p, self.q)

    def apply(self, values: ArrayLike, rng: np.random.Generator) -> NDArray[np.int64]:
        """Shortcut for :func:`apply_dp_pram`."""
        return apply_dp_pram(values, self, rng)

    def estimate(self, released_codes: ArrayLike, *, project: bool = True) -> NDArray[np.float64]:
        """Shortcut for :func:`estimate_proportions`."""
        return estimate_proportions(released_codes, self, project=project)


def apply_dp_pram(
    values: ArrayLike, design: DPPramResult, rng: np.random.Generator
) -> NDArray[np.int64]:
    """Post-randomize a whole column of category codes with matrix form (8), vectorized.

    Each record keeps its code ``x`` with probability ``q[x]``; otherwise it gets one of the
    other ``S - 1`` codes uniformly at random, drawn as ``(x + U) mod S`` with
    ``U ~ Uniform{1, ..., S-1}``. Records are randomized independently; no Python loop.

    **What the DP guarantee is, and what it covers.** ``M`` satisfies
    ``max_z M[x, z] / M[x', z] <= e^eps`` for all ``x != x'`` (eq. 10). Hence the released
    column ``Z_1..Z_n`` is eps-differentially private in the sense of eq. 6: for two input
    columns that differ in the value of *this variable* for *one record*, the probability of
    any released column changes by a factor of at most ``e^eps`` (equivalently, each record's
    value is eps-locally private). Scope and caveats:

    * it applies only to the variable passed in ``values``; other columns of the file are
      not protected, and inference about this variable from correlated unperturbed columns
      is not prevented (DP bounds only what the randomization itself reveals);
    * it is conditional on ``q``: ``q`` is optimised for proportions ``p``, so if ``p`` is
      computed from the same confidential file, ``q`` (published or implied) is itself a
      function of the data and is outside the guarantee. Use public/previous-release
      proportions, or a separately privatized estimate of ``p`` (its budget adds to eps);
    * randomizing several variables this way composes: the budgets add;
    * it does not protect record presence/absence (neighbours differ by a value, not a row).

    Parameters
    ----------
    values : integer array of codes ``0..S-1``.
    design : :class:`DPPramResult` from :func:`dp_pram`.
    rng : ``numpy.random.Generator``.
    """
    if not isinstance(design, DPPramResult):
        raise ValueError(f"The 'design' parameter must be a DPPramResult. Got {type(design).__name__} instead.")
    S = design.S
    x = np.asarray(values)
    if x.ndim != 1:
        raise ValueError(f"The 'values' parameter must be a 1-D array of codes. Got shape {x.shape} instead.")
    if x.size and (not np.issubdtype(x.dtype, np.integer) or x.min() < 0 or x.max() >= S):
        raise ValueError(f"The 'values' parameter must contain integer codes in the range [0, {S - 1}].")
    x = x.astype(np.int64)
    keep = rng.random(x.size) < design.q[x]
    shift = rng.integers(1, S, size=x.size)
    return np.where(keep, x, (x + shift) % S)


def project_to_simplex(v: ArrayLike) -> NDArray[np.float64]:
    """Euclidean projection onto the probability simplex (sort-based, O(S log S)).

    ``argmin_{w >= 0, sum w = 1} ||w - v||_2`` = ``max(v - tau, 0)`` with the threshold
    ``tau`` found from the sorted entries (Held, Wolfe & Crowder 1974; Duchi et al. 2008).
    """
    x = np.asarray(v, dtype=float)
    if x.ndim != 1 or x.size < 1 or not np.all(np.isfinite(x)):
        raise ValueError("The 'v' parameter must be a finite 1-D array.")
    u = np.sort(x)[::-1]
    css = np.cumsum(u) - 1
    idx = np.arange(1, x.size + 1)
    rho = np.flatnonzero(u - css / idx > 0)[-1]
    tau = css[rho] / (rho + 1)
    return np.maximum(x - tau, 0.0)


def estimate_proportions(
    released_codes: ArrayLike, design: DPPramResult, *, project: bool = True
) -> NDArray[np.float64]:
    """Estimate the true proportions ``p`` from released codes (inverse of ``M``).

    With ``m_hat`` the observed proportions of the released codes, ``E[m_hat] = M' p``
    (eq. 9), so ``p_tilde = (M')^{-1} m_hat`` is unbiased; it can leave the simplex, so by
    default it is projected onto the simplex (:func:`project_to_simplex`), which reduces
    the error but introduces a small bias near the boundary. ``project=False`` returns the
    unbiased ``p_tilde``. Raises ``ValueError`` if ``M`` is singular (q at ``1/S``).
    """
    if not isinstance(design, DPPramResult):
        raise ValueError(f"The 'design' parameter must be a DPPramResult. Got {type(design).__name__} instead.")
    S = design.S
    z = np.asarray(released_codes)
    if z.ndim != 1 or z.size < 1:
        raise ValueError("The 'released_codes' parameter must be a non-empty 1-D array of codes.")
    if not np.issubdtype(z.dtype, np.integer) or z.min() < 0 or z.max() >= S:
        raise ValueError(f"The 'released_codes' parameter must contain integer codes in the range [0, {S - 1}].")
    m_hat = np.bincount(z.astype(np.int64), minlength=S) / z.size
    M = design.matrix
    try:
        est = np.linalg.solve(M.T, m_hat)
    except np.linalg.LinAlgError as exc:  # pragma: no cover - only at q_x = 1/S
        raise ValueError("The DP-PRAM matrix is singular; proportions are not identifiable.") from exc
    return project_to_simplex(est) if project else est
