"""argsort_u64 (the public order's and the records file's sort) is numpy's stable argsort."""

from __future__ import annotations

import numpy as np
import pytest

from sdc.pipeline.order import argsort_u64, sort_positions


def _cases():
    rng = np.random.default_rng(5)
    n = 100_001
    return {
        "empty": np.zeros(0, np.uint64), "one": np.array([3], np.uint64),
        "two equal": np.array([5, 5], np.uint64), "two": np.array([7, 1], np.uint64),
        "hashes": rng.integers(0, 2**63, n, dtype=np.int64).view(np.uint64) * np.uint64(2),
        "few values (every key in a run)": rng.integers(0, 1000, n).astype(np.uint64),
        "all equal, top value": np.full(1000, 2**64 - 1, np.uint64),
        # equal top bits, different low bits: runs whose order comes from the whole key
        "runs": (rng.integers(0, 50, 77_777).astype(np.uint64) << np.uint64(50))
        | rng.integers(0, 3, 77_777).astype(np.uint64),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_argsort_u64_is_the_stable_argsort(name) -> None:
    keys = _cases()[name]
    got = argsort_u64(keys)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(sort_positions(keys), got)
