"""The certificate, one rule computed in one place (:func:`sdc.method.plan.certificate`):
max over PRBs of their exact max risk and over non-sensitive cells of 1/t_j. The release's
plan, the design search's :func:`~sdc.method.design.evaluate.certify` and the household
maximum (:func:`~sdc.method.households.larger_certificate`) all give it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

import sdc
from sdc.method.design.evaluate import certify
from sdc.method.designs import plan_release
from sdc.method.households import larger_certificate
from sdc.method.partition import partition_frame
from sdc.method.plan import certificate
from sdc.method.risk import max_risk

REPO = Path(__file__).resolve().parents[2]


def test_certificate_against_its_definition():
    """Exact cases: the largest PRB risk (the first PRB on a tie), else 1/t of the smallest
    non-sensitive cell when that is larger, 0 with no cell."""
    t = np.array([1, 2, 5, 3, 9])
    sens = np.array([True, True, False, False, False])
    assert certificate([0.2, 0.3, 0.3], t, sens) == (pytest.approx(1 / 3), None, 3)
    assert certificate([0.2, 0.4, 0.4], t, sens) == (0.4, 1, None)
    assert certificate([], t, np.ones(5, bool)) == (0.0, None, None)
    assert certificate([], np.array([4]), np.array([False])) == (0.25, None, 4)


@pytest.mark.parametrize(("xi", "policy"), [(0.395, "merge"), (0.35, "merge"),
                                            (0.5, "calibrate")])
def test_plan_and_design_search_give_the_same_certificate(xi, policy):
    """On the census sample: :func:`plan_release`'s certificate, :func:`certify`'s and a
    brute-force max over the plan's PRB profiles (:func:`max_risk` of each) and the
    non-sensitive cells are one number."""
    data = yaml.safe_load((REPO / "configs" / "census_demo.yaml").read_text())
    data["input"]["path"] = str(REPO / "data_samples" / "census_sample.csv")
    data["risk"] = {**data.get("risk", {}), "xi": xi, "small_blocks": policy}
    cfg = sdc.parse_config(data, REPO)
    frame = sdc.read_input(cfg).head(6000)
    part = partition_frame(frame, cfg)
    plan = plan_release(part, cfg)
    brute = max([max_risk(b.profile_dict(), b.theta).max_risk for b in plan.block_plan.blocks]
                or [0.0])
    t_ns = part.cells.frequency[~part.sensitive]
    if t_ns.size:
        brute = max(brute, 1.0 / t_ns.min())
    assert plan.certificate == pytest.approx(brute, rel=1e-12)
    assert certify(part, cfg)[1] == plan.certificate


def test_household_maximum_is_the_larger_stage_a_tie_the_first():
    assert larger_certificate((0.3, "person"), (0.4, "household")) == (0.4, "household")
    assert larger_certificate((0.4, "person"), (0.4, "household")) == (0.4, "person")
    assert larger_certificate((0.5, "plan"), (0.2, "singular")) == (0.5, "plan")
