"""release_frame end to end: invariants, policies, reproducibility, real data."""

import re

import numpy as np
import pandas as pd
import pytest
from engine_configs import ADULT_CSV, REPO, adult_config, assert_release_invariants

import sdc
from sdc.method.cells import encode_cells

CENSUS_CONFIG = REPO / "configs" / "census_demo.yaml"

needs_adult = pytest.mark.skipif(not ADULT_CSV.exists(),
                                 reason="../shared/data/adult is absent (shared data not beside repo)")


@pytest.fixture(scope="module")
def census():
    cfg = sdc.load_config(CENSUS_CONFIG)
    frame = pd.read_csv(cfg.input_path)
    return frame, cfg


@pytest.fixture(scope="module")
def census_seed11(census):
    """The demo's release with seed 11, for the two tests that compare another release with
    it (a same-seed rerun, a shuffled file; read only)."""
    frame, cfg = census
    return sdc.release_frame(frame, cfg, seed=11)


@pytest.fixture(scope="module")
def adult():
    if not ADULT_CSV.exists():
        pytest.skip("../shared/data/adult is absent (shared data not beside repo)")
    return pd.read_csv(ADULT_CSV, sep=";")


def test_census_demo_release(census):
    frame, cfg = census
    res = sdc.release_frame(frame, cfg, seed=42)
    assert_release_invariants(frame, res, cfg)
    assert len(res.blocks) == 42  # 2 sexes x 7 age bands x 3 race groups, as in the paper
    assert res.blocks["k"].min() >= res.kmin
    assert (res.blocks["action"] == "theorem").all()
    # race groups are partition variables: White and Black counts are unchanged (Table 2)
    for code in (1, 2):
        assert (res.frame["race"] == code).sum() == (frame["race"] == code).sum()
    # the number of changed records is close to its expectation sum(theta * k):
    # Var = sum over sensitive records of p(1-p) with p = theta/t <= n; 5 SE band.
    p = res.theta / res.cells.frequency[res.cells.record_cell][res.record_prb >= 0]
    se = np.sqrt((p * (1 - p)).sum())
    assert abs(res.n_changed - res.blocks["expected_changed"].sum()) <= 5 * se


@needs_adult
@pytest.mark.parametrize("policy", ["merge", "calibrate"])
def test_adult_policies_certify(adult, policy):
    cfg = sdc.parse_config(adult_config(policy))
    res = sdc.release_frame(adult, cfg, seed=5)
    assert_release_invariants(adult, res, cfg)
    if policy == "merge":
        assert res.blocks["k"].min() >= res.kmin
        assert res.merges and (res.blocks["action"] == "merged+theorem").any()
    else:
        cal = res.blocks[res.blocks["action"] == "calibrated"]
        assert len(cal) >= 1 and (cal["k"] < res.kmin).all()
        # the one-cell PRB (Male, 0-17, Black) cannot be calibrated: it is merged
        assert res.blocks["partition_key"].str.contains(r"\+").any()


@needs_adult
def test_adult_fail_names_small_partition_sets(adult):
    cfg = sdc.parse_config(adult_config("fail"))
    with pytest.raises(sdc.SmallBlockError) as err:
        sdc.release_frame(adult, cfg, seed=5)
    msg = str(err.value)
    assert "sex=Male | age=0-17 | race=Black: k=1" in msg
    assert "kmin = 5" in msg and "small_blocks" in msg


@needs_adult
def test_adult_calibrated_theta_mode_changes_fewer_records(adult):
    res_thm = sdc.release_frame(adult, sdc.parse_config(adult_config("merge")), seed=1)
    res_cal = sdc.release_frame(adult, sdc.parse_config(adult_config("merge", "calibrated")), seed=1)
    assert res_cal.certificate <= 0.395
    assert (res_cal.blocks["theta"] <= res_thm.theta + 1e-12).all()
    assert res_cal.blocks["expected_changed"].sum() < res_thm.blocks["expected_changed"].sum()


@needs_adult
def test_hierarchy_partition_on_adult(adult):
    d = adult_config("merge")
    d["partition"]["age"] = {"hierarchy": str(ADULT_CSV.parent / "adult_hierarchy_age.csv"),
                             "level": 2}
    cfg = sdc.parse_config(d)
    res = sdc.release_frame(adult, cfg, seed=3)
    assert_release_invariants(adult, res, cfg)
    assert res.partition_sets["age"].str.contains("-").all()


