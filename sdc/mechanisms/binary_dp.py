"""Optimal differentially private binary randomized response (Holohan, Leith & Mason 2017).

A design ``(p00, p11)`` is (eps, delta)-DP iff it lies in the region of Definition 2
(:func:`in_feasible_region`); the unbiased MLE and its variance are Theorem 1 and Corollary 1;
the optimal designs are Theorem 2 (eps-DP), Theorem 3 / Corollary 2 ((eps, delta)-DP, both
optima when ``g(eps, delta) = pi``) and Theorem 4 (Warner). :attr:`BinaryRRDesign.matrix` keeps
the paper's rows = true value (eq. 2); ``.transition_matrix`` is the library's orientation.
docs/MECHANISMS.md s. 6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import check_int, check_real

__all__ = [
    "BinaryRRDesign",
    "in_feasible_region",
    "rr_mle",
    "rr_mle_variance",
    "optimal_eps_design",
    "g_threshold",
    "t0_threshold",
    "boundary_point",
    "optimal_eps_delta_designs",
    "optimal_warner_design",
]

#: tolerance used to decide g(eps, delta) == pi (two optima)
TIE_ATOL = 1e-12


@dataclass(frozen=True)
class BinaryRRDesign:
    """A binary RR mechanism given by ``p00 = P(0 | 0)`` and ``p11 = P(1 | 1)``."""

    p00: float
    p11: float

    @property
    def matrix(self) -> NDArray[np.float64]:
        """Design matrix in the paper's orientation (eq. 2): rows = true value."""
        return np.array([[self.p00, 1 - self.p00], [1 - self.p11, self.p11]])

    @property
    def transition_matrix(self) -> NDArray[np.float64]:
        """Library orientation (columns = true value): the transpose of :attr:`matrix`."""
        return self.matrix.T

    def variance(self, pi: float, n: int = 1) -> float:
        """Variance of the unbiased MLE at true proportion ``pi`` (Corollary 1, eq. 6)."""
        return rr_mle_variance(pi, n, self.p00, self.p11)

    def estimate(self, responses: ArrayLike) -> float:
        """Unbiased MLE (Theorem 1) from 0/1 randomized responses."""
        r = np.asarray(responses)
        if r.ndim != 1 or r.size < 1 or not np.all((r == 0) | (r == 1)):
            raise ValueError("The 'responses' parameter must be a non-empty 1-D array of 0/1.")
        return rr_mle(int(r.sum()), int(r.size), self.p00, self.p11)

    def sample(self, x: ArrayLike, rng: np.random.Generator) -> NDArray[np.int8]:
        """Randomize true bits ``x`` (vectorized): keep a 0 w.p. ``p00``, a 1 w.p. ``p11``."""
        xs = np.asarray(x)
        if xs.ndim != 1 or not np.all((xs == 0) | (xs == 1)):
            raise ValueError("The 'x' parameter must be a 1-D array of 0/1.")
        keep_p = np.where(xs == 1, self.p11, self.p00)
        keep = rng.random(xs.size) < keep_p
        return np.where(keep, xs, 1 - xs).astype(np.int8)


def _eps(eps: float, allow_zero: bool = True) -> float:
    return check_real(eps, "eps", 0.0, None, "left" if allow_zero else "neither")


def _delta(delta: float) -> float:
    return check_real(delta, "delta", 0.0, 1.0, "both")


def in_feasible_region(
    p00: ArrayLike, p11: ArrayLike, eps: float, delta: float = 0.0, *, atol: float = 1e-12
) -> NDArray[np.bool_] | bool:
    """Whether ``(p00, p11)`` lies in the (eps, delta)-DP region ``R`` (Definition 2, eq. 12).

    Vectorized over ``p00`` and ``p11``; ``atol`` absorbs floating point error only.
    """
    e = math.exp(_eps(eps))
    dl = _delta(delta)
    a = np.asarray(p00, dtype=float)
    b = np.asarray(p11, dtype=float)
    ok = (
        (a >= -atol)
        & (a <= 1 + atol)
        & (b >= -atol)
        & (b <= 1 + atol)
        & (a <= e * (1 - b) + dl + atol)
        & (b <= e * (1 - a) + dl + atol)
        & (1 - b <= e * a + dl + atol)
        & (1 - a <= e * b + dl + atol)
    )
    return bool(ok) if ok.ndim == 0 else ok


def _p(p00: float, p11: float) -> tuple[float, float]:
    a = check_real(p00, "p00", 0.0, 1.0)
    b = check_real(p11, "p11", 0.0, 1.0)
    if a + b == 1:
        raise ValueError(f"The 'p00' and 'p11' parameters must satisfy p00 + p11 != 1. Got {a!r} + {b!r} = 1.")
    return a, b


def rr_mle(N: int, n: int, p00: float, p11: float) -> float:
    """Unbiased MLE of ``pi`` (Theorem 1, eq. 4): ``(p00-1)/(p00+p11-1) + N/((p00+p11-1) n)``.

    ``N`` is the number of randomized responses equal to 1 out of ``n``. Like the paper,
    this is the unconstrained root of the score equation (it can leave [0, 1]).
    """
    nn = check_int(n, "n", 1, None)
    NN = check_int(N, "N", 0, nn)
    a, b = _p(p00, p11)
    s = a + b - 1
    return (a - 1) / s + NN / (s * nn)


