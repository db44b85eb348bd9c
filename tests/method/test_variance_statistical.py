"""The added variance of released counts (sdc.method.variance, docs/DATA_USERS.md section 3).

Exact checks against the dense transition matrix, then a Monte Carlo test through the real
engine that the formula matches the simulated variance: R = 3,000 replicates of one profile,
released by ``sdc.release_frame`` as 3 seeds x 1,000 copies of the profile in one file (a key
``rep`` in the partition makes each copy its own partition sets, hence its own PRBs; the
copies' records have distinct identities, so their draws are independent: a record's draw
depends only on the seed and its identity). One release per seed instead of one per replicate
(3,000 releases of 61 records took 100 CPU s).

Tolerance: the sample variance s^2 of R independent replicates has
Var(s^2) = mu_4 / R - sigma^4 (R - 3) / (R (R - 1)) (exact for any distribution), with the
fourth central moment mu_4 of N_A computed exactly from its cumulants
(``set_count_moments``: N_A is a sum of independent Bernoullis given t). We accept
|s^2 - Var| <= 4 SE; the sample mean is checked against t_A (unbiasedness) with SE sqrt(Var/R).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.method.pram import nzy_matrix
from sdc.method.variance import (
    cell_count_variance,
    publishable_count,
    sensitive_cells_by_category,
    set_count_moments,
    set_count_variance,
    theta_bound,
    variance_bound,
)

THETA = sdc.solve_theta(0.395)


def _direct_variance(t: np.ndarray, theta: float, in_set: np.ndarray) -> float:
    """sum over records of pi (1 - pi), pi from the dense matrix (column l = law given c_l)."""
    p = nzy_matrix(t, theta)
    pi = p[in_set].sum(axis=0)
    return float((t * pi * (1 - pi)).sum())


@pytest.mark.parametrize("t", [[1, 1, 1, 1, 1], [1, 2, 1, 2, 1, 1, 2], [2] * 9 + [1] * 40])
def test_cell_variance_matches_the_transition_matrix(t):
    t = np.array(t)
    got = cell_count_variance(t, THETA)
    for j in range(t.size):
        mask = np.arange(t.size) == j
        assert got[j] == pytest.approx(_direct_variance(t, THETA, mask), rel=1e-12)
        assert got[j] == pytest.approx(set_count_variance(t, THETA, mask), rel=1e-12)
        assert got[j] < 2 * THETA


def test_set_variance_closed_form_and_bound():
    rng = np.random.default_rng(5)
    t = rng.integers(1, 3, size=60)
    for m in (0, 1, 7, 30, 59, 60):
        mask = np.zeros(60, dtype=bool)
        mask[rng.choice(60, m, replace=False)] = True
        k = 60
        closed = (2 * THETA * m * (k - m) / (k - 1)
                  - THETA**2 / (k - 1) ** 2 * ((k - m) ** 2 * (1 / t[mask]).sum()
                                               + m**2 * (1 / t[~mask]).sum()))
        v = set_count_variance(t, THETA, mask)
        assert v == pytest.approx(closed, abs=1e-9)
        assert v == pytest.approx(_direct_variance(t, THETA, mask), abs=1e-9)
        assert v <= variance_bound(m, THETA, k - m) + 1e-12


def test_one_cell_prb_adds_nothing():
    assert cell_count_variance([1], THETA).tolist() == [0.0]
    assert set_count_moments([3], THETA, [True]) == (0.0, 0.0)


def test_theta_bound_and_rounding():
    assert theta_bound(0.395, [0.79, THETA]) == 0.80     # 0.79905 rounded up
    assert theta_bound(0.395, []) == 0.80
    assert theta_bound(0.5, []) == math.ceil(sdc.solve_theta(0.5) * 100) / 100
    assert theta_bound(0.395, [0.95]) == 1.0
    assert [publishable_count(c) for c in (0, 1, 10, 11, 99, 100, 137, 1234)] == \
        [0, 10, 10, 11, 99, 100, 140, 1300]
    counts = sensitive_cells_by_category(np.array([[0, 1], [1, 1], [0, 0]]),
                                         np.array([True, True, False]), [2, 3])
    assert [c.tolist() for c in counts] == [[1, 1], [0, 2, 0]]


# -- Monte Carlo through the engine ---------------------------------------------------------
# two partition sets (a = 1, a = 2) of cells over b in 1..30:
#   a = 1: b 1..12 singletons, 13..18 doubletons, 19..20 with t = 4 (non-sensitive): k = 18
#   a = 2: b 1..8 singletons, 9..11 doubletons, 12 with t = 6: k = 11
PROFILE = {1: {**{b: 1 for b in range(1, 13)}, **{b: 2 for b in range(13, 19)}, 19: 4, 20: 4},
           2: {**{b: 1 for b in range(1, 9)}, **{b: 2 for b in range(9, 12)}, 12: 6}}
SET_A = set(range(1, 7)) | {13, 14, 15, 9}     # a set of b values: a margin over both sets


def _frame(copies: int = 1) -> pd.DataFrame:
    rows = [(a, b) for a, cells in PROFILE.items() for b, t in cells.items() for _ in range(t)]
    one = pd.DataFrame(rows, columns=["a", "b"])
    f = pd.DataFrame({"rep": np.repeat(np.arange(copies), len(one)),
                      "a": np.tile(one["a"].to_numpy(), copies),
                      "b": np.tile(one["b"].to_numpy(), copies)})
    f["rid"] = np.arange(len(f))
    return f


def _config(copies: int = 1) -> sdc.ReleaseConfig:
    return sdc.parse_config({
        "name": "variance-mc",
        "input": {"path": "unused.csv", "id_column": "rid"},
        "key_variables": {"rep": {"range": [0, copies - 1]}, "a": {"categories": [1, 2]},
                          "b": {"range": [1, 30]}},
        "partition": {"rep": "as_is", "a": "as_is"},
        "risk": {"xi": 0.395},
        "seed": 1,
    })


def _exact(stat: str) -> tuple[float, float, float]:
    """(mean, variance, mu_4) of a released count under the design, from the formula."""
    k2 = k4 = 0.0
    mean = 0.0
    for a, cells in PROFILE.items():
        sens = {b: t for b, t in cells.items() if t < 1 / 0.395}
        t = np.array(list(sens.values()))
        bs = list(sens)
        if stat == "singleton":
            mask = np.array([a == 1 and b == 1 for b in bs])
            mean += 1 if a == 1 else 0
        elif stat == "doubleton":
            mask = np.array([a == 1 and b == 13 for b in bs])
            mean += 2 if a == 1 else 0
        else:
            mask = np.array([b in SET_A for b in bs])
            mean += sum(tt for b, tt in cells.items() if b in SET_A)
        v, mu4 = set_count_moments(t, THETA, mask)
        k2 += v
        k4 += mu4 - 3 * v**2  # cumulants add over independent PRBs
    return mean, k2, k4 + 3 * k2**2


@pytest.mark.statistical
@pytest.mark.slow
def test_variance_formula_matches_the_engine_monte_carlo():
    copies, seeds = 1000, 3
    reps = copies * seeds
    frame, cfg = _frame(copies), _config(copies)
    stats: dict[str, list[np.ndarray]] = {"singleton": [], "doubleton": [], "set": [],
                                          "nonsensitive": []}
    for seed in range(seeds):
        out = sdc.release_frame(frame, cfg, seed=10_000 + seed).frame
        assert (out["rep"].to_numpy() == frame["rep"].to_numpy()).all()  # partition kept
        rep, a, b = out["rep"].to_numpy(), out["a"].to_numpy(), out["b"].to_numpy()
        for name, hit in (("singleton", (a == 1) & (b == 1)), ("doubleton", (a == 1) & (b == 13)),
                          ("set", np.isin(b, list(SET_A))), ("nonsensitive", (a == 1) & (b == 19))):
            stats[name].append(np.bincount(rep[hit], minlength=copies))  # the count per copy
    counts = {k: np.concatenate(v) for k, v in stats.items()}
    assert set(counts["nonsensitive"].tolist()) == {4}  # non-sensitive cells: no variance
    for name in ("singleton", "doubleton", "set"):
        x = counts[name].astype(float)
        mean, var, mu4 = _exact(name)
        s2 = x.var(ddof=1)
        se_var = np.sqrt(mu4 / reps - var**2 * (reps - 3) / (reps * (reps - 1)))
        assert abs(x.mean() - mean) <= 4 * np.sqrt(var / reps), (name, x.mean(), mean)
        assert abs(s2 - var) <= 4 * se_var, (name, s2, var, se_var)
    # the publishable bound holds for the set: c_A and c_notA counted from the profile
    c_a = sum(1 for cells in PROFILE.values() for b, t in cells.items() if t < 3 and b in SET_A)
    c_not = sum(1 for cells in PROFILE.values() for b, t in cells.items()
                if t < 3 and b not in SET_A)
    assert _exact("set")[1] <= variance_bound(c_a, THETA, c_not)
