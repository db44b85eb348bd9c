"""Household risk and utility: sdcMicro's hierarchical risk on its own testdata, the
composition intruder, the report sections and the risk.households policy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from engine_configs import household_config

import sdc
from sdc.errors import HouseholdRiskError
from sdc.reports.households import hierarchical_risk
from sdc.samples import generate_household_sample
from tests.conftest import SHARED_DATA
from tests.release_helpers import reports_of

TESTDATA = SHARED_DATA / "sdcmicro" / "testdata.csv"


@pytest.fixture(scope="module")
def testdata() -> pd.DataFrame:
    if not TESTDATA.is_file():
        pytest.skip(f"sdcMicro testdata not found at {TESTDATA} (shared data folder absent)")
    return pd.read_csv(TESTDATA)


def _sdcmicro_hier(frame: pd.DataFrame, keys: list[str], w: str, hid: str) -> tuple[float, float]:
    """A direct transcription of sdcMicro's measure_riskWORK with hid and fast_hier = TRUE
    (R/measure_risk.R) and indivRisk's approx formula (R/indivRisk.R), written independently
    of sdc with pandas: fk = records of the key pattern, Fk = their summed weights,
    p = fk / Fk, r = p/(1-p) log(1/p) (fk = 1), p/(1-p) - (p/(1-p))^2 log(1/p) (fk = 2),
    p / (fk - (1 - p)) (fk > 2), 1/fk where fk = Fk; household risk 1 - prod(1 - r) over its
    members; hier_risk_ER = the sum over persons of their household's risk."""
    g = frame.groupby(keys)
    fk = g[w].transform("size").to_numpy(float)
    big_f = g[w].transform("sum").to_numpy(float)
    p = fk / big_f
    odds = p / (1 - p)
    r = np.where(fk == 1, odds * np.log(1 / p),
                 np.where(fk == 2, odds - odds ** 2 * np.log(1 / p), p / (fk - (1 - p))))
    r = np.where(fk == big_f, 1 / fk, r)
    hh = pd.Series(1 - r).groupby(frame[hid].to_numpy()).prod()
    per_person = 1 - hh.loc[frame[hid].to_numpy()].to_numpy()
    er = float(per_person.sum())
    return er, er / len(frame)


@pytest.mark.parametrize("keys", [["urbrur", "water", "sex", "age"],
                                  ["urbrur", "roof", "walls", "water", "sex"]])
def test_hierarchical_risk_equals_sdcmicro_on_testdata(testdata, keys):
    cell = testdata.groupby(keys).ngroup().to_numpy()
    code, uniq = pd.factorize(testdata["ori_hid"])
    got = hierarchical_risk(cell, code.astype(np.int64), uniq.size,
                            testdata["sampling_weight"].to_numpy(float))
    er, risk = _sdcmicro_hier(testdata, keys, "sampling_weight", "ori_hid")
    assert got["hier_risk_ER"] == pytest.approx(er, rel=1e-10)
    assert got["hier_risk"] == pytest.approx(risk, rel=1e-10)
    assert got["hier_risk_pct"] == pytest.approx(100 * risk, rel=1e-10)


def test_hierarchical_risk_by_hand():
    # cells: persons 0,1 in cell 0 (fk = 2), person 2 alone (fk = 1); households {0, 2}, {1}
    got = hierarchical_risk(np.array([0, 0, 1]), np.array([0, 1, 0]), 2, None)
    # unweighted: r = 1/fk = 0.5, 0.5, 1; household 0: 1 - (1-.5)(1-1) = 1; household 1: .5
    assert got["hier_risk_ER"] == pytest.approx(1 + 0.5 + 1)
    assert got["max_household_risk"] == pytest.approx(1.0)


# income: 0 for every child, gives age away (dependence check)
GEN = household_config(weight="hh_weight", drop=["income"])


