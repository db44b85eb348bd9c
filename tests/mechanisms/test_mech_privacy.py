"""Privacy of transition matrices (Chai 2019 ch. 3-5; Nayak 2020 sections 3-4)."""

import math

import numpy as np
import pytest

from sdc.mechanisms import (
    has_proportional_rows,
    is_admissible,
    is_beta_factor_private,
    is_eps_ldp,
    is_rho1_rho2_private,
    is_sip,
    max_trace_design,
    modified_rappor_matrix,
    parity,
    privacy_demand,
    rappor_matrix,
    rho_to_gamma,
    row_parity,
    tsubset_matrix,
    warner_design,
)
from sdc.mechanisms.privacy import combine_breach_boundaries, precise_upper_boundary


def test_parity_conventions_zero_over_zero_and_a_over_zero():
    # row 0 is all zero (0/0 = 1), row 1 is constant (parity 1)
    P = np.array([[0.0, 0.0], [1.0, 1.0]])
    assert row_parity(P).tolist() == [1.0, 1.0]
    assert parity(P) == 1.0
    # a zero next to a positive entry gives a/0 = inf
    Q = np.array([[0.5, 0.0], [0.5, 1.0]])
    eta = row_parity(Q)
    assert math.isinf(eta[0]) and eta[1] == 2.0
    assert math.isinf(parity(Q))
    assert not is_eps_ldp(Q, 50.0)


@pytest.mark.parametrize("k,gamma", [(2, 1.5), (3, 2.0), (5, 3.0), (10, 20.0)])
def test_max_trace_parity_is_gamma_and_ldp(k, gamma):
    P = max_trace_design(k, gamma)
    assert parity(P) == pytest.approx(gamma, rel=1e-12)
    assert is_eps_ldp(P, math.log(gamma))
    assert not is_eps_ldp(P, math.log(gamma) - 1e-3)
    assert is_beta_factor_private(P, gamma)
    assert not is_beta_factor_private(P, gamma * 0.999)


def test_warner_is_max_trace_for_k2():
    np.testing.assert_allclose(warner_design(3.0), max_trace_design(2, 3.0))
    assert parity(warner_design(3.0)) == pytest.approx(3.0)


def test_rho1_rho2_gamma():
    assert rho_to_gamma(0.2, 0.5) == pytest.approx(4.0)
    assert is_rho1_rho2_private(max_trace_design(3, 4.0), 0.2, 0.5)
    assert not is_rho1_rho2_private(max_trace_design(3, 4.1), 0.2, 0.5)


def test_privacy_demand_of_precise_boundary_is_gamma():
    # Chai 2019 eq. 4.9: B(h_(gamma)) = gamma exactly (the objective is constant).
    for g in (1.5, 3.0, 20.0):
        # numerical infimum: relative error ~1e-6 (grid stops at p = 1e-7 and 1 - 1e-7)
        assert privacy_demand(precise_upper_boundary(g)) == pytest.approx(g, rel=1e-5)


def test_privacy_demand_beta_factor_and_rho_boundaries():
    beta = 3.0
    # beta-factor privacy as SIP: h_u(a) = min(beta a, 1), h_l(a) = a / beta -> B = beta (Thm 3.2)
    h = combine_breach_boundaries(lambda a: a / beta, lambda a: np.minimum(beta * a, 1.0))
    assert privacy_demand(h) == pytest.approx(beta, rel=1e-6)
    # rho1-to-rho2 as SIP: B = rho2(1-rho1)/(rho1(1-rho2)) (Thm 3.1), approached not attained
    r1, r2 = 0.2, 0.5
    h_u = lambda a: np.where(a < r1, r2, 1.0)  # noqa: E731
    h_l = lambda a: np.where(a > r2, r1, 0.0)  # noqa: E731
    B = privacy_demand(combine_breach_boundaries(h_l, h_u))
    assert B == pytest.approx(rho_to_gamma(r1, r2), rel=1e-3)
    assert B >= rho_to_gamma(r1, r2) * (1 - 1e-9)
    assert is_sip(max_trace_design(4, 0.99 * 4.0), h_l, h_u)
    assert not is_sip(max_trace_design(4, 1.01 * 4.0), h_l, h_u)


@pytest.mark.parametrize("k,t,gamma", [(4, 1, 2.0), (4, 2, 2.0), (5, 3, 1.5), (6, 2, 5.0)])
def test_tsubset_rows_have_exactly_two_values_and_are_admissible(k, t, gamma):
    P, subsets = tsubset_matrix(k, t, gamma)
    assert P.shape == (math.comb(k, t), k)
    for row in P:
        assert np.unique(np.round(row, 14)).size == 2
    np.testing.assert_allclose(row_parity(P), gamma)
    assert is_admissible(P, gamma)
    assert not is_admissible(P, gamma * 1.01)


def test_figure5_tsubset_k4_gamma2():
    # Chai 2019 Figure 5: (1/5)[2 1 1 1 ...], (1/9)[2 2 1 1 ...], (1/7)[2 2 2 1 ...]
    for t, den in ((1, 5), (2, 9), (3, 7)):
        P, subsets = tsubset_matrix(4, t, 2.0)
        Z = np.zeros_like(P)
        for i, s in enumerate(subsets):
            Z[i, list(s)] = 1
        np.testing.assert_allclose(P * den, 1 + Z)


def test_rappor_constant_rows_parity_one_and_inadmissible():
    gamma = 3.0
    P, Z = rappor_matrix(4, gamma)
    t = Z.sum(axis=1)
    eta = row_parity(P)
    np.testing.assert_allclose(eta[(t == 0) | (t == 4)], 1.0)
    np.testing.assert_allclose(eta[(t > 0) & (t < 4)], gamma)
    assert not is_admissible(P, gamma)
    Pm, _ = modified_rappor_matrix(4, gamma)
    assert is_admissible(Pm, gamma)


def test_admissibility_rejects_three_values_and_proportional_rows():
    gamma = 2.0
    P = max_trace_design(3, gamma)
    # split the first output into two proportional outputs: same privacy, not in C_gamma
    split = np.vstack([P[:1] * 0.3, P[:1] * 0.7, P[1:]])
    assert has_proportional_rows(split)
    assert not is_admissible(split, gamma)
    # a row with three distinct values (parity gamma but not two-valued)
    Q = np.array([[0.4, 0.2, 0.3], [0.3, 0.4, 0.3], [0.3, 0.4, 0.4]])
    Q = Q / Q.sum(axis=0)
    assert not is_admissible(Q, parity(Q))


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: is_eps_ldp(np.eye(2), -1.0), r"'eps'.*\[0, inf\).*-1"),
        (lambda: rho_to_gamma(0.6, 0.5), r"'rho2'.*0\.6.*0\.5"),
        (lambda: is_admissible(np.eye(2), 1.0), r"'gamma'.*\(1, inf\).*1\.0"),
        (lambda: parity(np.array([[0.5, 0.5], [0.6, 0.5]])), r"'P'.*columns summing to 1"),
    ],
)
def test_bad_parameters_raise_value_error_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()
