"""sdcMicro-style risk measures (sdc.reports.disclosure): hand arithmetic, sdcMicro's own reference
vectors, and sdcMicro's testdata with expected values derived independently of sdc."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sdc.reports.disclosure import (
    frequencies,
    frequency_classes,
    high_risk_count,
    individual_risk,
    k_anonymity,
    measure_risk,
    risk_summary,
)
from tests.conftest import SHARED_DATA

DATA = SHARED_DATA
TESTDATA = DATA / "sdcmicro" / "testdata.csv"
KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]


def _small() -> pd.DataFrame:
    # cells: (1,1) x3, (1,2) x2, (2,1) x1, (2,2) x1
    return pd.DataFrame({
        "a": [1, 1, 1, 1, 1, 2, 2],
        "b": [1, 1, 1, 2, 2, 1, 2],
        "w": [10.0, 10.0, 10.0, 5.0, 5.0, 4.0, 1.0],
    })


def test_unweighted_by_hand() -> None:
    m = measure_risk(_small(), ["a", "b"])
    assert m["fk"].tolist() == [3, 3, 3, 2, 2, 1, 1]
    # without weights r = 1/fk: ER = 3*(1/3) + 2*(1/2) + 1 + 1 = 4, global risk = 4/7
    assert m["risk"] == pytest.approx([1 / 3] * 3 + [1 / 2] * 2 + [1.0, 1.0])
    assert m["global_risk_ER"] == pytest.approx(4.0)
    assert m["global_risk"] == pytest.approx(4 / 7)
    assert m["global_risk_pct"] == pytest.approx(400 / 7)


def test_weighted_by_hand() -> None:
    m = measure_risk(_small(), ["a", "b"], "w")
    assert m["Fk"].tolist() == [30.0] * 3 + [10.0] * 2 + [4.0, 1.0]
    # fk=3, Fk=30: p = 0.1, r = p / (fk - (1 - p)) = 0.1 / 2.1
    r3 = 0.1 / 2.1
    # fk=2, Fk=10: p = 0.2, p/(1-p) = 0.25, r = 0.25 - 0.25^2 * log(5)
    r2 = 0.25 - 0.0625 * math.log(5.0)
    # fk=1, Fk=4: p = 0.25, p/(1-p) = 1/3, r = (1/3) * log(4)
    r1 = math.log(4.0) / 3
    # fk=1, Fk=1: fk == Fk, so r = 1/fk = 1
    expected = [r3] * 3 + [r2] * 2 + [r1, 1.0]
    assert m["risk"] == pytest.approx(expected, rel=1e-12)
    assert m["global_risk_ER"] == pytest.approx(sum(expected), rel=1e-12)


def test_sdcmicro_reference_vector() -> None:
    """sdcMicro's tests/testthat/test_indivRisk.R ("data frame with weight, method = approx,
    survey = TRUE"): the values sdcMicro itself asserts, to 8 digits."""
    frame = pd.DataFrame({
        "A": [2, 3, 2, 2, 3, 3, 1, 2],
        "B": [3, 3, 3, 3, 3, 3, 4, 3],
        "C": [1, 3, 1, 2, 1, 1, 1, 1],
        "weight": [18.0, 45.5, 39.0, 17.0, 92.0, 8.0, 123.5, 51],
    })
    m = measure_risk(frame, ["A", "B", "C"], "weight")
    assert m["risk"] == pytest.approx([0.01369863, 0.08579129, 0.01369863, 0.17707583,
                                       0.01877883, 0.01877883, 0.03931625, 0.01369863], abs=5e-9)
    # and survey = FALSE / no weight: 1 / fk
    m0 = measure_risk(frame, ["A", "B", "C"])
    assert np.round(m0["risk"], 5).tolist() == [0.33333, 1.0, 0.33333, 1.0, 0.5, 0.5, 1.0, 0.33333]


def test_individual_risk_fk_equals_big_fk_overrides() -> None:
    # fk = 2 with Fk = 2 would divide by zero in the fk = 2 form; sdcMicro sets 1/fk
    r = individual_risk(np.array([2, 3, 1]), np.array([2.0, 3.0, 1.0]))
    assert r.tolist() == [0.5, 1 / 3, 1.0]


def test_k_anonymity_and_classes_by_hand() -> None:
    fk = np.array([3, 3, 3, 2, 2, 1, 1])
    w = np.array([10.0, 10, 10, 5, 5, 4, 1])
    ka = {row["k"]: row for row in k_anonymity(fk, w)}
    # fk < 2: two records (weights 4 + 1); fk < 3: four (5+5+4+1); fk < 5: all seven (50)
    assert (ka[2]["records_violating"], ka[2]["weighted_violating"]) == (2, 5.0)
    assert (ka[3]["records_violating"], ka[3]["weighted_violating"]) == (4, 15.0)
    assert (ka[5]["records_violating"], ka[5]["weighted_violating"]) == (7, 45.0)
    assert ka[2]["share"] == pytest.approx(2 / 7)
    cls = {c["class"]: (c["cells"], c["records"]) for c in frequency_classes(np.array([3, 2, 1, 1, 7, 4]))}
    # t = 1,1 -> 2 cells 2 records; t = 2 -> 1 cell 2 records; 3-4: t = 3, 4 -> 2 cells 7; 5+: 7
    assert cls == {"1": (2, 2), "2": (1, 2), "3-4": (2, 7), "5+": (1, 7)}