def test_composition_risk_before_is_one_over_f_and_unperturbed_equals_before():
    f = generate_household_sample(3000, seed=5, n_regions=12)
    # one household cell and coarse person keys: nothing is sensitive, nothing moves
    cfg = sdc.parse_config({**GEN, "key_variables": {
        "urbrur": {"categories": [1, 2], "level": "household"},
        "sex": {"categories": [1, 2]}}, "partition": {}})
    r = sdc.release_frame(f, cfg, 3)
    assert r.n_changed == 0
    comp = r.households.composition  # measured by the pipeline: seed 3, 20 replications
    # F of every household by a direct groupby of (urbrur, sorted sexes of its members)
    sig = f.groupby("hh_id").apply(
        lambda g: (g["urbrur"].iat[0], tuple(sorted(g["sex"]))), include_groups=False)
    big_f = sig.map(sig.value_counts())
    assert comp["before"]["mean"] == pytest.approx(float((1 / big_f).mean()), rel=1e-12)
    assert comp["mean"] == pytest.approx(comp["before"]["mean"], rel=1e-12)
    assert comp["mean_se"] <= 1e-15  # identical replications (0 up to the sums' rounding)
    for c in comp["classes"]:
        assert c["estimate"] == pytest.approx(c["before"], rel=1e-12)


def test_composition_risk_drops_with_perturbation_and_has_a_standard_error():
    f = generate_household_sample(3000, seed=5, n_regions=12)
    cfg = sdc.parse_config(GEN)
    r = sdc.release_frame(f, cfg, 3)
    comp = r.households.composition
    assert comp["n_sim"] == 20
    assert 0 < comp["mean"] < comp["before"]["mean"]
    assert comp["mean_se"] > 0
    # the same seed gives the same measurement
    assert sdc.release_frame(f, cfg, 3).households.composition == comp


def test_report_sections_and_policy(tmp_path):
    f = generate_household_sample(3000, seed=5, n_regions=12)
    cfg = sdc.parse_config(GEN)
    r = sdc.release_frame(f, cfg, 3)
    rep = reports_of(r, cfg, seed=3, n_sim=20)
    hh = rep.risk["households"]
    assert hh["n_households"] == f["hh_id"].nunique()
    assert hh["household_certificate"] <= 0.5 and hh["person_certificate"] <= 0.5
    assert hh["composition"]["exceeds_xi"] == (not hh["pass"])
    assert hh["hierarchical"]["after"]["hier_risk_ER"] < hh["hierarchical"]["before"]["hier_risk_ER"]
    u = rep.utility["households"]
    assert u["size_distribution_unchanged"] is True
    assert sum(x["households"] for x in u["size_distribution"]) == hh["n_households"]
    assert "Households: the household and composition certificates" in rep.html and "Composition intruder" in rep.html
    # exact comp numbers with the policy fail: refused with the fixes (exit 2 class)
    if not hh["pass"]:
        strict = sdc.parse_config({**GEN, "risk": {"xi": 0.5, "households": "fail"}})
        r2 = sdc.release_frame(f, strict, 3)
        with pytest.raises(HouseholdRiskError, match="risk.composition: protect"):
            reports_of(r2, strict, seed=3, n_sim=20)
        assert issubclass(HouseholdRiskError, sdc.SmallBlockError)


def test_household_risk_figures_do_not_depend_on_the_row_order():
    """risk.json's households section (hierarchical risk, weighted, and the composition
    intruder) is the same to the last bit for the file in another row order: sums run in a
    canonical order (a prerequisite of identical files on every engine)."""
    f = generate_household_sample(3000, seed=6, n_regions=12)
    cfg = sdc.parse_config(GEN)
    a = sdc.release_frame(f, cfg, 3).household_report["risk"]
    g = f.iloc[np.random.default_rng(4).permutation(len(f))].reset_index(drop=True)
    b = sdc.release_frame(g, cfg, 3).household_report["risk"]
    assert a == b
    assert a["composition"]["mean"] < a["composition"]["before"]["mean"]
