"""The public row order: a keyed hash of each public record, the same on every engine.

A global in-memory shuffle cannot run out of core, and its result would depend on how records
were batched. Instead every public record gets the 64-bit key

    order = fmix64(fmix64(content(record) ^ k0) + k1)    (k0, k1) from the seed and
                                                          a salt from the cell table

where ``content`` hashes the record's public values (all public columns but ``record_id``,
normalized through the public Arrow schema, so a value hashes alike whatever pandas dtype one
batch had). Records are sorted by (order, content); ``record_id`` numbers them 1..n. Records
with equal content are interchangeable, so the file's bytes do not depend on the input's row
order, on batching, or on the engine. ``order`` is a bijection of ``content`` (the murmur3
finalizer, the xor and the addition are invertible), so sorting by ``order`` alone is the
same as by (order, content): equal order keys mean equal content hashes, and the engines
need not carry the content hash along with the records. The order reveals nothing about the original records: it
is a function of the public values and the secret seed only. The salt (SHA-256 of the cell
table) makes the order of two releases of a series differ even where records are unchanged.

Out of core, records are bucketed by the top bits of ``order`` (:func:`sdc.io.spill.bucket_of`), each bucket
is sorted in memory and buckets are written in order: the same total order.
"""

from __future__ import annotations

import hashlib
from typing import Literal, overload

import numpy as np
import pyarrow as pa
from pandas.util import hash_array

from sdc.method.cells import CellTable
from sdc.method.draws.hashing import fmix_inplace
from sdc.method.sorting import SIMD_SORT, sort_inplace

__all__ = ["ORDER_COLUMNS", "argsort_u64", "content_hash", "order_keys", "order_salt",
           "sort_positions"]

ORDER_COLUMNS = ("__sdc_order",)
_MUL = np.uint64(0x9E3779B97F4A7C15)


