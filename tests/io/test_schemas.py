"""sdc.io.schemas: the pandera input/output schemas and the all-problems-at-once table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pandera.pandas as pa
import pytest

import sdc
from sdc.io.schemas import (
    OutputSchemaError,
    input_schema,
    output_schema,
    validate_input,
    validate_output,
)

REPO = Path(__file__).resolve().parents[2]


def cfg(**over) -> sdc.ReleaseConfig:
    data = {
        "name": "t",
        "input": {"path": "x.csv", "id_column": "pid", "drop": ["name"], "weight": "w"},
        "key_variables": {
            "sex": {"categories": [1, 2]},
            "age": {"range": [0, 90]},
            "race": {"categories": ["a", "b"], "missing": "category"},
        },
        "risk": {"xi": 0.395},
    }
    data.update(over)
    return sdc.parse_config(data, Path("."))


def good() -> pd.DataFrame:
    return pd.DataFrame({"pid": [10, 11, 12], "name": ["x", "y", "z"], "sex": [1, 2, 1],
                         "age": [0, 45, 90], "race": ["a", None, "b"], "w": [1.0, 2.5, 0.1],
                         "other": ["q", "r", "s"]})


def row_of(msg: str, column: str, check: str) -> str:
    """The table line of ``column`` / ``check`` in an error message."""
    for line in msg.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) >= 2 and cells[0] == column and cells[1].startswith(check):
            return line
    raise AssertionError(f"no row {column}/{check} in:\n{msg}")


def _failures(schema: pa.DataFrameSchema, frame: pd.DataFrame) -> set[tuple]:
    """(column, check, failure case, row) of every problem pandera's own ``validate`` finds."""
    with pytest.raises(pa.errors.SchemaErrors) as err:
        schema.validate(frame, lazy=True)
    fc = err.value.failure_cases
    return set(zip(fc["column"], fc["check"], fc["failure_case"], fc["index"], strict=True))


def test_schemas_are_pandera() -> None:
    """The schemas do the checking themselves: pandera's own ``validate`` (not our wrapper)
    finds exactly the out-of-domain key and the duplicate ids of the input, and the
    out-of-domain key and the missing ``record_id`` of the output."""
    schema = input_schema(cfg())
    assert set(schema.columns) == {"pid", "name", "sex", "age", "race", "w"}
    pd.testing.assert_frame_equal(schema.validate(good()), good())
    got = _failures(schema, good().assign(sex=[1, 2, 7], pid=[10, 10, 12]))
    assert got == {("sex", "in_categories", 7, 2), ("pid", "field_uniqueness", 10, 0),
                   ("pid", "field_uniqueness", 10, 1)}
    out = output_schema(cfg())
    assert set(out.columns) == {"sex", "age", "race", "record_id"}
    public = good().drop(columns=["pid", "name"]).assign(record_id=[1, 2, 3])
    out.validate(public)
    got = _failures(out, public.assign(sex=[1, 2, 7]).drop(columns=["record_id"]))
    assert ("sex", "in_categories", 7, 2) in got
    assert any(c[2] == "record_id" for c in got)


def test_good_frame_passes_unchanged() -> None:
    df = good()
    out = validate_input(df, cfg())
    pd.testing.assert_frame_equal(out, df)


def test_every_problem_reported_at_once() -> None:
    df = pd.DataFrame({
        "pid": [1, 2, 2, 4, None, 6],
        "sex": [1, 3, None, 2, 2, 7],
        "age": [1, 2.5, 200, -1, 4, 5],
        "race": ["a", "c", None, "b", "a", "c"],
        "w": [1, 0, -1, np.nan, np.inf, 2],
    })
    with pytest.raises(sdc.InputError) as e:
        validate_input(df, cfg())
    msg = str(e.value)
    assert "10 problems" in msg
    line = row_of(msg, "name", "column present")
    assert "(missing)" in line and "add the column" in line
    line = row_of(msg, "sex", "not empty")
    assert "| 1 " in line and "| 3 " in line and "missing: category" in line
    line = row_of(msg, "sex", "in categories [1, 2]")
    assert "3.0, 7.0" in line and "| 2 " in line and "2, 6" in line
    assert "key_variables.sex.categories" in line
    line = row_of(msg, "age", "whole number")
    assert "2.5" in line and "| 1 " in line
    line = row_of(msg, "age", "in range 0..90")
    assert "200" in line and "-1" in line and "3, 4" in line and "range" in line
    line = row_of(msg, "race", "in categories")
    assert "'c'" in line and "| 2 " in line and "2, 6" in line
    row_of(msg, "pid", "not empty")
    line = row_of(msg, "pid", "unique")
    assert "2, 3" in line and "unique" in line
    line = row_of(msg, "w", "finite and > 0")
    assert "0.0, -1.0, inf" in line and "2, 3, 5" in line and "> 0" in line
    assert "w" in msg and "not empty" in row_of(msg, "w", "not empty")


