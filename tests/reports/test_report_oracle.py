"""The fast report path against the record-level oracle, figure by figure.

``oracle_reports.py`` (next to this file) is the straightforward record-level computation the
reports used before: every figure re-scanned from the records, weighted sums lexsorted, the
released file re-partitioned from its key values. The package now computes risk.json and
utility.json from the cell table and the released cells (``sdc.reports.aggregate``, ``sdc.reports.exact``). Every
figure of both is compared here: integers and strings exactly, floats to 1e-9 relative (they
are the same sums in another order; the exact fixed-point sums are checked against math.fsum
separately).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.reports.exact import ExactSums, record_quantiles

_spec = importlib.util.spec_from_file_location(
    "oracle_reports", Path(__file__).with_name("oracle_reports.py"))
oracle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oracle)

ROOT = Path(__file__).resolve().parents[2]


def _report_functions():
    from sdc.reports.build import build_risk
    from sdc.reports.utility import compute_utility

    return build_risk, compute_utility


# --------------------------------------------------------------------------------------------
# exact sums and quantiles
# --------------------------------------------------------------------------------------------
def test_exact_sums_match_fsum_and_ignore_row_order() -> None:
    rng = np.random.default_rng(11)
    n, size = 20_000, 37
    codes = rng.integers(0, size, n)
    # weights over 9 orders of magnitude, some negative: float sums in row order would differ
    w = rng.lognormal(0, 4, n) * rng.choice([-1.0, 1.0], n, p=[0.1, 0.9])
    s = ExactSums.of(codes, w, size)
    want = np.array([math.fsum(w[codes == g]) for g in range(size)])
    b, scale = ExactSums.params(n, float(np.abs(w).max()))
    # each weight is rounded to a multiple of 2^-s: |error| <= n_g 2^-(s+1) + 1 float rounding
    bound = np.bincount(codes, minlength=size) * 2.0 ** -(scale + 1) + np.abs(want) * 2.0**-52
    assert np.all(np.abs(s.values() - want) <= bound)
    perm = rng.permutation(n)
    s2 = ExactSums.of(codes[perm], w[perm], size)
    assert np.array_equal(s.values(), s2.values())  # bit for bit
    # regrouping the limbs is exact too: categories of categories
    outer = np.arange(size) % 5
    assert np.array_equal(s.regroup(outer, 5).values(), ExactSums.of(outer[codes], w, 5).values())
    # chunked limbs (CHUNK records at a time) give the same bits as one chunk
    import sdc.reports.exact as exact

    old, exact.CHUNK = exact.CHUNK, 1000
    try:
        assert np.array_equal(ExactSums.of(codes, w, size).values(), s.values())
    finally:
        exact.CHUNK = old
    assert s.total() == pytest.approx(math.fsum(w), rel=1e-15)


def test_exact_sums_limbs_stay_below_2_53() -> None:
    n = 5_000_000
    b, s = ExactSums.params(n, 300.0)
    assert n * 2.0**b <= 2.0**53 and 300.0 * 2.0**s < 2.0 ** (2 * b - 1)
    assert b == 30 and s == 59 - 9  # 300 < 2^9


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_record_quantiles_equal_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.random(50).round(2)
    counts = rng.integers(0, 7, 50)
    qs = [0.0, 0.25, 0.5, 0.9, 0.99, 1.0]
    want = np.quantile(np.repeat(values, counts), qs)
    assert record_quantiles(values, counts, qs) == pytest.approx(list(want), rel=1e-15, abs=0)


def test_accumulator_group_summaries_equal_pandas() -> None:
    """The report accumulator on one batch (what every engine runs, the in-memory one on the
    whole frame): count, mean and quartiles per category of two keys equal pandas'."""
    from sdc.reports.accumulate import ReleaseAccumulator

    rng = np.random.default_rng(5)
    n, size = 5000, 40
    x = rng.gamma(2.0, 1000.0, n).round(1)
    codes = [rng.integers(0, size, n), rng.integers(0, 7, n) * 3]
    key_codes, cell = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
    cell = cell.ravel()
    acc = ReleaseAccumulator(key_codes, np.bincount(cell), [size, size], None, ["x"])
    rows = np.arange(n)
    acc.add_apply_batch(rows, cell, cell, None, {"x": x})
    more = acc.start_refinement()
    while more:
        acc.add_refine_batch(rows, cell, {"x": x}, released_cell=cell)
        more = acc.end_refine_pass()
    before, after = acc.group_summaries()["x"]
    for c, g, g_after in zip(codes, before, after, strict=True):
        grp = pd.Series(x).groupby(c)
        want_q = grp.quantile([0.25, 0.5, 0.75]).unstack()
        obs = np.flatnonzero(g.n)
        assert list(obs) == sorted(grp.size().index)
        assert np.array_equal(g.n[obs], grp.size().to_numpy())
        np.testing.assert_allclose(g.mean[obs], grp.mean().to_numpy(), rtol=1e-12)
        np.testing.assert_array_equal(g.q1[obs], want_q[0.25].to_numpy())
        np.testing.assert_array_equal(g.median[obs], want_q[0.5].to_numpy())
        np.testing.assert_array_equal(g.q3[obs], want_q[0.75].to_numpy())
        np.testing.assert_array_equal(g_after.q3, g.q3)  # nothing moved


