"""Monte Carlo tests of the NZY PRAM (docs/METHOD.md section 5) and the intruder (section 6).

All tests use fixed seeds. Replications are vectorized: post_randomize gives every record its
own pair of uniforms, so tiling a PRB's records R times is R independent replications.
Tolerances are 4 standard errors computed from the exact variance of the statistic (a
two-sided 4-sigma band has false-alarm probability ~6e-5 per comparison).
"""

import numpy as np
import pytest

from sdc import correct_match_risk, solve_theta
from sdc.method.pram import nzy_matrix, post_randomize

pytestmark = pytest.mark.statistical

THETA = solve_theta(0.395)
# a PRB of k = 6 cells: four singletons and two doubletons (8 records)
T_CELLS = np.array([1, 1, 2, 1, 2, 1])
K = T_CELLS.size
OWNERS = np.repeat(np.arange(K), T_CELLS)  # cell of each record
R = 20_000


def _simulate(reps: int = R, seed: int = 2024) -> np.ndarray:
    """(reps, n_records) array of released cells."""
    local = np.tile(OWNERS, reps)
    t = T_CELLS[local]
    out = post_randomize(local, t, K, THETA, np.random.default_rng(seed))
    return out.reshape(reps, OWNERS.size)


def test_transition_matrix_is_unbiased_exactly():
    p = nzy_matrix(T_CELLS, THETA)
    assert np.allclose(p.sum(axis=0), 1.0)
    assert np.allclose(p @ T_CELLS, T_CELLS)  # P t = t


def test_cell_counts_are_unbiased():
    released = _simulate()
    counts = np.stack([(released == j).sum(axis=1) for j in range(K)], axis=1)  # (R, K)
    p = nzy_matrix(T_CELLS, THETA)
    # S_i = sum over records r of Bernoulli(p[i, owner(r)]), independent records:
    # Var(S_i) = sum_r p(1-p); the mean over R replications has SE sqrt(Var/R).
    var = np.array([(p[i, OWNERS] * (1 - p[i, OWNERS])).sum() for i in range(K)])
    se = np.sqrt(var / R)
    assert np.all(np.abs(counts.mean(axis=0) - T_CELLS) <= 4 * se), (counts.mean(axis=0), se)


def test_each_record_changes_with_probability_theta_over_t():
    released = _simulate(seed=99)
    changed = released != OWNERS[None, :]
    p = THETA / T_CELLS[OWNERS]
    se = np.sqrt(p * (1 - p) / R)  # binomial proportion
    assert np.all(np.abs(changed.mean(axis=0) - p) <= 4 * se)


def test_destinations_are_uniform_over_the_other_cells():
    released = _simulate(seed=7)
    for j in range(K):
        cols = np.flatnonzero(OWNERS == j)
        moved = released[:, cols][released[:, cols] != j]
        freq = np.bincount(moved, minlength=K) / moved.size
        others = np.delete(np.arange(K), j)
        assert freq[j] == 0
        q = 1 / (K - 1)
        se = np.sqrt(q * (1 - q) / moved.size)
        assert np.all(np.abs(freq[others] - q) <= 4 * se), (j, freq)


def test_records_never_leave_the_prb_and_k1_never_moves():
    released = _simulate(reps=500)
    assert released.min() >= 0 and released.max() < K
    one = post_randomize(np.zeros(50, dtype=np.int64), np.ones(50), 1, THETA,
                         np.random.default_rng(0))
    assert np.all(one == 0)


@pytest.mark.parametrize("target_cell", [0, 2])  # a singleton and a doubleton
def test_simulated_intruder_matches_exact_risk(target_cell):
    """The intruder of docs/METHOD.md section 6 against one fixed target record B.

    Per replication: a = S_j (released records in B's cell); the intruder is correct with
    probability 1/a if B kept its cell. Given S_j = a the score X = kept/a has mean R_j(a, t) and
    E[X^2] = R_j(a, t)/a, so Var(X) = R/a - R^2 and the mean over N_a replications with S_j = a
    has SE sqrt(Var/N_a). Replications are independent, so the 4-SE band applies per a.
    """
    reps = 60_000
    released = _simulate(reps=reps, seed=31 + target_cell)
    b = int(np.flatnonzero(OWNERS == target_cell)[0])
    s = (released == target_cell).sum(axis=1)
    kept = released[:, b] == target_cell
    profile = {1: int((T_CELLS == 1).sum()), 2: int((T_CELLS == 2).sum())}
    exact = correct_match_risk(profile, int(T_CELLS[target_cell]), THETA, a_max=4)
    checked = 0
    for a in range(1, 5):
        sel = s == a
        n_a = int(sel.sum())
        if n_a < 2_000:
            continue
        est = (kept[sel] / a).mean()
        r = exact[a - 1]
        se = np.sqrt(max(r / a - r * r, 1e-12) / n_a)
        assert abs(est - r) <= 4 * se, (a, est, r, se)
        checked += 1
    assert checked >= 2
