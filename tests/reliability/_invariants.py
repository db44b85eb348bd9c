"""Release invariants checked on any ``sdc.release_frame`` result (used by several test files).

``check_release(original, config, result)`` asserts, record by record and with whole columns:

1. the released frame has the input's index and columns minus ``input.drop``;
2. every non-key column is unchanged per record (bit-identical, dtype included);
3. records of non-sensitive cells are bit-identical in every column;
4. the released key combination of every record is a cell that was non-empty in the
   original (no new cells), and it lies in the record's own PRB (merged blocks included), so
   the record never leaves its partition set / block;
5. the number of records per partition set is equal before and after;
6. ``result.released_cell`` and ``result.changed`` describe the released frame exactly;
7. every PRB's exact max risk and the certificate are <= xi, and the certificate is the max of
   the PRB risks and 1/t of the smallest non-sensitive cell.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

import sdc

XI_SLACK = 1e-12


def cell_keys(part: sdc.Partitioned) -> pd.DataFrame:
    """Key codes of every record of a partitioned frame, one column per key variable."""
    codes = part.cells.key_codes[part.cells.record_cell]
    return pd.DataFrame(codes, columns=part.cells.names)


def check_release(original: pd.DataFrame, config: sdc.ReleaseConfig,
                  result: Any) -> None:
    if config.input.household_id is not None:
        check_household_release(original, config, result)
        return
    keys = config.key_names
    rel = result.frame
    expect_cols = [c for c in original.columns if c not in set(config.input.drop)]
    assert list(rel.columns) == expect_cols
    assert rel.index.equals(original.index)
    base = original[expect_cols]

    # 2. non-key columns unchanged per record
    others = [c for c in expect_cols if c not in keys]
    if others:
        pd.testing.assert_frame_equal(rel[others], base[others], check_exact=True)
    for k in keys:
        assert rel[k].dtype == base[k].dtype, (k, rel[k].dtype, base[k].dtype)

    p0 = sdc.partition_frame(original, config)
    p1 = sdc.partition_frame(rel, config)
    rec_sensitive = p0.sensitive[p0.cells.record_cell]

    # 3. non-sensitive records bit-identical
    keep = ~rec_sensitive
    pd.testing.assert_frame_equal(rel[keep], base[keep], check_exact=True)

    # 4. no new cells; released cell lies in the record's own PRB
    k0 = pd.DataFrame(p0.cells.key_codes, columns=keys)
    k0["_cell0"] = np.arange(len(k0))
    k1 = cell_keys(p1)
    mapped = k1.merge(k0, on=keys, how="left", sort=False)["_cell0"]
    assert mapped.notna().all(), "a released record lies in a cell that was empty"
    released_cell = mapped.to_numpy(dtype=np.int64)
    np.testing.assert_array_equal(released_cell, result.released_cell)
    orig_cell = p0.cells.record_cell
    np.testing.assert_array_equal(orig_cell, result.cells.record_cell)
    np.testing.assert_array_equal(result.cell_prb[released_cell], result.cell_prb[orig_cell])
    np.testing.assert_array_equal(p0.cell_partition_set, result.cell_partition_set)
    # a merged PRB may move a record to another partition set of the same block; a record of a
    # one-partition-set PRB (or a non-sensitive one) keeps its partition set
    blocks_of_ps = pd.Series(result.partition_sets["prb"].to_numpy())
    ps_in_block = blocks_of_ps.groupby(blocks_of_ps).size()
    rec_prb = result.cell_prb[orig_cell]
    single = (rec_prb < 0) | (ps_in_block.reindex(rec_prb).fillna(1).to_numpy() == 1)
    lab0 = np.asarray(p0.partition_keys)[p0.record_partition_set]
    lab1 = np.asarray(p1.partition_keys)[p1.record_partition_set]
    np.testing.assert_array_equal(lab1[single], lab0[single])

    # 5. partition-set record counts equal (labels are domain-based, so comparable)
    n0 = pd.Series(lab0).value_counts()
    n1 = pd.Series(lab1).value_counts()
    merged = result.blocks["n_partition_sets"].gt(1).any() if len(result.blocks) else False
    if not merged:
        pd.testing.assert_series_equal(n0.sort_index(), n1.sort_index())
    else:  # merged blocks preserve the count of the whole block
        blk0 = pd.Series(rec_prb).value_counts().sort_index()
        blk1 = pd.Series(result.cell_prb[released_cell]).value_counts().sort_index()
        pd.testing.assert_series_equal(blk0, blk1)

    # 6. changed = key values differ
    differ = np.zeros(len(rel), dtype=bool)
    for k in keys:
        a, b = rel[k], base[k]
        differ |= ~((a == b).fillna(False).to_numpy(dtype=bool) | (a.isna() & b.isna()).to_numpy())
    np.testing.assert_array_equal(differ, result.changed)
    assert not (differ & ~rec_sensitive).any()

    # 7. risk
    assert result.certificate <= result.xi + XI_SLACK
    if len(result.blocks):
        assert (result.blocks["max_risk"] <= result.xi + XI_SLACK).all()
        assert int(result.blocks["k"].sum()) == int(p0.sensitive.sum())
        assert int(result.blocks["n_records"].sum()) == int(rec_sensitive.sum())
        for row in result.blocks.itertuples():  # loop over PRBs, not records
            prof = {int(t): int(m) for t, m in
                    (p.split(":") for p in row.profile.split(", "))}
            assert abs(sdc.max_risk(prof, row.theta).max_risk - row.max_risk) < 1e-12
    expect = list(result.blocks["max_risk"]) if len(result.blocks) else []
    t = p0.cells.frequency
    if (~p0.sensitive).any():
        expect.append(1.0 / int(t[~p0.sensitive].min()))
    assert result.certificate == (max(expect) if expect else 0.0)


def check_household_release(original: pd.DataFrame, config: sdc.ReleaseConfig,
                            result: Any) -> None:
    """A household release (docs/HOUSEHOLDS.md): no household has inconsistent values (one
    value of every household-level key and household column per household); non-key columns
    unchanged; every household's released household keys are a cell of the household stage's
    table in its own PRB, non-sensitive households unchanged, the changed ones counted; person
    keys change only inside a person PRB; the certificate is the larger of the two stages'."""
    hid = config.input.household_id
    rel = result.frame
    hcols = config.household_keys + list(config.input.household_columns)
    assert (rel.groupby(hid, sort=False)[hcols].nunique(dropna=False) == 1).all().all(), \
        "a household has inconsistent household-level values"
    keys = set(config.key_names)
    for c in original.columns:
        if c not in keys and c not in set(config.input.drop):
            assert rel[c].equals(original[c]), c
    st = result.households
    # the household stage (one unit per household, on its own cell table): every household's
    # released household keys are a cell of that table in the household's own PRB, and the
    # households of non-sensitive household cells keep them; changed ones are counted
    hk = list(config.household_keys)
    kvs = config.key_variables

    def hcells(frame: pd.DataFrame) -> np.ndarray:
        first = frame.groupby(hid, sort=False)[hk].first().loc[pd.unique(original[hid])]
        codes = np.column_stack([pd.Index(kvs[k].domain).get_indexer(first[k]) for k in hk])
        table = pd.DataFrame(st.result.cells.key_codes, columns=hk)
        table["_cell"] = np.arange(len(table))
        found = pd.DataFrame(codes, columns=hk).merge(table, on=hk, how="left", sort=False)
        assert found["_cell"].notna().all(), "a released household lies in an empty cell"
        return found["_cell"].to_numpy(dtype=np.int64)

    h0, h1 = hcells(original), hcells(rel)
    h_prb = np.asarray(st.result.cell_prb)
    np.testing.assert_array_equal(h_prb[h0], h_prb[h1])
    assert (h0 == h1)[h_prb[h0] < 0].all(), "a non-sensitive household changed"
    assert int((h0 != h1).sum()) == int(st.changed.sum())
    # the person stage: a person's person keys change only inside a person PRB
    pk = [config.key_names.index(k) for k in config.person_keys]
    codes = result.cells.key_codes
    moved = (codes[result.record_cell][:, pk] != codes[result.released_cell][:, pk]).any(axis=1)
    assert (result.cell_prb[result.record_cell][moved] >= 0).all()
    if st.small_classes == 0:
        assert result.certificate >= st.person_certificate
    assert result.certificate == max(st.certificate, st.person_certificate)
    assert result.certificate <= config.risk.xi + XI_SLACK
