"""The batch kernels of household files (sdc.method.household_batches) against the
pandas engine: a file cut into shuffled batches (households split over batches), counted in
two partials and merged, gives the pandas engine's household table and constancy verdict; the
household stage on the aggregate releases every household exactly as the pandas engine's
household stage; the lookup gives every person its household's released values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from household_helpers import GEN

import sdc
from sdc.errors import InputError
from sdc.method.household_batches import (
    HouseholdCounter,
    household_identity,
    household_stage,
    lookup_households,
)
from sdc.method.households import check_households, household_codes
from sdc.samples import generate_household_sample


def _count(frame: pd.DataFrame, cfg, n_batches: int, seed: int):
    """Shuffled rows cut into batches, counted by two partials, merged."""
    rng = np.random.default_rng(seed)
    shuffled = frame.iloc[rng.permutation(len(frame))]
    cuts = np.sort(rng.choice(np.arange(1, len(frame)), n_batches - 1, replace=False))
    a, b = HouseholdCounter(cfg, merge_every=3), HouseholdCounter(cfg)
    for i, part in enumerate(np.split(np.arange(len(frame)), cuts)):
        (a if i % 2 else b).add(shuffled.iloc[part])
    a.merge(b)
    return a.result()


@pytest.mark.parametrize("seed", [1, 2])
def test_counted_households_equal_the_household_table(seed):
    cfg = sdc.parse_config(GEN)
    f = generate_household_sample(6000, seed=seed, n_regions=40)
    agg = _count(f, cfg, 17, seed)
    code, first = household_codes(f, cfg)
    assert agg.n_households == first.size
    ident = household_identity(f, cfg)
    order = np.argsort(ident[first])
    np.testing.assert_array_equal(agg.identity, ident[first][order])
    np.testing.assert_array_equal(agg.size, np.bincount(code)[order])
    kvs = cfg.key_variables
    for j, k in enumerate(cfg.household_keys):
        expect = np.asarray(f[k].to_numpy()[first][order])
        got = np.asarray(kvs[k].domain)[agg.key_codes[:, j]]
        np.testing.assert_array_equal(got, expect)
    assert agg.inconsistent == {}


def test_an_inconsistent_household_split_over_batches_is_found():
    cfg = sdc.parse_config(GEN)
    f = generate_household_sample(3000, seed=4, n_regions=40)
    sizes = f.groupby("hh_id").size()
    big = sizes[sizes >= 3].index[:2]
    g = f.copy()
    rows = np.flatnonzero(g["hh_id"].isin(big).to_numpy())
    g.loc[g.index[rows[-1]], "water"] = g["water"].iat[rows[-1]] % 9 + 1
    g.loc[g.index[rows[0]], "region"] = g["region"].iat[rows[0]] % 40 + 1
    agg = _count(g, cfg, 9, 3)
    with pytest.raises(InputError) as e:
        check_households(g, cfg)
    for c in ("water", "region"):
        assert c in agg.inconsistent and agg.inconsistent[c].size == 1
        assert f"column {c!r} differs within 1 household" in str(e.value)
    ident = household_identity(g, cfg)
    hh_of = dict(zip(g["hh_id"], ident, strict=False))
    assert set(agg.inconsistent["water"].tolist()) <= {int(hh_of[h]) for h in big}


@pytest.mark.parametrize("xi", [0.5, 0.34])
def test_household_stage_on_the_aggregate_equals_the_pandas_engine(xi):
    d = {**GEN, "risk": {"households": "warn", "xi": xi, "small_blocks": "calibrate" if xi < 0.5 else "merge"}}
    cfg = sdc.parse_config(d)
    f = generate_household_sample(8000, seed=5, n_regions=40)
    r = sdc.release_frame(f, cfg, 7)
    st = r.households
    agg = _count(f, cfg, 11, 6)
    hs = household_stage(agg, cfg, 7)
    # the same plan: PRBs, thetas, certificate
    pd.testing.assert_frame_equal(hs.plan.blocks, st.result.blocks.drop(columns="changed"))
    assert hs.plan.certificate == st.certificate
    assert int(hs.changed.sum()) == int(st.changed.sum()) and st.changed.any()
    # every person: its household's released household keys, by the lookup
    rows = lookup_households(agg.identity, household_identity(f, cfg))
    kvs = cfg.key_variables
    for j, k in enumerate(cfg.household_keys):
        got = np.asarray(kvs[k].domain)[hs.released_codes[rows, j]]
        np.testing.assert_array_equal(got, r.frame[k].to_numpy())


def test_lookup_refuses_an_uncounted_household():
    with pytest.raises(InputError, match="changed between the counting pass"):
        lookup_households(np.array([1, 5, 9], np.uint64), np.array([5, 6], np.uint64))
    np.testing.assert_array_equal(
        lookup_households(np.array([1, 5, 9], np.uint64), np.array([9, 1, 5], np.uint64)),
        [2, 0, 1])


@pytest.mark.parametrize("xi,policy", [(0.5, "merge"), (0.34, "calibrate")])
def test_person_stage_on_the_cell_table_equals_the_pandas_engine(xi, policy):
    """The person stage planned from counted cells (batches merged) has the pandas engine's
    person PRBs, certificate and small household-key classes."""
    from sdc.method.cell_passes import CellCounter, cell_table
    from sdc.method.cells import cell_codes
    from sdc.method.household_batches import person_stage
    from sdc.method.households import person_config

    cfg = sdc.parse_config({**GEN, "risk": {"households": "warn", "xi": xi, "small_blocks": policy}})
    f = generate_household_sample(8000, seed=8, n_regions=40)
    r = sdc.release_frame(f, cfg, 3)
    pcfg = person_config(cfg)
    counter = CellCounter(merge_every=2)
    for part in np.array_split(np.arange(len(f)), 7):
        counter.add(cell_codes(f.iloc[part], pcfg))
    codes, counts = counter.result()
    ps = person_stage(cell_table(codes, counts, pcfg), cfg)
    pd.testing.assert_frame_equal(ps.plan.blocks, r.blocks.drop(columns="changed"))
    assert ps.plan.certificate == r.households.person_certificate
    assert ps.plan.merges == [m for m in r.merges if not m.startswith("household stage: ")]
    assert (ps.small_classes, ps.small_class_persons) == (
        r.households.small_classes, r.households.small_class_persons)
    assert ps.small_classes > 0  # the left-out classes are exercised


@pytest.fixture(scope="module")
def gen9_release():
    """``gen9_release(xi, policy)``: GEN's release of the 8,000-person file of seed 9 with
    seed 13, made once per configuration (the released-persons and extended-cells tests
    compare with the same one; read only)."""
    made: dict = {}

    def release(xi, policy):
        if (xi, policy) not in made:
            cfg = sdc.parse_config({**GEN, "risk": {"households": "warn", "xi": xi,
                                                    "small_blocks": policy}})
            made[xi, policy] = sdc.release_frame(
                generate_household_sample(8000, seed=9, n_regions=40), cfg, 13)
        return made[xi, policy]

    return release


@pytest.mark.parametrize("xi,policy", [(0.5, "merge"), (0.34, "calibrate")])
def test_released_persons_from_the_kernels_equal_the_pandas_engine(xi, policy, gen9_release):
    """count (batches) -> both stages on aggregates -> per batch: household lookup, person
    identities (made distinct over the file), released codes: every person's released key
    values equal the pandas engine's."""
    from sdc.method.cell_passes import CellCounter, CellLocator, cell_table
    from sdc.method.cells import cell_codes
    from sdc.method.draws import unique_identities
    from sdc.method.household_batches import (
        person_draw_identities,
        person_stage,
        released_person_codes,
    )
    from sdc.method.households import person_config

    cfg = sdc.parse_config({**GEN, "risk": {"households": "warn", "xi": xi, "small_blocks": policy}})
    f = generate_household_sample(8000, seed=9, n_regions=40)
    r = gen9_release(xi, policy)
    assert r.n_changed > 0 and r.households.changed.any()
    pcfg = person_config(cfg)
    batches = [f.iloc[p] for p in np.array_split(np.random.default_rng(1).permutation(len(f)), 5)]
    counter, households = CellCounter(), HouseholdCounter(cfg)
    for b in batches:
        counter.add(cell_codes(b, pcfg))
        households.add(b)
    codes, counts = counter.result()
    cells = cell_table(codes, counts, pcfg)
    agg = households.result()
    hs, ps = household_stage(agg, cfg, 13), person_stage(cells, cfg)
    locate = CellLocator(codes, pcfg)
    got_cells = [locate(cell_codes(b, pcfg)) for b in batches]
    pairs = [person_draw_identities(b, c, ps, cells, cfg) for b, c in zip(batches, got_cells,
                                                                           strict=True)]
    ident = unique_identities(np.concatenate([p[0] for p in pairs]),
                              np.concatenate([p[1] for p in pairs]))
    pos = 0
    kvs = cfg.key_variables
    for b, c, (i, _) in zip(batches, got_cells, pairs, strict=True):
        rows = lookup_households(agg.identity, household_identity(b, cfg))
        out = released_person_codes(c, rows, ident[pos:pos + i.size], cells, ps, hs, cfg, 13)
        pos += i.size
        for j, k in enumerate(cfg.key_names):
            expect = r.frame.loc[b.index, k].to_numpy()
            np.testing.assert_array_equal(np.asarray(kvs[k].domain)[out[:, j]], expect)


