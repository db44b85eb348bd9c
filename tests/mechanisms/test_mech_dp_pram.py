"""PRAM under differential privacy (Ayed, Battiston & Camerlenghi)."""

import itertools
import math

import numpy as np
import pytest

from sdc.mechanisms import (
    apply_dp_pram,
    dp_pram,
    estimate_proportions,
    is_dp_feasible,
    is_eps_ldp,
    mutual_information,
    pram_matrix,
    proposition_3_2_holds,
    vertex_values,
)
from sdc.mechanisms.dp_pram import (
    count_vertex_values,
    dp_pram_constraints,
    enumerate_vertices,
    project_to_simplex,
    proposition_3_2_bound,
    proposition_3_2_vertices,
    released_marginal,
)

P_I = [0.3, 0.1, 0.2, 0.08, 0.02, 0.04, 0.06, 0.1, 0.01, 0.09]
P_II = [0.0336, 0.1059, 0.1697, 0.0962, 0.0180, 0.0062, 0.1097, 0.0005, 0.1233, 0.3369]
P_IV = [0.05] + [0.95 / 29] * 29
SCENARIOS = {"I": P_I, "II": P_II, "IV": P_IV}
# paper's Tables 1, 2, 4: alpha -> (#v_alpha, #v_-alpha, #v_min, #v_max)
PAPER = {
    "I": {0.5: (4, 6, 0, 0), 1.0: (5, 5, 0, 0), 1.5: (2, 8, 0, 0), 2.0: (0, 9, 0, 1)},
    "II": {0.5: (7, 3, 0, 0), 1.0: (6, 4, 0, 0), 1.5: (6, 4, 0, 0), 2.0: (0, 9, 0, 1)},
    "IV": {0.5: (0, 29, 0, 1), 1.0: (30, 0, 0, 0), 1.5: (30, 0, 0, 0), 2.0: (30, 0, 0, 0)},
}
# exact vertex search (this library): MI in nats and winning family, for the note in
# docs/MECHANISMS.md. In all 12 cases the symmetric vertex q_k = v_alpha (family 1) wins.
EXACT_MI = {
    ("I", 0.5): 0.013283, ("I", 1.0): 0.066189, ("I", 1.5): 0.178089, ("I", 2.0): 0.359138,
    ("II", 0.5): 0.012899, ("II", 1.0): 0.064034, ("II", 1.5): 0.171565, ("II", 2.0): 0.344413,
    ("IV", 0.5): 0.005502, ("IV", 1.0): 0.029992, ("IV", 1.5): 0.090935, ("IV", 2.0): 0.212914,
}


def _assignments_with_counts(S, eps, counts):
    """Every q with the paper's counts of v_alpha, v_-alpha, v_min, v_max (distinct ones)."""
    na, nb, nmin, nmax = counts
    v = vertex_values(S, eps)
    out = []
    special = [None] if nmin + nmax == 0 else range(S)
    for i in special:
        rest = [j for j in range(S) if j != i]
        for A in itertools.combinations(rest, na):
            q = np.full(S, v["v_minus_alpha"])
            q[list(A)] = v["v_alpha"]
            if i is not None:
                q[i] = v["v_min"] if nmin else v["v_max"]
            out.append(q)
    return np.array(out)


@pytest.mark.parametrize("scenario", ["I", "II", "IV"])
@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.5, 2.0])
def test_ayed_tables_exact_search_at_least_as_good_as_paper(scenario, alpha):
    p = np.array(SCENARIOS[scenario])
    S = p.size
    assert proposition_3_2_holds(S, alpha)
    res = dp_pram(p, alpha)
    assert res.exact and res.method == "proposition-3.2"
    assert is_dp_feasible(res.q, alpha)
    paper = PAPER[scenario][alpha]
    Q = _assignments_with_counts(S, alpha, paper)
    assert all(is_dp_feasible(q, alpha) for q in Q[:5])
    best_paper = float(np.max(mutual_information(p, Q)))
    assert res.mutual_information >= best_paper - 1e-12
    # pinned outcome of the exact search (see docs/MECHANISMS.md, "differences")
    assert res.family == "1: all v_alpha"
    assert res.counts["v_alpha"] == S
    assert res.mutual_information == pytest.approx(EXACT_MI[(scenario, alpha)], abs=5e-7)
    agrees = paper == (S, 0, 0, 0)
    if agrees:  # scenario IV, alpha >= 1: same vertex as the paper
        assert res.mutual_information == pytest.approx(best_paper, rel=1e-12)
    else:  # strictly better than every q with the paper's counts
        assert res.mutual_information > best_paper + 1e-4


