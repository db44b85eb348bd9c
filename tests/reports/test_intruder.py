"""Monte Carlo intruder (sdc.reports.intruder) against the exact NZY risk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.reports.intruder import exact_s_distribution, simulate_intruder

ROOT = Path(__file__).resolve().parents[2]
XI = 0.395
THETA = sdc.solve_theta(XI)


def _blocks(profiles: list[dict[int, int]], theta: float) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    t_cells, prb = [], []
    rows = []
    for b, prof in enumerate(profiles):
        for t, m in sorted(prof.items()):
            t_cells += [t] * m
            prb += [b] * m
        rows.append({"prb": b, "k": sum(prof.values()), "theta": theta,
                     "profile": ", ".join(f"{t}:{m}" for t, m in sorted(prof.items()))})
    # two non-sensitive cells that must never matter
    t_cells += [5, 9]
    prb += [-1, -1]
    return np.array(t_cells), np.array(prb), pd.DataFrame(rows)


@pytest.mark.parametrize("profile,t", [({1: 5}, 1), ({1: 200, 2: 80}, 2), ({1: 3, 2: 2}, 1),
                                       ({1: 3, 2: 2}, 2), ({2: 4}, 2)])
def test_exact_distribution_matches_engine(profile: dict[int, int], t: int) -> None:
    """R_j(a) = P(kept, S = a) / (a P(S = a)) from our independent binomial convolution agrees
    with sdc.correct_match_risk; P(S = .) sums to 1 and E[S] = t (NZY PRAM is unbiased)."""
    n_rec = sum(tt * m for tt, m in profile.items())
    kept, total = exact_s_distribution(profile, t, THETA, max(n_rec + 1, 8))
    assert total.sum() == pytest.approx(1.0, abs=1e-12)
    assert (np.arange(total.size) * total).sum() == pytest.approx(t, abs=1e-9)
    assert kept.sum() == pytest.approx(1 - THETA / t, abs=1e-12)  # P(B keeps its cell)
    a = np.arange(1, 7)
    with np.errstate(invalid="ignore"):
        ours = kept[1:7] / (a * total[1:7])
    np.testing.assert_allclose(ours, sdc.correct_match_risk(profile, t, THETA, 6), rtol=1e-9)


@pytest.mark.parametrize("profile,t", [({1: 3000, 2: 2500}, 1), ({1: 3000, 2: 2500}, 2),
                                       ({1: 40, 7: 900}, 7)])
def test_exact_distribution_cut_equals_the_full_convolution(profile: dict[int, int],
                                                             t: int) -> None:
    """The head cut (Bernstein: P(S' >= mu + max(60 sqrt(mu), 2300)) < 4.9e-324) leaves the
    distribution as the full-length convolution gives it: the same values to rounding, the
    entries past the cut are exactly 0.0 in the full one too, and the expected number of
    correct matches sum_a P(kept, S = a) / a is unchanged."""
    from scipy.stats import binom

    n_rec = sum(tt * m for tt, m in profile.items())
    k = sum(profile.values())
    kept, total = exact_s_distribution(profile, t, THETA, n_rec + 1)
    full = binom.pmf(np.arange(t), t - 1, 1 - THETA / t)      # the uncut reference
    for tt, m in sorted(profile.items()):
        others = m - (1 if tt == t else 0)
        full = np.convolve(full, binom.pmf(np.arange(others * tt + 1), others * tt,
                                           THETA / ((k - 1) * tt)))
    full = np.r_[full, np.zeros(n_rec + 1 - full.size)]      # S' <= n_rec - 1
    p = 1 - THETA / t
    want_kept = np.r_[0.0, p * full[:n_rec]]
    want_total = want_kept + (1 - p) * full[: n_rec + 1]
    np.testing.assert_allclose(kept, want_kept, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(total, want_total, rtol=1e-12, atol=1e-300)
    cut = int(np.ceil((t - 1) * p + THETA + 2300)) + 1
    assert n_rec > cut and not want_total[cut + 1:].any()     # the cut is exercised
    a = np.arange(1, n_rec + 1)
    assert (kept[1:] / a).sum() == pytest.approx((want_kept[1:] / a).sum(), rel=1e-13)


def test_exact_by_hand_two_singletons() -> None:
    """k = 2 singleton cells, theta: B keeps with p = 1 - theta; the other record lands in B's
    cell with probability theta / ((k-1) t) = theta. So P(S=1, kept) = (1-theta)^2,
    P(S=1) = (1-theta)^2 + theta^2, R(1) = (1-theta)^2 / ((1-theta)^2 + theta^2)."""
    th = 0.6
    kept, total = exact_s_distribution({1: 2}, 1, th, 3)
    assert kept.tolist() == pytest.approx([0.0, 0.16, 0.24])
    assert total.tolist() == pytest.approx([0.24, 0.16 + 0.36, 0.24])
    assert sdc.correct_match_risk({1: 2}, 1, th, 1)[0] == pytest.approx(0.16 / 0.52)


@pytest.mark.statistical
def test_monte_carlo_matches_exact() -> None:
    """Two PRBs, 4000 replications: every (t, a) estimate within 4 sigma of the exact pooled R.

    Tolerance: per (replication, target) pair the Rao-Blackwellized value Y = 1{kept}/a given
    S = a lies in [0, 1/a] with mean R, so Var(Y) <= R/a - R^2 <= R (1 - R): the binomial
    variance. Pairs of one replication can be correlated; the mean of m correlated terms has
    variance at most Var(Y) (Cauchy-Schwarz), so counting each replication once - the Kish
    effective size n_eff = (sum m_r)^2 / sum m_r^2 reported by the simulation - gives
    sd <= sqrt(R (1 - R) / n_eff). 4 sd: a false alarm has probability < 1e-4 per class.
    """
    t_cells, prb, blocks = _blocks([{1: 5}, {1: 3, 2: 2}], THETA)
    out = simulate_intruder(t_cells, prb, blocks, seed=2024, n_sim=4000, xi=XI)
    assert out["n_targets"] == 5 + 3 + 4
    checked = 0
    for c in out["classes"]:
        if c["n_obs"] < 200:
            continue
        r = c["exact_pooled"]
        bound = np.sqrt(r * (1 - r) / c["n_eff"])
        assert abs(c["estimate"] - r) <= 4 * bound, c
        assert c["se"] <= 1.2 * bound  # the reported SE respects the binomial bound
        assert c["exact_min"] <= r + 1e-12 and r <= c["exact_max"] + 1e-12
        checked += 1
    assert checked >= 5
    # the worst exact R stays below xi (both PRBs are certified: k >= kmin or exact check)
    assert max(c["exact_max"] for c in out["classes"] if c["exact_max"] is not None) <= XI
    # overall expected correct matches: mean of n_sim iid totals, SE from their spread
    ov = out["overall"]
    assert abs(ov["expected_correct_estimate"] - ov["expected_correct_exact"]) <= 4 * ov["se"]


def test_reproducible_and_seed_dependent() -> None:
    t_cells, prb, blocks = _blocks([{1: 6, 2: 1}], THETA)
    a = simulate_intruder(t_cells, prb, blocks, seed=7, n_sim=50)
    b = simulate_intruder(t_cells, prb, blocks, seed=7, n_sim=50)
    c = simulate_intruder(t_cells, prb, blocks, seed=8, n_sim=50)
    assert a == b
    assert a["classes"] != c["classes"]
    # exact figures do not depend on the seed
    assert [x["exact_pooled"] for x in a["classes"]] == [x["exact_pooled"] for x in c["classes"]]


def test_intruder_started_early_is_used_only_for_its_own_inputs(monkeypatch) -> None:
    """start_intruder's thread result is what simulate_intruder gives; intruder() takes it only
    for exactly the same inputs (another seed, theta or profile is computed afresh) and once."""
    import sdc.reports.intruder as intr

    t_cells, prb, blocks = _blocks([{1: 6, 2: 1}], THETA)
    want = simulate_intruder(t_cells, prb, blocks, seed=7, n_sim=50, xi=XI)
    calls = []
    real = intr.simulate_intruder
    monkeypatch.setattr(intr, "simulate_intruder", lambda *a, **k: calls.append(1) or real(*a, **k))
    intr.start_intruder(t_cells, prb, blocks, seed=7, n_sim=50, xi=XI)
    assert intr.intruder(t_cells, prb, blocks, seed=7, n_sim=50, xi=XI) == want
    assert len(calls) == 1  # the thread's run, not a second one
    intr.start_intruder(t_cells, prb, blocks, seed=7, n_sim=50, xi=XI)
    other = blocks.assign(theta=0.3)
    for args, seed in (((t_cells, prb, blocks), 8), ((t_cells, prb, other), 7),
                       ((t_cells, prb, blocks.assign(profile="1:7")), 7)):
        got = intr.intruder(*args, seed=seed, n_sim=50, xi=XI)
        assert got == real(*args, seed=seed, n_sim=50, xi=XI)
    assert got != want
    assert intr.intruder(t_cells, prb, blocks, seed=7, n_sim=50, xi=XI) == want
    assert not intr._pending  # taken once


def test_wrong_theta_is_detected() -> None:
    """The comparison has power: simulating with theta = 0.3 while the exact values assume the
    release's theta puts the t = 1, a = 1 estimate far outside the tolerance."""
    t_cells, prb, blocks = _blocks([{1: 5}], THETA)
    exact = simulate_intruder(t_cells, prb, blocks, seed=1, n_sim=1000)
    wrong = simulate_intruder(t_cells, prb, blocks.assign(theta=0.3), seed=1, n_sim=1000)
    e = next(c for c in exact["classes"] if c["a"] == 1)
    w = next(c for c in wrong["classes"] if c["a"] == 1)
    assert abs(w["estimate"] - e["exact_pooled"]) > 8 * np.sqrt(
        e["exact_pooled"] * (1 - e["exact_pooled"]) / w["n_eff"])


def test_no_prb() -> None:
    out = simulate_intruder(np.array([3, 4]), np.array([-1, -1]), pd.DataFrame(
        columns=["prb", "k", "theta", "profile"]), seed=1, n_sim=10)
    assert out["classes"] == [] and out["n_targets"] == 0
    with pytest.raises(ValueError, match="n_sim"):
        simulate_intruder(np.array([1]), np.array([0]), pd.DataFrame(), seed=1, n_sim=1)


@pytest.mark.statistical
def test_census_demo_intruder() -> None:
    cfg = sdc.load_config(ROOT / "configs" / "census_demo.yaml")
    frame = pd.read_csv(cfg.input_path)
    result = sdc.release_frame(frame, cfg, seed=99)
    out = simulate_intruder(result.cells.frequency, result.cell_prb, result.blocks, seed=99,
                            n_sim=200, xi=result.xi)
    assert out["n_targets"] == int(result.cells.frequency[result.cell_prb >= 0].sum())
    for c in out["classes"]:
        r = c["exact_pooled"]
        # same binomial bound as above (n_eff ~ 200 replications); plus the sharper
        # between-replication SE, which must not exceed it
        bound = np.sqrt(r * (1 - r) / c["n_eff"])
        assert abs(c["estimate"] - r) <= 4 * bound, c
        assert abs(c["estimate"] - r) <= 5 * c["se"], c
        assert c["exact_max"] <= result.certificate + 1e-12
    # the worst class (t = 2, a = 1 here) sits at the certificate, below xi
    assert max(c["exact_max"] for c in out["classes"]) == pytest.approx(result.certificate)


@pytest.mark.statistical
def test_other_cell_strategy_matches_exact() -> None:
    """The intruder who picks from another cell of the PRB. Two singletons at
    theta = 0.6 give it 0.6^2 / (0.6^2 + 0.4^2) = 0.6923 at a = 1; a PRB of 3 records (fewer than
    a_max = 4: this crashed the exact pmfs before) and a large PRB at the theorem's theta ride
    along. Tolerance: the binomial bound of test_monte_carlo_matches_exact (per pair
    Y = 1{B in z}/a lies in [0, 1/a] with mean R, so sd <= sqrt(R (1 - R) / n_eff))."""
    t_cells, prb, blocks = _blocks([{1: 2}, {1: 1, 2: 1}, {1: 7, 2: 3}], 0.6)
    out = simulate_intruder(t_cells, prb, blocks, seed=13, n_sim=4000, xi=XI)
    other = [c for c in out["classes"] if c["pick"] == "other"]
    assert {(c["t"], c["t_z"]) for c in other} == {(1, 1), (1, 2), (2, 1), (2, 2)}
    checked = 0
    for c in other:
        if c["n_obs"] < 200 or c["exact_pooled"] is None:
            continue
        r = c["exact_pooled"]
        bound = np.sqrt(r * (1 - r) / c["n_eff"])
        assert abs(c["estimate"] - r) <= 4 * bound + 1e-12, c
        assert c["exact_min"] <= r + 1e-12 and r <= c["exact_max"] + 1e-12
        checked += 1
    assert checked >= 6
    # the worst exact other-cell pick is the two-singleton swap
    c11 = next(c for c in other if (c["t"], c["t_z"], c["a"]) == (1, 1, 1))
    assert c11["exact_max"] == pytest.approx(0.36 / 0.52)


def test_two_singletons_at_theta_one_swap() -> None:
    t_cells, prb, blocks = _blocks([{1: 2}], 1.0)
    out = simulate_intruder(t_cells, prb, blocks, seed=1, n_sim=20)
    c = next(c for c in out["classes"] if c["pick"] == "other" and c["a"] == 1)
    assert c["estimate"] == 1.0 and c["exact_pooled"] == 1.0 and c["se"] == 0.0
    own = [c for c in out["classes"] if c["pick"] == "own" and c["estimate"] is not None]
    assert all(c["estimate"] == 0.0 for c in own)


@pytest.mark.parametrize("design", [False, True])
def test_the_replay_in_chunks_is_the_replay_one_replica_at_a_time(design: bool) -> None:
    """Replicas replayed c at a time (one bincount per tally, bins shifted per replica) give
    the very bits of one replica at a time, whatever c and however n_sim splits into chunks,
    under NZY's uniform design and under an explicit (m, W)."""
    from sdc.method.transition import Transition, uniform_transition
    from sdc.reports.intruder import _replay, _target_slots

    profiles = [{1: 6, 2: 3}, {1: 2}, {1: 9, 2: 1, 3: 2}, {1: 6, 2: 3}]
    t_cell, prb, blocks = _blocks(profiles, THETA)
    transitions = None
    if design:
        ts = [np.repeat(sorted(p), [p[t] for t in sorted(p)]) for p in profiles]
        transitions = [Transition(tr.frequency, tr.move, *tr.csr(), kind="near")
                       for tr in (uniform_transition(t, THETA) for t in ts)]
    s = _target_slots(t_cell, prb, blocks, transitions)
    for n_sim in (2, 13):
        one = _replay(s, seed=5, n_sim=n_sim, a_max=4, chunk_slots=1)
        for chunk_slots in (3 * s.slot_sc.size, 5 * s.slot_sc.size, 1 << 20):
            many = _replay(s, seed=5, n_sim=n_sim, a_max=4, chunk_slots=chunk_slots)
            for a, b in zip(one, many, strict=True):
                assert a.tobytes() == b.tobytes()
