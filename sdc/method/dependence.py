"""Dependence of the released non-key columns on the key variables, from aggregates of the count
pass (:class:`DependenceCounter`, mergeable over batches), never record by record.

A column that is (nearly) a function of the keys shows which records moved. Per value v of a
column the counter keeps its count and, per key, the interval of key codes it confines the key
to, plus (cell, value) counts of the small cells. The filter intruder keeps the records
released in the target's cell whose value is compatible with it:
``R_c(j) = (1 - theta/t_j) / (t_j - theta + I_c(j))``; a column fails when in some PRB the
record-weighted mean exceeds xi and the same intruder's success without the column by more
than ``MARGIN``. docs/METHOD.md section 7.5, "Dependence of non-key columns".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sdc.errors import InputError
from sdc.method.draws import value_hash

__all__ = ["ALPHA", "HASH_BITS", "MARGIN", "PAIR_VALUES", "ColumnDependence", "DependenceCounter",
           "DependenceError", "checked_columns", "dependence_error", "frame_dependence",
           "key_sizes", "measure_dependence", "raise_if_dependent", "small_limit"]

HASH_BITS = 18
_MASK = np.uint64((1 << HASH_BITS) - 1)
ALPHA = 1e-6
MARGIN = 0.05
_MATRIX = 1 << 22  # entries of one compatibility chunk (values x cells)
CONFINE = 0.5  # a pair confinement counts when it halves what the one-key intervals leave
PAIR_VALUES = 4096  # columns with more distinct values are checked per key only
DENSE_VALUES = 1 << 16  # a value table with more buckets is kept dense (2**HASH_BITS rows)
_PAIR_SPAN = 1 << 44  # key pairs with more combinations are not counted


class DependenceError(InputError):
    """A released non-key column gives the original key values away (exit 2)."""

    def __init__(self, message: str, figures: list[ColumnDependence]) -> None:
        super().__init__(message)
        self.figures = figures


def checked_columns(columns: list[str], config: Any) -> list[str]:
    """The released non-key columns the check measures: every input column except the keys,
    ``input.drop``, ``input.id_column``, ``perturb:`` columns (released randomized) and
    ``derived:`` columns (recomputed from the released keys), in input order."""
    skip = {*config.key_names, *config.input.drop, *(config.perturb or {}),
            *getattr(config, "derived", [])}
    if config.input.id_column:
        skip.add(config.input.id_column)
    return [c for c in columns if c not in skip]


def _reduce_values(bucket: np.ndarray, count: np.ndarray | None, lo: np.ndarray,
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
        t = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(t, bucket, lo[:, k])
        out_lo[:, k] = t[present]
        t.fill(np.iinfo(np.int64).min)
        np.maximum.at(t, bucket, hi[:, k])
        out_hi[:, k] = t[present]
    return present.astype(np.int64), n[present], out_lo, out_hi


def _counted(codes: np.ndarray, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct ``codes`` and their counts (summed ``weights``): hashed, then only the
    distinct codes are sorted."""
    f, u = pd.factorize(codes)
    n = (np.bincount(f, minlength=u.size) if weights is None else
         np.bincount(f, weights=weights, minlength=u.size).astype(np.int64))
    order = np.argsort(u)
    return np.asarray(u, dtype=np.int64)[order], n.astype(np.int64)[order]


def _reduce_pairs(cell: np.ndarray, bucket: np.ndarray,
                  count: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not cell.size:
        return cell, bucket, count
    if cell.min() >= 0 and cell.max() < (1 << (62 - HASH_BITS)):
        order = np.argsort((cell << HASH_BITS) | bucket)  # one sort key: bucket < 2**HASH_BITS
    else:
        order = np.lexsort((bucket, cell))
    c, b = cell[order], bucket[order]
    starts = np.flatnonzero(np.r_[True, (c[1:] != c[:-1]) | (b[1:] != b[:-1])])
    return c[starts], b[starts], np.add.reduceat(count[order], starts)



ORDER_BITS = 16  # an ordered table has at most 2**ORDER_BITS bins (adjacent values merge)
_PREFIX_BYTES = 7  # text and bytes are ordered by their first 7 bytes (56 bits)


def order_image(values: pd.Series) -> tuple[str, np.ndarray, np.ndarray] | None:
    """A column's values as numbers that keep their order: ``("num", float64, valid)`` for
    numbers, dates and times (dates as days, times as their integer unit), ``("str", int64,
    valid)`` for text and bytes (the first 7 bytes, big-endian: text sorts by its prefixes);
    None for booleans, nested values and columns mixing kinds (not ordered)."""
    import pyarrow as pa

    s = values
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)
    kind = s.dtype.kind
    if kind == "b":
        return None
    if kind in "iuf":
        x = s.to_numpy(dtype=np.float64, na_value=np.nan)
        return "num", x, np.isfinite(x)
    try:
        arr = pa.array(s, from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_boolean(t) or pa.types.is_nested(t) or pa.types.is_null(t):
        return None
    valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        x = np.asarray(arr.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False),
                       dtype=np.float64)
        return "num", np.where(valid, x, np.nan), valid & np.isfinite(x)
    if pa.types.is_temporal(t):
        width = pa.int32() if t.bit_width == 32 else pa.int64()
        x = arr.view(width).cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        return "num", np.asarray(x, dtype=np.float64), valid
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or \
            pa.types.is_large_binary(t):
        arr = arr.cast(pa.large_binary())
        return "str", _prefix_image(arr), valid
    return None


