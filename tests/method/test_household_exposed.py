"""``risk.exposed_sizes: drop`` (issue 44, docs/METHOD.md 7.16): the exposed sizes and their
fixed point, the weight recalibrated with the left-out households' totals (every original
household-key total and the grand total kept; their size's total in the nearest released
size), and the runner that leaves their rows out of every batch, renumbered (the same files
in batches of any size)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sdc.method.household_exposed import exposed_of, nearest_released_size
from sdc.method.recalibrate import recalibrated_weights


def test_exposed_sizes_and_the_one_step_fixed_point():
    """Sizes held by fewer than 1/xi households are exposed; leaving them out leaves every
    other size's count as it was, so nothing else becomes exposed."""
    rng = np.random.default_rng(5)
    size = np.concatenate([rng.integers(1, 6, 400), [7, 7, 8, 9, 9, 9]])
    exposed = exposed_of(size, 0.395)
    assert exposed == {7: 2, 8: 1}  # 9 has 3 >= 1/0.395 = 2.53 households
    kept = size[~np.isin(size, list(exposed))]
    assert exposed_of(kept, 0.395) == {}
    for xi in (0.34, 0.5, 0.9):  # any xi: one step
        e = exposed_of(size, xi)
        assert exposed_of(size[~np.isin(size, list(e))], xi) == {}


def test_nearest_released_size():
    assert list(nearest_released_size(np.array([9, 12, 1, 4]), np.array([2, 3, 5, 8]))) == \
        [8, 8, 2, 3]


def test_recalibrated_weight_carries_the_left_out_households():
    rng = np.random.default_rng(7)
    h = 600
    before = rng.integers(0, 4, (h, 1))
    after = before.copy()
    moved = rng.random(h) < 0.2
    after[moved, 0] = rng.integers(0, 4, int(moved.sum()))
    size = rng.integers(1, 7, h)
    weight = 80.0 + 40.0 * before[:, 0] + rng.random(h)
    left_codes = np.array([[0], [2]])
    left_size, left_weight = np.array([9, 9]), np.array([150.0, 90.0])
    new = recalibrated_weights(before, after, size, weight,
                               left=(left_codes, left_size, left_weight))
    # every original household-key total, left-out households included, and the grand total
    orig = (pd.Series(size * weight).groupby(before[:, 0]).sum()
            .add(pd.Series(left_size * left_weight).groupby(left_codes[:, 0]).sum(),
                 fill_value=0))
    rel = pd.Series(size * new).groupby(after[:, 0]).sum()
    pd.testing.assert_series_equal(orig.sort_index(), rel.sort_index(), rtol=1e-8,
                                   check_names=False, check_index_type=False)
    # the sizes: each released size's own total, the largest (6) also the 9s'
    so = pd.Series(size * weight).groupby(size).sum()
    so[6] += float((left_size * left_weight).sum())
    pd.testing.assert_series_equal(so, pd.Series(size * new).groupby(size).sum(), rtol=1e-8)
    # without them the released weight would miss their total (the test can fail)
    plain = recalibrated_weights(before, after, size, weight)
    assert (size * new).sum() - (size * plain).sum() == pytest.approx(
        float((left_size * left_weight).sum()))


def test_the_runner_leaves_the_rows_out_in_batches_of_any_size(tmp_path):
    """The streaming runner in batches of 7 rows and the in-memory runner give the same kept
    rows, renumbered 0..n-1 in input order, the household id read to filter and dropped when
    not asked for (the in-memory runner gives every column anyway)."""
    from sdc.config.load import load_config
    from sdc.executors.memory import InMemory
    from sdc.executors.streaming import LocalBatches
    from sdc.pipeline.household_exposed import LeftOutRunner, without_exposed

    rng = np.random.default_rng(2)
    hh = np.repeat(np.arange(30), rng.integers(1, 4, 30))
    hh = np.concatenate([hh, [99] * 6, [98] * 5])  # one household of 6 and one of 5
    frame = pd.DataFrame({"hid": hh, "pid": np.arange(hh.size), "region": rng.integers(1, 3, hh.size),
                          "sex": rng.integers(1, 3, hh.size), "x": rng.random(hh.size)}).sample(frac=1, random_state=1)
    src = tmp_path / "h.csv"
    frame.to_csv(src, index=False)
    (tmp_path / "c.yaml").write_text(
        f"name: t\ninput: {{path: {src}, household_id: hid, id_column: pid}}\n"
        "key_variables: {region: {categories: [1, 2], level: household}, "
        "sex: {categories: [1, 2]}}\n"
        "risk: {xi: 0.395, composition: protect, exposed_sizes: drop}\nseed: 1\n")
    cfg = load_config(tmp_path / "c.yaml")
    want = frame[~frame.hid.isin([98, 99])].reset_index(drop=True)
    for runner in (InMemory(cfg, pd.read_csv(src)), LocalBatches(cfg, batch_rows=7)):
        r = without_exposed(runner, cfg)
        assert isinstance(r, LeftOutRunner)
        assert r.left_out.sizes == {5: 1, 6: 1} and r.left_out.persons == 11
        got = pd.concat(list(r.frames(columns=["pid", "x"])))
        assert "hid" not in got.columns or isinstance(runner, InMemory)  # (it gives all)
        assert list(got.index) == list(range(len(want)))
        assert got["pid"].tolist() == want["pid"].tolist()
        parts = list(r.map(lambda f, i: (i, f.index.to_numpy(), f["pid"].to_numpy()), ()))
        assert np.concatenate([p[1] for p in parts]).tolist() == list(range(len(want)))
        assert r.row_count() in (None, len(want))  # (a CSV: not known before reading)


def test_large_groups_are_held_to_the_rule_up_to_their_threshold():
    """Under ``risk.large_groups: T`` (two stages, no protect) the groups of at most T
    members, whose intruder knows every member and so their number, are held to the rule: a
    small size held by fewer than 1/xi groups is refused naming it; the larger groups are
    outside that threat model (their sizes are not exposed); members declared a sample: no
    rule (the count is the sample size)."""
    from engine_configs import household_config

    import sdc
    from sdc.errors import InputError
    from sdc.method.household_exposed import applies, size_cap
    from sdc.pipeline.household_exposed import refuse_exposed

    base = household_config(weight="hh_weight", drop=["income"])
    cfg = sdc.parse_config({**base, "risk": {**base["risk"], "large_groups": 9}})
    assert applies(cfg) and size_cap(cfg) == 9
    size = np.array([2] * 50 + [3] * 40 + [7] + [30, 41, 55])  # 7: one group; 30+: large
    assert exposed_of(size, 0.5, size_cap(cfg)) == {7: 1}
    with pytest.raises(InputError, match=r"household size 7 \(1 household\)"):
        refuse_exposed(size, cfg)
    refuse_exposed(size[size != 7], cfg)  # the large groups' unique sizes: outside
    sampled = sdc.parse_config({**base, "input": {**base["input"], "members": "sampled"}})
    assert not applies(sampled)
    refuse_exposed(size, sampled)
