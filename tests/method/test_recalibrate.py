"""``input.weight_release: recalibrated`` (issue 44, docs/METHOD.md 7.13): the released weight
is post-stratified to the released household keys. Exact checks: the weighted totals of every
released household-key combination equal the original ones, the weight is one value per
released combination (a function of the released keys), the raking fallback restores the
one-key margins, and a release of the generated household sample carries it (every executor
runs the same household_values)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.config.model import ConfigError
from sdc.method.recalibrate import recalibrated_weights


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
    pd.testing.assert_series_equal(orig.sort_index(), rel.sort_index(), rtol=1e-12)
    # one value per released combination
    assert (pd.Series(new).groupby([after[:, 0], after[:, 1]]).nunique() == 1).all()


def test_a_lost_combination_is_raked_into_the_margins():
    before = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]])
    after = np.array([[0, 0], [0, 1], [1, 0], [1, 0], [2, 0], [2, 1]])  # (1, 1) lost
    size = np.array([1, 2, 1, 1, 2, 1])  # margins a positive raking can meet
    weight = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    new = recalibrated_weights(before, after, size, weight)
    x, y = size * weight, size * new
    for j, values in ((0, (0, 1, 2)), (1, (0, 1))):  # every one-key margin holds
        for v in values:
            assert np.isclose(y[after[:, j] == v].sum(), x[before[:, j] == v].sum(), rtol=1e-9)


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
    assert (out.groupby(hk).hh_weight.nunique() == 1).all()
    assert out.groupby("hh_id").hh_weight.nunique().max() == 1


def test_margins_no_positive_weights_meet_keep_the_post_stratified_weights():
    before = np.array([[0, 0], [0, 1], [1, 0], [1, 1], [2, 0], [2, 1]])
    after = np.array([[0, 0], [0, 1], [1, 0], [1, 0], [2, 0], [2, 1]])
    size = np.array([1, 2, 1, 3, 2, 1])  # (1, 0) would need more than key 2's margin holds
    weight = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    new = recalibrated_weights(before, after, size, weight)
    kept = np.array([0, 1, 4, 5])  # their combinations are released as they were
    np.testing.assert_allclose(new[kept], weight[kept], rtol=1e-12)
