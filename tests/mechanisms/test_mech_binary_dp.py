"""Optimal DP binary randomized response (Holohan, Leith & Mason 2017)."""

import math

import numpy as np
import pytest

from sdc.mechanisms import (
    BinaryRRDesign,
    g_threshold,
    in_feasible_region,
    optimal_eps_delta_designs,
    optimal_eps_design,
    optimal_warner_design,
    rr_mle,
    rr_mle_variance,
)
from sdc.mechanisms.binary_dp import boundary_point, t0_threshold


@pytest.mark.parametrize(
    "eps,delta,pi,g,design,var_pair",
    [
        # Example 1, case 1: g = 0.243 < pi, symmetric optimum; Var 2.372 vs 2.438 (n = 1)
        (0.5, 0.1, 0.25, 0.243, "sym", (2.372, 2.438)),
        # case 2: g = 0.197 > pi, corner (1, delta); Var 0.385 vs 0.24
        (1.0, 0.4, 0.1, 0.197, "corner", (0.385, 0.240)),
        # case 3 (Corollary 2, pi >= 1/2): g = 0.382 > 1 - pi, corner (delta, 1)
        (0.5, 1 / 3, 0.9, 0.382, "corner_swapped", None),
    ],
)
def test_example_1_cases(eps, delta, pi, g, design, var_pair):
    assert round(g_threshold(eps, delta), 3) == g
    (opt,) = optimal_eps_delta_designs(eps, delta, pi)
    e = math.exp(eps)
    sym = (e + delta) / (e + 1)
    expected = {"sym": (sym, sym), "corner": (1.0, delta), "corner_swapped": (delta, 1.0)}[design]
    assert (opt.p00, opt.p11) == pytest.approx(expected, abs=1e-12)
    if var_pair is not None:
        r1 = boundary_point(1.0, eps, delta)
        r0 = boundary_point(t0_threshold(eps, delta), eps, delta)
        # the paper prints 3 decimals: agree to within half a unit of the last digit
        assert rr_mle_variance(pi, 1, *r1) == pytest.approx(var_pair[0], abs=5e-4 + 1e-12)
        assert rr_mle_variance(pi, 1, *r0) == pytest.approx(var_pair[1], abs=5e-4 + 1e-12)


def test_example_1_case_3_variances():
    # The paper prints Var(s(1), r(1)) = 0.854 (reproduced) and Var(s(t0), r(t0)) = 0.143;
    # eq. 6 gives 0.290 for the latter (P(X=1) = 29/30, (p00+p11-1)^2 = 1/9), and the
    # paper's "1.911" for (r(t0), s(t0)) is 1.890 by eq. 6. The optimum is unchanged.
    eps, delta, pi = 0.5, 1 / 3, 0.9
    r1 = boundary_point(1.0, eps, delta)
    assert round(rr_mle_variance(pi, 1, r1[1], r1[0]), 3) == 0.854
    assert rr_mle_variance(pi, 1, delta, 1.0) == pytest.approx((29 / 30) * (1 / 30) * 9)
    assert rr_mle_variance(pi, 1, 1.0, delta) == pytest.approx(1.89, abs=1e-9)


def test_example_1_case_4_two_optima():
    eps, delta, pi = math.log(2), 0.25, 0.25
    assert g_threshold(eps, delta) == pytest.approx(0.25, abs=1e-15)
    designs = optimal_eps_delta_designs(eps, delta, pi)
    assert len(designs) == 2
    got = sorted((d.p00, d.p11) for d in designs)
    assert got == [pytest.approx((0.75, 0.75)), pytest.approx((1.0, 0.25))]
    for d in designs:
        assert d.variance(pi) == pytest.approx(15 / 16)


def _grid(eps, delta, n=801):
    a, b = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n))
    a, b = a.ravel(), b.ravel()
    keep = in_feasible_region(a, b, eps, delta) & (a + b > 1 + 1e-9)
    return a[keep], b[keep]


def _var(pi, a, b):
    s = a + b - 1
    return (0.25 - (a - 0.5 - pi * s) ** 2) / s**2


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
@pytest.mark.parametrize("pi", [0.05, 0.3, 0.5, 0.8])
def test_theorem_2_beats_a_grid_of_the_feasible_region(eps, pi):
    opt = optimal_eps_design(eps)
    assert in_feasible_region(opt.p00, opt.p11, eps)
    a, b = _grid(eps, 0.0)
    assert np.min(_var(pi, a, b)) >= opt.variance(pi) - 1e-12


@pytest.mark.parametrize("eps,delta", [(0.5, 0.1), (1.0, 0.4), (0.2, 0.05), (2.0, 0.3)])
@pytest.mark.parametrize("pi", [0.05, 0.2, 0.5, 0.7, 0.95])
def test_theorem_3_and_corollary_2_beat_a_grid(eps, delta, pi):
    designs = optimal_eps_delta_designs(eps, delta, pi)
    v = designs[0].variance(pi)
    for d in designs:
        assert in_feasible_region(d.p00, d.p11, eps, delta)
        assert d.variance(pi) == pytest.approx(v)
    a, b = _grid(eps, delta)
    assert np.min(_var(pi, a, b)) >= v - 1e-12


def test_theorem_4_warner():
    eps, delta = 0.7, 0.1
    w = optimal_warner_design(eps, delta)
    assert w.p00 == w.p11 == pytest.approx((math.exp(eps) + delta) / (math.exp(eps) + 1))
    assert in_feasible_region(w.p00, w.p11, eps, delta)
    assert not in_feasible_region(w.p00 + 1e-6, w.p11 + 1e-6, eps, delta)
    assert optimal_warner_design(eps).p00 == pytest.approx(optimal_eps_design(eps).p00)


@pytest.mark.statistical
def test_mle_unbiased_and_variance_corollary_1_monte_carlo():
    # R replicates of n responses. Mean: |mean - pi| <= 4 sqrt(Var/R). Variance: the sample
    # variance of R normal-ish replicates has relative SE sqrt(2/(R-1)); allow 4 of them.
    d = BinaryRRDesign(0.85, 0.7)
    pi, n, R = 0.3, 400, 4000
    rng = np.random.default_rng(99)
    x = (rng.random((R, n)) < pi).astype(np.int8)
    keep_p = np.where(x == 1, d.p11, d.p00)
    resp = np.where(rng.random((R, n)) < keep_p, x, 1 - x)
    N = resp.sum(axis=1)
    s = d.p00 + d.p11 - 1
    est = (d.p00 - 1) / s + N / (s * n)
    var = rr_mle_variance(pi, n, d.p00, d.p11)
    assert abs(est.mean() - pi) <= 4 * math.sqrt(var / R)
    assert est.var(ddof=1) == pytest.approx(var, rel=4 * math.sqrt(2 / (R - 1)))
    assert rr_mle(int(N[0]), n, d.p00, d.p11) == pytest.approx(est[0])


def test_bad_parameters():
    with pytest.raises(ValueError, match=r"'delta'.*\[0, 1\].*1\.5"):
        g_threshold(1.0, 1.5)
    with pytest.raises(ValueError, match=r"'pi'.*\(0, 1\).*1\.0"):
        optimal_eps_delta_designs(1.0, 0.1, 1.0)
    with pytest.raises(ValueError, match=r"p00 \+ p11 != 1"):
        rr_mle(3, 10, 0.4, 0.6)
