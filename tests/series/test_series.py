"""Release series: a 12-month simulated series, stability of per-record outcomes,
the series-risk measurement and the series bookkeeping of release folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.method.draws import keyed_hash
from sdc.samples import generate_census_sample
from sdc.series.membership import SeriesError, find_series
from sdc.series.risk import series_risk_of_files

REPO = Path(__file__).resolve().parents[2]
CENSUS_CONFIG = REPO / "configs" / "census_demo.yaml"
XI = 0.395


@pytest.fixture(scope="module")
def cfg():
    """The demo config with its public files in Parquet only: no test here reads the CSV
    twin (the records file and the outcome are what they check), and writing it was ~30% of
    each 60,000-record release of the 12-month series."""
    c = sdc.load_config(CENSUS_CONFIG)
    c.output.formats = ["parquet"]
    return c


@pytest.fixture(scope="module")
def months() -> list[pd.DataFrame]:
    """12 monthly files of 60,000 records: each month 1% leave and 1% join (new ids). Without
    the non-key columns income and hours_worked: a record's draws depend on the seed, its cell
    and its identity (the id column) only, so the records files are the same bytes with or
    without them (checked), and the dependence check that measured them was ~60% of each
    release's CPU."""
    rng = np.random.default_rng(2026)
    off_key = ["income", "hours_worked"]
    base = generate_census_sample(60_000, seed=11).drop(columns=off_key)
    pool = generate_census_sample(12_000, seed=12).drop(columns=off_key)
    pool["person_id"] = "N" + pool["person_id"].str[1:]
    files, cur, used = [base], base, 0
    for _ in range(11):
        n = len(cur) // 100
        leave = rng.choice(len(cur), n, replace=False)
        cur = pd.concat([cur.drop(cur.index[leave]), pool.iloc[used:used + n]],
                        ignore_index=True)
        used += n
        cur = cur.sample(frac=1.0, random_state=int(rng.integers(1 << 31)))  # new row order
        files.append(cur.reset_index(drop=True))
    return files


@pytest.mark.slow
def _records(frame, cfg, seed, out_dir):
    """The internal records file the pipeline writes for ``frame`` (bytes)."""
    return sdc.release_frame(frame, cfg, seed, out_dir=out_dir).records_file.read_bytes()


def test_twelve_month_series_with_churn_does_not_leak(months, cfg, tmp_path):
    records = [_records(f, cfg, 777, tmp_path / f"a{i}") for i, f in enumerate(months)]
    risk = series_risk_of_files(records, XI)
    assert risk.n_releases == 12
    # share of records present in two consecutive months whose released keys changed
    assert risk.max_changed_share <= 0.02, risk.changed
    # the linking intruder (modal released cell over the series) when one record matches
    assert risk.rate_a1("series_rate") <= XI, risk.intruder
    assert risk.rate_a1("single_rate") <= XI
    # the same measurement has teeth: a new seed every month leaks (independent draws). Six
    # months show it (12 cost 12 more releases for nothing): the linking rate is 0.587 over
    # 6,250 one-match targets (binomial SE 0.006: 31 SE above xi; 12 months: 0.90, 2: 0.29)
    # and ~31% of the common records change every month
    leaky = [_records(f, cfg, 1000 + i, tmp_path / f"b{i}") for i, f in enumerate(months[:6])]
    bad = series_risk_of_files(leaky, XI)
    assert bad.max_changed_share > 0.05
    assert bad.rate_a1("series_rate") > XI, bad.intruder


def _outcome(res) -> pd.Series:
    """Released cell identity per record identity."""
    t = res.records_table()
    return t.set_index("identity")["released"]


