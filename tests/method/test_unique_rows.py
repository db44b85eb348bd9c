"""sdc.method.unique_rows.unique_rows gives what ``np.unique(a, axis=0, return_inverse=True)``
gives (rows, their order, the inverse, the dtype) on integer tables of every shape the household
code passes: narrow ranges (one int64 key per row), wide ones (the lexsort path), negative
values, small dtypes, one row, and tables with many equal rows."""

from __future__ import annotations

import numpy as np
import pytest

from sdc.method.unique_rows import unique_rows


@pytest.mark.parametrize(("shape", "lo", "hi", "dtype"), [
    ((1000, 3), 0, 4, np.int64), ((5000, 2), -3, 6000, np.int64), ((200, 40), 0, 3, np.int64),
    ((300, 5), 0, 2**40, np.int64), ((10, 2), 0, 3, np.int32), ((7, 1), -5, 5, np.int16),
    ((1, 3), 0, 1, np.int64), ((100, 6), 0, 255, np.uint8), ((400, 70), 0, 9, np.int64),
    ((50, 4), -2**62, 2**62, np.int64)])
def test_same_as_numpy(shape, lo, hi, dtype):
    rng = np.random.default_rng(sum(shape))
    a = rng.integers(lo, hi, shape, dtype=np.int64).astype(dtype)
    a[::3] = a[0]  # many equal rows
    rows, inv = np.unique(a, axis=0, return_inverse=True)
    got_rows, got_inv = unique_rows(a)
    assert got_rows.dtype == rows.dtype
    np.testing.assert_array_equal(got_rows, rows)
    np.testing.assert_array_equal(got_inv, inv.reshape(-1))


def test_empty_and_float_tables_go_to_numpy():
    for a in (np.zeros((0, 3), np.int64), np.array([[0.5, 1.0], [0.5, 1.0], [0.1, 2.0]])):
        rows, inv = np.unique(a, axis=0, return_inverse=True)
        got_rows, got_inv = unique_rows(a)
        np.testing.assert_array_equal(got_rows, rows)
        np.testing.assert_array_equal(got_inv, inv.reshape(-1))