def _prefix_image(arr: Any) -> np.ndarray:
    """The first ``_PREFIX_BYTES`` bytes of every value of a large_binary array as one
    big-endian int64 (shorter values padded with zero bytes)."""
    bufs = arr.buffers()
    n = len(arr)
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and \
        bufs[2].size else np.zeros(1, np.uint8)
    start, end = offsets[:-1], offsets[1:]
    out = np.zeros(n, dtype=np.int64)
    for i in range(_PREFIX_BYTES):  # a loop over bytes, not records
        pos = start + i
        byte = np.where(pos < end, data[np.minimum(pos, data.size - 1)], 0).astype(np.int64)
        out |= byte << (8 * (_PREFIX_BYTES - 1 - i))
    return out


def _order_bins(kind: str, x: np.ndarray, e: int) -> np.ndarray:
    """Bins of width 2**e: floor(x / 2**e) (exact: a power-of-two scaling)."""
    if kind == "num":
        return np.floor(np.ldexp(x, -e)).astype(np.int64)
    return x >> e


def _order_width(kind: str, lo: float, hi: float, e: int | None = None) -> int:
    """The smallest e (at least ``e``) whose bins of [lo, hi] number at most 2**ORDER_BITS;
    for numbers never finer than float64's resolution at max(|lo|, |hi|) (bins < 2**53)."""
    if kind == "num":
        top = math.frexp(max(abs(lo), abs(hi)))[1]
        floor_e = top - 53
        span = hi - lo
        guess = (math.frexp(span)[1] - ORDER_BITS - 1) if span > 0 else floor_e
    else:
        floor_e = 0
        guess = int(hi - lo).bit_length() - ORDER_BITS - 1
    w = max(floor_e, guess, e if e is not None else floor_e)

    def count(w: int) -> int:
        b = _order_bins(kind, np.array([lo, hi], dtype=np.float64 if kind == "num"
                                        else np.int64), w)
        return int(b[1] - b[0]) + 1

    while count(w) > (1 << ORDER_BITS):
        w += 1
    return w


@dataclass
class _OrderPart:
    """One column's ordered table: bins of width 2**e of its order image, sorted, each with
    its count n and per key the interval [lo, hi] of key codes; (cell, bin, count) of the
    cells that may be small."""

    kind: str
    e: int
    img_lo: float
    img_hi: float
    bins: np.ndarray
    n: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    pcell: np.ndarray
    pbin: np.ndarray
    pcount: np.ndarray


def _reduce_sorted(bins: np.ndarray, n: np.ndarray, lo: np.ndarray,
                   hi: np.ndarray) -> tuple[np.ndarray, ...]:
    order = np.argsort(bins, kind="stable")
    b = bins[order]
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]]) if b.size else np.zeros(0, np.int64)
    if not b.size:
        return b, n, lo, hi
    return (b[starts], np.add.reduceat(n[order], starts),
            np.minimum.reduceat(lo[order], starts, axis=0),
            np.maximum.reduceat(hi[order], starts, axis=0))