def order_salt(cells: CellTable) -> int:
    """64-bit digest of the cell table (key codes and t_j): identical on every engine."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(cells.key_codes, dtype="<i8").tobytes())
    h.update(np.ascontiguousarray(cells.frequency, dtype="<i8").tobytes())
    return int.from_bytes(h.digest()[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


_LUT_RANGE = 1 << 16  # integer columns spanning at most this many values hash via a table


def _num_hash(vals: np.ndarray) -> np.ndarray:
    """``pandas.util.hash_array(vals)`` of int64 or float64 values, the same numbers (the
    SplitMix64 finalizer of the 64 bits; floats: NaN canonical, -0.0 as 0.0) with the
    finalizer run in cache-sized blocks (:func:`~sdc.method.draws.hashing.fmix_inplace`)."""
    u = vals.view(np.uint64).copy()
    if vals.dtype.kind == "f":
        nan = np.isnan(vals)
        if nan.any():
            u[nan] = np.array(np.nan, dtype=np.float64).view(np.uint64)
        u[u == np.array(-0.0, dtype=np.float64).view(np.uint64)] = 0
    fmix_inplace(u)
    return u


def _int_hash(vals: np.ndarray) -> np.ndarray:
    """``hash_array(vals)`` of int64 values; for a column of few distinct values (a key) the
    hash of every value in [min, max] once, then one gather from that small table (the same
    numbers, a quarter of the work)."""
    if vals.size > 4 * _LUT_RANGE:
        lo, hi = int(vals.min()), int(vals.max())
        if hi - lo < _LUT_RANGE:
            lut = _num_hash(np.arange(lo, hi + 1, dtype=np.int64))
            return lut[vals - lo] if lo else lut[vals]
    return _num_hash(vals)


_NULL_HASH = np.uint64(0x5BD1E9955BD1E995)


def _temporal_int64(col: pa.Array) -> pa.Array:
    """A date/time/timestamp/duration column's stored integers (date32 and time32 are
    32-bit: Arrow casts them to int32 only)."""
    if pa.types.is_date32(col.type) or pa.types.is_time32(col.type):
        return col.cast(pa.int32()).cast(pa.int64())
    return col.cast(pa.int64())


def _nested_hash(col: pa.Array) -> np.ndarray:
    """Hash of struct, list and map values: the children's hashes (struct fields in order;
    list elements mixed with their position, added up per list, with the list's length),
    so every nested value hashes by content; no Python loop over records."""
    t = col.type
    if pa.types.is_struct(t):
        h = np.full(len(col), np.uint64(0x84222325CBF29CE4), dtype=np.uint64)
        with np.errstate(over="ignore"):
            for i in range(t.num_fields):
                h ^= _column_hash(col.field(i))
                h *= _MUL
                h ^= h >> np.uint64(29)
        return h
    # list-like (list, large_list, fixed_size_list, map): offsets over the flattened values
    if pa.types.is_fixed_size_list(t):
        size = t.list_size
        offsets = np.arange(len(col) + 1, dtype=np.int64) * size + col.offset * size
        values = col.values
    else:
        offsets = np.asarray(col.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        values = col.values
    start, stop = offsets[:-1], offsets[1:]
    lo, hi = int(offsets[0]) if offsets.size else 0, int(offsets[-1]) if offsets.size else 0
    elem = _column_hash(values.slice(lo, hi - lo))
    with np.errstate(over="ignore"):
        if elem.size:
            pos = np.arange(elem.size, dtype=np.int64) - np.repeat(start - lo, stop - start)
            elem = _fmix64(elem + pos.astype(np.uint64) * _MUL)
        total = np.concatenate([np.zeros(1, dtype=np.uint64), np.cumsum(elem, dtype=np.uint64)])
        h = total[stop - lo] - total[start - lo]
        h ^= (stop - start).astype(np.uint64) * np.uint64(0xC4CEB9FE1A85EC53)
    return h


def _column_hash(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    t = col.type
    valid = None
    if col.null_count:
        valid = np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_boolean(t):
        col = col.cast(pa.int8())
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        vals = col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        h = _int_hash(vals)
    elif pa.types.is_floating(t):
        vals = col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.float64,
                                                                       copy=False)
        h = _num_hash(vals)  # -0.0 and 0.0 alike
    elif pa.types.is_temporal(t):
        vals = _temporal_int64(col).fill_null(0).to_numpy(zero_copy_only=False)
        h = _num_hash(np.asarray(vals, dtype=np.int64))
    elif pa.types.is_nested(t):
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        h = _nested_hash(col)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        # bytes as they are (any bytes, not only UTF-8): a valid UTF-8 value hashes as its text
        vals = col.to_numpy(zero_copy_only=False)
        h = hash_array(np.asarray(vals, dtype=object), categorize=False)
    else:
        vals = col.cast(pa.string()).to_numpy(zero_copy_only=False)
        h = hash_array(np.asarray(vals, dtype=object), categorize=False)
    if valid is None:
        return h
    return np.where(valid, h, _NULL_HASH)


def _mix(h: np.ndarray, ch: np.ndarray) -> None:
    """``h = (h ^ ch) * _MUL; h ^= h >> 29`` in place, in cache-sized blocks."""
    scratch = np.empty(min(h.size, _BLOCK), dtype=np.uint64)
    for i in range(0, h.size, _BLOCK):  # in cache-sized blocks: a loop over blocks
        y, t = h[i:i + _BLOCK], scratch[:min(_BLOCK, h.size - i)]
        y ^= ch[i:i + _BLOCK]
        y *= _MUL
        np.right_shift(y, np.uint64(29), out=t)
        y ^= t


_GRID_MAX = 1 << 22  # leading key columns whose value combinations number at most this many


def _small_ints(col: pa.ChunkedArray | pa.Array, n: int) -> tuple[np.ndarray, int, int] | None:
    """(values as int64, min, number of values in [min, max]) of an integer or boolean column
    without nulls spanning at most ``_LUT_RANGE`` values (a key), else None."""
    t = col.type
    if col.null_count or n <= 4 * _LUT_RANGE or not (pa.types.is_integer(t)
                                                     or pa.types.is_boolean(t)):
        return None
    if pa.types.is_boolean(t):
        col = col.cast(pa.int8())
    vals = col.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    lo, hi = int(vals.min()), int(vals.max())
    return (vals, lo, hi - lo + 1) if hi - lo < _LUT_RANGE else None


def _leading_keys_hash(columns: list, n: int, h0: np.uint64) -> tuple[np.ndarray | None, int]:
    """The content hash after the table's leading small-integer columns (the keys), when they
    are two or more and their value combinations number at most ``_GRID_MAX`` (and a quarter
    of the records): the hash of every combination of their [min, max] values once, then one
    gather by each record's combination (mixed radix): the same numbers as mixing the columns
    one by one, fewer passes over the records. (None, 0) otherwise."""
    lead: list[tuple[np.ndarray, int, int]] = []
    total = 1
    for col in columns:
        r = _small_ints(col, n)
        if r is None or total * r[2] > min(_GRID_MAX, n // 4):
            break
        lead.append(r)
        total *= r[2]
    if len(lead) < 2:
        return None, 0
    grid = np.full(total, h0, dtype=np.uint64)
    stride = total
    for _, lo, size in lead:  # the first column the most significant digit
        stride //= size
        digit = np.arange(total, dtype=np.int64) // stride % size + lo
        _mix(grid, _num_hash(digit))
    code = np.zeros(n, dtype=np.int64)
    for vals, lo, size in lead:
        code *= size
        code += vals
        if lo:
            code -= lo
    return grid[code], len(lead)


def _leading_by_cell(table: pa.Table, keys: frozenset[str], cell: np.ndarray,
                     h0: np.uint64) -> tuple[np.ndarray | None, int]:
    """The content hash after the table's leading key columns (integer, no nulls), when the
    records' cells ``cell`` are known: each of those columns' values is a function of the
    record's cell (an integer key value has one code), so they are hashed for one record of
    each cell and the hashes gathered by cell: the same numbers as mixing the columns, one
    scatter and one gather over the records. (None, 0) when no column qualifies."""
    n = table.num_rows
    m = 0
    for name, col in zip(table.column_names, table.columns, strict=True):
        t = col.type
        if name not in keys or col.null_count or not (pa.types.is_integer(t)
                                                       or pa.types.is_boolean(t)):
            break
        m += 1
    if m == 0 or n == 0:
        return None, 0
    cell = np.asarray(cell, dtype=np.int64)
    rep = np.full(int(cell.max()) + 1, -1, dtype=np.int64)
    rep[cell] = np.arange(n, dtype=np.int64)  # one record of every cell (any one)
    have = np.flatnonzero(rep >= 0)
    take = pa.array(rep[have])
    g = np.full(have.size, h0, dtype=np.uint64)
    for col in table.columns[:m]:
        _mix(g, _column_hash(col.take(take)))
    lut = np.zeros(rep.size, dtype=np.uint64)
    lut[have] = g
    return lut[cell], m


def content_hash(table: pa.Table, keys: frozenset[str] = frozenset(),
                 cell: np.ndarray | None = None) -> np.ndarray:
    """(n,) uint64 hash of every record's values (columns in the table's order); ``keys``
    and ``cell``: the key columns' names and every record's cell (its key values), when
    known (:func:`_leading_by_cell`)."""
    h0 = np.uint64(0xCBF29CE484222325)
    columns = list(table.columns)
    h, done = _leading_by_cell(table, keys, cell, h0) if cell is not None else (None, 0)
    if h is None:
        h, done = _leading_keys_hash(columns, table.num_rows, h0)
    if h is None:
        h = np.full(table.num_rows, h0, dtype=np.uint64)
    for col in columns[done:]:
        _mix(h, _column_hash(col))
    return h


_BLOCK = 1 << 15


def _fmix64(x: np.ndarray) -> np.ndarray:
    """murmur3's 64-bit finalizer (a new array)."""
    x = np.array(x, dtype=np.uint64, copy=True)
    _murmur_inplace(x)
    return x


