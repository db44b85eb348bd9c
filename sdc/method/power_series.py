"""Row-wise truncated power series of probability laws (the exact group risks'
building blocks: :func:`sdc.method.transition_risk.group_risk`,
:func:`sdc.method.group_risks.group_risks`). Every operation is row by row: a row's result
depends only on that row's operands, whatever rows are computed beside it."""

from __future__ import annotations

import numpy as np
from scipy.special import comb

__all__ = ["binomial_rows", "over_bernoulli", "times_bernoulli"]


def times_bernoulli(f: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Rows of ``f`` (power series, truncated) times (1 - p + p x), p one per row."""
    out = f * (1.0 - p)[:, None]
    out[:, 1:] += f[:, :-1] * p[:, None]
    return out


def over_bernoulli(f: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Rows of ``f`` divided by (1 - p + p x) (power-series division, truncated; p <= 1/2, so
    the error of every step shrinks by p / (1 - p) <= 1)."""
    out = np.empty_like(f)
    q = 1.0 - p
    out[:, 0] = f[:, 0] / q
    for s in range(1, f.shape[1]):
        out[:, s] = (f[:, s] - p * out[:, s - 1]) / q
    np.maximum(out, 0.0, out=out)
    return out


def binomial_rows(n: np.ndarray, p: np.ndarray, length: int) -> np.ndarray:
    """Rows Bin(n_i, p_i) probabilities of 0..length-1 (n small: at most 2 at xi > 1/3)."""
    s = np.arange(length)
    n = np.asarray(n)[:, None]
    p = np.asarray(p, dtype=np.float64)[:, None]
    with np.errstate(invalid="ignore"):
        out = comb(n, s[None, :]) * p ** s[None, :] * (1.0 - p) ** np.maximum(n - s[None, :], 0)
    out[s[None, :] > n] = 0.0
    return np.nan_to_num(out)
