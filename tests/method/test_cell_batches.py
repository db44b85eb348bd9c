"""Counting cells batch by batch gives the whole file's cell table and partition sets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.config.load import parse_config
from sdc.method.cell_passes import CellCounter, CellLocator, cell_table, decode_released
from sdc.method.cells import cell_codes, combine_codes, fits_one_code, split_codes
from sdc.method.partition import partition_cells


def _config(missing="error"):
    return parse_config({
        "name": "b", "input": {"path": "x.csv", "drop": ["name"]},
        "key_variables": {"sex": {"categories": [1, 2]}, "age": {"range": [0, 91]},
                          "race": {"categories": ["w", "b", "o"], "missing": missing}},
        "partition": {"sex": "as_is", "age": {"bands": [0, 18, 65]}},
        "risk": {"xi": 0.395}, "seed": 1,
    })


def _frame(n, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"sex": rng.integers(1, 3, n), "age": rng.integers(0, 92, n),
                         "race": rng.choice(["w", "b", "o"], n, p=[0.8, 0.15, 0.05]),
                         "name": "x"})


@pytest.mark.parametrize("batch", [1, 7, 1000, 5000])
def test_merged_counts_equal_the_whole_file(batch):
    """``batch`` records a batch; with 1: the first 1,000 records one by one (1,000 partials,
    merged every 3), the other 4,000 in one batch (5,000 one-record batches cost 4 CPU s in
    pandas' per-call overhead and ask nothing more)."""
    cfg, frame = _config(), _frame(5000)
    counter = CellCounter(merge_every=3)
    starts = [*range(0, 1000), 1000] if batch == 1 else list(range(0, len(frame), batch))
    for s, e in zip(starts, [*starts[1:], len(frame)], strict=True):
        counter.add(cell_codes(frame.iloc[s:e], cfg))
    codes, counts = counter.result()
    cells = cell_table(codes, counts, cfg)
    whole = sdc.partition_frame(frame, cfg)
    assert np.array_equal(cells.key_codes, whole.cells.key_codes)
    assert np.array_equal(cells.frequency, whole.cells.frequency)
    part = partition_cells(cells, cfg)
    assert np.array_equal(part.cell_partition_set, whole.cell_partition_set)
    assert part.partition_keys == whole.partition_keys
    assert np.array_equal(part.sensitive, whole.sensitive)
    # every record is located in its own cell of the table
    loc = CellLocator(codes, cfg)(cell_codes(frame, cfg))
    assert np.array_equal(loc, whole.cells.record_cell)


def test_uncounted_cell_is_an_error():
    cfg, frame = _config(), _frame(50)
    codes, _ = np.unique(cell_codes(frame.iloc[:10], cfg), return_counts=True)
    with pytest.raises(sdc.InputError, match="changed between"):
        CellLocator(codes, cfg)(cell_codes(frame, cfg))


def test_decode_released_takes_all_key_values_of_the_new_cell():
    cfg, frame = _config(), _frame(200)
    whole = sdc.partition_frame(frame, cfg)
    rc = whole.cells.record_cell
    released = rc.copy()
    released[:5] = (rc[:5] + 1) % whole.cells.n_cells
    out = decode_released(frame, rc, released, whole.cells, cfg)
    assert "name" not in out
    again = sdc.partition_frame(out, cfg).cells
    assert out["age"].dtype == frame["age"].dtype  # integer keys stay integer
    new_codes = [whole.cells.key_codes[released[i]] for i in range(5)]
    got = [again.key_codes[again.record_cell[i]] for i in range(5)]
    assert np.array_equal(np.array(new_codes), np.array(got))
    assert out.iloc[5:].equals(frame.drop(columns=["name"]).iloc[5:])


# -- the one dtype rule of released key values (released_column), every engine -----------------
def _kv(**spec):
    return parse_config({"name": "b", "input": {"path": "x.csv"}, "key_variables": {"k": spec},
                         "risk": {"xi": 0.395}, "seed": 1}).key_variables["k"]


@pytest.mark.parametrize("values, spec, new, expected, dtype", [
    # numbers into a numpy column: the input dtype is kept
    (pd.Series([1, 2, 3], dtype="int64"), {"categories": [1, 2, 3]}, [2], [1, 3, 3], "int64"),
    (pd.Series([1.0, 2.0, np.nan]), {"categories": [1, 2, 3], "missing": "category"}, [3],
     [1.0, np.nan, np.nan], "float64"),
    # an integer column of a file with missing values that this batch does not have: int64
    # while no record becomes missing, object (None) when one does
    (pd.Series([1, 2, 3], dtype="int64"), {"categories": [1, 2, 3], "missing": "category"},
     [0], [1, 1, 3], "int64"),
    (pd.Series([1, 2, 3], dtype="int64"), {"categories": [1, 2, 3], "missing": "category"},
     [3], [1, None, 3], "object"),
    # nullable and text columns keep their dtype, also with missing values
    (pd.Series([1, 2, None], dtype="Int64"), {"categories": [1, 2, 3], "missing": "category"},
     [3], [1, pd.NA, pd.NA], "Int64"),
    (pd.Series(["a", "b", "c"], dtype=object), {"categories": ["a", "b", "c"]}, [2],
     ["a", "c", "c"], "object"),
    (pd.Series(["a", "b", None], dtype="string"),
     {"categories": ["a", "b", "c"], "missing": "category"}, [3], ["a", pd.NA, pd.NA], "string"),
])
def test_released_column_keeps_the_input_dtype_when_it_can(values, spec, new, expected, dtype):
    from sdc.method.cell_passes import released_column

    kv = _kv(**spec)
    before = values.copy()
    out = released_column(values, np.array([1]), np.array(new), kv)
    assert values.equals(before)  # the input column is not modified
    assert str(out.dtype) == dtype
    assert out.index.equals(values.index) and out.name == values.name
    got = [None if (x is None or x is pd.NA or (isinstance(x, float) and np.isnan(x))) else x
           for x in out.tolist()]
    want = [None if (x is None or x is pd.NA or (isinstance(x, float) and np.isnan(x))) else x
            for x in expected]
    assert got == want


def test_combine_codes_is_the_inverse_of_split_codes_and_sorts_rows() -> None:
    """One mixed-radix code per row: split back exactly, and code order = lexicographic row
    order (the cell numbering every engine shares)."""
    rng = np.random.default_rng(3)
    sizes = [7, 1, 300, 2**20, 5]
    rows = np.column_stack([rng.integers(0, s, 5000) for s in sizes]).astype(np.int64)
    code = combine_codes(rows.T, sizes, rows.shape[0])
    assert code.dtype == np.int64
    np.testing.assert_array_equal(split_codes(code, sizes), rows)
    np.testing.assert_array_equal(np.argsort(code, kind="stable"),
                                  np.lexsort(rows.T[::-1]))
    assert combine_codes([], [], 3).tolist() == [0, 0, 0]
    assert fits_one_code([2**31, 2**31 - 1]) and not fits_one_code([2**31, 2**31])


@pytest.mark.parametrize("n,sizes", [(20_000, [2, 92, 9]), (50, [2, 92, 9]), (3000, [7, 1 << 20]),
                                     (0, [3, 4])])
def test_dense_counts_and_key_codes_equal_the_sorting_ones(n, sizes) -> None:
    """code_counts (one bincount over a small key space, else np.unique), cell_key_codes
    (the key codes kept from the encoding) and the dependence counter's factorize by bincount
    give exactly what np.unique, split_codes and pd.factorize(sort=True) give."""
    from sdc.method.cells import cell_key_codes, code_counts, radix_sizes
    from sdc.method.dependence.tables import factorize_sorted

    rng = np.random.default_rng(n)
    rows = np.column_stack([rng.integers(0, s, n) for s in sizes]).astype(np.int64)
    code = combine_codes(rows.T, sizes, n)
    u, c = code_counts(code, sizes)
    eu, ec = np.unique(code, return_counts=True)
    np.testing.assert_array_equal(u, eu)
    np.testing.assert_array_equal(c, ec)
    assert u.dtype == np.int64 and c.dtype == np.int64
    f, cells = factorize_sorted(code + 5)
    ef, ecells = pd.factorize(code + 5, sort=True)
    np.testing.assert_array_equal(f, ef)
    np.testing.assert_array_equal(cells, ecells)
    cfg, frame = _config("category"), _frame(max(n, 1), seed=n)
    frame.loc[frame.index[::7], "race"] = None
    codes, keys = cell_key_codes(frame, cfg)
    np.testing.assert_array_equal(codes, cell_codes(frame, cfg))
    np.testing.assert_array_equal(keys, split_codes(codes, radix_sizes(cfg), per_key=True))
    assert keys.flags.f_contiguous