def _digits_shared(h: np.ndarray, x: int) -> np.ndarray:
    """Leading 4-bit digits each 64-bit hash in ``h`` shares with ``x`` (16 when equal)."""
    diff = np.asarray(h, dtype=np.uint64) ^ np.uint64(x)
    lead = np.where(diff == 0, 64,
                    63 - np.floor(np.log2(np.maximum(diff, 1).astype(np.float64))))
    return (lead // 4).astype(int)


def _change_bound(movers: int, prb_hashes: np.ndarray, x: int) -> float:
    """Upper bound (mean + 4 SE) on the records whose destination changes when the cell with
    trie hash x joins or leaves a PRB whose other cells have hashes ``prb_hashes`` (k - 1 of them
    besides x, k counted with x).

    Coupled exponential races (sdc.method.draws.trie_rendezvous): at a node v on x's path with
    N_v candidates (x not counted) of which n_c under x's child, a record at v changes its
    winner with probability (N_v - n_c) / (N_v (N_v + 1)) <= 1 / N_v, and it is at v with
    probability N_v / N_0 (N_0 >= k - 2 candidates: own cell excluded). So
    P(change) <= L / (k - 2), L = the races on x's path = 1 + the most leading digits x shares
    with another cell of the PRB. Changes are independent across records (distinct identities):
    binomial(movers, p), bound mean + 4 standard errors + 1.
    """
    k = prb_hashes.size + 1
    levels = 1 + int(_digits_shared(prb_hashes, x).max())
    p = min(1.0, levels / (k - 2))
    return movers * p + 4 * np.sqrt(movers * p * (1 - p)) + 1


def test_removing_one_record_changes_only_records_whose_own_situation_changed(cfg):
    frame = generate_census_sample(20_000, seed=5)
    a = sdc.release_frame(frame, cfg, seed=9)
    # remove one singleton record of a PRB: its PRB loses a cell (the stable destination rule)
    sens = np.flatnonzero((a.cells.frequency[a.cells.record_cell] == 1)
                          & (a.record_prb >= 0))
    gone = frame.index[sens[0]]
    b = sdc.release_frame(frame.drop(index=gone), cfg, seed=9)
    oa, ob = _outcome(a), _outcome(b)
    common = ob.index
    old = oa.reindex(common).to_numpy()
    changed = old != ob.to_numpy()
    removed_cell = a.records_table()["cell"].to_numpy()[sens[0]]
    prb = a.record_prb[sens[0]]
    prb_ids = a.cell_id[a.cell_prb == prb]
    assert b.blocks["k"].sum() == a.blocks["k"].sum() - 1
    # nothing changes outside the PRB, and no move decision changed (t_j and theta unchanged)
    ta = a.records_table().set_index("identity").reindex(common)
    assert np.all(np.isin(ta["cell"].to_numpy()[changed], prb_ids))
    assert np.all(ta["cell"].to_numpy()[changed] != old[changed])        # movers in release a
    # every changed record leaves the removed cell's subtree of the destination trie: in release
    # a its destination shared more leading hash digits with the removed cell than now
    h = lambda ids: keyed_hash(9, "dest:cell", np.asarray(ids, dtype=np.uint64))  # noqa: E731
    hx = int(h([removed_cell])[0])
    assert np.all(_digits_shared(h(old[changed]), hx)
                  > _digits_shared(h(ob.to_numpy()[changed]), hx))
    # the records that went to the removed cell are all redirected
    assert np.all(changed[old == removed_cell])
    movers = int(((ta["cell"].to_numpy() != old) & np.isin(ta["cell"].to_numpy(), prb_ids)).sum())
    others = h(prb_ids[prb_ids != removed_cell])
    assert changed.sum() <= _change_bound(movers, others, hx), (changed.sum(), movers)


def test_adding_a_cell_to_a_prb_changes_only_through_the_stable_destination_rule(cfg):
    frame = generate_census_sample(20_000, seed=6)
    keys = cfg.key_names
    a = sdc.release_frame(frame, cfg, seed=3)
    ta = a.records_table()
    # a new record in a new (empty) cell of a PRB: same partition set, another puma
    first = int(np.flatnonzero(a.record_prb >= 0)[0])
    cands = frame.iloc[[first] * 44].copy()
    cands["puma"] = np.arange(101, 145)
    cands = cands.merge(frame[keys].drop_duplicates(), on=keys, how="left", indicator=True)
    extra = cands[cands["_merge"] == "left_only"].drop(columns="_merge").iloc[[0]]
    extra["person_id"] = "X0000001"
    b = sdc.release_frame(pd.concat([frame, extra], ignore_index=True), cfg, seed=3)
    tb = b.records_table().iloc[: len(frame)]
    assert np.array_equal(ta["cell"].to_numpy(), tb["cell"].to_numpy())
    changed = ta["released"].to_numpy() != tb["released"].to_numpy()
    prb = a.record_prb[first]
    touched = a.record_prb == prb
    assert b.blocks["k"].sum() == a.blocks["k"].sum() + 1
    assert not changed[~touched].any()           # other PRBs: nothing changes
    # in the touched PRB no record's t_j or theta changed, so no move decision changed
    moved_a = ta["released"].to_numpy() != ta["cell"].to_numpy()
    assert not (changed & ~moved_a).any()
    # a changed record moves into the new cell's subtree of the destination trie: its new
    # destination shares more leading hash digits with the new cell than its old one
    new_cell = b.records_table()["cell"].iloc[-1]
    h = lambda ids: keyed_hash(3, "dest:cell", np.asarray(ids, dtype=np.uint64))  # noqa: E731
    hx = int(h([new_cell])[0])
    assert np.all(_digits_shared(h(tb["released"].to_numpy()[changed]), hx)
                  > _digits_shared(h(ta["released"].to_numpy()[changed]), hx))
    movers = int(moved_a[touched].sum())
    others = h(a.cell_id[a.cell_prb == prb])
    assert changed.sum() <= _change_bound(movers, others, hx), (changed.sum(), movers)


def test_adding_a_partition_set_changes_no_other_record(cfg):
    frame = generate_census_sample(20_000, seed=8)
    with_ps = sdc.release_frame(frame, cfg, seed=4).records_table()
    keep = ~((frame["sex"] == 2) & (frame["race"] == 2))      # remove whole partition sets
    without = sdc.release_frame(frame[keep].reset_index(drop=True), cfg, seed=4).records_table()
    both = with_ps[keep.to_numpy()].reset_index(drop=True)
    assert np.array_equal(both["released"].to_numpy(), without["released"].to_numpy())


def test_series_risk_on_constructed_records():
    ident = np.arange(6, dtype=np.uint64)
    cell = np.array([1, 2, 3, 3, 4, 5], dtype=np.uint64)
    r1 = pd.DataFrame({"identity": ident, "cell": cell, "released": cell.copy()})
    r2 = r1.copy()
    r2.loc[0, "released"] = np.uint64(2)        # record 0 moved into cell 2 in release 2
    from tests.series.series_oracle import records_file

    risk = series_risk_of_files([records_file(r) for r in (r1, r2, r2.copy())], XI)
    assert list(risk.changed["n_changed"]) == [1, 0]
    assert risk.changed["share"].iloc[0] == pytest.approx(1 / 6)
    # modal over (1, 2, 2) for record 0 is 2: cell 2 has a = 2 candidates, cell 1 none
    row = risk.intruder[(risk.intruder["t"] == 1) & (risk.intruder["a"] == 2)]
    assert row["series_rate"].iloc[0] == pytest.approx(0.5)


def _fake_release(d: Path, series_id: str | None, sha: str | None) -> None:
    (d / "internal").mkdir(parents=True)
    audit = {"config": {}, "input": {}, "seed": {"sha256": sha}}
    if series_id:
        audit["series"] = {"id": series_id}
    (d / "internal" / "audit.json").write_text(json.dumps(audit))


def test_find_series_previous_release_and_refusal(tmp_path):
    pattern = tmp_path / "releases" / "lfs-{month}"
    _fake_release(tmp_path / "releases" / "lfs-2026-01", "s1", "aa")
    _fake_release(tmp_path / "releases" / "lfs-2026-02", "s1", "aa")
    info = find_series(pattern, tmp_path / "releases" / "lfs-2026-03", series_id="s1",
                       seed_file_sha256="aa", config_name="lfs")
    assert info.previous["dir"].endswith("lfs-2026-02") and not info.new_series
    with pytest.raises(SeriesError, match="--new-series"):
        find_series(pattern, tmp_path / "releases" / "lfs-2026-03", series_id="s2",
                    seed_file_sha256="bb", config_name="lfs")
    info = find_series(pattern, tmp_path / "releases" / "lfs-2026-03", series_id="s2",
                       seed_file_sha256="bb", config_name="lfs", new_series=True)
    assert info.new_series and info.previous is None and len(info.other_series) == 2


def test_without_id_column_duplicates_and_row_order(cfg):
    """No id column and many records with identical non-key values: identities are made
    distinct, the records table carries the draw identities, and a shuffled input gives the
    same released records (as a multiset: identical records are interchangeable)."""
    frame = generate_census_sample(20_000, seed=21).drop(columns=["person_id", "full_name"])
    frame[["hours_worked", "income"]] = 0                  # every record identical off-key
    frame["weight"] = 1.0                                  # (a weight must be > 0)
    c = cfg.model_copy(update={"input": cfg.input.model_copy(update={"id_column": None,
                                                                     "drop": []})})
    a = sdc.release_frame(frame, c, seed=5)
    ta = a.records_table()
    assert ta["identity"].is_unique
    prb_rows = np.flatnonzero(a.record_prb >= 0)
    assert np.array_equal(ta["identity"].to_numpy()[prb_rows], a.prb_identity)
    assert a.n_changed > 0
    b = sdc.release_frame(frame.sample(frac=1.0, random_state=3), c, seed=5)
    keys = c.key_names
    pd.testing.assert_frame_equal(
        a.frame[keys].sort_values(keys).reset_index(drop=True),
        b.frame[keys].sort_values(keys).reset_index(drop=True))


def test_streaming_batches_get_the_same_draw_identities_as_the_in_memory_engine(cfg):
    """Duplicated identities (no id column, identical non-key values) are made distinct in the
    same way by the batch engines and by release_frame (same tiebreak: draw_tiebreak)."""
    from sdc.method.designs import plan_release
    from sdc.method.draws import drawing_identities as batch_identities
    from sdc.method.draws import unique_identities
    from sdc.method.partition import partition_frame
    from sdc.method.plan import draw_plan

    frame = generate_census_sample(20_000, seed=21).drop(columns=["person_id", "full_name"])
    frame[["hours_worked", "income"]] = 0
    frame["weight"] = 1.0
    c = cfg.model_copy(update={"input": cfg.input.model_copy(update={"id_column": None,
                                                                     "drop": []})})
    res = sdc.release_frame(frame, c, seed=5)
    dplan = draw_plan(plan_release(partition_frame(frame, c), c), c)
    halves = np.array_split(np.arange(len(frame)), 2)          # two batches
    parts = [batch_identities(frame.iloc[h], res.cells.record_cell[h], dplan, c) for h in halves]
    ident = unique_identities(np.concatenate([p[0] for p in parts]),
                              np.concatenate([p[1] for p in parts]))
    assert np.array_equal(ident, res.prb_identity)


@pytest.mark.parametrize("pair_rows", [1 << 24, 700])
def test_series_from_files_out_of_core_equals_the_in_memory_measure(
        tmp_path, monkeypatch, pair_rows):
    """series_risk_of_files (every engine's measure: files joined one identity range at a
    time, cell counts in passes, the modal cell found range by range) gives the in-memory
    groupby oracle's figures bit for bit, for two and for four releases: churn, moved records,
    cells with a = 1..5 and more, several row groups; with 700 rows a range the joins run
    over several identity ranges."""
    from sdc.series import risk as series_mod
    from tests.series.series_oracle import records_file, series_risk_in_memory

    monkeypatch.setattr(series_mod, "PAIR_ROWS", pair_rows)
    rng = np.random.default_rng(12)
    n = 4_000
    ident = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64) * np.uint64(2) + \
        rng.integers(0, 2, n).astype(np.uint64)
    cells = rng.integers(0, 2**63, 300, dtype=np.int64).astype(np.uint64)
    # skewed cell sizes: many small cells (a = 1..5) and a few large ones
    p = rng.pareto(1.0, cells.size) + 0.02
    cell = cells[rng.choice(cells.size, n, p=p / p.sum())]

    def release(ids, true_cell, move_share):
        released = true_cell.copy()
        moved = rng.random(ids.size) < move_share
        released[moved] = cells[rng.integers(0, cells.size, int(moved.sum()))]
        order = np.argsort(ids)
        return pd.DataFrame({"identity": ids[order], "cell": true_cell[order],
                             "released": released[order]})

    prev = release(ident[:3_600], cell[:3_600], 0.05)
    cur = release(ident[400:], cell[400:], 0.05)  # 400 left, 400 joined
    paths = []
    for name, frame in (("prev", prev), ("cur", cur)):
        d = tmp_path / name / "internal"
        d.mkdir(parents=True)
        (d / "records.parquet").write_bytes(records_file(frame, row_group_size=500))
        paths.append(d / "records.parquet")
    expected = series_risk_in_memory([prev, cur], xi=0.395)
    got = series_mod.series_risk_of_files(paths, xi=0.395)
    assert got.to_dict() == expected.to_dict()
    assert got.changed.equals(expected.changed) and got.intruder.equals(expected.intruder)
    assert expected.changed["n_common"].iloc[0] == 3_200
    assert 0 < expected.changed["n_changed"].iloc[0] < 3_200
    assert set(expected.intruder["a"]) == {1, 2, 3, 4, 5}
    # risk_vs_previous on a records file (batch engines) = on its bytes (pandas engine)
    by_bytes = series_mod.risk_vs_previous(tmp_path / "prev", records_file(cur), 0.395)
    by_file = series_mod.risk_vs_previous(tmp_path / "prev", paths[1], 0.395)
    assert by_file == by_bytes and "error" not in by_file
    # four releases: the modal released cell differs from the last release's for some
    # records (moved twice to the same cell, or back), found identity range by range
    third = cur.assign(released=np.where(rng.random(len(cur)) < 0.3, cur["released"],
                                         cur["cell"]))
    fourth = release(ident[400:], cell[400:], 0.4)
    series = [prev, cur, third, fourth]
    expected = series_risk_in_memory(series, xi=0.395)
    got = series_mod.series_risk_of_files([records_file(f, row_group_size=700) for f in series],
                                          xi=0.395)
    # (NaN: a class the series intruder has and the single one has not, or the reverse)
    assert json.dumps(got.to_dict()) == json.dumps(expected.to_dict())
    assert got.changed.equals(expected.changed) and got.intruder.equals(expected.intruder)
    assert not expected.intruder["series_rate"].equals(expected.intruder["single_rate"])


