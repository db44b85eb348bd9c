"""Iterated bisymmetric (Kronecker) randomizers (Kronecker paper 2018)."""

import math

import numpy as np
import pytest

from sdc.mechanisms import (
    apply_kron_power,
    bit_randomizer,
    estimate_marginal,
    kron_epsilon,
    kron_estimator_trace_covariance,
    kron_power,
    parity,
    randomize_bits,
    simmons_unrelated_bit_parameter,
    warner_bit_parameter,
)
from sdc.mechanisms.kronecker import a_from_epsilon, bit_histogram, kron_inverse_parameter

pytestmark = pytest.mark.statistical


@pytest.mark.parametrize("d", [1, 2, 3, 4])
@pytest.mark.parametrize("a", [0.9, 0.7, 0.25])
def test_estimator_equals_direct_inversion_of_full_matrix(d, a):
    rng = np.random.default_rng(d)
    X = rng.integers(0, 2, size=(300, d + 2))
    R = randomize_bits(X, a, rng)
    cols = list(range(1, d + 1))
    h = bit_histogram(R, cols)
    direct = np.linalg.solve(kron_power(bit_randomizer(a), d), h / h.sum())
    np.testing.assert_allclose(estimate_marginal(R, cols, a), direct, atol=1e-12)
    # and C^[d] v through the per-axis algorithm equals the full product
    v = rng.random(2**d)
    np.testing.assert_allclose(apply_kron_power(bit_randomizer(a), v), kron_power(bit_randomizer(a), d) @ v, atol=1e-14)


def test_inverse_is_kron_of_c_b():
    a = 0.8
    b = kron_inverse_parameter(a)
    C = bit_randomizer(a)
    Cb = np.array([[b, 1 - b], [1 - b, b]])
    np.testing.assert_allclose(C @ Cb, np.eye(2), atol=1e-15)  # Theorem 4.4


@pytest.mark.parametrize("d", [1, 2, 3])
def test_trace_of_covariance_lemma_4_5(d):
    a = 0.75
    K = kron_power(bit_randomizer(a), d)
    pi = np.random.default_rng(d).dirichlet(np.ones(2**d))
    lam = K @ pi
    Ki = np.linalg.inv(K)
    exact = np.trace(Ki @ (np.diag(lam) - np.outer(lam, lam)) @ Ki.T)
    assert kron_estimator_trace_covariance(pi, a, 1) == pytest.approx(exact, rel=1e-12)


def test_marginal_estimator_unbiased_monte_carlo():
    # correlated 3-bit data; estimate the (bit 0, bit 2) marginal; 4 SE per cell with SE from
    # the exact covariance C^{-1}(D_lambda - lambda lambda')C^{-T}/n of the 2-bit marginal.
    n, a = 200_000, 0.8
    rng = np.random.default_rng(123)
    pi3 = np.array([0.30, 0.05, 0.10, 0.15, 0.05, 0.20, 0.05, 0.10])  # index = b0 b1 b2
    codes = rng.choice(8, size=n, p=pi3)
    X = ((codes[:, None] >> np.array([2, 1, 0])) & 1).astype(np.int8)
    R = randomize_bits(X, a, rng)
    est = estimate_marginal(R, [0, 2], a)
    true = pi3.reshape(2, 2, 2).sum(axis=1).reshape(-1)
    K = kron_power(bit_randomizer(a), 2)
    lam = K @ true
    Ki = np.linalg.inv(K)
    cov = Ki @ (np.diag(lam) - np.outer(lam, lam)) @ Ki.T / n
    assert np.all(np.abs(est - true) <= 4 * np.sqrt(np.diag(cov)))
    assert np.trace(cov) == pytest.approx(kron_estimator_trace_covariance(true, a, n))


@pytest.mark.parametrize("a,d", [(0.8, 1), (0.8, 3), (0.3, 2), (0.55, 4)])
def test_epsilon_is_log_parity_of_kron_power(a, d):
    assert kron_epsilon(a, d) == pytest.approx(math.log(parity(kron_power(bit_randomizer(a), d))))


def test_a_from_epsilon_inverts_kron_epsilon():
    for eps, d in [(1.0, 1), (2.0, 4), (0.1, 3)]:
        assert kron_epsilon(a_from_epsilon(eps, d), d) == pytest.approx(eps)


def test_warner_and_simmons_parameterizations_by_simulating_the_devices():
    # Simmons: with prob p answer "coin is heads?" (uniform), else the truth -> keep prob 1 - p/2.
    # Warner: spinner points to the true statement with prob p -> keep prob p.
    n = 200_000
    rng = np.random.default_rng(77)
    truth = rng.integers(0, 2, size=n)
    p = 0.6
    unrelated = rng.random(n) < p
    coin = rng.integers(0, 2, size=n)
    simmons = np.where(unrelated, coin, truth)
    a = simmons_unrelated_bit_parameter(p)
    se = math.sqrt(a * (1 - a) / n)
    assert abs(np.mean(simmons == truth) - a) <= 4 * se
    spinner_true = rng.random(n) < 0.7
    warner = np.where(spinner_true, truth, 1 - truth)
    a = warner_bit_parameter(0.7)
    assert abs(np.mean(warner == truth) - a) <= 4 * math.sqrt(a * (1 - a) / n)


def test_bad_parameters():
    with pytest.raises(ValueError, match=r"'a'.*0\.5"):
        kron_inverse_parameter(0.5)
    with pytest.raises(ValueError, match=r"'a'.*\[0, 1\].*1\.5"):
        bit_randomizer(1.5)
    with pytest.raises(ValueError, match=r"'columns'"):
        bit_histogram(np.zeros((3, 2), dtype=int), [0, 5])
