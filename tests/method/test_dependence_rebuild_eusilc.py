"""The eusilc example of issue 44 (docs/METHOD.md, "Columns rebuilt from released ones"):
eqSS = (the household incomes + the members' summed person incomes) / eqIncome. With eqSS
dropped and the member bands 16, 25, 65 (where eqSS tells compositions apart) the release is
refused naming eqSS, eqIncome and the relation; dropping eqIncome too passes; unbanded, the
rebuilt eqSS is measured, passes and the release goes on."""

from __future__ import annotations

import pytest
from eusilc_helpers import eusilc_draft, export_eusilc

import sdc
from sdc.executors.memory import InMemory
from sdc.io.read import read_input
from sdc.io.recode import recode_frame
from sdc.method.dependence import DependenceError
from sdc.pipeline.households import plan_households


@pytest.fixture(scope="module")
def eusilc(tmp_path_factory):
    return export_eusilc(tmp_path_factory)


def _plan(path, drop: list[str], bands: bool):
    """init's eusilc draft (protect, near matching, exposed sizes left out, the weight
    recalibrated, age in the standard bands), ``drop`` dropped too."""
    cfg = sdc.parse_config(eusilc_draft(
        path, drop=drop, member_bands={"age": [16, 25, 65]} if bands else None))
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
