"""utility.json ``households.survey`` (issue 44, sdc.reports.survey): the at-risk-of-poverty
rate, mean income and Gini of a household income survey, checked against formulas written
apart (pandas, persons expanded), and carried by a release of the generated sample."""

from __future__ import annotations

import numpy as np
import pandas as pd

import sdc
from sdc.reports.survey import gini, household_survey_figures, poverty_threshold


def _persons(y, n, w):
    return np.repeat(y, n), np.repeat(w, n)


def test_figures_equal_the_person_level_formulas():
    rng = np.random.default_rng(5)
    h = 400
    y = rng.lognormal(10, 0.6, h)
    n = rng.integers(1, 6, h)
    w = rng.uniform(50, 150, h)
    region = pd.Series(rng.integers(0, 3, h))
    out = household_survey_figures(y, n, w, w, {"r": region}, {"r": region}, "y")
    yp, wp = _persons(y, n, w)
    # weighted median by sorting persons: the first value where the cumulated weight >= half
    i = np.argsort(yp, kind="stable")
    med = yp[i][np.searchsorted(np.cumsum(wp[i]), 0.5 * wp.sum())]
    assert np.isclose(out["poverty_threshold"]["original"], 0.6 * med)
    assert np.isclose(poverty_threshold(y, n * w), 0.6 * med)
    rate = (wp * (yp < 0.6 * med)).sum() / wp.sum()
    assert np.isclose(out["overall"]["poverty_rate"]["original"], rate)
    assert out["overall"]["poverty_rate"]["z"] == 0.0  # same file, same figures
    # Gini: mean absolute difference over all pairs of persons / (2 mean), weighted
    yy, ww = yp[:600], wp[:600]
    d = (ww[:, None] * ww[None, :] * np.abs(yy[:, None] - yy[None, :])).sum()
    g = d / (2 * ww.sum() ** 2 * (ww * yy).sum() / ww.sum())
    assert abs(gini(yy, ww) - g) < 2.0 / 600  # the discrete formula's O(1/n) difference
    mean_r0 = (wp * yp)[np.repeat(region.to_numpy(), n) == 0].sum() / wp[
        np.repeat(region.to_numpy(), n) == 0].sum()
    v0 = next(v for v in out["by_household_key"][0]["values"] if v["value"] == 0)
    assert np.isclose(v0["mean_income"]["original"], mean_r0)


def test_a_release_carries_the_survey_section():
    from sdc.io.recode import recode_frame
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(3000, seed=4, n_regions=6)
    cfg = sdc.parse_config({
        "name": "g", "input": {"path": "x.csv", "household_id": "hh_id",
                               "id_column": "person_id", "drop": ["income"],
                               "household_columns": ["water", "hh_weight"]},
        "key_variables": {"region": {"range": [1, 6], "level": "household"},
                          "sex": {"categories": [1, 2]},
                          "age": {"range": [0, 95], "recode": {"bands": [0, 15, 65]}}},
        "risk": {"xi": 0.5}, "utility": {"household_income": "hh_weight"}, "seed": 1})
    res = sdc.release_frame(recode_frame(frame, cfg), cfg, 3)
    s = res.household_report["utility"]["survey"]
    assert s["income"] == "hh_weight" and len(s["by_household_key"][0]["values"]) == 6
    assert 0.0 <= s["overall"]["poverty_rate"]["original"] <= 1.0
