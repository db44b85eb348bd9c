"""Counting cells batch by batch gives the whole file's cell table and partition sets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.config.load import parse_config
from sdc.engine.batches import CellCounter, CellLocator, cell_table, decode_released
from sdc.engine.cells import cell_codes
from sdc.engine.partition import partition_cells


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
    cfg, frame = _config(), _frame(5000)
    counter = CellCounter(merge_every=3)
    for s in range(0, len(frame), batch):
        counter.add(cell_codes(frame.iloc[s:s + batch], cfg))
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