def test_extended_cells_salt_and_pseudonyms_equal_the_pandas_engine(gen9_release):
    """The release's cell table from the batches (released combinations of changed
    households added), its digest (the public order's salt) and every person's household
    pseudonym equal the pandas engine's public file's."""
    from sdc.method.cell_passes import CellCounter, CellLocator, cell_codes, cell_table
    from sdc.method.draws import record_identity, unique_identities
    from sdc.method.household_batches import (
        extended_cells,
        person_draw_identities,
        person_stage,
        released_person_codes,
    )
    from sdc.method.households import household_config, person_config, pseudonyms
    from sdc.pipeline.order import order_salt

    cfg = sdc.parse_config(GEN)  # small_blocks: merge by default
    f = generate_household_sample(8000, seed=9, n_regions=40)
    r = gen9_release(0.5, "merge")
    pcfg = person_config(cfg)
    batches = [f.iloc[p] for p in np.array_split(np.arange(len(f)), 4)]
    counter, households = CellCounter(), HouseholdCounter(cfg)
    for b in batches:
        counter.add(cell_codes(b, pcfg))
        households.add(b)
    codes, counts = counter.result()
    cells = cell_table(codes, counts, pcfg)
    agg = households.result()
    hs, ps = household_stage(agg, cfg, 13), person_stage(cells, cfg)
    locate = CellLocator(codes, pcfg)
    located = [locate(cell_codes(b, pcfg)) for b in batches]
    pairs = [person_draw_identities(b, c, ps, cells, cfg) for b, c in zip(batches, located,
                                                                           strict=True)]
    ident = unique_identities(np.concatenate([p[0] for p in pairs]),
                              np.concatenate([p[1] for p in pairs]))
    extra, hh_rows, pos = [], [], 0
    for b, c, (i, _) in zip(batches, located, pairs, strict=True):
        rows = lookup_households(agg.identity, household_identity(b, cfg))
        out = released_person_codes(c, rows, ident[pos:pos + i.size], cells, ps, hs, cfg, 13)
        pos += i.size
        extra.append(out[hs.changed[rows]])
        hh_rows.append(rows)
    table, orig = extended_cells(cells, extra)
    np.testing.assert_array_equal(table.key_codes, r.cells.key_codes)
    np.testing.assert_array_equal(table.frequency, r.cells.frequency)
    assert table.n_cells > cells.n_cells  # changed households made new combinations
    salt = order_salt(table)
    assert salt == order_salt(r.cells)
    pseudo = pseudonyms(agg.identity, 13, salt)[np.concatenate(hh_rows)]
    # the public household ids the in-memory release wrote (its kept public records, input
    # order), and pseudonyms of the household ids' own identities: one per household
    np.testing.assert_array_equal(pseudo, r.released.table.column("hh_id").to_numpy())
    first = ~f["hh_id"].duplicated().to_numpy()
    hh_ident = record_identity(f.loc[first, ["hh_id"]], household_config(cfg))
    assert np.unique(pseudonyms(hh_ident, 13, salt)).size == first.sum()


