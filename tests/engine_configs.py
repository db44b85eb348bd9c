"""Configs (as dicts) shared by the engine tests."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tests.conftest import SHARED_DATA

REPO = Path(__file__).resolve().parents[1]
ADULT_CSV = SHARED_DATA / "adult" / "adult.csv"

ADULT_CATEGORIES = {
    "sex": ["Male", "Female"],
    "race": ["White", "Black", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"],
    "marital-status": ["Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                       "Married-spouse-absent", "Married-AF-spouse"],
}


def adult_config(policy: str = "merge", theta: str = "theorem", xi: float = 0.395) -> dict:
    """The paper's partition on adult: sex x 7 age bands x White/Black/Other."""
    frame_countries = sorted(pd.read_csv(ADULT_CSV, sep=";", usecols=["native-country"])
                             ["native-country"].unique().tolist())
    return {
        "name": "adult-test",
        "input": {"path": str(ADULT_CSV), "delimiter": ";"},
        "key_variables": {
            "sex": {"categories": ADULT_CATEGORIES["sex"]},
            "age": {"range": [1, 99]},
            "race": {"categories": ADULT_CATEGORIES["race"]},
            "marital-status": {"categories": ADULT_CATEGORIES["marital-status"]},
            "native-country": {"categories": frame_countries},
        },
        "partition": {
            "sex": "as_is",
            "age": {"bands": [0, 18, 25, 35, 45, 55, 65]},
            "race": {"groups": {"White": ["White"], "Black": ["Black"],
                                "Other": ["Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other"]}},
        },
        "risk": {"households": "warn", "xi": xi, "theta": theta, "small_blocks": policy},
        "seed": 20260101,
    }


def assert_release_invariants(original: pd.DataFrame, result, config) -> None:
    """The release-level invariants of docs/METHOD.md sections 2-6, checked on every run."""
    import numpy as np

    import sdc

    keys = config.key_names
    released = result.frame
    assert len(released) == len(original)
    assert list(released.index) == list(original.index)
    # dropped identifiers are gone; every other column is there
    assert not set(config.input.drop) & set(released.columns)
    # non-key columns are unchanged for every record
    for c in released.columns:
        if c not in keys:
            assert released[c].equals(original[c]), c
    cells = result.cells
    rc, nc = cells.record_cell, result.released_cell
    # non-sensitive records are bit-identical; changes happen only inside PRBs
    ns = result.cell_prb[rc] < 0
    assert np.array_equal(rc[ns], nc[ns])
    pd.testing.assert_frame_equal(released[ns], original.drop(columns=list(config.input.drop))[ns])
    # records never leave their PRB (or merged block); no released cell was empty before
    assert np.array_equal(result.cell_prb[rc], result.cell_prb[nc])
    orig_keys = set(map(tuple, original[keys].astype(str).to_numpy()))
    rel_keys = set(map(tuple, released[keys].astype(str).to_numpy()))
    assert rel_keys <= orig_keys
    # partition-set counts equal (recomputed independently from the released file)
    before = sdc.partition_frame(original, config)
    after = sdc.partition_frame(released, config)
    units = partition_units(before.partition_keys, result.blocks)
    cnt_b = pd.Series(before.record_partition_set).map(dict(enumerate(before.partition_keys))).map(units)
    cnt_a = pd.Series(after.record_partition_set).map(dict(enumerate(after.partition_keys))).map(units)
    if not (result.blocks["n_partition_sets"] > 1).any():  # then every partition set is a unit
        assert cnt_a.notna().all()
    assert cnt_b.value_counts().sort_index().equals(cnt_a.value_counts().sort_index())
    # the certificate
    assert result.certificate <= config.risk.xi
    assert (result.blocks["max_risk"] <= config.risk.xi).all()
    assert result.blocks["changed"].sum() == result.n_changed


# -- household files (generate_household_sample): engine, report and CLI tests ---------------------
HOUSEHOLD_KEYS = {"region": {"range": [1, 12], "level": "household"},
                  "urbrur": {"categories": [1, 2], "level": "household"},
                  "dwelling": {"range": [1, 6], "level": "household"},
                  "sex": {"categories": [1, 2]}, "age": {"range": [0, 95]},
                  "relation": {"range": [1, 5]}}
HOUSEHOLD_PARTITION = {"age": {"bands": [0, 15, 30, 45, 60, 75]}, "sex": "as_is",
                       "relation": "as_is"}
HOUSEHOLD_INPUT = {"id_column": "person_id", "household_id": "hh_id",
                   "household_columns": ["water", "hh_weight"]}


def household_config(**input_extra) -> dict:
    """A household release of :func:`sdc.samples.generate_household_sample`'s file: household
    keys region, urbrur, dwelling; person keys sex, age, relation (a fresh dict each call)."""
    import copy

    return copy.deepcopy({
        "name": "gen",
        "input": {"path": "x.csv", **HOUSEHOLD_INPUT, **input_extra},
        "key_variables": HOUSEHOLD_KEYS,
        "partition": HOUSEHOLD_PARTITION,
        "risk": {"households": "warn", "xi": 0.5},
        "seed": 11,
    })


def partition_units(partition_keys: list[str], blocks: pd.DataFrame) -> dict[str, str]:
    """Map every partition key to the unit whose record count the release preserves exactly.

    PRAM never moves a record out of its PRB, so the record count of every partition set is
    preserved, except when small PRBs were merged: then records may move between the merged
    partition sets, and the preserved count is the merged group's total. The unit of a merged
    partition set is the merged block's key (its members joined by " + "); every other partition
    set is its own unit.
    """
    units = {k: k for k in partition_keys}
    for key, n in zip(blocks["partition_key"], blocks["n_partition_sets"], strict=True):
        if n > 1:
            for member in key.split(" + "):
                units[member] = key
    return units
