"""risk.weighted x risk.destinations: near through the CLI (issue 33): `sdc plan` on every
executor prints the expected records changed of the configured design (sum of t_j m_j of the
weighted design, not NZY's theta k), the same figure everywhere (household files with
risk.weighted: tests/cli/test_cli_household_weights.py). Release and audit of weighted x
near on every executor, byte for byte: the contract case ``weighted-near``
(tests/contract/test_executors.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import run_cli

from sdc.config.load import load_config
from sdc.io.read import read_input
from sdc.method.designs import design_of, plan_release
from sdc.method.partition import partition_frame
from sdc.method.weighted import WeightSums

pytestmark = pytest.mark.e2e


def _job(tmp_path: Path, **risk) -> Path:
    rng = np.random.default_rng(3)
    n = 1500
    frame = pd.DataFrame({
        "pid": np.arange(n),
        "sex": rng.integers(0, 2, n),
        "age": np.minimum(rng.gamma(4, 9, n).astype(int), 90),
        "edu": rng.choice(6, n, p=[.05, .15, .3, .3, .15, .05]),
        "w": np.round(rng.choice([40.0, 90.0, 200.0], n) * rng.uniform(0.95, 1.05, n), 2),
    })
    frame.to_csv(tmp_path / "survey.csv", index=False)
    cfg = {"name": "wn", "input": {"path": "survey.csv", "id_column": "pid", "weight": "w"},
           "key_variables": {"sex": {"range": [0, 1]}, "age": {"range": [0, 90]},
                             "edu": {"range": [0, 5]}},
           "partition": {"sex": "as_is", "age": {"bands": [0, 30, 60]}},
           "risk": {"xi": 0.395, "small_blocks": "merge", **risk},
           "seed": 5, "output": {"dir": str(tmp_path / "out"), "formats": ["csv"]}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize("engine", ["pandas", "streaming", "dask"])
def test_plan_prints_the_configured_designs_expected_changes(tmp_path, engine):
    if engine == "dask":
        pytest.importorskip("distributed")
    path = _job(tmp_path, weighted=True, destinations="near")
    cfg = load_config(path)
    frame = read_input(cfg)
    part = partition_frame(frame, cfg)
    nzy = plan_release(part, cfg, design=design_of(cfg, weighted=False))
    w = frame["w"].to_numpy(np.float64)
    plan = plan_release(part, cfg, WeightSums.of(part.cells.record_cell, w).result(
        np.arange(part.cells.n_cells)))
    want = float(plan.weighted.groups["expected_changed"].sum())
    assert abs(want - float(nzy.blocks["expected_changed"].sum())) > 1.0  # the two differ
    r = run_cli("plan", path, "--json", "--engine", engine)
    assert r.exit_code == 0, r.text
    doc = json.loads(r.stdout)
    got = doc.get("expected_changed", doc.get("plan", {}).get("expected_changed"))
    assert got == pytest.approx(want, rel=1e-12)
    assert doc["certificate"] == pytest.approx(plan.certificate, rel=1e-12)
    t = run_cli("plan", path, "--engine", engine)
    assert t.exit_code == 0, t.text
    assert f"{want:,.1f} (sum of t_j m_j, m_j = c_g / W_j of the weighted design)" in t.text
