"""Missingness groups under ``risk.composition: protect`` (sdc.method.household_missing;
docs/HOUSEHOLDS.md "Risk", docs/METHOD.md 7.7; issue 44): a person column missing exactly for
some person classes splits the classes into groups, the composition stage's partition sets are
household size x members per group, and the realization gives a moved member a class of its own
group. Checked: the groups (connected components of class -- pattern); the realization; every
transition of a generated file's plan keeps the members per group (so no seed can release an
impossible pattern) and releases under 8 seeds hold none (against 100+ without the groups); the
exact person- and household-level certificates of a constrained plan equal the enumeration of
every household's outcome; a constraint that leaves a size without a PRB is refused naming the
column and its relation; the matching kernel's cost prefers adjacent age classes."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
import yaml

from sdc.config.load import parse_config
from sdc.io.recode import recode_frame
from sdc.method.household_composition import realize_compositions
from sdc.method.household_missing import class_groups, frame_groups

CONFIG = """
name: m
input: {path: x.csv, household_id: hh_id, id_column: person_id,
        drop: [hh_weight, relation, urbrur, dwelling, water]}
key_variables:
  region: {range: [1, 6], level: household}
  sex: {categories: [1, 2]}
  age: {range: [0, 95], recode: {bands: [0, 16, 25, 50, 65]}}
risk: {xi: 0.5, composition: protect, destinations: near,
       near: {neighbours: 4, kernel: matching}, theta: calibrated}
