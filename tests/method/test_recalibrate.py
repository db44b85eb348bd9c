"""``input.weight_release: recalibrated`` (issue 44, docs/METHOD.md 7.13): the released weight
is raked to the released household-key combinations and the household sizes. Checks: the
weighted totals of every released household-key combination and of every household size
equal the original ones (to 1e-8 relative: the raking stops at 1e-10), the weight is one value
per released combination x size (a function of released values), a lost combination is raked
to the one-key margins, margins no positive weights meet are refused (exit 2), and a release
of the generated household sample carries it (every executor runs the same household_values)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.config.model import ConfigError
from sdc.method.recalibrate import RecalibrationError, recalibrated_weights


def test_released_combination_totals_equal_the_original_ones():
    rng = np.random.default_rng(3)
    h = 500
    before = np.column_stack([rng.integers(0, 4, h), rng.integers(0, 3, h)])
    after = before.copy()
    moved = rng.random(h) < 0.2
    after[moved, 0] = rng.integers(0, 4, int(moved.sum()))
    size = rng.integers(1, 6, h)
    weight = 100.0 + 50.0 * before[:, 0] + rng.random(h)
    new = recalibrated_weights(before, after, size, weight)
    orig = pd.Series(size * weight).groupby([before[:, 0], before[:, 1]]).sum()
    rel = pd.Series(size * new).groupby([after[:, 0], after[:, 1]]).sum()
    pd.testing.assert_series_equal(orig.sort_index(), rel.sort_index(), rtol=1e-8)
    # and every household size's total
    pd.testing.assert_series_equal(pd.Series(size * weight).groupby(size).sum(),
                                   pd.Series(size * new).groupby(size).sum(), rtol=1e-8)
    # one value per released combination x size
    assert (pd.Series(new).groupby([after[:, 0], after[:, 1], size]).nunique() == 1).all()
    # the post-stratified weight alone would not have kept the size totals (the test can fail)
    post = pd.Series(size * weight).groupby([before[:, 0], before[:, 1]]).sum() / pd.Series(
        size).groupby([after[:, 0], after[:, 1]]).sum()
    ps = post.loc[list(zip(after[:, 0], after[:, 1], strict=True))].to_numpy()
    assert not np.allclose(pd.Series(size * ps).groupby(size).sum(),
                           pd.Series(size * weight).groupby(size).sum(), rtol=1e-3)


def test_an_empty_cell_leaves_the_margins_met():
    """A combination x size cell every household of which moved away (released empty): the
    other cells of its combination and of its size carry its total."""
    rng = np.random.default_rng(8)
    h = 400
    before = rng.integers(0, 3, (h, 1))
    size = rng.integers(1, 4, h)
    after = before.copy()
    after[(before[:, 0] == 0) & (size == 3), 0] = 1  # cell (0, 3) released empty
    weight = 50.0 + 40.0 * before[:, 0] + 10.0 * size + rng.random(h)
    new = recalibrated_weights(before, after, size, weight)
    assert not ((after[:, 0] == 0) & (size == 3)).any()
    np.testing.assert_allclose(np.bincount(after[:, 0], weights=size * new),
                               np.bincount(before[:, 0], weights=size * weight), rtol=1e-8)
    np.testing.assert_allclose(np.bincount(size, weights=size * new)[1:],
                               np.bincount(size, weights=size * weight)[1:], rtol=1e-8)
    assert (new > 0).all()


def test_a_lost_combination_is_raked_into_the_margins():
    rng = np.random.default_rng(5)
    h = 300
    before = np.column_stack([rng.integers(0, 3, h), rng.integers(0, 2, h)])
    size = rng.integers(1, 4, h)
    after = before.copy()
    after[(before[:, 0] == 1) & (before[:, 1] == 1), 1] = 0  # (1, 1) lost
    weight = 10.0 + 5.0 * before[:, 0] + rng.random(h)
    new = recalibrated_weights(before, after, size, weight)
    x, y = size * weight, size * new
    for j in (0, 1):  # every one-key margin holds
        np.testing.assert_allclose(np.bincount(after[:, j], weights=y),
                                   np.bincount(before[:, j], weights=x), rtol=1e-8)
    np.testing.assert_allclose(np.bincount(size, weights=y)[1:],
                               np.bincount(size, weights=x)[1:], rtol=1e-8)


def test_recalibrated_needs_a_household_file_and_a_weight():
    d = {"name": "t", "input": {"path": "x.csv", "weight_release": "recalibrated"},
         "key_variables": {"sex": {"categories": [1, 2]}}, "risk": {"xi": 0.395}, "seed": 1}
    with pytest.raises(ConfigError, match="weight_release: recalibrated needs"):
        sdc.parse_config(d)


def test_release_of_the_generated_sample_carries_the_recalibrated_weight():
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(4000, seed=4, n_regions=12)
    cfg = sdc.parse_config({
        "name": "g", "input": {"path": "x.csv", "household_id": "hh_id",
                               "id_column": "person_id", "drop": ["income"],
                               "weight": "hh_weight", "weight_release": "recalibrated",
                               "household_columns": ["water"]},
        "key_variables": {"region": {"range": [1, 12], "level": "household"},
                          "urbrur": {"categories": [1, 2], "level": "household"},
                          "sex": {"categories": [1, 2]},
                          "age": {"range": [0, 95], "recode": {"bands": [0, 15, 30, 45, 65]}}},
        "risk": {"xi": 0.5, "composition": "protect", "destinations": "near"}, "seed": 1})
    from sdc.io.recode import recode_frame

    out = sdc.release_frame(recode_frame(frame, cfg), cfg, 7).frame
    hk = ["region", "urbrur"]
    orig = frame.groupby(hk).hh_weight.sum()
    rel = out.groupby(hk).hh_weight.sum()
    common = orig.index.intersection(rel.index)
    # every released combination keeps its original total, unless raking moved a lost one's
    lost = orig.index.difference(rel.index)
    if lost.empty:
        np.testing.assert_allclose(rel[common], orig[common], rtol=1e-9)
    assert np.isclose(out.hh_weight.sum(), frame.hh_weight.sum(), rtol=1e-9)
    # the weighted household size totals (persons: size x weight) are the original ones
    n_o = frame.groupby("hh_id").hh_id.transform("size")
    n_r = out.groupby("hh_id").hh_id.transform("size")
    np.testing.assert_allclose(out.hh_weight.groupby(n_r).sum().sort_index(),
                               frame.hh_weight.groupby(n_o).sum().sort_index(), rtol=1e-8)
    assert (out.groupby([*hk, n_r]).hh_weight.nunique() == 1).all()
    assert out.groupby("hh_id").hh_weight.nunique().max() == 1


def test_margins_no_positive_weights_meet_are_refused():
    """Region 0 holds only households of size 1 and size 1 only region 0's: its region total
    and its size total must agree, and they do not once a size-2 household moves in."""
    before = np.array([[0], [1], [1], [1]])
    after = np.array([[0], [0], [1], [1]])
    size = np.array([1, 2, 2, 3])
    weight = np.array([10.0, 20.0, 30.0, 40.0])
    # region 0: 1 x w(0,1) + 2 x w(0,2) = 10; size 1: w(0,1) = 10; size 2: 2 w(0,2) + 2 w(1,2)
    # = 100; region 1: 2 w(1,2) + 3 w(1,3) = 220 and size 3: 3 w(1,3) = 120: w(0,2) = 0
    with pytest.raises(RecalibrationError, match="did not converge") as e:
        recalibrated_weights(before, after, size, weight, "w")
    assert "raking w" in str(e.value) and "fix:" in str(e.value)
    assert isinstance(e.value, sdc.InputError)  # exit 2


def test_eusilc_margins_hold_after_households_move(tmp_path_factory):
    """R laeken's synthetic EU-SILC (exported by Rscript; skipped without laeken): its
    calibrated weight rb050 (one value per region x size), 15% of the households moved to a
    random region (as a household stage would, sizes kept): every region's and every size's
    person-weighted total is the original one to 1e-8, one weight per region x size."""
    from eusilc_helpers import export_eusilc

    d = pd.read_csv(export_eusilc(tmp_path_factory))
    hh = d.groupby("db030").agg(region=("db040", "first"), w=("rb050", "first"),
                                size=("db030", "size"))
    region = pd.Categorical(hh["region"]).codes.astype(np.int64)
    rng = np.random.default_rng(44)
    after = region.copy()
    moved = rng.random(len(hh)) < 0.15
    after[moved] = rng.integers(0, region.max() + 1, int(moved.sum()))
    size, w = hh["size"].to_numpy(), hh["w"].to_numpy(float)
    new = recalibrated_weights(region, after, size, w, "rb050")
    k = region.max() + 1
    np.testing.assert_allclose(np.bincount(after, weights=size * new, minlength=k),
                               np.bincount(region, weights=size * w, minlength=k), rtol=1e-8)
    np.testing.assert_allclose(np.bincount(size, weights=size * new),
                               np.bincount(size, weights=size * w), rtol=1e-8)
    assert (pd.Series(new).groupby([after, size]).nunique() == 1).all()
    # the post-stratified weight alone moves the size totals (what the raking repairs)
    ps = (np.bincount(region, weights=size * w, minlength=k)
          / np.bincount(after, weights=size, minlength=k))[after]
    single = size == 1
    assert abs((ps * single).sum() / (w * single).sum() - 1) > 1e-3