@pytest.mark.parametrize("S,eps", [(5, 0.5), (5, 0.9), (6, 0.3), (6, 1.2), (7, 1.5), (8, 0.8), (10, 2.0)])
def test_proposition_3_2_vertex_list_equals_general_enumeration(S, eps):
    assert proposition_3_2_holds(S, eps)
    W = np.unique(np.round(-np.sort(-proposition_3_2_vertices(S, eps), axis=1), 10), axis=0)
    V = enumerate_vertices(S, eps)
    assert {tuple(w) for w in W} == {tuple(v) for v in V}


def test_proposition_3_2_bound_is_the_appendix_form():
    # u_alpha satisfies (17) iff e^alpha <= (S - 2 + sqrt(S(S-4)))/2 (Appendix 5.3); for S = 10
    # the bound is 2.063 (the main-text form without "- 2" would give 2.183), for S = 9, 1.925.
    assert proposition_3_2_bound(10) == pytest.approx(math.log((8 + math.sqrt(60)) / 2))
    assert proposition_3_2_bound(9) < 2.0 < proposition_3_2_bound(10)
    # the condition is sufficient, not necessary: well beyond it (bound + 0.5) the general
    # search finds vertices outside the five families, i.e. the families are not enough
    for S in (5, 7, 12):
        eps = proposition_3_2_bound(S) + 0.5
        V = enumerate_vertices(S, eps)
        fams = {tuple(np.round(-np.sort(-w), 10)) for w in proposition_3_2_vertices(S, eps)}
        assert any(tuple(v) not in fams for v in V)


@pytest.mark.parametrize("S,eps", [(5, 0.4), (6, 1.0), (8, 1.5), (12, 0.7)])
def test_family_search_equals_general_search_on_random_p(S, eps):
    rng = np.random.default_rng(S)
    for _ in range(5):
        p = rng.dirichlet(np.full(S, 0.4))
        a = dp_pram(p, eps, method="proposition-3.2")
        b = dp_pram(p, eps, method="general")
        assert a.mutual_information == pytest.approx(b.mutual_information, abs=1e-9)


@pytest.mark.parametrize("S,eps", [(2, 0.7), (3, 1.0), (4, 0.5), (5, 3.0), (7, 2.5)])
def test_general_search_outside_proposition_3_2(S, eps):
    assert not proposition_3_2_holds(S, eps)
    rng = np.random.default_rng(S + 10)
    p = rng.dirichlet(np.ones(S))
    res = dp_pram(p, eps)
    assert res.method == "general" and res.exact
    assert is_dp_feasible(res.q, eps)
    # no feasible point found by random search does better (convex objective, vertex optimum)
    C, b = dp_pram_constraints(S, eps)
    cand = rng.random((20_000, S))
    cand = cand[(cand @ C.T <= b).all(axis=1)]
    assert cand.shape[0] > 0
    assert np.max(mutual_information(p, cand)) <= res.mutual_information + 1e-12


def test_binary_case_section_3_2_2():
    # S = 2: optimal q are the symmetric boundary points 1/(1+e^a) or e^a/(1+e^a), any p
    for p0 in (0.5, 0.48, 0.1):
        res = dp_pram([p0, 1 - p0], 0.05)
        e = math.exp(0.05)
        assert res.q[0] == pytest.approx(res.q[1])
        assert min(abs(res.q[0] - 1 / (1 + e)), abs(res.q[0] - e / (1 + e))) < 1e-9


def test_mutual_information_and_marginal_against_brute_force():
    rng = np.random.default_rng(1)
    for S in (2, 3, 7):
        p = rng.dirichlet(np.ones(S))
        q = rng.random(S)
        M = pram_matrix(q)
        J = p[:, None] * M
        m = J.sum(axis=0)
        mi = np.sum(J * np.log(J / (p[:, None] * m[None, :])))
        assert mutual_information(p, q) == pytest.approx(mi, rel=1e-12)
        np.testing.assert_allclose(released_marginal(p, q), m)


def test_constraints_match_ratio_definition():
    S, eps = 4, 0.8
    C, b = dp_pram_constraints(S, eps)
    rng = np.random.default_rng(5)
    Q = rng.random((3000, S))
    lin = (Q @ C.T <= b + 1e-12).all(axis=1)
    ratio = np.array([is_dp_feasible(q, eps, rtol=0) for q in Q])
    assert np.array_equal(lin, ratio)
    assert lin.any() and (~lin).any()