seed: 1
output: {dir: out}
"""


def _sample() -> tuple[pd.DataFrame, object]:
    """The generated household sample with ``income`` missing exactly under 16 and
    ``pension`` present exactly from 65: three groups of age classes."""
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(3000, seed=5, n_regions=6)
    frame["income"] = frame["income"].astype(float).where(frame["age"] >= 16)
    frame["pension"] = (frame["income"] * 0.6).where(frame["age"] >= 65)
    cfg = parse_config(yaml.safe_load(CONFIG), None, source="test")
    return recode_frame(frame, cfg), cfg


def _impossible(pub: pd.DataFrame) -> int:
    age = pd.to_numeric(pub["age"]).to_numpy()
    inc, pen = pub["income"].isna().to_numpy(), pub["pension"].isna().to_numpy()
    return int(((age < 16) != inc).sum() + ((age >= 65) == pen).sum())


def test_groups_are_the_components_of_class_and_pattern():
    # classes 0..4; pattern 1 only in 0 and 1, pattern 0 in 2 and 3, pattern 2 in 3 and 4
    cls = np.array([0, 1, 2, 3, 3, 4])
    pat = np.array([[1], [1], [0], [0], [2], [2]])
    assert class_groups(cls, pat, 6).tolist() == [0, 0, 2, 2, 2, 5]
    # a pattern shared across the groups joins them
    assert class_groups(np.r_[cls, 1], np.r_[pat, [[0]]], 6).tolist() == [0, 0, 0, 0, 0, 5]


def test_the_sample_has_three_groups_named_by_their_relations():
    f, cfg = _sample()
    from sdc.method.household_composition import class_codes, person_classes

    pc, n_cls = person_classes(f, cfg)
    g = frame_groups(f, pc, n_cls, cfg)
    age = class_codes(np.arange(n_cls), cfg)[:, list(cfg.person_keys).index("age")]
    present = g.present
    for a in range(5):  # every class of one age band in one group; bands 0 / 16-64 / 65+
        assert np.unique(g.group[present & (age == a)]).size == 1
    assert g.n_groups == 3 and set(g.relations) == {"income", "pension"}
    text = " | ".join(g.describe(cfg))
    assert "income missing <=> age in {0}" in text
    assert "pension missing <=> age in {0, 16, 25, 50}" in text


@pytest.mark.parametrize("seed", range(20))
def test_realization_keeps_members_in_their_group(seed):
    """Compositions with the same members per group: every moved member takes a class of its
    own group, and as few members change as without groups (sum |n - n'| / 2)."""
    rng = np.random.default_rng(seed)
    n_cls = 6
    group = np.array([0, 0, 2, 2, 2, 5])
    h = 30
    before = np.zeros((h, n_cls), np.int64)
    after = np.zeros((h, n_cls), np.int64)
    for i in range(h):
        for g in np.unique(group):
            members = np.flatnonzero(group == g)
            m = int(rng.integers(0, 4))
            np.add.at(before[i], rng.choice(members, m), 1)
            np.add.at(after[i], rng.choice(members, m), 1)
    hh = np.repeat(np.arange(h), before.sum(axis=1))
    cls = np.concatenate([np.repeat(np.arange(n_cls), before[i]) for i in range(h)])
    ident = rng.permutation(cls.size).astype(np.uint64)
    new = realize_compositions(hh, cls, ident, before, after, group)
    assert np.array_equal(group[new], group[cls])
    got = np.zeros_like(after)
    np.add.at(got, (hh, new), 1)
    assert np.array_equal(got, after)
    assert int((new != cls).sum()) == int(np.abs(before - after).sum() // 2)


def test_no_transition_crosses_a_group_and_no_release_shows_an_impossible_pattern():
    """Every positive entry of every PRB's W joins compositions with the same members per
    group (exact, whatever the seed); 8 releases of the sample hold no impossible pattern
    (income at 0-15, none at 16+, a pension under 65, none at 65+), while the same release
    without the groups (the column's relation unseen: ``input.drop`` of both columns, the
    columns then put back) would move members across them: 100+ impossible patterns."""
    from sdc.executors.memory import release_frame
    from sdc.method.cells import encode_key
    from sdc.method.household_composition import (
        composition_table,
        person_classes,
        plan_composition_stage,
    )
    from sdc.method.household_missing import constrain
    from sdc.method.households import household_codes

    f, cfg = _sample()
    code, first = household_codes(f, cfg)
    pc, n_cls = person_classes(f, cfg)
    tab = constrain(composition_table(code, pc, first.size, n_cls),
                    frame_groups(f, pc, n_cls, cfg), cfg)
    assert tab.group is not None
    hk = np.column_stack([encode_key(f["region"].iloc[first], "region",
                                     cfg.key_variables["region"])])
    cp = plan_composition_stage(hk, tab, cfg)[0]
    design = cp.plan.cell_design()
    comp = np.asarray(cp.plan.partitioned.cells.key_codes)[:, -1]
    gc = tab.group_counts()[comp]
    indptr, dest = np.asarray(design.indptr), np.asarray(design.dest)
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    assert rows.size > 100 and np.array_equal(gc[rows], gc[dest])
    grp = np.asarray(design.group)
    for g in np.unique(grp[grp >= 0]):  # uniform rows: the whole PRB shares one set
        assert np.unique(gc[grp == g], axis=0).shape[0] == 1
    for seed in range(8):
        pub = release_frame(f, cfg, seed).released.table.to_pandas()
        assert _impossible(pub) == 0, seed
    loose = cfg.model_copy(update={"input": cfg.input.model_copy(
        update={"drop": [*cfg.input.drop, "income", "pension"]})})
    out = release_frame(f, loose, 0).released
    pub = out.table.to_pandas()
    pub[["income", "pension"]] = f[["income", "pension"]].to_numpy()  # input order
    assert _impossible(pub) > 100


def _tiny() -> tuple[object, object, np.ndarray, object]:
    """Seven households of size 2 in two regions: children (0-15, income missing) and adults
    16-49 / 50+; groups {0-15} and {16+}."""
    from sdc.method.household_composition import (
        composition_plan,
        composition_table,
        person_classes,
    )
    from sdc.method.household_missing import constrain
    from sdc.method.households import household_codes

    members = [(1, 5, 30), (1, 40, 60), (1, 8, 55), (2, 3, 20), (2, 45, 70), (2, 9, 33),
               (2, 25, 26)]
    rows = []
    for h, (region, a, b) in enumerate(members):
        for i, age in enumerate((a, b)):
            rows.append({"hh_id": f"H{h}", "person_id": f"P{h}{i}", "region": region,
                         "age": age, "income": np.nan if age < 16 else 1000.0 + age})
    cfg = parse_config(yaml.safe_load("""
name: t
input: {path: x.csv, household_id: hh_id, id_column: person_id}
key_variables:
  region: {categories: [1, 2], level: household}
  age: {range: [0, 95], recode: {bands: [0, 16, 50]}}
risk: {xi: 0.6, composition: protect, small_blocks: calibrate}
seed: 1
output: {dir: out}
"""), None, source="test")
    f = recode_frame(pd.DataFrame(rows), cfg)
    code, first = household_codes(f, cfg)
    pc, n_cls = person_classes(f, cfg)
    tab = constrain(composition_table(code, pc, first.size, n_cls),
                    frame_groups(f, pc, n_cls, cfg), cfg)
    hk = np.array([[0], [0], [0], [1], [1], [1], [1]])
    return cfg, tab, hk, composition_plan(hk, tab, cfg)


def test_constrained_certificates_equal_the_enumeration():
    """On seven households the exact person-level and household-level figures of the
    constrained plan (composition_sources -> level_risk) equal the enumeration of every
    household's outcome (tests/method/test_household_person_risk.brute_force), and no
    enumerated outcome moves a member across the groups."""
    from test_household_person_risk import _rows, brute_force

    from sdc.method.household_person_risk import SourceCells, composition_sources, level_risk

    cfg, tab, hk, cp = _tiny()
    assert tab.group is not None
    c = composition_sources(cp, tab)
    gc = tab.group.copy()
    counts = np.asarray(c.counts)
    per_group = np.stack([counts[:, gc == g].sum(axis=1) for g in np.unique(gc)], axis=1)
    owner = [j for j in range(len(c.t)) for _ in range(int(c.t[j]))]
    for h, row in enumerate(_rows(c)):
        for d, _ in row:
            assert np.array_equal(per_group[d], per_group[owner[h]])
    bf = brute_force(c)
    r = level_risk(c)
    assert r.max_risk == pytest.approx(bf["own_cell"], abs=1e-12)
    assert r.own_class == pytest.approx(bf["own_class"], abs=1e-12)
    one = SourceCells(c.hk, np.ones((len(c.t), 1), np.int64), c.t, c.move, c.group, c.n_hk,
                      c.indptr, c.dest, c.weight)
    assert level_risk(one).max_risk == pytest.approx(brute_force(one)["own_cell"], abs=1e-12)


def test_a_constraint_that_leaves_no_prb_is_refused_naming_the_relation():
    """xi so small that a (size, members per group) set cannot be certified: the refusal
    names the column and its relation and the fixes."""
    from sdc.errors import SmallBlockError
    from sdc.method.household_composition import composition_plan

    cfg, tab, hk, _ = _tiny()
    strict = cfg.model_copy(update={"risk": cfg.risk.model_copy(
        update={"xi": 0.34, "small_blocks": "fail"})})
    with pytest.raises(SmallBlockError) as e:
        composition_plan(hk, tab, strict)
    msg = str(e.value)
    assert "income missing <=> age in {0}" in msg and "input.drop" in msg


def test_matching_prefers_adjacent_age_classes():
    """One region, households of one member: every destination changes that member, so the
    records cost is flat and the matchings' cost is the age distance: the first matching's
    total shift is the least over every derangement (enumerated)."""
    from sdc.method.near import KeyMetric, class_shift, matching_destinations, record_cost

    counts = np.eye(5, dtype=np.int64)            # 5 age classes, one member each
    codes = np.column_stack([np.zeros(5, np.int64), np.arange(5)])
    metrics = [KeyMetric("region", "nominal", scale=2.0, size=1),
               KeyMetric("household_composition", "composition", counts=counts,
                         classes=np.arange(5)[:, None])]
    shift = class_shift(codes, metrics)
    assert shift[0].tolist() == [0, 1, 2, 3, 4]
    cost = record_cost(codes, metrics) * (shift.max() + 1) + shift
    dest = matching_destinations(cost, 2)
    best = min(sum(abs(i - p[i]) for i in range(5)) for p in itertools.permutations(range(5))
               if all(p[i] != i for i in range(5)))
    assert sum(abs(i - int(dest[i, 0])) for i in range(5)) == best == 6


def test_two_stage_person_prbs_that_mix_groups_are_refused():
    """Without ``protect`` the person stage moves a person's keys inside its PRB: with exact
    ages a PRB holds classes 0-15 and 16+, and 45 persons were released with an impossible
    pattern (an income at 0-15 or none at 16+). Now refused (exit 2) naming the column and
    the fixes; with the partition the message proposes (age bands [0, 16]) the release holds
    none."""
    from sdc.errors import InputError
    from sdc.executors.memory import release_frame
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(3000, seed=5, n_regions=6)
    frame["income"] = frame["income"].astype(float).where(frame["age"] >= 16)
    raw = yaml.safe_load(CONFIG)
    raw["key_variables"]["age"] = {"range": [0, 95]}
    raw["risk"] = {"xi": 0.5, "households": "warn", "small_blocks": "calibrate"}
    cfg = parse_config(raw, None, source="test")
    f = recode_frame(frame, cfg)
    with pytest.raises(InputError) as e:
        release_frame(f, cfg, 0)
    assert "income missing for some classes" in str(e.value)
    assert "risk.composition: protect" in str(e.value)
    raw["partition"] = {"age": {"bands": [0, 16]}}
    cfg = parse_config(raw, None, source="test")
    out = release_frame(f, cfg, 0).released
    pub = out.table.to_pandas()
    assert (out.record_cell != out.released_cell).sum() > 50
    age = pd.to_numeric(pub["age"]).to_numpy()
    assert ((age < 16) == pub["income"].isna().to_numpy()).all()


def test_audit_rederives_the_groups_and_finds_no_foreign_pattern(tmp_path):
    """``sdc audit`` of a protect release of the sample (income missing under 16, pension
    present from 65; Parquet in row groups, the streaming executor): the groups re-derived
    from the source, no public (class, missing columns) pattern outside its group's; every
    check passes. foreign_patterns counts a public pattern its group never has."""
    from household_helpers import streaming_release_of

    from sdc.audit.verify import verify_release
    from sdc.method.household_missing import MissingGroups, foreign_patterns
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(3000, seed=5, n_regions=6)
    frame["income"] = frame["income"].astype(float).where(frame["age"] >= 16)
    frame["pension"] = (frame["income"] * 0.6).where(frame["age"] >= 65)
    rel = streaming_release_of(tmp_path, frame, CONFIG)
    rep = verify_release(rel)
    names = {c.name: c for c in rep.checks}
    check = names["composition stage: missingness groups"]
    assert check.ok and "income missing <=> age in {0}" in check.detail, check.detail
    assert rep.ok, [c for c in rep.checks if not c.ok]
    codebook = (rel / "public" / "codebook.md").read_text()
    assert "**Missing values**" in codebook and "income missing <=> age in {0}" in codebook
    g = MissingGroups(np.array([0, 0, 2]), ("income",), {"income": [2]},
                      np.ones(3, bool), (np.array([0, 1, 2]), np.array([[0], [0], [1]])))
    moved = MissingGroups(np.array([0, 0, 2]), ("income",), {}, np.ones(3, bool),
                          (np.array([0, 2]), np.array([[1], [1]])))  # class 0 missing
    assert foreign_patterns(g, g) == 0 and foreign_patterns(g, moved) == 1
