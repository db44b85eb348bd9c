"""The risk report's Monte Carlo intruder replays the plan's own transition design
(sdc/reports/intruder.py, sdc/reports/intruder_exact.py; docs/REPORTS.md, "intruder").

Exact: the (m, W) formula of :func:`design_exact` on NZY's uniform W, materialised, equals NZY's
profile formula (:func:`exact_own`, :func:`exact_other`) to rounding. Monte Carlo: under the
near, weighted and weighted x near designs of a generated survey, the replay's estimates agree
with the exact pooled values within 4.5 of their standard errors (the ratio estimator's SE over
400 replays, fixed stream ``intruder:<i>`` of seed 9, every class of at least 2,000
target-replays; 4.5 SE over a few dozen classes is a false alarm with probability below 0.05%,
Bonferroni), and the expected
number of correct matches likewise; NZY's uniform replay (no transitions) is unchanged.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from sdc.method.transition import Transition, uniform_transition
from sdc.reports.intruder import plan_design, simulate_intruder
from sdc.reports.intruder_exact import design_exact, exact_other, exact_own
from tests.contract.test_designs import _config, _planned, _survey


def _profile(t: np.ndarray) -> str:
    return ", ".join(f"{k}:{v}" for k, v in sorted(Counter(t.tolist()).items()))


@pytest.mark.parametrize("seed", range(4))
def test_design_formula_is_nzys_profile_formula_on_the_uniform_w(seed):
    rng = np.random.default_rng(40 + seed)
    ts = [rng.integers(1, 4, size=int(rng.integers(2, 8))) for _ in range(3)]
    thetas = rng.uniform(0.2, 0.9, size=3)
    blocks = pd.DataFrame({"k": [t.size for t in ts], "theta": thetas,
                           "profile": [_profile(t) for t in ts]})
    t_max, a_max = 3, 4
    own, correct = exact_own(blocks, t_max, a_max)
    other, pairs = exact_other(blocks, t_max, a_max)
    uniform = [uniform_transition(t, th) for t, th in zip(ts, thetas, strict=True)]
    explicit = [Transition(tr.frequency, tr.move, *tr.csr(), kind="near") for tr in uniform]
    g_own, g_correct, g_other, g_pairs = design_exact(explicit, t_max, a_max)
    assert g_correct == pytest.approx(correct, rel=1e-12)
    assert g_pairs == pairs
    for mine, nzy in ((g_own, own), (g_other, other)):
        assert mine[0] == pytest.approx(nzy.num, abs=1e-12)
        assert mine[1] == pytest.approx(nzy.den, abs=1e-12)
        fin = np.isfinite(nzy.r_min)
        assert np.array_equal(np.isfinite(mine[2]), fin)
        assert mine[2][fin] == pytest.approx(nzy.r_min[fin], abs=1e-12)
        assert mine[3][fin] == pytest.approx(nzy.r_max[fin], abs=1e-12)


@pytest.mark.parametrize("name", ["near", "weighted", "weighted x near"])
def test_the_replay_of_the_plans_design_agrees_with_its_exact_values(name):
    part, _, plan = _planned(name, _survey(), _config())
    design = plan_design(plan, plan.cell_prb)
    assert design["design"] == name and len(design["transitions"]) == len(plan.blocks)
    out = simulate_intruder(part.cells.frequency, plan.cell_prb, plan.blocks, seed=9,
                            n_sim=400, xi=0.6, **design)
    assert out["design"] == name
    checked = 0
    for c in out["classes"]:
        if c["estimate"] is None or c["exact_pooled"] is None or c["n_obs"] < 2000:
            continue
        checked += 1
        se = max(c["se"], 1e-9)
        assert abs(c["estimate"] - c["exact_pooled"]) < 4.5 * se, c
    assert checked >= 5
    ov = out["overall"]
    assert abs(ov["expected_correct_estimate"] - ov["expected_correct_exact"]) < 4.5 * ov["se"]
    # the uniform NZY replay of the same PRBs is another mechanism: its exact figure differs
    nzy = simulate_intruder(part.cells.frequency, plan.cell_prb, plan.blocks, seed=9,
                            n_sim=2, xi=0.6)
    assert "design" not in nzy
    assert nzy["overall"]["expected_correct_exact"] != pytest.approx(
        ov["expected_correct_exact"], rel=1e-6)


def test_a_uniform_plan_replays_as_before():
    """NZY's uniform plan has no transitions: the intruder is started exactly as before (no
    design key; risk.json of a uniform release keeps its bytes: tests/contract/golden.json)."""
    _, _, plan = _planned("uniform", _survey(), _config())
    assert plan_design(plan, plan.cell_prb) == {"transitions": None, "design": None}
