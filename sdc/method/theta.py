"""The NZY design parameter theta and the risk function h (docs/METHOD.md section 4).

    h(theta) = (1 - theta) / (1 - theta + theta^2)       if theta <= 2/3
    h(theta) = (2 - theta) / (4 - 2 theta + theta^2)     if theta >  2/3

h is continuous (both pieces are 3/7 at 2/3) and strictly decreasing from h(0) = 1 to
h(1) = 1/3, so h(theta) = xi has a unique root in (0, 1) for every xi in (1/3, 1). Each piece
is a quadratic in theta, solved here in closed form:

    piece 1:  xi theta^2 + (1 - xi) theta + (xi - 1)    = 0     (theta <= 2/3, xi >= 3/7)
    piece 2:  xi theta^2 + (1 - 2 xi) theta + (4 xi - 2) = 0    (theta >  2/3, xi <  3/7)

NZY's guarantee R_j(a, t) <= xi needs k >= 1/(1 - theta) cells in every PRB: kmin.
"""

from __future__ import annotations

import math

import numpy as np

from sdc.config.model import check_xi

__all__ = ["check_xi", "h", "kmin", "solve_theta"]

# check_xi lives with the config model (the config validates xi without importing the engine)



def h(theta: float | np.ndarray) -> float | np.ndarray:
    """NZY's bound h(theta) on the correct-match probability (see module docstring).

    Defined for 0 <= theta <= 1; vectorized over arrays.
    """
    t = np.asarray(theta, dtype=float)
    if np.any((t < 0) | (t > 1)) or np.any(np.isnan(t)):
        raise ValueError(f"theta must lie in [0, 1], got {theta!r}")
    out = np.where(t <= 2.0 / 3.0, (1 - t) / (1 - t + t * t), (2 - t) / (4 - 2 * t + t * t))
    return float(out) if np.ndim(out) == 0 else out


def solve_theta(xi: float) -> float:
    """The unique theta in (0, 1) with h(theta) = xi, in closed form.

    Parameters
    ----------
    xi : float
        Risk target, 1/3 < xi < 1. The paper's example xi = 0.395 gives theta = 0.7990.

    Raises
    ------
    ValueError
        If xi is not a number in (1/3, 1).
    """
    x = check_xi(xi)
    if x >= 3.0 / 7.0:
        b, c = 1.0 - x, x - 1.0
    else:
        b, c = 1.0 - 2.0 * x, 4.0 * x - 2.0
    # positive root of x t^2 + b t + c = 0 (c < 0 on both pieces so exactly one root is > 0);
    # written as 2c / (-b - sqrt(disc)) to avoid cancellation.
    disc = b * b - 4.0 * x * c
    theta = (2.0 * c) / (-b - math.sqrt(disc))
    lo, hi = (0.0, 2.0 / 3.0) if x >= 3.0 / 7.0 else (2.0 / 3.0, 1.0)
    if not (lo - 1e-12 <= theta <= hi + 1e-12):  # pragma: no cover - algebraic guarantee
        raise ArithmeticError(f"root {theta} of h(theta) = {x} is off its piece [{lo}, {hi}]")
    return float(min(max(theta, 0.0), 1.0))


def kmin(theta: float) -> int:
    """Smallest PRB size NZY's theorem covers: ceil(1 / (1 - theta)).

    A relative slack of 1e-9 keeps 1/(1-0.8) = 5.000000000000001 at 5.
    """
    if not (0.0 <= theta < 1.0):
        raise ValueError(f"theta must lie in [0, 1) for kmin, got {theta!r}")
    v = 1.0 / (1.0 - theta)
    return max(1, math.ceil(v * (1.0 - 1e-12) - 1e-9))