def test_vertex_values_are_tight():
    S, eps = 10, 1.3
    v = vertex_values(S, eps)
    q4 = np.full(S, v["v_alpha"])
    q4[0] = v["v_min"]
    q5 = np.full(S, v["v_minus_alpha"])
    q5[0] = v["v_max"]
    for q in (q4, q5, np.full(S, v["v_alpha"]), np.full(S, v["v_minus_alpha"])):
        assert is_dp_feasible(q, eps)
        assert not is_dp_feasible(q, eps - 1e-3)
    assert count_vertex_values(q5, eps) == {"v_alpha": 0, "v_minus_alpha": 9, "v_min": 0, "v_max": 1, "other": 0}


@pytest.mark.statistical
def test_apply_dp_pram_transition_frequencies_and_dp():
    # 4 SE per transition cell: SE = sqrt(M(1-M)/n_x) for the n_x records with true value x
    p = np.array(P_I)
    res = dp_pram(p, 1.0)
    assert is_eps_ldp(res.transition_matrix, 1.0)
    n = 200_000
    rng = np.random.default_rng(31)
    x = rng.choice(p.size, size=n, p=p)
    z = apply_dp_pram(x, res, rng)
    counts = np.zeros((p.size, p.size))
    np.add.at(counts, (x, z), 1)
    nx = counts.sum(axis=1, keepdims=True)
    M = res.matrix
    assert np.all(np.abs(counts / nx - M) <= 4 * np.sqrt(M * (1 - M) / nx) + 1e-12)


@pytest.mark.statistical
def test_estimate_proportions_unbiased_and_projected():
    # unprojected estimator (M')^{-1} m_hat is unbiased; SE per category from the exact
    # covariance (M')^{-1}(D_m - m m')M^{-1}/n; 4 SE each.
    p = np.array(P_II)
    res = dp_pram(p, 2.0)
    n = 300_000
    rng = np.random.default_rng(8)
    z = res.apply(rng.choice(p.size, size=n, p=p), rng)
    raw = estimate_proportions(z, res, project=False)
    m = res.released_marginal
    Minv_t = np.linalg.inv(res.matrix.T)
    cov = Minv_t @ (np.diag(m) - np.outer(m, m)) @ Minv_t.T / n
    assert np.all(np.abs(raw - p) <= 4 * np.sqrt(np.diag(cov)))
    proj = res.estimate(z)
    assert np.all(proj >= 0) and proj.sum() == pytest.approx(1.0)
    assert np.linalg.norm(proj - p) <= np.linalg.norm(raw - p) + 1e-12  # projection onto a convex set containing p


def test_project_to_simplex():
    np.testing.assert_allclose(project_to_simplex([0.2, 0.3, 0.5]), [0.2, 0.3, 0.5])
    np.testing.assert_allclose(project_to_simplex([-0.1, 0.3, 0.9]), [0.0, 0.2, 0.8])
    np.testing.assert_allclose(project_to_simplex([2.0, 0.0]), [1.0, 0.0])


def test_local_search_fallback_is_flagged():
    p = np.random.default_rng(0).dirichlet(np.ones(12))
    with pytest.warns(RuntimeWarning, match="not certified"):
        res = dp_pram(p, 0.5, max_candidates=100)
    assert not res.exact and res.method == "local-search"
    assert res.mutual_information == pytest.approx(dp_pram(p, 0.5).mutual_information, rel=1e-9)


def test_bad_parameters():
    with pytest.raises(ValueError, match=r"'eps'.*\(0, inf\).*-1"):
        dp_pram([0.5, 0.5], -1.0)
    with pytest.raises(ValueError, match=r"'p'.*sum to 1"):
        dp_pram([0.5, 0.6], 1.0)
    with pytest.raises(ValueError, match=r"'method'"):
        dp_pram([0.5, 0.5], 1.0, method="simplex")
    with pytest.raises(ValueError, match="S <= 12"):
        dp_pram(np.full(20, 0.05), 5.0)
    res = dp_pram([0.5, 0.5], 1.0)
    with pytest.raises(ValueError, match=r"'values'.*\[0, 1\]"):
        apply_dp_pram(np.array([0, 2]), res, np.random.default_rng(0))
