"""The utility measures agencies already use, beside the SE shifts (issue 49): the
confidence-interval overlap of Karr et al. (2006) for every coefficient and group mean, and the
propensity-score pMSE of original vs released over the keys (Snoke et al. 2018), computed from
the two cell tables; each checked against a direct computation on the records."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.reports.analysis import Z95, ci_overlap, propensity_pmse
from tests.release_helpers import reports_of
from tests.reports.test_analysis import _config, _frame


def test_ci_overlap_by_hand() -> None:
    # identical intervals: 1; shifted by one full width (2 z se): touching, 0
    assert ci_overlap(1.0, 0.5, 1.0, 0.5) == pytest.approx(1.0)
    assert ci_overlap(0.0, 1.0, 2 * Z95, 1.0) == pytest.approx(0.0, abs=1e-12)
    # half a width apart with equal SEs: half of each interval overlaps
    assert ci_overlap(0.0, 1.0, Z95, 1.0) == pytest.approx(0.5)
    # a narrow interval inside a wide one: (1 + w_small / w_wide) / 2
    assert ci_overlap(0.0, 2.0, 0.0, 1.0) == pytest.approx(0.75)
    # apart: negative, in half-widths (synthpop's form)
    assert ci_overlap(0.0, 1.0, 4 * Z95, 1.0) == pytest.approx(-1.0)
    assert ci_overlap(None, 1.0, 0.0, 1.0) is None
    assert ci_overlap(0.0, 0.0, 0.0, 1.0) is None


def test_pmse_equals_the_saturated_logit_on_records() -> None:
    """The saturated logistic model's fitted propensity is the released share of each cell, so
    the pMSE is the mean over the stacked records of (share of its cell - c)^2: computed here
    record by record."""
    t = np.array([5, 0, 3, 7, 1, 0])
    s = np.array([4, 2, 3, 6, 0, 0])
    cell = np.concatenate([np.repeat(np.arange(6), t), np.repeat(np.arange(6), s)])
    ind = np.concatenate([np.zeros(t.sum()), np.ones(s.sum())])
    frame = pd.DataFrame({"cell": cell, "ind": ind})
    p = frame.groupby("cell")["ind"].transform("mean").to_numpy()
    c = ind.mean()
    got = propensity_pmse(t, s)
    assert got["pmse"] == pytest.approx(np.mean((p - c) ** 2), rel=1e-12)
    assert got["n_cells"] == 5
    n = len(ind)
    assert got["null_expected"] == pytest.approx(4 * (1 - c) ** 2 * c / n)
    assert propensity_pmse(t, t)["pmse"] == 0.0


def test_pmse_of_a_resample_of_the_original_is_its_null() -> None:
    """Snoke et al.'s null: the released table a multinomial draw from the original's cell
    shares. The standardized pMSE is then a standardized (K-1) chi-square (asymptotically),
    mean 0 and SD 1: over 200 seeded draws its mean lies within 4 SE (1/sqrt(200)) of 0 plus
    0.1 of small-sample slack, and the ratio's mean within 0.15 of 1 (its SD is
    sqrt(2/(K-1)) = 0.23 per draw, 0.016 for the mean). Two independent samples of one
    population would give a ratio of 2: the test can fail."""
    rng = np.random.default_rng(49)
    t = rng.multinomial(4000, rng.dirichlet(np.ones(40)))
    draws = [propensity_pmse(t, rng.multinomial(4000, t / 4000)) for _ in range(200)]
    assert abs(np.mean([d["standardized"] for d in draws])) < 4 / math.sqrt(200) + 0.1
    assert abs(np.mean([d["ratio"] for d in draws]) - 1) < 0.15


@pytest.fixture(scope="module")
def analysis() -> tuple[pd.DataFrame, object, dict]:
    frame, cfg = _frame(), _config()
    result = sdc.release_frame(frame, cfg, seed=7)
    return frame, result, reports_of(result, cfg, seed=7, n_sim=20).utility["analysis"]


def test_release_overlaps_and_pmse_equal_direct(analysis) -> None:
    frame, result, an = analysis
    for reg in an["regressions"]:
        for t in reg["terms"]:
            assert t["ci_overlap"] == pytest.approx(
                ci_overlap(t["before"], t["se_before"], t["after"], t["se_after"]))
            # a shift beyond 2 SE with similar SEs leaves at most half of the intervals shared
            if abs(t["shift_se"]) > 2 and 0.9 < t["se_after"] / t["se_before"] < 1.1:
                assert t["ci_overlap"] < 0.55
    blk = next(b for b in an["mean_shifts"] if b["variable"] == "y" and b["by"] == "grp")
    for row in blk["rows"]:
        if row["suppressed"]:
            continue
        after = frame.loc[result.frame["grp"] == row["value"], "y"]
        se_a = after.std(ddof=1) / np.sqrt(len(after))
        assert row["se_after"] == pytest.approx(se_a, rel=1e-9)
        assert row["ci_overlap"] == pytest.approx(ci_overlap(
            row["mean_before"], row["se_before"], row["mean_after"], se_a), rel=1e-9)
    # pMSE from the records' key combinations, original and released
    keys = ["sex", "age", "grp"]
    both = pd.concat([frame[keys].assign(ind=0.0), result.frame[keys].assign(ind=1.0)])
    p = both.groupby(keys)["ind"].transform("mean").to_numpy()
    assert an["pmse"]["pmse"] == pytest.approx(np.mean((p - 0.5) ** 2), rel=1e-9)
    assert an["pmse"]["pmse"] > 0