def test_household_utility_from_the_aggregate_equals_the_pandas_report():
    """utility.json's households section from the count pass's aggregate and the household
    stage on it (values decoded in the input's dtype) equals the pandas engine's."""
    from sdc.reports.households import household_utility_of

    cfg = sdc.parse_config(GEN)
    f = generate_household_sample(6000, seed=12, n_regions=40)
    r = sdc.release_frame(f, cfg, 4)
    agg = _count(f, cfg, 7, 2)
    hs = household_stage(agg, cfg, 4)
    kvs = cfg.key_variables

    def values(codes, k, j):
        return pd.Series(np.asarray(kvs[k].domain, dtype=object)[codes[:, j]]).astype(f[k].dtype)

    keys = cfg.household_keys
    got = household_utility_of({k: values(agg.key_codes, k, j) for j, k in enumerate(keys)},
                               {k: values(hs.released_codes, k, j) for j, k in enumerate(keys)},
                               agg.size, hs.changed)
    # from the frames: every household's first member before and after the release
    first = ~f["hh_id"].duplicated().to_numpy()
    size = f.groupby("hh_id", sort=False).size().to_numpy()
    before = {k: f[k][first].reset_index(drop=True) for k in keys}
    after = {k: r.frame[k][first].reset_index(drop=True) for k in keys}
    changed = (f.loc[first, keys].to_numpy() != r.frame.loc[first, keys].to_numpy()).any(axis=1)
    assert got == household_utility_of(before, after, size, changed)
    assert got == r.household_report["utility"]
    assert got["households_changed"] > 0


