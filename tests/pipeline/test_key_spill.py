"""The key columns a batch runner spills as the released cell (sdc.pipeline.key_spill): which
keys qualify, and slim + rebuild giving back the released table itself (values, types, field
metadata and column order), so the public bytes do not change. The executors' byte equality
and the golden digests (tests/contract) check the whole release."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from sdc.config.load import parse_config
from sdc.io.public_files import PUBLIC_ID, frame_to_table
from sdc.method.cells import encode_cells, encode_key
from sdc.pipeline.key_spill import CELL_COLUMN, key_spill

KEYS = {
    "age": {"range": [0, 99]},                       # an integer range: spilled as the cell
    "region": {"categories": [11, 12, 31, 40]},       # integer categories: spilled
    "sex": {"categories": ["f", "m"]},                # text: kept
    "score": {"range": [0, 9]},                       # a float column: kept
    "tenure": {"categories": [1, 2, 3], "missing": "category"},  # a missing category: kept
}


def _frame(n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame({
        "age": rng.integers(0, 100, n), "region": rng.choice([11, 12, 31, 40], n),
        "sex": rng.choice(["f", "m"], n), "score": rng.integers(0, 10, n).astype(float),
        "tenure": rng.integers(1, 4, n), "income": rng.lognormal(8, 1, n).round(2)})


def _release(frame: pd.DataFrame):
    cfg = parse_config({"name": "k", "input": {"path": "x.parquet"}, "key_variables": KEYS,
                        "risk": {"xi": 0.395}, "seed": 1})
    codes = [encode_key(frame[k], k, cfg.key_variables[k]) for k in cfg.key_names]
    cells = encode_cells(codes, [cfg.key_variables[k].size for k in cfg.key_names],
                         cfg.key_names)
    schema = pa.schema([pa.field(PUBLIC_ID, pa.int64())]
                       + list(pa.Schema.from_pandas(frame, preserve_index=False)))
    return cfg, cells, schema


def test_integer_keys_of_a_range_or_integer_categories_are_spilled_as_the_cell():
    frame = _frame()
    cfg, cells, schema = _release(frame)
    spill = key_spill(cells, cfg, schema)
    assert spill is not None and spill.names == ("age", "region")
    derived = cfg.model_copy(update={"derived": ["age"]})
    assert key_spill(cells, derived, schema).names == ("region",)


@pytest.mark.parametrize("moved_share", [0.0, 0.3])
def test_slim_and_rebuild_give_back_the_released_table(moved_share):
    """Records keep their cell or take another one's (the released keys are then the other
    cell's values, as decode_released gives them); the spilled table (no age, no region, the
    cell) shuffled as a bucket is, then rebuilt, is the released table row for row."""
    frame = _frame()
    cfg, cells, schema = _release(frame)
    spill = key_spill(cells, cfg, schema)
    rng = np.random.default_rng(6)
    released = cells.record_cell.copy()
    move = rng.random(released.size) < moved_share
    released[move] = rng.integers(0, cells.n_cells, int(move.sum()))
    out = frame.copy()
    for k in ("age", "region"):
        dom = (np.arange(100) if k == "age" else np.array([11, 12, 31, 40]))
        out[k] = dom[cells.key_codes[released, cells.names.index(k)]]
    body = pa.schema([f for f in schema if f.name != PUBLIC_ID])
    table = frame_to_table(out, body).append_column("__order", pa.array(rng.random(len(out))))
    slim = spill.slim(table, released)
    assert "age" not in slim.column_names and CELL_COLUMN in slim.column_names
    perm = pa.array(rng.permutation(len(out)))
    ids = pa.array(np.arange(1, len(out) + 1))
    got = spill.rebuild(slim.take(perm).drop_columns(["__order"]).add_column(0, PUBLIC_ID, ids))
    want = table.take(perm).drop_columns(["__order"]).add_column(0, PUBLIC_ID, ids)
    assert got.schema.equals(want.schema, check_metadata=True)
    assert got.equals(want)
