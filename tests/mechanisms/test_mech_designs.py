"""Designs of Chai 2019 ch. 6-7: max-trace, t-subset, minimax, RAPPOR."""

import math

import numpy as np
import pytest

from sdc.mechanisms import (
    estimate_max_trace,
    estimate_mixture,
    estimate_rappor_empirical,
    estimate_tsubset,
    max_trace_bound,
    max_trace_design,
    max_trace_risk,
    minimax_design,
    minimax_f,
    minimax_q,
    minimax_risk,
    mixture_risk,
    modified_rappor_matrix,
    modified_rappor_weights,
    parity,
    rappor_empirical_risk,
    rappor_matrix,
    rappor_mixture_weights,
    sample_max_trace,
    sample_modified_rappor,
    sample_rappor,
    sample_tsubset,
    tsubset_constants,
    tsubset_covariance,
    tsubset_matrix,
)
from sdc.mechanisms.designs import mixture_matrix, tsubset_risk

pytestmark = pytest.mark.statistical

# Chai 2019 Table 1: (q, binom(k, q)) for k x gamma
TABLE_1 = {
    4: [(2, 6), (2, 6), (1, 4), (1, 4), (1, 4), (1, 4)],
    6: [(3, 20), (2, 15), (2, 15), (1, 6), (1, 6), (1, 6)],
    10: [(5, 252), (4, 210), (3, 120), (2, 45), (1, 10), (1, 10)],
    20: [(10, 184_756), (8, 125_970), (7, 77_520), (3, 1140), (2, 190), (1, 20)],
}
GAMMAS = [1.1, 1.5, 2.0, 5.0, 10.0, 20.0]


@pytest.mark.parametrize(
    "k,gamma,expected",
    [(k, g, TABLE_1[k][j]) for k in TABLE_1 for j, g in enumerate(GAMMAS)],
)
def test_table_1_all_24_cells(k, gamma, expected):
    d = minimax_design(k, gamma)
    assert (d.q, d.n_outputs) == expected


@pytest.mark.parametrize("k", [2, 3, 5, 8, 13, 30])
@pytest.mark.parametrize("gamma", [1.05, 1.7, 3.0, 9.0, 40.0])
def test_minimax_q_maximises_f_over_integers(k, gamma):
    q = minimax_q(k, gamma)
    xs = np.arange(1, k)
    assert 1 <= q <= k - 1
    assert minimax_f(q, k, gamma) == pytest.approx(float(np.max(minimax_f(xs, k, gamma))), rel=1e-13)


def _uniform_minimax_L(P, pi):
    lam = P @ pi
    Dinv = np.diag(1 / lam)
    return np.linalg.solve(P.T @ Dinv @ P, P.T @ Dinv)


@pytest.mark.parametrize("k,gamma", [(4, 2.0), (5, 1.5), (6, 3.0), (7, 1.2)])
def test_minimax_risk_matches_eq_6_1_with_optimal_L(k, gamma):
    q = minimax_q(k, gamma)
    P, _ = tsubset_matrix(k, q, gamma)
    L = _uniform_minimax_L(P, np.full(k, 1 / k))  # eq. 6.3 at pi_u = L_q
    np.testing.assert_allclose(L @ P, np.eye(k), atol=1e-10)
    pi = np.random.default_rng(3).dirichlet(np.ones(k))
    lam = P @ pi
    risk = np.trace(L @ (np.diag(lam) - np.outer(lam, lam)) @ L.T)  # eq. 6.1
    assert risk == pytest.approx(minimax_risk(k, gamma) + 1 / k - pi @ pi, rel=1e-10)
    # eq. 7.5 route (Lemma 6.4) gives the same number
    assert tsubset_risk(k, q, gamma, pi) == pytest.approx(risk, rel=1e-10)


