"""Relations between rows (docs/METHOD.md, "Relations an intruder computes"): what an intruder
computes from a numeric column after sorting the public file by it. The public file is in keyed
hash order, but sorting by a running total of age (in file order or in any other order) puts
its records back in that order, and the difference to the previous value is the record's age.

:class:`SortedValues` collects, per numeric column, every record's value, cell and key codes
(mergeable over batches and Dask pieces, up to ``SORTED_RECORDS`` records per column: the same
collection whatever the batches); :func:`sorted_parts` finds each value's place among the sorted
distinct values once (the records need no sorting: the tables do not depend on their order) and
turns three relations into ordered tables (:class:`~.order.OrderPart`) for the check in order:

- ``diff:previous``: v - (the previous distinct value), on the records of a value held by one
  record only (a tie has no single predecessor: its records are not given one);
- ``diff:next``: (the next distinct value) - v, likewise (a running total summed backwards);
- ``rank``: the number of records with a smaller value (any monotone transform of a key, at one
  bin per record up to 2**16 records whatever the column's range).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sdc.method.dependence.order import OrderPart, image_part, order_image
from sdc.method.dependence.tables import BatchCells, factorize_sorted

__all__ = ["SORTED_RECORDS", "SortedValues", "sorted_parts"]

#: a column's sorted relations are checked on files of at most this many records (memory:
#: about 8 + 8 + 4 p bytes per record and column, p keys); beyond, the release warns
SORTED_RECORDS = 1 << 20


@dataclass
class SortedValues:
    """Count-pass partial: per column, its valid numeric values with each record's cell id and
    key codes; ``add`` per batch, ``merge`` partials. A column with more than
    ``SORTED_RECORDS`` records in all is dropped (``over``) wherever the limit is crossed."""

    columns: tuple[str, ...]
    _parts: dict[str, list[tuple]] = field(
        default_factory=dict)
    _count: dict[str, int] = field(default_factory=dict)
    over: set[str] = field(default_factory=set)
    #: columns that are not numeric in some batch (no sorted relations: nothing to warn)
    skipped: set[str] = field(default_factory=set)

    def add(self, frame: pd.DataFrame, cell_id: np.ndarray, key_codes: np.ndarray) -> None:
        """A batch: every record's value of each column (when numeric), cell and key codes.
        Counted now, gathered only when read (:meth:`values`): a file of more than
        ``SORTED_RECORDS`` records drops every batch's part when they merge, so a batch of
        such a file gathers nothing."""
        for c in self.columns:
            if c in self.over or c in self.skipped:
                continue
            img = order_image(frame[c])
            if img is None or img[0] != "num":
                self.skipped.add(c)  # not numeric (text of numbers: a value-level mix)
                self._parts.pop(c, None)
                continue
            _, x, valid = img
            k = int(np.count_nonzero(valid))
            self._append(c, (x, None if k == valid.size else valid, cell_id, key_codes, k))

    def _append(self, c: str, part: tuple) -> None:
        """Add a part: (values, cell ids, key codes) as read, or a batch's ungathered
        (values, valid or None, cell ids, key codes, number valid)."""
        self._count[c] = self._count.get(c, 0) + (int(part[0].size) if len(part) == 3
                                                  else part[4])
        if self._count[c] > SORTED_RECORDS:
            self.over.add(c)
            self._parts.pop(c, None)
            return
        self._parts.setdefault(c, []).append(part)

    def merge(self, other: SortedValues) -> None:
        """Add another partial's records (a Dask piece's)."""
        self.over |= other.over
        self.skipped |= other.skipped
        for c in self.columns:
            if c in self.over or c in self.skipped:
                self._parts.pop(c, None)
                continue
            for part in other._parts.get(c, []):
                self._append(c, part)

    def values(self, c: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(values, cell ids, key codes) of every record of ``c`` (None: over the limit or
        not numeric)."""
        if c in self.over or c in self.skipped or c not in self.columns:
            return None
        parts = self._parts.get(c, [])
        if not parts:
            return None
        parts = [_gathered(p) for p in parts]
        x, cell, keys = (np.concatenate([p[i] for p in parts]) for i in range(3))
        self._parts[c] = [(x, cell, keys)]
        return x, cell, keys


def _gathered(part: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(valid values, their cell ids, their key codes as int32) of a part."""
    if len(part) == 3:
        return part
    x, valid, cell_id, key_codes, _ = part
    if valid is None:
        return x, cell_id, np.asarray(key_codes, dtype=np.int32)
    return x[valid], cell_id[valid], key_codes[valid].astype(np.int32)


def sorted_parts(x: np.ndarray, cell: np.ndarray, key_codes: np.ndarray,
                 small_limit: int, spread: np.ndarray | None = None) -> dict[str, OrderPart]:
    """The ordered tables of the three sorted relations (module docstring) of one column: its
    values ``x``, each record's ``cell`` id and ``key_codes``, in any order.

    Each relation is a function of the record's distinct value only (its group g among the
    sorted distinct values u_0 < u_1 < ...: previous u_g - u_{g-1}, next u_{g+1} - u_g, rank
    = the records below u_g), so the records are never put in sorted order: the values'
    distinct groups (:func:`_distinct_groups`) give every record's g, and an ordered table is
    the same whatever the order of its records (counts, per-bin extremes, sorted (cell, bin)
    pairs). At 1M records this is a fifth of a lexsort by (value, cell) and its gathers.
    ``spread``: the intervals the tables keep (:func:`~.order.key_spreads`)."""
    n = x.size
    fcode, fcell = factorize_sorted(np.asarray(cell, dtype=np.int64))
    cells = BatchCells.of(fcode, fcell, key_codes,
                          np.bincount(fcode, minlength=fcell.size) < small_limit, spread)
    gval, group, gsize = _distinct_groups(x)
    first = np.cumsum(gsize) - gsize  # the records below each distinct value
    single = gsize[group] == 1
    with np.errstate(invalid="ignore", over="ignore"):
        step = np.diff(gval)
        prev = np.r_[np.nan, step][group]
        nxt = np.r_[step, np.nan][group]
    rank = first[group].astype(np.float64)
    out = {}
    for op, img, valid in (("diff:previous", prev, single & np.isfinite(prev)),
                           ("diff:next", nxt, single & np.isfinite(nxt)),
                           ("rank", rank, np.ones(n, dtype=bool))):
        out[op] = image_part("num", np.where(valid, img, 0.0), valid, cells)
    return out


def _distinct_groups(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(x, return_inverse=True, return_counts=True)`` of numbers without NaN.
    A column of few distinct values (judged on every 256th value) is hashed first
    (``pd.factorize``) and only its distinct values are sorted: at 1M records 10 ms against
    93 for 80 values, 80 against 132 for 145,000; a column of mostly distinct values is
    sorted whole (hashing first would double its cost). The same result either way."""
    if not x.size:
        return x, np.zeros(0, np.int64), np.zeros(0, np.int64)
    sample = x[::256]
    if np.unique(sample).size > sample.size // 2:
        gval, group, gsize = np.unique(x, return_inverse=True, return_counts=True)
        return gval, group.reshape(-1), gsize
    codes, uniq = pd.factorize(x)
    order = np.argsort(uniq)
    rank = np.empty(uniq.size, np.int64)
    rank[order] = np.arange(uniq.size)
    group = rank[codes]
    return uniq[order], group, np.bincount(group, minlength=uniq.size)
