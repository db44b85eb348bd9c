"""Exact identification risk R_j(a, t) (docs/METHOD.md section 6) and calibrated theta (section 7)."""

import itertools

import numpy as np
import pytest

from sdc import calibrate_theta, correct_match_risk, max_risk, solve_theta
from sdc.method.pram import nzy_matrix

THETA_PAPER = solve_theta(0.395)


def test_reference_values_from_method():
    assert max_risk({1: 200, 2: 80}, THETA_PAPER).max_risk == pytest.approx(0.3948, abs=5e-5)
    assert max_risk({1: 5}, THETA_PAPER).max_risk == pytest.approx(0.2012, abs=5e-5)


def test_calibration_reference():
    # docs/METHOD.md: 2 singletons + 1 doubleton at xi = 0.395 are certified at theta = 0.681
    # (exact max risk 0.3950) although 3 < 1/(1 - theta).
    theta = calibrate_theta({1: 2, 2: 1}, 0.395)
    assert 0.680 <= theta <= 0.681
    assert max_risk({1: 2, 2: 1}, theta).max_risk == pytest.approx(0.3950, abs=1e-4)
    assert max_risk({1: 2, 2: 1}, 0.681).max_risk <= 0.395
    assert max_risk({1: 2, 2: 1}, theta - 1e-4).max_risk > 0.395


def test_one_cell_prb_cannot_be_certified():
    assert calibrate_theta({1: 1}, 0.395) is None
    assert max_risk({1: 1}, 0.9).max_risk == 1.0
    assert max_risk({2: 1}, 0.9).max_risk == 0.5


def _brute_force_risk(t: list[int], theta: float) -> dict[tuple[int, int], float]:
    """R_j(a, t) by enumerating every joint destination of every record (independent check)."""
    k = len(t)
    p = nzy_matrix(np.array(t), theta)  # p[i, j] = P(Z = c_i | X = c_j)
    owners = [j for j, tj in enumerate(t) for _ in range(tj)]
    num: dict[tuple[int, int], float] = {}
    den: dict[tuple[int, int], float] = {}
    for dest in itertools.product(range(k), repeat=len(owners)):
        prob = np.prod([p[d, o] for d, o in zip(dest, owners, strict=True)])
        counts = np.bincount(dest, minlength=k)
        for o, d in zip(owners, dest, strict=True):  # every record in turn is the target B
            a = counts[o]
            if a == 0:
                continue
            key = (o, int(a))
            den[key] = den.get(key, 0.0) + prob
            if d == o:
                num[key] = num.get(key, 0.0) + prob / a
    return {key: num.get(key, 0.0) / den[key] for key in den if den[key] > 1e-300}


@pytest.mark.parametrize("t,theta", [([1, 1, 2], 0.7), ([1, 1, 1, 1], 0.8), ([2, 1, 2], 0.5),
                                     ([1, 2], 0.9)])
def test_exact_risk_matches_brute_force_enumeration(t, theta):
    profile = {v: t.count(v) for v in set(t)}
    brute = _brute_force_risk(t, theta)
    for (j, a), r in brute.items():
        ours = correct_match_risk(profile, t[j], theta, a_max=a)[a - 1]
        assert ours == pytest.approx(r, rel=1e-10, abs=1e-12), (j, a)


@pytest.mark.parametrize("xi", [0.36, 0.395, 0.45, 0.6, 0.9])
def test_theorem_guarantee_holds_exactly_for_k_at_least_kmin(xi):
    from sdc import kmin

    theta = solve_theta(xi)
    km = kmin(theta)
    sensitive_t = [t for t in (1, 2) if t * xi < 1]
    rng = np.random.default_rng(7)
    for _ in range(25):
        k = int(rng.integers(km, km + 60))
        if len(sensitive_t) == 1:
            profile = {1: k}
        else:
            n1 = int(rng.integers(0, k + 1))
            profile = {1: n1, 2: k - n1}
        assert max_risk(profile, theta).max_risk <= xi + 1e-12, profile


def test_calibrated_theta_is_not_above_theorem_theta_when_theorem_applies():
    for profile in ({1: 5}, {1: 30, 2: 10}, {2: 7}, {1: 200, 2: 80}):
        cal = calibrate_theta(profile, 0.395, upper=THETA_PAPER)
        assert cal is not None and cal <= THETA_PAPER
        assert max_risk(profile, cal).max_risk <= 0.395
