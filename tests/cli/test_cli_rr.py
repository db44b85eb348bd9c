"""``sdc rr`` commands through typer's CliRunner against ``rr_app``."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from sdc.cli.rr import rr_app
from sdc.mechanisms import max_trace_design, minimax_design, tsubset_covariance

runner = CliRunner()


def test_design_table_shows_table_1_cell():
    res = runner.invoke(rr_app, ["design", "--k", "20", "--gamma", "2"])
    assert res.exit_code == 0, res.output
    assert "77,520" in res.output and "Max-trace" in res.output


def test_design_json_matches_library():
    res = runner.invoke(rr_app, ["design", "--k", "10", "--epsilon", "1.0", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    d = minimax_design(10, float(np.exp(1.0)))
    assert out["minimax"]["q"] == d.q == 3  # k = 10, gamma = e: k/(1+gamma) = 2.69 -> 3
    assert out["minimax"]["n_outputs"] == 120
    assert out["minimax"]["minimax_risk"] == pytest.approx(d.risk)
    assert out["minimax"]["estimator_slope_c"] == pytest.approx(d.slope)
    assert out["max_trace"]["trace"] == pytest.approx(out["max_trace"]["trace_bound"])


@pytest.mark.parametrize(
    "args,needle",
    [
        (["design", "--k", "5", "--gamma", "2", "--epsilon", "1"], "exactly one of --epsilon and --gamma"),
        (["simulate", "--probs", "0.5,0.6", "--n", "10", "--gamma", "2", "--out", "x.csv"], "--probs must"),
        (["estimate", "does-not-exist.csv", "--gamma", "2"], "file not found"),
    ],
)
def test_errors_are_one_line_and_nonzero(args, needle):
    res = runner.invoke(rr_app, args)
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and needle in lines[0]
    assert "Traceback" not in res.output


@pytest.mark.parametrize(
    "args,needle",
    [
        (["design", "--k", "5", "--gamma", "0.5"], "'--gamma' / '-g': 0.5 is not in the valid range: in (1, "),
        (["design", "--k", "1", "--gamma", "2"], "'--k' / '-k': 1 is not in the valid range: an integer in [2, 1000]"),
        (["design", "--k", "5000", "--gamma", "2"], "5000 is not in the valid range"),
        (["design", "--k", "5", "--epsilon", "800"], "'--epsilon' / '-e': 800.0 is not in the valid range: in (0, 90]"),
        (["simulate", "--probs", "0.5,0.5", "--n", "0", "--gamma", "2", "--out", "x.csv"], "'--n' / '-n': 0 is not"),
        (["simulate", "--probs", "0.5,0.5", "--n", "2", "--gamma", "2", "--out", "x.csv", "--seed", "-1"], "'--seed': -1 is not"),
    ],
)
def test_out_of_range_options_are_usage_errors(args, needle):
    """Issue 34: a value outside an option's range is a usage error (exit 2) naming the option
    and its range, before anything runs (k = 5000 overflowed the binomial counts: exit 1)."""
    res = runner.invoke(rr_app, args, env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert needle in " ".join(res.output.replace("│", " ").split()), res.output
    assert "Traceback" not in res.output


@pytest.mark.statistical
def test_simulate_then_estimate_minimax_round_trip(tmp_path):
    # truth within 4 SE per category; reported SE within 10% of the exact SE from eq. 7.5
    # (the SE estimate's relative error is ~1/sqrt(2n) here, far below 10%)
    path = tmp_path / "resp.csv"
    probs = [0.4, 0.3, 0.2, 0.1]
    n = 40_000
    res = runner.invoke(rr_app, ["simulate", "--probs", ",".join(map(str, probs)), "--n", str(n), "--gamma", "3", "--seed", "7", "--out", str(path)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(rr_app, ["estimate", str(path), "--gamma", "3", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    est, se = np.array(out["estimate"]), np.array(out["se"])
    exact_se = np.sqrt(np.diag(tsubset_covariance(probs, out["q"], 3.0, n)))
    assert np.all(np.abs(est - probs) <= 4 * exact_se)
    np.testing.assert_allclose(se, exact_se, rtol=0.10)
    table = runner.invoke(rr_app, ["estimate", str(path), "--gamma", "3"])
    assert table.exit_code == 0 and "std. error" in table.output


def test_simulate_is_seeded(tmp_path):
    a, b, c = (tmp_path / f"{s}.csv" for s in "abc")
    base = ["simulate", "--probs", "0.2,0.8", "--n", "200", "--epsilon", "1"]
    for path, seed in ((a, "1"), (b, "1"), (c, "2")):
        assert runner.invoke(rr_app, base + ["--seed", seed, "--out", str(path)]).exit_code == 0
    assert a.read_text() == b.read_text() != c.read_text()


@pytest.mark.statistical
def test_max_trace_round_trip_and_gamma_mismatch(tmp_path):
    path = tmp_path / "mt.csv"
    probs = np.array([0.6, 0.3, 0.1])
    n = 30_000
    res = runner.invoke(rr_app, ["simulate", "--probs", "0.6,0.3,0.1", "--n", str(n), "--gamma", "4", "--design", "max-trace", "--seed", "3", "--out", str(path)])
    assert res.exit_code == 0, res.output
    out = json.loads(runner.invoke(rr_app, ["estimate", str(path), "--gamma", "4", "--k", "3", "--json"]).output)
    P = max_trace_design(3, 4.0)
    lam = P @ probs
    Pi = np.linalg.inv(P)
    exact_se = np.sqrt(np.diag(Pi @ (np.diag(lam) - np.outer(lam, lam)) @ Pi.T / n))
    assert np.all(np.abs(np.array(out["estimate"]) - probs) <= 4 * exact_se)
    miss = runner.invoke(rr_app, ["estimate", str(path), "--gamma", "4"])
    assert miss.exit_code == 2 and "--k is required" in miss.output
    # minimax file estimated with the wrong gamma is refused, not silently mis-estimated
    path2 = tmp_path / "mm.csv"
    runner.invoke(rr_app, ["simulate", "--probs", "0.25,0.25,0.25,0.25", "--n", "100", "--gamma", "1.5", "--out", str(path2)])
    wrong = runner.invoke(rr_app, ["estimate", str(path2), "--gamma", "20"])
    assert wrong.exit_code == 2 and "check --epsilon/--gamma" in wrong.output
