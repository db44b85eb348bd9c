"""argsort_u64 (the public order's and the records file's sort) is numpy's stable argsort; the
content hash is pandas' hash_array combined."""

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


@pytest.mark.usefixtures("both_sorts")
@pytest.mark.parametrize("name", list(_cases()))
def test_argsort_u64_is_the_stable_argsort(name) -> None:
    keys = _cases()[name]
    got = argsort_u64(keys)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(sort_positions(keys), got)
    # the repeated keys found on the way (the id check's): every key held twice or more
    pos, repeated = argsort_u64(keys, duplicates=True)
    np.testing.assert_array_equal(pos, got)
    values, counts = np.unique(keys, return_counts=True)
    np.testing.assert_array_equal(repeated, values[counts > 1])
    assert repeated.dtype == np.uint64


def test_the_repeated_keys_hide_among_many_equal_top_bits() -> None:
    """Two equal keys among 2**17 keys whose top bits all tie in runs of ~50 (most pairs in a
    run differ only in their low bits): argsort_u64 reports exactly the equal pair, and none
    when the pair is made to differ in the last bit."""
    rng = np.random.default_rng(11)
    n = 1 << 17
    # argsort_u64 keeps the top 64 - 17 bits: the records of one run differ below them only
    keys = (rng.integers(0, n // 50, n).astype(np.uint64) << np.uint64(17)) | np.arange(
        n, dtype=np.uint64)
    keys[77_000] = keys[5]
    _, repeated = argsort_u64(keys, duplicates=True)
    np.testing.assert_array_equal(repeated, keys[[5]])
    keys[77_000] ^= np.uint64(1)
    pos, repeated = argsort_u64(keys, duplicates=True)
    assert repeated.size == 0
    np.testing.assert_array_equal(pos, np.argsort(keys, kind="stable"))


def test_content_hash_is_pandas_hash_array_combined() -> None:
    """The content hash's numeric columns (own blocked finalizer) hash exactly as
    ``pandas.util.hash_array`` (ints of a narrow and a wide range, floats with NaN, -0.0,
    null; a temporal column) over more rows than one block, combined as documented."""
    import pyarrow as pa
    from pandas.util import hash_array

    from sdc.pipeline.order import _BLOCK, content_hash, order_keys

    rng = np.random.default_rng(9)
    n = 2 * _BLOCK + 11
    f = rng.normal(size=n)
    f[[3, 5]] = [np.nan, -0.0]
    cols = {"key": rng.integers(0, 50, n), "wide": rng.integers(-2**62, 2**62, n),
            "x": pa.array(f, mask=np.arange(n) == 7),
            "t": pa.array(rng.integers(0, 10**6, n), pa.int32()).cast(pa.date32())}
    table = pa.table(cols)
    fx = np.where(np.arange(n) == 7, 0.0, f)
    want_cols = [hash_array(cols["key"]), hash_array(cols["wide"]), hash_array(fx),
                 hash_array(table["t"].cast(pa.int32()).to_numpy().astype(np.int64))]
    want_cols[2][7] = np.uint64(0x5BD1E9955BD1E995)  # a null
    want = np.full(n, np.uint64(0xCBF29CE484222325), dtype=np.uint64)
    for h in want_cols:
        want ^= h
        want *= np.uint64(0x9E3779B97F4A7C15)
        want ^= want >> np.uint64(29)
    got = content_hash(table)
    assert np.array_equal(got, want)
    order, content = order_keys(table, 7, 11)
    assert np.array_equal(content, want) and len(np.unique(order)) == len(np.unique(want))


def test_content_hash_of_leading_keys_by_their_combinations() -> None:
    """Leading small-integer columns (keys, a boolean, a non-zero minimum) are hashed once per
    value combination and gathered: the same numbers as pandas' hash_array of each column
    combined one by one (over enough rows for that path; a null key or a wide column ends the
    leading run)."""
    import pyarrow as pa
    from pandas.util import hash_array

    from sdc.pipeline.order import _LUT_RANGE, content_hash

    rng = np.random.default_rng(3)
    n = 4 * _LUT_RANGE + 1001
    sex, age = rng.integers(0, 2, n).astype(bool), rng.integers(0, 92, n) + 5
    region = rng.integers(-3, 40, n).astype(np.int32)
    x = rng.normal(size=n)
    for cols in ({"sex": sex, "age": age, "region": region, "x": x},
                 {"age": age, "gap": pa.array(region, mask=np.arange(n) == 9), "sex": sex},
                 {"age": age, "region": region, "wide": rng.integers(0, 2**40, n), "s": sex}):
        table = pa.table(cols)
        want = np.full(n, np.uint64(0xCBF29CE484222325), dtype=np.uint64)
        for name in cols:
            col = table[name]
            col = (col.fill_null(0) if col.null_count else col).to_numpy(zero_copy_only=False)
            h = hash_array(col.astype(np.float64 if col.dtype.kind == "f" else np.int64))
            if table[name].null_count:
                h[9] = np.uint64(0x5BD1E9955BD1E995)
            want ^= h
            want *= np.uint64(0x9E3779B97F4A7C15)
            want ^= want >> np.uint64(29)
        assert np.array_equal(content_hash(table), want), list(cols)


def test_content_hash_of_leading_keys_by_cell() -> None:
    """Given every record's cell (its key values), the leading integer key columns are hashed
    for one record of each cell and gathered: the same numbers as without the cells, whether
    every leading column is a key, only the first ones are, a null key ends the run, or a
    non-key comes first (the cell is then not used)."""
    import pyarrow as pa

    from sdc.pipeline.order import content_hash

    rng = np.random.default_rng(4)
    n = 50_003
    sex, age = rng.integers(1, 3, n), rng.integers(0, 92, n) + 5
    region = rng.integers(-3, 40, n).astype(np.int32)
    x = rng.normal(size=n)
    for cols, keys in (({"sex": sex, "age": age, "region": region, "x": x},
                        {"sex", "age", "region"}),
                       ({"sex": sex, "age": age, "region": region, "x": x}, {"sex", "age"}),
                       ({"age": age, "gap": pa.array(region, mask=np.arange(n) == 9),
                         "sex": sex}, {"age", "gap", "sex"}),
                       ({"x": x, "sex": sex, "age": age}, {"sex", "age"})):
        table = pa.table(cols)
        key_values = np.stack([np.asarray(table[k].fill_null(-99)) for k in cols if k in keys])
        _, cell = np.unique(key_values, axis=1, return_inverse=True)
        cell = rng.permutation(cell.max() + 1)[cell.ravel()]  # any numbering of the cells
        got = content_hash(table, frozenset(keys), cell)
        assert np.array_equal(got, content_hash(table)), (list(cols), keys)


@pytest.mark.usefixtures("both_sorts")
def test_argsort_u64_finds_equal_top_bits_across_its_blocks() -> None:
    """The only two keys sharing their top bits land in sorted slots 2**15 - 1 and 2**15, on
    both sides of a block of argsort_u64's chunked pass: their order still comes from the
    whole key (the later record, with the smaller low bits, first)."""
    n = 1 << 16
    top = np.arange(n, dtype=np.uint64)
    top[-1] = 32767  # shares its top bits with record 32767
    keys = (top << np.uint64(16)) | np.uint64(9)
    keys[-1] = (np.uint64(32767) << np.uint64(16)) | np.uint64(3)
    got = argsort_u64(keys)
    np.testing.assert_array_equal(got, np.argsort(keys, kind="stable"))
    assert got[32767] == n - 1 and got[32768] == 32767


@pytest.mark.usefixtures("both_sorts")
@pytest.mark.parametrize("name", ["hashes", "few values (every key in a run)", "runs",
                                  "two equal", "one"])
def test_argsort_u64_merges_the_batches_sorted_runs(name) -> None:
    """The count pass's batches each sort their packed identities (packed_run, positions from
    the batch's offset), one after the other; argsort_u64(runs=...) merges them: the same
    positions and repeated keys as from the keys alone, whatever the cuts. Runs that miss
    keys are ignored."""
    from sdc.pipeline.order import packed_run

    keys = _cases()[name]
    n = keys.size
    want, want_rep = argsort_u64(keys, duplicates=True)
    rng = np.random.default_rng(n)
    cuts = np.unique(np.r_[0, rng.integers(0, n + 1, 4), n])
    runs = [packed_run(keys[a:b], int(a), n) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    if n < 2:
        assert all(r is None for r in runs)
        return
    got, rep = argsort_u64(keys, duplicates=True, runs=np.concatenate(runs))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(rep, want_rep)
    partial = packed_run(keys[1:], 1, n)  # runs that miss a key: sorted from the keys
    np.testing.assert_array_equal(argsort_u64(keys, runs=partial), want)


def test_the_count_merge_places_each_batchs_run_at_its_rows() -> None:
    """CountMerge keeps the batches' sorted runs at their rows (one array for argsort_u64);
    the whole file's one part is kept without a copy; a part without a run, or parts that
    do not fill the rows, leave none."""
    from sdc.pipeline.count_parts import CountMerge, CountPart
    from sdc.pipeline.order import packed_run

    keys = np.random.default_rng(2).integers(0, 2**63, 1000, dtype=np.int64).view(np.uint64)

    made = []

    def merged(cuts, drop=None):
        m = CountMerge({}, None, n_known=keys.size, runs=True)
        for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:], strict=True)):
            part = CountPart(b - a, a, keys[a:b], codes=np.zeros(0, np.int64),
                             counts=np.zeros(0, np.int64))
            part.run = None if i == drop else packed_run(keys[a:b], a, keys.size)
            made.append(part.run)
            m.add(part)
        m.end()
        return m

    m = merged([0, 300, 301, 1000])
    np.testing.assert_array_equal(argsort_u64(keys, runs=m.runs), np.argsort(keys, kind="stable"))
    whole = merged([0, 1000])
    assert whole.runs is made[-1]  # the part's own array
    assert merged([0, 300, 1000], drop=1).runs is None
    assert merged([0, 300]).runs is None


def test_placed_parts_fill_their_rows_in_any_arrival_order() -> None:
    """PlacedParts (the count pass's kept cell codes and identity runs): parts placed at their
    rows in any order give the concatenation in row order; a missing array, a part past the
    end or rows left empty give None; the whole file's one part is kept without a copy."""
    from sdc.pipeline.count_parts import PlacedParts

    values = np.arange(100, dtype=np.int64) * 7
    cuts = [(40, 70), (0, 40), (70, 100)]
    placed = PlacedParts(100)
    for a, b in cuts:
        placed.add(a, values[a:b])
    np.testing.assert_array_equal(placed.result(), values)
    whole = PlacedParts(100)
    whole.add(0, values)
    assert whole.result() is values
    gap = PlacedParts(100)
    gap.add(0, values[:40])
    assert gap.result() is None
    missing = PlacedParts(100)
    missing.add(0, values[:40])
    missing.add(40, None)
    missing.add(40, values[40:])
    assert missing.result() is None
    past = PlacedParts(100)
    past.add(90, values[:20])
    assert past.result() is None
    assert PlacedParts(None).result() is None
