"""Member bands under ``risk.composition: protect`` (``risk.member_bands``; sdc.method.
household_missing.member_bands / constrain; docs/HOUSEHOLDS.md "Member bands", docs/METHOD.md
7.7; issue 44): cut points of a person key that a moved member never crosses, so a member's
non-key values (an old-age benefit, an employee income) stay with classes of its band. The
partition sets are household size x members per missingness group and band; a banded set with
one sensitive cell (no PRB) is joined with the other such sets of its size (``unbanded``).
Checked: the bands of the classes; the realization keeps every banded household's members per
band (person keys in either order); every W entry of a banded plan keeps the members per band
and releases of the generated sample keep every banded person's band row by row; the exact
person- and household-level certificates of a banded plan equal the enumeration of every
household's outcome; ``sdc audit`` re-derives the banded release; a band key must be a
person key with numeric released values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from sdc.config.load import parse_config
from sdc.io.recode import recode_frame
from sdc.method.household_composition import realize_compositions
from sdc.method.household_missing import constrain, frame_groups, member_bands

CONFIG = """
name: m
input: {path: x.csv, household_id: hh_id, id_column: person_id,
        drop: [hh_weight, relation, urbrur, dwelling, water]}
key_variables:
  region: {range: [1, 6], level: household}
  sex: {categories: [1, 2]}
  age: {range: [0, 95], recode: {bands: [0, 16, 25, 50, 65]}}
risk: {xi: 0.5, composition: protect, destinations: near, member_bands: {age: [16, 65]},
       near: {neighbours: 4, kernel: matching}, theta: calibrated, small_blocks: calibrate}
