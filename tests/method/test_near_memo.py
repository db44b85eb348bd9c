"""The near certificate and calibration are remembered by the design's content
(sdc.method.destinations ``_memo_design_risk``, ``NearCertifier.calibrate``): a design search
plans many candidates whose blocks are the same cells, and each calibration asks the same
thetas again. A plan made again (a new certifier, as the next candidate gets) is the same plan
without one exact certificate computed; a design that differs in one entry is not served
another's figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sdc.method.destinations as destinations
from sdc.config.load import load_config
from sdc.method.content_memo import ContentMemo, design_key
from sdc.method.designs import plan_release
from sdc.method.partition import partition_frame
from sdc.method.transition_risk import design_risk

ROOT = Path(__file__).resolve().parents[2]


def _near_demo():
    cfg = load_config(ROOT / "configs" / "census_demo.yaml")
    risk = cfg.risk.model_copy(update={"destinations": "near", "theta": "calibrated"})
    cfg = cfg.model_copy(update={"risk": risk})
    # the first 4,000 records: a few dozen near PRBs, calibrated (the whole sample: ~10 CPU s)
    frame = pd.read_csv(cfg.resolve(cfg.input.path), sep=cfg.input.delimiter, nrows=4000)
    return partition_frame(frame, cfg), cfg


def test_a_plan_made_again_is_the_same_plan_from_the_memo(monkeypatch):
    part, cfg = _near_demo()
    monkeypatch.setattr(destinations, "_RISKS", ContentMemo())
    monkeypatch.setattr(destinations, "_THETAS", ContentMemo())
    calls = []

    def counted(tr):
        calls.append(1)
        return design_risk(tr)

    monkeypatch.setattr(destinations, "design_risk", counted)
    first = plan_release(part, cfg)
    computed = len(calls)
    assert computed > 0 and len(destinations._THETAS) > 0
    again = plan_release(part, cfg)
    assert len(calls) == computed  # every certificate and theta came from the memo
    blocks, blocks_again = first.block_plan.blocks, again.block_plan.blocks
    assert [b.theta for b in blocks_again] == [b.theta for b in blocks]
    assert [b.members for b in blocks_again] == [b.members for b in blocks]
    # the remembered figures are those computed afresh
    cert = destinations.NearCertifier(part, cfg)
    for b in blocks[:5]:
        tr = cert.transition(b, b.theta)
        assert destinations._memo_design_risk(tr) == design_risk(tr)


def test_a_design_differing_in_one_entry_has_its_own_figures():
    part, cfg = _near_demo()
    cert = destinations.NearCertifier(part, cfg)
    blocks = plan_release(part, cfg).block_plan.blocks
    b = next(b for b in blocks if not cert.transition(b, 1.0).uniform)
    tr = cert.transition(b, 0.5)
    other = tr.__class__(**{**tr.__dict__, "move": np.minimum(tr.move * 1.5, 1.0)})
    assert design_key(tr) != design_key(other)
    assert destinations._memo_design_risk(other) == design_risk(other)
    assert destinations._memo_design_risk(tr) == design_risk(tr)
    with pytest.raises(AssertionError):
        assert design_risk(other) == design_risk(tr)