def test_household_dependence_on_the_aggregate_equals_the_pandas_engine():
    """The household columns measured on the count pass's aggregate against the household
    stage's PRBs: the pandas engine's figures (household stage), also for a column that the
    check refuses (a function of a household key)."""
    from sdc.method.household_batches import household_dependence

    f = generate_household_sample(8000, seed=5, n_regions=40)
    f["province"] = (f["region"] - 1) // 4  # a function of region: informs on it
    d = {**GEN, "input": {**GEN["input"],
                          "household_columns": ["water", "hh_weight", "province"]}}
    cfg = sdc.parse_config(d)
    agg = _count(f, cfg, 9, 5)
    hs = household_stage(agg, cfg, 7)
    got = household_dependence(agg, hs, cfg)
    # the household columns, then the person columns of one member per household (person
    # keys and person non-key columns: docs/METHOD.md, "Person columns against household keys")
    assert [x.column for x in got] == ["water", "hh_weight", "province", "relation", "sex",
                                       "age"]
    assert [x.level for x in got] == [""] * 3 + ["person"] * 3
    try:
        r = sdc.release_frame(f, cfg, 7)
        expect = r.households.result.dependence
    except sdc.method.dependence.DependenceError as e:
        expect = e.figures
    # the release's household-stage figures: the household columns, then (the pipeline
    # measures them too) the members' person columns
    assert [x.as_dict() for x in got[:3]] == [x.as_dict() for x in expect
                                              if x.level != "person"]
    person = [x.as_dict() for x in expect if x.level == "person"]
    assert not person or [x.as_dict() for x in got[3:]] == person
    # all of them: measured on the whole household table in memory
    assert [x.as_dict() for x in got] == [x.as_dict() for x in _whole_household_figures(f, cfg)]


