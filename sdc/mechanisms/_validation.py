"""Parameter validation in the scikit-learn style.

Every public function of :mod:`sdc.mechanisms` validates its parameters with the helpers
below. A bad parameter raises :class:`ValueError` whose message names the parameter, the
value received and the allowed range, e.g.::

    The 'gamma' parameter must be a float in the range (1, inf). Got 0.5 instead.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "check_real",
    "check_int",
    "check_probability_vector",
    "check_transition_matrix",
    "check_gamma",
    "check_k",
    "check_codes",
    "check_bits",
]


def _fmt_range(low: float | None, high: float | None, closed: str) -> str:
    left = "[" if closed in ("both", "left") and low is not None else "("
    right = "]" if closed in ("both", "right") and high is not None else ")"
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    return f"{left}{lo}, {hi}{right}"


def check_real(
    value: object,
    name: str,
    low: float | None = None,
    high: float | None = None,
    closed: str = "both",
) -> float:
    """Return ``value`` as a float after checking it lies in the interval.

    ``closed`` is one of ``"both"``, ``"left"``, ``"right"``, ``"neither"`` and says which
    ends of ``[low, high]`` are included (``None`` means unbounded on that side).
    """
    rng = _fmt_range(low, high, closed)
    if isinstance(value, bool) or not isinstance(value, Real | np.floating | np.integer):
        raise ValueError(
            f"The '{name}' parameter must be a float in the range {rng}. Got {value!r} instead."
        )
    v = float(value)
    ok = not math.isnan(v)
    if ok and low is not None:
        ok = v >= low if closed in ("both", "left") else v > low
    if ok and high is not None:
        ok = v <= high if closed in ("both", "right") else v < high
    if not ok:
        raise ValueError(
            f"The '{name}' parameter must be a float in the range {rng}. Got {value!r} instead."
        )
    return v


def check_int(
    value: object, name: str, low: int | None = None, high: int | None = None
) -> int:
    """Return ``value`` as an int after checking ``low <= value <= high``."""
    rng = _fmt_range(low, high, "both")
    if isinstance(value, bool) or not isinstance(value, Integral | np.integer):
        raise ValueError(
            f"The '{name}' parameter must be an int in the range {rng}. Got {value!r} instead."
        )
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(
            f"The '{name}' parameter must be an int in the range {rng}. Got {value!r} instead."
        )
    return v


def check_probability_vector(
    p: ArrayLike, name: str, *, min_size: int = 1, atol: float = 1e-9
) -> NDArray[np.float64]:
    """Return ``p`` as a 1-D float array of non-negative entries summing to 1."""
    arr = np.asarray(p, dtype=float)
    if arr.ndim != 1 or arr.size < min_size:
        raise ValueError(
            f"The '{name}' parameter must be a 1-D probability vector with at least "
            f"{min_size} entries. Got shape {arr.shape} instead."
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(
            f"The '{name}' parameter must have finite entries in the range [0, 1]. "
            f"Got {arr.tolist()!r} instead."
        )
    total = float(arr.sum())
    if abs(total - 1.0) > atol:
        raise ValueError(
            f"The '{name}' parameter must sum to 1 (tolerance {atol:g}). Got sum {total!r} instead."
        )
    return arr


def check_transition_matrix(
    P: ArrayLike, name: str = "P", *, atol: float = 1e-9
) -> NDArray[np.float64]:
    """Return ``P`` as a 2-D float array whose **columns** are probability distributions.

    The convention of the seeds (Chai 2019, Nayak 2020): column ``j`` is the distribution of
    the output given true category ``c_j``; row ``i`` belongs to output ``d_i``.
    """
    arr = np.asarray(P, dtype=float)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(
            f"The '{name}' parameter must be a 2-D transition matrix. Got shape {arr.shape} instead."
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1 + atol):
        raise ValueError(
            f"The '{name}' parameter must have entries in the range [0, 1]. Got min "
            f"{float(np.nanmin(arr))!r}, max {float(np.nanmax(arr))!r} instead."
        )
    sums = arr.sum(axis=0)
    if np.any(np.abs(sums - 1.0) > atol):
        raise ValueError(
            f"The '{name}' parameter must have columns summing to 1 (columns = true "
            f"categories). Got column sums {np.round(sums, 12).tolist()!r} instead."
        )
    return arr


def check_gamma(gamma: float) -> float:
    """The privacy level ``gamma = e^eps`` as a float, ``gamma > 1``."""
    return check_real(gamma, "gamma", 1.0, None, "neither")


def check_k(k: int) -> int:
    """The number of categories ``k >= 2``."""
    return check_int(k, "k", 2, None)


def check_codes(x: ArrayLike, k: int, name: str = "x") -> NDArray[np.int64]:
    """A 1-D array of category codes in ``0..k-1`` (integral floats accepted) as int64."""
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ValueError(f"The '{name}' parameter must be a 1-D array of category codes. Got shape {arr.shape} instead.")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ValueError(f"The '{name}' parameter must contain integer category codes in the range [0, {k - 1}].")
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < 0 or arr.max() >= k):
        raise ValueError(
            f"The '{name}' parameter must contain category codes in the range [0, {k - 1}]. "
            f"Got values in [{int(arr.min())}, {int(arr.max())}] instead."
        )
    return arr



def check_bits(Z: ArrayLike, name: str = "Z") -> NDArray[np.int8]:
    """An ``(n, k)`` 0/1 response matrix with ``n >= 1`` as int8."""
    arr = np.asarray(Z)
    if arr.ndim != 2 or arr.shape[0] < 1:
        raise ValueError(f"The '{name}' parameter must be a 2-D (n, k) 0/1 array with n >= 1. Got shape {arr.shape} instead.")
    if not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"The '{name}' parameter must contain only 0 and 1.")
    return arr.astype(np.int8)