def test_high_risk_count_by_hand() -> None:
    # median 0.1, |r - 0.1| = [0, 0, 0, 0.1, 0.8] -> median 0 -> mad 0: r > 0.1 and > 0.1
    assert high_risk_count(np.array([0.1, 0.1, 0.1, 0.2, 0.9])) == 2
    # median 0.5, deviations [0.4, 0.3, 0, 0.1, 0.4] -> mad = 1.4826 * 0.3; bound 0.5 + 0.89
    assert high_risk_count(np.array([0.1, 0.2, 0.5, 0.6, 0.9])) == 0


def test_frequencies_independent_of_row_order() -> None:
    rng = np.random.default_rng(1)
    cell = rng.integers(0, 50, 2000)
    w = rng.random(2000) * 100
    fk, big_f = frequencies(cell, w)
    perm = rng.permutation(2000)
    fk2, big_f2 = frequencies(cell[perm], w[perm])
    assert np.array_equal(fk[perm], fk2)
    assert np.array_equal(big_f[perm], big_f2)  # bit for bit: canonical summation order


def test_risk_summary_small() -> None:
    s = risk_summary(np.array([0, 0, 0, 1, 1, 2, 3]), None, xi=0.395)
    assert s["n_cells"] == 4
    # sensitive: t < 1/0.395 = 2.53 -> cells with t = 2, 1, 1: 3 cells, 4 records
    assert s["sensitive"] == {"threshold": pytest.approx(1 / 0.395), "cells": 3, "records": 4}
    assert s["sdcmicro"]["expected_reidentifications"] == pytest.approx(4.0)
    assert s["sdcmicro"]["max_individual_risk"] == 1.0
    by = {c["class"]: c for c in s["sdcmicro"]["by_fk_class"]}
    assert by["1"]["records"] == 2 and by["1"]["sum_risk"] == pytest.approx(2.0)


# ------------------------------------------------------------------------------------------
# sdcMicro's testdata: expected values from pandas groupby + a direct transcription of
# sdcMicro's R loop (indivRisk.R), not from sdc.reports.disclosure
# ------------------------------------------------------------------------------------------
def _transcribed_indiv_risk(fk: list[int], big_f: list[float]) -> list[float]:
    """Line-by-line transcription of sdcMicro's indivRisk(method = "approx", survey = TRUE)."""
    rk = []
    for f, big in zip(fk, big_f, strict=True):
        pk = f / big
        r = 0.0
        if f > 2:
            r = pk / (f - (1 - pk))
        if f == 2:
            r = (pk / (1 - pk)) - ((pk / (1 - pk)) ** 2) * math.log(1 / pk)
        if f == 1:
            r = (pk / (1 - pk)) * math.log(1 / pk)
        if f == big:
            r = 1 / f
        rk.append(r)
    return rk


@pytest.fixture(scope="module")
def testdata() -> pd.DataFrame:
    if not TESTDATA.is_file():
        pytest.skip(f"sdcMicro testdata not found at {TESTDATA} (shared data folder absent)")
    return pd.read_csv(TESTDATA)


@pytest.mark.parametrize("weight", ["sampling_weight", "household_weights", None])
def test_sdcmicro_testdata(testdata: pd.DataFrame, weight: str | None) -> None:
    g = testdata.groupby(KEYS)
    fk_exp = g[KEYS[0]].transform("size").to_numpy()
    m = measure_risk(testdata, KEYS, weight)
    assert np.array_equal(m["fk"], fk_exp)
    if weight is None:
        r_exp = [1.0 / f for f in fk_exp]
        assert np.array_equal(m["Fk"], fk_exp.astype(float))
    else:
        big_exp = g[weight].transform("sum").to_numpy()
        np.testing.assert_allclose(m["Fk"], big_exp, rtol=1e-12)
        r_exp = _transcribed_indiv_risk(fk_exp.tolist(), big_exp.tolist())
    np.testing.assert_allclose(m["risk"], r_exp, rtol=1e-10)
    er = math.fsum(r_exp)
    assert m["global_risk_ER"] == pytest.approx(er, rel=1e-10)
    assert m["global_risk"] == pytest.approx(er / len(testdata), rel=1e-10)
    for row in k_anonymity(m["fk"]):
        assert row["records_violating"] == int((fk_exp < row["k"]).sum())


def test_sdcmicro_testdata_counts(testdata: pd.DataFrame) -> None:
    """Frequency classes and k-anonymity on the 7 keys, from a plain value_counts."""
    counts = testdata.value_counts(KEYS)  # one row per non-empty cell
    cell = testdata.groupby(KEYS).ngroup().to_numpy()
    s = risk_summary(cell, testdata["sampling_weight"].to_numpy(float), xi=0.395)
    assert s["n_cells"] == len(counts)
    cls = {c["class"]: c for c in s["frequency_classes"]}
    assert cls["1"]["cells"] == int((counts == 1).sum())
    assert cls["2"]["records"] == int(2 * (counts == 2).sum())
    assert cls["3-4"]["records"] == int(counts[(counts >= 3) & (counts <= 4)].sum())
    assert cls["5+"]["records"] == int(counts[counts >= 5].sum())
    ka = {r["k"]: r["records_violating"] for r in s["k_anonymity"]}
    assert ka == {2: int(counts[counts < 2].sum()), 3: int(counts[counts < 3].sum()),
                  5: int(counts[counts < 5].sum())}
    # all weights are 100 in testdata: Fk = 100 fk, so p = 0.01 everywhere
    assert s["sdcmicro"]["weighted"] is True
