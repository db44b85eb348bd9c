"""Per-PRB weights of the composition stage (``risk.near.fallback_weights``, issue 44;
docs/METHOD.md 7.12 "Per-PRB weights"): a PRB whose partition set has a rung takes that rung's
weights, every other PRB ``near.weights``; each PRB's exact certificate equals the enumeration
of every joint outcome of its households under its own W, and the plan's certificate is their
maximum; the rungs come from the dependence check's failing PRBs."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from enumerated_risk import enumerated_risk
from pydantic import ValidationError

from sdc.config.load import parse_config
from sdc.method.household_composition import composition_plan, table_of_counts
from sdc.method.household_rungs import flagged_sets

WEIGHTS = [0.5, 0.3, 0.2]
FALLBACK = [0.34, 0.33, 0.33]

_JOB = """
name: m
input: {path: x.csv, household_id: hh_id, id_column: person_id}
key_variables:
  region: {categories: [1, 2], level: household}
  sex: {categories: [1, 2]}
risk: {xi: 0.6, composition: protect, destinations: near, small_blocks: calibrate,
       theta: calibrated, near: NEAR}
seed: 1
output: {dir: out}
"""


def _config(near: dict):
    data = yaml.safe_load(_JOB.replace("NEAR", "{}"))
    data["risk"]["near"] = near
    return parse_config(data, None, source="test")


def _tiny():
    """Eight households, one per (region, composition) cell: four of size 3 and four of
    size 4 (two classes, sex), so two partition sets (the sizes) of 4 rare cells each."""
    counts = np.array([[3, 0], [2, 1], [1, 2], [0, 3], [4, 0], [3, 1], [2, 2], [1, 3]])
    hk = np.array([[0], [0], [1], [1], [0], [1], [0], [1]])
    return hk, table_of_counts(counts)


@pytest.mark.parametrize("rung_of", [None, 0, 1])
def test_each_prb_takes_its_rung_and_certifies_as_enumerated(rung_of):
    """No rung: both PRBs take ``weights``; a rung on one size's partition set: that PRB
    takes ``fallback_weights[0]``, the other keeps ``weights``. Every PRB's recorded max risk
    equals the enumeration under its own W (1e-12), and the certificate is their maximum."""
    cfg = _config({"kernel": "matching", "weights": WEIGHTS, "fallback_weights": [FALLBACK]})
    hk, tab = _tiny()
    keys = composition_plan(hk, tab, cfg).plan.partitioned.partition_keys
    rungs = {} if rung_of is None else {keys[rung_of]: 1}
    cp = composition_plan(hk, tab, cfg, None, rungs)
    plan = cp.plan
    assert dict(plan.design.rungs) == rungs
    risks = []
    for b, (blk, tr) in enumerate(zip(plan.block_plan.blocks, plan.transitions, strict=True)):
        want = FALLBACK if any(keys[m] in rungs for m in blk.members) else WEIGHTS
        rows = tr.csr()[2].reshape(tr.k, -1)
        assert all(sorted(r) == sorted(want) for r in rows.tolist()), (b, rows)
        assert tr.matrix().sum(axis=0) == pytest.approx(np.ones(tr.k), abs=1e-12)  # doubly
        got = float(plan.blocks["max_risk"].iat[b])
        assert got == pytest.approx(enumerated_risk(tr), abs=1e-12), b
        risks.append(got)
    assert cp.certificate == pytest.approx(max(risks), abs=1e-15)
    assert cp.certificate <= 0.6


def test_a_rung_beyond_the_ladder_takes_its_last_vector():
    cfg = _config({"kernel": "matching", "weights": WEIGHTS, "fallback_weights": [FALLBACK]})
    hk, tab = _tiny()
    keys = composition_plan(hk, tab, cfg).plan.partitioned.partition_keys
    plan = composition_plan(hk, tab, cfg, None, {keys[0]: 5}).plan
    assert sorted(plan.transitions[0].csr()[2][:3]) == sorted(FALLBACK)


@pytest.mark.parametrize("near,words", [
    ({"kernel": "matching", "fallback_weights": [FALLBACK]}, "needs near.weights"),
    ({"kernel": "matching", "weights": WEIGHTS, "fallback_weights": [[1.0]]},
     "2 or more positive numbers"),
    ({"kernel": "matching", "weights": WEIGHTS, "fallback_weights": [[0.5, 0.6, -0.1]]},
     "2 or more positive numbers"),
    ({"kernel": "matching", "weights": WEIGHTS, "fallback_weights": [[0.5, 0.4]]},
     "2 or more positive numbers"),
])
def test_the_config_refuses_a_ladder_that_is_not_one(near, words):
    with pytest.raises((ValidationError, ValueError), match=words):
        _config(near)


def test_the_ladder_is_for_household_files_and_not_the_weighted_mode():
    data = yaml.safe_load(_JOB.replace("NEAR", "{}"))
    data["risk"]["near"] = {"kernel": "matching", "weights": WEIGHTS,
                            "fallback_weights": [FALLBACK]}
    data["risk"]["weighted"] = True
    data["input"]["weight"] = "w"
    with pytest.raises((ValidationError, ValueError), match="risk.weighted"):
        parse_config(data, None, source="test")
    person = {"name": "p", "input": {"path": "x.csv", "id_column": "id"},
              "key_variables": {"sex": {"categories": [1, 2]}},
              "risk": {"xi": 0.6, "destinations": "near",
                       "near": {"kernel": "matching", "weights": WEIGHTS,
                                "fallback_weights": [FALLBACK]}},
              "seed": 1, "output": {"dir": "out"}}
    with pytest.raises((ValidationError, ValueError), match="composition stage"):
        parse_config(person, None, source="test")


def test_flagged_sets_are_the_partition_sets_of_every_failing_prb():
    """Every failing PRB of a flagged figure (not only its worst one), all of a merged PRB's
    partition sets, nothing of a figure that passes."""
    blocks = [SimpleNamespace(members=[0]), SimpleNamespace(members=[1, 2]),
              SimpleNamespace(members=[3])]
    plan = SimpleNamespace(partitioned=SimpleNamespace(partition_keys=["a", "b", "c", "d"]),
                           block_plan=SimpleNamespace(blocks=blocks))
    f = [SimpleNamespace(flagged=True, failing_prbs=(1, 2), prb=2),
         SimpleNamespace(flagged=False, failing_prbs=(), prb=0)]
    assert flagged_sets(f, plan) == {"b", "c", "d"}
    assert flagged_sets([SimpleNamespace(flagged=True, failing_prbs=(), prb=0)], plan) == {"a"}
    assert flagged_sets(f, None) == set()
