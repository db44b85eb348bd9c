"""Small-block policies against the mechanism-aware certificate: a PRB of two
singletons is never released (theta = 1 swaps them with certainty), it is merged; a block the
theorem's theta does not certify is merged, calibrated or refused like a small one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import sdc
from sdc.method.blocks import plan_blocks
from sdc.method.risk import max_risk

XI = 0.395
THETA = sdc.solve_theta(XI)
KMIN = sdc.kmin(THETA)

# two partition sets on one line: PS 0 = two singleton cells, PS 1 = 3 singletons + 1 doubleton
CODES = np.array([[0], [1]])
PROFILES = np.array([[0, 2, 0], [0, 3, 1]])


def _plan(policy: str, theta_mode: str = "theorem", profiles=PROFILES, kmin: int = KMIN):
    return plan_blocks(CODES, profiles, xi=XI, theta=THETA, kmin=kmin, theta_mode=theta_mode,
                       policy=policy, merge_along=[0], describe=lambda b: f"PS {b.members}")


def test_two_singletons_at_theta_one_is_certain_identification():
    r = max_risk({1: 2}, 1.0)
    assert r.max_risk == 1.0 and r.z == "other" and r.own_max == 0.0
    assert sdc.calibrate_theta({1: 2}, XI) is None


@pytest.mark.parametrize("theta_mode", ["theorem", "calibrated"])
def test_calibrate_merges_the_two_singletons(theta_mode):
    plan = _plan("calibrate", theta_mode)
    assert len(plan.blocks) == 1
    b = plan.blocks[0]
    # the merged block (k = 6 >= kmin) takes the theorem's theta in theorem mode
    kind = "theorem" if theta_mode == "theorem" else "calibrated"
    assert b.members == [0, 1] and b.merged and b.action == f"merged+{kind}"
    assert b.profile_dict() == {1: 5, 2: 1}
    assert 0 < b.theta <= THETA
    assert b.risk.max_risk <= XI
    assert b.risk == max_risk({1: 5, 2: 1}, b.theta)
    assert plan.merges and "PS [0]" in plan.merges[0]


def test_every_block_certified_for_both_picks():
    for policy in ("merge", "calibrate"):
        for mode in ("theorem", "calibrated"):
            for b in _plan(policy, mode).blocks:
                assert b.risk.own_max <= XI and b.risk.other_max <= XI


def test_theorem_block_not_certified_is_merged_or_refused():
    """With kmin forced down to 2, PS 0 ({1: 2}) is 'large enough' for the theorem, but at the
    theorem's theta an intruder who picks the other cell finds the target with 0.94."""
    assert max_risk({1: 2}, THETA).max_risk > XI
    plan = _plan("merge", kmin=2)
    assert [b.members for b in plan.blocks] == [[0, 1]]
    assert plan.blocks[0].risk.max_risk <= XI
    with pytest.raises(sdc.SmallBlockError, match=r"mechanism-aware max risk at theta = 0\.7990 "
                                                  r"is 0\.94\d+ \(other cell"):
        _plan("fail", kmin=2)
    plan = _plan("calibrate", kmin=2)
    assert plan.blocks[0].members == [0, 1] and plan.blocks[0].risk.max_risk <= XI


def test_release_frame_merges_two_singletons():
    """Through release_frame: group 'a' has two singleton cells, group 'b' a larger PRB."""
    x = [1, 2] + [10, 11, 12, 13, 13] + [20] * 5
    g = ["a", "a"] + ["b"] * 5 + ["b"] * 5
    frame = pd.DataFrame({"id": range(len(x)), "g": g, "x": x})
    cfg = sdc.parse_config({
        "name": "two-singletons",
        "input": {"path": "unused.csv", "id_column": "id"},
        "key_variables": {"g": {"categories": ["a", "b"]}, "x": {"range": [0, 30]}},
        "partition": {"g": "as_is"},
        "risk": {"xi": XI, "theta": "theorem", "small_blocks": "calibrate"},
        "seed": 1,
        "output": {"dir": "unused"},
    })
    res = sdc.release_frame(frame, cfg, seed=3)
    assert len(res.blocks) == 1
    row = res.blocks.iloc[0]
    assert row["partition_key"] == "g=a + g=b" and row["action"] == "merged+theorem"
    assert row["theta"] < 1 and row["max_risk"] <= XI
    assert row["max_risk_pick"] in ("own", "other")
    assert res.certificate <= XI