def test_missing_category_allows_empty_but_error_does_not() -> None:
    df = good()
    df.loc[1, "race"] = None
    validate_input(df, cfg())  # race: missing: category
    df.loc[1, "sex"] = np.nan
    with pytest.raises(sdc.InputError, match=r"sex .*not empty"):
        validate_input(df, cfg())


def test_text_where_numbers_declared() -> None:
    df = good().astype({"sex": "str"})
    with pytest.raises(sdc.InputError) as e:
        validate_input(df, cfg())
    line = row_of(str(e.value), "sex", "in categories")
    assert "'1', '2'" in line and "values are text" in line


def test_non_numeric_age_reported_once() -> None:
    df = good().astype({"age": object})
    df.loc[0, "age"] = "old"
    with pytest.raises(sdc.InputError) as e:
        validate_input(df, cfg())
    msg = str(e.value)
    assert "1 problem" in msg and "'old'" in row_of(msg, "age", "whole number")


def test_missing_key_and_id_columns() -> None:
    df = good().drop(columns=["age", "pid"])
    with pytest.raises(sdc.InputError) as e:
        validate_input(df, cfg())
    msg = str(e.value)
    row_of(msg, "age", "column present")
    row_of(msg, "pid", "column present")


def test_many_failures_show_a_sample_and_the_full_count() -> None:
    n = 50_000
    df = pd.DataFrame({"pid": np.arange(n), "name": "x", "sex": np.full(n, 9),
                       "age": np.arange(n) % 200, "race": "a", "w": 1.0})
    with pytest.raises(sdc.InputError) as e:
        validate_input(df, cfg())
    line = row_of(str(e.value), "sex", "in categories")
    assert f"| {n} " in line and "1, 2, 3, 4, 5 ..." in line
    line = row_of(str(e.value), "age", "in range")
    assert f"| {n * 109 // 200} " in line and "92, 93, 94, 95, 96 ..." in line


def public_ok() -> pd.DataFrame:
    return pd.DataFrame({"record_id": [1, 2, 3], "sex": [1, 2, 1], "age": [0, 45, 90],
                         "race": ["a", None, "b"], "w": [1.0, 2.5, 0.1]})


def test_output_schema_passes_and_refuses() -> None:
    validate_output(public_ok(), cfg())
    bad = public_ok().assign(record_id=[1, 1, 3], pid=[1, 2, 3], name="x")
    bad.loc[2, "sex"] = 5
    with pytest.raises(OutputSchemaError) as e:
        validate_output(bad, cfg())
    msg = str(e.value)
    assert "1, 2" in row_of(msg, "record_id", "unique")
    row_of(msg, "pid", "not released")
    row_of(msg, "name", "not released")
    assert "5" in row_of(msg, "sex", "in categories")
    with pytest.raises(OutputSchemaError, match="record_id .*column present"):
        validate_output(public_ok().drop(columns=["record_id"]), cfg())


def test_census_demo_input_validates() -> None:
    config = sdc.load_config(REPO / "configs" / "census_demo.yaml")
    from sdc.io.read import read_input

    df = read_input(config)
    validate_input(df, config)
    df.loc[[5, 17], "puma"] = 999
    with pytest.raises(sdc.InputError) as e:
        validate_input(df, config)
    line = row_of(str(e.value), "puma", "in categories")
    assert "999" in line and "| 2 " in line and "6, 18" in line


def test_passes_schema_agrees_with_pandera() -> None:
    """The shortcut that skips pandera says True only where pandera's own ``validate`` passes:
    on the good frame, and False on a frame with each kind of problem (out of range, not an
    integer, out of categories, missing where not allowed, bad weight, missing column,
    forbidden column, duplicated column), each of which pandera rejects."""
    from sdc.io.schemas import passes_schema

    schema = input_schema(cfg(), unique_id=False)
    assert passes_schema(good(), schema)
    schema.validate(good(), lazy=True)
    bad = [good().assign(age=[0, 45, 91]), good().assign(age=[0, 45.5, 90]),
           good().assign(sex=[1, 2, 3]), good().assign(pid=[10, None, 12]),
           good().assign(w=[1.0, 0.0, 2.0]), good().assign(w=[1.0, np.inf, 2.0]),
           good().assign(race=["a", "c", "b"]), good().drop(columns=["age"]),
           good().drop(columns=["name"])]
    for frame in bad:
        assert not passes_schema(frame, schema)
        with pytest.raises(pa.errors.SchemaErrors):
            schema.validate(frame, lazy=True)
    out = output_schema(cfg()).remove_columns(["record_id"])
    public = good().drop(columns=["pid", "name"])
    assert passes_schema(public, out)
    assert not passes_schema(public.assign(name=["x", "y", "z"]), out)
    twice = pd.concat([public, public[["age"]]], axis=1)
    assert not passes_schema(twice, out)
    with pytest.raises(pa.errors.SchemaErrors):
        out.validate(public.assign(name=["x", "y", "z"]), lazy=True)