def _murmur_inplace(x: np.ndarray) -> None:
    """murmur3's 64-bit finalizer of a contiguous uint64 array in place, in cache-sized
    blocks (one scratch block: no whole-array temporaries)."""
    scratch = np.empty(min(x.size, _BLOCK), dtype=np.uint64)
    for i in range(0, x.size, _BLOCK):  # a loop over blocks, not records
        y, t = x[i:i + _BLOCK], scratch[:min(_BLOCK, x.size - i)]
        np.right_shift(y, np.uint64(33), out=t)
        y ^= t
        y *= np.uint64(0xFF51AFD7ED558CCD)
        np.right_shift(y, np.uint64(33), out=t)
        y ^= t
        y *= np.uint64(0xC4CEB9FE1A85EC53)
        np.right_shift(y, np.uint64(33), out=t)
        y ^= t


def order_keys(table: pa.Table, seed: int, salt: int, keys: frozenset[str] = frozenset(),
               cell: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(order, content) uint64 keys of the public records in ``table`` (no ``record_id``);
    ``keys`` and ``cell``: :func:`content_hash`'s.

    ``order = fmix64(fmix64(content ^ k0) + k1)`` with (k0, k1) the first 128 bits of
    SHA-256("sdc-public-row-order|seed|salt"). The order is a function of public values only,
    so it needs to be well mixed, not cryptographically strong; two murmur3 finalizers per
    record cost a fraction of a SipHash.
    """
    content = content_hash(table, keys, cell)
    d = hashlib.sha256(f"sdc-public-row-order|{int(seed)}|{int(salt)}".encode()).digest()
    k0 = np.uint64(int.from_bytes(d[:8], "little"))
    k1 = np.uint64(int.from_bytes(d[8:16], "little"))
    with np.errstate(over="ignore"):
        order = content ^ k0
        _murmur_inplace(order)
        order += k1
        _murmur_inplace(order)
    return order, content


def _pack_bits(n: int) -> int | None:
    """The low bits that hold a position among ``n`` keys in :func:`argsort_u64`'s packed
    keys (None: no packing, numpy's argsort)."""
    b = max(1, (n - 1).bit_length())
    return None if n < 2 or b > 40 else b


def packed_run(keys: np.ndarray, offset: int, n: int) -> np.ndarray | None:
    """A batch's part of :func:`argsort_u64`'s packed keys, sorted: its ``keys`` at the
    positions ``offset``... of ``n`` keys in all. The count pass makes them on the batch
    threads; ``argsort_u64(runs=...)`` then only merges the sorted runs (at 10M records its
    serial sort took ~0.4 s of the pass's tail). None: ``n`` keys are not packed."""
    b = _pack_bits(n)
    if b is None:
        return None
    shift = np.uint64(b)
    packed = np.asarray(keys, dtype=np.uint64) >> shift
    for s in range(0, packed.size, _BLOCK):
        part = packed[s:s + _BLOCK]
        part <<= shift
        part |= np.arange(offset + s, offset + s + part.size, dtype=np.uint64)
    sort_inplace(packed)
    return packed


@overload
def argsort_u64(keys: np.ndarray, duplicates: Literal[False] = False,
                runs: np.ndarray | None = None) -> np.ndarray: ...


@overload
def argsort_u64(keys: np.ndarray, duplicates: Literal[True],
                runs: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]: ...


def argsort_u64(keys: np.ndarray, duplicates: bool = False,
                runs: np.ndarray | None = None) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``np.argsort(keys, kind="stable")`` of uint64 keys (int64 positions), by one
    ``np.sort`` of the keys' top bits with the position in the low ceil(log2 n) bits (at 5M
    keys 0.37 CPU s against 0.95 for numpy's argsort): that orders by top bits, then by
    position; the records sharing their top bits with another (about n^2 / 2^(65 - log2 n)
    pairs of distinct hashes, or equal keys) are then ordered by the whole key, stably.

    ``runs``: the keys' :func:`packed_run` parts, each sorted, one after the other in one
    array of ``n`` (sorted and turned into the positions in place: the result is a view of
    it). ``duplicates``: also the sorted distinct keys that occur more than once (empty:
    none).
    Equal keys share their top bits, so only those few records are compared: no gather of
    ``keys`` in sorted order (the id check's 10M-record gather and comparison, ~0.25 s)."""
    keys = np.asarray(keys, dtype=np.uint64)
    n = keys.size
    b = _pack_bits(n)
    if b is None:
        pos = np.argsort(keys, kind="stable").astype(np.int64, copy=False)
        return (pos, _repeated(keys[pos])) if duplicates else pos
    shift, low = np.uint64(b), np.uint64((1 << b) - 1)
    if runs is not None and runs.size == n:
        packed = runs  # sorted runs: the stable sort (timsort) merges them; numpy's AVX-512
        # quicksort is faster still (the packed keys are distinct: the same result)
        packed.sort(kind=None if SIMD_SORT else "stable")
    else:
        # two arrays of 8 bytes a record (the packed keys, the positions), each filled chunk
        # by chunk: the temporaries of whole-array expressions were fresh pages, each faulted
        # in (~0.4 s of 0.9 at 10M keys)
        packed = keys >> shift
        for s in range(0, n, _BLOCK):
            part = packed[s:s + _BLOCK]
            part <<= shift
            part |= np.arange(s, s + part.size, dtype=np.uint64)
        sort_inplace(packed)
    # the positions replace the packed keys in place (no fresh 8 bytes a record: at 10M the
    # page faults of a new array cost more than the pass); first the slots whose top bits
    # tie with the next slot's, a block at a time
    tied = []
    top = np.empty(min(n, _BLOCK), np.uint64)
    prev = None
    for s in range(0, n, _BLOCK):
        part = packed[s:s + _BLOCK]
        t = top[:part.size]
        np.right_shift(part, shift, out=t)
        if prev is not None and t[0] == prev:
            tied.append(np.array([s - 1], np.int64))
        same = np.flatnonzero(t[1:] == t[:-1])
        if same.size:
            tied.append(same + s)
        prev = t[-1]
        part &= low
    pos = packed.view(np.int64)
    repeated = np.zeros(0, np.uint64)
    if tied:
        # the runs of equal top bits keep their slots; inside them (positions ascending),
        # one stable sort by the whole key gives (key, position) order
        left = np.concatenate(tied)
        slots = np.unique(np.concatenate([left, left + 1]))
        sub = pos[slots]
        sub = sub[np.argsort(keys[sub], kind="stable")]
        pos[slots] = sub
        if duplicates:  # the in-run keys, sorted: equal keys are neighbours
            repeated = _repeated(keys[sub])
    return (pos, repeated) if duplicates else pos


def _repeated(sorted_keys: np.ndarray) -> np.ndarray:
    """The distinct values that occur more than once in sorted ``sorted_keys``."""
    same = sorted_keys[1:] == sorted_keys[:-1]
    return np.unique(sorted_keys[1:][same]) if same.any() else np.zeros(0, np.uint64)


def sort_positions(order: np.ndarray) -> np.ndarray:
    """Positions sorted by ``order`` (hence by (order, content), see the module docstring);
    the rare equal order keys (identical records, or a 64-bit collision of the content hash)
    keep their relative order (a stable sort: :func:`argsort_u64`)."""
    return argsort_u64(order)
