"""The dependence check's aggregates of the count pass (:class:`DependenceCounter`): per column
a value table (hashed values, counts, key-code intervals), (cell, value) counts of the cells
that may be small, (value, key pair) combinations and the ordered table; ``add`` per batch,
``merge`` partial counters. The same tables whatever the batches."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sdc.method.dependence.order import (
    MixedBins,
    OrderPart,
    image_part,
    key_spreads,
    merge_order,
    order_part,
    scratch,
    value_order_part,
)
from sdc.method.dependence.pairs import PairPlan, pair_image
from sdc.method.dependence.relations import SortedValues, sorted_parts
from sdc.method.dependence.tables import (
    HASH_BITS,
    BatchCells,
    cell_values,
    counted,
    extreme_tables,
    factorize_sorted,
    key_pair_counts,
    pair_values,
    reduce_pairs,
    reduce_values,
)
from sdc.method.draws import value_hash

__all__ = ["DENSE_VALUES", "PAIR_VALUES", "SPLIT_FROM", "DependenceCounter", "factorize_sorted"]

_MASK = np.uint64((1 << HASH_BITS) - 1)
PAIR_VALUES = 4096  # columns with more distinct values are checked per key only
DENSE_VALUES = 1 << 16  # a value table with more buckets is kept dense (2**HASH_BITS rows)
_PAIR_SPAN = 1 << 44  # key pairs with more combinations are not counted
#: ``add(split=True)`` makes the arithmetic pair images on a second thread from this many
#: records of a batch on (a smaller batch's images cost less than the threads trading the GIL)
SPLIT_FROM = 1 << 18


def _wide_table(n: np.ndarray, lo: np.ndarray,
                hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A dense value table with its key codes as int64 (the buckets no record reached hold
    int64's sentinels)."""
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    miss = n == 0
    lo[:, miss] = np.iinfo(np.int64).max
    hi[:, miss] = np.iinfo(np.int64).min
    return n, lo, hi


