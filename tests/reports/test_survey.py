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


def _small_survey(h: int = 300, seed: int = 9):
    """Households with 1-5 members, an equivalised income per household, a household weight,
    each member's sex and age."""
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 6, h)
    y = rng.lognormal(10, 0.7, h)
    w = rng.uniform(50, 150, h)
    row = np.repeat(np.arange(h), n)
    sex = rng.integers(1, 3, row.size)
    age = rng.integers(0, 90, row.size)
    return y, n, w, row, sex, age


def test_person_groups_equal_a_brute_force_and_a_bootstrap_over_households():
    """By sex and by age group: the estimate equals the persons' weighted mean computed apart
    (pandas); the SE clustered by household equals a brute-force sum over households and a
    bootstrap of households (B = 4,000: the bootstrap SD's own relative SE is 1/sqrt(2B) =
    1.1%, so 6% is more than 5 of them plus the ratio's O(1/H) nonlinearity); it is not the SE
    that treats persons as independent (incomes are shared within households: that one is
    smaller by more than 6%)."""
    from sdc.reports.survey import Persons

    y, n, w, row, sex, age = _small_survey()
    persons = Persons(row, {"sex": sex, "age": age}, {"sex": sex, "age": age})
    out = household_survey_figures(y, n, w, w, {}, {}, "y", persons)
    line = out["poverty_threshold"]["original"]
    poor = (y < line).astype(float)
    sex_g = next(g for g in out["by_person_key"] if g["key"] == "sex")
    age_g = next(g for g in out["by_person_key"] if g["key"] == "age")
    assert age_g["bands"] == [0, 16, 25, 50, 65]
    assert [v["value"] for v in age_g["values"]] == ["0-15", "16-24", "25-49", "50-64", "65+"]
    rng = np.random.default_rng(1)
    boot = rng.multinomial(len(n), np.full(len(n), 1 / len(n)), size=4000).astype(float)
    for gname, mask_of in (("sex", lambda v: sex == v),
                           ("age", lambda v: (age >= {"0-15": 0, "16-24": 16, "25-49": 25,
                                                      "50-64": 50, "65+": 65}[v])
                            & (age < {"0-15": 16, "16-24": 25, "25-49": 50, "50-64": 65,
                                      "65+": 999}[v]))):
        g = sex_g if gname == "sex" else age_g
        for e in g["values"]:
            m = mask_of(e["value"])
            d = pd.DataFrame({"h": row[m], "x": w[row[m]], "v": poor[row[m]]})
            rate = (d.x * d.v).sum() / d.x.sum()
            assert np.isclose(e["poverty_rate"]["original"], rate, rtol=1e-12)
            z = (d.x * (d.v - rate)).groupby(d.h).sum()
            se_brute = float(np.sqrt((z ** 2).sum()) / d.x.sum())
            se = e["poverty_rate"]["se"]
            assert np.isclose(se, se_brute, rtol=1e-10)
            a = np.bincount(d.h, weights=d.x * d.v, minlength=len(n))
            x = np.bincount(d.h, weights=d.x, minlength=len(n))
            se_boot = float(np.std(boot @ a / (boot @ x)))
            assert abs(se / se_boot - 1) < 0.06, (gname, e["value"], se, se_boot)
            se_iid = float(np.sqrt(((d.x * (d.v - rate)) ** 2).sum()) / d.x.sum())
            assert se > 1.06 * se_iid, (se, se_iid)


def test_size_distribution_and_withheld_groups():
    """The weighted share of households by size equals the brute force; a size class of fewer
    than 10 households is joined into the top class; a person group of fewer than 10 persons is
    withheld (null), and the released side is what the released weight gives."""
    from sdc.reports.survey import Persons

    y, n, w, row, sex, age = _small_survey(h=400)
    n = n.copy()
    n[:4] = 9  # four households of 9 (fewer than 10): joined into the top class "5+"
    row = np.repeat(np.arange(len(n)), n)
    rare = np.zeros(row.size, dtype=object)
    rare[:] = "common"
    rare[:5] = "rare"  # five persons
    wa = w * np.where(n == 1, 1.5, 1.0)
    out = household_survey_figures(y, n, w, wa, {}, {}, "y",
                                   Persons(row, {"k": rare}, {"k": rare}))
    sizes = {e["size"]: e for e in out["size_distribution"]}
    assert list(sizes) == ["1", "2", "3", "4", "5+"]
    top = sizes["5+"]
    assert top["households"] == int((n >= 5).sum())
    assert np.isclose(top["share"]["original"], w[n >= 5].sum() / w.sum())
    one = sizes["1"]["share"]
    assert np.isclose(one["released"], wa[n == 1].sum() / wa.sum())
    d = (n == 1).astype(float)
    p = w[n == 1].sum() / w.sum()
    assert np.isclose(one["se"], np.sqrt(((w * (d - p)) ** 2).sum()) / w.sum())
    assert one["z"] > 2  # the released weight favours single households
    k = {e["value"]: e for e in out["by_person_key"][0]["values"]}
    assert k["rare"]["poverty_rate"] == {"original": None, "released": None, "se": None,
                                         "z": None}
    assert k["common"]["poverty_rate"]["se"] > 0


def test_the_release_page_shows_the_survey(tmp_path):
    """A household release with utility.household_income: utility.json follows its schema
    (households.survey with the person keys and sizes) and the report page shows the survey
    after the household certificates."""
    from sdc.io.recode import recode_frame
    from sdc.pipeline.report_parts import batch_reports
    from sdc.reports.schema import validate
    from sdc.samples import generate_household_sample

    frame = generate_household_sample(3000, seed=4, n_regions=6)
    frame.to_csv(tmp_path / "x.csv", index=False)
    cfg = sdc.parse_config({
        "name": "g", "input": {"path": "x.csv", "household_id": "hh_id",
                               "id_column": "person_id", "drop": ["income"],
                               "household_columns": ["water", "hh_weight"]},
        "key_variables": {"region": {"range": [1, 6], "level": "household"},
                          "sex": {"categories": [1, 2]},
                          "age": {"range": [0, 95], "recode": {"bands": [0, 15, 65]}}},
        "risk": {"xi": 0.5, "composition": "protect"},
        "utility": {"household_income": "hh_weight"}, "seed": 1}, base_dir=tmp_path)
    res = sdc.release_frame(recode_frame(frame, cfg), cfg, 3)
    reports = batch_reports(res, cfg, seed=3, n_sim=200)
    validate(reports.risk, reports.utility)
    s = reports.utility["households"]["survey"]
    assert [g["key"] for g in s["by_person_key"]] == ["sex", "age"]
    assert len(s["size_distribution"]) >= 3
    html = reports.html
    assert html.index("Composition certificate") < html.index("The income survey")
    assert "By household key, person key (sex, age group) and household size" in html