def _whole_household_figures(f, cfg):
    """The household stage's dependence figures measured in memory on the whole file: the
    household table with one member's person columns (:func:`member_rows`)."""
    import pandas as pd

    from sdc.method.dependence import (
        frame_dependence,
        member_columns,
        member_rows,
        person_level,
    )
    from sdc.method.designs import plan_release
    from sdc.method.household_batches import household_identity
    from sdc.method.households import household_codes, household_config, household_table
    from sdc.method.partition import partition_frame

    hcfg = household_config(cfg)
    code, first = household_codes(f, cfg)
    table = household_table(f, cfg, code, first)
    members = member_rows(f, household_identity(f, cfg), household_identity(table, cfg), cfg)
    table = table if members is None else pd.concat([table, members], axis=1)
    plan = plan_release(partition_frame(table, hcfg), hcfg)
    return person_level(frame_dependence(table, plan, hcfg, {}),
                        member_columns(list(f.columns), cfg))


def test_the_refusal_from_the_filtered_rows_is_the_pandas_engines():
    """Inconsistent households found by the count pass, their rows gathered by a filtered
    read of the batches: check_households on them refuses with the whole file's message."""
    from sdc.method.household_batches import inconsistent_rows

    cfg = sdc.parse_config(GEN)
    f = generate_household_sample(4000, seed=7, n_regions=40)
    sizes = f.groupby("hh_id").size()
    big = sizes[sizes >= 2].index[:30]
    g = f.copy()
    rows = np.flatnonzero(g["hh_id"].isin(big).to_numpy())
    last = g.iloc[rows].groupby("hh_id").tail(1).index
    g.loc[last, "water"] = g.loc[last, "water"] % 9 + 1
    g.loc[last[:3], "dwelling"] = g.loc[last[:3], "dwelling"] % 6 + 1
    agg = _count(g, cfg, 6, 8)
    batches = np.array_split(np.arange(len(g)), 6)
    picked = pd.concat([g.iloc[b][inconsistent_rows(g.iloc[b], agg, cfg)] for b in batches])
    with pytest.raises(InputError) as whole:
        check_households(g, cfg)
    with pytest.raises(InputError) as part:
        check_households(picked, cfg)
    assert str(part.value) == str(whole.value)
    assert "differs within 30 household(s)" in str(whole.value)


@pytest.mark.parametrize("xi,policy", [(0.5, "merge"), (0.34, "calibrate")])
def test_person_dependence_from_batches_equals_the_pandas_engine(xi, policy):
    """The person stage's dependence check counted over batches (kept classes only) gives the
    pandas engine's figures, for a passing and for a refused person column."""
    from sdc.method.cells import cell_codes
    from sdc.method.dependence import DependenceError
    from sdc.method.household_batches import (
        add_person_dependence,
        person_dependence,
        person_dependence_counter,
        person_stage,
    )
    from sdc.method.households import person_config

    f = generate_household_sample(8000, seed=8, n_regions=40)
    rng = np.random.default_rng(3)
    f["employed"] = (rng.random(len(f)) < 0.6).astype(np.int64)
    f["adult"] = (f["age"] >= 20).astype(np.int64)  # gives age away across band edges
    for drop, refused in ((["income", "adult"], False), (["income"], True)):
        cfg = sdc.parse_config({**GEN, "input": {**GEN["input"], "drop": drop},
                                "risk": {"households": "warn", "xi": xi, "small_blocks": policy}})
        pcfg = person_config(cfg)
        try:
            expect = sdc.release_frame(f, cfg, 3).dependence
            assert not refused
        except DependenceError as e:
            assert refused
            expect = e.figures
        from sdc.method.cell_passes import CellCounter, CellLocator, cell_table

        batches = [f.iloc[p] for p in np.array_split(np.arange(len(f)), 5)]
        counter = CellCounter()
        for b in batches:
            counter.add(cell_codes(b, pcfg))
        codes, counts = counter.result()
        cells = cell_table(codes, counts, pcfg)
        ps = person_stage(cells, cfg)
        locate = CellLocator(codes, pcfg)
        dep = person_dependence_counter(list(f.columns), cfg)
        for b in batches:
            add_person_dependence(dep, b, locate(cell_codes(b, pcfg)), cells, ps)
        got = person_dependence(dep, ps, cfg)
        assert [x.as_dict() for x in got] == [x.as_dict() for x in expect]
        assert any(x.flagged for x in got) == refused