@dataclass
class DependenceCounter:
    """The check's aggregates of the count pass: ``add`` per batch, ``merge`` partial counters
    (Dask pieces). Memory: at most 2**HASH_BITS value rows per column plus the (cell, value)
    pairs of the cells that are still small."""

    columns: list[str]
    n_keys: int
    small_limit: int
    #: pending batches merged every so many (each holds ~20 MB of tables at 1M records)
    merge_every: int = 4
    _values: dict[str, list[tuple[np.ndarray, ...]]] = field(default_factory=dict)
    _pairs: dict[str, list[tuple[np.ndarray, ...]]] = field(default_factory=dict)
    #: key-code sizes: with them, (value, key pair) combinations are counted too
    sizes: list[int] | None = None
    _combos: dict[str, dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray]]]] = field(
        default_factory=dict)
    _wide: set[str] = field(default_factory=set)
    _big: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    _pending: int = 0
    #: the tables are fully merged and pruned (nothing added since): reading a table then
    #: costs no merge over every column (the measure reads one table per column)
    _settled: bool = False
    #: value tables of columns with more than DENSE_VALUES buckets: (n, lo (p, 2**HASH_BITS),
    #: hi) scattered into directly, so a wide column costs no per-batch reduction or merge
    _dense: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: ordered tables per column (:class:`OrderPart`; None once the column is not ordered)
    _order: dict[str, list[OrderPart | None]] = field(default_factory=dict)
    #: synthetic columns of pairs of columns (:mod:`.pairs`), counted in order only
    pairs: PairPlan = field(default_factory=PairPlan)
    #: the sorted relations' values (:mod:`.relations`), turned into ordered tables once
    _sorted: SortedValues | None = None
    _sorted_tables: dict[str, OrderPart | None] | None = None
    #: per key the intervals its ordered tables keep (:func:`~.order.key_spreads`)
    spread: np.ndarray = field(init=False)
    #: the bins other batches' ordered tables have mixed on every key (a batch's counter of
    #: a streaming count pass): their records are not scattered (:func:`~.order.image_part`)
    known: MixedBins | None = None
    #: where this counter (the one that merges the batches) publishes its mixed bins
    publish: MixedBins | None = None

    def __post_init__(self) -> None:
        self.spread = key_spreads(self.sizes, self.n_keys)
        for s in self.pairs.columns:
            self._order.setdefault(s.key, [])
        self._sorted = SortedValues(tuple(c for c in self.pairs.sorted if c in self.columns))
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

    def add(self, frame: pd.DataFrame, cell_id: np.ndarray, key_codes: np.ndarray,
            split: bool = False) -> None:
        """Add a batch: ``cell_id`` (n,) identifies each record's cell (any injective int64
        code), ``key_codes`` (n, p) its key codes.

        O(n) per column: the batch's cells and (cell, value) combinations are hashed
        (``pd.factorize``), value tables scattered into 2**HASH_BITS rows; only distinct
        combinations are ever sorted. ``split``: the pairs' arithmetic images (+ - * /) are
        made on a second thread while this one counts the columns, and by this one too once
        its columns are done (the images not started yet: the two threads end together); a
        whole file in memory, whose check is the release's longest step, from ``SPLIT_FROM``
        records on; the same tables."""
        cell_id = np.asarray(cell_id, dtype=np.int64)
        # integer codes kept in their (narrow) dtype: ufunc.at into tables of that dtype takes
        # its fast path (no cast) and is faster the narrower the table
        key_codes = np.asarray(key_codes)
        if key_codes.dtype.kind not in "iu" or key_codes.dtype == np.uint64:
            key_codes = key_codes.astype(np.int64)
        key_codes = key_codes.reshape(len(cell_id), self.n_keys)
        ones = None  # every record counts once
        # the batch's cells: a cell with small_limit records here (or before) is never sensitive
        # sorted: the (cell, value) and (cell, bin) pairs below come out sorted by cell
        fcode, fcell = factorize_sorted(cell_id)
        fcount = np.bincount(fcode, minlength=fcell.size)
        big = fcount >= self.small_limit
        if self._big.size:
            big |= np.isin(fcell, self._big)
        if big.any():
            self._big = np.union1d(self._big, fcell[fcount >= self.small_limit])
        cells = BatchCells.of(fcode, fcell, key_codes, ~big, self.spread)
        key_codes, cell_keys, kept = cells.key_codes, cells.cell_keys, cells.kept
        arith = ([s for s in self.pairs.columns if s.op in ("+", "-", "*", "/")]
                 if split and cell_id.size >= SPLIT_FROM else [])
        images: dict[str, OrderPart] = {}
        failed: list[BaseException] = []
        worker = None
        todo = deque(arith)  # the images not started yet: both threads take from it

        def take_images() -> None:
            own: dict[str, np.ndarray] = {}  # this thread's float64 columns
            while True:
                try:
                    s = todo.popleft()  # (atomic: each image is made once)
                except IndexError:
                    return
                images[s.key] = image_part(*pair_image(
                    frame, s, {}, own, scratch("image", len(frame), np.float64)), cells,
                    self._known(s.key))

        if arith:
            import threading

            def run() -> None:
                try:
                    take_images()
                except BaseException as exc:  # re-raised below, in the caller's thread
                    failed.append(exc)

            worker = threading.Thread(target=run, name="sdc-dependence-images", daemon=True)
            worker.start()
        # the value hashes kept for the joint values of discrete pairs only (8 bytes a record)
        paired = {c for s in self.pairs.columns if s.op == "&" for c in (s.a, s.b)}
        hashes = {}
        for c in self.columns:
            h = value_hash(frame[c])
            if c in paired:
                hashes[c] = h
                h = h & _MASK
            else:
                h &= _MASK  # (a fresh array: the batch's own hashes)
            b = h.view(np.int64)  # the value buckets (< 2**HASH_BITS: the same as int64)
            here = np.bincount(b, minlength=1 << HASH_BITS)  # records per value bucket
            n_values = np.count_nonzero(here)
            dense = c not in self._dense and n_values > DENSE_VALUES
            few = (not dense and c not in self._dense and c not in self._wide
                   and n_values <= PAIR_VALUES)
            if dense and not self._values[c]:
                self._new_dense(c, b, key_codes, here)  # a batch's own: no merge into it
            elif c in self._dense or dense:
                if dense:
                    self._to_dense(c)
                self._scatter(c, b, ones, key_codes, key_codes, here)
            elif not few:
                self._values[c].append(reduce_values(b, ones, key_codes, key_codes, here))
                if n_values > PAIR_VALUES:
                    self._wide.add(c)
            if few:
                # the batch's (cell, value) combinations: sorted distinct codes
                # (cell << HASH_BITS) | bucket and their counts; the value table and the
                # (value, key pair) counts from them (the cells' key codes: no scatter of
                # every record)
                u, n, values, vi = cell_values(fcode, fcell.size, b, here)
                ucell = u >> HASH_BITS
                ukeys = np.empty((ucell.size, self.n_keys), np.int64, order="F")
                for k in range(self.n_keys):  # each key's codes contiguous
                    np.take(cell_keys[:, k], ucell, out=ukeys[:, k])
                table = pair_values(values, vi, n, ukeys)
                self._values[c].append(table)
                nf = n.astype(np.float64)  # bincount's weights (exact: whole counts)
                for (k1, k2) in self.key_pairs:
                    self._combos[c][(k1, k2)].append(key_pair_counts(
                        values, vi, ukeys[:, k1], ukeys[:, k2], self.sizes[k1],
                        self.sizes[k2], nf))
                small = ~big[ucell]  # a cell's pairs: all its records' (kept or not)
                u, n = u[small], n[small]
            else:
                u, n = counted((cells.kcode << HASH_BITS) | b[kept])
            # sorted distinct (cell, value) codes: (cell, bucket) pairs already sorted and
            # distinct (the cells are factorized in order), as reduce_pairs would give them
            pairs = (fcell[u >> HASH_BITS], u & int(_MASK), n)
            self._pairs[c].append(pairs)
            self._order[c].append(value_order_part(frame[c], b, table, pairs, cells) if few
                                  else order_part(frame[c], cells, self._known(c)))
        numbers: dict[str, np.ndarray] = {}  # the paired columns as float64, once
        on_thread = {a.key for a in arith}
        for s in self.pairs.columns:
            if s.key not in on_thread:
                self._order[s.key].append(image_part(*pair_image(
                    frame, s, hashes, numbers, scratch("image", len(frame), np.float64)), cells,
                    self._known(s.key)))
        if self._sorted is not None and self._sorted.columns:
            self._sorted.add(frame, cell_id, key_codes)
        if worker is not None:
            take_images()  # the images the other thread has not started yet
            worker.join()
            if failed:
                raise failed[0]
            for s in arith:
                self._order[s.key].append(images[s.key])
        self._pending += 1
        self._settled = False
        self._sorted_tables = None
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
                if olo.dtype != lo.dtype:  # (another config's counter) both as int64
                    self._dense[c] = n, lo, hi = _wide_table(n, lo, hi)
                    on, olo, ohi = _wide_table(on, olo, ohi)
                n += on
                np.minimum(lo, olo, out=lo)
                np.maximum(hi, ohi, out=hi)
            self._pairs[c].extend(other._pairs.get(c, []))
            for q in self.key_pairs:
                self._combos[c][q].extend(other._combos.get(c, {}).get(q, []))
        for c in self._order:
            parts = other._order.get(c, [])
            self._order[c].extend(parts)
            if self.publish is not None and c not in self.publish.bins and len(parts) == 1:
                self.publish.publish(c, parts[0])  # the first batch's, until the first merge
        self._wide |= other._wide
        self._big = np.union1d(self._big, other._big)
        if self._sorted is not None and other._sorted is not None:
            self._sorted.merge(other._sorted)
        self._pending += 1
        self._settled = False
        self._sorted_tables = None
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
                self._values[c] = [reduce_values(*(np.concatenate([p[i] for p in parts])
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
                self._pairs[c] = [reduce_pairs(*(np.concatenate([p[i] for p in parts])
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
        for c in self._order:
            if len(self._order[c]) > 1:
                self._order[c] = [merge_order(self._order[c])]
            part = self._order[c][0] if self._order[c] else None
            if self.publish is not None:
                self.publish.publish(c, part)
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

    def _known(self, key: str) -> tuple[str, int, np.ndarray] | None:
        return self.known.of(key) if self.known is not None else None

    def _settle(self) -> None:
        """Merge everything, twice (the second prunes the pairs with the final cell totals),
        once after the last ``add`` / ``merge``."""
        if not self._settled:
            self._merge()
            self._merge()
            self._settled = True

    def _code_dtype(self) -> np.dtype:
        """The dtype of the dense tables' key codes: the narrowest that holds every code
        (``sizes``; int64 without): ``ufunc.at`` into a narrow table is faster, the same
        values."""
        top = max(self.sizes, default=1) if self.sizes is not None else None
        for dt in (np.uint8, np.int16, np.int32):
            if top is not None and top - 1 <= np.iinfo(dt).max:
                return np.dtype(dt)
        return np.dtype(np.int64)

    def _to_dense(self, c: str) -> None:
        """Keep ``c``'s value table dense from now on (its sparse parts scattered in)."""
        if c not in self._dense:
            size, dt = 1 << HASH_BITS, self._code_dtype()
            self._dense[c] = (np.zeros(size, np.int64),
                              np.full((self.n_keys, size), np.iinfo(dt).max, dt),
                              np.full((self.n_keys, size), np.iinfo(dt).min, dt))
            self._wide.add(c)
        for (b, n, lo, hi) in self._values[c]:
            self._scatter(c, b, n, lo, hi)
        self._values[c] = []

    def _new_dense(self, c: str, bucket: np.ndarray, key_codes: np.ndarray,
                   here: np.ndarray) -> None:
        """``c``'s dense value table made from one batch's records (``here``: its per-bucket
        counts): each key's extremes written once (no table filled with sentinels to be
        merged into); a bucket no record reached holds the dtype's sentinels. The same
        table :meth:`_to_dense` and :meth:`_scatter` give."""
        size, dt = 1 << HASH_BITS, self._code_dtype()
        lo, hi = extreme_tables(bucket, key_codes, size, dt)
        self._dense[c] = (here.astype(np.int64, copy=False), lo, hi)
        self._wide.add(c)

    def _scatter(self, c: str, bucket: np.ndarray, count: np.ndarray | None, lo: np.ndarray,
                 hi: np.ndarray, here: np.ndarray | None = None) -> None:
        """Scatter value-bucket parts into ``c``'s dense table in place (``count`` None: one
        record per row; ``here``: its per-bucket counts when already made). The key codes
        are cast to the table's dtype (they fit: codes below the key's size)."""
        n, dlo, dhi = self._dense[c]
        if count is None:  # one per record
            n += np.bincount(bucket, minlength=n.size) if here is None else here
        else:
            np.add.at(n, bucket, count)
        for k in range(self.n_keys):
            np.minimum.at(dlo[k], bucket, lo[:, k].astype(dlo.dtype, copy=False))
            np.maximum.at(dhi[k], bucket, hi[:, k].astype(dhi.dtype, copy=False))

    def combos(self, column: str) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
        """{(k1, k2): (sorted codes (bucket * s1 + x1) * s2 + x2, counts)} of ``column``;
        empty for a column with more than ``PAIR_VALUES`` distinct values."""
        self._settle()
        if column in self._wide:
            return {}
        z = np.zeros(0, np.int64)
        return {q: (p[0] if p else (z, z)) for q, p in self._combos[column].items()}

    def order_table(self, column: str) -> OrderPart | None:
        """``column``'s ordered table, fully merged (None: not an ordered column); also a
        synthetic column's (its ``key``)."""
        self._settle()
        if column in self._order:
            parts = self._order[column]
            return parts[0] if parts else None
        return self._sorted_table(column)

    def _sorted_table(self, key: str) -> OrderPart | None:
        """The ordered table of a sorted relation (:mod:`.relations`), built once."""
        if self._sorted_tables is None:
            self._sorted_tables = {}
            for c in self._sorted.columns if self._sorted is not None else ():
                got = self._sorted.values(c)
                if got is None:
                    continue
                for op, part in sorted_parts(*got, self.small_limit, self.spread).items():
                    self._sorted_tables[f"\x00{op}\x00{c}\x00"] = part
        return self._sorted_tables.get(key)

    @property
    def unsorted(self) -> tuple[str, ...]:
        """The numeric columns whose sorted relations were not checked (over
        ``SORTED_RECORDS`` records)."""
        s = self._sorted
        return tuple(c for c in s.columns if c in s.over) if s is not None else ()

    def tables(self, column: str) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
        """((bucket, n, lo, hi), (cell, bucket, n)) of ``column``, fully merged."""
        self._settle()
        if column in self._dense:
            n, lo, hi = self._dense[column]
            present = np.flatnonzero(n)
            v = [(present.astype(np.int64), n[present], lo[:, present].T.astype(np.int64),
                  hi[:, present].T.astype(np.int64))]
        else:
            v = self._values[column]
        p = self._pairs[column]
        z = np.zeros(0, np.int64)
        zk = np.zeros((0, self.n_keys), np.int64)
        return (v[0] if v else (z, z, zk, zk)), (p[0] if p else (z, z, z))