@pytest.mark.parametrize("n", [300, 20_000])
def test_a_small_file_counts_in_few_counters_with_the_same_passes_and_quartiles(
        n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first round's histogram is sized to the values (``ReleaseAccumulator._bins``),
    not 2^23 counters for every release: the same quartiles and the same number of passes
    as with all counters, for a float column (two rounds) and an integer column of known
    range 0..1000 (resolved in the first round)."""
    from sdc.reports.accumulate import ReleaseAccumulator
    from sdc.reports.quantiles import HIST_BINS

    rng = np.random.default_rng(11)
    x = rng.gamma(2.0, 1000.0, n).round(1)
    age = rng.integers(0, 1001, n).astype(float)
    codes = [rng.integers(0, 30, n), rng.integers(0, 5, n)]
    key_codes, cell = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
    cell = cell.ravel()

    def run() -> tuple[dict[str, int], int, list[np.ndarray]]:
        acc = ReleaseAccumulator(key_codes, np.bincount(cell), [30, 5], None, ["x", "age"],
                                 ranges={"age": (0.0, 1000.0, True)})
        bins = {c: s.hist.size for c, s in acc.select.items()}
        acc.add_apply_batch(None, cell, cell, None, {"x": x, "age": age})
        passes, more = 0, acc.start_refinement()
        while more:
            acc.add_refine_batch(None, cell, {"x": x, "age": age}, released_cell=cell)
            more, passes = acc.end_refine_pass(), passes + 1
        summaries = acc.group_summaries()
        return bins, passes, [getattr(g, q) for c in ("x", "age") for g in summaries[c][0]
                              for q in ("q1", "median", "q3")]

    bins, passes, quartiles = run()
    monkeypatch.setattr(ReleaseAccumulator, "_bins", lambda self, c: self.hist_bins)
    all_bins, all_passes, all_quartiles = run()
    assert all_bins["x"] > HIST_BINS // 8 and bins["x"] <= all_bins["x"] // 16
    assert bins["age"] == all_bins["age"]  # 10 unknown bits: resolved in the first round
    assert passes == all_passes
    for a, b in zip(quartiles, all_quartiles, strict=True):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------------------------
# whole reports against the oracle
# --------------------------------------------------------------------------------------------
def _frame(n: int, seed: int) -> pd.DataFrame:
    """Skewed keys (many rare cells and PRBs, merges), float weights over 3 orders of
    magnitude, a numeric column with missing values and one with negative values."""
    rng = np.random.default_rng(seed)
    region = rng.choice([1, 2, 3, 4, 5, 6], n, p=[0.5, 0.2, 0.15, 0.1, 0.04, 0.01]).astype(object)
    region[rng.random(n) < 0.02] = None
    income = rng.gamma(2.0, 20000.0, n).round(0)
    income[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame({
        "id": rng.permutation(n) + 1,
        "sex": rng.integers(1, 3, n),
        "age": np.minimum(rng.gamma(3.0, 12.0, n).astype(np.int64), 90),
        "race": rng.choice([1, 2, 3], n, p=[0.8, 0.15, 0.05]),
        "region": region,
        "income": income,
        "balance": rng.normal(0, 5000, n).round(2),
        "weight": rng.lognormal(4, 1.2, n),
    })


def _config(weight: str | None = "weight", missing_moves: bool = False) -> sdc.ReleaseConfig:
    """``missing_moves``: the tiny file has too few records with a missing region to certify
    them on their own (docs/METHOD.md 7.9), so there missing moves like a category."""
    return sdc.parse_config({
        "name": "oracle",
        "input": {"path": "x.parquet", "id_column": "id", "weight": weight},
        "key_variables": {
            "sex": {"categories": [1, 2], "labels": {1: "Male", 2: "Female"}},
            "age": {"range": [0, 90]},
            "race": {"categories": [1, 2, 3]},
            "region": {"categories": [1, 2, 3, 4, 5, 6, 7], "missing": "category",
                       "missing_moves": missing_moves},
        },
        "partition": {"sex": "as_is", "age": {"bands": [0, 30, 60]},
                      "race": {"groups": {"white": [1], "other": [2, 3]}}},
        "risk": {"xi": 0.395, "small_blocks": "merge"},
        "seed": 3,
    }, base_dir=Path("."))


def _wide_domain_frame() -> pd.DataFrame:
    f = _frame(3000, 4)
    f["postcode"] = np.random.default_rng(4).integers(0, 1200, len(f))
    return f


def _wide_domain_config() -> sdc.ReleaseConfig:
    """Two keys of 1,200 declared levels: their two-way table (1.44e6 codes, more than 4 C and
    2^20) takes the hash-numbered path of compute_utility's pairs, the others the dense one."""
    cfg = _config("weight").model_dump()
    cfg["key_variables"]["age"] = {"range": [0, 1199]}
    cfg["key_variables"]["postcode"] = {"range": [0, 1199]}
    cfg["partition"]["age"] = {"bands": [0, 30, 60]}
    return sdc.parse_config(cfg, base_dir=Path("."))


def _weighted_mode_config() -> sdc.ReleaseConfig:
    """risk.weighted: true: utility.json's expected_totals of the weighted design, against
    every record's law enumerated by the oracle (the exact test of E[W*_l] = sum_j W_j p_jl)."""
    cfg = _config("weight").model_dump()
    cfg["risk"]["weighted"] = True
    return sdc.parse_config(cfg, base_dir=Path("."))


CASES = {
    "weighted": (lambda: _frame(4000, 1), lambda: _config("weight")),
    "weighted_mode": (lambda: _frame(4000, 1), _weighted_mode_config),
    "wide_domains": (_wide_domain_frame, _wide_domain_config),
    "unweighted": (lambda: _frame(2500, 2), lambda: _config(None)),
    "tiny": (lambda: _frame(60, 3), lambda: _config("weight", missing_moves=True)),
}


def _compare(frame: pd.DataFrame, config: sdc.ReleaseConfig, seed: int) -> int:
    build_risk, compute_utility = _report_functions()
    result = sdc.release_frame(frame, config, seed)
    assert result.n_changed > 0  # the comparison must see moved records
    fast_risk = build_risk(frame, result, config, seed=seed, n_sim=4)
    slow = oracle.risk_sections(frame, result, config)
    n = oracle.assert_same_figures(fast_risk["before"], slow["before"], "before")
    n += oracle.assert_same_figures(fast_risk["after"], slow["after"], "after")
    n += oracle.assert_same_figures(fast_risk["partition_sets"], slow["partition_sets"], "ps")
    assert fast_risk["verdict"]["n_changed"] == slow["n_changed"]
    fast_u = compute_utility(frame, result, config)
    # 'analysis' (regressions, mean shifts, displacement) is checked against the records in
    # tests/reports/test_analysis.py (numpy lstsq, direct means); the oracle predates it
    fast_u.pop("analysis")
    n += oracle.assert_same_figures(fast_u, oracle.utility(frame, result, config), "utility")
    return n


@pytest.mark.parametrize("case", sorted(CASES))
def test_reports_equal_the_record_level_oracle(case: str) -> None:
    make_frame, make_config = CASES[case]
    assert _compare(make_frame(), make_config(), seed=17) > 100


def test_reports_equal_the_oracle_on_the_census_sample() -> None:
    path = ROOT / "configs" / "census_demo.yaml"
    config = sdc.load_config(path)
    from sdc.io.read import read_input

    frame = read_input(config)
    assert _compare(frame, config, seed=20260101) > 1000


def test_reports_do_not_depend_on_row_order() -> None:
    """Shuffled input rows: the same reports, bit for bit (exact sums, no float order)."""
    from sdc.reports.build import dumps

    build_risk, compute_utility = _report_functions()
    frame, config = _frame(3000, 4), _config("weight")
    shuffled = frame.sample(frac=1.0, random_state=9).reset_index(drop=True)
    docs = []
    for f in (frame, shuffled):
        res = sdc.release_frame(f, config, 5)
        risk = build_risk(f, res, config, seed=5, n_sim=4)
        docs.append((dumps({k: risk[k] for k in ("before", "after", "partition_sets")}),
                     dumps({k: compute_utility(f, res, config)[k]
                            for k in ("key_variables", "analysis")})))
    assert docs[0] == docs[1]
