"""Mergeable tables of the dependence check: sorted distinct codes with counts, and per-bucket
counts with the interval of key codes (min/max) their records have. O(n) per batch; only
distinct codes are ever sorted."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sdc.method.sorting import sort_inplace

__all__ = ["HASH_BITS", "BatchCells", "cell_values", "counted", "dense_fits", "extreme_table", "extreme_tables",
           "factorize_sorted",
           "key_pair_counts", "pair_values", "reduce_cell_bins", "reduce_pairs", "reduce_sorted",
           "reduce_values"]

HASH_BITS = 18

@dataclass
class BatchCells:
    """A batch's records by cell, found once for every table of the batch: ``fcode`` each
    record's index among the batch's sorted distinct cell ids ``fcell``, ``key_codes`` (n, p)
    (contiguous per key), ``small`` per cell: it may be small (fewer than the limit of
    records so far), ``kept``: the positions of the records of those cells and ``kcode``
    their ``fcode`` as int64, ``cell_keys`` (cells, p) the cells' key codes as int64."""

    fcode: np.ndarray
    fcell: np.ndarray
    key_codes: np.ndarray
    small: np.ndarray
    kept: np.ndarray
    kcode: np.ndarray
    cell_keys: np.ndarray
    #: per key the widest interval hi - lo of codes its ordered tables keep
    #: (:func:`~.order.key_spreads`; None: every key 7)
    spread: np.ndarray | None = None
    _hist: tuple[np.ndarray, ...] | None = None

    @classmethod
    def of(cls, fcode: np.ndarray, fcell: np.ndarray, key_codes: np.ndarray,
           small: np.ndarray, spread: np.ndarray | None = None) -> BatchCells:
        """From the records' cells (:func:`factorize_sorted`), key codes and small cells."""
        kept = np.flatnonzero(small[fcode])
        one = np.empty(fcell.size, np.int64)  # one record per cell (any: same key codes)
        one[fcode] = np.arange(fcode.size)
        cell_keys = np.asarray(key_codes)[one].astype(np.int64)
        return cls(fcode, fcell, np.asfortranarray(key_codes), small, kept,
                   fcode[kept].astype(np.int64), cell_keys, spread)

    @property
    def keep(self) -> np.ndarray:
        """Per record: its cell may be small."""
        return self.small[self.fcode]

    def key_hist(self, valid: np.ndarray | None) -> tuple[np.ndarray, ...]:
        """Per key the records' count per code (int64; as long as the largest code seen + 1),
        of the records ``valid`` (None: every record). Every record's are found once per
        batch (from the counts per cell); a mask's as those less the few records outside it
        (O(records outside)), or from the cells when most records are outside."""
        if self._hist is None:
            cnt = np.bincount(self.fcode, minlength=self.fcell.size)
            self._hist = tuple(np.bincount(self.cell_keys[:, k], weights=cnt).astype(np.int64)
                               for k in range(self.cell_keys.shape[1]))
        if valid is None:
            return self._hist
        out = np.flatnonzero(~valid)
        if not out.size:
            return self._hist
        if out.size <= valid.size // 2:
            return tuple(h - np.bincount(self.key_codes[out, k], minlength=h.size)
                         for k, h in enumerate(self._hist))
        cnt = np.bincount(self.fcode[valid], minlength=self.fcell.size)
        return tuple(np.bincount(self.cell_keys[:, k], weights=cnt, minlength=h.size).astype(
            np.int64) for k, h in enumerate(self._hist))


