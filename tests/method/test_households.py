"""Household files: config of household-level keys and the within-household constancy check."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from engine_configs import household_config

import sdc
from sdc.errors import InputError
from sdc.io.batches import check_streamable
from sdc.method.dependence import DependenceError
from sdc.method.households import MAX_LISTED, check_households, household_codes
from tests.conftest import SHARED_DATA

HH = {
    "name": "hh",
    "input": {"path": "x.csv", "household_id": "hid", "household_columns": ["roof"]},
    "key_variables": {"region": {"categories": [1, 2, 3], "level": "household"},
                      "sex": {"categories": [1, 2]}, "age": {"range": [0, 99]}},
    "partition": {"region": "as_is", "sex": "as_is", "age": {"bands": [0, 18, 65]}},
    "risk": {"households": "warn", "xi": 0.395},
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


def test_the_batch_engines_take_household_files_with_perturb_and_derived():
    """Nothing of a household file is pandas-only: ``perturb:`` and ``derived:`` columns are
    released in batches too (tests/contract/test_executors.py compares the files)."""
    check_streamable(_cfg(), "streaming")  # sdc.pipeline.households
    parquet = _cfg(path="hh.parquet", format="parquet")
    check_streamable(parquet, "dask")  # the same passes as tasks (sdc.executors.dask)
    for cfg, engine in ((_cfg(), "streaming"), (parquet, "dask")):
        check_streamable(cfg.model_copy(update={"perturb": {"roof": {"epsilon": 1.0}}}), engine)
        check_streamable(cfg.model_copy(update={"derived": ["roof"]}), engine)


def _household_job(tmp_path: Path) -> Path:
    import yaml

    from sdc.samples import generate_household_sample

    frame = generate_household_sample(3000, seed=8, n_regions=12)
    frame.to_parquet(tmp_path / "hh.parquet", index=False, row_group_size=450)
    d = household_config()
    d["input"].update({"path": str(tmp_path / "hh.parquet"), "format": "parquet",
                       "drop": ["income"]})
    d["output"] = {"dir": str(tmp_path / "out")}
    d["engine"] = {"kind": "pandas", "batch_rows": 700}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(d))
    return tmp_path / "job.yaml"


def _batch_engines() -> list[str]:
    try:
        import distributed  # noqa: F401
    except ImportError:
        return ["streaming"]
    return ["streaming", "dask"]


def test_plan_of_a_household_file_is_the_same_on_every_engine(tmp_path):
    """``sdc plan --engine streaming|dask`` of a household file plans both stages in batches
    (the count and identity passes): the same PRBs, partition sets, certificate, counts and
    household note as the pandas engine (the plan does not depend on the seed)."""
    from sdc.release.job import plan_job

    job = _household_job(tmp_path)
    want = plan_job(job, engine="pandas")
    assert want.notes[0].startswith("household file: the PRBs below are the person stage's")
    for engine in _batch_engines():
        got = plan_job(job, engine=engine)
        for f in ("n_records", "n_cells", "n_sensitive_cells", "n_sensitive_records", "kmin",
                  "certificate", "certificate_at", "merges", "expected_changed"):
            assert getattr(got, f) == getattr(want, f), (engine, f)
        pd.testing.assert_frame_equal(got.blocks, want.blocks.drop(columns=["changed"]))
        pd.testing.assert_frame_equal(got.partition_sets, want.partition_sets)
        assert got.notes[0] == want.notes[0] and got.changed is None


def test_validate_of_a_household_file_is_the_same_on_every_engine(tmp_path):
    """``sdc validate`` checks a household file as its release does (both stages' dependence
    checks: the household id and the household columns are not person columns that give the
    keys away, which the pandas engine once claimed, exit 2 on a file that released), on every
    engine, the batch engines in batches; the same summary."""
    from sdc.release.job import validate_release_input

    job = _household_job(tmp_path)
    want = validate_release_input(job, engine="pandas")
    assert want.n_cells > want.n_sensitive_cells > 0
    for engine in _batch_engines():
        assert validate_release_input(job, engine=engine) == want, engine


# -- the household release ------------------------------------------------------------------------
# income is 0 for every child: it gives age and relation away (the dependence check of
# the person stage refuses it), so it is dropped
GEN = household_config(drop=["income"])


def _gen(n=6000, seed=4):
    from sdc.samples import generate_household_sample

    return generate_household_sample(n, seed=seed, n_regions=12)


@pytest.fixture(scope="module")
def gen_release():
    """``gen_release(n_seed, seed)``: GEN's release of ``_gen(seed=n_seed)`` with ``seed``,
    made once for the tests that check the same release (read only)."""
    made: dict[tuple[int, int], object] = {}

    def release(n_seed: int, seed: int):
        if (n_seed, seed) not in made:
            made[n_seed, seed] = sdc.release_frame(_gen(seed=n_seed), sdc.parse_config(GEN), seed)
        return made[n_seed, seed]

    return release


def _consistent(frame, config):
    """Every household has one value of each household-level key and household column."""
    hid = config.input.household_id
    cols = config.household_keys + list(config.input.household_columns)
    return bool((frame.groupby(hid, sort=False)[cols].nunique(dropna=False) == 1).all().all())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_household_is_consistent_and_the_household_stage_moves(seed, gen_release):
    cfg = sdc.parse_config(GEN)
    f = _gen(seed=seed)
    r = gen_release(seed, seed)
    st = r.households
    assert st.n_households == f["hh_id"].nunique()
    assert st.changed.any(), "the household stage should move some households here"
    assert _consistent(r.frame, cfg)
    assert r.certificate <= cfg.risk.xi + 1e-12
    assert r.certificate == max(st.certificate, st.person_certificate)
    # non-key values come out exactly as they went in (household columns included)
    for c in ("hh_id", "person_id", "water", "hh_weight"):
        assert r.frame[c].equals(f[c])
    # the households whose household keys changed are the household stage's changed ones
    hk = list(cfg.household_keys)
    before = f.groupby("hh_id", sort=False)[hk].first()
    after = r.frame.groupby("hh_id", sort=False)[hk].first().loc[before.index]
    assert int((before != after).any(axis=1).sum()) == int(st.changed.sum())
    # household-level cells counted in households: the household table has one row each
    assert int(st.result.cells.frequency.sum()) == st.n_households


def test_released_cells_index_the_extended_cell_table(gen_release):
    cfg = sdc.parse_config(GEN)
    r = gen_release(4, 7)
    names = cfg.key_names
    codes = r.cells.key_codes[r.released_cell]
    back = np.column_stack([
        pd.Index(cfg.key_variables[k].domain).get_indexer(r.frame[k]) for k in names])
    assert (codes == back).all()
    assert (r.cells.frequency == np.bincount(r.cells.record_cell, minlength=r.cells.n_cells)).all()
    assert (r.cell_prb[r.cells.frequency == 0] == -1).all()
    assert r.cell_partition_set.min() >= 0
    assert r.cell_partition_set.max() < len(r.partition_sets)


def test_household_draws_follow_the_household_id_not_the_row_order(gen_release):
    cfg = sdc.parse_config(GEN)
    f = _gen()
    a = gen_release(4, 5).frame
    perm = np.random.default_rng(0).permutation(len(f))
    b = sdc.release_frame(f.iloc[perm].reset_index(drop=True), cfg, 5).frame
    a = a.sort_values("person_id").reset_index(drop=True)
    b = b.sort_values("person_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_household_outcome_is_stable_when_other_households_join(gen_release):
    """Record-keyed household draws: a household whose t_j, theta and PRB did not change
    keeps its released values when households of other (non-sensitive) cells are added."""
    cfg = sdc.parse_config(GEN)
    f = _gen()
    r1 = gen_release(4, 5)
    # households of a large household cell (>= 10 households with its household keys)
    hk = list(cfg.household_keys)
    table = f.groupby("hh_id", sort=False)[hk].first()
    size = table.groupby(hk)[hk[0]].transform("size")
    donors = table.index[size.to_numpy() >= 10][:20]
    assert len(donors) == 20
    # copies of them (renamed) leave every PRB unchanged
    extra = f[f["hh_id"].isin(donors)].copy()
    extra["hh_id"] = "X" + extra["hh_id"]
    extra["person_id"] = "X" + extra["person_id"]
    f2 = pd.concat([f, extra], ignore_index=True)
    r2 = sdc.release_frame(f2, cfg, 5)
    a = r1.frame.groupby("hh_id", sort=False)[hk].first()
    b = r2.frame.groupby("hh_id", sort=False)[hk].first().loc[a.index]
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("seed", [2, 3])
def test_perturb_on_household_files(seed):
    """DP-PRAM on a household file: a household column is perturbed once per
    household (every member carries the household's value, some households changed, drawn
    with the household's identity: the same in any row order), a person column per person
    (the small classes included); both reported in perturb: order."""
    d = {**GEN, "perturb": {"water": {"epsilon": 1.0, "categories": list(range(1, 10))},
                            "employed": {"epsilon": 1.0, "categories": [0, 1]}}}
    cfg = sdc.parse_config(d)
    f = _gen()
    f["employed"] = (np.random.default_rng(seed).random(len(f)) < 0.6).astype(np.int64)
    r = sdc.release_frame(f, cfg, seed)
    assert _consistent(r.frame, cfg)
    assert [p.variable for p in r.dp_perturbations] == ["water", "employed"]
    water_h = r.frame.groupby("hh_id")["water"].first()
    orig_h = f.groupby("hh_id")["water"].first()
    changed_h = int((water_h != orig_h.loc[water_h.index]).sum())
    assert changed_h == r.dp_perturbations[0].changed > 0  # counted in households
    changed_p = int((r.frame["employed"] != f["employed"]).sum())
    assert changed_p == r.dp_perturbations[1].changed > 0  # counted in persons
    # a person column differs between members: it is per person, not per household
    assert (r.frame.groupby("hh_id")["employed"].nunique() > 1).any()
    # every other non-key column is unchanged; row order does not matter
    for c in ("hh_id", "person_id", "hh_weight"):
        assert r.frame[c].equals(f[c])
    perm = np.random.default_rng(9).permutation(len(f))
    r2 = sdc.release_frame(f.iloc[perm].reset_index(drop=True), cfg, seed)
    a = r.frame.sort_values("person_id").reset_index(drop=True)
    b = r2.frame.sort_values("person_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_rare_household_cell_alone_is_refused_with_the_fix():
    cfg = sdc.parse_config(GEN)
    f = _gen()
    # every household cell common but one: a household cell that is sensitive alone
    f["dwelling"] = 1
    f.loc[f["hh_id"] == f["hh_id"].iloc[0], "dwelling"] = 6
    f["region"] = 1
    f["urbrur"] = 1
    with pytest.raises(sdc.SmallBlockError, match="household stage .* recode the rare household"):
        sdc.release_frame(f, cfg, 1)


def test_small_household_classes_are_left_to_the_household_stage(gen_release):
    f = _gen()
    r = gen_release(4, 3)
    st = r.households
    assert st.small_classes > 0 and st.small_class_persons > 0
    fail = sdc.parse_config({**GEN, "risk": {"households": "warn", "xi": 0.5, "small_blocks": "fail"}})
    with pytest.raises(sdc.SmallBlockError, match="person stage"):
        sdc.release_frame(f, fail, 3)


@pytest.mark.parametrize("seed", [1, 2])
def test_household_releases_satisfy_the_release_invariants(seed, gen_release):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))
    from _invariants import check_release

    cfg = sdc.parse_config(GEN)
    f = _gen(seed=seed)
    check_release(f, cfg, gen_release(seed, seed))
    # a file whose household classes are all large enough for person PRBs
    big = sdc.parse_config({**GEN, "key_variables": {**GEN["key_variables"],
                                                     "dwelling": {"range": [1, 6]}}})
    check_release(f, big, sdc.release_frame(f, big, seed))


TESTDATA = SHARED_DATA / "sdcmicro" / "testdata.csv"


def _testdata_config(hh_keys, drop=("relat", "hhcivil")):
    kv = {"urbrur": {"categories": [1, 2], "level": "household"},
          "water": {"categories": list(range(1, 10)), "level": "household"},
          "walls": {"categories": [1, 2, 3, 9], "level": "household"}}
    kv = {k: v for k, v in kv.items() if k in hh_keys}
    kv.update({"sex": {"categories": [1, 2]}, "age": {"range": [0, 110]}})
    return sdc.parse_config({
        "name": "td", "input": {"path": str(TESTDATA), "household_id": "ori_hid",
                                "household_columns": ["roof", "electcon", "household_weights"],
                                "weight": "sampling_weight", "drop": list(drop)},
        "key_variables": kv,
        "partition": {"age": {"bands": [0, 15, 30, 45, 60, 75]}, "sex": "as_is"},
        "risk": {"households": "warn", "xi": 0.5}, "seed": 5})


def test_sdcmicro_testdata_households():
    """sdcMicro's household survey: urbrur, water (household) and sex, age (person). One
    household alone has urbrur = 1, water = 5 and no other household cell is rare, so no
    household PRB can hold it: refused (exit 2) naming the stage and the fixes. With walls as a
    third household key the household stage has a PRB and the release is consistent."""
    if not TESTDATA.is_file():
        pytest.skip(f"sdcMicro testdata not found at {TESTDATA} (shared data folder absent)")
    df = pd.read_csv(TESTDATA)
    check_households(df, _testdata_config(["urbrur", "water"]))  # the file is consistent
    with pytest.raises(sdc.SmallBlockError, match="household stage .*urbrur', 'water'"):
        sdc.release_frame(df, _testdata_config(["urbrur", "water"]), 5)
    # relation to the head and marital status give age away (a child, a widow): the person
    # stage's dependence check refuses them (the test config drops them)
    with pytest.raises(DependenceError, match="'relat' reveals .*age"):
        sdc.release_frame(df, _testdata_config(["urbrur", "water", "walls"], drop=()), 5)
    cfg = _testdata_config(["urbrur", "water", "walls"])
    r = sdc.release_frame(df, cfg, 5)
    # household columns are measured against the household keys, on the household table
    assert {f.column for f in r.households.result.dependence if f.level != "person"} == {
        "roof", "electcon", "household_weights"}
    assert "ori_hid" not in {f.column for f in r.dependence}
    assert len(r.households.result.blocks) >= 1
    assert r.households.n_households == 1000
    assert _consistent(r.frame, cfg)
    assert r.certificate <= 0.5


def test_codebook_describes_households(gen_release):
    from sdc.release.public import codebook_markdown

    cfg = sdc.parse_config(GEN)
    r = gen_release(4, 3)
    md = codebook_markdown(cfg, r)
    assert "### Households" in md and "keyed pseudonym" in md
    assert "household pseudonym 1..H" in md
    assert "household-level key: post-randomized once per household" in md
    assert f"except {r.households.small_class_persons} person(s)" in md


def test_dependence_check_at_each_level():
    """The dependence check of a household release: a household column that is a
    function of a household key (the region's province) is refused at the household level, a person
    column that gives a person key away at the person level; the household id (released as
    pseudonyms) and household columns unrelated to the keys pass. Region and age are no
    partition variables here, so they move (a partition variable's value never does)."""
    f = _frame(n_h=400, seed=5)
    rng = np.random.default_rng(7)  # 200 regions: rare household cells, household PRBs
    f["region"] = f.groupby("hid")["hid"].transform(lambda h: rng.integers(1, 201))
    d = {**HH, "partition": {"sex": "as_is"}, "key_variables": {
        **HH["key_variables"], "region": {"range": [1, 200], "level": "household"}}}

    def cfg(**inp):
        return sdc.parse_config({**d, "input": {**HH["input"], **inp}})

    # the province of the region (10 provinces of 20 regions)
    named = f.assign(province=(f["region"] - 1) // 20)
    with pytest.raises(DependenceError, match="'province' reveals .*region"):
        sdc.release_frame(named, cfg(household_columns=["roof", "province"]), 1)
    adult = f.assign(adult=(f["age"] >= 18).astype(int))
    with pytest.raises(DependenceError, match="'adult' reveals .*age"):
        sdc.release_frame(adult, cfg(), 1)
    r = sdc.release_frame(f, cfg(), 1)
    household_level = [x for x in r.households.result.dependence if x.level != "person"]
    assert [x.column for x in household_level] == ["roof"]
    assert not any(x.flagged for x in r.households.result.dependence)
    assert "hid" not in {x.column for x in r.dependence}


def test_codebook_of_a_perturbed_household_column():
    from sdc.release.public import codebook_markdown

    d = {**GEN, "perturb": {"water": {"epsilon": 1.0, "categories": list(range(1, 10))}}}
    cfg = sdc.parse_config(d)
    r = sdc.release_frame(_gen(), cfg, 3)
    md = codebook_markdown(cfg, r)
    line = next(x for x in md.splitlines() if "`water` |" in x)
    assert "drawn once per household" in line and "eps = 1" in line


# -- derived: columns of a household file ---------------------------------------------------------
def _derived_release(columns: dict, **over):
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(4000, seed=8, n_regions=12).drop(columns=["income"])
    frame = frame.assign(**{k: f(frame) for k, f in columns.items()})
    d = household_config()
    for k, v in over.items():
        d["input" if k == "household_columns" else k] = (
            {**d["input"], "household_columns": v} if k == "household_columns" else v)
    return frame, sdc.release_frame(frame, sdc.parse_config(d), 11)


def test_household_derived_columns_follow_the_released_keys():
    """A household-level derived column (in input.household_columns) is recomputed by the
    household stage: every member of a changed household carries the value of its household's
    released keys (the pandas engine once kept the original value there, which gave the
    original household keys away); a person-level one follows the released person keys."""
    frame, r = _derived_release(
        {"region_name": lambda f: "R" + f["region"].astype(str), "age_band": lambda f: f["age"] // 10},
        household_columns=["water", "hh_weight", "region_name"],
        derived=["region_name", "age_band"])
    out = r.frame
    assert (out["region"] != frame["region"]).any() and (out["age"] != frame["age"]).any()
    assert (out["region_name"] == "R" + out["region"].astype(str)).all()
    assert (out["age_band"] == out["age"] // 10).all()
    assert r.households.small_classes > 0  # the left-out classes' persons too


def test_household_derived_column_of_both_levels_is_refused():
    """A person-level derived column must be a function of the person keys: one that also
    depends on a household key is refused (exit 2) with the fix."""
    with pytest.raises(InputError, match=r"derived column 'mixed' is not a function .* person "
                       r"keys \['sex', 'age', 'relation'\] .* input.household_columns"):
        _derived_release({"mixed": lambda f: f["age"] // 10 + 100 * f["region"]},
                         derived=["mixed"])
