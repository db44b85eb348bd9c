"""Utility measured on what analysts compute (sdc.reports.analysis): the regressions on the
keys from per-cell sufficient statistics equal a least-squares fit on the records (exact, to
rounding), the mean shifts and displacement equal direct computations on the records, and
the page shows a small shift with the digits it needs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.reports.analysis import shift_digits
from tests.release_helpers import reports_of


def _config() -> sdc.ReleaseConfig:
    return sdc.parse_config({
        "name": "analysis", "input": {"path": "x.csv", "id_column": "id"},
        "key_variables": {"sex": {"categories": [1, 2]},
                          "age": {"range": [0, 29]},
                          "grp": {"categories": ["a", "b", "c", "d"]}},
        "partition": {"sex": "as_is"}, "risk": {"xi": 0.395}}, base_dir=Path("."))


def _frame(n: int = 1500, seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice([1, 2], n)
    age = np.minimum(rng.geometric(0.08, n) - 1, 29)
    grp = rng.choice(list("abcd"), n, p=[0.5, 0.3, 0.15, 0.05])
    y = 3.0 + 0.4 * (sex == 2) + 0.05 * age + rng.normal(0, 1, n) + (grp == "c") * 0.7
    z = (rng.uniform(size=n) < 0.2 + 0.02 * age).astype(np.int64)
    return pd.DataFrame({"id": np.arange(n), "sex": sex, "age": age, "grp": grp, "y": y,
                         "z": z})


@pytest.fixture(scope="module")
def released() -> tuple[pd.DataFrame, object, sdc.ReleaseConfig, dict]:
    frame, cfg = _frame(), _config()
    result = sdc.release_frame(frame, cfg, seed=7)
    assert result.n_changed > 20  # the release moves records: the figures are not trivial
    reports = reports_of(result, cfg, seed=7, n_sim=20)
    return frame, result, cfg, reports.utility


def _design(df: pd.DataFrame, ref_grp: str) -> tuple[np.ndarray, list[str]]:
    """The records' design: intercept, sex dummy (ref = most frequent), age linear, grp
    dummies (ref = most frequent)."""
    cols, names = [np.ones(len(df))], ["(intercept)"]
    for v, ref in (("sex", None), ("age", "numeric"), ("grp", ref_grp)):
        if ref == "numeric":
            cols.append(df[v].to_numpy(float))
            names.append(v)
            continue
        levels = sorted(df[v].unique().tolist(), key=str)
        if ref is None:
            ref = df[v].value_counts().idxmax()
        for lev in levels:
            if lev != ref:
                cols.append((df[v] == lev).to_numpy(float))
                names.append(f"{v}={lev}")
    return np.column_stack(cols), names


def _lstsq(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    n, p = x.shape
    sigma2 = resid @ resid / (n - p)
    se = np.sqrt(np.diag(np.linalg.inv(x.T @ x)) * sigma2)
    r2 = 1 - resid @ resid / ((y - y.mean()) @ (y - y.mean()))
    return beta, se, r2


@pytest.mark.parametrize("col", ["y", "z"])
def test_key_regressions_equal_lstsq_on_records(released, col) -> None:
    """Exact: the per-cell X'X, X'y route gives numpy's lstsq on the records, before (the
    original keys) and after (the released keys), to 1e-9 relative."""
    frame, result, cfg, u = released
    reg = next(r for r in u["analysis"]["regressions"] if r["variable"] == col)
    ref_grp = frame["grp"].value_counts().idxmax()
    for side, df in (("before", frame), ("after", result.frame)):
        x, names = _design(df, ref_grp)
        beta, se, r2 = _lstsq(x, frame[col].to_numpy(float))
        got = {t["term"]: t for t in reg["terms"]}
        assert sorted(got) == sorted(names)
        for i, name in enumerate(names):
            assert got[name][side] == pytest.approx(beta[i], rel=1e-9, abs=1e-11), (side, name)
            assert got[name][f"se_{side}"] == pytest.approx(se[i], rel=1e-8), (side, name)
        assert reg[f"r2_{side}"] == pytest.approx(r2, rel=1e-9)
    for t in reg["terms"]:
        assert t["shift_se"] == pytest.approx((t["after"] - t["before"]) / t["se_before"])
    assert reg["binary"] is (col == "z")


def test_mean_shifts_equal_direct_means(released) -> None:
    frame, result, cfg, u = released
    blk = next(b for b in u["analysis"]["mean_shifts"] if b["variable"] == "z"
               and b["by"] == "grp")
    assert blk["binary"]
    for row in blk["rows"]:
        g = row["value"]
        before = frame.loc[frame["grp"] == g, "z"]
        after = frame.loc[result.frame["grp"] == g, "z"]
        assert (row["n_before"], row["n_after"]) == (len(before), len(after))
        if row["suppressed"]:
            continue
        se = before.std(ddof=1) / np.sqrt(len(before))
        assert row["se_before"] == pytest.approx(se, rel=1e-9)
        assert row["shift"] == pytest.approx(after.mean() - before.mean(), abs=1e-12)
        assert row["shift_points"] == pytest.approx(100 * (after.mean() - before.mean()))
        assert row["shift_se"] == pytest.approx((after.mean() - before.mean()) / se)


def test_partition_variable_means_shift_exactly_zero(released) -> None:
    """sex is a partition variable: PRAM never changes it, so every group's records are the
    same before and after and its shifts are exactly 0 (exact sums regrouped)."""
    frame, result, cfg, u = released
    for blk in u["analysis"]["mean_shifts"]:
        if blk["by"] == "sex":
            assert [r["shift"] for r in blk["rows"]] == [0.0, 0.0]
            assert blk["max_abs_shift_se"] == 0.0


def test_displacement_equals_direct(released) -> None:
    frame, result, cfg, u = released
    d = u["analysis"]["displacement"]
    moved = result.released_cell != result.cells.record_cell
    assert d["n_moved"] == int(moved.sum())
    keys = np.column_stack([(frame[k] != result.frame[k]).to_numpy() for k in
                            ("sex", "age", "grp")])
    assert d["mean_keys_changed"] == pytest.approx(keys[moved].sum(axis=1).mean())
    # age is the one ordered key
    assert [k["name"] for k in d["keys"]] == ["age"]
    age = d["keys"][0]
    delta = np.abs(frame["age"].to_numpy() - result.frame["age"].to_numpy())[moved]
    assert age["mean"] == pytest.approx(delta.mean())
    assert age["median"] == pytest.approx(np.median(delta))
    assert age["p90"] == pytest.approx(np.quantile(delta, 0.9))
    assert age["max"] == delta.max()
    assert age["n_changed"] == int((delta > 0).sum())
    assert age["median_changed"] == pytest.approx(np.median(delta[delta > 0]))


def test_nothing_moved_means_zero_shifts() -> None:
    cfg = _config()
    frame = _frame()
    result = sdc.release_frame(frame, cfg, seed=7)
    # as if nothing moved
    result.released = dataclasses.replace(result.released,
                                          released_cell=result.record_cell.copy())
    result.frame = frame.copy()
    from sdc.reports.utility import compute_utility

    u = compute_utility(frame, result, cfg)
    for blk in u["analysis"]["mean_shifts"]:
        assert all(r["shift"] in (0.0, None) for r in blk["rows"])
    for reg in u["analysis"]["regressions"]:
        assert reg["r2_change"] == 0.0
        assert all(t["shift_se"] in (0.0, None) for t in reg["terms"])
    assert u["analysis"]["displacement"]["n_moved"] == 0


def test_shift_digits() -> None:
    """Two significant digits in the unit shown: the old one-decimal rounding printed a
    +3.7 point shift as 0.0 when the shift was shown as a share (0.037)."""
    assert shift_digits(3.7) == 1
    assert shift_digits(0.037) == 3
    assert shift_digits(123.4) == 1
    assert shift_digits(0.0) == 1 and shift_digits(None) == 1
    assert f"{0.037:.{shift_digits(0.037)}f}" == "0.037"


def test_page_shows_a_small_shift_with_its_digits() -> None:
    """A +3.7 point shift of a 0/1 outcome prints as +3.7 (points) in the analysis section,
    and a 0.037 shift of a mean as 0.037 in the numeric section: the old one-decimal
    rounding printed both as 0.0."""
    import json

    from sdc.reports.html import render_html

    golden = Path(__file__).resolve().parent / "golden"
    risk = json.loads((golden / "weighted.risk.json").read_text())
    u = json.loads((golden / "weighted.utility.json").read_text())
    blk = u["analysis"]["mean_shifts"][0]
    blk["binary"] = True
    row = next(r for r in blk["rows"] if not r["suppressed"])
    row.update({"mean_before": 0.25, "mean_after": 0.287, "shift": 0.037, "shift_points": 3.7,
                "se_before": 0.01, "shift_se": 3.7, "digits": shift_digits(3.7),
                "label": "the-category"})
    num = u["numeric"][0]
    nrow = next(r for r in num["rows"] if not r["before"]["suppressed"]
                and not r["after"]["suppressed"])
    nrow["after"]["mean"] = nrow["before"]["mean"] + 0.037
    for r in num["rows"]:
        if r is not nrow and r["after"]["mean"] is not None:
            r["after"]["mean"] = r["before"]["mean"]
    page = render_html(risk, u)
    i = page.index("<td>the-category</td>")
    line = page[i:page.index("</tr>", i)]
    assert "+3.7" in line and "28.7" in line and "25.0" in line
    assert "largest |Δ mean| 0.037" in page
    assert "largest |Δ mean| 0.0<" not in page


def _formula_config(analyses: list) -> sdc.ReleaseConfig:
    cfg = _config().model_dump(mode="python", exclude_none=True)
    cfg["utility"] = {"analyses": analyses}
    return sdc.parse_config(cfg, base_dir=Path("."))


def test_formula_analysis_equals_lstsq_on_records() -> None:
    """utility.analyses: the exact per-batch X'X, X'y route equals numpy's lstsq on the
    records' model matrix (formulaic), with the original and with the released keys; and
    the totals do not depend on the batching (the records fed in 7 batches, any order)."""
    from formulaic import model_matrix

    from sdc.reports.formulas import formula_accumulators

    frame, cfg = _frame(), _formula_config(
        ["np.log(y) ~ age + I(age**2) + grp + C(sex)", {"formula": "z ~ age", "name": "z"}])
    result = sdc.release_frame(frame, cfg, seed=7)
    u = reports_of(result, cfg, seed=7, n_sim=20).utility
    got = u["analysis"]["analyses"]
    assert [a["name"] for a in got] == ["np.log(y) ~ age + I(age**2) + grp + C(sex)", "z"]
    # the public file's key values; categories as declared (so a ~ grp dummy set is fixed)
    for side, df in (("before", frame), ("after", result.frame)):
        d = df.assign(y=frame["y"], z=frame["z"],
                      grp=pd.Categorical(df["grp"], categories=list("abcd")))
        mm = model_matrix("np.log(y) ~ age + I(age**2) + grp + C(sex)", d)
        x, y = np.asarray(mm.rhs, float), np.asarray(mm.lhs, float).ravel()
        beta, se, r2 = _lstsq(x, y)
        terms = {t["term"]: t for t in got[0]["terms"]}
        assert list(terms) == list(mm.rhs.columns)
        for i, name in enumerate(mm.rhs.columns):
            assert terms[name][side] == pytest.approx(beta[i], rel=1e-8, abs=1e-10), name
            assert terms[name][f"se_{side}"] == pytest.approx(se[i], rel=1e-7), name
        assert got[0][f"r2_{side}"] == pytest.approx(r2, rel=1e-9)
        assert got[0][f"n_{side}"] == len(frame)
    # batching: the same exact sums in 7 shuffled batches, merged in another order
    rc = np.asarray(result.cells.record_cell)
    rel = np.asarray(result.released_cell)
    whole = formula_accumulators(cfg)
    for a in whole:
        a.add(frame, cfg, result.cells.key_codes, (rc, rel))
    order = np.random.default_rng(3).permutation(len(frame))
    parts = []
    for chunk in np.array_split(order, 7):
        part = [a.spawn() for a in whole]
        for a in part:
            a.add(frame.iloc[chunk], cfg, result.cells.key_codes, (rc[chunk], rel[chunk]))
        parts.append(part)
    merged = [a.spawn() for a in whole]
    for part in reversed(parts):
        for m, a in zip(merged, part, strict=True):
            m.merge(a)
    assert [m.sums for m in merged] == [a.sums for a in whole]
    assert [m.result() for m in merged] == [a.result() for a in whole]


def test_exact_total_is_exact() -> None:
    from fractions import Fraction

    from sdc.reports.formulas import OFFSET, exact_total

    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(0, 1e8, 500), rng.normal(0, 1e-8, 500), [1e300, -1e300,
                                                                             5e-324]])
    want = sum(Fraction(float(v)) for v in x)
    assert Fraction(exact_total(x), 1 << OFFSET) == want
    assert exact_total(x[::-1]) == exact_total(x)


@pytest.mark.parametrize("formula, message", [
    ("y ~ (age", "does not parse"),
    ("y age", "needs an outcome"),
    ("id ~ age", "input.id_column"),
])
def test_bad_formula_is_refused_at_load(formula, message) -> None:
    with pytest.raises(sdc.ConfigError, match=message) as e:
        _formula_config([formula])
    assert formula in str(e.value)


def test_formula_with_an_unknown_column_is_refused_when_read() -> None:
    from sdc.errors import InputError

    cfg = _formula_config(["y ~ age + income"])
    with pytest.raises(InputError, match=r"utility.analyses\[0\].*'income'"):
        sdc.release_frame(_frame(), cfg, seed=7)