def test_lineage_overlap_exact_and_by_sample(tmp_path, monkeypatch) -> None:
    """The lineage share: exact for a small records file; for one over LINEAGE_EXACT records
    the 1/256 sample of identities with zero top bits on both files, read a batch at a time.
    Half of this release's 300,000 identities in the other file: exactly 0.5, and the sample's
    share within 5 binomial SD (n ~ 1,170: SD 0.015) of it."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sdc.series import guard

    rng = np.random.default_rng(11)
    mine = rng.integers(0, 2**64 - 1, 300_000, dtype=np.uint64, endpoint=True)
    other = np.concatenate([mine[:150_000],
                            rng.integers(0, 2**64 - 1, 100_000, dtype=np.uint64)])
    paths = []
    for name, ident in (("mine", mine), ("other", other)):
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"identity": pa.array(ident)}), path, row_group_size=65_536)
        paths.append(path)
    assert guard.identity_overlap(paths[0], paths[1]) == 0.5
    monkeypatch.setattr(guard, "LINEAGE_EXACT", 100_000)
    sampled = guard.lineage_identities(paths[0])
    assert 900 < sampled.size < 1500 and bool((sampled >> np.uint64(56) == 0).all())
    share = guard.identity_overlap(paths[0], paths[1], sampled)
    assert abs(share - 0.5) < 5 * np.sqrt(0.25 / sampled.size)
    assert guard.identity_overlap(paths[0].read_bytes(), paths[1]) == share
