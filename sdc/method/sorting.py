"""Sorts of large integer arrays (issue 48: the id check's, the public order's and the records
file's sorts of 8 bytes a record were the largest CPU item of a 100M release).

numpy's quicksort of 1M random uint64 took ~50 ns a value on the host of eaebd51 (~30 ns for
64K: the array no longer fits the core's cache). :func:`split_sort` first groups the values by
their top digit (numpy's stable argsort of uint16 is a radix sort, O(n)) and then sorts each
group of ~512 values where it sits, in cache: half the CPU for 1M-4M hashes. numpy's sort
releases the GIL, so :func:`sort_inplace` sorts the parts of a larger array at once on several
threads; one stable sort then merges the sorted runs (numpy's stable sort of 64-bit integers
is timsort, which finds the runs and merges them: O(n log parts)). The result is
``a.sort()``'s: a sorted array of the same values (an in-place sort has no order of equal
elements to keep).

Where numpy sorts 64-bit integers with its AVX-512 kernels (x86-simd-sort; :data:`SIMD_SORT`),
one ``a.sort()`` is faster than all of the above: on the 2-core AVX-512 host of the
twenty-eighth session, 10M random uint64 in 0.11 s against 0.40-0.46 s for
:func:`sort_inplace` on two threads and 0.53-0.70 s for :func:`split_sort` (1M: 9 against
37 ms), and a stable sort that merges ten sorted runs of 1M takes 0.22 s against 0.12 s for
the quicksort of the same array. There :func:`sort_inplace` is ``a.sort()``.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["PARALLEL_SORT_FROM", "SIMD_SORT", "SPLIT_SORT_FROM", "distinct", "sort_inplace",
           "split_sort"]

#: arrays smaller than this are sorted by one thread (starting threads costs more than it
#: saves: at 2**21 elements one split sort takes ~0.06 s)
PARALLEL_SORT_FROM = 1 << 22
#: 64-bit arrays from this size on are sorted by :func:`split_sort` (below, numpy's sort
#: runs in cache already)
SPLIT_SORT_FROM = 1 << 16
_MAX_PARTS = 4
_GROUP = 512  # values per group of split_sort (measured: 256-2048 within 10% at 1M-4M)
_MAX_DIGIT_BITS = 16  # groups per split_sort at most 2**16 (a uint16 digit)
_CHUNK = 1 << 16  # values per chunk of the digit's computation (no 8-byte temporary)


def _simd_sort() -> bool:
    """Whether numpy sorts 64-bit integers with its AVX-512 kernels on this CPU (numpy 2.x
    dispatches x86-simd-sort on AVX512_SKX; other hosts keep the split sort, measured
    2x faster on the host of eaebd51)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # pragma: no cover - numpy 1.x
        return False
    return bool(features.get("AVX512_SKX"))


#: numpy's own sort of 64-bit integers is the fastest here (module docstring); the results
#: are the same either way (a sorted array of the same values)
SIMD_SORT = _simd_sort()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on Linux)
        return os.cpu_count() or 1


def split_sort(a: np.ndarray) -> None:
    """Sort the 1-D 64-bit integer array ``a`` in place (``a.sort()``'s result): the values
    grouped by their top digit ``(a - min) >> shift`` (2**bits groups of ~512 values for
    uniform values such as hashes; one stable radix argsort of the uint16 digits and one
    gather), then each group sorted in place. 18 bytes a value of temporaries. Values that
    crowd into few groups (a skewed column) are still sorted right, at about ``a.sort()``'s
    cost plus the grouping. At 1M uniform uint64: 27 against 53 ms (one thread)."""
    n = a.size
    if n < 2:
        return
    if a.dtype.itemsize != 8 or a.dtype.kind not in "iu" or a.ndim != 1:
        a.sort()
        return
    lo, hi = int(a.min()), int(a.max())
    span = hi - lo
    if span == 0:
        return
    bits = min(_MAX_DIGIT_BITS, max(1, (n // _GROUP).bit_length()))
    shift = np.uint64(max(0, span.bit_length() - bits))
    u = a.view(np.uint64)
    lo_u = np.uint64(lo % (1 << 64))  # a - lo >= 0, exact in uint64 arithmetic (wraps)
    digit = np.empty(n, np.uint16)
    for s in range(0, n, _CHUNK):
        x = u[s:s + _CHUNK] - lo_u
        x >>= shift
        digit[s:s + _CHUNK] = x
    grouped = np.take(a, np.argsort(digit, kind="stable"))
    bounds = np.zeros((1 << bits) + 1, np.int64)
    np.cumsum(np.bincount(digit, minlength=1 << bits), out=bounds[1:])
    del digit
    edges = bounds.tolist()
    for i in range(len(edges) - 1):
        s, e = edges[i], edges[i + 1]
        if e - s > 1:
            grouped[s:e].sort()
    a[...] = grouped


def sort_inplace(a: np.ndarray, parts: int | None = None) -> None:
    """Sort the 1-D integer array ``a`` in place: 64-bit arrays of ``SPLIT_SORT_FROM`` values or
    more by :func:`split_sort`; from ``PARALLEL_SORT_FROM`` on its ``parts`` slices (default:
    one per core, at most 4) on threads, then one stable sort that merges them; with
    :data:`SIMD_SORT` numpy's ``a.sort()``."""
    k = min(_cores(), _MAX_PARTS) if parts is None else int(parts)
    if (SIMD_SORT or a.ndim != 1 or a.dtype.kind not in "iu"
            or a.size < SPLIT_SORT_FROM):
        a.sort()
        return
    if a.size < PARALLEL_SORT_FROM or k < 2:
        split_sort(a)
        return
    bounds = np.linspace(0, a.size, k + 1).astype(np.int64)
    slices = [a[bounds[i]:bounds[i + 1]] for i in range(k)]
    with ThreadPoolExecutor(k - 1, thread_name_prefix="sdc-sort") as pool:
        done = [pool.submit(split_sort, s) for s in slices[1:]]
        split_sort(slices[0])
        for f in done:
            f.result()
    a.sort(kind="stable")


def distinct(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` (the sorted distinct values) of a 1-D integer or boolean array, by one
    sort: numpy 2.3+ counts the distinct integers of a plain ``np.unique`` (no ``return_*``)
    in a hash table, ~1 us a value when most values differ (numpy 2.4.6 on this 2-core
    machine: 1M uint64 1.08 s against 0.06 s for the sort; 6M of 200K distinct 1.6 s
    against 0.37 s). Other arrays go to ``np.unique``."""
    a = np.asarray(a)
    if a.ndim != 1 or a.dtype.kind not in "iub":
        return np.unique(a)
    s = np.sort(a)
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