def reduce_values(bucket: np.ndarray, count: np.ndarray | None, lo: np.ndarray,
                   hi: np.ndarray, here: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """(bucket, n, lo, hi) summed/min/max per bucket, sorted by bucket: scattered into dense
    tables of 2**HASH_BITS rows (no sort; ``ufunc.at`` per key column). ``here``: the
    records per bucket when ``count`` is None and the caller has them."""
    size = 1 << HASH_BITS
    if count is None:  # one per record
        n = (np.bincount(bucket, minlength=size) if here is None else here).astype(
            np.int64, copy=False)
    else:
        n = np.zeros(size, dtype=np.int64)
        np.add.at(n, bucket, count)
    present = np.flatnonzero(n != 0)
    p = lo.shape[1]
    if lo is hi:  # the records' own key codes: every key's extremes in one chunked pass
        tlo, thi = extreme_tables(bucket, lo, size)
        return (present.astype(np.int64), n[present], tlo[:, present].T.astype(np.int64),
                thi[:, present].T.astype(np.int64))
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


#: records per chunk of :func:`extreme_tables`: a chunk's buckets (8 bytes a record) and key
#: codes stay in the core's cache across the 2 p scatters instead of being read again from
#: memory for each (about a third less CPU at 5M records, 5 keys)
CHUNK = 1 << 17


def extreme_tables(bucket: np.ndarray, key_codes: np.ndarray, size: int,
                   dtype: np.dtype | None = None,
                   skip_mixed: np.ndarray | int | None = None,
                   known: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi), each (p, ``size``): per bucket the smallest and largest code of every key
    column of ``key_codes`` (n, p), in ``dtype`` (the codes' own by default; they must fit),
    a row no record reaches holding the dtype's largest (lo) or smallest (hi) value: the
    tables :func:`extreme_table` gives per key, scattered chunk by chunk of ``CHUNK``
    records (``ufunc.at`` applies the records in order: the same values).

    ``skip_mixed`` = w, per key or one for all (the ordered tables, which keep a bucket's
    interval of key k only when hi - lo <= w_k): from the second chunk on, the records of
    buckets whose records so far have hi - lo > w_k on every key k are not scattered. Such a
    bucket's hi - lo > w_k on every key, the other buckets' extremes are exact. ``known``
    (with ``skip_mixed``): per bucket, mixed elsewhere (earlier batches): its records are
    never scattered, and its extremes are whatever the others leave."""
    dt = np.dtype(key_codes.dtype if dtype is None else dtype)
    info = np.iinfo(dt)
    p = key_codes.shape[1]
    lo = np.full((p, size), info.max, dtype=dt)
    hi = np.full((p, size), info.min, dtype=dt)
    mixed = None  # per bucket: hi - lo > skip_mixed on every key (after the chunks so far)
    if known is not None and skip_mixed is not None:
        # one pass drops the records of the known buckets (most records, once a column's
        # first batches are merged): the chunks below scatter the rest
        keep = np.flatnonzero(~known[bucket])
        if keep.size < 0.9 * bucket.size:
            bucket, key_codes = bucket[keep], key_codes[keep]
        mixed = known
    for s in range(0, bucket.size, CHUNK):
        b = bucket[s:s + CHUNK]
        codes = key_codes[s:s + CHUNK]
        if mixed is not None:
            keep = np.flatnonzero(~mixed[b])
            if keep.size < 0.9 * b.size:  # (a gather of most records costs what it saves)
                b = b[keep]
                codes = codes[keep]
        for k in range(p):
            x = codes[:, k].astype(dt, copy=False)
            np.minimum.at(lo[k], b, x)
            np.maximum.at(hi[k], b, x)
        if skip_mixed is not None and s + CHUNK < bucket.size:
            # in the codes' dtype (codes >= 0: a reached bucket's hi - lo fits; an unreached
            # bucket's wraps and is masked out); w as Python ints keep that dtype
            w = [int(v) for v in np.broadcast_to(np.asarray(skip_mixed), (p,))]
            mixed = lo[0] <= hi[0]
            for k in range(p):
                mixed &= (hi[k] - lo[k]) > w[k]
            if known is not None:
                mixed |= known
    return lo, hi


#: (cell, value) and (value, key pair) code spaces up to this size (and 4 per record or
#: combination counted) are counted by one bincount instead of hashing
_DENSE_CODES = 1 << 24


def dense_fits(space: int, n: int) -> bool:
    """Whether a code space of ``space`` is counted by one bincount (``n`` codes)."""
    return space <= min(max(4 * n, 1 << 16), _DENSE_CODES)


def cell_values(fcode: np.ndarray, n_cells: int, bucket: np.ndarray,
                here: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A batch's distinct (cell, value) pairs: (sorted codes ``(cell << HASH_BITS) | bucket``,
    their records, the batch's sorted distinct buckets, each pair's index among them), as
    :func:`counted` gives the codes. ``fcode``: each record's cell index (< ``n_cells``),
    ``here``: records per bucket. One bincount over cells x values when that space is small
    (a column of few values), else hashed."""
    values = np.flatnonzero(here)
    nv = values.size
    if dense_fits(n_cells * nv, bucket.size):
        rank = np.cumsum(here > 0) - 1
        both = fcode.astype(np.int64) * nv
        both += rank[bucket]
        cnt = np.bincount(both, minlength=n_cells * nv)
        at = np.flatnonzero(cnt != 0)  # (a bool array: 4x faster than of the counts)
        cell, vi = np.divmod(at, nv)
        return (cell << HASH_BITS) | values[vi], cnt[at].astype(np.int64), values, vi
    u, n = counted((fcode.astype(np.int64) << HASH_BITS) | bucket)
    return u, n, values, np.searchsorted(values, u & ((1 << HASH_BITS) - 1))


def key_pair_counts(values: np.ndarray, vi: np.ndarray, x1: np.ndarray, x2: np.ndarray,
                    s1: int, s2: int, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct codes ``(bucket * s1 + x1) * s2 + x2`` (``bucket = values[vi]``, the
    key codes ``x1 < s1``, ``x2 < s2``) with their summed counts ``n``: :func:`counted`'s
    result, by one bincount over values x key pairs when that space is small (``n`` as
    float64 and the key codes contiguous: no cast or strided read per pair)."""
    span = s1 * s2
    if dense_fits(values.size * span, vi.size):
        code = vi * span  # = (vi * s1 + x1) * s2 + x2
        code += x1 * s2
        code += x2
        total = np.bincount(code, weights=n, minlength=values.size * span)
        at = np.flatnonzero(total != 0)
        v, rest = np.divmod(at, span)
        return values[v] * span + rest, total[at].astype(np.int64)
    return counted((values[vi] * s1 + x1) * s2 + x2, n)


def pair_values(values: np.ndarray, vi: np.ndarray, n: np.ndarray,
                keys: np.ndarray) -> tuple[np.ndarray, ...]:
    """The value table (bucket, n, lo, hi) of :func:`reduce_values` from a batch's distinct
    (cell, value) pairs (:func:`cell_values`: ``values``, each pair's index ``vi`` among
    them, its records ``n``, its cell's key codes ``keys`` (m, p)): the same table, scattered
    over the pairs instead of the records."""
    nv, p = values.size, keys.shape[1]
    count = np.bincount(vi, weights=n, minlength=nv).astype(np.int64)
    lo = np.empty((nv, p), dtype=np.int64)
    hi = np.empty((nv, p), dtype=np.int64)
    for k in range(p):
        lo[:, k] = extreme_table(np.minimum, vi, keys[:, k], nv)
        hi[:, k] = extreme_table(np.maximum, vi, keys[:, k], nv)
    return values.astype(np.int64), count, lo, hi


def counted(codes: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct ``codes`` and their counts (summed ``weights``: record counts, whole
    numbers): one sort of the codes (numpy's vectorised sort of int64: 5-10x faster than
    hashing them and sorting the distinct ones, issue 48), the distinct codes' run lengths
    (or their weights summed per run)."""
    if weights is None:
        c = np.array(codes, dtype=np.int64)  # (a copy: sorted in place)
        sort_inplace(c)
    else:
        c = np.asarray(codes, dtype=np.int64)
        order = np.argsort(c)
        c = c[order]
    if not c.size:
        return c, np.zeros(0, np.int64)
    start = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    if weights is None:
        n = np.diff(np.r_[start, c.size])
    else:  # whole numbers below 2**53: the float sums are exact, as one bincount's
        n = np.add.reduceat(np.asarray(weights, dtype=np.float64)[order], start)
    return c[start], n.astype(np.int64)


def _strictly_sorted(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the pairs (a, b) are distinct and sorted by a then b (O(n): no sort needed)."""
    return bool(((a[1:] > a[:-1]) | ((a[1:] == a[:-1]) & (b[1:] > b[:-1]))).all())


def reduce_pairs(cell: np.ndarray, bucket: np.ndarray,
                  count: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not cell.size or _strictly_sorted(cell, bucket):
        return cell, bucket, count
    if cell.min() >= 0 and cell.max() < (1 << (62 - HASH_BITS)):
        # one sort key (bucket < 2**HASH_BITS); stable: a merge of the parts' sorted runs
        order = np.argsort((cell << HASH_BITS) | bucket, kind="stable")
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
    order = _pair_order(cell, bins)
    c, b = cell[order], bins[order]
    starts = np.flatnonzero(np.r_[True, (c[1:] != c[:-1]) | (b[1:] != b[:-1])])
    return c[starts], b[starts], np.add.reduceat(count[order], starts)


def _pair_order(cell: np.ndarray, bins: np.ndarray) -> np.ndarray:
    """The order of (cell, bin) pairs by cell then bin: one int64 key sorted stably when both
    spans fit (a merge of the parts' sorted runs), else ``np.lexsort``."""
    c0, c1, b0, b1 = int(cell.min()), int(cell.max()), int(bins.min()), int(bins.max())
    span = b1 - b0 + 1
    if (c1 - c0 + 1) * span < (1 << 62):
        key = (cell - c0) * span
        key += bins - b0
        return np.argsort(key, kind="stable")
    return np.lexsort((bins, cell))


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