def _reduce_cell_bins(cell: np.ndarray, bins: np.ndarray,
                      count: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cell, bin) pairs summed, sorted by cell then bin (bins of any range)."""
    if not cell.size:
        return cell, bins, count
    order = np.lexsort((bins, cell))
    c, b = cell[order], bins[order]
    starts = np.flatnonzero(np.r_[True, (c[1:] != c[:-1]) | (b[1:] != b[:-1])])
    return c[starts], b[starts], np.add.reduceat(count[order], starts)


def _merge_order(parts: list[_OrderPart]) -> _OrderPart | None:
    """The parts on one bin width (the smallest that holds every value: the same table
    whatever the batches), merged."""
    if any(p is None for p in parts) or len({p.kind for p in parts}) > 1:
        return None
    if len(parts) == 1:
        return parts[0]
    kind = parts[0].kind
    lo_i = min(p.img_lo for p in parts)
    hi_i = max(p.img_hi for p in parts)
    e = _order_width(kind, lo_i, hi_i, max(p.e for p in parts))
    bins = np.concatenate([p.bins >> (e - p.e) for p in parts])
    b, n, lo, hi = _reduce_sorted(bins, np.concatenate([p.n for p in parts]),
                                  np.concatenate([p.lo for p in parts]),
                                  np.concatenate([p.hi for p in parts]))
    pc, pb, pn = _reduce_cell_bins(np.concatenate([p.pcell for p in parts]),
                               np.concatenate([p.pbin >> (e - p.e) for p in parts]),
                               np.concatenate([p.pcount for p in parts]))
    return _OrderPart(kind, e, lo_i, hi_i, b, n, lo, hi, pc, pb, pn)


def _order_part(values: pd.Series, fcode: np.ndarray, fcell: np.ndarray, keep: np.ndarray,
                key_codes: np.ndarray) -> _OrderPart | None:
    """A batch's ordered table of one column (O(n): bins scattered into 2**ORDER_BITS rows)."""
    img = order_image(values)
    if img is None:
        return None
    kind, x, valid = img
    p = key_codes.shape[1]
    if not valid.all():
        x, fcode, keep, key_codes = x[valid], fcode[valid], keep[valid], key_codes[valid]
    if not x.size:
        z = np.zeros(0, np.int64)
        zk = np.zeros((0, p), np.int64)
        lo_i, hi_i = (0.0, 0.0) if kind == "num" else (0, 0)
        return _OrderPart(kind, _order_width(kind, lo_i, hi_i), lo_i, hi_i, z, z, zk, zk,
                          z, z, z)
    lo_i, hi_i = (float(x.min()), float(x.max())) if kind == "num" else (int(x.min()),
                                                                         int(x.max()))
    e = _order_width(kind, lo_i, hi_i)
    bins = _order_bins(kind, x, e)
    base = int(bins.min())
    rel = bins - base
    size = 1 << ORDER_BITS
    n = np.bincount(rel, minlength=size)
    present = np.flatnonzero(n)
    lo = np.empty((present.size, p), np.int64)
    hi = np.empty((present.size, p), np.int64)
    t = np.empty(size, np.int64)
    for k in range(p):
        t.fill(np.iinfo(np.int64).max)
        np.minimum.at(t, rel, key_codes[:, k])
        lo[:, k] = t[present]
        t.fill(np.iinfo(np.int64).min)
        np.maximum.at(t, rel, key_codes[:, k])
        hi[:, k] = t[present]
    u, cnt = _counted((fcode[keep].astype(np.int64) << ORDER_BITS) | rel[keep])
    pc, pb, pn = _reduce_cell_bins(fcell[u >> ORDER_BITS], (u & (size - 1)) + base, cnt)
    return _OrderPart(kind, e, lo_i, hi_i, present.astype(np.int64) + base,
                      n[present].astype(np.int64), lo, hi, pc, pb, pn)


