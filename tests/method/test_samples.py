"""Tests for the census-like demo data generator (sdc.samples)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sdc.samples import (
    COLUMNS,
    DEFAULT_N,
    KEY_VARIABLES,
    MARITAL_COUNTS,
    PAPER_PROFILE,
    RACE_COUNTS,
    SAMPLE_FILENAME,
    cell_profile,
    generate_census_sample,
    write_census_sample,
)

COMMITTED_CSV = Path(__file__).resolve().parents[2] / "data_samples" / SAMPLE_FILENAME

#: Stated tolerance of the cell profile against the paper's (relative, each figure).
PROFILE_TOLERANCE = 0.03


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    return generate_census_sample()


def test_deterministic_same_seed(sample: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(sample, generate_census_sample())


def test_different_seed_differs(sample: pd.DataFrame) -> None:
    other = generate_census_sample(seed=1)
    assert not other["age"].equals(sample["age"])


def test_shape_columns_and_ids(sample: pd.DataFrame) -> None:
    assert sample.shape == (DEFAULT_N, len(COLUMNS)) == (59_033, 10)
    assert list(sample.columns) == list(COLUMNS)
    assert sample["person_id"].is_unique
    assert sample["person_id"].iloc[0] == "P0000001"
    assert sample["person_id"].str.fullmatch(r"P\d{7}").all()
    assert sample["full_name"].str.fullmatch(r"[A-Z][a-z]+ [A-Z][a-z]+").all()
    assert not sample.isna().any().any()


def test_key_domains(sample: pd.DataFrame) -> None:
    assert set(sample["sex"]) == {1, 2}
    assert set(sample["age"]) == set(range(92))
    assert set(sample["race"]) == set(range(1, 10))
    assert set(sample["marital"]) == set(range(1, 6))
    assert set(sample["puma"]) == set(range(101, 145))
    for key in KEY_VARIABLES:
        assert sample[key].dtype == np.int64


def test_non_key_domains(sample: pd.DataFrame) -> None:
    assert (sample["income"] >= 0).all()
    assert sample["hours_worked"].between(0, 99).all()
    assert sample["weight"].between(50, 300).all()
    # income is right-skewed and higher for working-age adults than for children
    assert sample["income"].mean() > sample["income"].median()
    assert (sample.loc[sample["age"] < 15, "income"] == 0).all()
    assert (sample.loc[sample["age"] < 16, "hours_worked"] == 0).all()


def test_table_1_and_2_marginals_exact(sample: pd.DataFrame) -> None:
    marital = sample["marital"].value_counts().sort_index()
    race = sample["race"].value_counts().sort_index()
    assert marital.tolist() == list(MARITAL_COUNTS) == [24688, 3156, 4742, 1040, 25407]
    assert race.tolist() == list(RACE_COUNTS)
    assert race.tolist() == [37201, 15239, 97, 1, 42, 3461, 20, 1349, 1623]


def test_age_depends_on_marital_status(sample: pd.DataFrame) -> None:
    children = sample[sample["age"] < 15]
    assert len(children) > 5_000
    assert (children["marital"] == 5).all()  # children are never married
    widowed = sample[sample["marital"] == 2]
    assert (widowed["age"] >= 65).mean() > 0.75
    assert sample.loc[sample["marital"] == 1, "age"].min() >= 15
    assert widowed["sex"].eq(2).mean() > 0.7  # most widowed people are women


def test_cell_profile_close_to_paper(sample: pd.DataFrame) -> None:
    profile = cell_profile(sample, KEY_VARIABLES)
    assert profile["n"] == PAPER_PROFILE["n"]
    assert profile["possible_cells"] == PAPER_PROFILE["possible_cells"] == 364_320
    for name in ("non_empty_cells", "singletons", "doubletons"):
        assert profile[name] == pytest.approx(PAPER_PROFILE[name], rel=PROFILE_TOLERANCE), name
    # figures reached with the default seed (documented in data_samples/README.md)
    assert (profile["non_empty_cells"], profile["singletons"], profile["doubletons"]) == (
        25_552,
        13_640,
        4_798,
    )


def test_cell_profile_toy_frame() -> None:
    frame = pd.DataFrame({"a": [1, 1, 1, 2, 2, 3], "b": ["x", "x", "y", "y", "y", "y"]})
    assert cell_profile(frame, ["a", "b"]) == {
        "n": 6,
        "non_empty_cells": 4,
        "singletons": 2,
        "doubletons": 2,
        "possible_cells": 6,
    }
    with pytest.raises(ValueError):
        cell_profile(frame, [])


def test_other_n_scales_marginals() -> None:
    small = generate_census_sample(n=1_000, seed=7)
    assert len(small) == 1_000
    assert small["race"].value_counts().sum() == 1_000
    # largest-remainder allocation: each count within 1 of its exact quota
    quota = np.asarray(MARITAL_COUNTS) * 1_000 / sum(MARITAL_COUNTS)
    counts = small["marital"].value_counts().reindex(range(1, 6), fill_value=0).to_numpy()
    assert np.all(np.abs(counts - quota) < 1)
    with pytest.raises(ValueError):
        generate_census_sample(n=0)


def test_committed_csv_matches_fresh_generation(tmp_path: Path) -> None:
    path = write_census_sample(tmp_path / "out")
    assert path == tmp_path / "out" / SAMPLE_FILENAME
    fresh = path.read_bytes()
    assert fresh.startswith(b"person_id,full_name,sex,age,race,marital,puma,")
    assert b"\r\n" not in fresh
    assert COMMITTED_CSV.read_bytes() == fresh


def test_csv_round_trip(tmp_path: Path, sample: pd.DataFrame) -> None:
    path = write_census_sample(tmp_path)
    back = pd.read_csv(path, encoding="utf-8")
    pd.testing.assert_frame_equal(back, sample, check_dtype=False)
