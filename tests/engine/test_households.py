"""Household files: config of household-level keys and the within-household constancy check."""

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.engine.households import MAX_LISTED, check_households, household_codes
from sdc.errors import InputError
from sdc.io.batches import check_streamable

HH = {
    "name": "hh",
    "input": {"path": "x.csv", "household_id": "hid", "household_columns": ["roof"]},
    "key_variables": {"region": {"categories": [1, 2, 3], "level": "household"},
                      "sex": {"categories": [1, 2]}, "age": {"range": [0, 99]}},
    "partition": {"region": "as_is", "sex": "as_is", "age": {"bands": [0, 18, 65]}},
    "risk": {"xi": 0.395},
    "seed": 1,
}


def _cfg(**input_over):
    d = {k: (dict(v) if isinstance(v, dict) else v) for k, v in HH.items()}
    d["input"] = {**HH["input"], **input_over}
    return sdc.parse_config(d)


def _frame(n_h=50, seed=3):
    rng = np.random.default_rng(seed)
    size = rng.integers(1, 6, n_h)
    hid = np.repeat(np.arange(100, 100 + n_h), size)
    region = np.repeat(rng.integers(1, 4, n_h), size)
    roof = np.repeat(rng.integers(1, 3, n_h), size)
    n = hid.size
    return pd.DataFrame({"hid": hid, "region": region, "roof": roof,
                         "sex": rng.integers(1, 3, n), "age": rng.integers(0, 100, n)})


def test_config_levels():
    cfg = _cfg()
    assert cfg.household_keys == ["region"]
    assert cfg.person_keys == ["sex", "age"]
    assert cfg.key_variables["sex"].level == "person"


@pytest.mark.parametrize("change,fragment", [
    ({"input": {"path": "x.csv"}}, "needs input.household_id"),
    ({"input": {"path": "x.csv", "household_id": "sex"}}, "also a key variable"),
    ({"input": {"path": "x.csv", "household_id": "hid", "id_column": "hid"}},
     "also input.id_column"),
    ({"input": {"path": "x.csv", "household_id": "hid", "drop": ["hid"]}}, "cannot be dropped"),
    ({"input": {"path": "x.csv", "household_id": "hid", "household_columns": ["sex"]}},
     "declare them with level: household"),
    ({"key_variables": {"region": {"categories": [1, 2]}, "sex": {"categories": [1, 2]}},
      "partition": {}}, "no key variable has level: household"),
    ({"key_variables": {"region": {"categories": [1, 2], "level": "household"}},
      "partition": {}}, "at least one person-level key"),
    ({"key_variables": {"region": {"categories": [1, 2], "level": "house"}}}, "level"),
])
def test_bad_household_configs(change, fragment):
    d = {**HH, **change}
    with pytest.raises(sdc.ConfigError) as err:
        sdc.parse_config(d)
    assert fragment in str(err.value)


def test_household_codes_group_members():
    f = _frame()
    code, first = household_codes(f, _cfg())
    assert (f["hid"].to_numpy()[first][code] == f["hid"].to_numpy()).all()
    assert (first == np.sort(first)).all() and (code[first] == np.arange(first.size)).all()


def test_constant_household_columns_pass():
    check_households(_frame(), _cfg())


def test_every_violating_household_is_counted():
    f = _frame(n_h=200)
    sizes = f.groupby("hid").size()
    multi = sizes[sizes > 1].index.to_numpy()
    bad = multi[:30]
    rows = f.index[f["hid"].isin(bad)]
    last = f.loc[rows].groupby("hid").tail(1).index  # one member of each gets another region
    f.loc[last, "region"] = f.loc[last, "region"] % 3 + 1
    with pytest.raises(InputError) as err:
        check_households(f, _cfg())
    msg = str(err.value)
    assert f"'region' differs within {bad.size} household(s)" in msg
    assert f"first {MAX_LISTED} of {bad.size} listed" in msg
    assert ", ".join(str(h) for h in np.sort(bad)[:MAX_LISTED]) in msg
    assert "'roof'" not in msg


def test_declared_household_column_and_missing_value():
    f = _frame()
    sizes = f.groupby("hid").size()
    h = sizes[sizes > 1].index[0]
    f["roof"] = f["roof"].astype(float)
    f.loc[f.index[f["hid"] == h][0], "roof"] = np.nan
    with pytest.raises(InputError, match=rf"'roof' differs within 1 household\(s\): {h};"):
        check_households(f, _cfg())


def test_missing_household_id_is_refused():
    f = _frame().astype({"hid": float})
    f.loc[3, "hid"] = np.nan
    with pytest.raises(InputError, match="1 row\\(s\\) have no household id \\(rows 4\\)"):
        check_households(f, _cfg())


@pytest.mark.parametrize("engine", ["streaming", "dask"])
def test_batch_engines_refuse_household_files(engine):
    with pytest.raises(InputError, match="household file .* --engine pandas"):
        check_streamable(_cfg(), engine)
