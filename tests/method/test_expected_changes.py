"""Expected records changed, seed-free (:mod:`sdc.method.expected_changes`; issue 44: init,
design and release print the same expectation).

- the two-stage formula equals the exact mean and variance by enumeration of every outcome of a
  tiny file's independent household and person moves;
- sdcMicro's testdata released with the plain two stages: the release's ``expected_changed``
  is the formula's, and the mean changed count of R releases (seeds 1..R) lies within
  4 SD / sqrt(R) of it (households draw independently, the SD is the formula's exact one: a
  two-sided normal tail of 6e-5);
- a person file (the generated census sample): the same with :func:`person_changes`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from household_helpers import testdata_config

import sdc
from sdc.executors.registry import get_executor
from sdc.method.expected_changes import person_changes, two_stage_changes
from sdc.method.plan import draw_plan
from sdc.release.job import resolve_engine

SEEDS = range(1, 7)


def test_two_stage_formula_is_the_enumerated_distribution():
    rng = np.random.default_rng(5)
    row = np.array([0, 0, 0, 1, 1, 2])
    mh = rng.uniform(0, 0.6, 3)
    mp = rng.uniform(0, 0.5, row.size)
    mp[2] = 0.0  # a person outside the person stage
    e = e2 = 0.0
    for hh in itertools.product([0, 1], repeat=3):
        for pp in itertools.product([0, 1], repeat=row.size):
            p = np.prod([mh[h] if v else 1 - mh[h] for h, v in enumerate(hh)])
            p *= np.prod([mp[i] if v else 1 - mp[i] for i, v in enumerate(pp)])
            c = sum(1 for i in range(row.size) if hh[row[i]] or pp[i])
            e += p * c
            e2 += p * c * c
    got_e, got_var = two_stage_changes(mh, mp, row)
    assert got_e == pytest.approx(e, rel=1e-12)
    assert got_var == pytest.approx(e2 - e * e, rel=1e-12)


def _releases(config, tmp_path):
    spec = resolve_engine(config, None)
    ex = get_executor(spec.kind)
    return [ex.release(config, s, tmp_path / f"r{s}" / "public", spec) for s in SEEDS]


def test_two_stage_release_changes_its_expectation(tmp_path):
    config = sdc.load_config(testdata_config(tmp_path, households="warn"))
    results = _releases(config, tmp_path)
    st = results[0].households
    e, var = float(st.expected_changed), float(st.expected_changed_var)
    assert all(r.households.expected_changed == e for r in results)  # seed-free
    # both stages move records here: more than the person stage's theta * k
    assert e > float(results[0].blocks["expected_changed"].sum()) + 1.0
    changed = [int(r.n_changed) for r in results]
    assert abs(float(np.mean(changed)) - e) <= 4 * math.sqrt(var / len(changed)), (changed, e)


def test_person_file_changes_its_expectation(tmp_path):
    from sdc.samples import generate_census_sample

    path = tmp_path / "census.csv"
    generate_census_sample(4000, seed=3).to_csv(path, index=False)
    config = sdc.parse_config({
        "name": "c", "input": {"path": str(path), "id_column": "person_id",
                               "drop": ["full_name", "income", "hours_worked", "weight",
                                        "race", "puma"]},
        "key_variables": {"sex": {"categories": [1, 2]}, "age": {"range": [0, 100]},
                          "marital": {"range": [1, 5]}},
        "partition": {"age": {"bands": [0, 20, 40, 60]}},
        "risk": {"xi": 0.5}, "seed": 1})
    results = _releases(config, tmp_path)
    e, var = person_changes(draw_plan(results[0].plan, config))
    assert e == pytest.approx(float(results[0].blocks["expected_changed"].sum()), rel=1e-9)
    changed = [int(r.n_changed) for r in results]
    assert abs(float(np.mean(changed)) - e) <= 4 * math.sqrt(var / len(changed)), (changed, e)
