"""The ordered table of one column (docs/METHOD.md, "The check in order"): the column's values
as numbers that keep their order, cut into at most 2**ORDER_BITS bins of width 2**e, with per
bin the count and per key the interval of key codes; batches merge on the coarser width, so
every executor gets the same table."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sdc.method.dependence.tables import (
    HASH_BITS,
    BatchCells,
    counted,
    extreme_table,
    extreme_tables,
    reduce_cell_bins,
    reduce_sorted,
)

__all__ = ["BANDS", "MIXED", "ORDER_BITS", "SPREAD", "MixedBins", "OrderPart", "image_part",
           "key_bands", "key_spreads", "merge_order", "order_image", "order_part", "scratch",
           "value_order_part"]

ORDER_BITS = 16  # an ordered table has at most 2**ORDER_BITS bins (adjacent values merge)
_PREFIX_BYTES = 7  # text and bytes are ordered by their first 7 bytes (56 bits)


def order_image(values: pd.Series) -> tuple[str, np.ndarray, np.ndarray] | None:
    """A column's values as numbers that keep their order: ``("num", float64, valid)`` for
    numbers, dates and times (dates as days, times as their integer unit), ``("str", int64,
    valid)`` for text and bytes (the first 7 bytes, big-endian: text sorts by its prefixes;
    text written as an ISO date by its day number, below every other text's image);
    None for booleans, nested values and columns mixing kinds (not ordered)."""
    import pyarrow as pa

    s = values
    if isinstance(s.dtype, pd.CategoricalDtype):
        s = s.astype(object)
    kind = s.dtype.kind
    if kind == "b":
        return None
    if kind in "iuf":
        # a float64 column as it is (NaN is its missing value; read only): no copy
        x = (s.to_numpy() if s.dtype == np.float64
             else s.to_numpy(dtype=np.float64, na_value=np.nan))
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
        return "str", _iso_dates(arr, _prefix_image(arr)), valid
    return None


_ISO_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ]|$)"
_DAY_ZERO = 719_162  # days from 0001-01-01 to 1970-01-01: every ISO day number >= 0


def _iso_dates(arr: Any, image: np.ndarray) -> np.ndarray:
    """``image`` with every value written as an ISO date (``1987-03-14``, also followed by a
    time) replaced by its day number (>= 0, below 2**22: under every text's prefix image,
    which starts at 2**48 for a first byte >= 1). Text of ISO dates then orders as dates, one
    bin per day, instead of by its first bytes (which split the bins into decades). Value by
    value, so every batch maps a value to the same image."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        text = arr.cast(pa.large_string())
    except (pa.ArrowException, TypeError, ValueError):
        return image  # not UTF-8: no dates
    is_date = pc.match_substring_regex(text, _ISO_DATE)
    if not pc.any(is_date).as_py():
        return image
    day = pc.strptime(pc.utf8_slice_codeunits(text, 0, 10), format="%Y-%m-%d", unit="s",
                      error_is_null=True)
    ok = np.asarray(pc.and_kleene(is_date, pc.is_valid(day)).fill_null(False)
                    .to_numpy(zero_copy_only=False), dtype=bool)
    if not ok.any():
        return image
    secs = np.asarray(day.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False),
                      dtype=np.int64)
    return np.where(ok, secs // 86_400 + _DAY_ZERO, image)


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
        if x.dtype == np.float64 and -1022 <= e <= 1022:
            # x * 2**-e (a normal double): the same correctly rounded value as ldexp, faster
            y = x * (2.0 ** -e)
            return np.floor(y, out=y).astype(np.int64)
        return np.floor(np.ldexp(x, -e)).astype(np.int64)
    return x >> e


_CHUNK = 1 << 16  # records per chunk of :func:`_relative_bins` (a float buffer in cache)


_SCRATCH = threading.local()
#: scratch kept per thread and name up to this many values (a batch of the batch engines:
#: 16 MB a thread for two names); a larger request (a whole file in memory) gets a new array
#: that is not kept, so a long-lived thread holds no file-sized buffer
SCRATCH_KEEP = 1 << 21


def scratch(name: str, n: int, dtype: Any) -> np.ndarray:
    """``n`` values of ``dtype`` owned by this thread under ``name``, the same memory at its
    next call (the caller's until then): a batch's per-record temporaries of the check (the
    pair images, their bins) without fresh pages at every image and batch (the kernel zeroes
    fresh pages: ~1.4% of a 10M release's CPU for the images alone). Over
    :data:`SCRATCH_KEEP` values: a new array."""
    dtype = np.dtype(dtype)
    if n > SCRATCH_KEEP:
        return np.empty(n, dtype)
    buf = getattr(_SCRATCH, name, None)
    if buf is None or buf.dtype != dtype or buf.size < n:
        buf = np.empty(n, dtype)
        setattr(_SCRATCH, name, buf)
    return buf[:n]


def _relative_bins(kind: str, x: np.ndarray, e: int, lo: float,
                   valid: np.ndarray | None = None, past: int = 0,
                   out: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """(bins - base, base) of :func:`_order_bins`, base the smallest bin (that of ``lo``, the
    smallest valid value: the bins are monotone); ``valid`` given: the records not valid get
    ``past`` (the row past the table). Numbers in the normal range: scaled, floored and
    shifted chunk by chunk in a float buffer that stays in cache (exact: a power-of-two
    scaling, integers below 2**53), each chunk converted into the one integer array."""
    if kind == "num" and x.dtype == np.float64 and -1022 <= e <= 1022:
        scale = 2.0 ** -e
        base = math.floor(lo * scale)
        out = np.empty(x.size, np.int64) if out is None else out[:x.size]
        buf = np.empty(min(_CHUNK, x.size))
        for s in range(0, x.size, _CHUNK):
            y = buf[:min(_CHUNK, x.size - s)]
            np.multiply(x[s:s + _CHUNK], scale, out=y)
            if valid is not None:  # as the smallest value: the base stays
                np.copyto(y, lo * scale, where=~valid[s:s + _CHUNK])
            np.floor(y, out=y)
            if base:
                y -= base
            out[s:s + y.size] = y
        if valid is not None:
            out[~valid] = past
        return out, int(base)
    if valid is not None:
        x = np.where(valid, x, x.dtype.type(lo))
    bins = _order_bins(kind, x, e)
    base = int(bins.min())
    bins -= base
    if valid is not None:
        bins[~valid] = past
    return bins, base


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


#: the ordered table's interval of a key whose records in the bin span more than its
#: ``spread`` + 1 codes (:func:`key_spreads`): [0, MIXED] (every code), whichever codes they
#: have (the measure reads whether a bin pins a key to one code or to a band,
#: :func:`sdc.method.dependence.measure.order_inform`)
MIXED = np.iinfo(np.int64).max
#: the bands of key codes the check in order tries (:func:`~.measure.order_inform`): a key
#: is tried on the bands of at most a quarter of its codes (:func:`key_bands`)
BANDS = (2, 4, 8)
#: the widest interval (hi - lo) of key codes an ordered table keeps for a bin
SPREAD = BANDS[-1] - 1


def key_bands(size: int) -> tuple[int, ...]:
    """The band widths tried on a key of ``size`` codes: those of ``BANDS`` at most a quarter
    of its codes (age in 70 years: 2, 4, 8; 9 codes: 2; 5 or fewer: none). A wider band says
    little, and the ordered tables would keep the records of more bins (a bin is skipped only
    once it is wider than the widest band on every key)."""
    return tuple(b for b in BANDS if 4 * b <= size)


def key_spreads(sizes: list[int] | None, n_keys: int) -> np.ndarray:
    """Per key the widest interval hi - lo of its codes an ordered table keeps: one less than
    its widest band (:func:`key_bands`; 0: one code only; ``SPREAD`` for every key when the
    sizes are not known)."""
    if sizes is None:
        return np.full(n_keys, SPREAD, np.int64)
    return np.array([max(key_bands(s), default=1) - 1 for s in sizes], np.int64)


@dataclass
class OrderPart:
    """One column's ordered table: bins of width 2**e of its order image, sorted, each with
    its count n and per key the interval [lo, hi] of its records' key codes when
    hi - lo <= ``spread`` (per key, :func:`key_spreads`), else [0, ``MIXED``]; (cell, bin,
    count) of the cells that may be small; ``hist`` per key the count of the table's records
    per code (the key's distribution among the records the column has a value for: the
    chance runs are measured against, :func:`~.measure.order_inform`; None: the file's).
    Made so on construction: a table of true per-bin extremes (scattered, reduced, merged)
    becomes the same table whichever records were scattered."""

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
    spread: np.ndarray | None = None
    hist: tuple[np.ndarray, ...] | None = None

    def __post_init__(self) -> None:
        if self.spread is None:
            self.spread = np.full(self.lo.shape[1] if self.lo.ndim == 2 else 0, SPREAD, np.int64)
        mixed = self.hi - self.lo > self.spread
        if mixed.any():
            self.lo = np.where(mixed, 0, self.lo)
            self.hi = np.where(mixed, MIXED, self.hi)


def merge_order(parts: list[OrderPart]) -> OrderPart | None:
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
    b, n, lo, hi = reduce_sorted(bins, np.concatenate([p.n for p in parts]),
                                 np.concatenate([p.lo for p in parts]),
                                 np.concatenate([p.hi for p in parts]))
    pc, pb, pn = reduce_cell_bins(np.concatenate([p.pcell for p in parts]),
                                  np.concatenate([p.pbin >> (e - p.e) for p in parts]),
                                  np.concatenate([p.pcount for p in parts]))
    hist = None
    if all(p.hist is not None for p in parts):
        hist = tuple(_summed([p.hist[k] for p in parts]) for k in range(len(parts[0].hist)))
    return OrderPart(kind, e, lo_i, hi_i, b, n, lo, hi, pc, pb, pn, parts[0].spread, hist)


def _summed(arrays: list[np.ndarray]) -> np.ndarray:
    """Counts per code of several parts, summed (each as long as its largest code + 1)."""
    out = np.zeros(max(a.size for a in arrays), np.int64)
    for a in arrays:
        out[:a.size] += a
    return out


def order_part(values: pd.Series, cells: BatchCells,
               known: tuple[str, int, np.ndarray] | None = None) -> OrderPart | None:
    """A batch's ordered table of one column (None: the column has no order); ``known``:
    :meth:`MixedBins.of` the column."""
    img = order_image(values)
    if img is None:
        return None
    return image_part(*img, cells, known)


def value_order_part(values: pd.Series, bucket: np.ndarray, table: tuple[np.ndarray, ...],
                     pairs: tuple[np.ndarray, ...], cells: BatchCells) -> OrderPart | None:
    """:func:`order_part` of a column of few values from its batch's value table: ``bucket``
    each record's value bucket, ``table`` (sorted buckets, n, lo, hi) of those buckets,
    ``pairs`` (cell ids, buckets, counts) of the cells that may be small. When every bucket
    holds one order image in the batch, the bins are reduced from the buckets' rows (a few
    thousand at most) instead of scattered from every record: the same table. A bucket with
    two images or validities (a hash collision in the batch): :func:`image_part`."""
    img = order_image(values)
    if img is None:
        return None
    kind, x, valid = img
    size = 1 << HASH_BITS
    image = np.empty(size, x.dtype)  # any record's image and validity per bucket
    image[bucket] = x
    is_valid = np.zeros(size, bool)
    is_valid[bucket] = valid
    x_at, ok_at = image[bucket], is_valid[bucket]
    # one image per bucket (of its valid records: an invalid record's image is dropped)
    if not (np.array_equal(ok_at, valid) and bool((x_at == x)[valid].all())):
        return image_part(kind, x, valid, cells)
    vb, vn, vlo, vhi = table
    ok = is_valid[vb]
    if not ok.any():
        return image_part(kind, x, valid, cells)  # nothing valid: the empty table
    xb = image[vb]
    xv = xb[ok]
    lo_i, hi_i = (float(xv.min()), float(xv.max())) if kind == "num" else (int(xv.min()),
                                                                           int(xv.max()))
    e = _order_width(kind, lo_i, hi_i)
    rel, base = _relative_bins(kind, xb, e, lo_i, ok, 1 << ORDER_BITS)
    bins, n, lo, hi = reduce_sorted(rel[ok] + base, vn[ok], vlo[ok], vhi[ok])
    pcell, pbucket, pcount = pairs
    at = np.searchsorted(vb, pbucket)
    keep = ok[at]
    pc, pb, pn = reduce_cell_bins(pcell[keep], rel[at[keep]] + base, pcount[keep])
    return OrderPart(kind, e, lo_i, hi_i, bins, n, lo, hi, pc, pb, pn, cells.spread,
                     cells.key_hist(valid if not valid.all() else None))


def image_part(kind: str, x: np.ndarray, valid: np.ndarray, cells: BatchCells,
               known: tuple[str, int, np.ndarray] | None = None) -> OrderPart:
    """A batch's ordered table of an order image ``(kind, x, valid)`` (a column's, or a
    synthetic column's: a + b of two columns) on a batch's ``cells``. O(n): bins counted into
    2**ORDER_BITS rows (the records not ``valid`` into one row more, dropped: no copy of the
    key codes), then the key codes' intervals scattered per bin from the records, or from
    the distinct (cell, bin) pairs when there are few bins (:func:`_few_bins`).

    ``known``: ``(kind, e, bins)``, bins of width 2**e that earlier batches' tables already
    have mixed on every key (:class:`MixedBins`): the records of the bins inside or around
    them are not scattered (their merged bin is mixed whatever they hold; the bins are
    aligned, ``floor(x 2**-e)``, and nest). The batch's own table then has wrong extremes in
    those bins, which the merge with the known tables' parts overwrites: the merged table is
    the same."""
    p = cells.key_codes.shape[1]
    every = bool(valid.all())
    xv = x if every else x[valid]
    if not xv.size:
        z = np.zeros(0, np.int64)
        zk = np.zeros((0, p), np.int64)
        lo_i, hi_i = (0.0, 0.0) if kind == "num" else (0, 0)
        return OrderPart(kind, _order_width(kind, lo_i, hi_i), lo_i, hi_i, z, z, zk, zk,
                         z, z, z, cells.spread, tuple(z for _ in range(p)))
    lo_i, hi_i = (float(xv.min()), float(xv.max())) if kind == "num" else (int(xv.min()),
                                                                           int(xv.max()))
    del xv
    e = _order_width(kind, lo_i, hi_i)
    size = 1 << ORDER_BITS
    if every:
        rel, base = _relative_bins(kind, x, e, lo_i, out=scratch("bins", x.size, np.int64))
        rows = size
    else:  # the records not valid in bin ``size``, one past the table (as the smallest bin
        # they would not change the base)
        rel, base = _relative_bins(kind, x, e, lo_i, valid, size,
                                   out=scratch("bins", x.size, np.int64))
        rows = size + 1
    n = np.bincount(rel, minlength=rows)
    present = np.flatnonzero(n[:size] != 0)
    if few_bins(cells.fcell.size, present.size, rel.size):
        lo, hi, pc, pb, pn = _few_bins(rel, n, present, cells)
    else:
        if rel.size <= size:
            # a small batch: one row per present bin (the records not valid in one row past
            # them), not 2**ORDER_BITS: filling 2 p tables of 2**16 rows cost more than its
            # scatters. The same extremes per bin (one chunk: nothing skipped)
            slot = np.empty(rows, np.int64)   # read only at present bins and the row past
            slot[present] = np.arange(present.size)
            slot[size:] = present.size
            tlo, thi = extreme_tables(slot[rel], cells.key_codes, present.size + 1)
            lo = tlo[:, :present.size].T.astype(np.int64)
            hi = thi[:, :present.size].T.astype(np.int64)
        else:
            # 2**ORDER_BITS rows stay in cache: ufunc.at is fast here; the records of bins
            # already wider than kept on every key are skipped ([0, MIXED] anyway)
            tlo, thi = extreme_tables(rel, cells.key_codes, rows, skip_mixed=cells.spread,
                                      known=_known_rows(known, kind, e, present, base, rows))
            lo = tlo[:, present].T.astype(np.int64)
            hi = thi[:, present].T.astype(np.int64)
        at, kcode = cells.kept, cells.kcode
        if not every:
            ok = valid[at]
            at, kcode = at[ok], kcode[ok]
        u, pn = counted((kcode << ORDER_BITS) | rel[at])
        # sorted distinct (cell, bin) codes: the pairs are sorted and distinct already (the
        # cells are factorized in order), as reduce_cell_bins would give them
        pc, pb = u >> ORDER_BITS, u & (size - 1)
    return OrderPart(kind, e, lo_i, hi_i, present.astype(np.int64) + base,
                     n[present].astype(np.int64), lo, hi, cells.fcell[pc], pb + base, pn,
                     cells.spread, cells.key_hist(None if every else valid))


def _known_rows(known: tuple[str, int, np.ndarray] | None, kind: str, e: int,
                present: np.ndarray, base: int, rows: int) -> np.ndarray | None:
    """Per row of a batch's table (bins ``present + base`` of width 2**e): whether it lies in
    or around a bin of ``known`` (:class:`MixedBins`); None when nothing is known."""
    if known is None or known[0] != kind or not known[2].size or not present.size:
        return None
    _, ek, kb = known
    mine = present.astype(np.int64) + base
    if ek >= e:  # a known bin holds the batch's bin
        mine >>= ek - e
    else:  # the batch's bin holds known ones (coarsened: sorted, repeats harmless)
        kb = kb >> (e - ek)
    at = np.minimum(np.searchsorted(kb, mine), kb.size - 1)
    hit = kb[at] == mine
    if not hit.any():
        return None
    out = np.zeros(rows, bool)
    out[present[hit]] = True
    return out


class MixedBins:
    """The bins each column's merged ordered table has mixed on every key (per column key:
    ``(kind, e, sorted bins of width 2**e)``), published by the counter that merges a
    streaming count pass's batches and read by the batches counted after
    (:func:`image_part`'s ``known``). Any snapshot is right: a bin mixed in some batches'
    tables is mixed in every merge that holds them. The dict is replaced, never changed, so
    the batches' threads read it without a lock."""

    def __init__(self) -> None:
        self.bins: dict[str, tuple[str, int, np.ndarray]] = {}

    def of(self, key: str) -> tuple[str, int, np.ndarray] | None:
        return self.bins.get(key)

    def publish(self, key: str, part: OrderPart | None) -> None:
        """Take ``part``'s all-mixed bins for ``key`` (no change when it has none)."""
        if part is None or part.hi.ndim != 2 or not part.hi.shape[1]:
            return
        mixed = part.bins[(part.hi == MIXED).all(axis=1)]
        if mixed.size:
            self.bins = {**self.bins, key: (part.kind, part.e, mixed)}


def few_bins(n_cells: int, n_bins: int, n: int) -> bool:
    """Whether a batch of ``n`` records in ``n_cells`` cells has so few bins that its ordered
    table is scattered over the distinct (cell, bin) pairs (at most a quarter of its records:
    then cheaper than over the records; 1M records of 38,000 cells: 2 bins, not 80)."""
    return 4 * n_cells * (n_bins + 1) <= n


def _few_bins(rel: np.ndarray, n: np.ndarray, present: np.ndarray,
              cells: BatchCells) -> tuple[np.ndarray, ...]:
    """(lo, hi, cell index, bin, count) of :func:`image_part` when the batch's cells x
    present bins are few (:func:`few_bins`): the distinct (cell, bin) pairs by one bincount, the key codes'
    intervals scattered over the pairs (each with its cell's key codes), the pairs of the
    cells that may be small kept. The same tables as from the records."""
    nb = present.size
    size = 1 << ORDER_BITS
    rank = np.empty(n.size, np.int64)  # a bin's index among the present ones
    rank[:size] = np.cumsum(n[:size] != 0) - 1
    rank[size:] = nb  # the row past the table (records not valid): dropped below
    code = cells.fcode.astype(np.int64) * (nb + 1)
    code += rank[rel]
    cnt = np.bincount(code, minlength=cells.fcell.size * (nb + 1))
    at = np.flatnonzero(cnt != 0)
    cell, v = np.divmod(at, nb + 1)
    real = v < nb
    at, cell, v = at[real], cell[real], v[real]
    keys = cells.cell_keys[cell]
    p = keys.shape[1]
    lo = np.empty((nb, p), np.int64)
    hi = np.empty((nb, p), np.int64)
    for k in range(p):
        lo[:, k] = extreme_table(np.minimum, v, keys[:, k], nb)
        hi[:, k] = extreme_table(np.maximum, v, keys[:, k], nb)
    small = cells.small[cell]
    return lo, hi, cell[small], present[v[small]], cnt[at[small]].astype(np.int64)
