"""Mergeable tables of the dependence check: sorted distinct codes with counts, and per-bucket
counts with the interval of key codes (min/max) their records have. O(n) per batch; only
distinct codes are ever sorted."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["HASH_BITS", "counted", "extreme_table", "factorize_sorted", "reduce_cell_bins", "reduce_pairs",
           "reduce_sorted", "reduce_values"]

HASH_BITS = 18

def reduce_values(bucket: np.ndarray, count: np.ndarray | None, lo: np.ndarray,
                   hi: np.ndarray) -> tuple[np.ndarray, ...]:
    """(bucket, n, lo, hi) summed/min/max per bucket, sorted by bucket: scattered into dense
    tables of 2**HASH_BITS rows (no sort; ``ufunc.at`` per key column)."""
    size = 1 << HASH_BITS
    if count is None:  # one per record
        n = np.bincount(bucket, minlength=size).astype(np.int64, copy=False)
    else:
        n = np.zeros(size, dtype=np.int64)
        np.add.at(n, bucket, count)
    present = np.flatnonzero(n)
    p = lo.shape[1]
    out_lo = np.empty((present.size, p), dtype=np.int64)
    out_hi = np.empty((present.size, p), dtype=np.int64)
    for k in range(p):
        out_lo[:, k] = extreme_table(np.minimum, bucket, lo[:, k], size)[present]
        out_hi[:, k] = extreme_table(np.maximum, bucket, hi[:, k], size)[present]
    return present.astype(np.int64), n[present], out_lo, out_hi


def extreme_table(op: np.ufunc, bucket: np.ndarray, x: np.ndarray, size: int) -> np.ndarray:
    """``op.at`` (``np.minimum`` / ``np.maximum``) of ``x`` per bucket, a table of ``size``
    rows in ``x``'s own integer dtype (narrow key codes, :func:`sdc.method.cells.narrow_codes`:
    a smaller table, 1.5-2x faster; same values); a row no record reaches holds the dtype's
    largest (minimum) or smallest (maximum) value."""
    info = np.iinfo(x.dtype)
    t = np.full(size, info.max if op is np.minimum else info.min, dtype=x.dtype)
    op.at(t, bucket, x)
    return t


def counted(codes: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct ``codes`` and their counts (summed ``weights``): hashed, then only the
    distinct codes are sorted."""
    f, u = pd.factorize(codes)
    n = (np.bincount(f, minlength=u.size) if weights is None else
         np.bincount(f, weights=weights, minlength=u.size).astype(np.int64))
    order = np.argsort(u)
    return np.asarray(u, dtype=np.int64)[order], n.astype(np.int64)[order]


def _strictly_sorted(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the pairs (a, b) are distinct and sorted by a then b (O(n): no sort needed)."""
    return bool(((a[1:] > a[:-1]) | ((a[1:] == a[:-1]) & (b[1:] > b[:-1]))).all())


def reduce_pairs(cell: np.ndarray, bucket: np.ndarray,
                  count: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not cell.size or _strictly_sorted(cell, bucket):
        return cell, bucket, count
    if cell.min() >= 0 and cell.max() < (1 << (62 - HASH_BITS)):
        order = np.argsort((cell << HASH_BITS) | bucket)  # one sort key: bucket < 2**HASH_BITS
    else:
        order = np.lexsort((bucket, cell))
    c, b = cell[order], bucket[order]
    starts = np.flatnonzero(np.r_[True, (c[1:] != c[:-1]) | (b[1:] != b[:-1])])
    return c[starts], b[starts], np.add.reduceat(count[order], starts)


def reduce_sorted(bins: np.ndarray, n: np.ndarray, lo: np.ndarray,
                   hi: np.ndarray) -> tuple[np.ndarray, ...]:
    order = np.argsort(bins, kind="stable")
    b = bins[order]
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]]) if b.size else np.zeros(0, np.int64)
    if not b.size:
        return b, n, lo, hi
    return (b[starts], np.add.reduceat(n[order], starts),
            np.minimum.reduceat(lo[order], starts, axis=0),
            np.maximum.reduceat(hi[order], starts, axis=0))


def reduce_cell_bins(cell: np.ndarray, bins: np.ndarray,
                      count: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cell, bin) pairs summed, sorted by cell then bin (bins of any range)."""
    if not cell.size or _strictly_sorted(cell, bins):
        return cell, bins, count
    order = np.lexsort((bins, cell))
    c, b = cell[order], bins[order]
    starts = np.flatnonzero(np.r_[True, (c[1:] != c[:-1]) | (b[1:] != b[:-1])])
    return c[starts], b[starts], np.add.reduceat(count[order], starts)


def factorize_sorted(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(x, sort=True)`` of int64 codes (codes as int64): through one bincount
    when the codes span at most max(n, 2**16) values (up to 2**24), else by hashing."""
    if x.size:
        lo, hi = int(x.min()), int(x.max())
        if hi - lo < min(max(x.size, 1 << 16), 1 << 24):
            present = np.bincount(x - lo if lo else x, minlength=hi - lo + 1) > 0
            rank = np.cumsum(present, dtype=np.int64) - 1
            return rank[x - lo if lo else x], np.flatnonzero(present).astype(np.int64) + lo
    fcode, fcell = pd.factorize(x, sort=True)
    return fcode.astype(np.int64, copy=False), np.asarray(fcell, dtype=np.int64)
