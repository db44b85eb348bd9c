"""Exact, order-independent weighted sums (:class:`ExactSums`: weights rounded once to fixed
point, added as two float64 limbs that ``np.bincount`` adds without rounding, one rounding at
the end) and record-level quantiles from cell counts (:func:`record_quantiles`). The bounds
that make it exact: docs/REPORTS.md, "Sums that do not depend on the row order".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CHUNK", "ExactSums", "record_quantiles"]

#: Records per chunk when weights are turned into limbs (bounds the extra memory).
CHUNK = 1 << 20
_BLOCK = 1 << 14  # limbs are computed a cache-sized block at a time


@dataclass(frozen=True)
class ExactSums:
    """Exact fixed-point sums of a weight per group (see the module docstring).

    Attributes
    ----------
    hi, lo : (G,) float64
        The two limbs of the integer sums, each an exact integer below 2^53 in magnitude.
    bits : int
        b, the limb width.
    scale : int
        s: the sums are ``(hi 2^b + lo) 2^-s``.
    """

    hi: np.ndarray
    lo: np.ndarray
    bits: int
    scale: int

    @staticmethod
    def params(n: int, max_abs: float) -> tuple[int, int]:
        """(b, s) for n terms whose magnitude is at most ``max_abs``."""
        b = 53 - int(np.ceil(np.log2(n + 1))) if n > 0 else 52
        if not np.isfinite(max_abs):
            raise ValueError("weights must be finite for exact sums")
        exp = int(np.frexp(max_abs)[1]) if max_abs > 0 else 0  # max_abs < 2^exp
        return b, min(2 * b - 1 - exp, 1000)  # 2^s stays a finite float

    @staticmethod
    def limbs(weights: np.ndarray, params: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """``(hi, lo)``: every weight as ``rint(w 2^s) = hi 2^b + lo``, both exact in float64.

        Multiplying by a power of two is exact (no overflow: ``|w| 2^s < 2^(2b-1)``); the
        rounded products are integers, and so are their floor division by ``2^b`` and the
        remainder, which lies in ``[0, 2^b)``.
        """
        b, s = params
        w = np.asarray(weights, dtype=np.float64)
        hi, lo = np.empty_like(w), np.empty_like(w)
        scratch = np.empty(min(w.size, _BLOCK))
        for i in range(0, w.size, _BLOCK):  # the same operations a cache-sized block at a time
            q, h, t = lo[i:i + _BLOCK], hi[i:i + _BLOCK], scratch[:min(_BLOCK, w.size - i)]
            np.multiply(w[i:i + _BLOCK], 2.0**s, out=q)
            np.rint(q, out=q)
            np.multiply(q, 2.0**-b, out=h)
            np.floor(h, out=h)
            np.multiply(h, 2.0**b, out=t)
            q -= t  # lo = q - hi 2^b
        return hi, lo

    @classmethod
    def of(cls, codes: np.ndarray, weights: np.ndarray, size: int, *,
           params: tuple[int, int] | None = None) -> ExactSums:
        """Sums of ``weights`` per code 0..size-1 (one pass, no sort).

        ``params`` = ``(b, s)`` from :meth:`params`; by default from ``len(weights)`` and
        ``max|weights|``. Sums that will be compared or combined must share their params.
        """
        return cls.each([codes], weights, size, params=params)[0]

    @classmethod
    def each(cls, groupings: list[np.ndarray], weights: np.ndarray, size: int, *,
             params: tuple[int, int] | None = None) -> list[ExactSums]:
        """:meth:`of` for several groupings of the same weights, in one pass.

        The weights are turned into limbs a chunk of :data:`CHUNK` records at a time, so the
        extra memory is a few MB whatever the number of records; chunk sums of exact integers
        add up exactly, so chunking changes no bit of the result.
        """
        w = np.asarray(weights, dtype=np.float64)
        if params is None:
            params = cls.params(w.size, float(np.abs(w).max(initial=0.0)))
        his = [np.zeros(size) for _ in groupings]
        los = [np.zeros(size) for _ in groupings]
        for lo_i in range(0, w.size, CHUNK):
            hi, lo = cls.limbs(w[lo_i:lo_i + CHUNK], params)
            for g, codes in enumerate(groupings):
                c = codes[lo_i:lo_i + CHUNK]
                his[g] += np.bincount(c, weights=hi, minlength=size)
                los[g] += np.bincount(c, weights=lo, minlength=size)
        return [cls(h, lo, params[0], params[1]) for h, lo in zip(his, los, strict=True)]

    def regroup(self, codes: np.ndarray, size: int) -> ExactSums:
        """Sums over groups of groups: ``codes[g]`` is the new group of old group g (exact)."""
        return ExactSums(np.bincount(codes, weights=self.hi, minlength=size),
                         np.bincount(codes, weights=self.lo, minlength=size),
                         self.bits, self.scale)

    def __getitem__(self, index: Any) -> ExactSums:
        return ExactSums(self.hi[index], self.lo[index], self.bits, self.scale)

    def total(self) -> float:
        """The sum over all groups (exact up to the final rounding)."""
        return float((self.hi.sum() * 2.0**self.bits + self.lo.sum()) * 2.0**-self.scale)

    def values(self) -> np.ndarray:
        """The sums as float64: ``(hi 2^b + lo) 2^-s``, rounded once."""
        return (self.hi * 2.0**self.bits + self.lo) * 2.0**-self.scale


# --------------------------------------------------------------------------------------------
# record-level quantiles from weighted values
# --------------------------------------------------------------------------------------------
def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's interpolation between order statistics (``np.quantile``'s ``_lerp``)."""
    diff = b - a
    return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)


def record_quantiles(values: np.ndarray, counts: np.ndarray, qs: list[float]) -> list[float]:
    """``np.quantile(np.repeat(values, counts), qs)`` without repeating anything.

    The value of order statistic k is found among the values sorted, by the cumulative counts.
    """
    counts = np.asarray(counts, dtype=np.int64)
    keep = counts > 0
    v, c = np.asarray(values, dtype=float)[keep], counts[keep]
    n = int(c.sum())
    if n == 0:
        return [float("nan")] * len(qs)
    order = np.argsort(v, kind="stable")
    v, cum = v[order], np.cumsum(c[order])

    def stat(k: np.ndarray) -> np.ndarray:
        return v[np.searchsorted(cum, k, side="right")]

    pos = np.asarray(qs, dtype=float) * (n - 1)
    lo = np.floor(pos)
    hi = np.minimum(lo + 1, n - 1)
    return [float(x) for x in _lerp(stat(lo), stat(hi), pos - lo)]
