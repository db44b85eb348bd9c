"""The synthetic EU-SILC of R's laeken (Debian r-cran-laeken: 14,827 persons in 6,000
households) released as a new user would (issue 44): ``sdc init --household-id --weight``,
``sdc design -o``, ``sdc release`` (tests/eusilc_helpers.py ``eusilc_release``: the file is
exported by Rscript when laeken is installed, never copied into the project; else the test
skips).

Checked: the survey weight and the eight person incomes are released (the weight recalibrated
to the released household keys: one value per released region x size, the original totals);
age keeps the five standard classes; the composition, person-level and household-level
certificates are <= xi, and the household keys x size certificate over every released
household (the two 9-person households, exposed: fewer than 1/xi, left out of the public file
by the drafted ``risk.exposed_sizes: drop``, the weight still carrying the file's total); the share of records changed that init,
design and release print agree within sampling error (the release's one draw within 4 binomial standard
errors of the design's, sd = sqrt(n p (1 - p)) per household-size-weighted draw, widened x3
for the households' clustering); the weighted at-risk-of-poverty rate by region stays within 2
standard errors (over households) of the original; no released person shows a missingness
pattern its age class never has (the incomes are missing exactly under 16); at most 10% of the
records change in expectation (9.78% since the per-PRB weights, 2026-12-06). Not met (xfail
strict): the mean person incomes by age class within 3 SE."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

INCOMES = ["py010n", "py050n", "py090n", "py100n", "py110n", "py120n", "py130n", "py140n"]


def _weighted_quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    i = np.argsort(x, kind="stable")
    c = np.cumsum(w[i])
    return float(x[i][np.searchsorted(c, q * c[-1])])


def _arpr_by_region(d: pd.DataFrame) -> pd.DataFrame:
    y = pd.to_numeric(d["eqIncome"]).to_numpy(float)
    w = pd.to_numeric(d["rb050"]).to_numpy(float)
    poor = (y < 0.6 * _weighted_quantile(y, w, 0.5)).astype(float)
    rows = {}
    for g, idx in d.groupby("db040").indices.items():
        W = w[idx].sum()
        p = float((w[idx] * poor[idx]).sum() / W)
        z = pd.Series(w[idx] * (poor[idx] - p)).groupby(d["db030"].to_numpy()[idx]).sum()
        rows[g] = (p, float(np.sqrt((z ** 2).sum()) / W))
    return pd.DataFrame(rows, index=["rate", "se"]).T


def _share(text: str) -> float:
    found = re.findall(r"([\d,]+) records \([\d.]+%\) expected to change", " ".join(text.split()))
    assert found, text[-600:]
    return int(found[-1].replace(",", ""))  # init's summary (the design line says "as drafted")


@pytest.mark.slow
def test_eusilc_init_design_release(eusilc_release):
    """The one run of ``eusilc_release`` (tests/eusilc_helpers.py: ``EUSILC_INIT``),
    shared with tests/e2e/test_household_changes_agree.py."""
    run = eusilc_release
    n_init = _share(run["init"].text)
    cfg = run["job"]
    assert cfg["input"]["weight"] == "rb050"
    # db090 (the household weight, equal to rb050, left in the file): init exits 0 on its own
    # draft and never drafts the copy as a person-level derived column (issue 44's bug)
    assert "is not a function of the key values" not in run["init"].text
    assert "db090" not in (cfg.get("derived") or []), cfg.get("derived")
    assert cfg["input"]["weight_release"] == "recalibrated"
    assert not set(INCOMES) & set(cfg["input"]["drop"])
    assert len(cfg["key_variables"]["age"]["recode"]["bands"]) >= 5
    design_share = float(run["recommended"]["share_changed"])
    r = run["release"]
    out = run["out"]
    pub = pd.read_parquet(out / "public" / "microdata.parquet")
    orig = pd.read_csv(run["csv"])
    assert set(INCOMES) <= set(pub.columns) and "rb050" in pub.columns
    assert pub["age"].nunique() >= 5
    # the released weight: one value per released region x size; the totals of each region
    # kept (the left-out 9-person households' weight recalibrated into their region's others)
    pub_w = pd.to_numeric(pub["rb050"])
    assert (pub_w.groupby([pub["db040"], pub["hsize"]]).nunique() == 1).all()
    tot_o = orig.groupby("db040")["rb050"].sum()
    tot_p = pub_w.groupby(pub["db040"]).sum()
    assert ((tot_p - tot_o).abs() <= 1e-9 * tot_o).all(), tot_p - tot_o
    # records changed: init's and the release's one draw agree within sampling error
    changed = int(re.search(r"records changed\s+([\d,]+)", r.text).group(1).replace(",", ""))
    n = len(orig)
    p = n_init / n
    sd = 3 * np.sqrt(n * p * (1 - p))  # clustered in households: a generous factor 3
    assert abs(changed - n_init) <= 4 * sd, (changed, n_init)
    assert abs(design_share * n - n_init) <= 4 * sd
    # the weighted poverty rate by region within 2 SE of the original
    a, b = _arpr_by_region(orig), _arpr_by_region(pub)
    z = (b["rate"] - a["rate"]) / a["se"]
    assert (z.abs() <= 2).all(), z
    # the three exact certificates <= xi (at most 10% of the records changed:
    # test_eusilc_records_changed_at_most_10_percent)
    risk = json.loads((out / "internal" / "risk.json").read_text())
    comp = risk["households"]["composition"]
    xi = float(run["designed"]["risk"]["xi"])
    assert comp["mode"] == "protect"
    for level in (comp, comp["person"], comp["household_level"]):
        assert level["certificate"] <= xi + 1e-12, level
    # the household keys x size intruder (the public file shows every household's size):
    # certified <= xi over every released household; the two 9-person households (exposed:
    # fewer than 1/xi, no release with pseudonyms protects them) are left out of the public
    # file (init drafts risk.exposed_sizes: drop), their weight recalibrated into the others
    size = comp["size_level"]
    assert size["certificate"] <= xi + 1e-12 and size["exposed_sizes"] == [], size
    left = risk["households"]["left_out"]
    assert left["sizes"] == [{"size": 9, "households": 2}]
    assert (left["households"], left["persons"]) == (2, 18)
    members = pub.groupby("db030").size()
    assert members.max() == 8 and len(pub) == n - 18  # what any intruder sees
    assert pub_w.sum() == pytest.approx(orig["rb050"].sum(), rel=1e-9)  # the file's total


def _bands(age: pd.Series) -> np.ndarray:
    lows = np.array([-1, 16, 25, 50, 65])
    a = pd.to_numeric(age).to_numpy(float)
    return lows[np.searchsorted(lows, a, side="right") - 1]


@pytest.mark.slow
def test_eusilc_no_impossible_missingness_pattern(eusilc_release):
    """The eight person incomes are missing exactly for the persons under 16 in the original;
    under ``protect`` a member whose age class changed kept its incomes, so 147-180 persons
    of 0-15 with an income and 154-166 of 16+ with none were released before the missingness
    groups (sdc.method.household_missing): now none (exact, whatever the seed: a member never
    leaves its group), and risk.json names the relation."""
    run = eusilc_release
    orig = pd.read_csv(run["csv"])
    pub = pd.read_parquet(run["out"] / "public" / "microdata.parquet")
    child_o = _bands(orig["age"]) < 16
    assert (orig[INCOMES].isna().all(axis=1) == child_o).all()  # the relation holds
    child = pd.to_numeric(pub["age"]).to_numpy() < 16
    missing = pub[INCOMES].isna()
    assert int((child & ~missing.all(axis=1)).sum()) == 0
    assert int((~child & missing.any(axis=1)).sum()) == 0
    risk = json.loads((run["out"] / "internal" / "risk.json").read_text())
    groups = risk["households"]["composition"]["missingness_groups"]
    assert any(g.startswith("py010n, py050n") and "age in {-1}" in g for g in groups), groups


@pytest.mark.slow
def test_eusilc_records_changed_at_most_10_percent(eusilc_release):
    """The release's exact expectation of the records changed (what init, design and release
    print), not its one draw: a draw varies by its SD (~41 records, 0.3%) around it. Met
    since the per-PRB weights (METHOD 7.12): 1,450.0 expected (9.78%) with [0.44, 0.44, 0.12]
    and the PRB of 7-member households on [0.39, 0.39, 0.22] (10.08% with one vector)."""
    r = eusilc_release["release"]
    m = re.search(r"records changed\s+[\d,]+ \(expected ([\d,.]+), SD", r.text)
    assert m, r.text[-600:]
    expected = float(m.group(1).replace(",", ""))
    n = len(pd.read_csv(eusilc_release["csv"]))
    assert expected <= 0.10 * n, expected


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="members change age class and keep their incomes: "
                   "mean old-age benefit (py100n) at 16-24 +12 to +20 SE (pensioners moved "
                   "to 16-24); risk.member_bands keeps them within 3 SE (docs/HOUSEHOLDS.md "
                   "'Member bands') but its smaller PRBs let eqSS tell compositions apart, so "
                   "sdc design refuses it on eusilc (dependence check, 0.56 > xi)")
def test_eusilc_incomes_by_age_within_3_se(eusilc_release):
    """The weighted mean of every person income (persons with a value) per age class, public
    against original, in standard errors of the original estimate clustered by household as
    utility.json ``households.survey`` computes them (z_h = sum over the class's members of
    household h of w_i (y_i - m): SE = sqrt(sum_h z_h^2) / sum w); |z| <= 3 for every income
    and class 16-24 .. 65+ (32 comparisons)."""
    run = eusilc_release
    orig = pd.read_csv(run["csv"])
    pub = pd.read_parquet(run["out"] / "public" / "microdata.parquet")

    def est(d: pd.DataFrame, c: str, band: np.ndarray, b: int) -> tuple[float, float]:
        y = pd.to_numeric(d[c]).to_numpy(float)
        w = pd.to_numeric(d["rb050"]).to_numpy(float)
        ok = (band == b) & ~np.isnan(y)
        m = float((w[ok] * y[ok]).sum() / w[ok].sum())
        z = pd.Series(w[ok] * (y[ok] - m)).groupby(d["db030"].to_numpy()[ok]).sum()
        return m, float(np.sqrt((z ** 2).sum()) / w[ok].sum())

    bo, bp = _bands(orig["age"]), pd.to_numeric(pub["age"]).to_numpy()
    z = {}
    for c in INCOMES:
        for b in (16, 25, 50, 65):
            mo, se = est(orig, c, bo, b)
            if se > 0:
                z[(c, b)] = (est(pub, c, bp, b)[0] - mo) / se
    worst = max(z, key=lambda k: abs(z[k]))
    assert abs(z[worst]) <= 3, (worst, z[worst])