def test_same_seed_same_output_and_different_seed_differs(census, census_seed11):
    frame, cfg = census
    a = census_seed11
    b = sdc.release_frame(frame, cfg, seed=11)
    c = sdc.release_frame(frame, cfg, seed=12)
    pd.testing.assert_frame_equal(a.frame, b.frame)
    assert not a.frame.equals(c.frame)


def test_shuffled_rows_give_the_same_outcome_per_record(census, census_seed11):
    frame, cfg = census
    a = census_seed11.frame.set_index("person_id").sort_index()
    shuffled = frame.sample(frac=1.0, random_state=3).reset_index(drop=True)
    b = sdc.release_frame(shuffled, cfg, seed=11).frame.set_index("person_id").sort_index()
    pd.testing.assert_frame_equal(a, b)


@needs_adult
def test_shuffled_rows_without_id_column_give_the_same_released_records(adult):
    cfg = sdc.parse_config(adult_config("merge"))
    a = sdc.release_frame(adult, cfg, seed=4).frame
    shuffled = adult.sample(frac=1.0, random_state=9).reset_index(drop=True)
    b = sdc.release_frame(shuffled, cfg, seed=4).frame
    # identical records are interchangeable, so compare (original, released) pairs as multisets
    pa = pd.concat([adult.add_prefix("o_"), a.add_prefix("r_")], axis=1)
    pb = pd.concat([shuffled.add_prefix("o_"), b.add_prefix("r_")], axis=1)
    cols = list(pa.columns)
    pd.testing.assert_frame_equal(pa.sort_values(cols).reset_index(drop=True),
                                  pb.sort_values(cols).reset_index(drop=True))


def test_outcome_does_not_depend_on_other_partition_sets(census):
    """Removing whole partition sets leaves every other record's outcome unchanged."""
    frame, cfg = census
    full = sdc.release_frame(frame, cfg, seed=8).frame.set_index("person_id")
    part = frame[frame["sex"] == 2]
    half = sdc.release_frame(part, cfg, seed=8).frame.set_index("person_id")
    pd.testing.assert_frame_equal(full.loc[half.index], half)


def _small_config(**risk):
    return sdc.parse_config({
        "name": "small",
        "input": {"path": "x.csv", "id_column": "id"},
        "key_variables": {"g": {"categories": ["a", "b", "c"]}, "x": {"range": [0, 9]}},
        "partition": {"g": "as_is"},
        "risk": {"xi": 0.395, **risk},
        "seed": 1,
    })


def _small_frame():
    # group a: 6 singleton cells -> PRB k=6; group b: 1 singleton + big cells -> k=1;
    # group c: only non-sensitive cells
    g = ["a"] * 6 + ["b"] + ["b"] * 5 + ["c"] * 6
    x = [0, 1, 2, 3, 4, 5] + [9] + [0] * 5 + [1] * 3 + [2] * 3
    return pd.DataFrame({"id": range(len(g)), "g": g, "x": x, "v": np.arange(len(g)) * 1.5})


def test_k1_prb_under_each_policy():
    frame = _small_frame()
    with pytest.raises(sdc.SmallBlockError, match=r"g=b: k=1"):
        sdc.release_frame(frame, _small_config(small_blocks="fail"), seed=1)
    for policy in ("merge", "calibrate"):
        cfg = _small_config(small_blocks=policy)
        res = sdc.release_frame(frame, cfg, seed=1)
        assert_release_invariants(frame, res, cfg)
        assert list(res.blocks["partition_key"]) == ["g=a + g=b"]
        assert res.blocks["action"].iat[0] == "merged+theorem"


def test_uncertifiable_everything_is_a_clear_error():
    frame = pd.DataFrame({"id": [1, 2, 3], "g": ["a", "a", "a"], "x": [0, 0, 1]})
    with pytest.raises(sdc.SmallBlockError, match="still have"):
        sdc.release_frame(frame, _small_config(small_blocks="merge"), seed=1)


def test_no_sensitive_cell_releases_input_minus_identifiers():
    frame = pd.DataFrame({"id": range(9), "g": ["a"] * 6 + ["b"] * 3, "x": [1] * 3 + [2] * 3 + [5] * 3})
    cfg = _small_config()
    res = sdc.release_frame(frame, cfg, seed=1)
    assert res.n_changed == 0 and len(res.blocks) == 0
    assert res.certificate == pytest.approx(1 / 3)
    assert res.certificate_at == {"source": "non_sensitive", "t": 3, "a": 3, "pick": "own",
                                  "t_z": 3}
    pd.testing.assert_frame_equal(res.frame, frame)