@dataclass
class DependenceCounter:
    """The check's aggregates of the count pass: ``add`` per batch, ``merge`` partial counters
    (Dask pieces). Memory: at most 2**HASH_BITS value rows per column plus the (cell, value)
    pairs of the cells that are still small."""

    columns: list[str]
    n_keys: int
    small_limit: int
    merge_every: int = 8
    _values: dict[str, list[tuple[np.ndarray, ...]]] = field(default_factory=dict)
    _pairs: dict[str, list[tuple[np.ndarray, ...]]] = field(default_factory=dict)
    #: key-code sizes: with them, (value, key pair) combinations are counted too
    sizes: list[int] | None = None
    _combos: dict[str, dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray]]]] = field(
        default_factory=dict)
    _wide: set[str] = field(default_factory=set)
    _big: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    _pending: int = 0
    #: value tables of columns with more than DENSE_VALUES buckets: (n, lo (p, 2**HASH_BITS),
    #: hi) scattered into directly, so a wide column costs no per-batch reduction or merge
    _dense: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: ordered tables per column (:class:`_OrderPart`; None once the column is not ordered)
    _order: dict[str, list[_OrderPart | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for c in self.columns:
            self._order.setdefault(c, [])
            self._values.setdefault(c, [])
            self._pairs.setdefault(c, [])
            self._combos.setdefault(c, {q: [] for q in self.key_pairs})

    @property
    def key_pairs(self) -> list[tuple[int, int]]:
        """The pairs of keys whose joint values the check counts per column value."""
        if self.sizes is None:
            return []
        s = self.sizes
        return [(a, b) for a in range(len(s)) for b in range(a + 1, len(s))
                if s[a] * s[b] < _PAIR_SPAN]

    def add(self, frame: pd.DataFrame, cell_id: np.ndarray, key_codes: np.ndarray) -> None:
        """Add a batch: ``cell_id`` (n,) identifies each record's cell (any injective int64
        code), ``key_codes`` (n, p) its key codes.

        O(n) per column: the batch's cells and (cell, value) combinations are hashed
        (``pd.factorize``), value tables scattered into 2**HASH_BITS rows; only distinct
        combinations are ever sorted."""
        cell_id = np.asarray(cell_id, dtype=np.int64)
        # int64: ufunc.at into the int64 tables takes its fast path only without a cast
        key_codes = np.asarray(key_codes, dtype=np.int64).reshape(len(cell_id), self.n_keys)
        ones = None  # every record counts once
        # the batch's cells: a cell with small_limit records here (or before) is never sensitive
        fcode, fcell = pd.factorize(cell_id)
        fcell = np.asarray(fcell, dtype=np.int64)
        fcount = np.bincount(fcode, minlength=fcell.size)
        big = fcount >= self.small_limit
        if self._big.size:
            big |= np.isin(fcell, self._big)
        if big.any():
            self._big = np.union1d(self._big, fcell[fcount >= self.small_limit])
        keep = ~big[fcode]
        cell_keys = np.empty((fcell.size, self.n_keys), dtype=np.int64)
        cell_keys[fcode] = key_codes  # every record of a cell has the same key codes
        key_codes = np.asfortranarray(key_codes)  # contiguous per key
        for c in self.columns:
            b = (value_hash(frame[c]) & _MASK).astype(np.int64)
            if c not in self._dense and np.count_nonzero(
                    np.bincount(b, minlength=1 << HASH_BITS)) > DENSE_VALUES:
                self._to_dense(c)
            if c in self._dense:
                self._scatter(c, b, ones, key_codes, key_codes)
            else:
                vals = _reduce_values(b, ones, key_codes, key_codes)
                self._values[c].append(vals)
                if vals[0].size > PAIR_VALUES:
                    self._wide.add(c)
            both = (fcode << HASH_BITS) | b  # the batch's (cell, value) combinations
            if c not in self._wide:
                u, n = _counted(both)
                ucell, ub = u >> HASH_BITS, u & int(_MASK)
                for (k1, k2) in self.key_pairs:
                    s1, s2 = self.sizes[k1], self.sizes[k2]
                    code = (ub * s1 + cell_keys[ucell, k1]) * s2 + cell_keys[ucell, k2]
                    self._combos[c][(k1, k2)].append(_counted(code, n))
            u, n = _counted(both[keep])
            self._pairs[c].append(_reduce_pairs(fcell[u >> HASH_BITS], u & int(_MASK), n))
            self._order[c].append(_order_part(frame[c], fcode, fcell, keep, key_codes))
        self._pending += 1
        if self._pending >= self.merge_every:
            self._merge()

    def merge(self, other: DependenceCounter) -> None:
        """Add another counter's aggregates (same columns)."""
        for c in self.columns:
            self._values[c].extend(other._values.get(c, []))
            if c in other._dense:
                self._to_dense(c)
                n, lo, hi = self._dense[c]
                on, olo, ohi = other._dense[c]
                n += on
                np.minimum(lo, olo, out=lo)
                np.maximum(hi, ohi, out=hi)
            self._pairs[c].extend(other._pairs.get(c, []))
            self._order[c].extend(other._order.get(c, []))
            for q in self.key_pairs:
                self._combos[c][q].extend(other._combos.get(c, {}).get(q, []))
        self._wide |= other._wide
        self._big = np.union1d(self._big, other._big)
        self._pending += 1
        if self._pending >= self.merge_every:
            self._merge()

    def _merge(self) -> None:
        self._pending = 0
        for c in self.columns:
            parts = self._values[c]
            if c in self._dense:
                if parts:
                    self._to_dense(c)
            elif len(parts) > 1:
                self._values[c] = [_reduce_values(*(np.concatenate([p[i] for p in parts])
                                                    for i in range(4)))]
            if parts and c not in self._dense and self._values[c][0][0].size > PAIR_VALUES:
                self._wide.add(c)
                if self._values[c][0][0].size > DENSE_VALUES:
                    self._to_dense(c)
            for q, cparts in self._combos[c].items():
                if c in self._wide:
                    cparts.clear()
                elif len(cparts) > 1:
                    u, inv = np.unique(np.concatenate([x[0] for x in cparts]),
                                       return_inverse=True)
                    n = np.bincount(inv, weights=np.concatenate([x[1] for x in cparts]),
                                    minlength=u.size).astype(np.int64)
                    self._combos[c][q] = [(u, n)]
            parts = self._pairs[c]
            if len(parts) > 1 or self._big.size:
                self._pairs[c] = [_reduce_pairs(*(np.concatenate([p[i] for p in parts])
                                                  for i in range(3)))] if parts else []
        if not self.columns:
            return
        # every column holds the same records: cells that reached small_limit records are never
        # sensitive; their pairs are dropped (and those of later batches skipped)
        cell, _, count = self._pairs[self.columns[0]][0] if self._pairs[self.columns[0]] else (
            np.zeros(0, np.int64),) * 3
        if cell.size:
            starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
            total = np.add.reduceat(count, starts)
            big = cell[starts][total >= self.small_limit]
            if big.size:
                self._big = np.union1d(self._big, big)
        for c in self.columns:
            if len(self._order[c]) > 1:
                self._order[c] = [_merge_order(self._order[c])]
            part = self._order[c][0] if self._order[c] else None
            if part is not None and self._big.size and part.pcell.size:
                keep = ~np.isin(part.pcell, self._big)
                part.pcell, part.pbin, part.pcount = (part.pcell[keep], part.pbin[keep],
                                                      part.pcount[keep])
        if self._big.size:
            for c in self.columns:
                if self._pairs[c]:
                    cc, bb, nn = self._pairs[c][0]
                    keep = ~np.isin(cc, self._big)
                    self._pairs[c] = [(cc[keep], bb[keep], nn[keep])]

    def _to_dense(self, c: str) -> None:
        """Keep ``c``'s value table dense from now on (its sparse parts scattered in)."""
        if c not in self._dense:
            size = 1 << HASH_BITS
            self._dense[c] = (np.zeros(size, np.int64),
                              np.full((self.n_keys, size), np.iinfo(np.int64).max, np.int64),
                              np.full((self.n_keys, size), np.iinfo(np.int64).min, np.int64))
            self._wide.add(c)
        for (b, n, lo, hi) in self._values[c]:
            self._scatter(c, b, n, lo, hi)
        self._values[c] = []

    def _scatter(self, c: str, bucket: np.ndarray, count: np.ndarray | None, lo: np.ndarray,
                 hi: np.ndarray) -> None:
        n, dlo, dhi = self._dense[c]
        if count is None:  # one per record
            n += np.bincount(bucket, minlength=n.size)
        else:
            np.add.at(n, bucket, count)
        for k in range(self.n_keys):
            np.minimum.at(dlo[k], bucket, lo[:, k])
            np.maximum.at(dhi[k], bucket, hi[:, k])

    def combos(self, column: str) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
        """{(k1, k2): (sorted codes (bucket * s1 + x1) * s2 + x2, counts)} of ``column``;
        empty for a column with more than ``PAIR_VALUES`` distinct values."""
        self._merge()
        if column in self._wide:
            return {}
        z = np.zeros(0, np.int64)
        return {q: (p[0] if p else (z, z)) for q, p in self._combos[column].items()}

    def order_table(self, column: str) -> _OrderPart | None:
        """``column``'s ordered table, fully merged (None: not an ordered column)."""
        self._merge()
        self._merge()
        parts = self._order[column]
        return parts[0] if parts else None

    def tables(self, column: str) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
        """((bucket, n, lo, hi), (cell, bucket, n)) of ``column``, fully merged."""
        self._merge()
        self._merge()  # pairs pruned with the final cell totals
        if column in self._dense:
            n, lo, hi = self._dense[column]
            present = np.flatnonzero(n)
            v = [(present.astype(np.int64), n[present], lo[:, present].T.copy(),
                  hi[:, present].T.copy())]
        else:
            v = self._values[column]
        p = self._pairs[column]
        z = np.zeros(0, np.int64)
        zk = np.zeros((0, self.n_keys), np.int64)
        return (v[0] if v else (z, z, zk, zk)), (p[0] if p else (z, z, z))


@dataclass(frozen=True)
class ColumnDependence:
    """The check's figures for one column (see the module docstring)."""

    column: str
    figure: float            # max over PRBs of the filter intruder's mean success
    baseline: float          # that PRB's success without the column
    prb: int                 # where the figure is attained (-1: no PRB)
    mean_figure: float       # over every sensitive record of the file
    mean_baseline: float
    revealed: dict[str, float]  # key -> share of sensitive records whose value informs on it
    flagged: bool
    #: "values": the column's values one by one; "order": runs of its values in order
    via: str = "values"

    def as_dict(self) -> dict[str, Any]:
        return {"column": self.column, "figure": round(self.figure, 6),
                "baseline": round(self.baseline, 6), "prb": self.prb,
                "mean_figure": round(self.mean_figure, 6),
                "mean_baseline": round(self.mean_baseline, 6),
                "revealed": {k: round(v, 6) for k, v in self.revealed.items()},
                "flagged": self.flagged, "via": self.via}


def measure_dependence(counter: DependenceCounter, plan: Any, config: Any,
                       cell_index: Callable[[np.ndarray], np.ndarray]) -> list[ColumnDependence]:
    """The figures of every checked column, from the counter and the release plan: the
    worse of the check by value and the check in order (:func:`_order_inform`).

    ``cell_index`` maps the counter's cell ids to the plan's cell indices (identity for the
    pandas engine, a search in the sorted cell codes for the batch engines).
    """
    ctx = _Context(plan, config)
    out = []
    for col in counter.columns:
        (vb, vn, vlo, vhi), (pc, pb, pn) = counter.tables(col)
        inform = ctx.value_inform(vn, vlo, vhi)
        combo = ctx.pair_combos(counter, col, vb, vn, vlo, vhi)
        by_value = ctx.figure(col, vb, vlo, vhi, inform, combo, pc, pb, pn, cell_index,
                              "values")
        part = counter.order_table(col)
        best = by_value
        if part is not None and part.bins.size:
            olo, ohi, oinf = _order_inform(part, ctx)
            if oinf.any():
                by_order = ctx.figure(col, part.bins, olo, ohi, oinf, {}, part.pcell,
                                      part.pbin, part.pcount, cell_index, "order")
                if (by_order.flagged, by_order.figure) > (by_value.flagged, by_value.figure):
                    best = by_order
        out.append(best)
    return out


def _order_inform(part: _OrderPart, ctx: _Context) -> tuple[np.ndarray, ...]:
    """(lo, hi, inform) per bin of the ordered table: a bin informs on key k when it lies in
    a run of consecutive bins (the column's values in order) whose records all have one value
    x of k, and the run holds so many records N that N records independent of k would all
    have x with a chance below ALPHA / n over every start in the file:
    N log P_k(x) < log(ALPHA / n). Its interval is then [x, x], else the key's whole range."""
    n_total = ctx.n_total
    p = part.lo.shape[1]
    lo = np.zeros_like(part.lo)
    hi = np.empty_like(part.hi)
    inform = np.zeros(part.lo.shape, dtype=bool)
    limit = math.log(ALPHA) - math.log(max(n_total, 1.0))
    for k in range(p):
        hi[:, k] = ctx.sizes[k] - 1
        x = part.lo[:, k]
        pure = x == part.hi[:, k]
        brk = np.r_[True, ~pure[1:] | ~pure[:-1] | (x[1:] != x[:-1])]
        run = np.cumsum(brk) - 1
        size = np.bincount(run, weights=part.n)[run]
        px = (ctx.cums[k][np.minimum(x + 1, ctx.sizes[k])] - ctx.cums[k][np.minimum(
            x, ctx.sizes[k])]) / n_total
        with np.errstate(divide="ignore"):
            inf = pure & (size >= 2) & (size * np.log(np.maximum(px, 1e-300)) < limit)
        inform[:, k] = inf
        lo[inf, k] = x[inf]
        hi[inf, k] = x[inf]
    return lo, hi, inform


class _Context:
    """The plan's figures every column's measure needs (key marginals, PRBs, thetas)."""

    def __init__(self, plan: Any, config: Any) -> None:
        self.plan = plan
        self.part = plan.partitioned
        self.cells = self.part.cells
        self.t = self.cells.frequency.astype(np.float64)
        self.n_total = float(self.t.sum())
        self.keys = config.key_names
        self.kc = self.cells.key_codes
        self.sizes = [int(config.key_variables[v].size) for v in self.keys]
        # cumulative marginal of every key over its codes
        self.cums = [np.r_[0.0, np.cumsum(np.bincount(self.kc[:, k], weights=self.t,
                                                      minlength=self.sizes[k]))]
                     for k in range(len(self.keys))]
        self.thetas = np.array([b.theta for b in plan.block_plan.blocks], dtype=np.float64)
        self.n_prb = self.thetas.size
        self.k_prb = (np.diff(np.r_[plan.prb_start, plan.prb_cells.size]) if self.n_prb
                      else np.zeros(0, int))
        self.cell_prb = plan.cell_prb

    def value_inform(self, vn: np.ndarray, vlo: np.ndarray, vhi: np.ndarray) -> np.ndarray:
        """A value confines key k to [lo, hi] when n(v) >= 2 and P_k([lo, hi])^n(v) < ALPHA."""
        prob = np.ones(vlo.shape, dtype=np.float64)
        for k in range(len(self.keys)):
            prob[:, k] = (self.cums[k][vhi[:, k] + 1] - self.cums[k][vlo[:, k]]) / self.n_total
        with np.errstate(divide="ignore"):
            return (vn[:, None] >= 2) & (vn[:, None] * np.log(prob) < math.log(ALPHA))

    def pair_combos(self, counter: DependenceCounter, col: str, vb: np.ndarray, vn: np.ndarray,
                    vlo: np.ndarray, vhi: np.ndarray) -> dict:
        """Pairs of keys: the value confines (x1, x2) to the combinations it was observed
        with (see docs/METHOD.md)."""
        sizes, kc, t, n_total = self.sizes, self.kc, self.t, self.n_total
        prob = np.ones(vlo.shape, dtype=np.float64)
        for k in range(len(self.keys)):
            prob[:, k] = (self.cums[k][vhi[:, k] + 1] - self.cums[k][vlo[:, k]]) / n_total
        combo: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, int]] = {}
        for (k1, k2), (u, _n) in counter.combos(col).items():
            span = sizes[k1] * sizes[k2]
            vic, rest = np.searchsorted(vb, u // span), u % span
            jc = kc[:, k1] * sizes[k2] + kc[:, k2]
            uc, inv = np.unique(jc, return_inverse=True)
            pjoint = np.bincount(inv, weights=t, minlength=uc.size) / n_total
            ps = np.bincount(vic, weights=pjoint[np.searchsorted(uc, rest)], minlength=vb.size)
            # a value informs on the pair when its records sit on far fewer combinations than
            # records independent of the pair would: D(v) distinct combinations against
            # E[D] = sum_x 1 - (1 - p_x)^n(v) (p_x the pair's distribution, histogrammed)
            dv = np.bincount(vic, minlength=vb.size).astype(np.float64)
            ed = _expected_distinct(pjoint, vn)
            # ... and confines it beyond what its one-key intervals already do
            inf_q = ((ps <= CONFINE * prob[:, k1] * prob[:, k2]) & (dv <= ed / 2.0)
                     & (ed - dv >= 3.0 * np.sqrt(np.maximum(ed, 1.0))))
            if inf_q.any():
                combo[(k1, k2)] = (inf_q, vic * span + rest, span)
        return combo

    def figure(self, col: str, vb: np.ndarray, vlo: np.ndarray, vhi: np.ndarray,
               inform: np.ndarray, combo: dict, pc: np.ndarray, pb: np.ndarray,
               pn: np.ndarray, cell_index: Callable[[np.ndarray], np.ndarray],
               via: str) -> ColumnDependence:
        """The filter intruder's figure of a column whose values (or bins) ``vb`` confine the
        keys as ``inform`` / ``[vlo, vhi]`` say, from the (cell, value) pairs of the small
        cells."""
        plan, cells, t, kc, sizes = self.plan, self.cells, self.t, self.kc, self.sizes
        keys, n_prb, k_prb, cell_prb, thetas = (self.keys, self.n_prb, self.k_prb,
                                                self.cell_prb, self.thetas)
        idx = cell_index(pc) if pc.size else np.zeros(0, np.int64)
        sens = cell_prb[idx] >= 0 if idx.size else np.zeros(0, bool)
        idx, pb, pn = idx[sens], pb[sens], pn[sens].astype(np.float64)
        vi = np.searchsorted(vb, pb)
        inf_pair = inform[vi].copy()
        for (k1, k2), (inf_q, _, _) in combo.items():
            inf_pair[:, k1] |= inf_q[vi]
            inf_pair[:, k2] |= inf_q[vi]
        n_sens = float(pn.sum())
        revealed = {v: float((pn * inf_pair[:, k]).sum() / n_sens) if n_sens else 0.0
                    for k, v in enumerate(keys)}
        revealed = {k: s for k, s in revealed.items() if s > 0}
        # A(j) = sum over the PRB's pairs (j', v) of n(j', v) / t_j' [v compatible with j]
        w = pn / t[idx]
        prb_of = cell_prb[idx]
        any_inf = inf_pair.any(axis=1)
        a = np.zeros(cells.n_cells)
        u = np.bincount(prb_of[~any_inf], weights=w[~any_inf], minlength=n_prb)
        sens_cells = plan.prb_cells
        a[sens_cells] = u[cell_prb[sens_cells]]
        inf_rows = np.flatnonzero(any_inf)
        if inf_rows.size:
            order = inf_rows[np.argsort(prb_of[inf_rows], kind="stable")]
            bounds = np.searchsorted(prb_of[order], np.arange(n_prb + 1))
            for b in np.flatnonzero(np.diff(bounds)):
                rows = order[bounds[b]:bounds[b + 1]]
                members = sens_cells[plan.prb_start[b]:plan.prb_start[b] + k_prb[b]]
                uv, inv = np.unique(vi[rows], return_inverse=True)
                wv = np.bincount(inv, weights=w[rows], minlength=uv.size)
                mcodes = kc[members]
                acc = np.zeros(members.size)
                step = max(1, _MATRIX // max(members.size, 1))
                for s in range(0, uv.size, step):
                    sv = uv[s:s + step]
                    ok = np.ones((sv.size, members.size), dtype=bool)
                    for k in range(len(keys)):
                        m = inform[sv, k]
                        if not m.any():
                            continue
                        inside = ((mcodes[None, :, k] >= vlo[sv, k][:, None])
                                  & (mcodes[None, :, k] <= vhi[sv, k][:, None]))
                        ok &= inside | ~m[:, None]
                    for (k1, k2), (inf_q, qcodes, span) in combo.items():
                        m = inf_q[sv]
                        if not m.any():
                            continue
                        query = (sv[:, None] * span
                                 + (mcodes[:, k1] * sizes[k2] + mcodes[:, k2])[None, :])
                        pos = np.minimum(np.searchsorted(qcodes, query), qcodes.size - 1)
                        ok &= (qcodes[pos] == query) | ~m[:, None]
                    acc += wv[s:s + step] @ ok
                a[members] += acc
        figure = baseline = mean_f = mean_b = 0.0
        at, flagged = -1, False
        if n_prb:
            sc = sens_cells
            kk = k_prb[cell_prb[sc]].astype(np.float64)
            th = thetas[cell_prb[sc]]
            tj = t[sc]
            movable = kk >= 2
            inc = np.where(movable, th / np.maximum(kk - 1, 1) * np.maximum(a[sc] - 1.0, 0.0), 0)
            inc0 = np.where(movable, th, 0.0)
            stay = np.where(movable, 1.0 - th / tj, 1.0)
            rc = stay / (tj - np.where(movable, th, 0.0) + inc)
            r0 = stay / (tj - np.where(movable, th, 0.0) + inc0)
            wsum = np.bincount(cell_prb[sc], weights=tj, minlength=n_prb)
            fb = np.bincount(cell_prb[sc], weights=tj * rc, minlength=n_prb) / wsum
            bb = np.bincount(cell_prb[sc], weights=tj * r0, minlength=n_prb) / wsum
            at = int(np.argmax(fb))
            figure, baseline = float(fb[at]), float(bb[at])
            mean_f = float((tj * rc).sum() / tj.sum())
            mean_b = float((tj * r0).sum() / tj.sum())
            xi = self.part.xi
            bad = (fb > xi + 1e-12) & (fb > bb + MARGIN)
            flagged = bool(bad.any())
            if flagged:
                at = int(np.flatnonzero(bad)[np.argmax(fb[bad])])
                figure, baseline = float(fb[at]), float(bb[at])
        return ColumnDependence(col, figure, baseline, at, mean_f, mean_b, revealed, flagged,
                                via)


def _expected_distinct(p: np.ndarray, n: np.ndarray, bins: int = 256) -> np.ndarray:
    """E[number of distinct categories among n(v) draws] for every n(v), the categories'
    probabilities ``p`` grouped into ``bins`` log-spaced bins (about 1% accuracy)."""
    p = p[p > 0]
    if not p.size or not n.size:
        return np.zeros(n.size)
    lp = np.log(p)
    lo, hi = float(lp.min()), float(lp.max())
    edges = np.linspace(lo, hi + 1e-12, bins + 1)
    which = np.clip(np.searchsorted(edges, lp, side="right") - 1, 0, bins - 1)
    cnt = np.bincount(which, minlength=bins).astype(np.float64)
    mean_p = np.bincount(which, weights=p, minlength=bins) / np.maximum(cnt, 1.0)
    used = cnt > 0
    un, inv = np.unique(n, return_inverse=True)
    miss = np.exp(un[:, None].astype(np.float64) * np.log1p(-np.minimum(mean_p[used], 1 - 1e-15))[None, :])
    return ((1.0 - miss) @ cnt[used])[inv]


def dependence_error(figures: list[ColumnDependence], plan: Any, config: Any) -> str | None:
    """The refusal message when some column fails, else None."""
    bad = [f for f in figures if f.flagged]
    if not bad:
        return None
    xi = plan.partitioned.xi
    lines = []
    for f in bad:
        keys = sorted(f.revealed, key=lambda k: -f.revealed[k])
        shown = [k for k in keys if f.revealed[k] >= 0.05] or keys[:1]
        where = (str(plan.blocks["partition_key"].iat[f.prb])
                 if 0 <= f.prb < len(plan.blocks) else "")
        how = ("its value narrows" if f.via == "values" else
               "taken in order, its values fall into runs that each hold one value of the key "
               "(a finer grain, a prefix code), which narrows")
        lines.append(
            f"- {f.column!r} reveals the original value(s) of {', '.join(shown) or 'the keys'} "
            f"({how} {', '.join(f'{k} for {f.revealed[k]:.0%}' for k in shown)} of "
            f"the records that may move): an intruder who knows a target's key values and keeps "
            f"the released records whose {f.column} agrees with them picks the target with "
            f"probability {f.figure:.3f} against xi = {xi} ({f.baseline:.3f} without the "
            f"column; PRB {f.prb}: {where}; {f.mean_figure:.3f} on average over every record "
            f"that may move)")
    weight = getattr(config.input, "weight", None)
    names = [f.column for f in bad if f.column != weight]
    fixes = []
    if names:
        fixes.append(
            "\nFix each column in one of three ways: list it under `derived: ["
            + ", ".join(names) + "]` (recomputed from the released key values through the "
            "mapping observed in the input; refused when the column is not a function of the "
            "keys), drop it (`input.drop: [" + ", ".join(names) + "]`), or make it a key "
            "variable.")
    if weight in {f.column for f in bad}:
        fixes.append(
            f"\nThe survey weight {weight!r} (weights constant within strata of a key) cannot be "
            "derived: (it would no longer weight its record). Fix: keep the key(s) it depends on "
            "as is (`partition: {KEY: as_is}`: records never leave them; small PRBs merged "
            "across them still move records, which this check reports again: coarsen the "
            f"other keys), or drop the weight (`input.drop: [{weight}]` and no "
            "`input.weight`).")
    return (
        f"{len(bad)} released non-key column(s) give the original key values away, so the "
        "certificate would not hold for the released file; nothing was released:\n"
        + "\n".join(lines) + "".join(fixes)
        + " See docs/METHOD.md, 'Dependence of non-key columns'.")


def raise_if_dependent(figures: list[ColumnDependence], plan: Any, config: Any) -> None:
    """Raise :class:`DependenceError` (exit 2) naming every failing column and the fixes."""
    msg = dependence_error(figures, plan, config)
    if msg is not None:
        raise DependenceError(msg, figures)


def frame_dependence(frame: pd.DataFrame, plan: Any, config: Any) -> list[ColumnDependence]:
    """The check on a whole file in memory (the pandas engine): the counter over one batch."""
    cells = plan.partitioned.cells
    cols = checked_columns(list(frame.columns), config)
    counter = DependenceCounter(cols, len(config.key_names), small_limit(config),
                                sizes=key_sizes(config))
    if cols and cells.record_cell.size:
        rc = cells.record_cell
        # contiguous per key, int64 (ufunc.at's fast path needs the tables' own type)
        counter.add(frame, rc, np.ascontiguousarray(cells.key_codes.T, dtype=np.int64)[:, rc].T)
    return measure_dependence(counter, plan, config, lambda x: x)


def key_sizes(config: Any) -> list[int]:
    """Domain size (codes) of every key variable, in key order."""
    return [int(config.key_variables[v].size) for v in config.key_names]


def small_limit(config: Any) -> int:
    """Cells with at least this many records are never sensitive (t * xi >= 1)."""
    return max(1, math.ceil(1.0 / config.risk.xi))
