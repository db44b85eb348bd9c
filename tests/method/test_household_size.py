"""A household key that is every household's member count (household size) is never moved to
another value (issue 44, docs/HOUSEHOLDS.md "Household size as a key"): before, the household
stage's PRBs mixed sizes (one partition set, or merges along the key) and under
``risk.composition: protect`` the households of a singular size drew their household keys among
all combinations, so households came out with a household size that disagreed with their
released members (laeken's eusilc: two 9-person households released with hsize 5). Now the
stages refuse (exit 2) naming the key, the values, the households and the fix, and the fixes
they name release consistent files.

Checked on the project's generated household sample (``hhsize`` added: the member count) and
on laeken's synthetic EU-SILC when /tmp/eusilc.csv is present."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from eusilc_helpers import export_eusilc

from sdc.config.load import load_config
from sdc.errors import InputError, SmallBlockError
from sdc.executors.memory import release_frame
from sdc.io.recode import recode_frame


def _release(tmp_path: Path, frame: pd.DataFrame, raw: dict, seed: int = 1) -> pd.DataFrame:
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(raw))
    cfg = load_config(p)
    return release_frame(recode_frame(frame, cfg), cfg, seed).public_table.to_pandas()


def _inconsistent(pub: pd.DataFrame, hid: str, key: str, top: int | None = None) -> int:
    """Released households whose ``key`` is not their number of released members (a top
    code ``top`` stands for every size >= top)."""
    g = pub.groupby(hid)[key].agg(["size", "first", "nunique"])
    ok = (g["size"] == g["first"]) | ((g["first"] == top) & (g["size"] >= top))
    return int((~ok | (g["nunique"] > 1)).sum())


@pytest.fixture(scope="module")
def sample() -> pd.DataFrame:
    from sdc.samples import generate_household_sample

    f = generate_household_sample(3000, seed=4, n_regions=6)
    f["hhsize"] = f.groupby("hh_id")["hh_id"].transform("size").astype("int64")
    return f[["hh_id", "person_id", "region", "hhsize", "sex", "age"]]


def _raw(**risk) -> dict:
    return {"name": "s", "input": {"path": "x.csv", "household_id": "hh_id",
                                   "id_column": "person_id"},
            "key_variables": {
                "region": {"range": [1, 6], "level": "household"},
                "hhsize": {"range": [1, 8], "level": "household"},
                "sex": {"categories": [1, 2]},
                "age": {"range": [0, 95], "recode": {"bands": [0, 15, 65]}}},
            "risk": {"xi": 0.395, "households": "warn", **risk}, "seed": 1}


def test_household_stage_refuses_a_block_mixing_household_sizes(tmp_path, sample):
    """No partition: one partition set holds every rare household cell, so its PRB mixes sizes
    (before the fix: households released with another size)."""
    with pytest.raises(SmallBlockError) as e:
        _release(tmp_path, sample, _raw())
    msg = str(e.value)
    assert "hhsize is every household's number of members" in msg
    assert "households" in msg and "partition: {hhsize: as_is}" in msg and "top:" in msg


def test_household_stage_within_household_size_values_is_consistent(tmp_path, sample):
    """The fix the refusal names (partition by its own values, not merged along) releases
    every household with its member count."""
    raw = _raw(merge_along=["region"], small_blocks="calibrate")
    raw["partition"] = {"hhsize": "as_is", "region": "as_is"}
    try:
        pub = _release(tmp_path, sample, raw)
    except SmallBlockError as e:  # a size that cannot be protected alone: the top-code fix
        assert "hhsize is every household's number of members" in str(e)
        assert "recode: {top:" in str(e)
        raw["key_variables"]["hhsize"]["recode"] = {"top": 5}
        pub = _release(tmp_path, sample, raw)
        assert _inconsistent(pub, "hh_id", "hhsize", top=5) == 0
        return
    assert _inconsistent(pub, "hh_id", "hhsize") == 0


def test_protect_refuses_the_singular_draw_of_household_size(tmp_path, sample):
    """Under protect, households of a size too rare for a PRB drew their household keys among
    all combinations: with hhsize a key, they came out with another size. Refused, naming
    the key, the value and the households; the fix named (hhsize a household column) is
    consistent."""
    # three 9-person households: a size too rare for a PRB, not exposed (>= 1/xi households)
    nine = pd.concat([pd.DataFrame({
        "hh_id": f"H999999{h}", "person_id": [f"P99999{h}{i}" for i in range(9)],
        "region": 1, "hhsize": 9, "sex": [1, 2] * 4 + [1],
        "age": ages}) for h, ages in enumerate(([40, 38, 70, 68, 12, 10, 8, 5, 2], [30] * 9,
                                                [70] * 9))])  # three compositions
    sample = pd.concat([sample, nine], ignore_index=True)
    raw = _raw(composition="protect")
    raw["key_variables"]["hhsize"]["range"] = [1, 9]
    with pytest.raises(SmallBlockError) as e:
        _release(tmp_path, sample, raw)
    msg = str(e.value)
    assert "hhsize is every household's number of members" in msg
    assert "household(s) of size" in msg and "input.household_columns" in msg
    del raw["key_variables"]["hhsize"]
    raw["input"]["household_columns"] = ["hhsize"]
    pub = _release(tmp_path, sample, raw)
    assert _inconsistent(pub, "hh_id", "hhsize") == 0


def test_a_key_that_is_not_the_member_count_is_left_alone():
    """Detection is by the data: region is not a size key, hhsize is, top-coded too."""
    import numpy as np

    from sdc.method.household_size import size_keys

    class _KV:
        def __init__(self, domain):
            self.domain = domain

    class _Cfg:
        key_variables = {"region": _KV([1, 2, 3]), "hhsize": _KV([1, 2, 3]),
                         "band": _KV(["a", "b"])}

    size = np.array([1, 2, 3, 4, 5, 2])
    codes = np.array([[0, 0, 0], [1, 1, 1], [2, 2, 1], [0, 2, 1], [1, 2, 0], [2, 1, 1]])
    found = size_keys(codes, size, ["region", "hhsize", "band"], _Cfg())
    assert list(found) == ["hhsize"]
    codes[3, 1] = 1  # a 4-person household with hhsize 2: not the member count
    assert size_keys(codes, size, ["region", "hhsize", "band"], _Cfg()) == {}


@pytest.fixture(scope="module")
def eusilc_csv(tmp_path_factory) -> Path:
    """R laeken's synthetic EU-SILC, exported once for the module (skips without R's laeken)."""
    return export_eusilc(tmp_path_factory)


def _eusilc(path: Path, **risk) -> tuple[pd.DataFrame, dict]:
    f = pd.read_csv(path)[["db030", "hsize", "db040", "rb030", "age", "rb090"]]
    raw = {"name": "e", "input": {"path": str(path), "household_id": "db030",
                                  "id_column": "rb030"},
           "key_variables": {
               "db040": {"categories": sorted(f.db040.unique()), "level": "household"},
               "hsize": {"range": [1, 9], "level": "household"},
               "rb090": {"categories": ["female", "male"]},
               "age": {"range": [-1, 100], "recode": {"bands": [-1, 16, 25, 50, 65]}}},
           "risk": {"xi": 0.395, **risk}, "seed": 1}
    return f, raw


def test_eusilc_protect_nine_person_households(tmp_path, eusilc_csv):
    """The reported case: two 9-person households of eusilc were released with hsize 5. Their
    size is exposed (fewer than 1/xi households): refused by default, naming it; left out
    with ``risk.exposed_sizes: drop``, every released household's hsize is its member count
    (hsize a key or a household column)."""
    f, raw = _eusilc(eusilc_csv, composition="protect")
    with pytest.raises(InputError) as e:
        _release(tmp_path, f, raw)
    assert "household size 9 (2 households)" in str(e.value)
    raw["risk"]["exposed_sizes"] = "drop"
    pub = _release(tmp_path, f, raw)
    assert _inconsistent(pub, "db030", "hsize") == 0 and len(pub) == len(f) - 18
    del raw["key_variables"]["hsize"]
    raw["input"]["household_columns"] = ["hsize"]
    assert _inconsistent(_release(tmp_path, f, raw), "db030", "hsize") == 0


def test_eusilc_household_stage(tmp_path, eusilc_csv):
    f, raw = _eusilc(eusilc_csv, households="warn")
    with pytest.raises(SmallBlockError) as e:
        _release(tmp_path, f, raw)
    assert "mixes its values 7, 8, 9" in str(e.value)
    raw["key_variables"]["hsize"]["recode"] = {"top": 7}
    raw["risk"]["small_blocks"] = "calibrate"
    assert _inconsistent(_release(tmp_path, f, raw), "db030", "hsize", top=7) == 0