@pytest.mark.parametrize("k,t,gamma", [(4, 2, 2.0), (6, 3, 1.5), (5, 1, 4.0)])
def test_moment_estimator_7_2_equals_minimax_L_lambda_hat(k, t, gamma):
    # Proposition 7.1: c V/n + d == L_t lambda_hat on the same data (exact identity)
    rng = np.random.default_rng(11)
    x = rng.integers(0, k, size=500)
    Z = sample_tsubset(x, k, t, gamma, rng)
    P, subsets = tsubset_matrix(k, t, gamma)
    index = {s: i for i, s in enumerate(subsets)}
    rows = np.array([index[tuple(np.flatnonzero(z))] for z in Z])  # test-only bookkeeping
    lam_hat = np.bincount(rows, minlength=P.shape[0]) / Z.shape[0]
    L = _uniform_minimax_L(P, np.full(k, 1 / k))
    np.testing.assert_allclose(estimate_tsubset(Z, gamma), L @ lam_hat, atol=1e-10)


def test_max_trace_design_attains_trace_bound_and_compositions_do_not_exceed_it():
    k, gamma = 5, 3.0
    P1 = max_trace_design(k, gamma)
    assert np.trace(P1) == pytest.approx(max_trace_bound(k, gamma))
    assert parity(P1) == pytest.approx(gamma)
    rng = np.random.default_rng(0)
    for _ in range(50):  # further randomization keeps parity <= gamma (Lemma 5.2)
        C = rng.dirichlet(np.ones(k) * 0.3, size=k).T
        A = C @ P1
        assert parity(A) <= gamma * (1 + 1e-12)
        assert np.trace(A) <= max_trace_bound(k, gamma) + 1e-12


def test_max_trace_equals_minimax_when_q_is_one():
    # q = 1: P_1 is the max-trace design, and the inverse estimator is L_1
    k, gamma = 5, 20.0
    assert minimax_q(k, gamma) == 1
    assert max_trace_risk(k, gamma) == pytest.approx(minimax_risk(k, gamma), rel=1e-12)
    P, _ = tsubset_matrix(k, 1, gamma)
    np.testing.assert_allclose(P, max_trace_design(k, gamma))


def test_tsubset_sampler_reproduces_the_tpm():
    # cell frequencies of the two-step sampler vs P_t; each cell within 4 binomial SEs
    k, t, gamma, n = 5, 2, 3.0, 60_000
    rng = np.random.default_rng(5)
    x = np.full(n, 1)
    Z = sample_tsubset(x, k, t, gamma, rng)
    assert np.all(Z.sum(axis=1) == t)
    P, subsets = tsubset_matrix(k, t, gamma)
    codes = Z @ (2 ** np.arange(k))
    want = {sum(2**j for j in s): P[i, 1] for i, s in enumerate(subsets)}
    freq = np.bincount(codes, minlength=2**k) / n
    for code, prob in want.items():
        se = math.sqrt(prob * (1 - prob) / n)
        assert abs(freq[code] - prob) <= 4 * se


def test_tsubset_covariance_7_5_matches_sample_covariance_of_Z():
    # Sigma = V(Z) from eq. 7.5; sample covariance entries have SE <= 0.5/sqrt(n) (|Z_i Z_j| <= 1)
    k, t, gamma, n = 6, 3, 2.0, 200_000
    pi = np.array([0.35, 0.25, 0.15, 0.1, 0.1, 0.05])
    rng = np.random.default_rng(7)
    x = rng.choice(k, size=n, p=pi)
    Z = sample_tsubset(x, k, t, gamma, rng).astype(float)
    c, _ = tsubset_constants(k, t, gamma)
    Sigma = tsubset_covariance(pi, t, gamma, 1) / c**2
    np.testing.assert_allclose(np.cov(Z, rowvar=False), Sigma, atol=4 * 0.5 / math.sqrt(n))