def rr_mle_variance(pi: float, n: int, p00: float, p11: float) -> float:
    """``Var(Pi_hat | pi) = (1/4 - (p00 - 1/2 - pi (p00+p11-1))^2) / ((p00+p11-1)^2 n)`` (eq. 6)."""
    p = check_real(pi, "pi", 0.0, 1.0)
    nn = check_int(n, "n", 1, None)
    a, b = _p(p00, p11)
    s = a + b - 1
    return (0.25 - (a - 0.5 - p * s) ** 2) / (s**2 * nn)


def optimal_eps_design(eps: float) -> BinaryRRDesign:
    """Optimal eps-DP design (Theorem 2): ``p00 = p11 = e^eps/(e^eps+1)``, for every ``pi``."""
    e = _eps(eps, allow_zero=False)
    v = 1.0 / (1.0 + math.exp(-e))
    return BinaryRRDesign(v, v)


def g_threshold(eps: float, delta: float) -> float:
    """``g(eps, delta) = delta (e^eps + delta) / (e^eps + 2 delta - 1)^2`` (eq. 23)."""
    e = math.exp(_eps(eps))
    dl = _delta(delta)
    den = (e + 2 * dl - 1) ** 2
    if den == 0:
        raise ValueError("g(eps, delta) is undefined for eps = 0 and delta = 0.")
    return dl * (e + dl) / den


def t0_threshold(eps: float, delta: float) -> float:
    """``t0(eps, delta) = delta (e^eps + 1)/(e^eps + delta)`` (Lemma 5)."""
    e = math.exp(_eps(eps))
    dl = _delta(delta)
    return dl * (e + 1) / (e + dl)


def boundary_point(t: float, eps: float, delta: float) -> tuple[float, float]:
    """``(r_delta(t), s_delta(t))`` of eq. 22: the boundary where (11a) is tight.

    ``r = (1 + e^-eps delta)(1 - t) + t (e^eps+delta)/(e^eps+1)``,
    ``s = t (e^eps+delta)/(e^eps+1)``; ``t = 1`` is the symmetric corner, ``t = t0`` gives
    ``(1, delta)``.
    """
    tt = check_real(t, "t", 0.0, 1.0)
    e = math.exp(_eps(eps))
    dl = _delta(delta)
    s = tt * (e + dl) / (e + 1)
    r = (1 + dl / e) * (1 - tt) + s
    return r, s


def optimal_eps_delta_designs(eps: float, delta: float, pi: float) -> tuple[BinaryRRDesign, ...]:
    """All (eps, delta)-DP designs minimising ``Var(Pi_hat | pi)`` (Theorem 3, Corollary 2).

    For ``delta = 0`` this is Theorem 2. For ``delta > 0`` and ``0 < pi <= 1/2``
    (Theorem 3), with ``g = g(eps, delta)``:

    * ``g > pi``: ``(p00, p11) = (r(t0), s(t0)) = (1, delta)``;
    * ``g < pi``: ``p00 = p11 = (e^eps + delta)/(e^eps + 1)``;
    * ``g = pi``: both (two optima; decided with absolute tolerance ``1e-12``).

    For ``1/2 <= pi < 1`` (Corollary 2) swap ``p00`` and ``p11`` and compare ``g`` with
    ``1 - pi``. At ``pi = 1/2`` both statements agree.
    """
    e_ = _eps(eps)
    dl = _delta(delta)
    p = check_real(pi, "pi", 0.0, 1.0, "neither")
    if dl == 0.0:
        if e_ == 0.0:
            raise ValueError("The 'eps' parameter must be positive when delta = 0 (0-DP allows no estimation).")
        return (optimal_eps_design(e_),)
    e = math.exp(e_)
    sym = (e + dl) / (e + 1)
    if dl == 1.0 or sym >= 1.0:  # the whole square is feasible: direct questioning is optimal
        return (BinaryRRDesign(1.0, 1.0),)
    g = g_threshold(e_, dl)
    ref = p if p <= 0.5 else 1 - p
    corner = BinaryRRDesign(1.0, dl) if p <= 0.5 else BinaryRRDesign(dl, 1.0)
    symmetric = BinaryRRDesign(sym, sym)
    if abs(g - ref) <= TIE_ATOL:
        return (symmetric, corner)
    return (corner,) if g > ref else (symmetric,)


def optimal_warner_design(eps: float, delta: float = 0.0) -> BinaryRRDesign:
    """Optimal Warner design under (eps, delta)-DP (Theorem 4): ``p_w = (e^eps+delta)/(e^eps+1)``.

    The feasible set is ``R_w = (1/2, (e^eps+delta)/(e^eps+1)]`` and the variance (eq. 8)
    decreases in ``p_w``; capped at 1.
    """
    e = math.exp(_eps(eps))
    dl = _delta(delta)
    pw = min(1.0, (e + dl) / (e + 1))
    if pw <= 0.5:
        raise ValueError("The 'eps' and 'delta' parameters must not both be 0 (R_w is empty).")
    return BinaryRRDesign(pw, pw)
