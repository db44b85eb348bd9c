"""Household files with ``risk.weighted: true`` through the command line (issue 33,
docs/HOUSEHOLDS.md "Survey weights"), on sdcMicro's testdata (4,580 persons in 1,000
households; ``household_weights`` constant within a household): release and ``sdc audit`` pass,
both stages' weighted designs re-derived by the audit; under ``risk.composition: protect`` a
person weight that differs within a household is refused with exit 2, the reason and the fix."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from household_helpers import TESTDATA, testdata_config

from tests.cli.test_cli import assert_clean_error, run

pytestmark = pytest.mark.e2e

#: the file's household weight, the release's input.weight
WEIGHT = "household_weights"




def test_weighted_household_release_is_certified_and_audited(tmp_path):
    r = run("release", testdata_config(tmp_path, weight=WEIGHT, weighted=True,
                                       households="warn"))
    assert r.exit_code == 0, r.text
    audit = json.loads((tmp_path / "out" / "internal" / "audit.json").read_text())
    assert audit["risk"]["certificate"] <= 0.395
    a = run("audit", tmp_path / "out")
    assert a.exit_code == 0, a.text
    assert "household stage: weighted design <= xi" in a.text
    assert "person stage: weighted design <= xi" in a.text


def test_protect_refuses_a_weight_that_differs_within_a_household(tmp_path):
    if not TESTDATA.is_file():
        pytest.skip(f"sdcMicro testdata not found at {TESTDATA}")
    src = pd.read_csv(TESTDATA)
    src["household_weights"] = src["household_weights"] * (1 + 0.1 * (src["sex"] == 2))
    path = tmp_path / "varying.csv"
    src.to_csv(path, index=False)
    cfg = testdata_config(tmp_path, path, weight=WEIGHT, weighted=True,
                          composition="protect")
    d = yaml.safe_load(cfg.read_text())
    d["key_variables"]["age"]["recode"] = {"bands": [0, 19]}
    d.pop("partition")
    cfg.write_text(yaml.safe_dump(d, sort_keys=False))
    r = run("release", cfg)
    assert_clean_error(r, 2, "'household_weights' differs within",
                       "risk.composition: protect with risk.weighted",
                       "use a household-level weight column as input.weight")
    assert not (tmp_path / "out").exists()