@pytest.mark.parametrize("k,gamma", [(4, 2.0), (10, 5.0)])
def test_minimax_estimator_unbiased_monte_carlo(k, gamma):
    # |pi_hat_j - pi_j| <= 4 SE_j with SE from the exact covariance (7.5); k coordinates,
    # P(any false alarm) <= k * 6.3e-5 under normality.
    n = 100_000
    rng = np.random.default_rng(2024 + k)
    pi = rng.dirichlet(np.ones(k))
    d = minimax_design(k, gamma)
    Z = d.sample(rng.choice(k, size=n, p=pi), rng)
    est = d.estimate(Z)
    se = np.sqrt(np.diag(d.covariance(pi, n)))
    assert np.all(np.abs(est - pi) <= 4 * se)
    assert est.sum() == pytest.approx(1.0, abs=1e-9)


def test_max_trace_estimator_unbiased_monte_carlo():
    k, gamma, n = 4, 3.0, 100_000
    rng = np.random.default_rng(42)
    pi = np.array([0.5, 0.3, 0.15, 0.05])
    z = sample_max_trace(rng.choice(k, size=n, p=pi), k, gamma, rng)
    est, cov = estimate_max_trace(z, k, gamma)
    P = max_trace_design(k, gamma)
    lam = P @ pi
    Pinv = np.linalg.inv(P)
    exact = Pinv @ (np.diag(lam) - np.outer(lam, lam)) @ Pinv.T / n  # eq. 2.3
    np.testing.assert_allclose(np.diag(cov), np.diag(exact), rtol=0.05)
    assert np.all(np.abs(est - pi) <= 4 * np.sqrt(np.diag(exact)))


# ----------------------------------------------------------------------------- RAPPOR


@pytest.mark.parametrize("k,gamma", [(3, 2.0), (5, 4.0), (6, 1.5)])
def test_rappor_is_mixture_of_tsubset_designs(k, gamma):
    w = rappor_mixture_weights(k, gamma)
    assert w.sum() == pytest.approx(1.0)
    P, Z = rappor_matrix(k, gamma)
    np.testing.assert_allclose(P.sum(axis=0), 1.0)
    M, _ = mixture_matrix(k, gamma, w)
    np.testing.assert_allclose(P, M, atol=1e-15)
    Pm, Zm = modified_rappor_matrix(k, gamma)
    Mm, Zall = mixture_matrix(k, gamma, modified_rappor_weights(k, gamma))
    t = Zall.sum(axis=1)
    np.testing.assert_allclose(Pm, Mm[(t > 0) & (t < k)], atol=1e-15)


def test_rappor_number_of_ones_follows_7_6():
    k, gamma, n = 5, 4.0, 100_000
    rng = np.random.default_rng(9)
    Z = sample_rappor(rng.integers(0, k, size=n), k, gamma, rng)
    freq = np.bincount(Z.sum(axis=1), minlength=k + 1) / n
    w = rappor_mixture_weights(k, gamma)
    assert np.all(np.abs(freq - w) <= 4 * np.sqrt(w * (1 - w) / n))


@pytest.mark.parametrize("k,gamma", [(3, 2.0), (6, 3.0), (10, 8.0), (20, 2.0)])
def test_risk_ordering_theorems_7_2_and_7_3(k, gamma):
    r_minimax = minimax_risk(k, gamma)
    r_modified = mixture_risk(k, gamma, modified_rappor_weights(k, gamma))
    r_rappor = mixture_risk(k, gamma, rappor_mixture_weights(k, gamma))
    r_empirical = rappor_empirical_risk(k, gamma)
    assert r_minimax < r_modified < r_rappor < r_empirical


def test_mixture_risk_of_single_component_is_tsubset_risk():
    k, gamma = 7, 2.5
    for t in range(1, k):
        w = np.zeros(k + 1)
        w[t] = 1.0
        assert mixture_risk(k, gamma, w) == pytest.approx(tsubset_risk(k, t, gamma), rel=1e-12)


