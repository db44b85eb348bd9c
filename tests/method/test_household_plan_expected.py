"""``sdc plan`` of a household file under ``risk.composition: protect`` (issue 44): its expected
changed records are the composition stage's expected changed persons (it printed 0.0: the
person stage has no PRB under protect), and the releases' changed counts agree with it within
sampling error.

Tolerance: the composition stage draws every household independently (keyed by its identity),
so the changed count is a sum of independent per-household terms whose exact variance
:func:`expected_persons_changed` returns; the mean of R releases (seeds 1..R) lies within
4 SD / sqrt(R) of the expectation (a two-sided normal tail of 6e-5 per case)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

import sdc
from sdc.executors.registry import get_executor
from sdc.method.household_composition import expected_persons_changed
from sdc.release.job import plan_job, resolve_engine
from sdc.samples import generate_household_sample

SEEDS = range(1, 7)


@pytest.fixture(scope="module")
def households(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("hh-plan") / "hh.csv"
    generate_household_sample(2500, seed=4, n_regions=12).to_csv(path, index=False)
    return path


def _config(tmp: Path, src: Path, **risk) -> Path:
    cfg = {"name": "hh",
           "input": {"path": str(src), "household_id": "hh_id", "id_column": "person_id",
                     "weight": "hh_weight", "household_columns": ["water"],
                     "drop": ["income", "relation", "urbrur", "dwelling"]},
           "key_variables": {"region": {"range": [1, 12], "level": "household"},
                             "sex": {"categories": [1, 2]},
                             "age": {"range": [0, 95],
                                     "recode": {"bands": [0, 16, 25, 50, 65]}}},
           "risk": {"xi": 0.5, "composition": "protect", **risk}, "seed": 11,
           "output": {"dir": str(tmp / "release"), "formats": ["parquet"]}}
    path = tmp / "hh.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.mark.parametrize("risk", [{}, {"destinations": "near", "weighted": True},
                                  {"destinations": "near",
                                   "near": {"neighbours": 4, "kernel": "matching"}}],
                         ids=["uniform", "weighted-near", "near-matching"])
def test_plan_expected_changed_is_the_composition_stages(tmp_path, households, risk):
    path = _config(tmp_path, households, **risk)
    summary = plan_job(path)
    assert "composition stage" in summary.expected_how
    config = sdc.load_config(path)
    spec = resolve_engine(config, None)
    ex = get_executor(spec.kind)
    hp = ex.count(config, spec)
    e, var = expected_persons_changed(hp.hs.composition, hp.hs.composition_table)
    assert summary.expected_changed == pytest.approx(e, rel=1e-12)
    assert e > 0.05 * summary.n_records  # not the empty person stage's 0
    changed = [int(ex.release(config, s, tmp_path / f"r{s}" / "public", spec).n_changed)
               for s in SEEDS]
    sd = math.sqrt(var / len(changed))
    assert abs(float(np.mean(changed)) - e) <= 4 * sd, (changed, e, math.sqrt(var))
    assert summary.changed is not None and abs(summary.changed - e) <= 4 * math.sqrt(var)