seed: 1
output: {dir: out}
"""


def _sample() -> tuple[pd.DataFrame, object]:
    """The generated household sample, income missing under 16 and a pension from 65."""
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(3000, seed=5, n_regions=6)
    frame["income"] = frame["income"].astype(float).where(frame["age"] >= 16)
    frame["pension"] = (frame["income"] * 0.6).where(frame["age"] >= 50)
    cfg = parse_config(yaml.safe_load(CONFIG), None, source="test")
    return recode_frame(frame, cfg), cfg


def _band(age: np.ndarray) -> np.ndarray:
    return np.searchsorted([16, 65], np.asarray(age, float), side="right")


def test_bands_of_the_classes_follow_the_cut_points():
    _, cfg = _sample()
    from sdc.method.household_composition import class_codes

    band, lines = member_bands(10, cfg)
    age = class_codes(np.arange(10), cfg)[:, list(cfg.person_keys).index("age")]
    assert band.tolist() == _band(np.array([0, 16, 25, 50, 65])[age]).tolist()
    assert lines == ["age kept within 0 | 16, 25, 50 | 65 (risk.member_bands)"]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("band_first", [True, False])
def test_realization_keeps_members_in_their_band(seed, band_first):
    """Compositions with the same members per band: every moved member of a banded household
    takes a class of its own band (band key first or second in the class code), as few
    members change as without bands; an unbanded household keeps its size only."""
    rng = np.random.default_rng(seed)
    # 8 classes: 2 x 4 (band key with 4 values, bands {0}, {1, 2}, {3})
    n_cls = 8
    val = np.arange(n_cls) // 2 if band_first else np.arange(n_cls) % 4
    band = np.searchsorted([1, 3], val, side="right")
    h = 40
    before = np.zeros((h, n_cls), np.int64)
    after = np.zeros((h, n_cls), np.int64)
    banded = rng.random(h) < 0.8
    for i in range(h):
        if banded[i]:
            for b in np.unique(band):
                members = np.flatnonzero(band == b)
                m = int(rng.integers(0, 3))
                np.add.at(before[i], rng.choice(members, m), 1)
                np.add.at(after[i], rng.choice(members, m), 1)
        else:
            m = int(rng.integers(1, 6))
            np.add.at(before[i], rng.integers(0, n_cls, m), 1)
            np.add.at(after[i], rng.integers(0, n_cls, m), 1)
    hh = np.repeat(np.arange(h), before.sum(axis=1))
    cls = np.concatenate([np.repeat(np.arange(n_cls), before[i]) for i in range(h)])
    ident = rng.permutation(cls.size).astype(np.uint64)
    new = realize_compositions(hh, cls, ident, before, after, None, band, banded)
    keep = banded[hh]
    assert np.array_equal(band[new[keep]], band[cls[keep]])
    got = np.zeros_like(after)
    np.add.at(got, (hh, new), 1)
    assert np.array_equal(got, after)
    assert int((new != cls).sum()) == int(np.abs(before - after).sum() // 2)


def test_banded_plan_keeps_bands_in_every_transition_and_release():
    """Every positive W entry between banded compositions keeps the members per band (exact,
    whatever the seed); releases of the sample under 4 seeds keep every banded household's
    members in their age band, row by row (release_frame keeps the input order), while the
    same release without bands moves some across (a pension at 16-49)."""
    from sdc.executors.memory import release_frame
    from sdc.method.cells import encode_key
    from sdc.method.household_composition import (
        composition_table,
        person_classes,
        plan_composition_stage,
    )
    from sdc.method.households import household_codes

    f, cfg = _sample()
    code, first = household_codes(f, cfg)
    pc, n_cls = person_classes(f, cfg)
    hk = np.column_stack([encode_key(f["region"].iloc[first], "region",
                                     cfg.key_variables["region"])])
    tab = constrain(composition_table(code, pc, first.size, n_cls),
                    frame_groups(f, pc, n_cls, cfg), cfg, hk)
    assert tab.band is not None
    cp = plan_composition_stage(hk, tab, cfg)[0]
    design = cp.plan.cell_design()
    comp = np.asarray(cp.plan.partitioned.cells.key_codes)[:, -1]
    bc = tab.band_counts()[comp]
    indptr, dest = np.asarray(design.indptr), np.asarray(design.dest)
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    banded_rows = bc[rows, 0] >= 0
    assert banded_rows.sum() > 100
    assert np.array_equal(bc[rows][banded_rows], bc[dest][banded_rows])
    banded_person = tab.banded_households()[code]
    assert banded_person.mean() > 0.9
    age0 = _band(pd.to_numeric(f["age"]).to_numpy())
    moved = 0
    for seed in range(4):
        pub = release_frame(f, cfg, seed).released.table.to_pandas()
        age1 = _band(pd.to_numeric(pub["age"]).to_numpy())
        assert np.array_equal(age1[banded_person], age0[banded_person]), seed
        moved += int((pd.to_numeric(pub["age"]).to_numpy() != pd.to_numeric(f["age"])).sum())
    assert moved > 50  # members still change classes within their bands
    loose = cfg.model_copy(update={"risk": cfg.risk.model_copy(update={"member_bands": None})})
    pub = release_frame(f, loose, 0).released.table.to_pandas()
    assert (_band(pd.to_numeric(pub["age"]).to_numpy()) != age0).sum() > 20


def _tiny() -> tuple[object, object, np.ndarray, object]:
    """Eight households of size 2 in two regions, ages in 4 classes, bands {0-15, 16-49} |
    {50+}... cut at 50: a member of 16-49 may take 0-15 but never 50+."""
    from sdc.method.household_composition import (
        composition_plan,
        composition_table,
        person_classes,
    )
    from sdc.method.households import household_codes

    members = [(1, 5, 30), (1, 40, 60), (1, 8, 55), (1, 20, 70), (2, 3, 20), (2, 45, 70),
               (2, 9, 33), (2, 25, 26), (2, 52, 80)]
    rows = []
    for h, (region, a, b) in enumerate(members):
        for i, age in enumerate((a, b)):
            rows.append({"hh_id": f"H{h}", "person_id": f"P{h}{i}", "region": region,
                         "age": age})
    cfg = parse_config(yaml.safe_load("""
