"""Every design's certificate re-derived from the release folder alone (issue 46, docs/METHOD.md
7.10 "Verifiability"): ``tests/audit/rederive_alone.py``, which imports numpy and the standard
library only (checked here: no ``sdc``), reads ``internal/audit.json`` and recomputes every
PRB's (or weight group's) exact max risk and the certificate from the documented formulas, for
the uniform, near, weighted and weighted-near designs; they match the release to 1e-12."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import sdc
from sdc.series.seeds import SeedInfo
from tests.audit import rederive_alone
from tests.release_helpers import release_files


def _frame(n: int = 1_500, seed: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "pid": np.arange(n) * 3 + 1,
        "age": rng.integers(0, 90, n),
        "sex": rng.choice([1, 2], n),
        "region": rng.choice([1, 2, 3, 4, 5, 6], n, p=[0.4, 0.3, 0.2, 0.06, 0.03, 0.01]),
        "weight": np.round(rng.lognormal(5, 0.4, n), 3),
    })


def _audit(tmp_path: Path, **risk) -> dict:
    frame = _frame()
    frame.to_parquet(tmp_path / "in.parquet", index=False)
    data = {
        "name": "alone",
        "input": {"path": str(tmp_path / "in.parquet"), "id_column": "pid",
                  "weight": "weight"},
        "key_variables": {"age": {"range": [0, 89]}, "sex": {"categories": [1, 2]},
                          "region": {"categories": [1, 2, 3, 4, 5, 6]}},
        "partition": {"sex": "as_is", "age": {"bands": [0, 45]}},
        "risk": {"xi": 0.395, "small_blocks": "merge", **risk},
        "seed": 7,
        "output": {"dir": str(tmp_path / "rel"), "formats": ["parquet"]},
    }
    cfg = sdc.parse_config(data, tmp_path)
    result = sdc.release_frame(frame, cfg, 7, out_dir=tmp_path / "out")
    _, internal = release_files(cfg, result, SeedInfo(value=7, path=None, sha256=None,
                                                      created=False),
                                input_sha256="0" * 64,
                                config_text=yaml.safe_dump(data, sort_keys=False))
    return json.loads(internal["audit.json"])


def test_the_re_derivation_does_not_import_sdc():
    tree = ast.parse(Path(rederive_alone.__file__).read_text())
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
             for a in n.names}
    names |= {n.module.split(".")[0] for n in ast.walk(tree)
              if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= {"__future__", "math", "numpy"}, names


@pytest.mark.parametrize("risk", [
    {},
    {"destinations": "near"},
    {"weighted": True},
    {"weighted": True, "destinations": "near"},
    {"destinations": "near", "theta": "calibrated"},
], ids=["uniform", "near", "weighted", "weighted-near", "near-calibrated"])
def test_every_design_certificate_from_audit_json_alone(tmp_path, risk):
    audit = _audit(tmp_path, **risk)
    designs = audit.get("designs")
    assert (designs is None) == (not risk.get("weighted") and "destinations" not in risk)
    if designs is not None:
        kinds = {g["w"] for p in designs["prbs"] for g in p["groups"]}
        if risk.get("destinations") == "near":
            assert "near" in kinds
        if risk.get("weighted"):
            assert {g["design"] for p in designs["prbs"] for g in p["groups"]} & {"weighted"}
            for p in designs["prbs"]:
                for g in p["groups"]:
                    got = rederive_alone.group_risk(g, p["t"], p["theta"], designs["near"])
                    assert got == pytest.approx(g["max_risk"], abs=1e-12), g
    if designs is not None:     # the re-derivation reads what it is given: a changed record
        changed = 0             # (another tour, another c_g) gives other risks
        for p in designs["prbs"]:
            for g in p["groups"]:
                h = dict(g)
                if g["w"] == "near":
                    h["tour"] = g["tour"][::2] + g["tour"][1::2]
                elif g["design"] == "weighted":
                    h["c"] = g["c"] * 0.8
                else:
                    continue
                got = rederive_alone.group_risk(h, p["t"], p["theta"], designs["near"])
                changed += abs(got - g["max_risk"]) > 1e-9
        assert changed
    cert, rows = rederive_alone.certificate(audit)
    assert rows
    for prb, got, recorded in rows:
        assert got == pytest.approx(recorded, abs=1e-12), prb
    assert cert == pytest.approx(audit["risk"]["certificate"], abs=1e-12)
    assert cert <= audit["risk"]["xi"]


def _profile_list(text: str) -> list[int]:
    """``"1:5, 2:3"`` (a PRB table's profile) -> [1, 1, 1, 1, 1, 2, 2, 2]."""
    out: list[int] = []
    for part in filter(None, (p.strip() for p in str(text).split(","))):
        t, c = part.split(":")
        out += [int(t)] * int(c)
    return out


@pytest.mark.parametrize("risk,weight", [
    ({}, None),
    ({"weighted": True}, "hh_weight"),
    ({"composition": "protect", "destinations": "near"}, None),
], ids=["uniform", "weighted", "protect-near"])
def test_household_stages_from_audit_json_alone(tmp_path, risk, weight):
    """Both stages of a household release (docs/METHOD.md 7.7): the household stage (or the
    composition stage under ``protect``) from ``households.designs`` or its PRB table's
    profiles and theta, the person stage from ``designs`` or ``prb_structure``; every PRB's
    exact max risk matches the release's to 1e-12."""
    from tests.household_helpers import household_job, household_parquet, release_folder

    inp = household_parquet(tmp_path / "hh.parquet", n=2500)
    base = {"households": "warn", "xi": 0.5}
    extra = {"input": {"path": str(inp), "format": "parquet", "drop": ["income"],
                       "id_column": "person_id", "household_id": "hh_id",
                       "household_columns": ["water", "hh_weight"],
                       **({"weight": weight} if weight else {})}}
    if risk.get("composition") == "protect":     # few person classes and household keys: a
        extra["key_variables"] = {                # design whose both certificates hold
            "urbrur": {"categories": [1, 2], "level": "household"},
            "sex": {"categories": [1, 2]},
            "age": {"range": [0, 95], "recode": {"bands": [0, 15, 30, 45, 65]}}}
        extra["input"]["drop"] = ["income", "region", "dwelling", "relation"]
        extra["partition"] = {"sex": "as_is"}
    folder = release_folder(household_job(tmp_path, inp, risk={**base, **risk}, **extra))
    audit = json.loads((folder / "internal" / "audit.json").read_text())
    hh = audit["households"]
    designs = hh.get("designs")
    assert (designs is not None) == bool(risk)
    if risk.get("weighted"):
        assert audit.get("designs") is not None
        assert any(g["design"] == "weighted" for p in designs["prbs"] for g in p["groups"])
    if risk.get("destinations") == "near":
        assert any(g["w"] == "near" for p in designs["prbs"] for g in p["groups"])
    checked = 0
    if designs is not None:
        for p in designs["prbs"]:
            got = max(rederive_alone.group_risk(g, p["t"], p["theta"], designs["near"])
                      for g in p["groups"])
            assert got == pytest.approx(p["max_risk"], abs=1e-12), p["prb"]
            checked += 1
    else:
        for b in hh["blocks"]:
            got = rederive_alone.profile_risk(_profile_list(b["profile"]), b["theta"])
            assert got == pytest.approx(b["max_risk"], abs=1e-12), b["prb"]
            checked += 1
    assert checked
    cert, rows = rederive_alone.certificate(audit)           # the person stage
    for prb, got, recorded in rows:
        assert got == pytest.approx(recorded, abs=1e-12), prb
    if risk.get("composition") != "protect":
        assert max(cert, hh["certificate"]) == pytest.approx(audit["risk"]["certificate"],
                                                             abs=1e-12)