def test_missing_as_category_can_be_released():
    cfg = sdc.parse_config({
        "name": "m", "input": {"path": "x.csv"},
        # one record with a missing x: too few to certify on their own, so missing moves
        "key_variables": {"x": {"range": [0, 9], "missing": "category", "missing_moves": True}},
        "risk": {"xi": 0.395}, "seed": 1,
    })
    frame = pd.DataFrame({"x": [0, 1, 2, 3, None, 5, 6, 7, 7, 7], "w": range(10)})
    res = sdc.release_frame(frame, cfg, seed=2)
    assert_release_invariants(frame, res, cfg)
    assert res.blocks["k"].iat[0] == 7  # singletons 0, 1, 2, 3, 5, 6 and the missing category


def test_errors_name_column_value_rows_and_fix(census):
    frame, cfg = census
    bad = frame.copy()
    bad.loc[[3, 10], "race"] = 12
    with pytest.raises(sdc.InputError) as err:
        sdc.release_frame(bad, cfg, seed=1)
    msg = str(err.value)
    # the problems table sdc release prints: column, check, bad value, count, 1-based rows, fix
    assert re.search(r"race\s*\|[^|]*\|\s*12\s*\|\s*2\s*\|\s*4, 11\s*\|", msg), msg
    assert "key_variables.race.categories" in msg
    with pytest.raises(sdc.InputError, match="(?s)puma.*(not in the input|column present)"):
        sdc.release_frame(frame.drop(columns=["puma"]), cfg, seed=1)


def test_cells_never_allocate_the_cross_product():
    """Ten keys of 10^6 categories each: 10^60 possible cells, only the non-empty ones exist."""
    rng = np.random.default_rng(0)
    n = 50_000
    codes = [rng.integers(0, 10**6, n) for _ in range(10)]
    cells = encode_cells(codes, [10**6] * 10, [f"k{i}" for i in range(10)])
    assert cells.n_cells == n
    assert (cells.key_codes[cells.record_cell] == np.column_stack(codes)).all()


def test_merge_is_deterministic_and_joins_adjacent_bands():
    cfg = sdc.parse_config({
        "name": "bands", "input": {"path": "x.csv"},
        "key_variables": {"age": {"range": [0, 99]}, "z": {"range": [0, 999]}},
        "partition": {"age": {"bands": [0, 20, 40, 60]}},
        "risk": {"xi": 0.395}, "seed": 1,
    })
    # band 0-19: 2 singleton cells; 20-39: 10; 40-59: 3; 60+: 10
    ages = [5] * 2 + [25] * 10 + [45] * 3 + [70] * 10
    frame = pd.DataFrame({"age": ages, "z": range(len(ages))})
    res = sdc.release_frame(frame, cfg, seed=1)
    keys = list(res.blocks["partition_key"])
    # 0-19 (k=2) joins 20-39 (its only neighbour); 40-59 (k=3) joins the smaller-k neighbour,
    # ties broken towards the next band: 60+ (k=10) vs merged 0-39 (k=12) -> 60+
    assert keys == ["age=0-19 + age=20-39", "age=40-59 + age=60+"]
    again = sdc.release_frame(frame, cfg, seed=1)
    pd.testing.assert_frame_equal(res.blocks, again.blocks)


@pytest.mark.parametrize("dtype", ["int64", "Int64", "float64"])
def test_integer_keys_with_missing_values_in_any_dtype(dtype):
    cfg = sdc.parse_config({
        "name": "m", "input": {"path": "x.csv"},
        "key_variables": {"x": {"range": [0, 9], "missing": "category", "missing_moves": True},
                          "c": {"categories": [1, 2, 3], "missing": "category",
                                "missing_moves": True}},
        "risk": {"xi": 0.395}, "seed": 1,
    })
    x = pd.Series([0, 1, 2, 3, None, 5, 6, 7, 7, 7] if dtype != "int64" else [0, 1, 2, 3, 4, 5, 6, 7, 7, 7])
    c = pd.Series([1, None, 2, 3, 1, 1, 1, 1, 1, 1] if dtype != "int64" else [1, 1, 2, 3, 1, 1, 1, 1, 1, 1])
    frame = pd.DataFrame({"x": x.astype(dtype), "c": c.astype(dtype)})
    res = sdc.release_frame(frame, cfg, seed=2)
    assert_release_invariants(frame, res, cfg)
    bad = frame.copy()
    bad.loc[2, "x"] = 12
    with pytest.raises(sdc.InputError, match=r"x\s*\| in range 0\.\.9\s*\| 12(\.0)?\s*\| 1\s*\| 3\s"):
        sdc.release_frame(bad, cfg, seed=2)