name: t
input: {path: x.csv, household_id: hh_id, id_column: person_id}
key_variables:
  region: {categories: [1, 2], level: household}
  age: {range: [0, 95], recode: {bands: [0, 16, 50, 65]}}
risk: {xi: 0.6, composition: protect, small_blocks: calibrate, member_bands: {age: [50]}}
seed: 1
output: {dir: out}
"""), None, source="test")
    f = recode_frame(pd.DataFrame(rows), cfg)
    code, first = household_codes(f, cfg)
    pc, n_cls = person_classes(f, cfg)
    hk = np.array([[0]] * 4 + [[1]] * 5)
    tab = constrain(composition_table(code, pc, first.size, n_cls),
                    frame_groups(f, pc, n_cls, cfg), cfg, hk)
    return cfg, tab, hk, composition_plan(hk, tab, cfg)


def test_banded_certificates_equal_the_enumeration():
    """The exact person- and household-level figures of a banded plan (composition_sources ->
    level_risk) equal the enumeration of every household's outcome, and no enumerated
    outcome of a banded household moves a member across the cut."""
    from test_household_person_risk import _rows, brute_force

    from sdc.method.household_person_risk import SourceCells, composition_sources, level_risk

    cfg, tab, hk, cp = _tiny()
    assert tab.band is not None and cp.plan is not None
    c = composition_sources(cp, tab)
    counts = np.asarray(c.counts)
    per_band = np.stack([counts[:, tab.band == b].sum(axis=1) for b in np.unique(tab.band)],
                        axis=1)
    owner = [j for j in range(len(c.t)) for _ in range(int(c.t[j]))]
    unbanded = (np.zeros(tab.n_compositions, bool) if tab.unbanded is None
                else np.asarray(tab.unbanded))
    comp_of = {tuple(r): i for i, r in enumerate(np.asarray(tab.counts))}
    checked = 0
    for h, row in enumerate(_rows(c)):
        if unbanded[comp_of[tuple(counts[owner[h]])]]:
            continue
        for d, _ in row:
            assert np.array_equal(per_band[d], per_band[owner[h]])
            checked += 1
    assert checked > 0
    bf = brute_force(c)
    r = level_risk(c)
    assert r.max_risk == pytest.approx(bf["own_cell"], abs=1e-12)
    assert r.own_class == pytest.approx(bf["own_class"], abs=1e-12)
    one = SourceCells(c.hk, np.ones((len(c.t), 1), np.int64), c.t, c.move, c.group, c.n_hk,
                      c.indptr, c.dest, c.weight)
    assert level_risk(one).max_risk == pytest.approx(brute_force(one)["own_cell"], abs=1e-12)


def test_audit_rederives_a_banded_release(tmp_path):
    """``sdc audit`` of a banded protect release of the sample (streaming executor): every
    check passes, the bands are named in the codebook's missingness relations."""
    from household_helpers import streaming_release_of

    from sdc.audit.verify import verify_release
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(3000, seed=5, n_regions=6)
    frame["income"] = frame["income"].astype(float).where(frame["age"] >= 16)
    rel = streaming_release_of(tmp_path, frame, CONFIG)
    rep = verify_release(rel)
    assert rep.ok, [c for c in rep.checks if not c.ok]
    risk = (rel / "internal" / "risk.json").read_text()
    assert "age kept within 0 | 16, 25, 50 | 65" in risk


def test_a_band_key_must_be_a_numeric_person_key():
    raw = yaml.safe_load(CONFIG)
    raw["risk"]["member_bands"] = {"region": [3]}
    with pytest.raises(ValueError, match="person-level key"):
        parse_config(raw, None, source="test")
    raw["risk"]["member_bands"] = {"age": [16]}
    raw["risk"]["composition"] = "measure"
    raw["risk"].pop("destinations"), raw["risk"].pop("near")
    with pytest.raises(ValueError, match="composition: protect"):
        parse_config(raw, None, source="test")