@pytest.mark.parametrize("variant", ["rappor", "modified"])
def test_rappor_minimax_estimators_unbiased_monte_carlo(variant):
    # SE from the sample covariance of the scores psi (estimate_mixture); 4 SE per coordinate.
    k, gamma, n = 5, 3.0, 100_000
    rng = np.random.default_rng(17)
    pi = np.array([0.4, 0.25, 0.2, 0.1, 0.05])
    x = rng.choice(k, size=n, p=pi)
    if variant == "rappor":
        Z, w = sample_rappor(x, k, gamma, rng), rappor_mixture_weights(k, gamma)
    else:
        Z, w = sample_modified_rappor(x, k, gamma, rng), modified_rappor_weights(k, gamma)
        t = Z.sum(axis=1)
        assert np.all((t > 0) & (t < k))
    est, cov = estimate_mixture(Z, gamma, w)
    se = np.sqrt(np.diag(cov))
    assert np.all(np.abs(est - pi) <= 4 * se)
    # the trace of the estimated covariance agrees with the exact risk (Lemma 7.1) to 5%
    assert np.trace(cov) * n == pytest.approx(mixture_risk(k, gamma, w, pi), rel=0.05)


def test_rappor_empirical_estimator_unbiased_and_risk_7_14():
    k, gamma, n = 4, 4.0, 100_000
    rng = np.random.default_rng(23)
    pi = np.array([0.1, 0.2, 0.3, 0.4])
    Z = sample_rappor(rng.choice(k, size=n, p=pi), k, gamma, rng)
    est = estimate_rappor_empirical(Z, gamma)
    r = math.sqrt(gamma)
    # each coordinate: ((r+1)/(r-1)) * Bernoulli mean; Var(Z_j) <= 1/4
    se = (r + 1) / (r - 1) * np.sqrt(Z.var(axis=0) / n)
    assert np.all(np.abs(est - pi) <= 4 * se)
    assert np.sum(se**2) * n == pytest.approx(rappor_empirical_risk(k, gamma, pi), rel=0.05)


def test_bad_parameters():
    with pytest.raises(ValueError, match=r"'gamma'.*\(1, inf\).*0\.5"):
        minimax_design(5, 0.5)
    with pytest.raises(ValueError, match=r"'k'.*\[2, inf\).*1"):
        minimax_q(1, 2.0)
    with pytest.raises(ValueError, match=r"'t'.*\[1, 4\].*5"):
        tsubset_constants(5, 5, 2.0)
    with pytest.raises(ValueError, match="sample_tsubset"):
        tsubset_matrix(30, 15, 2.0)
    with pytest.raises(ValueError, match=r"'x'.*\[0, 2\]"):
        sample_tsubset(np.array([0, 3]), 3, 1, 2.0, np.random.default_rng(0))


@pytest.mark.parametrize("k,t,gamma", [(5, 2, 3.0), (6, 3, 1.5), (4, 1, 2.0), (7, 5, 9.0)])
def test_response_probabilities_match_the_tpm_exactly(k, t, gamma):
    # P(Z_j = 1) and eq. 7.5 against sums over the rows of P_t (the dissertation's second
    # "simplified" line for P(Z_j = 1) has a typo; see tsubset_response_probabilities)
    from sdc.mechanisms.designs import tsubset_response_probabilities

    P, subsets = tsubset_matrix(k, t, gamma)
    Z = np.zeros((len(subsets), k))
    for r, s in enumerate(subsets):
        Z[r, list(s)] = 1
    pi = np.random.default_rng(k * t).dirichlet(np.ones(k))
    lam = P @ pi
    p1, p11 = tsubset_response_probabilities(pi, t, gamma)
    np.testing.assert_allclose(p1, Z.T @ lam, atol=1e-14)
    np.testing.assert_allclose(p11, Z.T @ (lam[:, None] * Z), atol=1e-14)
