"""sort_inplace (the id check's and the order's sorts on every core) gives ``np.sort``'s array:
the parts' sorted runs merged by one stable sort, whatever the parts, duplicates and dtype;
split_sort (grouped by the top digit, each group sorted in cache) too, whatever the values'
spread."""

from __future__ import annotations

import numpy as np
import pytest

from sdc.method.sorting import (
    PARALLEL_SORT_FROM,
    SPLIT_SORT_FROM,
    distinct,
    sort_inplace,
    split_sort,
)
from sdc.pipeline.order import argsort_u64

N = PARALLEL_SORT_FROM + 7  # the smallest arrays sorted in parts, and a remainder


ARRAYS = {
    "uint64 hashes": lambda r: r.integers(0, 2**63, N, dtype=np.int64).view(np.uint64)
    * np.uint64(2) + np.uint64(1),
    "uint64 top bits set": lambda r: np.uint64(2**64 - 1) - r.integers(0, 1000, N).astype(
        np.uint64),
    "int64 with negatives and ties": lambda r: r.integers(-50, 50, N).astype(np.int64),
    "int32": lambda r: r.integers(-2**31, 2**31 - 1, N).astype(np.int32),
    "reversed": lambda r: np.arange(N, 0, -1, dtype=np.uint64),
}


@pytest.mark.usefixtures("both_sorts")
@pytest.mark.parametrize(("name", "parts"), [(name, parts) for name in ARRAYS
                                             for parts in ((None, 3) if "hashes" in name
                                                           else (2,))])
def test_sort_inplace_is_np_sort(name: str, parts: int | None) -> None:
    a = ARRAYS[name](np.random.default_rng(48))
    want = np.sort(a)
    sort_inplace(a, parts)
    np.testing.assert_array_equal(a, want)
    assert a.dtype == want.dtype


@pytest.mark.usefixtures("both_sorts")
def test_small_and_other_arrays_are_sorted_in_one_call() -> None:
    """Below the size, floats and 2-D arrays: ``ndarray.sort`` itself (NaN last)."""
    for a in (np.array([3, 1, 2], np.uint64), np.array([2.0, np.nan, -1.0]),
              np.array([[3, 1], [2, 0]])):
        want = np.sort(a)
        sort_inplace(a, 4)
        np.testing.assert_array_equal(a, want)



SPREADS = {
    "uniform hashes": lambda r, n: r.integers(0, 2**63, n, dtype=np.int64).view(np.uint64)
    * np.uint64(2) + np.uint64(1),
    "int64 across zero": lambda r, n: r.integers(-2**62, 2**62, n, dtype=np.int64),
    "int64 extremes": lambda r, n: r.choice(np.array([-2**63, -1, 0, 2**63 - 1], np.int64), n),
    "uint64 extremes": lambda r, n: r.choice(np.array([0, 1, 2**63, 2**64 - 1], np.uint64), n),
    "all equal": lambda r, n: np.full(n, 12345, np.uint64),
    "two values": lambda r, n: r.integers(0, 2, n).astype(np.uint64) * np.uint64(2**40),
    "skewed: most in one group": lambda r, n: np.where(
        r.random(n) < 0.98, r.integers(0, 1000, n), r.integers(0, 2**62, n)).astype(np.int64),
    "sorted runs (packed keys)": lambda r, n: np.sort(r.integers(0, 2**62, n)).astype(
        np.uint64)[::-1].copy(),
}


@pytest.mark.parametrize("name", list(SPREADS))
@pytest.mark.parametrize("n", [0, 1, 2, 511, SPLIT_SORT_FROM + 3, 300_001])
def test_split_sort_is_np_sort(name: str, n: int) -> None:
    """Every spread of values (the digit's range from the minimum and maximum, groups empty or
    holding nearly everything) and sizes around a group and the split size: ``np.sort``."""
    a = SPREADS[name](np.random.default_rng(n), n)
    want = np.sort(a)
    split_sort(a)
    np.testing.assert_array_equal(a, want)
    assert a.dtype == want.dtype


def test_split_sort_of_a_view_and_of_other_dtypes() -> None:
    """A strided view is sorted where it lies (the array around it untouched); 32-bit and
    float arrays go to ``ndarray.sort``."""
    base = np.random.default_rng(3).integers(0, 2**62, 2 * (SPLIT_SORT_FROM + 9)).astype(
        np.int64)
    odd = base[1::2].copy()
    view = base[::2]
    want = np.sort(view)
    split_sort(view)
    np.testing.assert_array_equal(base[::2], want)
    np.testing.assert_array_equal(base[1::2], odd)
    for a in (np.array([3, -1, 2], np.int32), np.array([2.0, np.nan, -1.0])):
        want = np.sort(a)
        split_sort(a)
        np.testing.assert_array_equal(a, want)


@pytest.mark.usefixtures("both_sorts")
def test_argsort_u64_in_parts_is_the_stable_argsort() -> None:
    """argsort_u64 sorts its packed keys with sort_inplace: at the parallel size with equal
    top bits (keys that differ only in their low bits) the positions are still numpy's
    stable argsort."""
    rng = np.random.default_rng(7)
    keys = (rng.integers(0, 2**20, N).astype(np.uint64) << np.uint64(40)) | rng.integers(
        0, 4, N).astype(np.uint64)
    np.testing.assert_array_equal(argsort_u64(keys), np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("dtype", [np.uint64, np.int64, np.int32, np.uint16, np.int8, bool])
def test_distinct_is_np_unique(dtype) -> None:
    """``distinct`` gives np.unique's array (values, order, dtype) for integer and boolean
    arrays of every size, with and without repeats and negatives; other arrays are
    np.unique's own."""
    rng = np.random.default_rng(5)
    info = np.iinfo(np.uint8 if dtype is bool else dtype)
    lo = 0 if dtype is bool else int(info.min)
    hi = 1 if dtype is bool else int(info.max)
    for n in (0, 1, 2, 3, 1000, 100_000):
        for span in (2, 50, None):  # a few values repeated, or most values distinct
            top = hi if span is None else min(hi, lo + span)
            a = rng.integers(lo, top, n, endpoint=True, dtype=np.int64 if hi < 2**63 else np.uint64)
            a = a.astype(dtype)
            got, want = distinct(a), np.unique(a)
            assert got.dtype == want.dtype and np.array_equal(got, want), (n, span)
    f = np.array([2.5, np.nan, 1.0, 2.5, np.nan])
    assert np.array_equal(distinct(f), np.unique(f), equal_nan=True)
