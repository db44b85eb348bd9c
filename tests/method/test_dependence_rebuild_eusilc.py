"""The eusilc example of issue 44 (docs/METHOD.md, "Columns rebuilt from released ones"):
eqSS = (the household incomes + the members' summed person incomes) / eqIncome. With eqSS
dropped and the member bands 16, 25, 65 (where eqSS tells compositions apart) the release is
refused naming eqSS, eqIncome and the relation; dropping eqIncome too passes; unbanded, the
rebuilt eqSS is measured, passes and the release goes on."""

from __future__ import annotations

import pytest
from eusilc_helpers import export_eusilc

import sdc
from sdc.executors.memory import InMemory
from sdc.io.read import read_input
from sdc.io.recode import recode_frame
from sdc.method.dependence import DependenceError
from sdc.pipeline.households import plan_households

HOUSEHOLD_COLUMNS = ["hy040n", "hy050n", "hy070n", "hy080n", "hy090n", "hy110n", "hy130n",
                     "hy145n", "eqIncome", "hsize"]
REGIONS = ["Burgenland", "Carinthia", "Lower Austria", "Salzburg", "Styria", "Tyrol",
           "Upper Austria", "Vienna", "Vorarlberg"]


@pytest.fixture(scope="module")
def eusilc(tmp_path_factory):
    return export_eusilc(tmp_path_factory)


def _plan(path, drop: list[str], bands: bool):
    """init's eusilc draft (protect, near matching, exposed sizes left out, the weight
    recalibrated, age in the standard bands), ``drop`` dropped too."""
    risk = {"xi": 0.395, "theta": "calibrated", "small_blocks": "calibrate",
            "composition": "protect", "destinations": "near",
            "near": {"neighbours": 4, "kernel": "matching"}, "exposed_sizes": "drop"}
    if bands:
        risk["member_bands"] = {"age": [16, 25, 65]}
    cfg = sdc.parse_config({
        "name": "eu", "seed": 1, "risk": risk, "partition": {"rb090": "as_is"},
        "input": {"path": str(path), "id_column": "rb030", "drop": ["db090", "pl030", *drop],
                  "weight": "rb050", "na_values": ["NA"], "household_id": "db030",
                  "household_columns": [c for c in HOUSEHOLD_COLUMNS if c not in drop],
                  "weight_release": "recalibrated"},
        "key_variables": {
            "db040": {"level": "household", "categories": REGIONS},
            "age": {"range": [-1, 97], "recode": {"bands": [-1, 16, 25, 50, 65]}},
            "rb090": {"categories": ["female", "male"]},
            "pb220a": {"categories": ["AT", "EU", "NA", "Other"],
                       "recode": {"groups": {"EU+Other": ["EU", "Other"]}}}}})
    frame = recode_frame(read_input(cfg.declared_view()), cfg)
    try:
        p = plan_households(cfg, runner=InMemory(cfg, frame))
    except DependenceError as e:
        return {f.column: f for f in e.figures}, str(e)
    return {f.column: f for f in p.hs.plan.dependence}, None


def test_eqss_dropped_is_rebuilt_and_refused_under_member_bands(eusilc):
    figs, msg = _plan(eusilc, ["eqSS"], bands=True)
    assert msg is not None, "eqSS = household income / eqIncome: the hole of issue 44"
    f = figs["eqSS"]
    assert f.via == "rebuilt" and f.flagged and f.of == ("eqSS", "eqIncome")
    assert f.relation.startswith("eqSS = (hy040n + hy050n + hy070n + hy080n + hy090n + hy110n "
                                 "- hy130n - hy145n + sum(py010n)")
    assert ") / eqIncome (for 100.0% of the households" in f.relation
    assert f.figure > 0.395 and "input.drop: [eqIncome]" in msg


def test_without_the_relation_or_without_bands_it_passes(eusilc):
    figs, msg = _plan(eusilc, ["eqSS", "eqIncome"], bands=True)
    assert msg is None and "eqSS" not in figs
    figs, msg = _plan(eusilc, ["eqSS"], bands=False)
    assert msg is None
    assert figs["eqSS"].via == "rebuilt" and figs["eqSS"].figure <= 0.395
