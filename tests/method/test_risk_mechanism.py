"""Mechanism-aware risk R_{j->z}(a, t) (sdc/method/risk.py): brute force, Monte Carlo,
the paper's numbers and the two-singleton swap."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sdc import solve_theta
from sdc.method.risk import calibrate_theta as calibrate_theta_mechanism
from sdc.method.risk import max_risk as mechanism_max_risk
from sdc.method.risk import pick_distribution, pick_risk

THETA_0395 = solve_theta(0.395)  # 0.79905, docs/METHOD.md section 4


# --------------------------------------------------------------------------- brute force
def _profiles(max_cells: int = 4, max_records: int = 6, max_t: int = 3):
    """Every frequency profile with 1..max_cells cells and at most max_records records."""
    seen = set()
    for k in range(1, max_cells + 1):
        for ts in itertools.combinations_with_replacement(range(1, max_t + 1), k):
            if sum(ts) <= max_records and ts not in seen:
                seen.add(ts)
                yield ts


def _brute_force(ts: tuple[int, ...], theta: float, a_max: int):
    """All joint outcomes of the PRB, enumerated: {(j, z, a): R} over cells j, z and a.

    Every record independently keeps its cell with 1 - theta/t_j or moves to each other cell
    with theta/((k-1) t_j) (docs/METHOD.md eq. 5.3). The target B is the first record of cell j.
    R = sum over outcomes with S_z = a of P(outcome) 1{B in z} / a, divided by P(S_z = a).
    Entries with P(S_z = a) = 0 are None.
    """
    k = len(ts)
    origin = np.repeat(np.arange(k), ts)
    n = origin.size
    th = theta if k > 1 else 0.0
    trans = np.full((k, k), th / max(k - 1, 1)) / np.asarray(ts, float)[:, None]
    np.fill_diagonal(trans, 1.0 - th / np.asarray(ts, float))
    dests = np.array(list(itertools.product(range(k), repeat=n)), dtype=np.int64)  # k^n x n
    prob = np.prod(trans[origin[None, :], dests], axis=1)
    counts = np.stack([(dests == z).sum(axis=1) for z in range(k)], axis=1)
    first = np.concatenate([[0], np.cumsum(ts)[:-1]])  # B = first record of each cell
    out = {}
    for j in range(k):
        b_dest = dests[:, first[j]]
        for z in range(k):
            for a in range(1, a_max + 1):
                ev = counts[:, z] == a
                p_ev = prob[ev].sum()
                out[j, z, a] = (None if p_ev == 0
                                else float((prob[ev] * (b_dest[ev] == z)).sum() / a / p_ev))
    return out


@pytest.mark.parametrize("theta", [0.25, 0.6, THETA_0395, 1.0])
def test_equals_brute_force_enumeration(theta):
    n_checked = 0
    for ts in _profiles():
        profile: dict[int, int] = {}
        for t in ts:
            profile[t] = profile.get(t, 0) + 1
        n = sum(ts)
        truth = _brute_force(ts, theta, n)
        best = 0.0
        for (j, z, a), r in truth.items():
            t_z = None if z == j else ts[z]
            got = pick_risk(profile, ts[j], theta, n, t_z=t_z)[a - 1]
            if r is None:
                assert math.isnan(got), (ts, theta, j, z, a, got)
            else:
                assert got == pytest.approx(r, rel=1e-9, abs=1e-12), (ts, theta, j, z, a)
                best = max(best, r)
            n_checked += 1
        m = mechanism_max_risk(profile, theta)
        assert m.max_risk == pytest.approx(best, rel=1e-9, abs=1e-12), (ts, theta)
        # the attaining (t, z, t_z, a) is a real maximizer
        t_z = None if m.z == "own" else m.t_z
        assert pick_risk(profile, m.t, theta, m.a, t_z=t_z)[m.a - 1] == pytest.approx(m.max_risk)
    assert n_checked > 600  # (j, z, a) triples over 19 profiles


def test_own_cell_is_nzy_risk():
    """z = j is NZY's R_j(a, t): the paper's numbers of docs/METHOD.md section 6."""
    assert round(mechanism_max_risk({1: 200, 2: 80}, THETA_0395).own_max, 4) == 0.3948
    assert round(mechanism_max_risk({1: 5}, THETA_0395).own_max, 4) == 0.2012
    # for these large-enough PRBs the own-cell intruder is the strongest
    assert mechanism_max_risk({1: 200, 2: 80}, THETA_0395).z == "own"
    assert mechanism_max_risk({1: 5}, THETA_0395).z == "own"


# --------------------------------------------------------------------------- two-singleton swap
def test_two_singletons_swap():
    r = mechanism_max_risk({1: 2}, 1.0)
    assert (r.max_risk, r.z, r.a, r.own_max) == (1.0, "other", 1, 0.0)
    # at theta = 0.6: other-cell 0.6^2 / (0.6^2 + 0.4^2) = 0.6923, own cell 1/2 at a = 2
    r = mechanism_max_risk({1: 2}, 0.6)
    assert r.other_max == pytest.approx(0.36 / 0.52)
    assert r.own_max == pytest.approx(0.5)
    for xi in (0.35, 0.395, 0.45, 0.4999):
        assert calibrate_theta_mechanism({1: 2}, xi) is None


def test_two_singletons_calibrate_at_large_xi():
    """max(own, other) at a = 1 is max(r, 1-r) with r = theta^2/(theta^2 + (1-theta)^2); the
    smallest theta with own <= 0.6 solves ((1-theta)/theta)^2 = 2/3... i.e. theta/(1-theta) =
    sqrt(2/3): theta = 0.449490."""
    th = calibrate_theta_mechanism({1: 2}, 0.6)
    ratio = math.sqrt(2.0 / 3.0)
    assert th == pytest.approx(ratio / (1 + ratio), abs=2e-7)
    assert mechanism_max_risk({1: 2}, th).max_risk <= 0.6


@pytest.mark.parametrize("profile", [{1: 2, 2: 1}, {1: 3}, {1: 4}, {1: 1, 2: 1}, {2: 2},
                                     {1: 1, 2: 4}, {1: 30}, {2: 5}, {1: 7, 2: 3}, {1: 1}])
@pytest.mark.parametrize("xi", [0.36, 0.395, 0.45])
def test_calibrate_is_certified_and_smallest(profile, xi):
    th = calibrate_theta_mechanism(profile, xi)
    if th is None:
        grid = np.linspace(0.001, 1.0, 1000)
        assert all(mechanism_max_risk(profile, g).max_risk > xi for g in grid), profile
        return
    assert mechanism_max_risk(profile, th).max_risk <= xi
    assert mechanism_max_risk(profile, max(th - 1e-6, 0.0)).max_risk > xi


def test_calibrate_example_of_method():
    """docs/METHOD.md section 7: 2 singletons + 1 doubleton at xi = 0.395 -> theta = 0.681; the
    other-cell picks are below xi there, so the mechanism-aware theta is the same."""
    th = calibrate_theta_mechanism({1: 2, 2: 1}, 0.395)
    assert th == pytest.approx(0.681, abs=1e-3)
    r = mechanism_max_risk({1: 2, 2: 1}, th)
    assert r.max_risk <= 0.395 and r.other_max < 0.395


def test_calibrate_upper_below_one():
    th = calibrate_theta_mechanism({1: 200, 2: 80}, 0.395, upper=THETA_0395)
    assert th is not None and th <= THETA_0395
    assert mechanism_max_risk({1: 200, 2: 80}, th).max_risk <= 0.395


def test_one_cell_prb():
    r = mechanism_max_risk({1: 1}, 0.8)
    assert (r.max_risk, r.z, r.other_max) == (1.0, "own", 0.0)
    assert mechanism_max_risk({2: 1}, 0.8).max_risk == 0.5


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="theta"):
        mechanism_max_risk({1: 3}, 1.5)
    with pytest.raises(ValueError, match="at least one cell"):
        mechanism_max_risk({}, 0.5)
    with pytest.raises(ValueError, match="no other cell"):
        pick_risk({1: 1, 2: 3}, 2, 0.5, 3, t_z=1 + 2)


# --------------------------------------------------------------------------- Monte Carlo
def _simulate_intruder(ts: np.ndarray, theta: float, n_sim: int, seed: int, picks, a_max: int):
    """A Monte Carlo intruder, written independently of the engine.

    Each replication post-randomizes every record of the PRB (keep with 1 - theta/t_j, else a
    uniformly chosen other cell), then for each pick (target record b, cell z) the intruder,
    if S_z >= 1, picks one of the S_z records released in z uniformly (B is picked with
    probability 1/S_z when B is in z: simulated with one uniform). Returns, per pick and a,
    the replication counts of {S_z = a} and of {correct pick, S_z = a}.
    """
    rng = np.random.default_rng(seed)
    k = ts.size
    origin = np.repeat(np.arange(k), ts)
    n = origin.size
    t_rec = ts[origin].astype(float)
    move = rng.random((n_sim, n)) < theta / t_rec
    r = rng.integers(0, k - 1, size=(n_sim, n))
    dest = np.where(move, r + (r >= origin), origin)
    counts = np.zeros((n_sim, k), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(n_sim), n), dest.ravel()), 1)
    out = {}
    u = rng.random((n_sim, len(picks)))
    for i, (b, z) in enumerate(picks):
        s = counts[:, z]
        correct = (dest[:, b] == z) & (u[:, i] * np.maximum(s, 1) < 1.0)
        for a in range(1, a_max + 1):
            out[b, z, a] = (int((s == a).sum()), int((correct & (s == a)).sum()))
    return out


@pytest.mark.statistical
@pytest.mark.parametrize("profile, theta", [
    ({1: 200, 2: 80}, THETA_0395),   # docs/METHOD.md: own-cell max 0.3948
    ({1: 5}, THETA_0395),            # docs/METHOD.md: own-cell max 0.2012
    ({1: 7, 2: 3}, 0.7),
    ({1: 3, 2: 2}, 0.95),
    ({1: 2}, 0.6),                   # other-cell 0.6923
])
def test_monte_carlo_intruder(profile, theta):
    """n_sim = 20,000 independent replications. For one target b and one picked cell z, the
    indicators 1{S_z = a} and 1{intruder picks b correctly, S_z = a} are Bernoulli with exact
    probabilities P(S_z = a) and P(b in z, S_z = a)/a (pick_distribution), so their replication
    means have the exact variance p(1 - p)/n_sim: each is tested within 4 standard errors
    sqrt(p(1 - p)/n_sim). The ratio is the intruder's success rate given S_z = a, R_{j->z}(a, t).
    """
    n_sim = 20_000
    ts = np.array([t for t, m in sorted(profile.items()) for _ in range(m)])
    k = ts.size
    first = np.concatenate([[0], np.cumsum(ts)[:-1]])
    # one representative target per frequency, and its own cell + one other cell per frequency
    picks, labels = [], []
    for t_j in sorted(profile):
        j = int(np.flatnonzero(ts == t_j)[0])
        picks.append((int(first[j]), j))
        labels.append((t_j, None))
        for t_z in sorted(profile):
            others = [z for z in np.flatnonzero(ts == t_z) if z != j]
            if others:
                picks.append((int(first[j]), int(others[0])))
                labels.append((t_j, t_z))
    a_max = 5
    sim = _simulate_intruder(ts, theta, n_sim, seed=20260 + k, picks=picks, a_max=a_max)
    n_tests = 0
    for (b, z), (t_j, t_z) in zip(picks, labels, strict=True):
        hit, tot = pick_distribution(profile, t_j, theta, a_max + 1, t_z=t_z)
        for a in range(1, a_max + 1):
            n_a, n_correct = sim[b, z, a]
            for observed, p in ((n_a, tot[a]), (n_correct, hit[a] / a)):
                se = math.sqrt(p * (1 - p) / n_sim)
                assert abs(observed / n_sim - p) <= 4 * se + 1e-12, (profile, t_j, t_z, a,
                                                                      observed / n_sim, p, se)
                n_tests += 1
            if n_a >= 100:
                # the success rate itself: given n_a replications with S_z = a, each is an
                # independent success with probability R, so n_correct ~ Bin(n_a, R) exactly
                exact = float(pick_risk(profile, t_j, theta, a, t_z=t_z)[a - 1])
                se = math.sqrt(exact * (1 - exact) / n_a)
                assert abs(n_correct / n_a - exact) <= 4 * se + 1e-12, (profile, t_j, t_z, a)
    assert n_tests >= 20
